"""`duckgraph serve` with a broken third-party plugin installed beside a working one: the server still answers the
MCP handshake and the tools (it died before the handshake with the plugin's traceback), and says on stderr which
package was left out and why.

Real parts: a `duckgraph serve` subprocess driven over stdio by the MCP SDK's client, on a real DuckDB file; the
plugins are entry points in dist-info folders on the child's PYTHONPATH (the working one is
tests/fake_embedder_plugin.py, so no model is loaded).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def dist_info(site: Path, package: str, entry_point: str, module: str) -> None:
    folder = site / f"{package.replace('-', '_')}-0.1.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n", encoding="utf-8")
    (folder / "entry_points.txt").write_text(f"[duckgraph]\n{entry_point} = {module}\n", encoding="utf-8")


@pytest.mark.anyio
async def test_serve_answers_with_a_plugin_that_fails_to_import(tmp_path: Path) -> None:
    site = tmp_path / "site"
    dist_info(site, "duckgraph-test-fake", "fake", "tests.fake_embedder_plugin")
    (site / "dgtest_broken_serve.py").write_text("import this_module_does_not_exist\n", encoding="utf-8")
    dist_info(site, "dgtest-broken-serve", "broken", "dgtest_broken_serve")
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "DUCKGRAPH_EMBEDDER": "fake",
           "DUCKGRAPH_WARM_UP": "0", "DUCKGRAPH_CONFIG": str(tmp_path / "none.toml")}
    (tmp_path / "none.toml").write_text("", encoding="utf-8")
    params = StdioServerParameters(command=sys.executable, args=["-m", "duckgraph.core.cli", "serve", "--db",
                                                                 str(tmp_path / "kb.duckdb")], env=env, cwd=tmp_path)
    log = tmp_path / "serve.stderr"
    with log.open("w", encoding="utf-8") as errlog, anyio.fail_after(120):
        async with Client(stdio_client(params, errlog=errlog)) as client:
            added = await client.call_tool("add_documents", {"documents": [
                {"id": "d1", "title": "staff", "text": "Erin Brown works at Umbrella Labs."}]})
            assert not added.is_error, added.content
            found = await client.call_tool("search", {"query": "Where does Erin Brown work?"})
            assert not found.is_error and "Umbrella Labs" in found.content[0].text
    stderr = log.read_text(encoding="utf-8")
    assert ("package dgtest-broken-serve (entry point 'broken') failed to load and is left out: ModuleNotFoundError: "
            "No module named 'this_module_does_not_exist'") in stderr
    assert "Traceback" not in stderr
