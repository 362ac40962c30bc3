"""The multi-hop runner (contrib/bench/musique.py) end to end on tiny sets in MuSiQue's and HotpotQA's layouts, with
the real model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "contrib" / "bench"
sys.path.insert(0, str(BENCH))

import musique  # noqa: E402

PASSAGES = [
    ("Hello Love", "Hello Love is a song performed by Hank Snow, released in 1974."),
    ("Hank Snow", "Hank Snow was a Canadian country singer. He died in Madison, Tennessee."),
    ("Madison, Tennessee", "Madison is a neighbourhood of Nashville, Tennessee."),
    ("Blue Note", "Blue Note is a jazz record label founded in New York City in 1939."),
    ("Apple pie", "Apple pie is a dessert made with apples and a pastry crust."),
]
TRIPLES = [
    [["Hello Love", "performed by", "Hank Snow"], ["Hello Love", "released in", "1974"]],
    [["Hank Snow", "died in", "Madison, Tennessee"], ["Hank Snow", "was a", "country singer"],
     ["Hank Snow", "broken"], "not a triple"],  # two malformed triples: skipped and counted
    [["Madison, Tennessee", "is part of", "Nashville"]],
    [["Blue Note", "founded in", "New York City"]],
    [["Apple pie", "made with", "apples"]],
]


def write_dataset(folder: Path) -> None:
    corpus = [{"title": title, "text": text} for title, text in PASSAGES]
    docs = [{"title": title, "text": text, "passage": f"{title}\n{text}",
             "extracted_entities": sorted({t[0] for t in triples if isinstance(t, list) and len(t) == 3}),
             "extracted_triples": triples}
            for (title, text), triples in zip(PASSAGES, TRIPLES)]

    def question(qid: str, text: str, hops: list[tuple[int, str]], aliases: list[str]) -> dict:
        return {
            "id": qid, "question": text, "answer": hops[-1][1], "answer_aliases": aliases, "answerable": True,
            "paragraphs": [{"idx": i, "title": t, "paragraph_text": x, "is_supporting": i in dict(hops)}
                           for i, (t, x) in enumerate(PASSAGES)],
            "question_decomposition": [{"id": n, "question": "", "answer": answer, "paragraph_support_idx": i}
                                       for n, (i, answer) in enumerate(hops)],
        }

    questions = [
        question("2hop__1", "Where did the performer of Hello Love die?",
                 [(0, "Hank Snow"), (1, "Madison, Tennessee")], ["Madison"]),
        question("2hop__2", "In which city was the label Blue Note founded?", [(3, "New York City")], ["NYC"]),
        # An answer stored nowhere: never in the text, never an entity.
        question("2hop__3", "What is apple pie made with?", [(4, "Zanzibar cloves")], []),
    ]
    (folder / "musique_train_corpus.json").write_text(json.dumps(corpus))
    (folder / "openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json").write_text(json.dumps({"docs": docs}))
    (folder / "musique_train.json").write_text(json.dumps(questions))


def run_runner(tmp_path: Path, capsys, write) -> tuple[str, dict, list[str]]:
    """The runner on a set `write` puts in a fresh folder: its table, its JSON report and its arguments."""
    data = tmp_path / "data"
    data.mkdir()
    write(data)
    out = tmp_path / "results.json"
    argv = ["--data", str(data), "--db", str(tmp_path / "kb.duckdb"), "--json-out", str(out)]
    musique.main(argv)
    return capsys.readouterr().out, json.loads(out.read_text()), argv


def test_the_runner_loads_through_the_tools_and_reports_both_methods(tmp_path, capsys):
    table, report, argv = run_runner(tmp_path, capsys, write_dataset)
    assert "R@5 (all)" in table and "latency median (ms)" in table and "search called in process" in table

    assert report["store"]["documents"] == len(PASSAGES)
    assert report["loading"]["graph_input"]["skipped: malformed triples"] == 2
    for method in ("dense", "search"):
        result = report["results"][method]
        assert set(result["overall"]) == {"R@2", "R@5", "all-gold@5", "answer in text"}
        assert all(0 <= value <= 100 for value in result["overall"].values())
        assert result["latency"]["n"] == 3 and result["latency"]["median_ms"] > 0
        assert set(result["per_hop"]) == {"hop 1", "hop 2"}
        assert set(result["by_group"]) == {"1-hop", "2-hop"}
        # Five short passages: all of them are in the top 5, and in search's text within the default budget.
        # Two of the three answers are written in them; the third is stored nowhere.
        assert result["overall"]["R@5"] == 100.0
        assert result["overall"]["answer in text"] == 66.7
    assert "answer in text" in table and "per-hop answer among the entities" in table
    assert report["search_latency_in_process"]["n"] == 3

    # Hop answers as entities of the returned subgraph: only search returns entities; the answer stored nowhere
    # is never one, and the rows say so per question.
    search, dense = report["results"]["search"]["per_hop"], report["results"]["dense"]["per_hop"]
    assert dense["hop 1"]["answer as entity"] is None
    assert search["hop 1"]["n"] == 3 and 0 <= search["hop 1"]["answer as entity"] <= 66.7
    by_id = {row["id"]: row for row in report["per_question"]}
    assert by_id["2hop__3"]["hop_answers_as_entities"] == [False]
    assert by_id["2hop__3"]["search_answer_in_text"] == 0.0
    assert by_id["2hop__1"]["search_answer_in_text"] == 1.0
    assert len(by_id["2hop__1"]["hop_answers_as_entities"]) == 2

    # A second run on the same file reuses what is loaded rather than loading it twice.
    musique.main(argv)
    assert json.loads(Path(argv[-1]).read_text())["loading"] == {"reused": True}


def test_answers_and_hop_answers_are_read_from_the_decomposition(tmp_path):
    write_dataset(tmp_path)
    first, second, _ = musique.load_dataset(tmp_path).questions
    assert first.answers == ["Madison, Tennessee", "Madison"]
    # The last hop answers the question: its aliases count for that hop too.
    assert first.hop_answers == [["Hank Snow"], ["Madison, Tennessee", "Madison"]]
    assert second.hop_answers == [["New York City", "NYC"]]


def test_answer_in_text_ignores_case_and_spacing_and_entities_match_loosely():
    assert musique.answer_in_text("Founded in\n New  York city in 1939.", ["new york City"]) == 1.0
    assert musique.answer_in_text("Founded in New York.", ["New York City", "Manhattan"]) == 0.0
    assert musique.answer_in_text("anything", []) is None  # a question without an answer is not counted
    assert musique.names_answer("Nashville", "Nashville, Tennessee")
    assert musique.names_answer("The Beatles", "beatles")
    assert musique.names_answer("Brödel", "Brodel")
    assert musique.names_answer("Mercury (planet)", "mercury")
    assert not musique.names_answer("Nash", "Nashville")
    assert not musique.names_answer("Africa", "colonial empire in Africa")  # a word of a longer name is not it
    assert not musique.names_answer("Madison, Tennessee", "Madison, Wisconsin")
    assert not musique.names_answer("Paris", "London")
    assert not musique.names_answer("the", "The Who")  # nothing left of an answer that is only an article
    question = musique.Question(id="q", text="", gold=[0], hop_gold=[0, 1], group="2-hop",
                                hop_answers=[["Hank Snow"], ["Madison"]])
    assert musique.hop_answers_found(question, ["hank snow", "Nashville"]) == [True, False]


def write_hotpot_dataset(folder: Path, name: str = "hotpotqa_train") -> None:
    """The same passages in HotpotQA's layout: a corpus mapping titles to sentences, questions whose
    supporting facts name paragraphs of their context by title, OpenIE docs without titles."""
    sentences = {title: [part + "." for part in text.rstrip(".").split(". ")] for title, text in PASSAGES}
    for title, parts in sentences.items():
        sentences[title] = [parts[0], *(" " + part for part in parts[1:])]
    docs = [{"extracted_entities": [], "extracted_triples": triples} for triples in TRIPLES]
    context = [[title, parts] for title, parts in sentences.items()]
    questions = [
        {"_id": "a1", "question": "Where did the performer of Hello Love die?", "type": "bridge",
         "supporting_facts": [["Hello Love", 0], ["Hank Snow", 1], ["Hank Snow", 0]], "context": context},
        {"_id": "a2", "question": "Are Blue Note and apple pie from New York?", "type": "comparison",
         "supporting_facts": [["Blue Note", 0], ["Apple pie", 0]], "context": context},
    ]
    (folder / f"{name}_corpus.json").write_text(json.dumps(sentences))
    (folder / f"openie_{name}_results_ner_test_5.json").write_text(json.dumps({"docs": docs}))
    (folder / f"{name}.json").write_text(json.dumps(questions))


def test_a_hotpotqa_layout_reads_gold_by_title_and_groups_by_type(tmp_path):
    write_hotpot_dataset(tmp_path)
    dataset = musique.load_dataset(tmp_path)
    assert dataset.name == "hotpotqa_train"
    assert [p["text"] for p in dataset.corpus] == [text for _, text in PASSAGES]  # sentences joined back
    bridge, comparison = dataset.questions
    assert (bridge.id, bridge.gold, bridge.hop_gold, bridge.group) == ("a1", [0, 1], [], "bridge")
    assert (comparison.gold, comparison.group) == ([3, 4], "comparison")


def test_the_runner_reports_a_set_without_hop_order_by_type(tmp_path, capsys):
    table, report, _ = run_runner(tmp_path, capsys, write_hotpot_dataset)
    assert table.startswith("hotpotqa_train: 2 questions") and "per-hop recall: none" in table
    assert report["set"] == "hotpotqa_train"
    assert report["loading"]["graph_input"]["skipped: malformed triples"] == 2
    for method in ("dense", "search"):
        assert set(report["results"][method]["by_group"]) == {"bridge", "comparison"}
        assert report["results"][method]["per_hop"] == {}
    assert report["results"]["search"]["overall"]["R@5"] == 100.0


def test_a_folder_with_several_sets_needs_set_and_a_missing_file_is_named(tmp_path):
    write_dataset(tmp_path)
    write_hotpot_dataset(tmp_path)
    with pytest.raises(SystemExit, match="sets hotpotqa_train, musique_train: choose one with --set"):
        musique.load_dataset(tmp_path)
    assert musique.load_dataset(tmp_path, "musique_train").questions[0].group == "2-hop"
    (tmp_path / "hotpotqa_train.json").unlink()
    with pytest.raises(SystemExit, match="hotpotqa_train.json does not exist"):
        musique.load_dataset(tmp_path, "hotpotqa_train")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit, match="no NAME_corpus.json file"):
        musique.load_dataset(empty)
