"""Resolution with types written in another case or number, and names written with look-alike letters of other
scripts, on a real DuckDB file: "people" is the type "Person" (resolution merges across them, and a write keeps the
stored spelling); "Maya Chen" written with a Cyrillic a is stored apart and reported as a possible duplicate; a
name written with another type than its entity's is said (resolved, and a hint naming both types), or goes to the
one entity of that type that has it as an alias."""

from __future__ import annotations

from duckgraph.core.domain import memory_server, node_merge
from duckgraph.core.domain.model import DocumentInput, EdgeInput, MemoryEntityInput, NodeInput

CYRILLIC_MAYA = "M\u0430ya Chen"  # the second letter is U+0430 CYRILLIC SMALL LETTER A
REASON = "looks the same as 'Maya Chen' but uses other letters (CYRILLIC SMALL LETTER A for 'a')"


def stored(kb) -> dict[str, str]:
    return {n.name: n.type for n in kb.store.list_nodes(kb.namespace, limit=1000)}


def test_a_name_resolved_once_resolves_again_whatever_the_number_of_its_type(fake_kb) -> None:
    fake_kb.add_knowledge_graph([NodeInput(name="José Álvarez", type="Person", observations=["DBA"])], [])
    first = fake_kb.add_knowledge_graph([NodeInput(name="Jose Alvarez", type="person")], [])
    assert [(r.name, r.into) for r in first.resolved] == [("Jose Alvarez", "José Álvarez")]
    # Before, "People" was another type than "Person": a second, empty entity took the alias's name.
    again = fake_kb.add_knowledge_graph([NodeInput(name="Jose Alvarez", type="People", observations=["remote"])], [])
    assert again.nodes_created == 0 and not again.possible_duplicates
    assert [(r.name, r.into) for r in again.resolved] == [("Jose Alvarez", "José Álvarez")]
    assert stored(fake_kb) == {"José Álvarez": "Person"}
    found = fake_kb.curation.read_entities(["Jose Alvarez"], fake_kb.namespace)
    assert [e.name for e in found.entities] == ["José Álvarez"] and not found.not_found
    assert found.entities[0].observations == ["DBA", "remote"]


def test_a_write_in_another_case_or_number_of_the_type_keeps_the_stored_spelling(fake_kb) -> None:
    fake_kb.add_knowledge_graph([NodeInput(name="Maya Chen", type="Person")], [])
    for spelling in ("people", "PERSONS", "person"):
        result = fake_kb.add_knowledge_graph([NodeInput(name="Maya Chen", type=spelling)], [])
        assert [n.type for n in result.nodes] == ["Person"], spelling
        assert stored(fake_kb) == {"Maya Chen": "Person"}, spelling
    # Another type is a real change: the newest wins, as before.
    fake_kb.add_knowledge_graph([NodeInput(name="Maya Chen", type="Team")], [])
    assert stored(fake_kb) == {"Maya Chen": "Team"}


def test_a_same_name_of_another_type_is_merged_and_said_with_both_types(fake_kb) -> None:
    fake_kb.add_knowledge_graph([NodeInput(name="Apple", type="Organization", description="The tech company."),
                                 NodeInput(name="Tim Cook", type="Person")],
                                [EdgeInput(source="Tim Cook", target="Apple", type="CEO_OF")])
    result = fake_kb.add_knowledge_graph([NodeInput(name="apple", type="Ingredient", description="A fruit.")], [])
    # Merged as documented (the newest type wins), but no longer silently: before, resolved and hints were empty.
    assert (result.nodes_created, result.nodes_updated) == (0, 1)
    assert [(n.name, n.type) for n in result.nodes] == [("Apple", "Ingredient")]
    assert [(r.name, r.into) for r in result.resolved] == [("apple", "Apple")]
    assert result.hints == [
        "'apple' (Ingredient) was merged into the entity 'Apple' (Organization): one name up to case and spacing "
        "is one entity, now of type Ingredient. If that corrects its type, nothing to do; if 'apple' is another "
        "thing, give 'Apple' its type back (update_entity with type 'Organization'), take out what this call added "
        "to 'Apple' (the description text 'A fruit.'; and its relations: update_entity, delete_relations) and write "
        "it again under a qualified name, such as 'apple (ingredient)'."]
    # The same name twice in one call, with two types: said too.
    both = fake_kb.add_knowledge_graph([NodeInput(name="Mercury", type="Planet"), NodeInput(name="MERCURY",
                                                                                            type="Band")], [])
    assert [(r.name, r.into) for r in both.resolved] == [("MERCURY", "Mercury")]
    assert both.hints[0].startswith("'MERCURY' (Band) was merged into the entity 'Mercury' (Planet)")


