"""The reference memory server's use cases on a real DuckDB file (with the instant hashing embedder)."""

import json

import pytest

from duckgraph.core.domain import memory_server as memory
from duckgraph.core.domain.limits import MAX_OBSERVATIONS
from duckgraph.core.domain.model import (
    EdgeInput,
    MemoryEntityInput,
    NodeInput,
    ObservationAddition,
    ObservationDeletion,
    RelationInput,
)
from duckgraph.ports import InvalidInputError, NotFoundError


def entity(name: str, *observations: str, type: str = "person") -> MemoryEntityInput:
    return MemoryEntityInput(name=name, entityType=type, observations=list(observations))


def relation(source: str, target: str, kind: str) -> RelationInput:
    return RelationInput.model_validate({"from": source, "to": target, "relationType": kind})


@pytest.fixture
def kb(fake_kb):
    memory.create_entities(fake_kb, [entity("Alice", "likes tea"), entity("Bob"), entity("Acme", type="company")])
    return fake_kb


def test_an_exact_name_is_skipped_and_a_case_variant_merged_and_reported(kb):
    created = memory.create_entities(kb, [
        entity("Alice", "dropped, as the reference drops it"),  # the exact stored name: skipped
        entity("alice", "likes tea", "plays go"),  # the reference keeps a second entity: merged here
        entity("Carol", "a", "a", "b"),
        entity("CAROL", "b", "c"),  # a variant of one created in the call
    ]).entities
    assert [(e.name, e.entityType, e.observations, e.merged_into) for e in created] == [
        ("alice", "person", ["plays go"], "Alice"),
        ("Carol", "person", ["a", "b"], None),
        ("CAROL", "person", ["c"], "Carol"),
    ]
    opened = memory.open_nodes(kb, ["Alice", "Carol"]).entities
    assert [(e.name, e.observations) for e in opened] == [("Alice", ["likes tea", "plays go"]),
                                                          ("Carol", ["a", "b", "c"])]
    assert kb.stats()["nodes"] == 4


def test_a_name_sent_with_spaces_around_it_is_merged_as_a_case_variant_and_a_skipped_repeat_says_what_it_dropped(kb):
    # "Alice " and "Alice\n" are stored as "Alice", but the reference keeps them as new names, with their observations.
    result = memory.create_entities(kb, [entity("Alice ", "moved to Paris"), entity("Alice\n", "likes tea", "has a dog")])
    sent = "sent as {!r}, which is 'Alice' once extra spaces and invisible characters are dropped, as they are from " \
           "every name"
    assert [(e.name, e.observations, e.merged_into, e.note) for e in result.entities] == [
        ("Alice", ["moved to Paris"], "Alice", sent.format("Alice ")),
        ("Alice", ["has a dog"], "Alice", sent.format("Alice\n"))]
    assert result.note is None
    # The exact stored name is skipped, as the reference skips it, and the result says what was not added.
    repeat = memory.create_entities(kb, [entity("Alice", "plays go", "likes tea", "owns a bike"), entity("Bob")])
    assert repeat.entities == []
    assert repeat.note == ("'Alice' exists, so it was skipped: 2 observations it does not hold were not added. Add "
                           "them with add_observations.")
    assert memory.create_entities(kb, [entity("Alice", "likes tea")]).note is None  # nothing dropped
    assert memory.open_nodes(kb, ["Alice"]).entities[0].observations == [
        "likes tea", "moved to Paris", "has a dog"]


def test_a_name_merged_with_another_type_keeps_the_stored_one_and_says_so(kb):
    [merged] = memory.create_entities(kb, [entity("alice", "a company", type="organization")]).entities
    assert (merged.entityType, merged.merged_into, merged.observations) == ("person", "Alice", ["a company"])
    assert merged.note == (
        "the entityType 'organization' was not applied: 'Alice' keeps its type 'person'. If 'alice' is another "
        "entity, not this person, undo this: delete_observations with entityName 'Alice' and the 1 observation "
        "listed here removes it from 'Alice'; then create it under a name of its own, such as 'alice (organization)'")
    # The note's advice, followed, undoes the merge and keeps the two apart.
    memory.delete_observations(kb, [ObservationDeletion(entityName="Alice", observations=merged.observations)])
    [own] = memory.create_entities(kb, [entity("alice (organization)", "a company", type="organization")]).entities
    assert (own.merged_into, own.note) == (None, None)
    assert [(e.name, e.entityType, e.observations) for e in memory.open_nodes(kb, ["Alice", "alice (organization)"])
            .entities] == [("Alice", "person", ["likes tea"]), ("alice (organization)", "organization", ["a company"])]
    # Nothing added (the observation is Alice's already): nothing to undo.
    [again] = memory.create_entities(kb, [entity("ALICE", "likes tea", type="organization")]).entities
    assert again.note.endswith("If 'ALICE' is another entity, not this person, nothing was added to 'Alice': create "
                               "it under a name of its own, such as 'ALICE (organization)'")
    # The same type in another case or number is no conflict.
    [same] = memory.create_entities(kb, [entity("ALICE", "a person", type="People")]).entities
    assert same.note is None
    assert [(e.name, e.entityType) for e in memory.open_nodes(kb, ["Alice"]).entities] == [("Alice", "person")]
    # An entity of type 'unknown' (the user's own, with an observation: no placeholder) takes the type given.
    memory.create_entities(kb, [entity("Mystery Caller", "called on Monday", type="unknown")])
    [typed] = memory.create_entities(kb, [entity("mystery caller", "a recruiter", type="person")]).entities
    assert (typed.entityType, typed.merged_into, typed.note) == ("person", "Mystery Caller", None)
    assert [(e.name, e.entityType) for e in memory.open_nodes(kb, ["Mystery Caller"]).entities] == [
        ("Mystery Caller", "person")]


