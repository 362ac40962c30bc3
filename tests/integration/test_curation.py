"""Curation use cases on a real DuckDB file: get, update, merge, delete, observations, paths."""

import pytest

from duckgraph.core.domain.limits import MAX_OBSERVATIONS
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput, RelationRef
from duckgraph.ports import InvalidInputError, NotFoundError

NS = "default"


@pytest.fixture
def kb(fake_kb):
    fake_kb.add_knowledge_graph(
        [NodeInput(name="Bob", type="Person", description="A builder.", aliases=["Bobby"], properties={"age": 40}),
         NodeInput(name="Robert", type="Person", description="An engineer.", properties={"age": 41, "city": "Oslo"}),
         NodeInput(name="Acme", type="Organization"),
         NodeInput(name="Zed", type="Person"),
         NodeInput(name="Oslo", type="City")],
        [EdgeInput(source="Bob", target="Acme", type="works at"),
         EdgeInput(source="Robert", target="Acme", type="WORKS_AT"),
         EdgeInput(source="Bob", target="Robert", type="KNOWS"),
         EdgeInput(source="Zed", target="Acme", type="FOUNDED"),
         EdgeInput(source="Acme", target="Oslo", type="LOCATED_IN")],
    )
    return fake_kb


def names_of(entity) -> set[tuple[str, str, str]]:
    return {(r.source, r.type, r.target) for r in entity.relations}


def test_get_entities_returns_relations_observations_and_missing_names(kb):
    kb.curation.add_observations("Bob", ["likes tea"], NS)
    entities, missing = kb.curation.get_entities(["bob", "Bobby", "nobody"], NS)
    assert missing == ["nobody"]
    assert len(entities) == 1  # "bob" and the alias "Bobby" are the same entity
    bob = entities[0]
    assert bob.observations == ["likes tea"] and bob.properties == {"age": 40}
    assert names_of(bob) == {("Bob", "WORKS_AT", "Acme"), ("Bob", "KNOWS", "Robert")}


def test_rename_keeps_every_edge_and_the_old_name_as_alias(kb):
    before = kb.stats()
    renamed = kb.curation.update_entity("Zed", NS, new_name="Zed Shaw", type="Founder")
    assert renamed.name == "Zed Shaw" and renamed.type == "Founder" and "Zed" in renamed.aliases
    assert names_of(renamed) == {("Zed Shaw", "FOUNDED", "Acme")}
    assert kb.stats()["edges"] == before["edges"] and kb.stats()["nodes"] == before["nodes"]
    assert kb.curation.get_entities(["Zed"], NS)[0][0].name == "Zed Shaw"  # found by its old name


def test_rename_onto_an_existing_name_points_to_merge(kb):
    with pytest.raises(InvalidInputError, match="merge_entities"):
        kb.curation.update_entity("Bob", NS, new_name="robert")


def test_update_re_embeds_the_entity(kb):
    vector_before = kb.store.similarities("node", [kb.curation.require(["Oslo"], NS)["Oslo"].id],
                                          kb.embedder.embed_query("capital of Norway"))
    kb.curation.update_entity("Oslo", NS, description="Capital of Norway")
    vector_after = kb.store.similarities("node", list(vector_before), kb.embedder.embed_query("capital of Norway"))
    assert list(vector_after.values())[0] > list(vector_before.values())[0]


def test_merge_moves_edges_collapses_duplicates_and_keeps_aliases(kb):
    result = kb.curation.merge_entities(["Bob"], "Robert", NS)
    assert result.merged == ["Bob"] and {"Bob", "Bobby"} <= set(result.aliases)
    robert = kb.curation.get_entities(["Robert"], NS)[0][0]
    # Bob -WORKS_AT-> Acme duplicated Robert's edge and Bob -KNOWS-> Robert became a self-loop: both gone.
    assert names_of(robert) == {("Robert", "WORKS_AT", "Acme")}
    assert (result.edges_collapsed, result.edges_deleted) == (1, 1)
    assert robert.properties == {"age": 41, "city": "Oslo"}  # the target's values win
    assert "A builder." in robert.description and "An engineer." in robert.description
    assert kb.curation.get_entities(["Bob"], NS)[0][0].name == "Robert"  # the old name now finds the target
    assert kb.stats()["nodes"] == 4
    health = kb.store.health()
    assert health["vectors"]["node"] == 4 and health["vectors"]["edge"] == kb.stats()["edges"]


