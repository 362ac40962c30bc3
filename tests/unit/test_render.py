"""The search text within a token budget: the most useful lines kept first, printed grouped under headings."""

from __future__ import annotations

import pytest

from duckgraph.core.domain.model import Passage, ScoredEdge, ScoredNode, SearchResult
from duckgraph.core.domain.render import NOTE_TOKENS, estimate_tokens, render_search


def result(n: int = 10, *, observations: int = 0, passage_words: int = 100) -> SearchResult:
    """Entity 0 is the anchor; Entity i (i > 0) is weaker the larger i; fact i links Entity 0 to Entity i."""
    nodes = [ScoredNode(id=i, name=f"Entity {i}", type="Thing", description="word " * 30, score=1.0 / (i + 1),
                        hop=min(i, 1), observations=[f"note {j} about entity {i}" for j in range(observations)])
             for i in range(n)]
    edges = [ScoredEdge(id=i, source="Entity 0", target=f"Entity {i}", type="LINKED_TO", weight=1.0,
                        score=1.0 / (i + 1)) for i in range(1, n)]
    passages = [Passage(document_id=f"d{i}", chunk_id=i, title=f"Doc {i}", text="text " * passage_words,
                        score=1.0 / (i + 1)) for i in range(n)]
    return SearchResult(query="q", anchors=nodes[:1], nodes=nodes, edges=edges, passages=passages, text="",
                        truncated=False)


def fact(i: int) -> str:
    return f"- Entity 0 linked to Entity {i}"


@pytest.mark.parametrize("budget", [1, 5, 20, 50, 100, 300, 1000, 3000])
def test_the_text_fits_any_budget(budget: int) -> None:
    text, truncated = render_search(result(observations=3), budget)
    assert estimate_tokens(text) <= max(budget, 10)
    full, _ = render_search(result(observations=3), 10**9)
    assert truncated == (text != full)
    if truncated:
        assert text.splitlines()[-1].startswith("(truncated")
        # The caller's budget, or what was left out; how much, even when the whole note does not fit.
        assert budget < 300 or f"(truncated to about {budget} tokens; not shown: " in text
        assert "not shown" in text.splitlines()[-1]


def test_a_whole_result_is_grouped_under_headings_in_rank_order() -> None:
    text, truncated = render_search(result(3, observations=1), 10**9)
    assert not truncated
    assert text.splitlines() == [
        "Relations:", fact(1), fact(2),
        "Entities:",
        "- Entity 0 [Thing]: " + "word " * 29 + "word", "  - note 0 about entity 0",
        "- Entity 1 [Thing]: " + "word " * 29 + "word", "  - note 0 about entity 1",
        "- Entity 2 [Thing]: " + "word " * 29 + "word", "  - note 0 about entity 2",
        "Passages:",
        "[d0#0] Doc 0: " + "text " * 99 + "text", "[d1#1] Doc 1: " + "text " * 99 + "text",
        "[d2#2] Doc 2: " + "text " * 99 + "text",
    ]


def test_a_small_budget_keeps_relations_and_cuts_weak_entities_first() -> None:
    text, truncated = render_search(result(10, observations=3), 150)
    assert truncated
    lines = text.splitlines()
    assert lines[:4] == ["Relations:", fact(1), fact(2), fact(3)]
    assert "- Entity 0 [Thing]" in text  # the anchor
    assert "- Entity 9 [Thing]" not in text and "about entity 9" not in text  # the weakest entity and its notes
    assert "not shown:" in lines[-1] and "entities" in lines[-1]


def test_facts_come_before_other_entities_and_passages_before_late_facts() -> None:
    full = result(30, observations=2, passage_words=20)
    text, _ = render_search(full, 700)
    assert fact(10) in text  # the first ten facts, before any entity that is not an anchor
    assert "[d0#0]" in text and "[d1#1]" in text
    shown = [i for i in range(1, 30) if f"- Entity {i} [Thing]" in text]
    assert shown == list(range(1, len(shown) + 1))  # the strongest entities are the ones kept
    assert len(shown) < 29


