"""The web UI's reads that no tool answers (core/domain/browse.py), on a real DuckDB file: the passages of an
entity, its neighbourhood, the most connected entities (the store's query against the port's reference
implementation), the namespaces, and the errors of a bad request."""

from __future__ import annotations

import pytest

from duckgraph.core.domain import browse
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput, RelationRef
from duckgraph.ports import GraphStore, InvalidInputError, NotFoundError


@pytest.fixture
def kb(fake_kb):
    fake_kb.add_documents([DocumentInput(id="d1", title="Lab", text="Ada Lovelace wrote about the Analytical "
                                                                     "Engine that Charles Babbage designed.")])
    fake_kb.add_knowledge_graph(
        [NodeInput(name="Ada Lovelace", type="Person", aliases=["Ada"], source_ids=["d1"]),
         NodeInput(name="Analytical Engine", type="Machine", source_ids=["d1"]),
         NodeInput(name="Charles Babbage", type="Person", source_ids=["d1"]),
         NodeInput(name="Difference Engine", type="Machine")],
        [EdgeInput(source="Ada Lovelace", target="Analytical Engine", type="WROTE_ABOUT"),
         EdgeInput(source="Charles Babbage", target="Analytical Engine", type="DESIGNED"),
         EdgeInput(source="Charles Babbage", target="Difference Engine", type="DESIGNED"),
         EdgeInput(source="Ada Lovelace", target="Charles Babbage", type="CORRESPONDED_WITH")],
    )
    fake_kb.add_knowledge_graph([NodeInput(name="Other", type="Thing")], [], namespace="elsewhere")
    return fake_kb


def test_most_connected_counts_relations_that_hold(kb) -> None:
    ranked = browse.run(kb, "most_connected", "default", {"limit": 3})["entities"]
    assert [(e["name"], e["relations"]) for e in ranked] == [
        ("Charles Babbage", 3), ("Ada Lovelace", 2), ("Analytical Engine", 2)]
    kb.curation.delete_relations([RelationRef(source="Charles Babbage", target="Difference Engine",
                                              type="DESIGNED")], "default")
    assert browse.run(kb, "most_connected", "default", {"limit": 1})["entities"][0]["relations"] == 2


def test_the_store_query_matches_the_ports_reference(kb) -> None:
    store = kb.store
    assert store.most_connected("default", limit=10) == GraphStore.most_connected(store, "default", limit=10)
    assert store.most_connected("nowhere", limit=10) == []


def test_entity_passages_and_neighbourhood(kb) -> None:
    passages = browse.run(kb, "entity_passages", "default", {"name": "Ada"})  # an alias leads to it
    assert passages["entity"] == "Ada Lovelace"
    assert [(p["document_id"], p["title"]) for p in passages["passages"]] == [("d1", "Lab")]
    assert {"ada", "lovelace"} <= set(passages["words"])
    around = browse.run(kb, "neighbourhood", "default", {"name": "Ada Lovelace"})
    assert {n["name"] for n in around["nodes"]} == {"Ada Lovelace", "Analytical Engine", "Charles Babbage"}
    assert {(e["source"], e["type"], e["target"]) for e in around["edges"]} == {
        ("Ada Lovelace", "WROTE_ABOUT", "Analytical Engine"), ("Ada Lovelace", "CORRESPONDED_WITH", "Charles Babbage")}
    assert browse.run(kb, "entity_passages", "default", {"name": "Difference Engine"})["passages"] == []


def test_namespaces_are_kept_apart(kb) -> None:
    assert browse.run(kb, "namespaces", "default", {}) == {"namespaces": ["default", "elsewhere"], "default": "default"}
    assert [e["name"] for e in browse.run(kb, "most_connected", "elsewhere", {})["entities"]] == []
    with pytest.raises(NotFoundError):
        browse.run(kb, "neighbourhood", "elsewhere", {"name": "Ada Lovelace"})


def test_bad_requests_are_refused(kb) -> None:
    with pytest.raises(InvalidInputError, match="unknown view 'everything'"):
        browse.run(kb, "everything", "default", {})
    with pytest.raises(InvalidInputError, match="bad arguments for the view 'neighbourhood'"):
        browse.run(kb, "neighbourhood", "default", {"entity": "Ada"})
    with pytest.raises(InvalidInputError, match="invalid namespace"):
        browse.run(kb, "namespaces", "no spaces allowed", {})


def test_communities_by_level_and_one_drawn(kb) -> None:
    from duckgraph.plugins.leiden import LeidenDetector

    assert browse.run(kb, "communities", "default", {}) == {"levels": [], "level": None, "total": 0,
                                                             "communities": [], "freshness": None}
    kb.community_detector = LeidenDetector()
    kb.communities.detector = kb.community_detector
    kb.communities.build("default")
    listed = browse.run(kb, "communities", "default", {"level": 0})
    assert listed["levels"] and listed["level"] == 0 and listed["freshness"]["stale"] is False
    assert listed["total"] == len(listed["communities"]) >= 1
    assert sum(c["size"] for c in listed["communities"]) == 4  # each connected entity in one community
    sizes = [c["size"] for c in listed["communities"]]
    assert sizes == sorted(sizes, reverse=True) and all(c["title"] for c in listed["communities"])
    first = listed["communities"][0]
    drawn = browse.run(kb, "community", "default", {"id": first["id"]})
    assert drawn["report"]["title"] == first["title"]
    assert {n["name"] for n in drawn["nodes"] if n["anchor"]} == {e["name"] for e in first["key_entities"]}
    names = {n["name"] for n in drawn["nodes"]}
    assert len(names) == first["size"] and all({e["source"], e["target"]} <= names for e in drawn["edges"])
    assert browse.run(kb, "communities", "elsewhere", {})["communities"] == []
    with pytest.raises(NotFoundError, match="no community 999999"):
        browse.run(kb, "community", "default", {"id": 999999})
    with pytest.raises(InvalidInputError, match="level 9 does not exist"):
        browse.run(kb, "communities", "default", {"level": 9})


