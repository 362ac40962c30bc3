"""Relations with a planned end (or start) and how fresh the communities are (a real DuckDB file; hashed vectors:
the behaviour does not depend on the model): an end still to come is no change since the build, however many
relations have one, and writes do not rebuild for it; an end that passes after the build is one, with no write:
counted, the report shown without the fact, and a rebuild due."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.leiden import LeidenDetector

from tests.fakes import HashingEmbedder

NODES = [NodeInput(name="Maya Chen", type="Person"), NodeInput(name="Bob Stone", type="Person"),
         NodeInput(name="Acme", type="Organization")]


@pytest.fixture
def kb(db_path: Path):
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder(), community_detector=LeidenDetector()) as kb:
        kb.communities.keeper.settle = 0.2
        yield kb


def team(ending: str | None) -> list[EdgeInput]:
    """Three relations among NODES, two of them (Maya Chen's) ending at `ending`."""
    return [EdgeInput(source="Maya Chen", target="Acme", type="CONTRACTED_BY", valid_from="2024-01-01",
                      valid_until=ending),
            EdgeInput(source="Maya Chen", target="Bob Stone", type="MENTORS", valid_until=ending),
            EdgeInput(source="Bob Stone", target="Acme", type="WORKS_AT")]


def test_an_end_still_to_come_changes_nothing_since_the_build(kb):
    # Two of three relations end in 2030 and one starts in 2099: none of that has happened yet.
    kb.add_knowledge_graph(NODES, [*team("2030-01-01"),
                                   EdgeInput(source="Bob Stone", target="Maya Chen", type="SUCCEEDS",
                                             valid_from="2099-01-01")])
    for _ in range(2):
        kb.communities.build("default")
        found = kb.communities.global_search("Acme", "default")
        assert (found.freshness.changed_share, found.freshness.stale) == (0.0, False)
        assert "changed since" not in found.text.casefold()
    built_at = kb.store.community_build("default").built_at
    kb.add_knowledge_graph([NodeInput(name="Extra", type="Thing")], [])  # 1 of 6: no rebuild due
    assert kb.communities.keeper.idle.wait(10)
    assert kb.store.community_build("default").built_at == built_at
    assert kb.communities.global_search("Acme", "default").freshness.changed_share == round(1 / 6, 4)


def test_an_end_that_passes_after_the_build_is_a_change_without_a_write(kb):
    ending = datetime.now(timezone.utc) + timedelta(seconds=4)
    kb.add_knowledge_graph(NODES, team(ending.isoformat()))
    kb.communities.build("default")
    before = kb.communities.global_search("Acme", "default")
    assert datetime.now(timezone.utc) < ending, "too slow: the build was meant to come before the end"
    assert before.freshness.changed_share == 0.0 and "Maya Chen contracted by Acme" in before.text
    built_at = kb.store.community_build("default").built_at
    time.sleep(max((ending - datetime.now(timezone.utc)).total_seconds(), 0) + 0.2)

    after = kb.communities.global_search("Acme", "default")
    # 2 of the 6 entities and relations the build covered: past the rebuild share, with no write to wake it.
    assert (after.freshness.changed_share, after.freshness.stale) == (round(2 / 6, 4), True)
    assert "Maya Chen contracted by Acme" not in after.text  # the extractive report as the graph is now
    assert kb.communities.keeper.idle.wait(30)
    assert kb.store.community_build("default").built_at > built_at
    rebuilt = kb.communities.global_search("Acme", "default")
    assert (rebuilt.freshness.changed_share, rebuilt.freshness.stale) == (0.0, False)
