"""The shipped `tools/list` answer (core/mcp/tool_listing.py): current, served before the tools are built, and
replaced by tools built at start when it does not fit the installation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import anyio
import pytest
from mcp import Client

from duckgraph.core.mcp import tool_listing, warmup
from duckgraph.core.bootstrap import Services, bootstrap
from duckgraph.core.cli import main
from duckgraph.core.config import Settings, load_settings
from duckgraph.core.mcp.server import DuckgraphServer, build_server
from duckgraph.core.mcp.tool_listing import built_tool_listing
from tests.fakes import HashingEmbedder
from tests.fresh_interpreter import run_python


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def fresh_listing_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """No listing kept by an earlier server (the user cache's is not the test's)."""
    monkeypatch.setattr(tool_listing, "CACHE_PATH", tmp_path / "listing-cache" / "tool-listing.json")
    tool_listing._shipped.cache_clear()
    yield
    tool_listing._shipped.cache_clear()


@pytest.fixture
def fitting_listing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A listing that fits this installation: the shipped one, or (with another MCP SDK or pydantic than it was
    made with) one written for this one, so that what is tested is the mechanism, not the versions."""
    if tool_listing.shipped("graphrag") is None:
        path = tmp_path / "tool_listing.json"
        tool_listing.write(path)
        monkeypatch.setattr(tool_listing, "LISTING_PATH", path)
        tool_listing._shipped.cache_clear()
    assert tool_listing.shipped("graphrag") is not None


@pytest.fixture
def services(tmp_path: Path, plugin_manager) -> Services:
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    settings = load_settings(config, env={}, db=str(tmp_path / "kb.duckdb"), warm_up=False)
    return bootstrap(settings, plugin_manager=plugin_manager, embedder=HashingEmbedder())


def dumped(tools: list[Any]) -> list[dict[str, Any]]:
    return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools]


def test_the_shipped_listing_is_current() -> None:
    stored = json.loads(tool_listing.LISTING_PATH.read_text(encoding="utf-8"))
    here = tool_listing.fingerprint()
    assert stored["fingerprint"]["code"] == here["code"], (
        "a tool changed since core/data/tool_listing.json was written: run `python -m duckgraph.core.mcp.tool_listing`")
    settable = set(get_args(Settings.model_fields["tools"].annotation))
    assert set(stored["tool_sets"]) == set(tool_listing.TOOL_SETS) == settable
    if stored["fingerprint"] == here:
        for tool_set in tool_listing.TOOL_SETS:
            assert stored["tool_sets"][tool_set] == anyio.run(built_tool_listing, tool_set), tool_set
    else:  # made with another MCP SDK or pydantic: it must not be served here
        assert tool_listing.shipped("graphrag") is None
        assert "other code or versions" in tool_listing.status()


@pytest.mark.anyio
@pytest.mark.parametrize("tool_set", tool_listing.TOOL_SETS)
async def test_a_client_lists_the_tools_before_they_are_built(services: Services, tool_set: str,
                                                              fitting_listing: None) -> None:
    server = build_server(services, tool_set=tool_set)
    assert isinstance(server, DuckgraphServer)
    async with Client(server) as client:
        listed = (await client.list_tools()).tools
        assert not server.tools_built  # answered from the shipped listing
        assert dumped(listed) == await built_tool_listing(tool_set)
        # Each set names the entities in its own vocabulary (graphrag: names; memory: entityNames; all: either).
        names = {"memory": "entityNames"}.get(tool_set, "names")
        stats = await client.call_tool("delete_entities", {names: ["nobody"]})
        assert not stats.is_error and stats.structured_content["not_found"] == ["nobody"]
        assert server.tools_built
        assert dumped((await client.list_tools()).tools) == dumped(listed)


def test_a_server_lists_its_tools_without_importing_them(tmp_path: Path) -> None:
    # The tools' pydantic models take ~20 ms to define: the listing must not need them (see core/mcp/tools/).
    if tool_listing.shipped("graphrag") is None:
        pytest.skip("the shipped listing was made with another MCP SDK or pydantic than this one")
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    code = f"""
        import sys, anyio
        from duckgraph.core.bootstrap import bootstrap
        from duckgraph.core.config import load_settings
        from duckgraph.core.mcp.server import build_server
        settings = load_settings({str(config)!r}, env={{}}, db={str(tmp_path / "kb.duckdb")!r}, warm_up=False)
        server = build_server(bootstrap(settings))
        tools = anyio.run(server.list_tools)
        print(len(tools), server.tools_built, [m for m in ("duckgraph.core.mcp.tools", "duckgraph.core.domain.model",
                                                           "duckgraph.core.domain.memory_server") if m in sys.modules])
    """
    count, built, imported = run_python(code).split(None, 2)
    assert (built, imported) == ("False", "[]")
    assert int(count) == len(tool_listing.shipped("graphrag"))


