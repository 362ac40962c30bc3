"""The conversational-memory runner (contrib/bench/locomo.py) end to end on two tiny conversations in LoCoMo's
layout, written here (the real set is not in the repository), with the real model."""

from __future__ import annotations

import contextlib
import io
import json
import statistics
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "contrib" / "bench"
sys.path.insert(0, str(BENCH))

import locomo  # noqa: E402

pytestmark = pytest.mark.model

#: Small talk around the facts, so that a top 5 is a real choice; none of its words is in a question.
FILLER = ["Sounds lovely!", "Haha, that's so funny.", "I totally agree with you.", "Thanks for sharing that.",
          "Have a great evening!", "See you soon, take care.", "Wow, amazing news!", "I'm so happy for you.",
          "That made my day.", "Talk later, bye!"]


def turns(session: int, lines: list[tuple[str, str]], speakers: tuple[str, str]) -> list[dict]:
    """The given lines, then the filler said in turn by both speakers."""
    said = lines + [(speakers[i % 2], text) for i, text in enumerate(FILLER)]
    return [{"speaker": speaker, "dia_id": f"D{session}:{i}", "text": text}
            for i, (speaker, text) in enumerate(said, start=1)]


def alpha() -> dict:
    people = ("Ana", "Ben")
    session_1 = turns(1, [("Ana", "I adopted a greyhound called Zephyr last weekend."),
                          ("Ben", "I'm rebuilding the carburetor of my 1967 Mustang in the garage.")], people)
    session_1.append({"speaker": "Ana", "dia_id": "D1:99", "text": "Look!",
                      "blip_caption": "a photo of a greyhound on a sandy beach"})
    session_2 = turns(2, [("Ben", "The Mustang carburetor is finished, she runs again."),
                          ("Ana", "I start as a pastry chef at the Lumiere bakery on Monday.")], people)
    return {
        "speaker_a": "Ana", "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": session_1,
        "session_2_date_time": "10:00 am on 20 June, 2023", "session_2": session_2,
        "session_3_date_time": "9:00 am on 1 July, 2023",  # a date without a session: no documents
        "session_1_observation": {"Ana": [["Ana adopted a greyhound called Zephyr.", "D1:1"]],
                                  "Ben": [["Ben is rebuilding a 1967 Mustang carburetor.", "D1:2"]]},
        "session_2_observation": {"Ana": [["Ana starts as a pastry chef at the Lumiere bakery.", ["D2:2"]]],
                                  "Ben": [["Ben finished the Mustang carburetor.", ["D2:1"]]]},
        "session_1_summary": "Ana and Ben talk about a dog and a car.",
        "qa": [
            {"question": "What breed is Zephyr?", "answer": "greyhound", "evidence": ["D1:1"], "category": 4},
            {"question": "Which bakery hired a pastry chef?", "answer": "Lumiere", "evidence": ["D2:2"],
             "category": 4},
            {"question": "When was the carburetor of the Mustang finished?", "answer": "June 2023",
             "evidence": ["D2:1"], "category": 2},
            # Two evidence turns written in one string, as some of LoCoMo's are.
            {"question": "Which greyhound and which Mustang?", "answer": "Zephyr, 1967",
             "evidence": ["D1:1; D1:2"], "category": 1},
            # Not one of its words is stored: BM25 finds nothing.
            {"question": "Would someone enjoy walking outdoors?", "answer": "yes", "evidence": ["D1:1"],
             "category": 3},
            {"question": "Is Ana likely a pet owner?", "answer": "yes", "evidence": [], "category": 3},
            {"question": "What colour is Ben's greyhound?", "adversarial_answer": "grey", "evidence": ["D1:1"],
             "category": 5},
        ],
    }


def beta() -> dict:
    people = ("Cleo", "Dev")
    session_1 = turns(1, [("Dev", "I bought a Dobsonian telescope to look at Saturn's rings."),
                          ("Cleo", "I sailed a catamaran from Brest to Lisbon.")], people)
    return {
        "speaker_a": "Cleo", "speaker_b": "Dev",
        "session_1_date_time": "8:00 pm on 3 March, 2023", "session_1": session_1,
        "session_1_observation": {"Dev": [["Dev bought a Dobsonian telescope.", "D1:1"]],
                                  "Cleo": [["Cleo sailed a catamaran from Brest to Lisbon.", "D1:2"]]},
        "qa": [
            {"question": "What kind of telescope did Dev buy?", "answer": "Dobsonian", "evidence": ["D1:1"],
             "category": 4},
            {"question": "Where did the catamaran trip end?", "answer": "Lisbon", "evidence": ["D1:2"],
             "category": 1},
            {"question": "Which planet's rings did Cleo photograph?", "adversarial_answer": "Saturn",
             "evidence": ["D1:1"], "category": 5},
        ],
    }