def test_a_placeholder_is_the_entity_a_spelling_of_its_name_of_any_type_names(kb):
    memory.create_relations(kb, [relation("Alice", "Acme Inc.", "works at")])
    [filled] = memory.create_entities(kb, [entity("Acme Inc", "makes robots", type="company")]).entities
    assert (filled.entityType, filled.observations, filled.merged_into) == ("company", ["makes robots"], "Acme Inc.")
    opened = memory.open_nodes(kb, ["Acme Inc."])
    assert [(e.name, e.entityType, e.observations) for e in opened.entities] == [
        ("Acme Inc.", "company", ["makes robots"])]
    assert [(r.from_, r.to) for r in opened.relations] == [("Alice", "Acme Inc.")]
    assert kb.stats()["nodes"] == 4  # Alice, Bob, Acme and Acme Inc.: no second one


def test_relations_keep_their_spelling_and_are_not_duplicated_by_another_one(kb):
    assert len(memory.create_relations(kb, [relation("Alice", "Acme", "works at")])) == 1
    assert memory.create_relations(kb, [relation("alice", "ACME", "WORKS_AT"), relation("Alice", "Acme", "works-at")]) == []
    [stored] = memory.read_graph(kb).relations
    assert (stored.from_, stored.to, stored.relationType) == ("Alice", "Acme", "works at")


def test_an_unknown_end_becomes_a_placeholder_that_create_entities_fills_in(kb):
    created = memory.create_relations(kb, [relation("Alice", "Bob", "knows"), relation("Alice", "Dana", "mentors"),
                                           relation("dana", "Erin", "knows")])
    assert [(r.from_, r.to, r.note is None) for r in created] == [("Alice", "Bob", True), ("Alice", "Dana", False),
                                                                   ("dana", "Erin", False)]
    assert "'Dana' did not exist" in created[1].note and "'unknown'" in created[1].note
    assert "'Erin' did not exist" in created[2].note and "'dana'" not in created[2].note
    graph = memory.read_graph(kb)
    assert [(e.name, e.entityType) for e in graph.entities][-2:] == [("Dana", "unknown"), ("Erin", "unknown")]
    assert len(graph.relations) == 3
    # Creating it afterwards, as a reference user would, gives the placeholder its type and observations.
    [filled] = memory.create_entities(kb, [entity("Dana", "a mentor")]).entities
    assert (filled.name, filled.entityType, filled.observations, filled.merged_into) == (
        "Dana", "person", ["a mentor"], None)
    [variant] = memory.create_entities(kb, [entity("ERIN", "an engineer", type="engineer")]).entities
    assert (variant.entityType, variant.merged_into) == ("engineer", "Erin")
    assert [(e.name, e.entityType, e.observations) for e in memory.open_nodes(kb, ["Dana", "Erin"]).entities] == [
        ("Dana", "person", ["a mentor"]), ("Erin", "engineer", ["an engineer"])]
    assert len(memory.read_graph(kb).relations) == 3


def test_a_relation_of_an_entity_with_itself_is_reported_not_stored_and_the_rest_is(kb):
    created = memory.create_relations(kb, [relation("Alice", "alice", "is"), relation("Bob", "Alice", "knows")])
    assert "one entity" in created[0].note and created[1].note is None
    assert [(r.from_, r.to) for r in memory.read_graph(kb).relations] == [("Bob", "Alice")]
    with pytest.raises(InvalidInputError, match="letters or digits"):
        memory.create_relations(kb, [relation("Alice", "Zed", "->")])
    assert kb.stats()["nodes"] == 3  # the refused call made no placeholder