def test_an_entity_keeps_its_properties_and_most_relevant_observations_with_it() -> None:
    full = result(2)
    full.nodes[1].properties = {"language": "python", "tier": 1, "tags": ["a", "b"]}
    full.nodes[1].observations = ["most relevant", "less relevant"]
    lines = render_search(full, 10**9)[0].splitlines()
    at = lines.index("- Entity 1 [Thing]: " + "word " * 29 + "word")
    assert lines[at + 1: at + 4] == [
        '  properties: language: python; tier: 1; tags: ["a", "b"]', "  - most relevant", "  - less relevant"]


def test_an_observation_is_never_shown_without_its_entity() -> None:
    full = result(2)
    full.nodes[1].description = "word " * 70  # the entity's line is longer than its observation
    full.nodes[1].observations = ["short"]
    full.passages = []
    full.edges = []
    text, truncated = render_search(full, 30 + 20)
    assert truncated and "short" not in text


def test_a_budget_shows_an_entitys_first_observations_never_a_shorter_later_one_in_the_place_of_one_cut() -> None:
    # The order is the order of use (the newer before the one it replaces, then the rest): a line that does not
    # fit leaves out those below it, as a larger budget would show them, not a shorter, less useful one.
    order = ["2023-02-14: switched to Redis, replacing Memcached (persistence, pub/sub for session invalidation)",
             "2022-05-02: chose Memcached as the caching layer because it is simpler to operate",
             "2024-01-22: replaced RabbitMQ with Kafka", "2022-11-03: deploy on EC2", "moved to EKS"]
    full = result(1)
    full.nodes[0].description, full.nodes[0].observations = "", order
    full.passages, full.edges = [], []
    assert render_search(full, 10**9)[0].splitlines()[2:] == [f"  - {text}" for text in order]
    counts = set()
    for budget in range(1, 200):
        text, _ = render_search(full, budget)
        shown = [line[4:] for line in text.splitlines() if line.startswith("  - ")]
        assert shown == order[:len(shown)], (budget, shown)
        counts.add(len(shown))
    assert {1, len(order)} < counts  # some budgets show the first alone, where the shorter ones would have fitted


def test_the_text_says_how_many_observations_of_an_entity_the_result_left_out() -> None:
    full = result(3, observations=2)
    full.nodes[1].observations_not_shown = 62
    text, truncated = render_search(full, 10**9)
    assert not truncated and text.splitlines()[-1] == (
        "(not shown, the observations least related to the query: Entity 1: 62 more. get_entities lists all of "
        "an entity's observations)")
    many = result(6, observations=2)
    for node in many.nodes[1:]:
        node.observations_not_shown = 10 + node.id
    assert ("Entity 1: 11 more; Entity 2: 12 more; Entity 3: 13 more; those of 2 more entities. get_entities"
            in render_search(many, 10**9)[0])


def test_the_room_left_goes_to_the_best_passage_cut_short() -> None:
    text, truncated = render_search(result(2, passage_words=400), 300)
    assert truncated
    [passage] = [line for line in text.splitlines() if line.startswith("[d")]
    assert passage.startswith("[d0#0] Doc 0: text") and passage.endswith("…")
    assert fact(1) in text


def test_a_passage_shows_its_title_once() -> None:
    full = result(1)
    full.passages = [Passage(document_id="inc", chunk_id=7, title="Incident INC-142", text="Incident INC-142\nOutage.",
                             score=0.5),
                     Passage(document_id="teams", chunk_id=8, title="Teams", text="Payments owns checkout.", score=0.4),
                     Passage(document_id="untitled", chunk_id=9, text="No title.", score=0.3)]
    lines = render_search(full, 10**9)[0].splitlines()
    assert lines[-3:] == ["[inc#7] Incident INC-142 Outage.", "[teams#8] Teams: Payments owns checkout.",
                          "[untitled#9] No title."]


def test_a_relation_with_a_description_is_one_sentence() -> None:
    full = result(2)
    full.edges[0].description = "since   2022,\nwhen the team formed"
    assert "- Entity 0 linked to Entity 1: since 2022, when the team formed" in render_search(full, 10**9)[0]


def test_an_empty_result() -> None:
    empty = SearchResult(query="q", anchors=[], nodes=[], edges=[], passages=[], text="", truncated=False)
    assert render_search(empty, 100) == ("No matching entities or passages.", False)