def test_a_type_in_another_spelling_or_a_placeholder_type_is_no_other_type(fake_kb) -> None:
    fake_kb.add_knowledge_graph([NodeInput(name="Maya Chen", type="Person"), NodeInput(name="Acme", type="unknown")],
                                [])
    result = fake_kb.add_knowledge_graph([NodeInput(name="maya chen", type="people"),
                                          NodeInput(name="ACME", type="Organization")], [])
    assert (result.resolved, result.hints) == ([], [])
    assert stored(fake_kb) == {"Maya Chen": "Person", "Acme": "Organization"}


def test_an_extracted_write_of_another_type_keeps_the_type_set_by_hand_and_says_so(fake_kb) -> None:
    fake_kb.add_documents([DocumentInput(id="pie.md", text="Grandma's pie takes six apples.")])
    fake_kb.add_knowledge_graph([NodeInput(name="Apple", type="Organization")], [])
    result = fake_kb.add_knowledge_graph([NodeInput(name="apple", type="Ingredient", source_ids=["pie.md"])], [])
    assert stored(fake_kb) == {"Apple": "Organization"}
    assert [(r.name, r.into) for r in result.resolved] == [("apple", "Apple")]
    assert result.hints == [
        "'apple' (Ingredient) was merged into the entity 'Apple' (Organization): one name up to case and spacing "
        "is one entity, which keeps its type Organization (set by hand). If 'apple' is another thing, take out "
        "what this call added to 'Apple' (its relations: update_entity, delete_relations) and write it again under "
        "a qualified name, such as 'apple (ingredient)'."]


def test_a_merge_into_another_type_joins_the_descriptions_as_merge_entities_and_lists_what_it_added(
        fake_kb) -> None:
    fake_kb.add_knowledge_graph([NodeInput(name="Apple", type="Organization", description="Tech company in Cupertino",
                                           aliases=["AAPL"], properties={"hq": "Cupertino"},
                                           observations=["Makes the iPhone"])], [])
    result = fake_kb.add_knowledge_graph([NodeInput(
        name="apple", type="Ingredient", description="A fruit used in pies", aliases=["malus", "AAPL"],
        properties={"color": "red", "hq": "Cupertino"}, observations=["Grows in orchards", "Makes the iPhone"])], [])
    # Before: "Tech company in Cupertino A fruit used in pies", one phrase, where merge_entities joins with "; ".
    [apple] = fake_kb.curation.read_entities(["Apple"], fake_kb.namespace).entities
    assert apple.description == "Tech company in Cupertino; A fruit used in pies"
    # Only what this call added is listed (not the alias, property value and observation held already): before,
    # the hint said "take out what this call added" and listed nothing.
    [hint] = result.hints
    assert ("take out what this call added to 'Apple' (the description text 'A fruit used in pies'; the observation "
            "'Grows in orchards'; the alias 'malus'; the property color: 'red'; and its relations: update_entity, "
            "delete_relations)") in hint

    # A description the stored one says already is no addition.
    said = fake_kb.add_knowledge_graph([NodeInput(name="APPLE", type="Organization",
                                                  description="Tech company in Cupertino")], [])
    assert "take out what this call added to 'Apple' (its relations: update_entity" in said.hints[0]

    # However much a write adds, the hint quotes a bounded part of it.
    many = [f"Observation number {i} about the orchard harvest, with enough words to be long" for i in range(200)]
    big = fake_kb.add_knowledge_graph([NodeInput(name="APPLE", type="Fruit", description="x" * 3000,
                                                 observations=many)], [])
    [hint] = big.hints
    listed = hint.split("take out what this call added to 'Apple' (", 1)[1].split("; and its relations", 1)[0]
    assert listed.startswith("the description text 'xxx") and listed.endswith("…")
    assert len(listed) <= node_merge.ADDED_CHARS


