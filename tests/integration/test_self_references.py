"""An entity written as the user ("me", "I", "User") rather than under their name: the write says it stands for
the user, and how to make it one entity under their name (resolution.self_reference_hint). On a real DuckDB file
with the instant hashing embedder."""

from __future__ import annotations

from duckgraph.core.domain import memory_server as memory
from duckgraph.core.domain.model import MemoryEntityInput, NodeInput, RelationInput
from duckgraph.core.domain.resolution import is_self_reference


def test_the_self_references_are_a_short_closed_list_in_any_case():
    assert all(map(is_self_reference, ["me", "I", "Myself", "USER", "the user", "The User", "me (user)"]))
    assert not any(map(is_self_reference, ["Maria Santos", "Mom", "users", "Ian", "Meg"]))


def test_a_node_created_as_me_gets_the_merge_into_the_entity_that_says_it_is_the_user(fake_kb):
    fake_kb.add_knowledge_graph([NodeInput(name="Maria Santos", type="Person", description="The user")], [])
    result = fake_kb.add_knowledge_graph([NodeInput(name="me", type="Person"), NodeInput(name="Mom", type="Person")],
                                         [])
    [hint] = [h for h in result.hints if "stand(s) for the user" in h]
    assert hint == ("'me' stand(s) for the user (an English self-reference), not someone of that name: the user is "
                    "best one entity under their name, with such names as aliases: "
                    'merge_entities(sources=["me"], target="Maria Santos")')
    # Under their name, or another name: no such hint.
    assert not any("for the user" in h for h in fake_kb.add_knowledge_graph(
        [NodeInput(name="Ana", type="Person")], []).hints)


def test_without_the_user_s_entity_the_hint_says_how_to_name_one(fake_kb):
    fake_kb.add_knowledge_graph([NodeInput(name="User", type="Person")], [])
    result = fake_kb.add_knowledge_graph([NodeInput(name="I", type="Person")], [])
    [hint] = [h for h in result.hints if "stand(s) for the user" in h]
    assert hint.endswith(': once their name is known, update_entity(name="User", new_name="<their name>") (the old '
                         "name stays an alias), then merge the others into it with merge_entities")


def test_the_memory_tools_say_that_me_made_by_a_relation_or_an_entity_is_the_user(fake_kb):
    [mom, other] = memory.create_relations(fake_kb, [
        RelationInput.model_validate({"from": "Mom", "to": "me", "relationType": "mother_of"}),
        RelationInput.model_validate({"from": "Mom", "to": "Ana", "relationType": "mother_of"})])
    assert "'me' stand(s) for the user" in mom.note and "write the user's observations and relations under their " \
        "name instead" in mom.note
    assert "for the user" not in other.note  # Ana is no self-reference
    [user] = memory.create_entities(fake_kb, [MemoryEntityInput(name="USER", entityType="person", observations=[])]).entities
    assert "'USER' stand(s) for the user" in user.note
