"""What a deleted entity held does not outlive it in recent_changes, and the lines the store writes itself quote a
stored text that holds a delimiter of its place, on a real DuckDB file. Deleting an entity (delete_entities, or a
document deleted that alone supported it) deletes the lines that told its observations and property values, also
those written under an old name it keeps as an alias, a quoted name or one cut short; its "entity deleted" line
stays, and so does what other entities' lines tell. A merge keeps the merged entity's lines (its contents moved to
the target), until the target is deleted. The instant hashing embedder: what is checked here is the store."""

from __future__ import annotations

import time

from duckgraph.core.domain.documents import delete_documents
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput, RelationRef

SECRET = "HOLLOWMERE"


def lines(kb: KnowledgeBase, namespace: str = "default") -> list[str]:
    """recent_changes' lines without their moments."""
    return [line.split(" ", 4)[4] for line in kb.recent_changes(namespace=namespace, limit=1_000).text.splitlines()
            if line.startswith("- ")]


def later() -> None:
    time.sleep(0.01)  # a later moment than the write before, as between two calls


def test_deleting_an_entity_deletes_the_lines_of_what_it_held(fake_kb: KnowledgeBase) -> None:
    ns = fake_kb.namespace
    fake_kb.add_knowledge_graph([NodeInput(name="Lena", type="person", observations=["likes tea"]),
                                 NodeInput(name="Tom", type="person")],
                                [EdgeInput(source="Tom", target="Lena", type="DRIVES_TO", valid_from="2024-01-01")])
    later()
    fake_kb.curation.update_entity("Lena", ns, properties={"dx": SECRET}, add_observations=[f"has {SECRET} cancer"])
    later()
    fake_kb.curation.update_entity("Lena", ns, properties={"dx": "unknown"}, remove_observations=["likes tea"])
    later()
    # Renamed: the old name stays an alias, and the lines written before name her by it.
    fake_kb.curation.update_entity("Lena", ns, new_name="Lena Berg", remove_observations=[f"has {SECRET} cancer"])
    later()
    fake_kb.curation.update_entity("Tom", ns, properties={"car": "red"}, add_observations=["drives on Mondays"])
    later()
    fake_kb.curation.update_entity("Tom", ns, properties={"car": "blue"}, remove_observations=["drives on Mondays"])
    before = lines(fake_kb)
    assert f"properties changed: Lena [person]: dx: (none) -> {SECRET}" in before
    assert f"observations deleted: Lena Berg [person]: has {SECRET} cancer" in before
    later()

    fake_kb.curation.delete_entities(["Lena Berg"], ns)
    after = lines(fake_kb)
    assert not [line for line in after if SECRET in line or "likes tea" in line], after
    assert after[:2] == ["entity deleted: Lena Berg [person]",
                         "fact deleted: Tom drives to Lena Berg (since 2024-01-01)"]
    # Tom's lines tell what Tom holds (or held): they stay, as every other line does.
    assert sorted(line for line in after if "Tom [person]:" in line) == [
        "observations deleted: Tom [person]: drives on Mondays",
        "properties changed: Tom [person]: car: (none) -> red",
        "properties changed: Tom [person]: car: red -> blue"]
    assert [line for line in before if "Lena" not in line] == [line for line in after if "Lena" not in line]


def test_quoted_and_long_names_are_found_and_a_name_another_entity_answers_to_is_not(fake_kb: KnowledgeBase) -> None:
    ns = fake_kb.namespace
    long_name = "Professor " + "Quentin " * 30 + "Adeyemi"  # its lines are cut (200 characters) within the name
    fake_kb.add_knowledge_graph([NodeInput(name="Bob] [admin", type="person"), NodeInput(name=long_name, type="person"),
                                 NodeInput(name="Bob", type="person"), NodeInput(name="Eve", type="person")], [])
    later()
    for name in ("Bob] [admin", long_name, "Bob", "Eve"):
        fake_kb.curation.update_entity(name, ns, properties={"note": f"{SECRET} of {name[:3]}"})
    later()
    # Eve's old name "Bob" is an alias of hers, and the name of another entity: lines under "Bob" may be his.
    # (update_entity refuses such an alias; add_knowledge_graph stores it, as a file of an older version holds it.)
    fake_kb.add_knowledge_graph([NodeInput(name="Eve", type="person", aliases=["Bob"])], [])
    assert fake_kb.curation.get_entities(["Eve"], ns)[0][0].aliases == ["Bob"]
    before = lines(fake_kb)
    assert any(line.startswith('properties changed: "Bob] [admin" [person]: note:') for line in before)
    assert any(line.startswith("properties changed: Professor Quentin") for line in before)
    later()

    fake_kb.curation.delete_entities(["Bob] [admin", long_name, "Eve"], ns)
    assert [line for line in lines(fake_kb) if line.startswith("properties changed")] == [
        f"properties changed: Bob [person]: note: (none) -> {SECRET} of Bob"]


