"""Communities through the official MCP client, in memory: build_communities with progress, global_search,
search naming its anchors' communities, host-written reports (the summarize_communities prompt, then
save_community_report, in the `all` tool set), and reports the host's model writes through MCP sampling."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.types import INVALID_REQUEST, CreateMessageRequestParams, CreateMessageResult, ErrorData, TextContent

from duckgraph.core.bootstrap import bootstrap
from duckgraph.core.config import load_settings
from duckgraph.core.mcp.sampling import NO_CLIENT, NO_SAMPLING, REPORTS_PER_BUILD
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import make_services
from tests.integration.test_communities import QUERIES, THEMES, planted_graph, theme_of

pytestmark = pytest.mark.model


def graph_arguments() -> dict:
    nodes, edges = planted_graph()
    return {"nodes": [n.model_dump(exclude_none=True) for n in nodes],
            "edges": [e.model_dump(exclude_none=True) for e in edges]}


async def call_ok(client: Client, name: str, arguments: dict) -> dict:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    return result.structured_content


def test_build_then_global_search_through_the_client(tmp_path: Path, db_path: Path, plugin_manager, minilm):
    services = make_services(tmp_path, db_path, minilm, plugin_manager)

    async def session() -> None:
        async with Client(build_server(services)) as client:
            await call_ok(client, "add_knowledge_graph", graph_arguments())
            before = await call_ok(client, "global_search", {"query": "main themes"})
            assert before["reports"] == [] and "build_communities" in before["hint"]
            progress = []

            async def on_progress(done, total, message):
                progress.append(done)

            built = await client.call_tool("build_communities", {}, progress_callback=on_progress)
            assert not built.is_error and built.structured_content["communities"] >= 5
            assert progress and progress[-1] == 4
            for theme, query in QUERIES.items():
                found = await client.call_tool("global_search", {"query": query, "token_budget": 400})
                assert not found.is_error
                first = found.structured_content["reports"][0]
                assert {theme_of(e["name"]) for e in first["key_entities"]} == {theme}
                assert first["title"] in found.content[0].text
            refused = await client.call_tool("global_search", {"query": "x", "level": 9})
            assert refused.is_error and "level 9 does not exist" in refused.content[0].text
            search = await call_ok(client, "search", {"query": "Chopin"})
            assert "(community " in search["anchor_communities"]["Chopin"]
            tools = {tool.name for tool in (await client.list_tools()).tools}
            assert {"global_search", "build_communities"} <= tools and "save_community_report" not in tools

    anyio.run(session)


def test_the_host_writes_reports_through_the_prompt_and_the_tool(tmp_path: Path, db_path: Path, plugin_manager,
                                                                 minilm):
    services = make_services(tmp_path, db_path, minilm, plugin_manager)

    async def session() -> None:
        async with Client(build_server(services, tool_set="all")) as client:
            await call_ok(client, "add_knowledge_graph", graph_arguments())
            await call_ok(client, "build_communities", {})
            prompt = await client.get_prompt("summarize_communities", {"limit": "2"})
            text = prompt.messages[0].content.text
            assert "save_community_report" in text and "Facts:" in text and "more communities wait" in text
            listed = await call_ok(client, "communities_to_summarize", {"limit": 50})
            waiting = len(listed["communities"])
            # Control characters (a terminal escape, NUL) are refused as in a description, and nothing is stored.
            for title, summary in (("Music\x1b[2J", "A summary."), ("Music", "About\x00 music \x1b[31mred")):
                refused = await client.call_tool("save_community_report", {
                    "id": listed["communities"][0]["id"], "title": title, "summary": summary})
                assert refused.is_error and "must not contain control characters" in refused.content[0].text
            assert len((await call_ok(client, "communities_to_summarize", {"limit": 50}))["communities"]) == waiting
            for done, community in enumerate(listed["communities"], start=1):
                names = [line[2:].split(" (")[0] for line in community["material"].splitlines()
                         if line.startswith("- ") and " (" in line and "Key" not in line]
                theme = theme_of(names[0])
                saved = await call_ok(client, "save_community_report", {
                    "id": community["id"], "title": f"{theme.title()} overview",
                    "summary": f"Everything stored about {theme}: {', '.join(THEMES[theme][1])}."})
                assert (saved["written"], saved["remaining"]) == (1, waiting - done)
            assert (await call_ok(client, "communities_to_summarize", {}))["communities"] == []
            found = await call_ok(client, "global_search", {"query": "classical composers"})
            assert (found["reports"][0]["title"], found["reports"][0]["author"]) == ("Music overview", "host")
            missing = await client.call_tool("save_community_report", {"id": 999, "title": "t", "summary": "s"})
            assert missing.is_error and "no community 999" in missing.content[0].text

    anyio.run(session)


def test_a_session_may_begin_with_the_report_tools(tmp_path: Path, db_path: Path, plugin_manager, minilm):
    """A server opens its file on the first call that needs it (so tools/list answers at once): the report tools
    found it closed when a session began with them."""
    async def session(first: str, arguments: dict) -> dict:
        async with Client(build_server(make_services(tmp_path, db_path, minilm, plugin_manager), tool_set="all")
                          ) as client:
            if first == "build_communities":
                await call_ok(client, "add_knowledge_graph", graph_arguments())
            return await call_ok(client, first, arguments)

    anyio.run(session, "build_communities", {})
    listed = anyio.run(session, "communities_to_summarize", {"limit": 1})
    assert len(listed["communities"]) == 1 and listed["remaining"] >= 4
    saved = anyio.run(session, "save_community_report", {
        "id": listed["communities"][0]["id"], "title": "Overview", "summary": "What the community holds."})
    assert saved["written"] == 1


# -- reports written by the host's model through MCP sampling (community_reports_by_sampling) ----------------------


def sampling_services(folder: Path, db: Path, embedder, plugin_manager, on: bool = True):
    config = folder / "config.toml"
    config.write_text(f"community_reports_by_sampling = {str(on).lower()}\n", encoding="utf-8")
    settings = load_settings(config, env={}, db=str(db), warm_up=False)
    assert settings.community_reports_by_sampling is on
    return bootstrap(settings, plugin_manager=plugin_manager, embedder=embedder)


def report_of(material: str) -> str:
    """The host's model's answer: a report on the theme of the community's first entity."""
    names = [line[2:].split(" (")[0] for line in material.splitlines() if line.startswith("- ") and " (" in line]
    theme = theme_of(names[0])
    return json.dumps({"title": f"{theme.title()} overview",
                       "summary": f"Everything stored about {theme}: {', '.join(THEMES[theme][1])}."})