def test_a_merge_into_an_entity_of_type_unknown_gives_it_the_source_s_type(kb):
    # What doctor proposes for a relation's placeholder end and the entity created later under another spelling.
    kb.add_knowledge_graph([NodeInput(name="Acme Inc.", type="unknown"), NodeInput(name="Acme Inc", type="Company"),
                            NodeInput(name="Acme Labs", type="unknown")], [])
    result = kb.curation.merge_entities(["Acme Labs", "Acme Inc"], "Acme Inc.", NS)
    assert result.hints == ["'Acme Inc.' had type 'unknown': it takes 'Company' from 'Acme Inc'"]
    [merged] = kb.curation.get_entities(["Acme Inc."], NS)[0]
    assert merged.type == "Company"
    # A typed target keeps its own type.
    kb.add_knowledge_graph([NodeInput(name="Bobby Tables", type="unknown")], [])
    assert kb.curation.merge_entities(["Bobby Tables"], "Bob", NS).hints == []
    assert kb.curation.get_entities(["Bob"], NS)[0][0].type == "Person"


def test_a_merge_or_a_write_that_would_go_over_an_entity_s_limits_is_refused_and_changes_nothing(kb):
    # Each part within the limits, the two together over them: they used to be cut without a word.
    half = MAX_OBSERVATIONS // 2 + 50
    kb.curation.add_observations("Bob", [f"bob fact {i}" for i in range(half)], NS)
    kb.curation.add_observations("Robert", [f"robert fact {i}" for i in range(half)], NS)
    # (+ 1: Bob's age, which Robert's replaces, is kept as an observation.)
    with pytest.raises(InvalidInputError,
                       match=f"{2 * half + 1} observations .the limit is {MAX_OBSERVATIONS}.*nothing was merged"):
        kb.curation.merge_entities(["Bob"], "Robert", NS)
    kb.curation.update_entity("Zed", NS, description="z" * 2_800, properties={"notes": "n" * 10_000})
    kb.curation.update_entity("Oslo", NS, description="o" * 2_000, properties={"facts": "f" * 10_000})
    with pytest.raises(InvalidInputError, match="description of 4802 characters .the limit is 4000. and properties"):
        kb.curation.merge_entities(["Oslo"], "Zed", NS)
    assert kb.stats()["nodes"] == 5
    # A description that would pass the limit by being appended is not: the stored one stays (see
    # test_description_limits.py), and the call is not refused.
    kept = kb.add_knowledge_graph([NodeInput(name="Zed", type="Person", description="y" * 2_600)], [])
    assert any("The description of 'Zed' is full" in hint for hint in kept.hints)
    with pytest.raises(InvalidInputError, match="properties of 20"):
        kb.add_knowledge_graph([NodeInput(name="Zed", type="Person", properties={"more": "m" * 10_000})], [])
    zed = kb.curation.get_entities(["Zed"], NS)[0][0]
    assert zed.description == "z" * 2_800 and zed.properties == {"notes": "n" * 10_000}
    assert len(kb.curation.get_entities(["Robert"], NS)[0][0].observations) == half


def test_a_relation_that_collapses_in_a_merge_leaves_its_provenance_to_the_one_kept(fake_kb):
    fake_kb.add_documents([DocumentInput(id="a", text="Bob works at Acme."),
                           DocumentInput(id="b", text="Robert works at Acme.")])
    fake_kb.add_knowledge_graph(
        [NodeInput(name=n, type="Person" if n != "Acme" else "Organization", source_ids=[doc])
         for n, doc in (("Robert", "b"), ("Bob", "a"), ("Acme", "a"))] + [
         NodeInput(name="Acme", type="Organization", source_ids=["b"])],
        [EdgeInput(source="Robert", target="Acme", type="WORKS_AT", source_ids=["b"]),
         EdgeInput(source="Bob", target="Acme", type="WORKS_AT", source_ids=["a"])])
    assert fake_kb.curation.merge_entities(["Bob"], "Robert", NS).edges_collapsed == 1
    # Robert's relation was kept; Bob's evidence, document a, now supports it too, so it outlives document b.
    fake_kb.add_documents([DocumentInput(id="b", text="Nothing about anyone.")])
    assert names_of(fake_kb.curation.get_entities(["Robert"], NS)[0][0]) == {("Robert", "WORKS_AT", "Acme")}


def test_merge_of_unknown_or_identical_entities_is_refused(kb):
    with pytest.raises(NotFoundError, match="nobody"):
        kb.curation.merge_entities(["nobody"], "Robert", NS)
    with pytest.raises(InvalidInputError):
        kb.curation.merge_entities(["robert"], "Robert", NS)


def test_delete_entities_deletes_only_what_is_named(kb):
    result = kb.curation.delete_entities(["Zed", "ghost"], NS)
    assert result.deleted == ["Zed"] and result.not_found == ["ghost"] and result.edges_deleted == 1
    stats = kb.stats()
    assert stats["nodes"] == 4 and stats["edges"] == 4
    assert kb.store.health()["vectors"] == {"node": 4, "chunk": 0, "edge": 4}