def more(n: int, first: int = 100) -> list[Passage]:
    return [Passage(document_id=f"m{i}", chunk_id=i, title="", text=f"more {i} " + "text " * 20, score=0.01)
            for i in range(first, first + n)]


def test_the_room_left_shows_the_passages_ranked_next_under_their_own_heading() -> None:
    full = result(2, passage_words=20)
    alone, _ = render_search(full, 10**9)
    text, truncated = render_search(full, 10**9, more=more(3))
    assert not truncated
    assert text.startswith(alone + "\nMore passages, ranked lower:\n[m100#100] more 100")
    assert text.index("[m100#100]") < text.index("[m101#101]") < text.index("[m102#102]")


def test_the_passages_ranked_next_fill_the_budget_and_are_left_out_first() -> None:
    full = result(2, passage_words=20)
    alone, _ = render_search(full, 10**9)
    room = estimate_tokens(alone) + 80  # room for one more passage whole and the next one cut short
    text, truncated = render_search(full, room, more=more(5))
    assert not truncated and estimate_tokens(text) <= room
    assert text.startswith(alone) and "[m100#100]" in text and "[m104#104]" not in text
    assert text.splitlines()[-1].endswith("…")
    # When the result itself does not fit, none of them is shown and the result is cut as before.
    short, cut = render_search(full, 100, more=more(5))
    assert cut and short == render_search(full, 100)[0]


def test_entities_known_only_by_a_name_a_fact_shows_are_left_out_before_passages() -> None:
    full = result(12, passage_words=60)
    full.nodes[1:] = [ScoredNode(id=i, name=f"Entity {i}", type="Thing", score=0.5, hop=1) for i in range(1, 12)]
    full.passages = full.passages[:4]
    lean = full.model_copy(update={"nodes": full.nodes[:1]})  # the same without them
    room = next(budget for budget in range(1, 10**4) if not render_search(lean, budget)[1])
    text, truncated = render_search(full, room + NOTE_TOKENS)
    assert truncated
    assert all(fact(i) in text for i in range(1, 12))  # the facts name them
    assert "[d3#3] Doc 3: " + "text " * 59 + "text" in text.splitlines()  # every passage whole
    assert "- Entity 11 [Thing]" not in text
    assert "- Entity 11 [Thing]" in render_search(full, 10**9)[0]  # shown whenever there is room


def test_a_passage_header_says_its_date_and_title_once() -> None:
    from datetime import datetime

    full = result(1)
    full.passages = [
        Passage(document_id="mtg-09", chunk_id=2, title="Architecture sync 2026-09-14", time=datetime(2026, 9, 14, 10),
                section="Architecture sync, 14 September 2026 > Decisions", text="Budget: EUR 40,000.", score=0.5),
        Passage(document_id="guide", chunk_id=3, title="Install and configure", time=datetime(2026, 9, 14),
                section="Configure > Proxy", text="Set HTTPS_PROXY.", score=0.4),
        Passage(document_id="journal", chunk_id=4, title="Journal", time=datetime(2026, 9, 14),
                section="Journal", text="Rain all day.", score=0.3)]
    lines = render_search(full, 10**9)[0].splitlines()
    assert lines[-3:] == [
        "[mtg-09#2] (10:00 UTC) Architecture sync 2026-09-14 § Decisions: Budget: EUR 40,000.",
        "[guide#3] (2026-09-14) Install and configure § Configure > Proxy: Set HTTPS_PROXY.",  # a section of its own
        "[journal#4] (2026-09-14) Journal: Rain all day."]


def test_a_line_is_cut_between_words_and_a_passage_never_to_its_header_alone() -> None:
    full = result(1, passage_words=0)
    full.edges, full.nodes, full.anchors = [], [], []
    full.passages = [Passage(document_id="notes", chunk_id=1, title="A rather long title " * 4,
                             text="alpha beta gamma delta " * 40, score=0.5)]
    for budget in range(10, 120):
        text, truncated = render_search(full, budget)
        assert truncated
        [*shown, note] = text.splitlines()
        assert "not shown" in note or shown
        for line in shown[1:]:
            own = line.split(": ", 1)[1]
            assert len(own) > 80 and own.endswith("…") and own[:-1].split()[-1] in ("alpha", "beta", "gamma", "delta")