def test_a_name_of_another_type_goes_to_the_one_entity_of_its_type_that_has_it_as_an_alias(fake_kb) -> None:
    fake_kb.add_knowledge_graph([NodeInput(name="Paris", type="City", description="Capital of France."),
                                 NodeInput(name="EU office", type="Office"),
                                 NodeInput(name="Paris Dubois", type="Person", aliases=["Paris"])],
                                [EdgeInput(source="EU office", target="Paris", type="LOCATED_IN")])
    result = fake_kb.add_knowledge_graph([NodeInput(name="Paris", type="Person", observations=["on holiday"])],
                                         [EdgeInput(source="Paris", target="EU office", type="WORKS_AT")])
    # Before: merged into the City, which became a Person with the holiday and a WORKS_AT relation.
    assert [(r.name, r.into) for r in result.resolved] == [("Paris", "Paris Dubois")] and not result.hints
    assert stored(fake_kb) == {"Paris": "City", "EU office": "Office", "Paris Dubois": "Person"}
    dubois, city = fake_kb.curation.read_entities(["Paris Dubois", "Paris"], fake_kb.namespace).entities
    assert dubois.observations == ["on holiday"] and not city.observations
    assert [(r.source, r.type, r.target) for r in dubois.relations] == [("Paris Dubois", "WORKS_AT", "EU office")]

    # A type in another number is that type; the name itself, or a node the call names apart, stays as it was.
    again = fake_kb.add_knowledge_graph([NodeInput(name="paris", type="people")], [])
    assert [(r.name, r.into) for r in again.resolved] == [("paris", "Paris Dubois")]
    named = fake_kb.add_knowledge_graph([NodeInput(name="Paris", type="Person"),
                                         NodeInput(name="Paris Dubois", type="Person")], [])
    assert [(r.name, r.into) for r in named.resolved] == [("Paris", "Paris")] and len(named.hints) == 1


def test_a_name_of_another_type_that_several_entities_of_its_type_have_as_an_alias_stays_with_its_entity(
        fake_kb) -> None:
    fake_kb.add_knowledge_graph([NodeInput(name="Jordan", type="Country"),
                                 NodeInput(name="Jordan Lee", type="Person", aliases=["Jordan"]),
                                 NodeInput(name="Jordan Park", type="Person", aliases=["Jordan"])], [])
    result = fake_kb.add_knowledge_graph([NodeInput(name="Jordan", type="Person")], [])
    assert [(r.name, r.into) for r in result.resolved] == [("Jordan", "Jordan")]
    assert result.hints[0].startswith("'Jordan' (Person) was merged into the entity 'Jordan' (Country)")
    assert stored(fake_kb)["Jordan"] == "Person"


def test_a_name_with_look_alike_letters_is_stored_apart_and_reported(fake_kb) -> None:
    fake_kb.add_knowledge_graph([NodeInput(name="Maya Chen", type="Person", observations=["backend"])], [])
    result = fake_kb.add_knowledge_graph([NodeInput(name=CYRILLIC_MAYA, type="Person", observations=["on call"])], [])
    assert result.nodes_created == 1 and not result.resolved
    [duplicate] = result.possible_duplicates
    assert (duplicate.name, duplicate.similar_to, duplicate.type, duplicate.reason) == (
        CYRILLIC_MAYA, "Maya Chen", "Person", REASON)
    assert -1.0 <= duplicate.similarity <= 1.0
    assert stored(fake_kb) == {"Maya Chen": "Person", CYRILLIC_MAYA: "Person"}  # never merged by itself