def test_delete_relations_reports_what_was_deleted_and_what_was_not_found(kb):
    result = kb.curation.delete_relations(
        [RelationRef(source="zed", target="Acme", type="founded"), RelationRef(source="Zed", target="Acme", type="OWNS"),
         RelationRef(source="Zed", target="ghost", type="FOUNDED")],
        NS,
    )
    # Deleted as stored (names and type), not found as given.
    assert [r.label() for r in result.deleted] == ["Zed -FOUNDED-> Acme"]
    assert [r.label() for r in result.not_found] == ["Zed -OWNS-> Acme", "Zed -FOUNDED-> ghost"]
    assert kb.stats()["nodes"] == 5 and kb.stats()["edges"] == 4
    nothing = kb.curation.delete_relations([RelationRef(source="Zed", target="Acme", type="FOUNDED")], NS)
    assert nothing.deleted == [] and len(nothing.not_found) == 1


def test_update_entity_adds_and_removes_observations_in_one_step(kb):
    kb.curation.add_observations("Acme", ["makes anvils", "founded 1950"], NS)
    updated = kb.curation.update_entity("acme", NS, add_observations=["sells rockets", "makes anvils"],
                                        remove_observations=["founded 1950"])
    assert updated.observations == ["makes anvils", "sells rockets"]


def test_removing_an_observation_the_entity_lacks_changes_nothing(kb):
    kb.curation.add_observations("Acme", ["makes anvils"], NS)
    with pytest.raises(InvalidInputError, match="no observation 'never said'"):
        kb.curation.update_entity("Acme", NS, description="Changed.", add_observations=["new"],
                                  remove_observations=["makes anvils", "never said"])
    [acme], _ = kb.curation.get_entities(["Acme"], NS)
    assert acme.observations == ["makes anvils"] and acme.description == ""


def test_observations_are_added_once_and_removed(kb):
    first = kb.curation.add_observations("Acme", ["makes anvils", "founded 1950"], NS)
    again = kb.curation.add_observations("Acme", ["makes anvils"], NS)
    assert first.added == ["makes anvils", "founded 1950"] and again.added == []
    removed = kb.curation.delete_observations("Acme", ["founded 1950", "never said"], NS)
    assert removed.removed == ["founded 1950"]
    assert kb.curation.get_entities(["Acme"], NS)[0][0].observations == ["makes anvils"]


def test_find_paths_gives_the_shortest_readable_chains(kb):
    result = kb.curation.find_paths("Zed", "Oslo", NS, max_hops=4)
    assert result.hops == 2
    assert result.paths == ["Zed -FOUNDED-> Acme -LOCATED_IN-> Oslo"]
    two = kb.curation.find_paths("Bob", "Zed", NS)
    assert two.paths == ["Bob -WORKS_AT-> Acme <-FOUNDED- Zed"]
    assert result.message is None
    none = kb.curation.find_paths("Zed", "Oslo", NS, max_hops=1)
    assert none.hops is None and none.paths == []
    assert none.message == "no path between Zed and Oslo within 1 hop; try max_hops up to 4"
    kb.add_knowledge_graph([NodeInput(name="Island", type="Place")], [])
    alone = kb.curation.find_paths("Zed", "Island", NS, max_hops=4)
    assert alone.paths == [] and alone.message == (
        "no path between Zed and Island: no chain of relations that hold now, of any length, connects them (ended "
        "relations are not followed: get_entities lists them with their periods)")
    with pytest.raises(InvalidInputError):
        kb.curation.find_paths("Zed", "Oslo", NS, max_hops=5)


def test_pages_cover_the_graph_once(kb):
    seen, offset = [], 0
    while offset is not None:
        page = kb.curation.page(NS, offset=offset, limit=2)
        seen += [e.name for e in page.entities]
        offset = page.next_offset
    assert sorted(seen) == ["Acme", "Bob", "Oslo", "Robert", "Zed"]


def fingerprint(kb, name: str) -> str:
    """The fingerprint of the entity as stored now, as the web UI's Edit reads it (browse.entity_fields)."""
    from duckgraph.core.domain import browse

    return browse.run(kb, "entity_fields", NS, {"name": name})["fingerprint"]


