"""Entity resolution at ingest (policy in duckgraph.core.domain.resolution), on a real DuckDB file."""

from __future__ import annotations

import pytest

from duckgraph.core.domain.model import EdgeInput, NodeInput
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import InvalidInputError, loose_key


def node(name: str, type_: str = "Work", **fields) -> NodeInput:
    return NodeInput(name=name, type=type_, **fields)


def names(kb) -> list[str]:
    return sorted(n.name for n in kb.store.list_nodes(kb.namespace, limit=1000))


def test_case_and_spacing_variants_are_one_entity(fake_kb) -> None:
    fake_kb.add_knowledge_graph([node("Journal of Mathematical Physics", "Journal")], [])
    result = fake_kb.add_knowledge_graph([node("journal of  mathematical physics", "Journal")], [])
    assert result.nodes_created == 0 and names(fake_kb) == ["Journal of Mathematical Physics"]


def test_accent_and_punctuation_variants_merge_and_are_reported(fake_kb) -> None:
    fake_kb.add_knowledge_graph([node("Aschenbrödel", description="A ballet.")], [])
    result = fake_kb.add_knowledge_graph(
        [node("Aschenbrodel", description="Music by Johann Strauss II."), node("Johann Strauss II", "Person")],
        [EdgeInput(source="Aschenbrodel", target="Johann Strauss II", type="COMPOSED_BY")],
    )
    assert [(r.name, r.into) for r in result.resolved] == [("Aschenbrodel", "Aschenbrödel")]
    assert names(fake_kb) == ["Aschenbrödel", "Johann Strauss II"]
    [stored] = fake_kb.store.find_nodes(fake_kb.namespace, ["aschenbrödel"])
    assert "Aschenbrodel" in stored.aliases and "Music by Johann Strauss II." in stored.description
    [fact] = fake_kb.store.neighbors([stored.id], fake_kb.namespace)
    assert fact.source_id == stored.id and fact.type == "COMPOSED_BY"


def test_variants_given_as_distinct_in_one_call_stay_distinct(fake_kb) -> None:
    # The host's 500-relation batch that was refused whole: resolution had joined the two, then refused their
    # relation as a self-loop.
    edges = [EdgeInput(source="Cherry Creek, Colorado", target="Cherry Creek (Colorado)", type="MENTIONS"),
             EdgeInput(source="Denver", target="Cherry Creek, Colorado", type="NEAR")]
    result = fake_kb.add_knowledge_graph(
        [node("Cherry Creek, Colorado", "Place"), node("Cherry Creek (Colorado)", "Place"), node("Denver", "Place")],
        edges)
    assert result.nodes_created == 3 and not result.resolved and not result.skipped_edges
    assert result.edges_created == 2
    assert names(fake_kb) == ["Cherry Creek (Colorado)", "Cherry Creek, Colorado", "Denver"]


def test_a_call_naming_a_stored_entity_and_its_variant_keeps_them_apart(fake_kb) -> None:
    fake_kb.add_knowledge_graph([node("Cherry Creek, Colorado", "Place")], [])
    result = fake_kb.add_knowledge_graph(
        [node("Cherry Creek (Colorado)", "Place"), node("Cherry Creek, Colorado", "Place")],
        [EdgeInput(source="Cherry Creek, Colorado", target="Cherry Creek (Colorado)", type="MENTIONS")])
    assert (result.nodes_created, result.edges_created) == (1, 1) and not result.resolved
    assert names(fake_kb) == ["Cherry Creek (Colorado)", "Cherry Creek, Colorado"]
    # Two variants of one stored name in one call: at most one of them joins it, the other stays its own.
    result = fake_kb.add_knowledge_graph([node("Jean-Luc  Picard!", "Person"), node("Jean Luc Picard", "Person")], [])
    assert result.nodes_created == 2


def test_a_variant_alone_still_joins_the_stored_entity(fake_kb) -> None:
    fake_kb.add_knowledge_graph([node("Jean-Luc Picard", "Person")], [])
    result = fake_kb.add_knowledge_graph([node("Jean Luc Picard", "Person")], [])
    assert result.nodes_created == 0 and [(r.name, r.into) for r in result.resolved] == [
        ("Jean Luc Picard", "Jean-Luc Picard")]


def test_an_edge_whose_ends_resolution_joined_is_skipped_and_reported(fake_kb) -> None:
    fake_kb.add_knowledge_graph([node("International Business Machines", "Organization", aliases=["IBM"]),
                                 node("Thomas Watson", "Person")], [])
    result = fake_kb.add_knowledge_graph([], [
        EdgeInput(source="IBM", target="International Business Machines", type="SAME_AS"),
        EdgeInput(source="Thomas Watson", target="IBM", type="LED"),
    ])
    assert result.edges_created == 1
    [skipped] = result.skipped_edges
    assert (skipped.source, skipped.target, skipped.type) == ("IBM", "International Business Machines", "SAME_AS")
    assert "International Business Machines" in skipped.reason
    assert any("skipped" in hint for hint in result.hints)
    assert fake_kb.stats()["edge_types"] == {"LED": 1}