def write_set(folder: Path) -> Path:
    folder.mkdir()
    (folder / "alpha.json").write_text(json.dumps(alpha()))
    (folder / "beta.json").write_text(json.dumps(beta()))
    return folder


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[str, dict]:
    """One run of the runner, both conversations, both modes: its table and its JSON report."""
    folder = tmp_path_factory.mktemp("locomo")
    data = write_set(folder / "data")
    out = folder / "results.json"
    table = io.StringIO()
    with contextlib.redirect_stdout(table):
        locomo.main(["--data", str(data), "--json-out", str(out)])
    return table.getvalue(), json.loads(out.read_text())


def recall_of(report: dict, mode: str, question: str, method: str, k: int = 5) -> float:
    row = next(r for r in report["modes"][mode]["per_question"] if r["question"] == question)
    return row["recall"][method][str(k)]


def test_documents_follow_the_readme_in_both_modes(tmp_path):
    conversation, _ = locomo.load_conversations(write_set(tmp_path / "data"), None, None)
    documents = {d.id: d for d in conversation.documents("turns")}
    assert len(documents) == 2 * (2 + len(FILLER)) + 1
    first = documents["D1:1"]
    assert (first.title, first.text, first.evidence) == (
        "Session 1, 1:56 pm on 8 May, 2023", "Ana: I adopted a greyhound called Zephyr last weekend.", ("D1:1",))
    assert documents["D1:99"].text == "Ana: Look! [shares a photo of a greyhound on a sandy beach]"
    facts = conversation.documents("facts")
    assert [(d.text, d.evidence, d.title[:9]) for d in facts][2] == (
        "Ana starts as a pastry chef at the Lumiere bakery.", ("D2:2",), "Session 2")
    assert len({d.id for d in facts}) == len(facts) == 4
    assert conversation.questions[3].gold == {"D1:1", "D1:2"}  # "D1:1; D1:2" is two turns


def test_recall_counts_the_turns_behind_the_top_k_documents():
    evidence = {"a": ("D1:1",), "b": ("D1:2", "D1:3"), "c": ("D2:1",)}
    gold = frozenset({"D1:3", "D2:1"})
    assert locomo.recall_at(["b", "a", "c"], evidence, gold, 1) == 0.5
    assert locomo.recall_at(["b", "a", "c"], evidence, gold, 2) == 0.5
    assert locomo.recall_at(["b", "a", "c"], evidence, gold, 3) == 1.0
    assert locomo.recall_at(["unknown"], evidence, gold, 5) == 0.0
    assert locomo.fuse(["x", "y"], ["y", "z"]) == ["y", "x", "z"]  # 1/62 + 1/61 beats 1/61


def test_bm25_is_okapi_over_words_without_stop_words():
    index = locomo.BM25(["The greyhound runs", "a cat and a dog", "the the the"])
    assert locomo.tokens("The Mustang's 1967 carburetor!") == ["mustang", "1967", "carburetor"]
    assert index.ranking("what about the greyhound?") == [0]
    assert index.ranking("the and a") == []  # only stop words: nothing matches


def test_the_runner_ranks_the_obvious_turn_first_for_bm25(run):
    table, report = run
    assert report["conversations"] == ["alpha", "beta"] and set(report["modes"]) == {"turns", "facts", "observations"}
    assert "LoCoMo, turns mode" in table and "LoCoMo, facts mode" in table and "asked of another memory" in table
    for mode in ("turns", "facts"):
        # A rare word of the question is in the one evidence turn (or the fact standing for it).
        for question in ("What breed is Zephyr?", "Which bakery hired a pastry chef?",
                         "What kind of telescope did Dev buy?"):
            assert recall_of(report, mode, question, "bm25") == 1.0
        assert recall_of(report, mode, "Which greyhound and which Mustang?", "bm25") == 1.0
        assert recall_of(report, mode, "Would someone enjoy walking outdoors?", "bm25") == 0.0
    # Turns: the filler is ranked too, and the one turn naming the Mustang's carburetor finished is found.
    assert recall_of(report, "turns", "When was the carburetor of the Mustang finished?", "bm25") == 1.0


def test_the_observations_mode_keeps_each_speakers_facts_as_an_entitys_observations(run, tmp_path):
    table, report = run
    assert "LoCoMo, observations mode (alpha: 4 facts, beta: 2 facts)" in table
    assert "turns behind the top k observations shown" in table
    # What search shows first is the observation that shares the question's rare word, of the entity it is about.
    for question, fact in (("What breed is Zephyr?", "S1:Ana:0"), ("Which bakery hired a pastry chef?", "S2:Ana:0"),
                           ("What kind of telescope did Dev buy?", "S1:Dev:0")):
        row = next(r for r in report["modes"]["observations"]["per_question"] if r["question"] == question)
        assert row["top"]["search"][0] == fact and row["recall"]["search"]["5"] == 1.0
        assert set(row["recall"]) == {"search"}  # the baselines rank passages: none are stored in this mode
    recall = report["modes"]["observations"]["recall"]["all"]
    assert recall["search R@5"] is not None and recall["dense R@5"] is None
    # The memory is what a reference-server user would have: one entity per speaker, the facts in order.
    from duckgraph.core.domain import memory_server

    conversation = locomo.load_conversations(write_set(tmp_path / "data"), ["alpha"], None)[0]
    services = locomo.make_services(tmp_path / "kb.duckdb")
    with services.knowledge_base as kb:
        locomo.load_observations(kb, conversation.documents("observations"))
        graph = memory_server.read_graph(kb)
    assert {(e.name, e.entityType, tuple(e.observations)) for e in graph.entities} == {
        ("Ana", "person", ("Ana adopted a greyhound called Zephyr.", "Ana starts as a pastry chef at the Lumiere bakery.")),
        ("Ben", "person", ("Ben is rebuilding a 1967 Mustang carburetor.", "Ben finished the Mustang carburetor."))}