def test_graphrag_edges_show_their_stored_type(kb):
    kb.add_knowledge_graph([NodeInput(name="Dan", type="Person")], [EdgeInput(source="Dan", target="Acme", type="founded")])
    [founded] = memory.open_nodes(kb, ["Dan"]).relations
    assert founded.relationType == "FOUNDED"


def test_observations_accumulate_within_a_call_and_an_unknown_entity_fails_it(kb):
    results = memory.add_observations(kb, [
        ObservationAddition(entityName="Alice", contents=["likes tea", "x"]),
        ObservationAddition(entityName="alice", contents=["x", "y"]),
    ]).results
    assert [(r.entityName, r.addedObservations) for r in results] == [("Alice", ["x"]), ("alice", ["y"])]
    with pytest.raises(NotFoundError, match="Entity with name Nobody not found"):
        memory.add_observations(kb, [ObservationAddition(entityName="Bob", contents=["z"]),
                                     ObservationAddition(entityName="Nobody", contents=["z"])])
    assert memory.open_nodes(kb, ["Bob"]).entities[0].observations == []  # nothing of the failed call
    # Two additions that fit alone but not together exceed the per-entity limit: the call fails whole.
    half = MAX_OBSERVATIONS // 2 + 10
    with pytest.raises(InvalidInputError, match="limit"):
        memory.add_observations(kb, [ObservationAddition(entityName="Bob", contents=[str(i) for i in range(half)]),
                                     ObservationAddition(entityName="Bob", contents=[f"{i}!" for i in range(half)])])
    assert memory.open_nodes(kb, ["Bob"]).entities[0].observations == []


def test_deleting_observations_ignores_unknown_entities(kb):
    result = memory.delete_observations(kb, [ObservationDeletion(entityName="Alice", observations=["likes tea", "no"]),
                                             ObservationDeletion(entityName="Nobody", observations=["x"])])
    assert result.success and result.not_found == ["Nobody"]
    assert [(r.entity, r.removed) for r in result.removed] == [("Alice", ["likes tea"])]
    assert memory.open_nodes(kb, ["Alice"]).entities[0].observations == []


def test_deleting_an_observation_not_stored_says_so_with_the_stored_one_most_like_it(kb):
    memory.add_observations(kb, [ObservationAddition(entityName="Alice", contents=["lives in Berlin"])])
    result = memory.delete_observations(kb, [
        ObservationDeletion(entityName="alice", observations=["Lives in Berlin.", "likes tea", "owns a boat"]),
        ObservationDeletion(entityName="Alice", observations=["likes tea"])])  # removed just before: no miss
    assert result.success and [(r.entity, r.removed) for r in result.removed] == [("Alice", ["likes tea"])]
    assert [(u.entity, u.observation, u.nearest) for u in result.unmatched] == [
        ("Alice", "Lives in Berlin.", "lives in Berlin"), ("Alice", "owns a boat", None)]
    assert result.hints == ["Not stored, so nothing was removed for: 'Lives in Berlin.' of 'Alice' (stored: 'lives "
                            "in Berlin'); 'owns a boat' of 'Alice' (see unmatched). Delete an observation by its text "
                            "as stored (open_nodes lists them)."]
    assert memory.open_nodes(kb, ["Alice"]).entities[0].observations == ["lives in Berlin"]
    everything = memory.delete_observations(kb, [ObservationDeletion(entityName="Alice",
                                                                     observations=["lives in Berlin"])])
    assert everything.unmatched == [] and everything.hints == []


def test_pages_list_every_relation_once_and_open_nodes_takes_relations_with_one_end_named(kb):
    memory.create_relations(kb, [relation("Bob", "Alice", "knows"), relation("Alice", "Acme", "works_at"),
                                 relation("Acme", "Bob", "employs")])
    pages, offset = [], 0
    while offset is not None:
        page = memory.read_graph(kb, offset=offset, limit=1)
        pages.append(page)
        offset = page.next_offset
    assert [e.name for p in pages for e in p.entities] == ["Alice", "Bob", "Acme"]
    assert sorted(r.relationType for p in pages for r in p.relations) == ["employs", "knows", "works_at"]
    assert [r.from_ for r in pages[0].relations] == ["Alice"]  # a relation is on the page of its `from`

    opened = memory.open_nodes(kb, ["Alice", "nobody"])
    assert [e.name for e in opened.entities] == ["Alice"]
    assert {(r.from_, r.to) for r in opened.relations} == {("Bob", "Alice"), ("Alice", "Acme")}
    with pytest.raises(InvalidInputError):
        memory.read_graph(kb, limit=0)


