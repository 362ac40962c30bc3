"""The periods of one relation in the store, on a real DuckDB file: which stored period a write updates, what a
merge and a rename do to relations with several periods, and a namespace with a final newline on the command
line."""

from __future__ import annotations

from datetime import datetime

from duckgraph.core.cli import main
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, NodeInput

NS = "default"
NODES = [NodeInput(name="Ravi", type="Person"), NodeInput(name="R. Kumar", type="Person"),
         NodeInput(name="Acme", type="Organization")]


def edge(source: str = "Ravi", **more: str) -> EdgeInput:
    return EdgeInput(source=source, target="Acme", type="WORKS_AT", **more)


def rows(kb: KnowledgeBase) -> list[tuple[datetime | None, datetime | None, str]]:
    return sorted(((e.valid_from, e.valid_until, e.description)
                   for e in kb.store.list_edges(NS, include_expired=True)), key=str)


def d(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_a_period_written_again_exactly_updates_that_period_not_the_current_one(fake_kb):
    fake_kb.add_knowledge_graph(NODES, [edge(valid_from="2015-01-01", valid_until="2017-01-01", description="first"),
                                        edge(valid_from="2022-01-01", description="now")])
    fake_kb.add_knowledge_graph([], [edge(valid_from="2015-01-01", valid_until="2017-01-01", description="junior")])
    assert rows(fake_kb) == [(d("2015-01-01"), d("2017-01-01"), "junior"), (d("2022-01-01"), None, "now")]


def test_a_rename_keeps_each_period_of_a_relation_its_own(fake_kb):
    fake_kb.add_knowledge_graph(NODES, [edge(valid_from="2099-01-01", description="planned return"),
                                        edge(valid_from="2018-01-01", valid_until="2050-01-01", description="now")])
    fake_kb.curation.update_entity("Ravi", NS, new_name="Ravi Kumar")
    assert rows(fake_kb) == [(d("2018-01-01"), d("2050-01-01"), "now"), (d("2099-01-01"), None, "planned return")]


def test_a_merge_folds_only_relations_of_the_same_period(fake_kb):
    fake_kb.add_knowledge_graph(NODES, [
        edge(valid_from="2099-01-01", description="planned return"),
        edge("R. Kumar", valid_from="2018-01-01", description="works there now"),
        edge(valid_from="2010-01-01", valid_until="2012-01-01", description="intern"),
        edge("R. Kumar", valid_from="2010-01-01", valid_until="2012-01-01", description="internship")])
    merged = fake_kb.curation.merge_entities(["R. Kumar"], "Ravi", NS)
    assert merged.edges_collapsed == 1  # the two internships: one relation over one period
    assert rows(fake_kb) == [(d("2010-01-01"), d("2012-01-01"), "intern"),
                             (d("2018-01-01"), None, "works there now"),
                             (d("2099-01-01"), None, "planned return")]
    # The two open periods overlap now; a write that leaves a period as it is goes through all the same.
    fake_kb.add_knowledge_graph([], [edge(description="senior engineer")])
    assert rows(fake_kb)[1] == (d("2018-01-01"), None, "senior engineer")


def test_the_command_line_refuses_a_namespace_with_a_final_newline(db_path, capsys):
    assert main(["stats", "--db", str(db_path), "--namespace", "alpha\n"]) == 1
    assert "invalid namespace 'alpha\\n'" in capsys.readouterr().err
