"""Anchor & expand on a real DuckDB file with the hashing embedder: texts sharing words are similar.

The graphs are built so that relevance is decided by shared words with the query "Who was Ada Lovelace?":
on-topic nodes and facts mention Ada Lovelace, off-topic ones share no word with the query.
"""

from __future__ import annotations

import functools
from collections import defaultdict, deque

import pytest

from duckgraph.core.domain import passage_ranking, relevance, retrieval
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from duckgraph.core.domain.render import CHARS_PER_TOKEN
from duckgraph.core.domain.search_options import SearchOptions
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.plugins.duckdb import DuckDBStore
from tests.fakes import HashingEmbedder

QUERY = "Who was Ada Lovelace?"


def node(name: str, type_: str, description: str) -> NodeInput:
    return NodeInput(name=name, type=type_, description=description)


def edge(source: str, type_: str, target: str, description: str | None = None) -> EdgeInput:
    return EdgeInput(source=source, target=target, type=type_, description=description)


def add_ada_graph(kb) -> None:
    """Ada Lovelace -- Charles Babbage -- {Analytical Engine (on topic), Banana Bread (off topic)} -- ..."""
    kb.add_knowledge_graph(
        [
            node("Ada Lovelace", "Person", "Mathematician and writer."),
            node("Charles Babbage", "Person", "Engineer; friend and mentor of Ada Lovelace."),
            node("Analytical Engine", "Machine", "Mechanical computer; Ada Lovelace wrote its first program."),
            node("Banana Bread", "Recipe", "Sweet loaf baked with ripe fruit."),
            node("Oven", "Appliance", "Hot box for baking loaves."),
            node("Lovelace Medal", "Award", "Prize named after Ada Lovelace, the mathematician."),
        ],
        [
            edge("Ada Lovelace", "knew", "Charles Babbage"),
            edge("Charles Babbage", "designed", "Analytical Engine"),
            edge("Charles Babbage", "baked", "Banana Bread"),
            edge("Banana Bread", "baked in", "Oven"),
            edge("Oven", "displayed at", "Lovelace Medal"),
        ],
    )
    kb.add_documents([
        DocumentInput(id=f"doc{i}", title=f"Notes {i}",
                      text=f"Ada Lovelace wrote note {i} about the engine. " + "It was long and detailed. " * 20)
        for i in range(6)
    ])


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    """The fake_kb set-up (real DuckDB file, hashing embedder) with the Ada graph, shared: searches only read."""
    knowledge_base = KnowledgeBase(DuckDBStore(tmp_path_factory.mktemp("ada") / "kb.duckdb"), HashingEmbedder())
    with knowledge_base:
        add_ada_graph(knowledge_base)
        yield knowledge_base


def test_the_shared_graph_is_the_fake_kb_setup(fake_kb, kb) -> None:
    # The module-scoped graph saves a second per test; this checks it is built like the fake_kb fixture.
    assert type(fake_kb.store) is type(kb.store)
    assert type(fake_kb.embedder) is type(kb.embedder)
    add_ada_graph(fake_kb)
    assert fake_kb.search(QUERY, k_anchors=1, hops=2) == kb.search(QUERY, k_anchors=1, hops=2)


def names(nodes) -> set[str]:
    return {n.name for n in nodes}


def assert_connected(result: SearchResult) -> None:
    """Every kept non-anchor node has a path to an anchor over the result's edges."""
    graph: dict[str, set[str]] = defaultdict(set)
    for e in result.edges:
        graph[e.source].add(e.target)
        graph[e.target].add(e.source)
    anchors = names(result.anchors)
    seen = set(anchors)
    queue = deque(anchors)
    while queue:
        for neighbour in graph[queue.popleft()]:
            if neighbour not in seen:
                seen.add(neighbour)
                queue.append(neighbour)
    assert names(result.nodes) <= seen, f"not connected to an anchor: {names(result.nodes) - seen}"
    kept = names(result.nodes)
    assert all(e.source in kept and e.target in kept for e in result.edges), "an edge leads out of the result"


