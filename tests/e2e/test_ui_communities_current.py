"""The web UI's communities between builds (`duckgraph ui` as a child process on a real DuckDB file built with the
real default model; its HTTP API, then the page in headless Chromium as tests/e2e/test_ui_browser.py drives it):
an extractive report is shown as global_search shows it, written again from its members as they are now; a report
the host wrote stays as written, marked stale once an entity it names changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.leiden import LeidenDetector
from tests.e2e.test_ui_browser import browser, post_tool, shown, wait_for  # noqa: F401 (browser: a fixture)
from tests.e2e.ui_server import child_env, get_json, running_ui
from tests.integration.test_communities import planted_graph

from selenium.webdriver.common.by import By  # noqa: E402

pytestmark = pytest.mark.model

NEW_DESCRIPTION = "Its Great Red Spot is a storm larger than Earth."
HOST_SUMMARY = "Mozart was influenced by Haydn."


@pytest.fixture
def built_db(tmp_path: Path, minilm) -> tuple[Path, int, str, int]:
    """The planted themes with their communities built, the music community's report written by the host; the
    astronomy community's id, its first central entity, and the music community's id."""
    path = tmp_path / "ui.duckdb"
    with KnowledgeBase(DuckDBStore(path), minilm, community_detector=LeidenDetector()) as kb:
        kb.add_knowledge_graph(*planted_graph())
        kb.communities.build("default")
        kb.communities.keeper.stop()
        top = [c for c in kb.store.communities("default") if c.level == 0]
        astronomy = next(c for c in top if "Jupiter" in {e["name"] for e in c.details["entities"]})
        music = next(c for c in top if "Mozart" in {e["name"] for e in c.details["entities"]})
        kb.communities.save_written("default", music.id, "Composers", HOST_SUMMARY)
    return path, astronomy.id, astronomy.details["entities"][0]["name"], music.id


def test_the_pages_show_an_extractive_report_as_global_search_does_after_an_edit(built_db, tmp_path: Path,
                                                                               browser) -> None:  # noqa: F811
    path, astronomy, central, music = built_db
    with running_ui(path, tmp_path / "ui.log", child_env(tmp_path / "home")) as url:
        before = {c["id"]: c for c in get_json(f"{url}api/communities?level=0")["communities"]}
        old = f"{central} (Planet): A planet (astronomy)."
        assert old in before[astronomy]["summary"] and not before[music]["stale"]

        post_tool(url, "update_entity", {"name": central, "description": NEW_DESCRIPTION})
        post_tool(url, "update_entity", {"name": "Mozart", "description": "Wrote The Magic Flute."})

        found = post_tool(url, "global_search", {"query": "planets", "token_budget": 5_000})
        assert not found["freshness"]["stale"]  # 2 writes of 124: no rebuild due
        searched = next(r for r in found["reports"] if r["id"] == astronomy)
        listed = get_json(f"{url}api/communities?level=0")
        assert listed["freshness"] == found["freshness"]
        now = {c["id"]: c for c in listed["communities"]}
        assert now[astronomy] == {**searched, "score": 0.0}  # the list's report is global_search's
        assert f"{central} (Planet): {NEW_DESCRIPTION}" in now[astronomy]["summary"]
        assert old not in now[astronomy]["summary"] and not now[astronomy]["stale"]
        # The host's report as written, stale now that Mozart changed (as global_search marks it).
        assert (now[music]["author"], now[music]["summary"], now[music]["stale"]) == ("host", HOST_SUMMARY, True)
        one = get_json(f"{url}api/community?id={astronomy}")
        assert one["report"] == now[astronomy]
        assert {n["name"] for n in one["nodes"] if n["anchor"]} == {e["name"] for e in one["report"]["key_entities"]}

        # What a person sees: the list and the community's page show the new description.
        browser.get(url)
        article = f'#communities article[data-community="{astronomy}"]'
        wait_for(browser, lambda d: NEW_DESCRIPTION in d.find_element(By.CSS_SELECTOR, article).text,
                 "the new description in the astronomy community's report")
        assert "host · stale" in browser.find_element(By.CSS_SELECTOR,
                                                      f'#communities article[data-community="{music}"]').text
        browser.find_element(By.CSS_SELECTOR, f"{article} .community-link").click()
        page = shown(browser, ".community .description")
        assert page.text == now[astronomy]["summary"] and old not in page.text
