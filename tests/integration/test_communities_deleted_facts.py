"""Relations deleted after a community build (a real DuckDB file, the real default model): they count toward the
share that triggers a rebuild, an extractive report citing one is shown at once without it, a written one is
stale and its text withheld until the rebuild (deleted knowledge is never shown as current, nor handed to a
report's writer) and dropped there, while one written again after the deletion is shown."""

from __future__ import annotations

import pytest
from duckgraph.core.domain.communities.global_search import WITHHELD_FACTS
from duckgraph.core.domain.model import RelationRef

from tests.integration.test_global_search_answers import knowledge_base, topic_graph

pytestmark = pytest.mark.model

#: topic_graph()'s entities and relations: what the build covered.
COVERED = 35 + 36
#: The garden report's first fact, in its summary (relations to the hub of equal weight, the newest first).
GARDEN_SOURCE = "compost bay"
GARDEN_FACT = f"{GARDEN_SOURCE} part of plot 14"


@pytest.fixture
def memory(db_path, minilm):
    with knowledge_base(db_path, minilm) as kb:
        kb.communities.keeper.stop()  # each test builds when it means to
        kb.add_knowledge_graph(*topic_graph())
        kb.communities.build("default")
        yield kb


def delete(kb, *sources: str, target: str = "plot 14") -> None:
    deleted = kb.curation.delete_relations([RelationRef(source=s, target=target, type="PART_OF") for s in sources],
                                           "default")
    assert len(deleted.deleted) == len(sources)


def garden(result):
    return next(r for r in result.reports if "plot 14" in {e.name for e in r.key_entities})


def test_an_extractive_report_citing_a_deleted_fact_is_shown_without_it_at_once(memory):
    before = memory.communities.global_search("What do we know about the garden?", "default")
    assert GARDEN_FACT in garden(before).summary and not garden(before).stale
    delete(memory, GARDEN_SOURCE)
    found = memory.communities.global_search("What do we know about the garden?", "default")
    assert GARDEN_FACT not in found.text and GARDEN_FACT not in found.model_dump_json()
    report = garden(found)
    # Written again from the facts that hold (an extractive report costs no model call): not withheld.
    assert not report.stale and report.summary != WITHHELD_FACTS and "Facts: " in report.summary
    assert f"## {report.title} [community {report.id}, level 0, 8 entities]\n" in found.text
    assert not any(r.stale for r in found.reports)
    assert found.freshness.changed_share == round(1 / COVERED, 4)  # a deleted relation is a change
    assert memory.communities._shrunk("default")  # the keeper rebuilds whatever the share
    material = memory.communities.to_write("default", limit=10).communities
    assert not any(GARDEN_FACT in c.material for c in material)  # nor handed to a report's writer
    memory.communities.build("default")
    rebuilt = garden(memory.communities.global_search("What do we know about the garden?", "default"))
    assert not rebuilt.stale and "Facts: " in rebuilt.summary and GARDEN_FACT not in rebuilt.summary
    assert not memory.communities._shrunk("default")


def test_deleted_relations_count_toward_the_rebuild_share(memory):
    delete(memory, "San Marzano tomatoes", "Crimson Crush", "Maria")
    assert memory.communities.freshness("default").changed_share == round(3 / COVERED, 4)
    delete(memory, *["checkout-service", "ledger-service", "PostgreSQL 16 cluster", "Priya Raman", "Tom Becker",
                     "INC-142", "Stripe", "Adyen", "PgBouncer"], target="payments platform")
    delete(memory, "Sam", "Aisha", "Piranesi", target="Thursday book club")
    fresh = memory.communities.freshness("default")
    assert fresh.changed_share == round(15 / COVERED, 4) and fresh.stale  # past a fifth: the keeper rebuilds
    memory.communities.build("default")
    assert memory.communities.freshness("default").changed_share == 0.0


def test_a_written_report_citing_a_deleted_fact_is_dropped_and_one_written_after_is_shown(memory):
    community = garden(memory.communities.global_search("What do we know about the garden?", "default")).id
    memory.communities.save_written("default", community, "Our tomatoes", "The San Marzano tomatoes grow on plot 14.")
    delete(memory, "San Marzano tomatoes")
    found = memory.communities.global_search("What do we know about the garden?", "default")
    assert "San Marzano tomatoes grow" not in found.text and garden(found).summary == WITHHELD_FACTS
    # Written again by the host from what holds now: shown (the count of deleted facts is never stored).
    memory.communities.save_written("default", community, "Our allotment", "Plot 14 grows Crimson Crush.")
    again = garden(memory.communities.global_search("What do we know about the garden?", "default"))
    assert again.summary == "Plot 14 grows Crimson Crush." and not again.stale
    assert not memory.communities._shrunk("default")
    delete(memory, "Crimson Crush")
    assert garden(memory.communities.global_search("What do we know about the garden?", "default")).summary \
        == WITHHELD_FACTS
    built = memory.communities.build("default")
    assert built.written_reports_dropped == 1
    rebuilt = garden(memory.communities.global_search("What do we know about the garden?", "default"))
    assert rebuilt.author == "extractive" and "Crimson Crush part of" not in rebuilt.summary