@pytest.mark.anyio
async def test_a_listing_that_does_not_fit_is_not_served(services: Services, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    stale = json.loads(tool_listing.LISTING_PATH.read_text(encoding="utf-8"))
    stale["fingerprint"]["pydantic"] = "1.0"
    stale["tool_sets"]["graphrag"] = stale["tool_sets"]["graphrag"][:2]
    path = tmp_path / "tool_listing.json"
    path.write_text(json.dumps(stale), encoding="utf-8")
    monkeypatch.setattr(tool_listing, "LISTING_PATH", path)

    assert tool_listing.shipped("graphrag") is None
    assert "pydantic 1.0 here" in tool_listing.status()
    server = build_server(services, tool_set="graphrag")
    async with Client(server) as client:
        listed = (await client.list_tools()).tools
    assert dumped(listed) == await built_tool_listing("graphrag")
    assert len(listed) > 2


SERVE_AND_LIST = """
    import json, sys, anyio
    from pathlib import Path
    from duckgraph.core.mcp import tool_listing
    from duckgraph.core.bootstrap import bootstrap
    from duckgraph.core.config import load_settings
    from duckgraph.core.mcp.server import build_server
    tool_listing.LISTING_PATH, tool_listing.CACHE_PATH = Path(sys.argv[1]), Path(sys.argv[2])
    settings = load_settings(sys.argv[3], env={}, db=sys.argv[4], warm_up=False)
    server = build_server(bootstrap(settings))
    tools = anyio.run(server.list_tools)
    print(json.dumps({"built": server.tools_built, "imported": [m for m in ("duckgraph.core.mcp.tools",
        "duckgraph.core.domain.model") if m in sys.modules], "tools": [t.name for t in tools]}))
"""


@pytest.mark.anyio
async def test_a_server_keeps_the_listing_it_built_and_the_next_start_answers_from_it(
        tmp_path: Path, plugin_manager, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = json.loads(tool_listing.LISTING_PATH.read_text(encoding="utf-8"))
    stale["fingerprint"]["pydantic"] = "2.0.0"  # as after an upgrade of pydantic
    shipped_path = tmp_path / "tool_listing.json"
    shipped_path.write_text(json.dumps(stale), encoding="utf-8")
    monkeypatch.setattr(tool_listing, "LISTING_PATH", shipped_path)
    monkeypatch.setattr(warmup, "WARM_UP_DELAY_SECONDS", 0.0)
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    arguments = [str(shipped_path), str(tool_listing.CACHE_PATH), str(config), str(tmp_path / "kb.duckdb")]
    before = json.loads(run_python(SERVE_AND_LIST, *arguments))
    assert before["built"] and "duckgraph.core.mcp.tools" in before["imported"]  # nothing kept yet: built to list them

    settings = load_settings(config, env={}, db=str(tmp_path / "kb.duckdb"), warm_up=True)
    for tool_set in ("memory", "graphrag"):  # two servers' warm-ups, one tool set each, kept side by side
        server = build_server(bootstrap(settings, plugin_manager=plugin_manager, embedder=HashingEmbedder()),
                              tool_set=tool_set)
        async with Client(server):
            with anyio.fail_after(30):
                while tool_listing.shipped(tool_set) is None:
                    await anyio.sleep(0.05)
        assert tool_listing.shipped(tool_set) == await built_tool_listing(tool_set)
    assert tool_listing.shipped("memory") is not None  # the second server kept the first one's
    assert "read from" in tool_listing.status() and str(tool_listing.CACHE_PATH) in tool_listing.status()

    after = json.loads(run_python(SERVE_AND_LIST, *arguments))
    assert (after["built"], after["imported"]) == (False, [])
    assert after["tools"] == before["tools"]

    kept = json.loads(tool_listing.CACHE_PATH.read_text(encoding="utf-8"))
    kept["fingerprint"]["pydantic"] = "2.0.0"  # kept before another upgrade: it no longer fits
    tool_listing.CACHE_PATH.write_text(json.dumps(kept), encoding="utf-8")
    assert json.loads(run_python(SERVE_AND_LIST, *arguments))["built"]


def test_a_listing_that_cannot_be_kept_is_logged_and_costs_only_the_build(tmp_path: Path, caplog,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    monkeypatch.setattr(tool_listing, "CACHE_PATH", blocker / "tool-listing.json")
    monkeypatch.setattr(tool_listing, "LISTING_PATH", tmp_path / "absent.json")
    with caplog.at_level("WARNING", logger="duckgraph.core.mcp.tool_listing"):
        tool_listing.remember("graphrag", [{"name": "search"}])
    assert "could not keep the tool listing" in caplog.text and "later starts build the tools again" in caplog.text
    assert tool_listing.shipped("graphrag") is None


def test_doctor_says_whether_the_listing_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    monkeypatch.setenv("DUCKGRAPH_CONFIG", str(config))
    arguments = ["doctor", "--db", str(tmp_path / "kb.duckdb"), "--json"]
    main(arguments)
    assert json.loads(capsys.readouterr().out)["tools_list"] == tool_listing.status()

    stale = json.loads(tool_listing.LISTING_PATH.read_text(encoding="utf-8"))
    stale["fingerprint"]["mcp"] = "0.1"
    path = tmp_path / "tool_listing.json"
    path.write_text(json.dumps(stale), encoding="utf-8")
    monkeypatch.setattr(tool_listing, "LISTING_PATH", path)
    tool_listing._shipped.cache_clear()
    main(arguments)
    reported = json.loads(capsys.readouterr().out)["tools_list"]
    assert reported.startswith("tools built at start") and "mcp 0.1 here" in reported


def test_a_missing_listing_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_listing, "LISTING_PATH", tmp_path / "absent.json")
    assert tool_listing.shipped("graphrag") is None
    assert "cannot read absent.json" in tool_listing.status()


@pytest.mark.anyio
async def test_the_warm_up_builds_the_tools_before_any_call(tmp_path: Path, plugin_manager, fitting_listing: None,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warmup, "WARM_UP_DELAY_SECONDS", 0.0)
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    settings = load_settings(config, env={}, db=str(tmp_path / "kb.duckdb"), warm_up=True)
    server = build_server(bootstrap(settings, plugin_manager=plugin_manager, embedder=HashingEmbedder()))
    async with Client(server) as client:
        await client.list_tools()
        with anyio.fail_after(30):
            while not server.tools_built:
                await anyio.sleep(0.05)
