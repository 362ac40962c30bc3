"""A document id written with accents composed (NFC, as typed) and decomposed (NFD, as macOS names files) names one
stored document: `add_documents` in the other form replaces it rather than storing a second one that looks the same
(and shows up twice in every search), and `duckgraph ingest` (its replacing, pruning and deleting of emptied files)
follows the same rule. The id stays as it was first stored. Through the official MCP client and `ingest` on a real
DuckDB file."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import anyio
import pytest
from mcp import Client

from duckgraph.core.domain.browse import entity_passages
from duckgraph.core.domain.model import DocumentInput, NodeInput
from duckgraph.core.files import folder
from duckgraph.core.mcp.server import build_server
from duckgraph.ports import ChunkRecord, DocumentRecord, WriteBatch
from tests.e2e.test_mcp_inmemory import make_services
from tests.fakes import HashingEmbedder

NAME = "café-réunion.md"
NFC, NFD = unicodedata.normalize("NFC", NAME), unicodedata.normalize("NFD", NAME)
OLD, NEW = "The budget meeting was held at the Lyon office.\n", "The budget meeting moved to the Nantes office.\n"


def documents(kb) -> list[tuple[str, str]]:
    """(id, text) of every stored document."""
    listed = [d.id for d in kb.store.list_documents("default")]
    return sorted((d.id, d.text) for d in kb.store.get_documents(listed, "default"))


@pytest.mark.parametrize(("first", "then"), [(NFD, NFC), (NFC, NFD)], ids=["nfd-then-nfc", "nfc-then-nfd"])
def test_adding_an_id_in_its_other_form_replaces_the_stored_document(tmp_path: Path, db_path: Path, plugin_manager,
                                                                     first: str, then: str) -> None:
    assert first != then
    services = make_services(tmp_path, db_path, HashingEmbedder(), plugin_manager)

    async def session() -> None:
        async with Client(build_server(services)) as client:
            added = await client.call_tool("add_documents", {"documents": [{"id": first, "text": OLD}]})
            assert not added.is_error, added.content[0].text
            again = await client.call_tool("add_documents", {"documents": [{"id": then, "text": NEW}]})
            assert not again.is_error, again.content[0].text
            [result] = again.structured_content["documents"]
            assert result["replaced"] is True and result["id"] == first  # named as it is stored
            assert documents(services.knowledge_base) == [(first, NEW)]  # one document, the new text
            found = await client.call_tool("search", {"query": "budget meeting office"})
            assert [p["document_id"] for p in found.structured_content["passages"]] == [first]
            # The same text in the other form again: nothing changes.
            same = await client.call_tool("add_documents", {"documents": [{"id": then, "text": NEW}]})
            assert same.structured_content["documents"][0]["unchanged"] is True
            assert documents(services.knowledge_base) == [(first, NEW)]

    anyio.run(session)


def test_one_id_in_both_forms_in_one_call_is_refused_and_nothing_is_written(tmp_path: Path, db_path: Path,
                                                                          plugin_manager) -> None:
    services = make_services(tmp_path, db_path, HashingEmbedder(), plugin_manager)

    async def session() -> None:
        async with Client(build_server(services)) as client:
            refused = await client.call_tool("add_documents", {"documents": [
                {"id": NFC, "text": OLD}, {"id": NFD, "text": NEW}]})
            assert refused.is_error
            message = refused.content[0].text
            assert "the same document id appears twice in one call" in message
            assert ascii(NFC) in message and ascii(NFD) in message and "Unicode normalisation" in message
            assert documents(services.knowledge_base) == []

    anyio.run(session)


def store_as_before(kb, document_id: str, text: str) -> None:
    """Store a document under `document_id` exactly, beside one in its other form: what a file written by a
    duckgraph that did not match ids across forms may hold."""
    vector = kb.embedder.embed_documents([text])[0]
    with kb.writing() as writer:
        writer.commit(WriteBatch(documents=[DocumentRecord(id=document_id, namespace="default", text=text, title="")],
                                 chunks=[ChunkRecord(document_id, 0, text, embedding=vector)]))


def test_a_file_holding_both_forms_replaces_the_one_named_exactly_and_refuses_a_third_form(
        tmp_path: Path, db_path: Path, plugin_manager) -> None:
    services = make_services(tmp_path, db_path, HashingEmbedder(), plugin_manager)
    kb = services.knowledge_base
    mixed = "cafe\u0301-réunion.md"  # é decomposed, then é composed: neither stored form
    assert mixed not in (NFC, NFD) and unicodedata.normalize("NFC", mixed) == NFC
    kb.add_documents([_doc(NFC, OLD)])
    store_as_before(kb, NFD, OLD)
    assert [i for i, _ in documents(kb)] == sorted([NFC, NFD])

    async def session() -> None:
        async with Client(build_server(services)) as client:
            exact = await client.call_tool("add_documents", {"documents": [{"id": NFD, "text": NEW}]})
            assert not exact.is_error and exact.structured_content["documents"][0]["replaced"] is True
            assert documents(kb) == sorted([(NFC, OLD), (NFD, NEW)])
            refused = await client.call_tool("add_documents", {"documents": [{"id": mixed, "text": NEW}]})
            assert refused.is_error
            assert "differ from it only in Unicode normalisation" in refused.content[0].text
            assert ascii(NFC) in refused.content[0].text and ascii(NFD) in refused.content[0].text
            assert documents(kb) == sorted([(NFC, OLD), (NFD, NEW)])  # nothing written

    anyio.run(session)


def _doc(document_id: str, text: str) -> DocumentInput:
    return DocumentInput(id=document_id, text=text)


def _notes(tmp_path: Path, name: str, text: str) -> tuple[Path, Path]:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / name).write_text(text, encoding="utf-8")  # Linux keeps the name's code points as written
    return notes.resolve(), notes.resolve() / name


def _ingest(kb, notes: Path) -> folder.IngestReport:
    return folder.ingest(kb, folder.find_files([str(notes)]), extract=False, prune=[folder.prefix(notes)])


def test_ingest_replaces_a_note_added_by_hand_under_the_composed_path(tmp_path: Path, db_path: Path,
                                                                     plugin_manager) -> None:
    notes, file = _notes(tmp_path, NFD, NEW)  # as macOS names it
    composed = unicodedata.normalize("NFC", file.as_posix())
    assert composed != file.as_posix()
    kb = make_services(tmp_path, db_path, HashingEmbedder(), plugin_manager).knowledge_base
    kb.add_documents([_doc(composed, OLD)])  # the path retyped by hand
    report = _ingest(kb, notes)
    assert report.replaced == [composed] and report.pruned == []
    assert documents(kb) == [(composed, NEW)]
    assert _ingest(kb, notes).unchanged == [composed]  # and again: left as it is
    assert documents(kb) == [(composed, NEW)]


def test_ingest_keeps_a_file_whose_name_changed_form_and_deletes_it_once_emptied(tmp_path: Path, db_path: Path,
                                                                                plugin_manager) -> None:
    notes, file = _notes(tmp_path, NFD, f"---\ntitle: Réunion budget\n---\n{OLD}")  # a title of its own
    stored = file.as_posix()
    services = make_services(tmp_path, db_path, HashingEmbedder(), plugin_manager)
    kb = services.knowledge_base
    assert _ingest(kb, notes).stored == [stored]
    kb.add_knowledge_graph(*_graph(stored))
    # The folder copied by a tool that writes names composed: the same file, its name in the other form, and a
    # new modification time (not the document's time: the stored one is kept, see core/files/folder.py).
    os.rename(file, notes / NFC)
    os.utime(notes / NFC, (1_700_000_000, 1_700_000_000))
    report = _ingest(kb, notes)
    assert report.unchanged == [stored] and report.stored == [] and report.pruned == []
    assert documents(kb) == [(stored, OLD)]  # not a second document, and not pruned as gone
    assert [p["document_id"] for p in entity_passages(kb, "default", "Lyon office")["passages"]] == [stored]
    (notes / NFC).write_text("  \n", encoding="utf-8")  # emptied: its stored text goes
    report = _ingest(kb, notes)
    assert report.emptied == [stored]
    assert documents(kb) == []


def _graph(document_id: str) -> tuple[list[NodeInput], list]:
    return [NodeInput(name="Lyon office", type="Office", source_ids=[document_id])], []