def test_search_returns_every_substring_match_first_then_the_search_s_anchors(kb):
    memory.create_entities(kb, [entity("duckgraph", "Written in Go", type="project"),
                                entity("Google", type="company"), entity("Zoe", "plays GO on Sundays")])
    found = memory.search_nodes(kb, "Go")
    names = [e.name for e in found.entities]
    # The reference's matches ("go" in an observation, a name, an observation), each once, come first: those the
    # search ranks in its order, the others in creation order; then the search's other anchors.
    head, rest = names[:3], names[3:]
    assert set(head) == {"duckgraph", "Google", "Zoe"} and len(names) == len(set(names))
    result = kb.search("Go", max_passages=0)
    rank = {n.name: i for i, n in enumerate(result.nodes)}
    assert head == sorted(head, key=lambda n: rank.get(n, len(rank)))
    assert set(rest) <= {a.name for a in result.anchors}


def test_an_empty_query_matches_every_entity_and_spaces_only_what_holds_them_as_in_the_reference(kb):
    assert [e.name for e in memory.search_nodes(kb, "").entities] == ["Alice", "Bob", "Acme"]
    assert memory.search_nodes(kb, "  ").entities == []


@pytest.mark.model
def test_search_finds_the_substring_and_nothing_when_nothing_matches(real_kb):
    memory.create_entities(real_kb, [entity("duckgraph", "Written in Go", type="project"),
                                     entity("Maya Chen", "maintains duckgraph"), entity("Berlin", type="city")])
    memory.create_relations(real_kb, [relation("Maya Chen", "duckgraph", "maintains")])
    found = memory.search_nodes(real_kb, "Go")
    assert "duckgraph" in [e.name for e in found.entities]
    assert {(r.from_, r.to) for r in found.relations} == {("Maya Chen", "duckgraph")}  # one end is enough
    nothing = memory.search_nodes(real_kb, "Kubernetes")
    assert nothing.entities == [] and nothing.relations == []


NFC, NFD = "cr\u00e8me br\u00fbl\u00e9e served", "cre\u0300me bru\u0302le\u0301e served"


def test_observations_in_another_unicode_form_or_spacing_are_one_and_removed_by_the_text_shown(kb):
    created = memory.create_entities(kb, [entity("Cafe Noir", NFD, "open late", type="place")]).entities
    assert created[0].observations == [NFC, "open late"]
    added = memory.add_observations(kb, [ObservationAddition(entityName="Cafe Noir",
                                                             contents=[NFC, "open late ", "open  late", "Open late"])])
    assert added.results[0].addedObservations == ["Open late"]  # case is kept
    assert memory.open_nodes(kb, ["Cafe Noir"]).entities[0].observations == [NFC, "open late", "Open late"]
    # A file written before observations were normalised (as model_construct stores them) may hold them as typed.
    memory.create_entities(kb, [MemoryEntityInput.model_construct(name="Old Cafe", entityType="place",
                                                                  observations=[NFD, "open late "])])
    assert memory.add_observations(kb, [ObservationAddition(entityName="Old Cafe",
                                                            contents=[NFC, "open late"])]).results[0] \
        .addedObservations == []
    removed = memory.delete_observations(kb, [ObservationDeletion(entityName="Old Cafe",
                                                                  observations=[NFC, "open late"])])
    assert [(r.entity, r.removed) for r in removed.removed] == [("Old Cafe", [NFD, "open late "])]
    assert memory.open_nodes(kb, ["Old Cafe"]).entities[0].observations == []


def test_an_imported_memory_file_s_observations_are_stored_normalised(fake_kb):
    from duckgraph.core.files.import_ import import_lines

    lines = [json.dumps({"type": "entity", "name": "Cafe Noir", "entityType": "place",
                         "observations": [NFD, NFC, "open late ", "open late"]}, ensure_ascii=False)]
    import_lines(fake_kb, lines)
    assert memory.open_nodes(fake_kb, ["Cafe Noir"]).entities[0].observations == [NFC, "open late"]


def test_an_empty_observation_is_kept_by_the_memory_tools_as_the_reference_keeps_it_and_refused_by_graphrag_s(kb):
    created = memory.create_entities(kb, [entity("Dave", "", "  ")]).entities  # blank is empty once trimmed: one
    assert created[0].observations == [""]
    assert memory.add_observations(kb, [ObservationAddition(entityName="Bob", contents=[""])]).results[0] \
        .addedObservations == [""]
    with pytest.raises(ValueError, match="at least 1 character"):
        NodeInput(name="Dave", type="person", observations=[""])