def test_a_document_deleted_takes_the_lines_of_the_entities_it_alone_supported(fake_kb: KnowledgeBase) -> None:
    ns = fake_kb.namespace
    fake_kb.add_documents([DocumentInput(id="diary", text=f"My sister Lena was diagnosed with {SECRET} cancer.")])
    fake_kb.add_knowledge_graph([NodeInput(name="Lena", type="person", source_ids=["diary"])], [])
    later()
    # Written from the document (its source), not by hand: the entity goes with its last document.
    fake_kb.add_knowledge_graph([NodeInput(name="Lena", type="person", properties={"dx": SECRET},
                                           source_ids=["diary"])], [])
    assert any(SECRET in line for line in lines(fake_kb))
    later()

    delete_documents(fake_kb, ["diary"], ns)
    assert lines(fake_kb)[:2] == ["document deleted: diary", "entity deleted: Lena [person]"]
    assert not [line for line in lines(fake_kb) if SECRET in line]


def test_a_merge_keeps_the_merged_entitys_lines_until_the_target_is_deleted(fake_kb: KnowledgeBase) -> None:
    ns = fake_kb.namespace
    fake_kb.add_knowledge_graph([NodeInput(name="Lena B.", type="person"), NodeInput(name="Lena Berg", type="person")],
                                [])
    later()
    fake_kb.curation.update_entity("Lena B.", ns, properties={"dx": SECRET})
    later()
    fake_kb.curation.merge_entities(["Lena B."], "Lena Berg", ns)
    merged = lines(fake_kb)
    assert "entity merged: Lena B. [person] into Lena Berg" in merged
    # The value moved to the target: the line that told it is still true of what the memory holds.
    assert f"properties changed: Lena B. [person]: dx: (none) -> {SECRET}" in merged
    later()

    fake_kb.curation.delete_entities(["Lena Berg"], ns)
    assert not [line for line in lines(fake_kb) if SECRET in line]


def test_the_lines_the_store_writes_quote_a_text_that_holds_a_delimiter_of_its_place(fake_kb: KnowledgeBase) -> None:
    """A value "guest; clearance: top-secret" printed bare read as a second property, clearance: top-secret; an
    observation holding "; " as two observations; a name holding "(" as a fact's period, one holding ": " as an
    entity's description."""
    ns = fake_kb.namespace
    fake_kb.add_knowledge_graph(
        [NodeInput(name="Dave", type="person", observations=["badge 7; escorted", "plain note"]),
         NodeInput(name="Acme (2019-01-01 to 2020-01-01)", type="company"),
         NodeInput(name="Carol: trusted", type="person"), NodeInput(name="Carol", type="person")],
        [EdgeInput(source="Dave", target="Acme (2019-01-01 to 2020-01-01)", type="WORKS_AT")])
    later()
    fake_kb.curation.update_entity("Dave", ns, properties={"role": "guest; clearance: top-secret", "floor": "(none)",
                                                           "gate": "a -> b", "level": 2},
                                   add_observations=["met Erin; Frank"], remove_observations=["badge 7; escorted"])
    later()
    fake_kb.curation.delete_relations([RelationRef(source="Dave", target="Acme (2019-01-01 to 2020-01-01)",
                                                   type="WORKS_AT")], ns)
    later()
    fake_kb.curation.merge_entities(["Carol: trusted"], "Carol", ns)
    later()
    fake_kb.curation.delete_entities(["Acme (2019-01-01 to 2020-01-01)"], ns)
    listed = lines(fake_kb)
    assert listed[:2] == ['entity deleted: Acme (2019-01-01 to 2020-01-01) [company]',
                          'entity merged: "Carol: trusted" [person] into Carol']
    assert 'fact deleted: Dave works at "Acme (2019-01-01 to 2020-01-01)"' in listed
    assert ('properties changed: Dave [person]: role: (none) -> "guest; clearance: top-secret"; floor: (none) -> '
            '"(none)"; gate: (none) -> "a -> b"; level: (none) -> 2') in listed
    assert 'observations deleted: Dave [person]: "badge 7; escorted"' in listed
    assert 'observations added: Dave [person]: "met Erin; Frank"' in listed
    # The structured result has the store's lines as written, quotes included.
    subjects = {c.subject for c in fake_kb.recent_changes(limit=1_000).changes}
    assert 'Dave [person]: "badge 7; escorted"' in subjects