async def build_through(services, sampling_callback, mode: str = "legacy"
                        ) -> tuple[dict, list[CreateMessageRequestParams], set[str], dict]:
    """build_communities through a client with the given sampling callback (None: no sampling capability): its
    result, the sampling requests the server made, the authors of the stored reports, and what global_search
    finds for "classical composers". mode="legacy": the handshake-era protocol hosts speak today, in which a
    server may ask the client during a call."""
    asked: list[CreateMessageRequestParams] = []

    async def sampler(context, params: CreateMessageRequestParams):
        asked.append(params)
        return await sampling_callback(params)

    async with Client(build_server(services), mode=mode,
                      sampling_callback=sampler if sampling_callback else None) as client:
        await call_ok(client, "add_knowledge_graph", graph_arguments())
        built = await call_ok(client, "build_communities", {})
        authors = {c.author for c in services.knowledge_base.communities.listing("default")[1]}
        found = await call_ok(client, "global_search", {"query": "classical composers", "token_budget": 400})
        return built, asked, authors, found["reports"][0]


def answer(text: str) -> CreateMessageResult:
    return CreateMessageResult(role="assistant", content=TextContent(type="text", text=text), model="host-model")


def test_the_hosts_model_writes_reports_through_sampling(tmp_path: Path, db_path: Path, plugin_manager, minilm):
    services = sampling_services(tmp_path, db_path, minilm, plugin_manager)

    async def write(params: CreateMessageRequestParams) -> CreateMessageResult:
        assert '"title"' in params.system_prompt and "Facts:" in params.messages[-1].content.text
        return answer(report_of(params.messages[-1].content.text))

    built, asked, authors, found = anyio.run(build_through, services, write)
    communities = built["communities"]
    assert len(asked) == min(communities, REPORTS_PER_BUILD) and communities >= 5
    assert f"wrote {len(asked)} community reports" in built["sampling"] and "failed" not in built["sampling"]
    assert "0 communities still lack" in built["sampling"] and authors == {"sampling"}
    assert (found["title"], found["author"]) == ("Music overview", "sampling")


