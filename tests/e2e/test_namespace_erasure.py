"""Deleting a namespace erases it whole, through the official MCP client against the real server, the real DuckDB
file and the real default model: its log of what writes deleted or replaced (the texts recent_changes lists) goes
with it, a compacted file keeps no trace of its texts, a namespace left with only that log is listed and can be
deleted, a deletion counts as the namespace's last write, and a tool's hint never names another namespace's
documents."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from mcp import Client

from duckgraph.core.bootstrap import Services, bootstrap
from duckgraph.core.config import load_settings
from duckgraph.core.domain.documents import delete_documents
from duckgraph.core.files.backup import compact
from duckgraph.core.mcp.server import build_server

pytestmark = [pytest.mark.model, pytest.mark.anyio]

WORK_SECRET = "WORKSECRET"
HOME_SECRET = "HOMESECRET"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def services(tmp_path: Path, db_path: Path, plugin_manager, minilm) -> Services:
    return open_services(tmp_path, db_path, plugin_manager, minilm)


def open_services(folder: Path, db: Path, plugin_manager, embedder) -> Services:
    config = folder / "config.toml"
    config.write_text("", encoding="utf-8")
    return bootstrap(load_settings(config, env={}, db=str(db), warm_up=False, tools="all"),
                     plugin_manager=plugin_manager, embedder=embedder)


async def call_ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, (tool, result.content)
    return result.structured_content


async def changes(client: Client, namespace: str) -> list[str]:
    found = await call_ok(client, "recent_changes", {"namespace": namespace, "limit": 100})
    return [f"{c['change']}: {c['subject']}" for c in found["changes"]]


async def fill(client: Client, namespace: str, secret: str) -> None:
    """A document, entities and facts, then a property and an observation changed: log lines with `secret`."""
    ns = {"namespace": namespace}
    await call_ok(client, "add_documents", {"documents": [
        {"id": "notes", "title": "Notes", "text": f"Alex owns the Billing Service at Globex. {secret} numbers."},
        {"id": f"{namespace}-only", "title": "Only here", "text": f"The Billing Service {secret} migration."}], **ns})
    await call_ok(client, "add_knowledge_graph", {"nodes": [
        {"name": "Alex", "type": "Person", "description": "engineer", "source_ids": ["notes"],
         "observations": [f"{secret} salary review in May", "prefers Rust"]},
        {"name": "Globex", "type": "Organization", "description": "employer", "source_ids": ["notes"]}],
        "edges": [{"source": "Alex", "target": "Globex", "type": "WORKS_AT"}], **ns})
    await call_ok(client, "update_entity", {"name": "Alex", "properties": {"salary": f"{secret}-120k"}, **ns})
    await call_ok(client, "delete_observations", {
        "deletions": [{"entityName": "Alex", "observations": [f"{secret} salary review in May"]}], **ns})


def rows_holding(db: Path, word: str) -> dict[str, int]:
    """The rows of each table of the file whose text holds `word`, read with SQL."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()]
        found = {t: con.execute(f'SELECT count(*) FROM "{t}" t WHERE lower(CAST(t AS VARCHAR)) LIKE ?',
                                [f"%{word.lower()}%"]).fetchone()[0] for t in tables}
    finally:
        con.close()
    return {t: n for t, n in found.items() if n}


async def test_deleting_a_namespace_erases_its_log_and_a_compacted_file_keeps_none_of_its_texts(
        services: Services, tmp_path: Path, db_path: Path, plugin_manager, minilm) -> None:
    async with Client(build_server(services, tool_set="all")) as client:
        await fill(client, "work", WORK_SECRET)
        await fill(client, "home", HOME_SECRET)
        logged = await changes(client, "work")
        assert f"properties changed: Alex [Person]: salary: (none) -> {WORK_SECRET}-120k" in logged
        assert f"observations deleted: Alex [Person]: {WORK_SECRET} salary review in May" in logged
        home_before = await changes(client, "home")

        deleted = await call_ok(client, "delete_namespace", {"namespace": "work", "confirm": "work"})
        assert (deleted["entities"], deleted["documents"]) == (2, 2)
        # Nothing of what it held, its deletion included: the namespace is gone, not a log of its contents.
        after = await client.call_tool("recent_changes", {"namespace": "work", "limit": 100})
        assert after.structured_content["changes"] == []
        assert WORK_SECRET.lower() not in json.dumps(after.structured_content).lower()
        assert "holds nothing yet" in after.structured_content["text"]
        assert "work" not in [n["name"] for n in (await call_ok(client, "list_namespaces", {}))["namespaces"]]
        assert await changes(client, "home") == home_before  # another namespace's log is untouched

    assert WORK_SECRET not in str(rows_holding(db_path, WORK_SECRET)) and rows_holding(db_path, WORK_SECRET) == {}
    result = compact(db_path, lambda path: open_services(tmp_path, path, plugin_manager, minilm).knowledge_base)
    assert result["path"] == str(db_path)
    assert rows_holding(db_path, WORK_SECRET) == {}
    raw = db_path.read_bytes()
    assert WORK_SECRET.encode() not in raw
    assert HOME_SECRET.encode() in raw  # the kept namespace's texts: the bytes can show such a word
    assert rows_holding(db_path, HOME_SECRET)