def test_the_tables_average_the_questions_per_category(run):
    _, report = run
    summary = report["modes"]["turns"]
    rows = summary["per_question"]
    # Categories 1-4 with evidence: 5 of alpha (one has none) and 2 of beta; category 5 is not in recall.
    assert len(rows) == 7 and summary["conversations"]["alpha"]["no_evidence_skipped"] == 1
    recall = summary["recall"]
    assert (recall["all"]["n"], recall["4 single-hop"]["n"], recall["3 open-domain"]["n"]) == (7, 3, 1)
    for method in locomo.METHODS:
        for k in locomo.RECALL_KS:
            mean = statistics.fmean(row["recall"][method][str(k)] for row in rows)
            assert recall["all"][f"{method} R@{k}"] == round(100 * mean, 1)
            assert 0 <= recall["4 single-hop"][f"{method} R@{k}"] <= 100
    assert summary["search_latency"]["n"] == 10  # every question of alpha and beta, category 5 included


def test_the_floor_columns_count_each_conversations_questions(run):
    _, report = run
    for mode in locomo.MODES:
        floor = report["modes"][mode]["floor"]
        # alpha's 6 questions of categories 1-4 (one without evidence) asked of beta's memory, and of its own.
        assert (floor["alpha"]["other memory: n"], floor["alpha"]["own: n"], floor["alpha"]["category 5: n"]) == (6, 6, 1)
        assert (floor["beta"]["other memory: n"], floor["beta"]["own: n"], floor["beta"]["category 5: n"]) == (2, 2, 1)
        for values in floor.values():
            for part in ("other memory", "own", "category 5"):
                assert 0 <= values[f"{part}: empty %"] <= 100


def test_the_floor_is_the_share_of_empty_results():
    def result(own, foreign, adversarial):
        return {"rows": [], "own_empty": own, "foreign_empty": foreign, "adversarial_empty": adversarial,
                "search_seconds": [0.01], "documents": 1, "chunks": 1, "load_seconds": 0, "no_evidence_skipped": 0}

    floor = locomo.summarise({
        "a": result([False, False, False, True], {"b": [True, False]}, [True]),
        "b": result([False, True], {"a": [True, True, True, False]}, []),
    })["floor"]
    # a's 4 questions asked of b's memory: 3 empty; b's 2 asked of a's memory: 1 empty.
    assert floor["a"]["other memory: n"] == 4 and floor["a"]["other memory: empty %"] == 75.0
    assert floor["b"]["other memory: n"] == 2 and floor["b"]["other memory: empty %"] == 50.0
    assert floor["a"]["own: empty %"] == 25.0 and floor["b"]["own: empty %"] == 50.0
    assert floor["a"]["category 5: empty %"] == 100.0 and floor["b"]["category 5: empty %"] is None


def test_a_search_result_is_empty_only_without_passages_entities_or_relations():
    from duckgraph.core.domain.model import Passage, SearchResult

    empty = SearchResult(query="q", anchors=[], nodes=[], edges=[], passages=[], text="nothing", truncated=False)
    assert locomo.is_empty(empty)
    passage = Passage(document_id="D1:1", chunk_id=1, text="t", score=0.5)
    assert not locomo.is_empty(empty.model_copy(update={"passages": [passage]}))


def test_bad_arguments_are_refused_with_a_clear_error(tmp_path, capsys):
    data = write_set(tmp_path / "data")
    with pytest.raises(SystemExit, match="no conversation gamma"):
        locomo.main(["--data", str(data), "--conversations", "alpha,gamma"])
    with pytest.raises(SystemExit):
        locomo.main(["--data", str(data), "--modes", "turns,summaries"])
    assert "--modes takes turns, facts" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="is not a folder"):
        locomo.main(["--data", str(tmp_path / "missing")])


def test_limit_and_modes_make_a_quick_run(tmp_path, capsys):
    data = write_set(tmp_path / "data")
    report = locomo.main(["--data", str(data), "--modes", "facts", "--limit", "2", "--conversations", "alpha"])
    assert set(report["modes"]) == {"facts"}
    summary = report["modes"]["facts"]
    assert summary["recall"]["all"]["n"] == 2 and summary["floor"]["alpha"]["other memory: n"] == 0
    assert "LoCoMo, facts mode" in capsys.readouterr().out
