"""Extractive community reports as global_search shows them between builds (a real DuckDB file; hashed vectors:
the behaviour does not depend on the model): written again from the members as they are now, after a deleted
member too, and when too much changed to tell which; a model's report kept as written and marked stale; nothing
read again by a search after no write."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from duckgraph.core.domain.communities import freshness
from duckgraph.core.domain.communities import service as service_module
from duckgraph.core.domain.communities.global_search import WITHHELD
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.leiden import LeidenDetector

from tests.fakes import HashingEmbedder

#: Two groups, each tied to its hub: two communities. "zephyr" recurs in the first group's names only (a
#: recurring word of its report), "gale" in the second's.
GROUPS = {"Project Nightjar": ["Zephyr Labs", "Zephyr Cloud", "Priya Raman", "Omar Haddad"],
          "Project Kestrel": ["Gale Works", "Gale Systems", "Lena Vogel", "Tom Becker"]}


@pytest.fixture
def kb(db_path: Path):
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder(), community_detector=LeidenDetector()) as kb:
        kb.communities.keeper.stop()  # no rebuild: what global_search shows between builds
        add_groups(kb)
        yield kb


def add_groups(kb: KnowledgeBase) -> None:
    """GROUPS as entities joined to their hub, and their communities built."""
    kb.add_knowledge_graph(
        [NodeInput(name=name, type="Thing", description=f"About {name}.")
         for hub, members in GROUPS.items() for name in (hub, *members)],
        [EdgeInput(source=name, target=hub, type="INVOLVES") for hub, members in GROUPS.items()
         for name in members])
    kb.communities.build("default")


def report(kb: KnowledgeBase, hub: str):
    found = kb.communities.global_search("projects", "default", token_budget=5_000)
    return next(r for r in found.reports if hub in {e.name for e in r.key_entities}), found.text


def test_a_deleted_member_leaves_the_extractive_report_at_once_and_it_is_shown(kb):
    before, _ = report(kb, "Project Nightjar")
    assert "Recurring words: zephyr" in before.summary and "Zephyr Labs" in before.summary
    kb.curation.delete_entities(["Zephyr Labs"], "default")
    after, text = report(kb, "Project Nightjar")
    # Written again for the members it has: not withheld, naming neither the entity nor its word ("zephyr"
    # recurs in one name now: no longer a recurring word).
    assert after.summary != WITHHELD and not after.stale and after.size == 4
    assert "Zephyr Labs" not in text and "Recurring words: zephyr" not in text and "Zephyr Cloud" in after.summary
    assert after.summary.startswith("4 entities, mostly Thing (4).")
    assert kb.communities._shrunk("default")  # the keeper still rebuilds it (its central entities may differ)


def test_past_the_changes_read_every_extractive_report_is_written_again(kb, monkeypatch):
    monkeypatch.setattr(freshness, "CHANGES_READ", 1)  # more changes than read: which reports changed is unknown
    kb.add_knowledge_graph([NodeInput(name="Priya Raman", type="Thing", description="Leads the Nightjar team."),
                            NodeInput(name="Lena Vogel", type="Thing", description="Leads the Kestrel team.")], [])
    assert kb.communities.keeper.touched("default", kb.store.community_build("default")) is None
    nightjar, text = report(kb, "Project Nightjar")
    kestrel, _ = report(kb, "Project Kestrel")
    assert "Leads the Nightjar team." in nightjar.summary and "Leads the Kestrel team." in kestrel.summary
    assert not nightjar.stale and not kestrel.stale and "Changed since" not in text


def test_a_models_report_is_kept_as_written_and_marked_stale(kb):
    community = report(kb, "Project Kestrel")[0].id
    kb.communities.save_written("default", community, "Kestrel", "Gale Works builds Kestrel.", author="model")
    kb.add_knowledge_graph([NodeInput(name="Gale Works", type="Thing", description="Sold to Zephyr Labs.")], [])
    kestrel, text = report(kb, "Project Kestrel")
    assert (kestrel.author, kestrel.summary, kestrel.stale) == ("model", "Gale Works builds Kestrel.", True)
    assert text.endswith("(Changed since the reports were built: Gale Works. Reports marked stale may say what no "
                         "longer holds; search gives their current facts.)")


def test_a_search_after_no_write_writes_no_report_again(kb, monkeypatch):
    kb.add_knowledge_graph([NodeInput(name="Omar Haddad", type="Thing", description="Joined in May.")], [])
    calls = []
    original = service_module.as_now
    monkeypatch.setattr(service_module, "as_now", lambda *args: calls.append(1) or original(*args))
    assert "Joined in May." in report(kb, "Project Nightjar")[0].summary
    assert "Joined in May." in report(kb, "Project Nightjar")[0].summary
    assert len(calls) == 1
    kb.add_knowledge_graph([NodeInput(name="Omar Haddad", type="Thing", description="Left in June.")], [])
    assert "Left in June." in report(kb, "Project Nightjar")[0].summary and len(calls) == 2


def test_a_report_whose_central_entities_all_went_names_the_most_linked_members_left(db_path: Path):
    crew = [f"Crew {i}" for i in range(1, 12)]
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder(), community_detector=LeidenDetector()) as kb:
        kb.communities.keeper.stop()
        # Everyone sails with everyone but Crew 9 with Crew 11: one community, its central entities Crew 1 to 8.
        kb.add_knowledge_graph([NodeInput(name=name, type="Person") for name in crew], [
            EdgeInput(source=a, target=b, type="SAILS_WITH") for a, b in itertools.combinations(crew, 2)
            if {a, b} != {"Crew 9", "Crew 11"}])
        kb.communities.build("default")
        (community,) = kb.store.communities("default")
        assert [e["name"] for e in community.details["entities"]] == crew[:8]
        kb.curation.delete_entities(crew[:8], "default")
        found = kb.communities.global_search("crew", "default")
        (shown,) = found.reports
        assert [e.name for e in shown.key_entities] == ["Crew 10", "Crew 9", "Crew 11"]  # most linked, then by id
        assert shown.title == "Crew 10, Crew 9 and Crew 11" and not shown.stale
        assert shown.summary.startswith("3 entities, mostly Person (3).")
        assert not re.search(r"Crew [1-8]\b", found.text)  # nothing of the deleted, in the text or its facts
