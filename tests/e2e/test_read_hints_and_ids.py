"""Reads that find nothing say why (a namespace that holds nothing, an offset past the last item), and document ids
and titles keep no invisible or control characters: through the MCP SDK's client, the real store and model."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from duckgraph.core.mcp.server import build_server
from tests.e2e.test_time import anyio_backend, services  # noqa: F401 (fixtures: asyncio, the real model)
from tests.integration.test_ingest_folder import documents, ingest

pytestmark = pytest.mark.model

EMPTY = "holds nothing yet"


def text(result) -> str:
    return "\n".join(block.text for block in result.content)


@pytest.mark.anyio
async def test_reads_in_a_namespace_that_holds_nothing_say_so(services):
    async with Client(build_server(services)) as client:
        await client.call_tool("add_knowledge_graph", {
            "namespace": "team-api", "nodes": [{"name": "Ann", "type": "Person"}, {"name": "Acme", "type": "Org"}],
            "edges": [{"source": "Ann", "target": "Acme", "type": "WORKS_AT"}]})
        misspelt = {"namespace": "team-apis"}
        got = await client.call_tool("get_entities", {"names": ["Ann"], **misspelt})
        assert got.structured_content["not_found"] == ["Ann"] and EMPTY in got.structured_content["hint"]
        changes = await client.call_tool("recent_changes", misspelt)
        assert EMPTY in text(changes) and "team-apis" in text(changes)
        stats = await client.call_tool("graph_stats", misspelt)
        assert stats.structured_content["nodes"] == 0 and EMPTY in stats.structured_content["hint"]
        paths = await client.call_tool("find_paths", {"source": "Ann", "target": "Acme", **misspelt})
        assert paths.is_error and "no entity named 'Ann', 'Acme'" in text(paths) and EMPTY in text(paths)

        # Where the namespace holds something, nothing of the kind is said.
        right = {"namespace": "team-api"}
        got = await client.call_tool("get_entities", {"names": ["Nobody"], **right})
        assert got.structured_content.get("hint") is None
        assert (await client.call_tool("graph_stats", right)).structured_content.get("hint") is None
        paths = await client.call_tool("find_paths", {"source": "Ann", "target": "Nobody", **right})
        assert EMPTY not in text(paths) and "search first" in text(paths)
        assert EMPTY not in text(await client.call_tool("recent_changes", {"since": "2999-01-01", **right}))


@pytest.mark.anyio
async def test_an_offset_past_the_end_says_so_with_the_total(services):
    async with Client(build_server(services)) as client:
        nodes = [{"name": "Hub", "type": "Thing"}] + [{"name": f"N{i}", "type": "Thing"} for i in range(60)]
        edges = [{"source": "Hub", "target": f"N{i}", "type": "LINKS"} for i in range(60)]
        await client.call_tool("add_knowledge_graph", {"nodes": nodes, "edges": edges})
        got = await client.call_tool("get_entities", {"names": ["Hub", "N1"], "relations_offset": 50})
        by_name = {e["name"]: e for e in got.structured_content["entities"]}
        assert len(by_name["Hub"]["relations"]) == 10 and by_name["N1"]["relations"] == []
        assert got.structured_content["hint"] == "N1 has 1 relation: relations_offset=50 is past it"
        first = await client.call_tool("get_entities", {"names": ["Hub", "N1"]})
        assert first.structured_content.get("hint") is None

        every = (await client.call_tool("recent_changes", {"limit": 500})).structured_content["changes"]
        past = await client.call_tool("recent_changes", {"offset": len(every)})
        assert text(past) == f"offset={len(every)} is past the {len(every)} changes of that span."


@pytest.mark.anyio
async def test_ids_with_invisible_characters_are_refused_and_titles_drop_them(services):
    async with Client(build_server(services)) as client:
        for odd in ("doc\u200bone", "\u202enote", "\ufeffdocone", "\u200b"):
            refused = await client.call_tool("add_documents", {"documents": [{"id": odd, "text": "Kim works at Acme."}]})
            assert refused.is_error and "invisible characters" in text(refused), odd
            refused = await client.call_tool("add_knowledge_graph", {
                "nodes": [{"name": "Kim", "type": "Person", "source_ids": [odd]}]})
            assert refused.is_error and "invisible characters" in text(refused), odd
        assert (await client.call_tool("graph_stats", {})).structured_content["documents"] == 0  # nothing stored

        stored = await client.call_tool("add_documents", {"documents": [
            {"id": "t1", "title": "\u202eevil\ntitle\u200b", "text": "The zebra eats grass in the savanna."}]})
        assert stored.structured_content["documents"][0]["title"] == "evil title"
        found = await client.call_tool("search", {"query": "zebra eats grass"})
        assert "[t1#1] evil title:" in text(found) and "\u202e" not in text(found)
        refused = await client.call_tool("add_documents", {"documents": [
            {"id": "t2", "title": "nul\x00x", "text": "A second text."}]})
        assert refused.is_error and "control characters" in text(refused)


def test_import_refuses_an_invisible_id_as_the_tools_do(tmp_path, db_path):
    from duckgraph.core.files.jsonl_format import DocumentLine

    line = {"kind": "document", "id": "doc\u200bone", "text": "Kim works at Acme."}
    with pytest.raises(ValueError, match="invisible characters"):
        DocumentLine.model_validate(line)
    assert DocumentLine.model_validate({**line, "id": "docone", "title": "\u202ea\u200bb"}).title == "ab"


def test_ingest_skips_a_file_whose_name_holds_an_invisible_character(tmp_path, db_path, monkeypatch, capsys):
    for name in ("DUCKGRAPH_DB", "DUCKGRAPH_NAMESPACE", "DUCKGRAPH_STORE", "DUCKGRAPH_EMBEDDER"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "config.toml").write_text("", encoding="utf-8")
    monkeypatch.setenv("DUCKGRAPH_CONFIG", str(tmp_path / "config.toml"))
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "plain.md").write_text("Ada wrote the first program.\n", encoding="utf-8")
    (folder / "odd\u200bname.md").write_text("Babbage designed the engine.\n", encoding="utf-8")
    code, summary = ingest(db_path, str(folder))
    why = capsys.readouterr().err
    assert "1 skipped" in summary and "odd\u200bname.md: its path holds an invisible character" in why
    assert "rename it" in why
    assert [Path(d).name for d in documents(db_path)] == ["plain.md"]