# -- anchors -----------------------------------------------------------------------------------------------


def test_the_named_entity_is_an_anchor(kb) -> None:
    result = kb.search(QUERY)
    assert "Ada Lovelace" in names(result.anchors)
    assert all(a.hop == 0 for a in result.anchors)
    assert names(result.anchors) <= names(result.nodes)


def test_the_named_entity_is_the_single_anchor(kb) -> None:
    result = kb.search(QUERY, k_anchors=1)
    assert names(result.anchors) == {"Ada Lovelace"}


def test_a_name_with_periods_is_found_verbatim(fake_kb) -> None:
    # The vector path prefers "Surgery Team Rota" (more shared words); the name path must still find
    # "Dr. Smith", whose key keeps its period.
    fake_kb.add_knowledge_graph(
        [
            node("Dr. Smith", "Person", "Cardiologist."),
            node("Surgery Team Rota", "Schedule", "Who is on the surgery team this week."),
        ],
        [edge("Dr. Smith", "leads", "Surgery Team Rota")],
    )
    result = fake_kb.search("Who is on the surgery team with Dr. Smith this week?", k_anchors=1, hops=0)
    assert names(result.anchors) == {"Dr. Smith"}


def test_no_anchor_without_nodes(fake_kb) -> None:
    fake_kb.add_documents([DocumentInput(id="d1", text="Ada Lovelace wrote notes on the engine.")])
    result = fake_kb.search(QUERY)
    assert result.anchors == [] and result.nodes == [] and result.edges == []
    assert [p.document_id for p in result.passages] == ["d1"]


# -- expansion ---------------------------------------------------------------------------------------------


def test_hops_0_is_no_expansion(kb) -> None:
    result = kb.search(QUERY, k_anchors=1, hops=0)
    assert names(result.nodes) == {"Ada Lovelace"}
    assert result.edges == []


def test_hops_1_reaches_neighbours_but_not_two_hops_out(kb) -> None:
    result = kb.search(QUERY, k_anchors=1, hops=1)
    assert names(result.nodes) == {"Ada Lovelace", "Charles Babbage"}
    assert {n.name: n.hop for n in result.nodes} == {"Ada Lovelace": 0, "Charles Babbage": 1}
    assert [(e.source, e.type, e.target) for e in result.edges] == [("Ada Lovelace", "KNEW", "Charles Babbage")]


def test_hops_2_reaches_on_topic_and_prunes_off_topic(kb) -> None:
    result = kb.search(QUERY, k_anchors=1, hops=2)
    kept = names(result.nodes)
    assert "Analytical Engine" in kept  # mentions Ada Lovelace
    assert "Banana Bread" not in kept  # shares no word with the query, nor does the fact that reaches it
    assert {n.name: n.hop for n in result.nodes}["Analytical Engine"] == 2
    assert_connected(result)


def test_scores_rank_anchors_first_and_decay_with_hops(kb) -> None:
    result = kb.search(QUERY, k_anchors=1, hops=2)
    hops = [n.hop for n in result.nodes]
    assert hops == sorted(hops)
    by_name = {n.name: n for n in result.nodes}
    assert by_name["Ada Lovelace"].score > by_name["Charles Babbage"].score > by_name["Analytical Engine"].score


def test_an_on_topic_node_beyond_an_off_topic_one_keeps_the_path(kb) -> None:
    # Lovelace Medal (on topic) is reached only through Banana Bread and Oven (off topic): those stay in
    # the result so that it is connected.
    result = kb.search(QUERY, k_anchors=1, hops=4)
    kept = names(result.nodes)
    assert "Lovelace Medal" in kept
    assert {"Charles Babbage", "Banana Bread", "Oven"} <= kept
    assert_connected(result)


