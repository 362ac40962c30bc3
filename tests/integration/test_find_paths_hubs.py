"""find_paths through hubs, on a real DuckDB file: a hub has more relations than one read of find_paths takes
(PATH_FANOUT, strongest first), and the relations that join the two ends to it rank last in its list."""

import pytest
from mcp import Client

from duckgraph.core.domain.curation import PATH_FANOUT
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_memory_compat import call_ok
from tests.e2e.test_names_scripts_mcp import make_services
from duckgraph.core.domain.model import EdgeInput, NodeInput

NS = "default"
CROWD = PATH_FANOUT + 100  # more strong relations per hub than one read of a node takes


def crowd(hub: str, prefix: str) -> tuple[list[NodeInput], list[EdgeInput]]:
    """`hub` with CROWD strong KNOWS relations to people of its own, which its list holds before any weak one."""
    people = [NodeInput(name=f"{prefix} {i}", type="Person") for i in range(CROWD)]
    return ([NodeInput(name=hub, type="Person"), *people],
            [EdgeInput(source=p.name, target=hub, type="KNOWS", weight=0.9) for p in people])


def weak(source: str, target: str, type_: str = "KNOWS") -> EdgeInput:
    return EdgeInput(source=source, target=target, type=type_, weight=0.1)


@pytest.fixture
def kb(fake_kb):
    nodes, edges = crowd("Maya Chen", "Fan")
    more_nodes, more_edges = crowd("Omar Haddad", "Peer")
    ends = [NodeInput(name=n, type="Thing") for n in
            ("Bug marathon 4399", "Meeting family 5633", "Ann", "Bea")]
    fake_kb.add_knowledge_graph(
        [*nodes, *more_nodes, *ends],
        [*edges, *more_edges,
         # the tester's case: two ends that know the hub, their relations the weakest of its list
         weak("Bug marathon 4399", "Maya Chen"), weak("Meeting family 5633", "Maya Chen"),
         # three hops through two hubs joined by a weak relation
         weak("Ann", "Maya Chen"), weak("Maya Chen", "Omar Haddad", "WORKS_WITH"), weak("Bea", "Omar Haddad"),
],
    )
    return fake_kb


def test_a_two_hop_path_through_a_hub_is_found(kb):
    result = kb.curation.find_paths("Bug marathon 4399", "Meeting family 5633", NS, max_hops=4)
    assert result.hops == 2 and result.message is None
    assert result.paths == ["Bug marathon 4399 -KNOWS-> Maya Chen <-KNOWS- Meeting family 5633"]


def test_a_path_from_the_hub_itself_is_found(kb):
    result = kb.curation.find_paths("Maya Chen", "Meeting family 5633", NS, max_hops=1)
    assert result.paths == ["Maya Chen <-KNOWS- Meeting family 5633"] and result.hops == 1


def test_a_weak_relation_between_two_hubs_is_found(kb):
    result = kb.curation.find_paths("Ann", "Bea", NS, max_hops=4)
    assert result.hops == 3
    assert result.paths == ["Ann -KNOWS-> Maya Chen -WORKS_WITH-> Omar Haddad <-KNOWS- Bea"]


def test_a_search_cut_at_a_hub_does_not_say_there_is_no_path(fake_kb):
    # Lone start - Maya Chen - Quiet middle - Omar Haddad - Lone end: both hubs' relations to the middle rank last,
    # so neither hub's read reaches it, and the two searches cannot meet there
    nodes, edges = crowd("Maya Chen", "Fan")
    more_nodes, more_edges = crowd("Omar Haddad", "Peer")
    fake_kb.add_knowledge_graph(
        [*nodes, *more_nodes, *(NodeInput(name=n, type="Thing") for n in ("Lone start", "Quiet middle", "Lone end"))],
        [*edges, *more_edges, weak("Lone start", "Maya Chen"), weak("Quiet middle", "Maya Chen"),
         weak("Quiet middle", "Omar Haddad"), weak("Lone end", "Omar Haddad")])
    result = fake_kb.curation.find_paths("Lone start", "Lone end", NS, max_hops=4)
    assert result.paths == [] and result.hops is None
    message = result.message
    assert not message.startswith("no path between"), message
    assert message.startswith("no path found between Lone start and Lone end within 4 hops among the relations read")
    assert "Maya Chen" in message and "Omar Haddad" in message  # the hubs whose relations were cut
    assert "get_entities" in message and "relations_offset" in message  # what to do next


def test_the_shortest_path_still_comes_first(kb):
    # a direct relation besides the path through the hubs: only the shortest is listed
    kb.add_knowledge_graph([], [EdgeInput(source="Ann", target="Bea", type="MET", weight=0.5)])
    result = kb.curation.find_paths("Ann", "Bea", NS, max_hops=4)
    assert result.hops == 1 and result.paths == ["Ann -MET-> Bea"]


def test_several_equally_short_paths_are_listed_strongest_first(fake_kb):
    fake_kb.add_knowledge_graph(
        [NodeInput(name=n, type="Thing") for n in ("A", "B", "Weak", "Strong", "Mid")],
        [EdgeInput(source="A", target="Weak", type="R", weight=0.2), EdgeInput(source="Weak", target="B", type="R",
                                                                             weight=0.2),
         EdgeInput(source="A", target="Strong", type="R", weight=0.9), EdgeInput(source="Strong", target="B",
                                                                               type="R", weight=0.9),
         EdgeInput(source="A", target="Mid", type="R", weight=0.5), EdgeInput(source="Mid", target="B", type="R",
                                                                            weight=0.5)])
    result = fake_kb.curation.find_paths("A", "B", NS, max_hops=2, max_paths=2)
    assert result.paths == ["A -R-> Strong -R-> B", "A -R-> Mid -R-> B"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_tool_finds_the_path_through_a_hub(tmp_path):
    nodes, edges = crowd("Maya Chen", "Fan")
    async with Client(build_server(make_services(tmp_path))) as client:
        await call_ok(client, "add_knowledge_graph", {
            "nodes": [n.model_dump(include={"name", "type"}) for n in nodes]
            + [{"name": "Bug marathon 4399", "type": "Event"}, {"name": "Meeting family 5633", "type": "Event"}],
            "edges": [e.model_dump(include={"source", "target", "type", "weight"}) for e in edges]
            + [{"source": end, "target": "Maya Chen", "type": "KNOWS", "weight": 0.1}
               for end in ("Bug marathon 4399", "Meeting family 5633")]})
        paths, _ = await call_ok(client, "find_paths", {"source": "Bug marathon 4399", "target": "Meeting family 5633",
                                                        "max_hops": 4})
        assert paths["hops"] == 2 and paths["message"] is None
        assert paths["paths"] == ["Bug marathon 4399 -KNOWS-> Maya Chen <-KNOWS- Meeting family 5633"]
