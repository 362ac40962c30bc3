"""A document stored under a decomposed (NFD) id, as a file name from macOS comes, is cited in source_ids by its
composed (NFC) form, the one a model retypes: the two look alike, and the citation names the stored document, whose
id stays as it was stored. Two stored ids differing only in normalisation are refused when a citation could be
either. Through the official MCP client on a real DuckDB file."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import anyio
from mcp import Client

from duckgraph.core.domain.browse import entity_passages
from duckgraph.core.domain.model import DocumentInput
from duckgraph.core.files.folder import find_files, ingest
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import make_services
from tests.fakes import HashingEmbedder
from tests.integration.test_document_ids_one_document import store_as_before

NAME = "réunion-françois.md"
NFC, NFD = unicodedata.normalize("NFC", NAME), unicodedata.normalize("NFD", NAME)
TEXT = "François Dupont presented the budget for the Lyon office at the meeting.\n"


def document_ids(kb) -> list[str]:
    return sorted(d.id for d in kb.store.list_documents("default"))


def test_a_file_stored_under_a_decomposed_name_is_cited_by_its_composed_one(tmp_path: Path, db_path: Path,
                                                                            plugin_manager) -> None:
    assert NFC != NFD
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / NFD).write_text(TEXT, encoding="utf-8")  # as macOS names it: Linux keeps the name's code points
    services = make_services(tmp_path, db_path, HashingEmbedder(), plugin_manager)
    kb = services.knowledge_base
    ingest(kb, find_files([str(folder)]), extract=False)
    stored = (folder / NFD).resolve().as_posix()
    cited = unicodedata.normalize("NFC", stored)

    async def session() -> None:
        async with Client(build_server(services)) as client:
            written = await client.call_tool("add_knowledge_graph", {
                "nodes": [{"name": "François Dupont", "type": "Person", "source_ids": [cited]},
                          {"name": "Lyon office", "type": "Office"}],
                "edges": [{"source": "François Dupont", "target": "Lyon office", "type": "PRESENTED_BUDGET_OF",
                           "source_ids": [cited]}]})
            assert not written.is_error, written.content[0].text
            assert written.structured_content["nodes_created"] == 2
            assert document_ids(kb) == [stored]  # the id stays as stored: nothing renamed, nothing added
            linked = entity_passages(kb, "default", "François Dupont")["passages"]
            assert [p["document_id"] for p in linked] == [stored]  # the provenance names the stored document

    anyio.run(session)


def test_a_citation_that_two_stored_ids_could_be_is_refused_and_nothing_is_written(tmp_path: Path, db_path: Path,
                                                                                   plugin_manager) -> None:
    services = make_services(tmp_path, db_path, HashingEmbedder(), plugin_manager)
    mixed = "réunion-franc\u0327ois.md"  # é composed, ç decomposed: neither form stored below
    assert mixed not in (NFC, NFD) and unicodedata.normalize("NFC", mixed) == NFC

    # Both forms stored, as a file written before add_documents matched ids across forms may hold (it now replaces
    # the stored document instead: tests/integration/test_document_ids_one_document.py).
    services.knowledge_base.add_documents([DocumentInput(id=NFC, text=TEXT)])
    store_as_before(services.knowledge_base, NFD, TEXT.replace("Lyon", "Nantes"))
    assert document_ids(services.knowledge_base) == sorted([NFC, NFD])

    async def session() -> None:
        async with Client(build_server(services)) as client:
            refused = await client.call_tool("add_knowledge_graph", {"nodes": [
                {"name": "François Dupont", "type": "Person", "source_ids": [mixed]}], "edges": []})
            assert refused.is_error
            message = refused.content[0].text
            assert "differ from it only in Unicode normalisation" in message
            assert ascii(NFC) in message and ascii(NFD) in message
            nodes = await client.call_tool("graph_stats", {})
            assert nodes.structured_content["nodes"] == 0
            # Either stored id, cited as stored, names its own document.
            for exact in (NFC, NFD):
                written = await client.call_tool("add_knowledge_graph", {"nodes": [
                    {"name": "François Dupont", "type": "Person", "source_ids": [exact]}], "edges": []})
                assert not written.is_error, written.content[0].text
            linked = entity_passages(services.knowledge_base, "default", "François Dupont")["passages"]
            assert sorted(p["document_id"] for p in linked) == sorted([NFC, NFD])

    anyio.run(session)


def test_an_id_stored_in_no_form_is_still_refused(tmp_path: Path, db_path: Path, plugin_manager) -> None:
    services = make_services(tmp_path, db_path, HashingEmbedder(), plugin_manager)

    async def session() -> None:
        async with Client(build_server(services)) as client:
            await client.call_tool("add_documents", {"documents": [{"id": NFD, "text": TEXT}]})
            refused = await client.call_tool("add_knowledge_graph", {"nodes": [
                {"name": "François Dupont", "type": "Person", "source_ids": ["réunion-pierre.md"]}], "edges": []})
            assert refused.is_error
            assert "source_ids name documents that are not stored: réunion-pierre.md" in refused.content[0].text

    anyio.run(session)