def test_a_node_reached_over_a_matching_fact_is_kept(fake_kb) -> None:
    # The node's own text shares nothing with the query, but the fact that reaches it is about Ada Lovelace.
    fake_kb.add_knowledge_graph(
        [node("Ada Lovelace", "Person", "Mathematician."), node("Somerset", "Place", "English county.")],
        [edge("Ada Lovelace", "lived in", "Somerset", "Ada Lovelace lived there.")],
    )
    result = fake_kb.search(QUERY, k_anchors=1, hops=1)
    assert "Somerset" in names(result.nodes)


def test_max_nodes_is_respected(fake_kb) -> None:
    fans = [node(f"Ada Lovelace Society {i}", "Club", f"Club number {i} for fans of Ada Lovelace.") for i in range(8)]
    fake_kb.add_knowledge_graph(
        [node("Ada Lovelace", "Person", "Mathematician."), *fans],
        [edge("Ada Lovelace", "inspired", fan.name) for fan in fans],
    )
    unlimited = fake_kb.search(QUERY, k_anchors=1, hops=1, max_nodes=100)
    assert len(unlimited.nodes) == 9
    for max_nodes in (1, 2, 3, 8):
        result = fake_kb.search(QUERY, k_anchors=1, hops=1, max_nodes=max_nodes)
        assert len(result.nodes) == max_nodes
        assert "Ada Lovelace" in names(result.nodes)
        assert_connected(result)


def test_max_nodes_never_breaks_connectivity(kb) -> None:
    # With room for only 3 nodes, Lovelace Medal (4 hops, needs its whole path) cannot be kept.
    result = kb.search(QUERY, k_anchors=1, hops=4, max_nodes=3)
    assert len(result.nodes) <= 3
    assert "Lovelace Medal" not in names(result.nodes)
    assert_connected(result)


def test_result_is_connected_with_several_anchors(kb) -> None:
    result = kb.search(QUERY, hops=2)
    assert len(result.anchors) > 1
    assert_connected(result)


# -- passages and the text rendering ------------------------------------------------------------------------


def test_passages_mentioning_the_query_are_found(kb) -> None:
    result = kb.search(QUERY, max_passages=3)
    assert len(result.passages) == 3
    assert all(p.document_id.startswith("doc") for p in result.passages)
    scores = [p.score for p in result.passages]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("budget", [40, 100, 250])
def test_search_text_respects_the_token_budget(kb, budget: int) -> None:
    result = kb.search(QUERY, token_budget=budget, hops=4)
    assert len(result.text) / CHARS_PER_TOKEN <= budget + 10
    assert result.truncated
    assert "truncated" in result.text.splitlines()[-1]


def test_search_text_is_whole_with_a_large_budget(kb) -> None:
    result = kb.search(QUERY, token_budget=100_000)
    assert not result.truncated
    assert "truncated" not in result.text
    for n in result.nodes:
        assert n.name in result.text
    for p in result.passages:
        assert f"[{p.document_id}#{p.chunk_id}]" in result.text


def floor_passed(kb, query: str, best: float) -> bool:
    """Whether the floor of 0.40 lets a query through whose nearest entity and passage are `best` similar."""
    options = SearchOptions(relevance_floor=0.40)
    return relevance.relevant(kb.store, query, None, [(1, best)], [(1, best)], kb.namespace, options) is not None


def test_the_floor_moves_with_the_names_the_query_gives(kb) -> None:
    relevant = functools.partial(floor_passed, kb)  # name_margin 0.12: 0.352 / 0.40 / 0.448

    # Every name the query gives is stored ("Lovelace", and "Ada" as a word of a passage): a middling match counts.
    assert relevant("What did Ada Lovelace write?", 0.37)
    # No name: the floor itself.
    assert not relevant("what did she write?", 0.37) and relevant("what did she write?", 0.41)
    # A name nothing stored holds ("Grace Hopper", or one of two): more is needed.
    assert not relevant("What did Grace Hopper write?", 0.43) and relevant("What did Grace Hopper write?", 0.46)
    assert not relevant("What did Ada Lovelace tell Grace Hopper?", 0.43)
    # Far from the floor the names do not matter.
    assert not relevant("What did Ada Lovelace write?", 0.30) and relevant("What did Grace Hopper write?", 0.50)


