"""What global_search says of what no report holds (a real DuckDB file, the real default model): a new topic
written below the rebuild share is named in the closing line until a build includes it, and a running server
rebuilds for it however small it is; documents stored without entities say how to get entities, and search does
not send their question back to global_search; relations stored after a build that found none say a build is under
way (or is to be asked for); and a build of a namespace that holds nothing is refused, naming those there are."""

from __future__ import annotations

from pathlib import Path

import pytest
from duckgraph.core.domain.communities.service import BUILD_DUE, BUILD_PENDING, NO_ENTITIES, NO_RELATIONS
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from duckgraph.ports import NotFoundError

from tests.fakes import HashingEmbedder
from tests.integration.test_communities import knowledge_base, planted_graph

pytestmark = pytest.mark.model

#: A topic of its own: related among themselves, to nothing stored before.
CAR = ["Volvo XC60", "Annual service", "Winter tyres", "Kwik Fit garage"]
CAR_QUESTION = "What do I know about my car?"


def car_topic() -> tuple[list[NodeInput], list[EdgeInput]]:
    return ([NodeInput(name=name, type="Car Matter", description=f"{name} for the family car") for name in CAR],
            [EdgeInput(source=CAR[0], target=name, type="NEEDS") for name in CAR[1:]])


def first_names(result) -> set[str]:
    return {e.name for e in result.reports[0].key_entities}


def test_entities_no_report_holds_are_named_until_a_build_includes_them(db_path: Path, minilm):
    with knowledge_base(db_path, minilm) as kb:
        kb.communities.keeper.stop()  # no rebuild here: the reports stay those of the build below
        kb.add_knowledge_graph(*planted_graph())
        kb.communities.build("default")
        kb.add_knowledge_graph(*car_topic())
        # One tied to a community: no report names it either, though the next build puts it in that community.
        kb.add_knowledge_graph([NodeInput(name="Mars rover", type="Vehicle")],
                               [EdgeInput(source="Mars rover", target="Mars", type="EXPLORES")])
        found = kb.communities.global_search(CAR_QUESTION, "default")
        assert not found.freshness.stale  # 9 of 124 changed: below the rebuild share
        assert found.text.endswith("\n(5 entities written or linked since the last build are in no report yet, e.g. "
                                   "Volvo XC60; build_communities includes them, and search finds them meanwhile.)")
        assert not any("Volvo XC60" in {e.name for e in r.key_entities} for r in found.reports)
        kb.communities.build("default")
        found = kb.communities.global_search(CAR_QUESTION, "default")
        assert "no report yet" not in found.text and "Volvo XC60" in first_names(found)


def test_a_running_server_rebuilds_for_a_new_topic_however_small(db_path: Path, minilm):
    with knowledge_base(db_path, minilm) as kb:
        kb.add_knowledge_graph(*planted_graph())
        kb.communities.keeper.settle = 0.2
        kb.communities.build("default")
        first = kb.store.community_build("default").built_at
        kb.add_knowledge_graph(*car_topic())  # 7 of 124: below the share, yet no report may speak of it
        assert kb.communities.keeper.idle.wait(30)
        assert kb.store.community_build("default").built_at > first
        found = kb.communities.global_search(CAR_QUESTION, "default")
        assert "Volvo XC60" in first_names(found) and not found.freshness.changed_share


def test_while_a_rebuild_is_due_the_closing_line_says_it_is_under_way(db_path: Path):
    with knowledge_base(db_path, HashingEmbedder()) as kb:
        kb.add_knowledge_graph(*planted_graph())
        kb.communities.build("default")
        kb.communities.keeper.settle = 60  # woken by the write below, it looks only after this
        kb.add_knowledge_graph(*car_topic())
        found = kb.communities.global_search(CAR_QUESTION, "default")
        assert found.text.endswith("(4 entities written or linked since the last build are in no report yet, e.g. "
                                   "Volvo XC60; a rebuild that includes them is under way: ask again in a moment.)")
        kb.communities.keeper.stop()


def test_documents_without_entities_say_how_to_get_them_and_search_does_not_send_back(db_path: Path, minilm):
    question = "What are the main themes in my notes?"
    with knowledge_base(db_path, minilm) as kb:
        kb.communities.keeper.stop()
        kb.add_documents([  # as `duckgraph ingest` stores them when no extractor is configured
            DocumentInput(id="garden.md", text="Planted Sungold tomatoes in the greenhouse. Slugs ate half the "
                                               "courgettes; put down wool pellets."),
            DocumentInput(id="team.md", text="Maya Chen wants to move to the Data Team next quarter. Omar Haddad is "
                                             "leading the mobile app v3 release.")])
        assert kb.communities.global_search(question, "default").hint == NO_ENTITIES  # not "call build_communities"
        kb.communities.build("default")  # finds nothing to group
        found = kb.communities.global_search(question, "default")
        assert found.hint == found.text == NO_ENTITIES
        assert "extract_knowledge" in NO_ENTITIES and "duckgraph ingest --extract" in NO_ENTITIES
        searched = kb.search(question)
        assert searched.nothing_relevant and searched.hint is None and "global_search" not in searched.text
        assert kb.search("What did the slugs eat?").passages  # what NO_ENTITIES says: search finds passages


def test_relations_stored_after_a_build_that_found_none_are_being_built_or_to_be_built(db_path: Path):
    with knowledge_base(db_path, HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Lonely", type="Thing"), NodeInput(name="Alone", type="Thing")], [])
        kb.communities.build("default")
        assert kb.communities.global_search("main themes", "default").hint == NO_RELATIONS
        kb.communities.keeper.settle = 60  # woken by the write below, it builds only after this
        kb.add_knowledge_graph([], [EdgeInput(source="Lonely", target="Alone", type="KNOWS")])
        found = kb.communities.global_search("main themes", "default")
        assert found.hint == found.text == BUILD_PENDING
        kb.communities.keeper.stop()  # as in a process whose keeper never runs: nothing will build them
        assert kb.communities.global_search("main themes", "default").hint == BUILD_DUE
        kb.communities.build("default")
        assert kb.communities.global_search("main themes", "default").reports


def test_a_build_of_a_namespace_that_holds_nothing_is_refused_naming_those_there_are(db_path: Path):
    with knowledge_base(db_path, HashingEmbedder()) as kb:
        kb.communities.keeper.stop()
        kb.add_knowledge_graph([NodeInput(name="Alpha Corp", type="Org"), NodeInput(name="Beta Ltd", type="Org")],
                               [EdgeInput(source="Alpha Corp", target="Beta Ltd", type="ACQUIRES")], namespace="two")
        with pytest.raises(NotFoundError) as refused:
            kb.communities.build("Two")
        assert str(refused.value) == ("the namespace 'Two' holds nothing to build communities from: did you mean "
                                      "'two' (names are case-sensitive)? The file's namespaces are 'two'; nothing was "
                                      "built")
        assert kb.store.community_build("Two") is None  # nothing recorded
        assert kb.communities.build("two").communities == 1