def test_look_alikes_are_reported_within_one_call_and_across_types(fake_kb) -> None:
    result = fake_kb.add_knowledge_graph([NodeInput(name="Maya Chen", type="Person"),
                                          NodeInput(name=CYRILLIC_MAYA, type="Person")], [])
    assert [(d.name, d.similar_to, d.reason) for d in result.possible_duplicates] == [
        (CYRILLIC_MAYA, "Maya Chen", REASON)]
    fake_kb.add_knowledge_graph([NodeInput(name="Orders", type="Database")], [])
    other = fake_kb.add_knowledge_graph([NodeInput(name="\u039frders", type="Service")], [])  # a Greek capital O
    assert [(d.name, d.similar_to, d.type) for d in other.possible_duplicates] == [
        ("\u039frders", "Orders", "Service")]
    plain = fake_kb.add_knowledge_graph([NodeInput(name="Maya Chan", type="Person"),
                                         NodeInput(name="Renée Dubois", type="Person")], [])
    assert not [d for d in plain.possible_duplicates if d.reason]


def test_create_entities_says_when_a_new_name_looks_like_a_stored_one(fake_kb) -> None:
    memory_server.create_entities(fake_kb, [MemoryEntityInput(name="Maya Chen", entityType="person",
                                                              observations=["plain"])])
    [created] = memory_server.create_entities(fake_kb, [MemoryEntityInput(name=CYRILLIC_MAYA, entityType="person",
                                                                          observations=["cyrillic a"])]).entities
    assert created.merged_into is None and created.observations == ["cyrillic a"]
    assert created.note == (f"{REASON}: stored as an entity of its own; if both are one, delete this one "
                            "(delete_entities) and add its observations to 'Maya Chen'")
    assert set(stored(fake_kb)) == {"Maya Chen", CYRILLIC_MAYA}
    [plain] = memory_server.create_entities(fake_kb, [MemoryEntityInput(name="Maya Chan", entityType="person",
                                                                        observations=[])]).entities
    assert plain.note is None


def test_stats_and_schema_count_a_type_once_in_every_case_and_number(fake_kb) -> None:
    spellings = {"Person": 3, "people": 2, "person": 1, "Persons": 1, "Widget": 2, "widgets": 1, "WIDGET": 1}
    typed = [type_ for type_, count in spellings.items() for _ in range(count)]
    fake_kb.add_knowledge_graph([NodeInput(name=f"Entity {i}", type=type_) for i, type_ in enumerate(typed)], [])
    # Fifty other types of three entities each: no spelling of Widget is among the fifty most common, Widget is.
    fake_kb.add_knowledge_graph([NodeInput(name=f"Thing {t}.{i}", type=f"Type{t:02d}")
                                 for t in range(50) for i in range(3)], [])

    stats = fake_kb.stats(fake_kb.namespace)
    assert list(stats["node_types"].items())[:3] == [("Person", 7), ("Widget", 4), ("Type00", 3)]
    assert len(stats["node_types"]) == 50 and not {"people", "person", "widgets"} & stats["node_types"].keys()
    assert stats["node_type_spellings"] == {"Person": ["people", "Persons", "person"],
                                            "Widget": ["WIDGET", "widgets"]}

    schema = fake_kb.schema(limit=3)
    assert [(t["type"], t["count"], t.get("spellings")) for t in schema["node_types"]] == [
        ("Person", 7, ["people", "Persons", "person"]), ("Widget", 4, ["WIDGET", "widgets"]), ("Type00", 3, None)]
    assert [t["example"] for t in schema["node_types"]] == ["Entity 0", "Entity 7", "Thing 0.0"]
    assert schema["truncated"]["node_types"] is True


def test_a_type_in_one_spelling_lists_no_spellings(fake_kb) -> None:
    fake_kb.add_knowledge_graph([NodeInput(name="Maya Chen", type="Person")], [])
    assert "node_type_spellings" not in fake_kb.stats(fake_kb.namespace)
    assert fake_kb.schema()["node_types"] == [{"type": "Person", "count": 1, "example": "Maya Chen"}]