def test_a_name_whose_stem_is_not_its_own_stem_is_found_stored(fake_kb) -> None:
    # "Ilse" gives the term "ils", and "ils" the term "il": the index is asked for the word, stemmed once.
    fake_kb.add_knowledge_graph([node("Ilse Marrow", "Person", "Captain of a schooner.")], [])
    assert relevance._names_stored(fake_kb.store, "How old is Ilse's mentor?", fake_kb.namespace) == -1
    assert relevance._names_stored(fake_kb.store, "How old is Ilse's Ilsa?", fake_kb.namespace) == 1


def test_the_floor_rises_when_the_memory_holds_none_of_the_words_asked_with(kb) -> None:
    relevant = functools.partial(floor_passed, kb)  # word_margin 0.24: 0.448 for a stored name, 0.496 for none

    # Nothing stored holds "blood" or "type": what is asked was never stored, whatever the name.
    assert not relevant("What is Ada Lovelace's blood type?", 0.43)
    assert relevant("What is Ada Lovelace's blood type?", 0.46)
    assert not relevant("what blood type?", 0.48) and relevant("what blood type?", 0.50)
    # One word stored is enough, in any of its forms ("wrote" for "write"); words that ask for anything a memory
    # holds ("tell", "know") do not count.
    assert relevant("What did Ada Lovelace write?", 0.37)
    assert relevant("What is Ada Lovelace's blood type in her notes?", 0.37)
    assert relevant("Tell me what you know about Ada Lovelace", 0.37)
    assert relevance._words_stored(kb.store, "What did Ada Lovelace write?", kb.namespace) == 0
    assert relevance._words_stored(kb.store, "What is Ada Lovelace's blood type?", kb.namespace) == 1
    # Nothing asked but the names: whatever is stored of them answers, however far the nearest vector.
    assert relevance._words_stored(kb.store, "Tell me about Ada Lovelace", kb.namespace) is None
    assert relevant("Tell me about Ada Lovelace", 0.10) and relevant("What do you know about Lovelace?", 0.10)
    assert not relevant("Tell me about Grace Hopper", 0.10)


@pytest.mark.parametrize(("name", "parts"), [
    ("Fredericton, New Brunswick", ["Fredericton", "New Brunswick"]),
    ("2,913,123", []),
    ("Maharashtra state", ["Maharashtra"]),
    ("2000 Hong Kong action film", ["Hong Kong"]),
    ("electoral district of Kings South", ["Kings South"]),
    ("Ängelholm municipality", ["Ängelholm"]),
    # Written as one proper name (a title, a date): the capitalised words are no names of their own.
    ("The Jewel of the Nile", []),
    ("Jump for Glory", []),
    ("7 December 1988", []),
    ("Hank Snow", []),
    ("state", []),
])
def test_the_names_inside_a_name(name: str, parts: list[str]) -> None:
    assert passage_ranking._name_parts(name) == parts


