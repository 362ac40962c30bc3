"""The prompts on a server that forwards its calls to the owner of the file (core/mcp/forwarding.py): the same
text as the owner's for the same namespace, and a failure that says why. Real `duckgraph serve` subprocesses
over stdio with the `all` tool set, as in test_shared_file.py."""

from __future__ import annotations

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from duckgraph.core import sharing
from tests.e2e.test_namespaces_shared import session
from tests.e2e.test_shared_file import TIMEOUT_SECONDS, call_ok, client_pid, env, wait_for  # noqa: F401

pytestmark = [pytest.mark.skipif(not sharing.supported(), reason="needs flock and Unix sockets"), pytest.mark.anyio]

#: Two separate groups of people per namespace, so each namespace has communities of its own to summarise.
GROUPS = {
    "alpha": [("Ada Lovelace", "Charles Babbage", "Mary Somerville"), ("Alan Turing", "Max Newman", "Joan Clarke")],
    "beta": [("Marie Curie", "Pierre Curie", "Irene Joliot-Curie"), ("Niels Bohr", "Werner Heisenberg",
                                                                      "Wolfgang Pauli")],
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def graph(namespace: str) -> dict:
    nodes, edges = [], []
    for group in GROUPS[namespace]:
        nodes += [{"name": name, "type": "Person", "description": f"{name}, a scientist"} for name in group]
        edges += [{"source": a, "target": b, "type": "WORKED_WITH", "description": f"{a} worked with {b}"}
                  for a, b in zip(group, group[1:] + group[:1], strict=True)]
    return {"nodes": nodes, "edges": edges, "namespace": namespace}


def text_of(prompt) -> str:
    [message] = prompt.messages
    return message.content.text


async def prompts_of(client) -> dict[str, str]:
    """Every prompt's text, as a host gets it."""
    return {
        "summarize_communities": text_of(await client.get_prompt("summarize_communities", {"limit": "3"})),
        "extract_knowledge": text_of(await client.get_prompt("extract_knowledge")),
        "extract_knowledge(text)": text_of(await client.get_prompt("extract_knowledge",
                                                                    {"text": "Ada Lovelace met Babbage."})),
    }


async def test_a_forwarding_server_renders_every_prompt_as_the_owner_in_its_own_namespace(tmp_path, env):
    db = tmp_path / "kb.duckdb"
    env = {**env, "DUCKGRAPH_TOOLS": "all"}
    with anyio.fail_after(TIMEOUT_SECONDS):
        async with session(db, {**env, "DUCKGRAPH_NAMESPACE": "alpha"}, tmp_path / "a.log") as a, \
                session(db, {**env, "DUCKGRAPH_NAMESPACE": "beta"}, tmp_path / "b.log") as b:
            await a.list_tools()
            await wait_for(lambda: client_pid(tmp_path / "b.log"))  # b forwards to a, the owner
            for namespace in GROUPS:
                await call_ok(a, "add_knowledge_graph", graph(namespace))
                assert (await call_ok(a, "build_communities", {"namespace": namespace}))["communities"]
            owner_alpha = await prompts_of(a)
            forwarded_beta = await prompts_of(b)
        # The owner's prompts in beta: a server of its own on the same (unchanged) file.
        async with session(db, {**env, "DUCKGRAPH_NAMESPACE": "beta"}, tmp_path / "c.log") as c:
            owner_beta = await prompts_of(c)

    assert forwarded_beta == owner_beta
    summary = forwarded_beta["summarize_communities"]
    assert "save_community_report" in summary
    assert {"Marie Curie", "Niels Bohr"} <= {n for group in GROUPS["beta"] for n in group if n in summary}
    assert not [n for group in GROUPS["alpha"] for n in group if n in summary]  # b's namespace, not the owner's
    assert "Ada Lovelace" in owner_alpha["summarize_communities"]
    assert "ERROR" not in (tmp_path / "b.log").read_text()


async def test_a_prompt_that_fails_on_the_owner_says_why_on_a_forwarding_server(tmp_path, env):
    # The owner's communities fail to load, as a damaged file would make them (injected at its start-up).
    patch = tmp_path / "patch"
    patch.mkdir()
    (patch / "sitecustomize.py").write_text(
        "from duckgraph.core.domain.communities.service import CommunityService\n"
        "from duckgraph.ports.errors import StoreError\n"
        "def to_write(self, *args, **kwargs):\n"
        "    raise StoreError('cannot read the communities table (test)')\n"
        "CommunityService.to_write = to_write\n")
    db = tmp_path / "kb.duckdb"
    env = {**env, "DUCKGRAPH_TOOLS": "all"}
    owner_env = {**env, "PYTHONPATH": f"{patch}:{env['PYTHONPATH']}"}
    with anyio.fail_after(TIMEOUT_SECONDS):
        async with session(db, owner_env, tmp_path / "a.log") as a, \
                session(db, {**env, "DUCKGRAPH_NAMESPACE": "beta"}, tmp_path / "b.log") as b:
            await call_ok(a, "graph_stats", {})  # the owner has the file open
            await wait_for(lambda: client_pid(tmp_path / "b.log"))
            for client in (b, a):  # forwarded, and run by the owner itself
                with pytest.raises(MCPError) as raised:
                    await client.get_prompt("summarize_communities")
                assert "cannot read the communities table (test)" in raised.value.message
                assert "another program" not in raised.value.message
            assert (await b.get_prompt("extract_knowledge")).messages  # the others still answer
    assert "another program" not in (tmp_path / "b.log").read_text()  # it never tried to open the file itself