@pytest.mark.parametrize("meanwhile", [
    {"aliases": ["Bobby", "Bob B."]}, {"properties": {"age": 40, "team": "core"}}, {"description": "A plumber."},
    {"type": "Engineer"}, {"add_observations": ["likes tea"]}, {"new_name": "Bobby B."},
])
def test_an_update_expecting_what_another_client_changed_since_is_refused_and_changes_nothing(kb, meanwhile):
    # What the web UI's Edit does: it read the entity (and its fingerprint) when its dialog opened; another client
    # wrote to it since. Its aliases and properties are sent whole: saved, they would replace what was written.
    seen = fingerprint(kb, "Bob")
    kb.curation.update_entity("Bob", NS, **meanwhile)
    written = kb.curation.get_entities(["Bob"], NS)[0][0]
    with pytest.raises(InvalidInputError, match="'.*' changed since it was read .*nothing was changed"):
        kb.curation.update_entity("Bob", NS, aliases=["Bobby", "Robert J."], properties={"age": 41},
                                  expected_fingerprint=seen)
    assert kb.curation.get_entities(["Bob"], NS)[0][0] == written
    # Expecting what is stored now, the same update is made.
    now = fingerprint(kb, written.name)
    assert now != seen
    updated = kb.curation.update_entity(written.name, NS, aliases=["Bobby", "Robert J."], properties={"age": 41},
                                        expected_fingerprint=now)
    assert updated.aliases == ["Bobby", "Robert J."] and updated.properties == {"age": 41}


def test_a_fingerprint_changes_only_with_what_the_entity_holds(kb):
    seen = fingerprint(kb, "Bob")
    # Its relations, and other entities, are not what an edit of it sends: they leave it as it was.
    kb.add_knowledge_graph([NodeInput(name="Ann", type="Person")],
                           [EdgeInput(source="Ann", target="Bob", type="KNOWS")])
    kb.curation.update_entity("Robert", NS, description="Another engineer.")
    assert fingerprint(kb, "bobby") == seen  # read by an alias too
    updated = kb.curation.update_entity("Bob", NS, type="Builder", expected_fingerprint=seen)
    assert updated.type == "Builder"
    assert fingerprint(kb, "Bob") != seen


NFC, NFD = "cr\u00e8me br\u00fbl\u00e9e served", "cre\u0300me bru\u0302le\u0301e served"


def test_observations_in_another_unicode_form_or_spacing_are_one_and_removed_by_the_text_shown(kb):
    kb.add_knowledge_graph([NodeInput(name="Acme", type="Organization", observations=[NFD, "open late"])], [])
    again = kb.add_knowledge_graph([NodeInput(name="Acme", type="Organization",
                                              observations=[NFC, "open late ", "open  late", "Open late"])], [])
    assert again.observations_added == 1  # only "Open late": case is kept
    assert kb.curation.get_entities(["Acme"], NS)[0][0].observations == [NFC, "open late", "Open late"]
    # A file written before observations were normalised may hold one decomposed or spaced as typed: the text a
    # reader sees removes it (add_observations here stores the texts as given, as such a file holds them).
    kb.curation.add_observations("Zed", [NFD, " founded Acme "], NS)
    updated = kb.curation.update_entity("Zed", NS, remove_observations=[NFC], add_observations=["founded Acme"])
    assert updated.observations == [" founded Acme "]
    assert kb.curation.delete_observations("Zed", ["founded Acme"], NS).removed == [" founded Acme "]


def test_an_alias_or_a_new_name_that_names_another_entity_is_refused_and_changes_nothing(kb):
    kb.add_knowledge_graph([NodeInput(name="Cat", type="Person", aliases=["Kit"]),
                            NodeInput(name="Cid", type="Person", aliases=["Kit"])], [])
    before = kb.curation.get_entities(["Zed"], NS)[0][0]
    with pytest.raises(InvalidInputError, match=r"^'robert' is the name of another entity \('Robert'\): if the two are "
                                                r"one, use merge_entities\(sources=\['Robert'\], target='Zed'\); "
                                                r"nothing was changed"):
        kb.curation.update_entity("Zed", NS, aliases=["Zeddy", "robert"], description="changed")
    with pytest.raises(InvalidInputError, match=r"^'Bobby' is an alias of 'Bob' already: if the two are one, use "
                                                r"merge_entities\(sources=\['Bob'\], target='Zed'\), else remove it"):
        kb.curation.update_entity("Zed", NS, aliases=["Bobby"])
    with pytest.raises(InvalidInputError, match=r"^'Kit' is an alias of 'Cat' and 'Cid' already: if 'Zed' is one of "
                                                "them, merge the two with merge_entities"):
        kb.curation.update_entity("Zed", NS, new_name="Kit")
    assert kb.curation.get_entities(["Zed"], NS)[0][0] == before
    assert kb.curation.get_entities(["Bobby"], NS)[0][0].name == "Bob"  # still reached by its alias
    # An alias the entity shares already (add_knowledge_graph stored it) does not stop another change.
    assert kb.curation.update_entity("Cat", NS, aliases=["Kit", "Kitty"]).aliases == ["Kit", "Kitty"]
