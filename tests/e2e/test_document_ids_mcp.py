"""Document ids through the MCP server (the SDK's in-memory client, a real DuckDB file, the real default model):

- an id is one line wherever it is shown ("[id#n]" before a passage in search's text): one holding a line or
  paragraph separator (U+2028, U+2029) or NEL (U+0085) is refused with the rule, and nothing is stored (they were
  stored, and split search's line in two);
- re-adding a document as it is stored returns its passages' ids ("Its passages in order"): it returned none;
- an edited text added again without an id is stored beside the first (its id is made from its text): the answer's
  `hints` name the stored id that replaces it.
"""

from __future__ import annotations


import pytest
from mcp import Client

from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import call_ok, counts, error_text
from tests.e2e.test_time import anyio_backend, services  # noqa: F401 (fixtures: asyncio, the real model)

pytestmark = pytest.mark.model


@pytest.mark.anyio
@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"], ids=["line-sep", "paragraph-sep", "nel"])
async def test_an_id_with_a_line_separator_is_refused_and_nothing_is_stored(services, separator):
    async with Client(build_server(services)) as client:
        result = await client.call_tool("add_documents", {"documents": [
            {"id": f"a{separator}b.md", "text": "Quetzal fact number one."}]})
        assert ("add_documents refused its arguments: documents[0].id: must be one line, without tabs, line or "
                "paragraph separators (U+0085, U+2028, U+2029) or other control characters") in error_text(result)
        await call_ok(client, "add_documents", {"documents": [{"id": "ok.md", "text": "Quetzal fact number two."}]})
        result = await client.call_tool("add_knowledge_graph", {"nodes": [
            {"name": "Quetzal", "type": "Bird", "source_ids": [f"ok{separator}.md"]}]})
        assert "nodes[0].source_ids[0]: must be one line" in error_text(result)
        assert counts(services) == {"nodes": 0, "edges": 0, "documents": 1, "chunks": 1}

        found = await client.call_tool("search", {"query": "Quetzal fact"})
        lines = found.content[0].text.splitlines()
    assert lines == ["Passages:", "[ok.md#1] Quetzal fact number two."]


@pytest.mark.anyio
async def test_a_document_added_again_as_it_is_returns_its_passages(services):
    text = "## Newts\nNewts live in ponds.\n\n## Frogs\nFrogs live in ponds too.\n"
    async with Client(build_server(services)) as client:
        first = await call_ok(client, "add_documents", {"documents": [{"id": "pond.md", "text": text}]})
        again = await call_ok(client, "add_documents", {"documents": [{"id": "pond.md", "text": text},
                                                                      {"id": "new.md", "text": "Toads too."}]})
    [stored] = first["documents"]
    assert len(stored["chunk_ids"]) == 2
    assert [(d["id"], d["chunk_ids"], d["unchanged"]) for d in again["documents"]] == [
        ("pond.md", stored["chunk_ids"], True), ("new.md", [3], False)]
    assert again["chunks_written"] == 1


@pytest.mark.anyio
async def test_an_edit_added_without_an_id_is_told_the_stored_id_that_replaces(services):
    """An id-less document gets an id from its text, so an edited version is stored beside the first (search showed
    both): the answer names the stored id of the same title and most of the words, to pass to replace it. The turns
    of a conversation share a title, not their words: no hint."""
    review = ("## Findings\nHartmann reported a round-trip efficiency of 71% for the Pellworm flow battery.\n\n"
              "## Costs\nCapital costs fell by a third between 2015 and 2022 for lithium-ion systems.\n")
    async with Client(build_server(services)) as client:
        [tool] = [t for t in (await client.list_tools()).tools if t.name == "add_documents"]
        described = tool.input_schema["$defs"]["DocumentInput"]["properties"]["id"]["description"]
        assert described == "From the text if absent; an edit reuses the stored id to replace it."
        [first] = (await call_ok(client, "add_documents", {"documents": [
            {"title": "Grid storage review", "text": review}]}))["documents"]
        edited = await call_ok(client, "add_documents", {"documents": [
            {"title": "Grid storage review", "text": review.replace("71%", "68%")}]})
        [second] = edited["documents"]
        assert second["id"] != first["id"] and not second["replaced"]
        assert edited["hints"] == [
            f"documents[0] was stored as a new document, {second['id']!r}, beside {first['id']!r}, which has its "
            f"title and most of its words. If it is an edit of that one, add it again with id {first['id']!r} to "
            f"replace it, and delete {second['id']!r} (delete_documents in the `all` tool set, or `duckgraph "
            "documents delete`); search shows both until then"]
        replaced = await call_ok(client, "add_documents", {"documents": [
            {"id": first["id"], "title": "Grid storage review", "text": review.replace("71%", "68%")}]})
        assert replaced["documents"][0]["replaced"] and replaced["hints"] == []

        turns = [await call_ok(client, "add_documents", {"documents": [{"title": "Chat with Maya", "text": turn}]})
                 for turn in ("Maya: I adopted a grey cat last week.", "Me: What did you name her?",
                              "Maya: Pepper, after the colour of her fur.")]
    assert [turn["hints"] for turn in turns] == [[], [], []]