def test_bad_replies_are_retried_once_then_reported_and_the_extractive_reports_kept(
        tmp_path: Path, db_path: Path, plugin_manager, minilm):
    services = sampling_services(tmp_path, db_path, minilm, plugin_manager)

    async def junk(params: CreateMessageRequestParams) -> CreateMessageResult:
        return answer("Sure! Here is a lovely report.")

    built, asked, authors, found = anyio.run(build_through, services, junk)
    tried = min(built["communities"], REPORTS_PER_BUILD)
    assert len(asked) == 2 * tried and "That answer was invalid" in asked[1].messages[-1].content.text
    assert "wrote 0 community reports" in built["sampling"] and f"{tried} failed" in built["sampling"]
    assert authors == {"extractive"} and found["author"] == "extractive"


def test_a_refused_request_is_reported_and_not_asked_again(tmp_path: Path, db_path: Path, plugin_manager, minilm):
    services = sampling_services(tmp_path, db_path, minilm, plugin_manager)

    async def refuse(params: CreateMessageRequestParams) -> ErrorData:
        return ErrorData(code=INVALID_REQUEST, message="the user declined")

    built, asked, authors, found = anyio.run(build_through, services, refuse)
    assert len(asked) == 1 and "refused" in built["sampling"] and "the user declined" in built["sampling"]
    assert authors == {"extractive"} and found["author"] == "extractive"


def test_a_client_without_sampling_gets_a_note_and_the_extractive_reports(tmp_path: Path, db_path: Path,
                                                                         plugin_manager, minilm):
    services = sampling_services(tmp_path, db_path, minilm, plugin_manager)
    built, _, authors, found = anyio.run(build_through, services, None)
    assert built["sampling"] == NO_SAMPLING and built["communities"] >= 5
    assert authors == {"extractive"} and found["author"] == "extractive"


def test_a_client_of_the_newest_protocol_cannot_be_asked_during_a_call(tmp_path: Path, db_path: Path,
                                                                      plugin_manager, minilm):
    services = sampling_services(tmp_path, db_path, minilm, plugin_manager)

    async def write(params: CreateMessageRequestParams) -> CreateMessageResult:
        return answer(report_of(params.messages[-1].content.text))

    built, asked, authors, found = anyio.run(build_through, services, write, "auto")
    assert asked == [] and "lets a server ask nothing during a call" in built["sampling"]
    assert authors == {"extractive"} and found["author"] == "extractive"


def test_with_the_setting_off_no_sampling_request_is_made(tmp_path: Path, db_path: Path, plugin_manager, minilm):
    services = sampling_services(tmp_path, db_path, minilm, plugin_manager, on=False)

    async def write(params: CreateMessageRequestParams) -> CreateMessageResult:
        return answer(report_of(params.messages[-1].content.text))

    built, asked, authors, found = anyio.run(build_through, services, write)
    assert asked == [] and built.get("sampling") is None
    assert authors == {"extractive"} and found["author"] == "extractive"


def test_a_call_from_no_client_gets_a_note(tmp_path: Path, db_path: Path, plugin_manager, minilm):
    """The web UI calls the tools by name, outside an MCP session (core/mcp/direct.py): nobody to ask."""
    services = sampling_services(tmp_path, db_path, minilm, plugin_manager)

    async def session() -> dict:
        server = build_server(services)
        await server.call_tool("add_knowledge_graph", graph_arguments())
        return (await server.call_tool("build_communities", {})).structured_content

    try:
        built = anyio.run(session)
    finally:
        services.knowledge_base.close(final=True)
    assert built["sampling"] == NO_CLIENT and built["communities"] >= 5
