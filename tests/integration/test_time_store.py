"""Time in the store, on a real DuckDB file: how relations with validity are written, ended and read back, the
mirror against the file, the schema upgrade of older files, and `duckgraph changes`."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import duckdb
import pytest

from duckgraph.core.cli import main
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, EdgeInput, EndRelationInput, NodeInput
from duckgraph.core.domain.moments import now
from duckgraph.plugins.duckdb import DuckDBStore, schema
from duckgraph.ports import GraphStore, InvalidInputError, StoreError, TimeFilter
from tests.fakes import HashingEmbedder

NODES = [NodeInput(name="Ravi", type="Person"), NodeInput(name="Acme", type="Organization"),
         NodeInput(name="Globex", type="Organization")]


def edge(target: str = "Acme", **times: str) -> EdgeInput:
    return EdgeInput(source="Ravi", target=target, type="WORKS_AT", **times)


def rows(kb: KnowledgeBase) -> list[tuple[str, datetime | None, datetime | None]]:
    names = {n.id: n.name for n in kb.store.list_nodes("default")}
    return sorted(((names[e.target_id], e.valid_from, e.valid_until)
                   for e in kb.store.list_edges("default", include_expired=True)), key=str)


def d(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_writing_an_open_relation_again_updates_it_and_a_date_fills_in_its_start(fake_kb):
    fake_kb.add_knowledge_graph(NODES, [edge()])
    result = fake_kb.add_knowledge_graph([], [edge(valid_from="2020-05-01T12:00:00+02:00")])
    assert (result.edges_created, result.edges_updated) == (0, 1)
    assert rows(fake_kb) == [("Acme", d("2020-05-01T10:00"), None)]  # UTC


def test_a_relation_written_again_after_it_ended_opens_a_new_period(fake_kb):
    fake_kb.add_knowledge_graph(NODES, [edge(valid_from="2019-01-01")])
    ended = fake_kb.end_relations([EndRelationInput(source="Ravi", target="Acme", type="WORKS_AT",
                                                    ended_at="2021-01-01")])
    assert [e.valid_until for e in ended.ended] == [d("2021-01-01")]
    before = now()
    fake_kb.add_knowledge_graph([], [edge()])  # back at Acme, no start given: from now on
    old, new = rows(fake_kb)[0], rows(fake_kb)[1]
    assert old == ("Acme", d("2019-01-01"), d("2021-01-01"))
    assert new[2] is None and before <= new[1] <= now()
    # the same again, and the old period written again as exported: neither adds a row
    fake_kb.add_knowledge_graph([], [edge(), edge(valid_from="2019-01-01", valid_until="2021-01-01")])
    assert len(rows(fake_kb)) == 2


def test_a_past_period_before_the_current_one_is_a_row_of_its_own_and_one_that_overlaps_ends_it(fake_kb):
    fake_kb.add_knowledge_graph(NODES, [edge(valid_from="2022-01-01")])
    fake_kb.add_knowledge_graph([], [edge(valid_from="2015-01-01", valid_until="2017-01-01")])
    assert rows(fake_kb) == [("Acme", d("2015-01-01"), d("2017-01-01")), ("Acme", d("2022-01-01"), None)]
    fake_kb.add_knowledge_graph([], [edge(valid_until="2023-06-01")])
    assert rows(fake_kb)[1] == ("Acme", d("2022-01-01"), d("2023-06-01"))
    # A period that ends when the current one starts shares no moment with it: a row of its own too.
    fake_kb.add_knowledge_graph([], [edge(valid_from="2019-01-01", valid_until="2022-01-01")])
    assert rows(fake_kb) == [("Acme", d("2015-01-01"), d("2017-01-01")), ("Acme", d("2019-01-01"), d("2022-01-01")),
                             ("Acme", d("2022-01-01"), d("2023-06-01"))]


def test_one_call_with_the_same_relation_twice_writes_it_once(fake_kb):
    result = fake_kb.add_knowledge_graph(NODES, [edge(valid_from="2020-01-01"), edge(valid_until="2021-01-01"),
                                                 edge("Globex", valid_from="2021-02-01")])
    assert (result.edges_created, result.edges_updated) == (2, 0)  # the second names the edge the first created
    assert rows(fake_kb) == [("Acme", d("2020-01-01"), d("2021-01-01")), ("Globex", d("2021-02-01"), None)]


def test_ending_is_all_or_nothing_and_reports_what_had_no_current_match(fake_kb):
    fake_kb.add_knowledge_graph(NODES, [edge(valid_from="2020-01-01"), edge("Globex", valid_from="2023-01-01")])
    with pytest.raises(InvalidInputError, match="before the relation started"):
        fake_kb.end_relations([EndRelationInput(source="Ravi", target="Acme", type="WORKS_AT"),
                               EndRelationInput(source="Ravi", target="Globex", type="WORKS_AT",
                                                ended_at="2022-01-01")])
    assert all(until is None for _, _, until in rows(fake_kb))
    result = fake_kb.end_relations([EndRelationInput(source="Ravi", target="Nobody", type="WORKS_AT"),
                                    EndRelationInput(source="Ravi", target="Acme", type="works at")])
    assert [r.target for r in result.not_found] == ["Nobody"] and [r.target for r in result.ended] == ["Acme"]
    assert fake_kb.end_relations([EndRelationInput(source="Ravi", target="Acme", type="WORKS_AT")]).not_found


def test_an_ended_at_still_to_come_is_a_planned_end_and_a_hint_says_the_fact_holds_until_then(fake_kb):
    fake_kb.add_knowledge_graph(NODES, [edge(valid_from="2020-01-01"), edge("Globex", valid_from="2020-01-01")])
    result = fake_kb.end_relations([EndRelationInput(source="Ravi", target="Acme", type="WORKS_AT",
                                                     ended_at="2999-01-01"),
                                    EndRelationInput(source="Ravi", target="Globex", type="WORKS_AT")])
    acme, globex = result.ended
    assert (acme.target, acme.valid_until, globex.target) == ("Acme", d("2999-01-01"), "Globex")
    # Only the one ended later: Globex's ended now.
    assert result.hints == ["Ravi -WORKS_AT-> Acme: ended_at 2999-01-01 is still to come, so it is a planned end (as "
                            "a valid_until to come is): the relation holds, and search shows it as current, until "
                            "then. To end it now, leave ended_at out"]
    assert rows(fake_kb) == [("Acme", d("2020-01-01"), d("2999-01-01")),
                             ("Globex", d("2020-01-01"), globex.valid_until)]
    assert [e.valid_until for e in fake_kb.store.list_edges("default")] == [d("2999-01-01")]  # those that hold now


def test_the_mirror_filters_as_the_file_holds_after_a_reopen(db_path):
    kb = KnowledgeBase(DuckDBStore(db_path), HashingEmbedder())
    with kb:
        kb.add_knowledge_graph(NODES, [edge(valid_from="2018-01-01", valid_until="2020-01-01"),
                                       edge("Globex", valid_from="2020-01-01"),
                                       EdgeInput(source="Acme", target="Globex", type="PARTNERS_WITH",
                                                 valid_from=(now() + timedelta(days=365)).isoformat())])
        written = _filtered(kb)
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        assert _filtered(kb) == written
    assert written["now"] == {"Globex"}  # the partnership has not started yet, the job at Acme ended
    assert written["2019"] == {"Acme"}
    assert written["history"] == {"Acme", "Globex"}
    assert written["window"] == {"Acme", "Globex"}


def _filtered(kb: KnowledgeBase) -> dict[str, set[str]]:
    store = kb.store
    ravi = store.find_nodes("default", ["ravi"])[0].id
    names = {n.id: n.name for n in store.list_nodes("default")}

    def ends(as_of) -> set[str]:
        return {names[e.target_id] for e in store.neighbors([ravi], "default", as_of=as_of)}

    return {"now": ends(None), "2019": ends(d("2019-06-01")), "history": ends(TimeFilter(history=True)),
            "window": ends(TimeFilter(after=d("2019-06-01"), before=d("2020-06-01")))}


def test_degrees_the_store_counts_match_those_its_links_list_at_every_moment(fake_kb):
    fake_kb.add_knowledge_graph(NODES, [edge(valid_until="2020-01-01"), edge("Globex"),
                                        EdgeInput(source="Acme", target="Globex", type="PARTNERS_WITH",
                                                  valid_from=(now() + timedelta(days=30)).isoformat())])
    ids = sorted(n.id for n in fake_kb.store.list_nodes("default"))
    fake_kb.close()
    fake_kb.open()  # degrees are counted at open: the store's fast paths
    for as_of in (None, d("2019-01-01"), TimeFilter(history=True), TimeFilter(after=d("2019-01-01"))):
        counted, _ = fake_kb.store.passage_links(ids, "default", as_of=as_of)
        listed, _ = GraphStore.passage_links(fake_kb.store, ids, "default", as_of=as_of)  # from `links`
        assert counted.tolist() == listed.tolist(), as_of
    assert fake_kb.store.passage_links(ids, "default")[0].tolist() == [1, 0, 1]


def test_document_times_reach_the_chunks_and_a_new_time_replaces_the_document(fake_kb):
    first = fake_kb.add_documents([DocumentInput(id="n", text="Standup notes.", time="2024-06-03T09:00:00Z")])
    chunk = first.documents[0].chunk_ids[0]
    assert fake_kb.store.chunk_times([chunk], "default") == {chunk: d("2024-06-03T09:00")}
    again = fake_kb.add_documents([DocumentInput(id="n", text="Standup notes.", time="2024-06-04")])
    assert not again.documents[0].unchanged
    chunk = again.documents[0].chunk_ids[0]
    assert fake_kb.store.get_documents(["n"], "default")[0].time == d("2024-06-04")
    assert fake_kb.store.chunk_times([chunk], "default") == {chunk: d("2024-06-04")}


def test_the_upgrade_to_schema_2_adds_document_times_and_drops_the_starts_older_versions_made_up(db_path):
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph(NODES, [edge(), edge("Globex", valid_from="2020-01-01")])
        kb.add_documents([DocumentInput(id="n", text="A note.")])
    con = duckdb.connect(str(db_path))  # as version 1 wrote it: no document times, every start its creation
    con.execute("ALTER TABLE documents DROP COLUMN time")
    con.execute("UPDATE edges SET valid_from = created_at WHERE valid_from IS NULL")
    for statement in schema.MIGRATIONS[2]:  # the later steps are other columns' and tables'
        con.execute(statement)
    con.close()
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        assert rows(kb) == [("Acme", None, None), ("Globex", d("2020-01-01"), None)]
        assert kb.store.get_documents(["n"], "default")[0].time is None
        kb.add_documents([DocumentInput(id="m", text="Another note.", time="2024-01-01")])
        assert kb.store.get_documents(["m"], "default")[0].time == d("2024-01-01")


def test_an_older_file_opened_read_only_is_refused_with_the_fix(db_path):
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph(NODES, [edge()])
    con = duckdb.connect(str(db_path))
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(schema.SCHEMA_VERSION - 1)])
    con.close()
    with pytest.raises(StoreError, match="open it writable once"):
        DuckDBStore(db_path, read_only=True).open()


@pytest.mark.model
def test_duckgraph_search_asks_as_of_a_moment_with_history_and_in_a_window(db_path, capsys, monkeypatch, minilm):
    monkeypatch.setenv("DUCKGRAPH_CONFIG", "")
    with KnowledgeBase(DuckDBStore(db_path), minilm) as kb:
        kb.add_knowledge_graph(NODES, [edge(valid_from="2020-01-01"), edge("Globex", valid_from="2024-01-01")])
        kb.end_relations([EndRelationInput(source="Ravi", target="Acme", type="WORKS_AT", ended_at="2024-01-01")])

    def facts(*flags: str) -> set[tuple[str, str | None]]:
        assert main(["search", "Where does Ravi work?", "--db", str(db_path), "--json", *flags]) == 0
        return {(e["target"], e["valid_until"]) for e in json.loads(capsys.readouterr().out)["edges"]}

    assert facts() == {("Globex", None)}
    assert facts("--as-of", "2022-06-01") == {("Acme", "2024-01-01T00:00:00Z")}
    assert facts("--include-history") == {("Globex", None), ("Acme", "2024-01-01T00:00:00Z")}
    assert facts("--after", "2019-01-01", "--before", "2021-01-01") == {("Acme", "2024-01-01T00:00:00Z")}
    with pytest.raises(SystemExit):
        main(["search", "Where does Ravi work?", "--db", str(db_path), "--as-of", "last spring"])
    assert "not an ISO 8601 date" in capsys.readouterr().err


def test_duckgraph_changes_lists_what_was_written(db_path, capsys, monkeypatch):
    monkeypatch.setenv("DUCKGRAPH_CONFIG", "")
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph(NODES, [edge(valid_from="2020-01-01")])
        kb.end_relations([EndRelationInput(source="Ravi", target="Acme", type="WORKS_AT", ended_at="2024-01-01")])
        kb.add_documents([DocumentInput(id="memo", title="Memo", text="Ravi left Acme.")])
    assert main(["changes", "--db", str(db_path), "--since", "2000-01-01"]) == 0
    out = capsys.readouterr().out
    assert "fact ended: Ravi works at Acme (2020-01-01 to 2024-01-01)" in out
    assert "document added: memo: Memo" in out and "entity created: Ravi [Person]" in out
    assert main(["changes", "--db", str(db_path), "--limit", "2", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert len(listed["changes"]) == 2 and listed["truncated"] is True
    assert main(["changes", "--db", str(db_path), "--until", "2000-01-01"]) == 0
    assert "No changes" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["changes", "--db", str(db_path), "--since", "yesterday"])
    assert "not an ISO 8601 date" in capsys.readouterr().err