async def test_a_namespace_left_with_only_its_log_is_listed_and_can_be_deleted(services: Services) -> None:
    async with Client(build_server(services, tool_set="all")) as client:
        await fill(client, "personal", HOME_SECRET)
        ns = {"namespace": "personal"}
        await call_ok(client, "delete_documents", {"ids": ["notes", "personal-only"], **ns})
        left = [e["name"] for e in (await call_ok(client, "read_graph", ns))["entities"]]
        await call_ok(client, "delete_entities", {"names": left, **ns})
        logged = await changes(client, "personal")
        # Only the log is left: what went, by name; what Alex held (a property's old value, an observation) went
        # with Alex.
        assert "entity deleted: Alex [Person]" in logged and not any(HOME_SECRET in line for line in logged)

        listed = {n["name"]: n for n in (await call_ok(client, "list_namespaces", {}))["namespaces"]}
        personal = listed["personal"]
        assert (personal["entities"], personal["relations"], personal["documents"]) == (0, 0, 0)
        assert personal["last_write"] is not None

        deleted = await call_ok(client, "delete_namespace", {"namespace": "personal", "confirm": "personal"})
        assert (deleted["entities"], deleted["relations"], deleted["documents"]) == (0, 0, 0)
        assert await changes(client, "personal") == []
        assert "personal" not in [n["name"] for n in (await call_ok(client, "list_namespaces", {}))["namespaces"]]
        missing = await client.call_tool("delete_namespace", {"namespace": "personal", "confirm": "personal"})
        assert missing.is_error and "there is no namespace 'personal'" in missing.content[0].text


async def test_a_deletion_is_the_last_write_of_its_namespace(services: Services) -> None:
    async with Client(build_server(services, tool_set="all")) as client:
        await call_ok(client, "add_documents", {"documents": [
            {"id": "kept", "title": "Kept", "text": "The kept note about the garden."},
            {"id": "gone", "title": "Gone", "text": "The note stored by mistake."}], "namespace": "notes"})
        time.sleep(1.1)  # last_write is given to the second
        await call_ok(client, "delete_documents", {"ids": ["gone"], "namespace": "notes"})
        deleted_at = [c["at"] for c in (await call_ok(client, "recent_changes", {"namespace": "notes"}))["changes"]
                      if c["change"] == "document deleted"]
        listed = {n["name"]: n for n in (await call_ok(client, "list_namespaces", {}))["namespaces"]}
        assert len(deleted_at) == 1 and listed["notes"]["last_write"] == deleted_at[0][:19] + "Z"


async def test_a_tool_hint_never_names_another_namespaces_documents(services: Services) -> None:
    async with Client(build_server(services, tool_set="all")) as client:
        await call_ok(client, "add_documents", {"documents": [
            {"id": "homeonly", "title": "Home", "text": "Plans for a surfing trip to Peniche."}],
            "namespace": "personal"})
        await call_ok(client, "add_documents", {"documents": [
            {"id": "workonly", "title": "Work", "text": "The billing migration to Kafka."}], "namespace": "work"})
        result = await client.call_tool("delete_documents", {"ids": ["homeonly"], "namespace": "work"})
        assert not result.is_error
        assert result.structured_content["not_found"] == ["homeonly"]
        assert result.structured_content["hints"] == [
            "no document 'homeonly' in the namespace 'work': give each id exactly as search shows it (a passage's "
            "document_id); recent_changes lists the documents added"]
        assert "personal" not in "".join(getattr(c, "text", "") for c in result.content)

        # The file's owner, on the command line, is told where the id is (`name_other_namespaces`).
        owner = delete_documents(services.knowledge_base, ["homeonly"], "work", name_other_namespaces=True)
        assert owner.hints == ["'homeonly' is a document of the namespace 'personal', not of 'work': give that "
                               "namespace to delete it there"]
        assert services.knowledge_base.stats("personal")["documents"] == 1
