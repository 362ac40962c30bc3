"""The client configurations in contrib/clients/ work as written: every file parses, every stdio server it names
starts and answers `tools/list` with the tool set it promises, and every HTTP server entry, with its token
placeholder filled in, reaches a `duckgraph serve --http` that requires the token. Only the install path and the
token are substituted, as a user would."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import yaml
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.test_mcp_http import start

CLIENTS = Path(__file__).resolve().parents[2] / "contrib" / "clients"
INSTALLED = "/path/to/.venv/bin/duckgraph"
TOKEN = "client-config-token"
TOKEN_PLACEHOLDERS = ("${DUCKGRAPH_HTTP_TOKEN}", "${env:DUCKGRAPH_HTTP_TOKEN}", "${input:duckgraph-token}",
                      "${{ secrets.DUCKGRAPH_HTTP_TOKEN }}", "<token>")
TIMEOUT_SECONDS = 60


@dataclass
class Entry:
    file: str
    name: str
    command: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.file}:{self.name}"


def from_spec(file: str, name: str, spec: dict[str, Any]) -> Entry:
    if "url" in spec:
        headers = spec.get("headers") or spec.get("requestOptions", {}).get("headers", {})
        return Entry(file, name, url=spec["url"], headers=dict(headers))
    return Entry(file, name, [spec["command"], *spec.get("args", [])], dict(spec.get("env") or {}))


def from_claude_line(file: str, line: str) -> Entry:
    """A `claude mcp add [options] NAME (URL | -- COMMAND ARGS...)` line."""
    words = shlex.split(line)
    assert words[:3] == ["claude", "mcp", "add"], line
    words, command = (words[3:words.index("--")], words[words.index("--") + 1:]) if "--" in words else (words[3:], [])
    options: dict[str, list[str]] = {}
    positional = []
    it = iter(words)
    for word in it:
        if word.startswith("-"):
            options.setdefault(word, []).append(next(it))
        else:
            positional.append(word)
    env = dict(pair.split("=", 1) for pair in options.get("-e", []) + options.get("--env", []))
    if options.get("--transport") == ["http"]:
        headers = dict(h.split(": ", 1) for h in options.get("--header", []))
        return Entry(file, positional[0], url=positional[1], headers=headers)
    return Entry(file, positional[0], command, env)


def entries() -> list[Entry]:
    found = []
    for path in sorted(CLIENTS.iterdir()):
        if path.suffix == ".json":
            data = json.loads(path.read_text(encoding="utf-8"))
            servers = data.get("mcpServers") or data["servers"]
            found += [from_spec(path.name, name, spec) for name, spec in servers.items()]
        elif path.suffix == ".yaml":
            found += [from_spec(path.name, s["name"], s) for s in yaml.safe_load(path.read_text())["mcpServers"]]
        elif path.suffix == ".sh":
            found += [from_claude_line(path.name, line) for line in path.read_text().splitlines()
                      if line.startswith("claude ")]
    return found


ENTRIES = entries()
STDIO = [e for e in ENTRIES if e.command]
HTTP = [e for e in ENTRIES if e.url]


def test_every_client_file_offers_the_three_modes():
    files = {p.name for p in CLIENTS.iterdir() if p.suffix in (".json", ".yaml", ".sh")}
    assert files == {"claude-desktop.json", "claude-code.sh", "claude-code.mcp.json", "vscode.mcp.json",
                     "cursor.mcp.json", "lmstudio.mcp.json", "continue.yaml"}
    for file in files:
        names = {e.name for e in ENTRIES if e.file == file}
        # Claude Desktop's file takes stdio servers only.
        expected = {"duckgraph", "duckgraph-memory"} | (set() if file == "claude-desktop.json" else {"duckgraph-http"})
        assert names == expected, file
    assert all(e.command[0] == INSTALLED for e in STDIO)
    assert all(any(p in value for p in TOKEN_PLACEHOLDERS) for e in HTTP for value in e.headers.values())


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.parametrize("entry", STDIO, ids=lambda e: e.id)
async def test_each_command_line_starts_the_server(entry: Entry, tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    command = [str(Path(sys.executable).with_name("duckgraph")) if part == INSTALLED else part
               for part in entry.command]
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "DUCKGRAPH_WARM_UP": "0", **entry.env}
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=tmp_path)
    with (tmp_path / "stderr.log").open("w") as stderr, anyio.fail_after(TIMEOUT_SECONDS):
        async with Client(stdio_client(params, errlog=stderr)) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
    if entry.env.get("DUCKGRAPH_TOOLS") == "memory":
        assert {"create_entities", "search_nodes", "open_nodes"} <= names and "search" not in names
    else:
        assert {"search", "add_knowledge_graph"} <= names and "create_entities" not in names


@pytest.fixture(scope="module")
def token_server(tmp_path_factory) -> Iterator[Any]:
    folder = tmp_path_factory.mktemp("http")
    (folder / "home").mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(folder / "home"), "DUCKGRAPH_WARM_UP": "0",
           "DUCKGRAPH_DB": str(folder / "kb.duckdb"), "DUCKGRAPH_HTTP_TOKEN": TOKEN}
    yield from start(folder, env)


@pytest.mark.anyio
@pytest.mark.parametrize("entry", HTTP, ids=lambda e: e.id)
async def test_each_http_entry_reaches_a_server_that_needs_the_token(entry: Entry, token_server):
    url = re.sub(r":8765/", f":{token_server.port}/", entry.url)
    assert url != entry.url, "the configurations name the default port of `duckgraph serve --http`"
    headers = {}
    for name, value in entry.headers.items():
        for placeholder in TOKEN_PLACEHOLDERS:
            value = value.replace(placeholder, TOKEN)
        headers[name] = value
    assert headers == {"Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(headers=headers, timeout=TIMEOUT_SECONDS) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
    assert {"search", "add_knowledge_graph"} <= names