def test_a_merge_preview_says_what_merge_entities_brings_and_keeps(kb) -> None:
    kb.add_documents([DocumentInput(id="d2", text="Augusta Ada King, Countess of Lovelace, met Babbage in 1833.")])
    kb.add_knowledge_graph(
        [NodeInput(name="Augusta Ada King", type="Person", aliases=["Ada", "Countess of Lovelace"],
                   observations=["Met Babbage in 1833.", "Born in London."],
                   properties={"born": 1815, "title": "Countess", "city": "london"}, source_ids=["d2"]),
         NodeInput(name="Ada Lovelace", type="Person", properties={"born": 1816, "city": "London"})],
        [EdgeInput(source="Augusta Ada King", target="Charles Babbage", type="MET"),
         EdgeInput(source="Augusta Ada King", target="Ada Lovelace", type="SAME_AS")])
    preview = browse.run(kb, "merge_preview", "default", {"sources": ["Augusta Ada King"], "target": "Ada Lovelace"})
    assert preview == {
        "target": "Ada Lovelace",
        # "Ada" is the target's alias already; the relation between the two would join Ada Lovelace to itself.
        "sources": [{"name": "Augusta Ada King", "aliases": ["Augusta Ada King", "Countess of Lovelace"],
                     "observations": 2, "properties": 3, "relations": 1, "relations_folded": 0, "relations_between": 1,
                     "passages": 1}],
        # The target's own value wins; "london" and "London" say the same.
        "conflicts": [{"property": "born", "kept": 1816, "kept_from": "Ada Lovelace", "value": 1815,
                       "source": "Augusta Ada King"}],
    }
    merged = kb.curation.merge_entities(["Augusta Ada King"], "Ada Lovelace", "default")
    ada = kb.curation.get_entities(["Ada Lovelace"], "default")[0][0]
    assert ada.properties == {"born": 1816, "city": "London", "title": "Countess"}
    assert "born: 1815 (from Augusta Ada King)" in ada.observations
    assert set(merged.aliases) == {"Ada", "Augusta Ada King", "Countess of Lovelace"} and merged.edges_deleted == 1
    with pytest.raises(NotFoundError, match="no entity named 'Nobody'"):
        browse.run(kb, "merge_preview", "default", {"sources": ["Nobody"], "target": "Ada Lovelace"})
    with pytest.raises(InvalidInputError, match="name at least one source"):
        browse.run(kb, "merge_preview", "default", {"sources": [], "target": "Ada Lovelace"})


def test_a_merge_preview_counts_only_what_the_merge_adds(kb) -> None:
    # Ada has WROTE_ABOUT the Engine and d1's passage already; "Lovelace" and "A. L." repeat that relation and that
    # passage, and their KNOWS between them is a loop once both are merged.
    kb.add_documents([DocumentInput(id="d3", text="Lovelace and A. L. wrote about the Analytical Engine.")])
    kb.add_knowledge_graph(
        [NodeInput(name="Lovelace", type="Person", observations=["Wrote notes.", "Likes maths."],
                   source_ids=["d1", "d3"]),
         NodeInput(name="A. L.", type="Person", observations=["wrote notes."], source_ids=["d1"])],
        [EdgeInput(source="Lovelace", target="Analytical Engine", type="WROTE_ABOUT"),
         EdgeInput(source="A. L.", target="Analytical Engine", type="WROTE_ABOUT"),
         EdgeInput(source="Lovelace", target="Difference Engine", type="STUDIED"),
         EdgeInput(source="A. L.", target="Difference Engine", type="STUDIED"),
         EdgeInput(source="Lovelace", target="A. L.", type="KNOWS")])
    kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person", observations=["Wrote notes."])], [])
    preview = browse.run(kb, "merge_preview", "default", {"sources": ["Lovelace", "A. L."], "target": "Ada Lovelace"})
    lines = {s["name"]: {k: s[k] for k in ("observations", "relations", "relations_folded", "relations_between",
                                           "passages")} for s in preview["sources"]}
    assert lines == {
        # Its WROTE_ABOUT folds into Ada's, its STUDIED is new; d1 is Ada's passage already.
        "Lovelace": {"observations": 1, "relations": 1, "relations_folded": 1, "relations_between": 1, "passages": 1},
        # Both its relations fold (one into Ada's, one into Lovelace's STUDIED); KNOWS is on Lovelace's line only.
        "A. L.": {"observations": 0, "relations": 0, "relations_folded": 2, "relations_between": 0, "passages": 0},
    }
    before = browse.run(kb, "neighbourhood", "default", {"name": "Ada Lovelace"})["edges"]
    kb.curation.merge_entities(["Lovelace", "A. L."], "Ada Lovelace", "default")
    after = browse.run(kb, "neighbourhood", "default", {"name": "Ada Lovelace"})["edges"]
    assert len(after) - len(before) == sum(line["relations"] for line in lines.values())
    passages = browse.run(kb, "entity_passages", "default", {"name": "Ada Lovelace"})["passages"]
    assert {p["document_id"] for p in passages} == {"d1", "d3"}