def test_the_parts_compared_near_the_floor_are_the_sentences_and_observations_that_share_the_querys_words(
        fake_kb) -> None:
    from duckgraph.core.domain.model import MemoryEntityInput
    from duckgraph.core.domain import memory_server

    fake_kb.add_documents([
        DocumentInput(id="ci", title="CI notes", text="Run the tests with make test; the suite needs a database. "
                      "Deploys are frozen on Fridays.\nNobody likes flaky tests."),
        DocumentInput(id="one", title="Short", text="Run the linter before each test."),  # one sentence: a part too
    ])
    memory_server.create_entities(fake_kb, [MemoryEntityInput(
        name="Tomas", entityType="person", observations=["Borrowed the test rig", "Lives in Utrecht"])])
    query = "How do I run the tests?"
    words = retrieval.match_words(fake_kb.store, query, fake_kb.namespace, SearchOptions())
    embedded: list[list[str]] = []

    class Spy:  # the embedder, noting what it is asked to embed
        @staticmethod
        def embed_documents(texts):
            embedded.append(list(texts))
            return fake_kb.embedder.embed_documents(texts)

    embed = Spy()

    vector = fake_kb.embedder.embed_query(query)
    observed, sentence = relevance._parts_near(fake_kb.store, query, vector, fake_kb.namespace, words, embed, 8)
    [texts] = embedded  # one batch
    # Most shared words first ("run" and "test"), then one each; a sentence after its passage's title, an
    # observation after its entity's name; then each sentence alone.
    assert set(texts[:2]) == {"CI notes\nRun the tests with make test;", "Short\nRun the linter before each test."}
    assert set(texts[2:4]) == {"CI notes\nNobody likes flaky tests.", "Tomas: Borrowed the test rig"}
    assert set(texts[4:]) == {"Run the tests with make test;", "Run the linter before each test.",
                              "Nobody likes flaky tests."}
    tomas = fake_kb.store.find_nodes(fake_kb.namespace, ["tomas"])[0].id
    assert set(observed) == {tomas} and -1.0 <= sentence <= 1.0

    # However many share a word, one search compares at most `limit` of them (the sentences among them alone too).
    memory_server.create_entities(fake_kb, [MemoryEntityInput(
        name="Lab", entityType="place", observations=[f"Test bench {n}" for n in range(12)])])
    words = retrieval.match_words(fake_kb.store, query, fake_kb.namespace, SearchOptions())
    relevance._parts_near(fake_kb.store, query, vector, fake_kb.namespace, words, embed, 8)
    assert len(embedded) == 2 and len(embedded[1]) == 8 + 2
    assert embedded[1][0] == "CI notes\nRun the tests with make test;"
    assert embedded[1][8:] == ["Run the tests with make test;", "Run the linter before each test."]
    # A name the query gives is weighed by the floor itself: a part that shares only it is not compared.
    relevance._parts_near(fake_kb.store, "What is Tomas's blood type?", vector, fake_kb.namespace,
                          retrieval.match_words(fake_kb.store, "What is Tomas's blood type?", fake_kb.namespace,
                                                SearchOptions()), embed, 8)
    assert len(embedded) == 2


def test_a_table_row_is_compared_under_its_header_the_row_of_the_name_asked_about_first(fake_kb) -> None:
    rows = [f"| {name} | {name.split()[0].lower()}@example.com | +1 555 01{n:02d} |"
            for n, name in enumerate(["Hugo Schulz", "Tara Petrov", "Maria Garcia", "Ines Rossi"])]
    fake_kb.add_documents([DocumentInput(id="contacts", title="Contacts", text="\n".join(
        ["| name | email | phone |", "| --- | --- | --- |", *rows]))])
    query = "What is Maria Garcia's phone number?"
    words = retrieval.match_words(fake_kb.store, query, fake_kb.namespace, SearchOptions())
    embedded: list[list[str]] = []

    class Spy:
        @staticmethod
        def embed_documents(texts):
            embedded.append(list(texts))
            return fake_kb.embedder.embed_documents(texts)

    relevance._parts_near(fake_kb.store, query, fake_kb.embedder.embed_query(query), fake_kb.namespace, words, Spy(),
                          8)
    # Her row shares only her name, its header "phone": compared under the header, before the header alone (which
    # shares as many of the other words and no name); the rows of other names are not.
    header, maria = "| name | email | phone |", "| Maria Garcia | maria@example.com | +1 555 0102 |"
    assert embedded == [[f"Contacts\n{header}\n{maria}", f"Contacts\n{header}", f"{header}\n{maria}", header]]
    assert relevance._table_rows(f"Intro.\n{header}\n| --- | --- | --- |\n{maria}\n\nAfter.") == (
        [(header, maria)], f"Intro.\n{header}\n| --- | --- | --- |\n\nAfter.")