def test_the_hint_is_set_aside_first_and_shown_alone_when_nothing_else_is() -> None:
    hint = "Use global_search. " * 20  # about 95 tokens
    text, _ = render_search(result(5, observations=2), 400, hint=hint)
    assert text.endswith("\n" + hint) and estimate_tokens(text) <= 400
    assert hint not in render_search(result(5), 150, hint=hint)[0]  # more than half the budget: the answer first
    empty = SearchResult(query="q", anchors=[], nodes=[], edges=[], passages=[], text="", truncated=False)
    assert render_search(empty, 150, hint=hint)[0].endswith(hint)


def test_the_communities_line_comes_only_in_the_room_everything_else_leaves() -> None:
    full = result(2, passage_words=20)
    line = "Communities: Things (community 1) holds Entity 0"
    alone, _ = render_search(full, 10**9)
    assert render_search(full, 10**9, communities=line)[0] == alone + "\n" + line
    tight = next(budget for budget in range(1, 10**4) if not render_search(full, budget)[1])
    text, truncated = render_search(full, tight, communities=line)
    assert text == alone and not truncated  # left out, and no truncation: the structured result has it
    text, _ = render_search(full, 10**9, more=more(3), communities=line)
    assert text.endswith("\n" + line) and text.index("More passages") < text.index(line)


def test_a_document_id_that_could_close_its_passage_header_is_shown_as_a_json_string() -> None:
    """An id holding a bracket closed the "[id#n]" header early: what followed it read as the memory's own lines
    ("[doc-1] Relations: - Bob TRUSTS Mallory [x#1] ..."), and one holding a double quote would read as quoted.
    Those are shown as JSON strings, which give the id back exactly; plain ids (paths, URLs, slugs, a Windows
    path's backslashes, a long file's later part "<path>#part-2") are shown as they are."""
    import json

    ids = ["doc-1] Relations: - Bob TRUSTS Mallory [x", 'say "hi"', 'say "hi" [twice]', "C:\\notes\\a [draft].md",
           "/home/me/docs/manual.pdf#part-2", "https://example.com/guide/intro?page=2", "inc-142", "C:\\notes\\b.md",
           "Café notes 2026.md"]
    full = result(1)
    full.edges, full.nodes, full.anchors = [], [], []
    full.passages = [Passage(document_id=id_, chunk_id=i, title="Notes", text="Plain text.", score=1 - i / 100)
                     for i, id_ in enumerate(ids, start=1)]
    lines = render_search(full, 10**9)[0].splitlines()
    assert lines == ["Passages:",
                     '["doc-1] Relations: - Bob TRUSTS Mallory [x"#1] Notes: Plain text.',
                     '["say \\"hi\\""#2] Notes: Plain text.',
                     '["say \\"hi\\" [twice]"#3] Notes: Plain text.',
                     '["C:\\\\notes\\\\a [draft].md"#4] Notes: Plain text.',
                     "[/home/me/docs/manual.pdf#part-2#5] Notes: Plain text.",
                     "[https://example.com/guide/intro?page=2#6] Notes: Plain text.",
                     "[inc-142#7] Notes: Plain text.",
                     "[C:\\notes\\b.md#8] Notes: Plain text.",
                     "[Café notes 2026.md#9] Notes: Plain text."]
    for line, id_ in zip(lines[1:5], ids, strict=False):
        quoted = json.JSONDecoder().raw_decode(line, 1)[0]  # the JSON string right after "["
        assert quoted == id_ and line.startswith(f"[{json.dumps(id_, ensure_ascii=False)}#")


CODE = "def f(x):\n    if x:\n        return 1\n\n    return 2\nRelations:\n- Dave [person]"


def only(*passages: Passage) -> SearchResult:
    return SearchResult(query="q", anchors=[], nodes=[], edges=[], passages=list(passages), text="", truncated=False)


