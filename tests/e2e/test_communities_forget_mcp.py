"""What was deleted leaves the community reports at once, through the official MCP client in memory (a real DuckDB
file, the real default model): a report the host wrote from a passage whose document was deleted, or whose named
entity lost an observation, is withheld (and listed to be written again, dropped by the next build, left out of an
export; one imported is withheld likewise) as for a deleted member or fact; and `search` names its anchors'
communities by the titles global_search shows, never by one it holds back."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp import Client

from duckgraph.core.domain.communities.global_search import WITHHELD, WITHHELD_OBSERVATIONS, WITHHELD_PASSAGES
from duckgraph.core.files.export import export_jsonl
from duckgraph.core.files.import_ import import_file
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_communities_mcp import call_ok
from tests.e2e.test_mcp_inmemory import make_services
from tests.integration.test_global_search_answers import knowledge_base

pytestmark = pytest.mark.model

#: A word only the deleted knowledge holds.
SECRET = "PELLANDRAX"
FRIENDS = ["Tom", "Ana", "Raj", "Ola"]


def family(source_ids: list[str] | None = None, observations: dict[str, list[str]] | None = None) -> dict:
    """Lena and the friends who visit her: one community."""
    observations = observations or {}
    nodes = [{"name": name, "type": "Person", "description": "the user's sister" if name == "Lena" else "a friend",
              "source_ids": source_ids or [], "observations": observations.get(name, ["known to the user"])}
             for name in ["Lena", *FRIENDS]]
    return {"nodes": nodes, "edges": [{"source": name, "target": "Lena", "type": "VISITS"} for name in FRIENDS]}


async def only_report(client: Client) -> dict:
    found = await call_ok(client, "global_search", {"query": "Lena and her friends", "level": 0})
    assert len(found["reports"]) == 1
    return found


async def listed(client: Client) -> list[dict]:
    return (await call_ok(client, "communities_to_summarize", {"limit": 50}))["communities"]


async def write_report(client: Client, title: str, summary: str) -> int:
    (entry,) = await listed(client)
    await call_ok(client, "save_community_report", {"id": entry["id"], "title": title, "summary": summary})
    assert await listed(client) == []
    return entry["id"]


async def community_line(client: Client, query: str) -> tuple[dict, str]:
    result = await client.call_tool("search", {"query": query})
    assert not result.is_error, result.content
    line = next(line for line in result.content[0].text.splitlines() if line.startswith("Communities: "))
    return result.structured_content["anchor_communities"], line


def test_a_report_written_from_a_passage_of_a_deleted_document_is_withheld_until_written_again(
        tmp_path: Path, db_path: Path, plugin_manager, minilm):
    services = make_services(tmp_path, db_path, minilm, plugin_manager)
    kb = services.knowledge_base

    async def session() -> None:
        async with Client(build_server(services, tool_set="all")) as client:
            text = f"Lena, my sister, has {SECRET} cancer. Tom, Ana, Raj and Ola visit her."
            await call_ok(client, "add_documents", {"documents": [{"id": "d9", "title": "Family", "text": text}]})
            await call_ok(client, "add_knowledge_graph", family(source_ids=["d9"]))
            # Observations written by hand: the entities outlive the document they came from.
            await call_ok(client, "add_observations", {"observations": [
                {"entityName": name, "contents": ["visited in May"]} for name in ["Lena", *FRIENDS]]})
            await call_ok(client, "build_communities", {})
            kb.communities.keeper.stop()  # no background rebuild: between builds
            (entry,) = await listed(client)
            assert SECRET in entry["material"]  # the passage the host writes from
            community = await write_report(client, "Lena's illness", f"Lena has {SECRET} cancer; friends visit.")
            assert SECRET in (await only_report(client))["reports"][0]["summary"]

            deleted = await call_ok(client, "delete_documents", {"ids": ["d9"]})
            assert deleted["deleted"] == ["d9"] and deleted["entities_removed"] == 0  # written by hand: they stay
            found = await only_report(client)
            report = found["reports"][0]
            assert SECRET not in json.dumps(found) and report["summary"] == WITHHELD_PASSAGES and report["stale"]
            assert report["title"] == "Lena, Tom and Ana"  # its key entities', as for a deleted member or fact
            anchors, line = await community_line(client, "Lena the sister")
            assert anchors["Lena"] == f"Lena, Tom and Ana (community {community})" and SECRET not in line
            # Listed to be written again, under the title global_search shows, its material without the passage.
            (entry,) = await listed(client)
            assert entry["stale"] and entry["current_title"] == "Lena, Tom and Ana"
            assert SECRET not in entry["material"] and "Passages:" not in entry["material"]
            assert kb.communities._shrunk("default")  # a running server rebuilds whatever the share
            built = await call_ok(client, "build_communities", {})
            assert built["written_reports_dropped"] == 1
            rebuilt = (await only_report(client))["reports"][0]
            assert rebuilt["author"] == "extractive" and SECRET not in json.dumps(rebuilt)

    anyio.run(session)


def test_search_names_a_community_by_the_title_global_search_shows(
        tmp_path: Path, db_path: Path, plugin_manager, minilm):
    services = make_services(tmp_path, db_path, minilm, plugin_manager)
    kb = services.knowledge_base

    async def session() -> None:
        async with Client(build_server(services, tool_set="all")) as client:
            graph = family()
            graph["nodes"].append({"name": "Dr Grunthall", "type": "Person", "description": "Lena's oncologist"})
            graph["edges"] += [{"source": "Dr Grunthall", "target": name, "type": "TREATS"}
                               for name in ["Lena", *FRIENDS]]
            await call_ok(client, "add_knowledge_graph", graph)
            await call_ok(client, "build_communities", {})
            kb.communities.keeper.stop()
            anchors, _ = await community_line(client, "Lena the sister")
            assert "Grunthall" in anchors["Lena"]  # an extractive title names the central entities

            await call_ok(client, "delete_entities", {"names": ["Dr Grunthall"]})
            shown = (await only_report(client))["reports"][0]
            anchors, line = await community_line(client, "Lena the sister")
            # As global_search shows it, written again from the members left: the deleted name is in neither.
            assert anchors["Lena"] == f"{shown['title']} (community {shown['id']})" and "Grunthall" not in line

            await call_ok(client, "build_communities", {})
            community = await write_report(client, f"Lena's {SECRET}", f"Lena has {SECRET} cancer.")
            anchors, line = await community_line(client, "Lena the sister")
            assert anchors["Lena"] == f"Lena's {SECRET} (community {community})"  # a report shown: its title
            await call_ok(client, "delete_entities", {"names": ["Ola"]})
            shown = (await only_report(client))["reports"][0]
            assert shown["summary"] == WITHHELD and SECRET not in shown["title"]
            anchors, line = await community_line(client, "Lena the sister")
            assert anchors["Lena"] == f"{shown['title']} (community {community})" and SECRET not in line

    anyio.run(session)


def test_a_report_whose_named_entity_lost_an_observation_is_withheld_and_not_exported(
        tmp_path: Path, db_path: Path, plugin_manager, minilm):
    services = make_services(tmp_path, db_path, minilm, plugin_manager)
    kb = services.knowledge_base

    def exported() -> list[dict]:
        with (tmp_path / "export.jsonl").open("w", encoding="utf-8") as out:
            export_jsonl(kb, out)
        lines = (tmp_path / "export.jsonl").read_text(encoding="utf-8").splitlines()
        return [line for line in map(json.loads, lines) if line["kind"] == "community_report"]

    async def session() -> None:
        async with Client(build_server(services, tool_set="all")) as client:
            await call_ok(client, "add_knowledge_graph", family(observations={"Lena": [f"has {SECRET} cancer"]}))
            await call_ok(client, "build_communities", {})
            kb.communities.keeper.stop()
            community = await write_report(client, f"Lena's {SECRET}", f"Lena has {SECRET} cancer.")
            # A new observation is no deletion: shown as written.
            await call_ok(client, "add_observations", {"observations": [
                {"entityName": "Lena", "contents": ["likes tea"]}]})
            assert (await only_report(client))["reports"][0]["summary"] == f"Lena has {SECRET} cancer."
            # A corrected description: kept as written, stale, and exported so.
            await call_ok(client, "update_entity", {"name": "Tom", "description": "Lena's neighbour"})
            assert (await only_report(client))["reports"][0]["stale"]
            assert [(r["title"], r["stale"]) for r in exported()] == [(f"Lena's {SECRET}", True)]
            with knowledge_base(tmp_path / "copy.duckdb", minilm) as copy:  # imported: stale, and withheld likewise
                copy.communities.keeper.stop()
                assert import_file(copy, tmp_path / "export.jsonl").community_reports_restored == 1
                (report,) = copy.communities.global_search("Lena", "default", level=0).reports
                assert report.title == f"Lena's {SECRET}" and report.stale
                copy.curation.delete_observations("Lena", [f"has {SECRET} cancer"], "default")
                (report,) = copy.communities.global_search("Lena", "default", level=0).reports
                assert report.summary == WITHHELD_OBSERVATIONS and SECRET not in report.title

            await call_ok(client, "delete_observations", {"deletions": [
                {"entityName": "Lena", "observations": [f"has {SECRET} cancer"]}]})
            found = await only_report(client)
            assert SECRET not in json.dumps(found) and found["reports"][0]["summary"] == WITHHELD_OBSERVATIONS
            anchors, line = await community_line(client, "Lena the sister")
            assert SECRET not in line and anchors["Lena"].endswith(f"(community {community})")
            (entry,) = await listed(client)
            assert entry["stale"] and SECRET not in entry["current_title"]
            assert exported() == []  # an import would show it again
            assert (await call_ok(client, "build_communities", {}))["written_reports_dropped"] == 1

            # Written again after the deletion: shown, until an observation it was written knowing goes, also once
            # a build carried it stale (as of that build).
            await write_report(client, "Lena's friends", "Friends visit Lena, who likes tea.")
            assert (await only_report(client))["reports"][0]["summary"] == "Friends visit Lena, who likes tea."
            await call_ok(client, "update_entity", {"name": "Lena", "description": "the user's older sister"})
            assert (await call_ok(client, "build_communities", {}))["written_reports_dropped"] == 0
            report = (await only_report(client))["reports"][0]
            assert report["summary"] == "Friends visit Lena, who likes tea." and report["stale"]
            await call_ok(client, "delete_observations", {"deletions": [
                {"entityName": "Lena", "observations": ["likes tea"]}]})
            assert (await only_report(client))["reports"][0]["summary"] == WITHHELD_OBSERVATIONS

    anyio.run(session)