def test_a_self_loop_the_caller_wrote_is_still_refused(fake_kb) -> None:
    fake_kb.add_knowledge_graph([node("Ouroboros", "Symbol")], [])
    with pytest.raises(InvalidInputError, match="same entity"):
        fake_kb.add_knowledge_graph([], [EdgeInput(source="Ouroboros", target="ouroboros ", type="EATS")])
    assert fake_kb.stats()["edges"] == 0


def test_an_alias_of_one_entity_of_the_same_type_merges(fake_kb) -> None:
    fake_kb.add_knowledge_graph([node("International Business Machines", "Organization", aliases=["IBM"])], [])
    result = fake_kb.add_knowledge_graph([node("IBM", "Organization", description="Makes mainframes.")], [])
    assert result.nodes_created == 0 and [r.into for r in result.resolved] == ["International Business Machines"]


def test_another_type_is_another_entity(fake_kb) -> None:
    fake_kb.add_knowledge_graph([node("Apple Inc.", "Organization", aliases=["Apple"])], [])
    result = fake_kb.add_knowledge_graph([node("apple", "Fruit")], [])
    assert result.nodes_created == 1 and not result.resolved
    assert names(fake_kb) == ["Apple Inc.", "apple"]


def test_an_ambiguous_alias_merges_nothing(fake_kb) -> None:
    fake_kb.add_knowledge_graph([node("Mercury (planet)", "Thing", aliases=["Mercury"]),
                                 node("Mercury (element)", "Thing", aliases=["Mercury"])], [])
    result = fake_kb.add_knowledge_graph([node("Mercury", "Thing")], [])
    assert result.nodes_created == 1 and not result.resolved


def test_files_without_loose_keys_get_them_at_open(db_path) -> None:
    from tests.fakes import HashingEmbedder

    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([node("Aschenbrödel")], [])
        # What a file written before loose keys existed holds.
        kb.store._con.execute("DELETE FROM node_names WHERE key = ?", [loose_key("Aschenbrödel")])
        kb.store._con.execute("DELETE FROM meta WHERE key = 'name_keys'")
        # (Checked in the table: find_nodes answers from the store's in-memory mirror, loaded at open.)
        assert kb.store._con.execute("SELECT count(*) FROM node_names WHERE key = 'aschenbrodel'").fetchone()[0] == 0
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        assert [n.name for n in kb.store.find_nodes(kb.namespace, ["aschenbrodel"])] == ["Aschenbrödel"]


def test_new_entities_are_checked_for_near_duplicates_in_one_batched_search(fake_kb, monkeypatch) -> None:
    fake_kb.add_knowledge_graph([node("Ada Lovelace", "Person", description="Mathematician.")], [])
    batches = []
    search = fake_kb.store.vector_search_batch

    def batch(kind, queries, *rest):
        batches.append((kind, len(queries)))
        return search(kind, queries, *rest)

    monkeypatch.setattr(fake_kb.store, "vector_search_batch", batch)
    result = fake_kb.add_knowledge_graph(  # the same words, so the same vector from the hashing embedder
        [node("Lovelace Ada", "Person", description="Mathematician."), node("Charles Babbage", "Person"),
         node("Analytical Engine")], [])
    assert batches == [("node", 3)]
    assert [(d.name, d.similar_to) for d in result.possible_duplicates] == [("Lovelace Ada", "Ada Lovelace")]


@pytest.mark.model
def test_a_near_duplicate_is_reported_not_merged_and_merge_entities_folds_it(real_kb) -> None:
    real_kb.add_knowledge_graph([node("Barack Obama", "Person", description="44th president of the United States.")],
                                [])
    result = real_kb.add_knowledge_graph(
        [node("Barack H. Obama", "Person", description="44th president of the United States."),
         node("Michelle Obama", "Person", description="Lawyer and author; first lady of the United States.")], []
    )
    assert result.nodes_created == 2 and not result.resolved
    assert [(d.name, d.similar_to) for d in result.possible_duplicates] == [("Barack H. Obama", "Barack Obama")]
    assert result.possible_duplicates[0].similarity >= 0.92
    real_kb.curation.merge_entities(["Barack H. Obama"], "Barack Obama", real_kb.namespace)
    assert names(real_kb) == ["Barack Obama", "Michelle Obama"]