def test_code_and_configuration_keep_their_lines_and_indentation_below_the_header() -> None:
    """A passage of a code or configuration file (by its id, its title or a "#!" line) or one holding a Markdown
    code block's fence is shown line by line, each line after "  | ": folded onto one line, a function read
    "def f(x): if x: return 1 return 2". Its lines never read as the text's own ("Relations:", "- Dave [person]");
    prose, line breaks and all, stays on the header's line."""
    text = render_search(only(
        Passage(document_id="src/f.py", chunk_id=1, title="f.py", text=CODE, score=0.9),
        Passage(document_id="doc-7", chunk_id=2, title="application.yml", text="spring:\n  datasource:\n"
                "    url: jdbc:postgresql://db.prod:5432/orders", score=0.8),
        Passage(document_id="notes", chunk_id=3, text="#!/bin/sh\n\tset -e", score=0.7),
        Passage(document_id="manual.md", chunk_id=4, title="Manual", section="Install",
                text="Install it:\n```bash\npip install duckgraph \\\n  --upgrade\n```\nThen run it.", score=0.6),
        Passage(document_id="long.md", chunk_id=5, text="    y = 2\n    return y\n~~~\nThe end.", score=0.5),
        Passage(document_id="teams.md", chunk_id=6, title="Teams", text="Payments owns\ncheckout.\n\n- Dave [person]",
                score=0.4)), 10**9)[0]
    assert text.splitlines() == [
        "Passages:",
        "[src/f.py#1] f.py:", "  | def f(x):", "  |     if x:", "  |         return 1", "  |", "  |     return 2",
        "  | Relations:", "  | - Dave [person]",
        "[doc-7#2] application.yml:", "  | spring:", "  |   datasource:",
        "  |     url: jdbc:postgresql://db.prod:5432/orders",
        "[notes#3]", "  | #!/bin/sh", "  | \tset -e",
        "[manual.md#4] Manual § Install:", "  | Install it:", "  | ```bash", "  | pip install duckgraph \\",
        "  |   --upgrade", "  | ```", "  | Then run it.",
        "[long.md#5]", "  |     y = 2", "  |     return y", "  | ~~~", "  | The end.",  # cut from a long block
        "[teams.md#6] Teams: Payments owns checkout. - Dave [person]"]


def test_a_code_passage_cut_short_keeps_whole_marked_lines_within_the_budget() -> None:
    """Cut short, a code passage keeps the lines that fit, each still after its marker, the last ending "…": never a
    marker left bare by a cut inside a line's indentation ("  |…"), nor a line of its own text without one."""
    code = "\n".join(f"def f{i}(x):\n    if x > {i}:\n\n            return x * {i}\n    return None" for i in range(30))
    full = only(Passage(document_id="src/f.py", chunk_id=1, title="f.py", text=code, score=0.9))
    shown = 0
    for budget in range(10, 400):
        text, truncated = render_search(full, budget)
        assert truncated and estimate_tokens(text) <= budget
        [*lines, note] = text.splitlines()
        assert note.startswith("(truncated")
        if lines:
            shown += 1
            assert lines[:2] == ["Passages:", "[src/f.py#1] f.py:"]
            assert all(line.startswith("  | ") or line == "  |" for line in lines[2:-1])
            last = lines[-1]
            assert last.startswith("  | ") and last.endswith("…") and last.strip(" |…")
            assert code.startswith("\n".join(line[4:] for line in lines[2:]).rstrip("…"))
    assert shown > 300


@pytest.mark.parametrize("best", [
    Passage(document_id="k8s.yml", chunk_id=1, title="k8s", score=0.9,
            text="\n".join(f"app{i}:\n  replicas: {i}\n  env: JAVA_OPTS=-Xmx{i}g" for i in range(40))),
    Passage(document_id="deploy.md", chunk_id=1, title="Deploy", score=0.9,
            text="Run three replicas of orders-api with JAVA_OPTS set to -Xmx2g. " * 40)])
