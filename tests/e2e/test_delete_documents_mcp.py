"""Deleting a document stored by mistake, through the official MCP client on the real server, a real DuckDB file
and the real default model: `delete_documents` (in the `all` set, beside the other tools past the default set's
budget) removes its passages from search, by words and by meaning, with the entities only it supported; lists it in
recent_changes; leaves the other documents as they were; matches an id in its other Unicode form as add_documents
does; says why an id named nothing; and refuses a bad id without deleting anything."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from mcp import Client

from duckgraph.core.bootstrap import Services, bootstrap
from duckgraph.core.config import load_settings
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import call_ok, counts, error_text

pytestmark = pytest.mark.model

MISTAKE = {"id": "hr-note-17", "title": "HR note",
           "text": "Priya Raman's social security number is 123-45-6789 and her yearly salary is 184,000 dollars."}
ROADMAP = {"id": "roadmap", "title": "Roadmap",
           "text": "The Payments Team migrates the billing service to Kafka in May; Priya Raman reviews the plan."}
MINUTES = {"id": "minutes", "title": "Minutes", "text": "The platform guild meets every Tuesday to review incidents."}
NODES = [
    {"name": "Priya Raman", "type": "Person", "source_ids": ["hr-note-17", "roadmap"]},  # also in the roadmap
    {"name": "Salary band 7", "type": "Compensation", "source_ids": ["hr-note-17"]},  # only in the mistake
    {"name": "Payments Team", "type": "Team", "source_ids": ["roadmap"]},
    {"name": "Platform Guild", "type": "Team"},  # written by hand
]
EDGES = [{"source": "Priya Raman", "target": "Salary band 7", "type": "PAID_IN", "source_ids": ["hr-note-17"]},
         {"source": "Priya Raman", "target": "Payments Team", "type": "REVIEWS_PLAN_OF", "source_ids": ["roadmap"]}]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def serve(folder: Path, plugin_manager, embedder, tools: str = "all") -> Services:
    config = folder / "config.toml"
    config.write_text("", encoding="utf-8")
    settings = load_settings(config, env={}, db=str(folder / "kb.duckdb"), warm_up=False, tools=tools)
    return bootstrap(settings, plugin_manager=plugin_manager, embedder=embedder)


@pytest.fixture
def services(tmp_path: Path, plugin_manager, minilm) -> Services:
    return serve(tmp_path, plugin_manager, minilm)


async def passages(client: Client, query: str) -> list[str]:
    """The documents of the passages search returns, and of those its text shows ranked lower."""
    found = await call_ok(client, "search", {"query": query, "max_passages": 10})
    return [p["document_id"] for p in found["passages"]] + [
        d for d in ("hr-note-17", "roadmap", "minutes") if f"[{d}#" in found["text"]]


@pytest.mark.anyio
async def test_a_document_stored_by_mistake_is_deleted_with_what_only_it_supported(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_documents", {"documents": [MISTAKE, ROADMAP, MINUTES]})
        await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": EDGES})
        assert "hr-note-17" in await passages(client, "social security number and salary")
        before = await call_ok(client, "search", {"query": "Payments Team billing migration"})

        deleted = await call_ok(client, "delete_documents", {"ids": ["hr-note-17"]})
        assert deleted == {"deleted": ["hr-note-17"], "not_found": [], "entities_removed": 1,
                           "relations_removed": 1, "hints": []}

        # Nothing of it is found, by its words (the keyword index) or by meaning (its vectors)...
        for query in ("social security number and salary", "123-45-6789", "184,000 dollars yearly salary"):
            found = await call_ok(client, "search", {"query": query, "max_passages": 10})
            assert "hr-note-17" not in await passages(client, query), query
            assert "123-45-6789" not in found["text"] and "184,000" not in found["text"], query
        # ... the entity only it supported went with it; one the roadmap names too stays, as does one by hand.
        got = await call_ok(client, "get_entities", {"names": ["Salary band 7", "Priya Raman", "Platform Guild"]})
        assert got["not_found"] == ["Salary band 7"]
        assert [e["name"] for e in got["entities"]] == ["Priya Raman", "Platform Guild"]
        assert [r["type"] for r in got["entities"][0]["relations"]] == ["REVIEWS_PLAN_OF"]

        changes = (await call_ok(client, "recent_changes", {"limit": 5}))["changes"]
        assert {(c["change"], c["subject"]) for c in changes} >= {
            ("document deleted", "hr-note-17"), ("entity deleted", "Salary band 7 [Compensation]")}

        # The other documents are as they were: same passages, found as before.
        assert counts(services) == {"nodes": 3, "edges": 1, "documents": 2, "chunks": 2}
        after = await call_ok(client, "search", {"query": "Payments Team billing migration"})
        assert [(p["document_id"], p["text"]) for p in after["passages"]] == [
            (p["document_id"], p["text"]) for p in before["passages"] if p["document_id"] != "hr-note-17"]
        assert "roadmap" in [p["document_id"] for p in after["passages"]]
        assert "minutes" in await passages(client, "When does the platform guild meet?")


@pytest.mark.anyio
async def test_ids_not_found_are_listed_with_why_and_a_bad_id_deletes_nothing(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_documents", {"documents": [MISTAKE, ROADMAP]})
        await call_ok(client, "add_documents", {"documents": [MINUTES], "namespace": "work"})

        # A bad id fails the whole call: the good one beside it is not deleted either.
        refused = await client.call_tool("delete_documents", {"ids": ["hr-note-17", "hr\u200bnote"]})
        assert "delete_documents refused its arguments: ids[1]: must not contain invisible characters" in error_text(
            refused)
        refused = await client.call_tool("delete_documents", {"ids": []})
        assert "ids: needs at least 1 item" in error_text(refused)
        assert counts(services)["documents"] == 3  # of every namespace

        result = await call_ok(client, "delete_documents", {"ids": ["hr-note-17", "minutes", "road map"]})
        assert result["deleted"] == ["hr-note-17"] and result["not_found"] == ["minutes", "road map"]
        # Another namespace's documents are never named to the model (namespaces.md: nothing of one is visible).
        assert result["hints"] == [
            "no document 'minutes', 'road map' in the namespace 'default': give each id exactly as search shows it "
            "(a passage's document_id); recent_changes lists the documents added"]
        empty = await call_ok(client, "delete_documents", {"ids": ["roadmap"], "namespace": "wrok"})
        assert empty["deleted"] == [] and empty["hints"] == [
            "no document 'roadmap'. The namespace 'wrok' holds nothing yet. If the memory is in another one, "
            "list_namespaces (`duckgraph namespaces`) shows those there are."]
        assert counts(services)["documents"] == 2

        done = await call_ok(client, "delete_documents", {"ids": ["minutes"], "namespace": "work"})
        assert done["deleted"] == ["minutes"]
        again = await call_ok(client, "delete_documents", {"ids": ["minutes"], "namespace": "work"})
        assert again["deleted"] == [] and "The namespace 'work' holds nothing yet" in again["hints"][0]
        assert counts(services)["documents"] == 1


@pytest.mark.anyio
async def test_an_id_retyped_in_its_other_unicode_form_deletes_the_stored_document(services):
    stored = unicodedata.normalize("NFD", "notes/café-salaires.md")  # a file name from macOS, decomposed
    retyped = unicodedata.normalize("NFC", stored)
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_documents", {"documents": [{"id": stored, "text": MISTAKE["text"]}, ROADMAP]})
        result = await call_ok(client, "delete_documents", {"ids": [retyped, stored]})  # both forms: one document
        assert result["deleted"] == [stored] and result["not_found"] == []
        changes = (await call_ok(client, "recent_changes", {"limit": 3}))["changes"]
        assert ("document deleted", stored) in [(c["change"], c["subject"]) for c in changes]
        assert counts(services)["documents"] == 1


@pytest.mark.anyio
async def test_only_the_all_set_lists_it(tmp_path, plugin_manager, minilm):
    for tools, listed in (("graphrag", False), ("memory", False), ("all", True)):
        folder = tmp_path / tools
        folder.mkdir()
        async with Client(build_server(serve(folder, plugin_manager, minilm, tools))) as client:
            names = [t.name for t in (await client.list_tools()).tools]
        assert ("delete_documents" in names) is listed, tools


@pytest.mark.anyio
async def test_deleting_an_entity_names_the_documents_that_still_name_it(tmp_path, plugin_manager, minilm):
    """The default set stores texts but cannot delete them: after delete_entities, search still shows the passage
    "My sister Lena has VELLICORD cancer", so the hints name the documents whose passages still name a deleted
    entity (all the words of its name), and how to delete them."""
    async with Client(build_server(serve(tmp_path, plugin_manager, minilm, tools="graphrag"))) as client:
        assert "delete_documents" not in [t.name for t in (await client.list_tools()).tools]
        await call_ok(client, "add_documents", {"documents": [
            {"id": "chat-7", "title": "Chat", "text": "My sister Lena has VELLICORD cancer. Also, Tom Berg joined Acme."},
            {"id": "chat-8", "title": "Chat", "text": "Lena called about the garden on Sunday."},
            {"id": "chat-9", "title": "Chat", "text": "Tom fixed the office printer again."}, MINUTES]})
        await call_ok(client, "add_knowledge_graph", {"nodes": [
            {"name": "Lena", "type": "Person", "description": "sister, has VELLICORD cancer", "source_ids": ["chat-7"]},
            {"name": "Tom Berg", "type": "Person", "source_ids": ["chat-7"]},
            {"name": "Zed Corp", "type": "Organization"}], "edges": []})

        lena = await call_ok(client, "delete_entities", {"names": ["Lena"]})
        assert lena["deleted"] == ["Lena"] and len(lena["hints"]) == 1
        hint = lena["hints"][0]
        assert hint.startswith("2 stored documents still have passages naming 'Lena' ('chat-"), hint
        assert "'chat-7'" in hint and "'chat-8'" in hint and "chat-9" not in hint and "minutes" not in hint
        assert hint.endswith(": search still finds them, and an extractor could read the entity from them again. To "
                             "forget it there too, delete them: delete_documents (in the `all` tool set), `duckgraph "
                             "documents delete ID...`, or the web UI (`duckgraph ui`)")
        # Every word of the name: "Tom fixed the printer" does not name Tom Berg.
        tom = await call_ok(client, "delete_entities", {"names": ["tom berg"]})
        assert tom["hints"] == [
            "1 stored document still has passages naming 'Tom Berg' ('chat-7'): search still finds it, and an "
            "extractor could read the entity from it again. To forget it there too, delete it: delete_documents (in "
            "the `all` tool set), `duckgraph documents delete ID...`, or the web UI (`duckgraph ui`)"]
        assert (await call_ok(client, "delete_entities", {"names": ["Zed Corp"]}))["hints"] == []