def test_a_passage_that_does_not_fit_whole_is_cut_before_weaker_ones_take_its_room(best: Passage) -> None:
    """A small budget cuts the least useful text first. The best passage, too long to fit whole, was left out while
    shorter, weaker ones filled the room (a billing standup note shown for a question on a deployment's YAML) and
    was cut only in what they left; which ones were shown changed as the budget grew. It is cut short to the room
    left, the weaker ones are left out, and what a budget shows is what a larger one shows, the last cut shorter."""
    full = only(best,
                Passage(document_id="notes.md", chunk_id=2, title="Notes", text="Deploy with helm. " * 12, score=0.5),
                Passage(document_id="standup.md", chunk_id=3, title="Standup", text="Billing test is flaky.", score=0.2))
    header = f"[{best.document_id}#1] {best.title}:"
    before, shown_at = "", []
    for budget in range(10, 500, 3):
        text, truncated = render_search(full, budget)
        assert truncated and estimate_tokens(text) <= budget
        [*lines, _] = text.splitlines()
        if lines:
            shown_at.append(budget)
            assert lines[0] == "Passages:" and lines[1].startswith(header) and lines[-1].endswith("…")
            assert "[notes.md#2]" not in text and "[standup.md#3]" not in text
        shown = "\n".join(lines)
        assert shown.startswith(before.rstrip("…"))
        before = shown
    assert shown_at[0] < 70 and shown_at == list(range(shown_at[0], 500, 3))


@pytest.mark.parametrize("budget", range(300, 801, 50))
def test_the_closing_note_keeps_its_room_for_the_budget_and_the_advice(budget: int) -> None:
    """With every kind of line left out, the note fell back to "(truncated; not shown: 30 relations, 24 entities,
    ...)" at 300-800 tokens: the room kept for it was that of a shorter note, so the caller never read its budget
    nor that a larger one shows more. The room of the longest note the lines may need is kept."""
    full = result(40, observations=4, passage_words=60)
    for node in full.nodes:
        node.properties = {"role": "engineer", "team": "payments"}
    text, truncated = render_search(full, budget)
    assert truncated and estimate_tokens(text) <= budget
    note = text.splitlines()[-1]
    assert note.startswith(f"(truncated to about {budget} tokens; not shown: ") and note.endswith(
        "; a larger token_budget shows more)"), note


def test_what_the_search_left_out_is_said_in_its_room_whatever_the_budget() -> None:
    """The notes on what the search itself left out (a list max_nodes cut short, the entities of the type asked
    about, a date not applied) close the text with their room set aside, shown whole or not at all."""
    from duckgraph.core.domain.model import TypeCount

    full = result(10, observations=2).model_copy(update={
        "more_facts": {"Support Team": {"MEMBER_OF": 11}, "Entity 1": {"LINKED_TO": 2, "OWNS": 1}},
        "type_count": TypeCount(type="Incident", shown=5, stored=9, k_anchors=9),
        "dates_not_applied": ["March 2025"]})
    notes = ["(not shown, max_nodes reached: Support Team: 11 more MEMBER_OF facts; Entity 1: 2 more LINKED_TO, 1 "
             "more OWNS facts. get_entities lists an entity's facts; a larger max_nodes shows more)",
             "(5 of 9 Incident entities shown: k_anchors=9 shows them all, with max_nodes at least 9; graph_stats "
             "counts each type)",
             "(not applied as a time window: March 2025; give after and before (dates) to search that period only)"]
    text, truncated = render_search(full, 10**9, hint="Use global_search.")
    assert not truncated and text.splitlines()[-4:] == [*notes, "Use global_search."]
    for budget in (250, 400, 800):
        text, truncated = render_search(full, budget)
        assert truncated and estimate_tokens(text) <= budget and text.endswith("\n" + "\n".join(notes)), budget
        assert text.splitlines()[-4].startswith(f"(truncated to about {budget} tokens; not shown: ")
    # Past half a small budget the answer comes first: the notes that do not fit in that half are left out.
    text, _ = render_search(full, 100)
    assert notes[0] in text and notes[1] not in text and notes[2] not in text and estimate_tokens(text) <= 100
    many = full.model_copy(update={"more_facts": {f"Team {i}": {"MEMBER_OF": 10 - i} for i in range(5)}})
    assert ("Team 2: 8 more MEMBER_OF facts; those of 2 more entities. get_entities"
            in render_search(many, 10**9)[0])
