"""The merge's confirmation in a real browser (`duckgraph ui` as a child process on a real DuckDB file, driven in
headless Chromium as tests/e2e/test_ui_browser.py drives it): before it is confirmed, it says what each entity
merged away brings along (its names that become aliases, its observations, properties, relations and passages) and,
for each property whose values differ, the value kept and the one that becomes an observation; names of no entity
are refused before anything is asked.

The embedder is the hashing fake of tests/fakes.py: what is checked here is the page, the tools and the file."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.test_ui_browser import (  # noqa: F401 (browser: a fixture)
    answer_dialog,
    browser,
    notice,
    open_entity_page,
    shown,
)
from tests.e2e.test_ui_scripts_browser import visit
from tests.e2e.ui_server import child_env, get_json, running_ui
from tests.fakes import HashingEmbedder

MAYA = "Maya Chen"
TYPO = "Maya Chenn"
SHORT = "Chen M."


@pytest.fixture
def ui(tmp_path: Path) -> Iterator[str]:
    path = tmp_path / "merge.duckdb"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_documents([DocumentInput(id="standup", text="Maya Chenn leads the payments standup."),
                          DocumentInput(id="offsite", text="Maya Chenn booked the Lisbon offsite.")])
        kb.add_knowledge_graph(
            [NodeInput(name=MAYA, type="Person", aliases=["M. Chen"], source_ids=["standup"],
                       properties={"role": "engineer", "team": "payments"}),
             NodeInput(name=TYPO, type="Person", aliases=["M. Chen", "Maya C."], source_ids=["standup", "offsite"],
                       observations=["Leads the payments standup.", "Booked the Lisbon offsite."],
                       properties={"role": "manager", "team": "Payments", "office": "Lisbon"}),
             NodeInput(name=SHORT, type="Person", properties={"office": "Porto"}),
             NodeInput(name="Acme", type="Organization")],
            [EdgeInput(source=MAYA, target="Acme", type="WORKS_AT"),
             EdgeInput(source=TYPO, target="Acme", type="WORKS_AT"),
             EdgeInput(source=TYPO, target=MAYA, type="KNOWS")])
    with running_ui(path, tmp_path / "ui.log", child_env(tmp_path / "home", fake_embedder=True)) as url:
        yield url


def test_the_merges_question_says_what_comes_along_and_which_values_are_kept(ui: str, browser) -> None:  # noqa: F811
    visit(browser, ui, f"#/entity?{urllib.parse.urlencode({'name': MAYA})}")
    open_entity_page(browser, MAYA)
    browser.find_element(By.ID, "merge").click()
    # Her own name and the typo written twice: the question names each entity merged once, as stored.
    answer_dialog(browser, f"{TYPO}\n{MAYA}\nmaya chenn\n{SHORT}")
    brings = [li.text for li in shown(browser, "#merge-brings").find_elements(By.TAG_NAME, "li")]
    assert browser.find_element(By.CSS_SELECTOR, "#dialog-body > p").text == (
        f"Merge {TYPO}, {SHORT} into {MAYA}? This cannot be undone.")
    # "M. Chen" is Maya Chen's alias already, her WORKS_AT and the standup passage hers too; the relation between
    # the two would join her to herself.
    assert brings == [
        f"{TYPO} brings 2 aliases ({TYPO}, Maya C.), 2 observations, 3 properties, 0 relations (1 more repeats a "
        f"relation {MAYA} will have and is joined into it; 1 relation between the entities merged goes: it would "
        f"join {MAYA} to itself) and 1 passage.",
        f"{SHORT} brings 1 alias ({SHORT}), 0 observations, 1 property, 0 relations and 0 passages."]
    # Her own values win, then the later source's; "Payments" and "payments" say the same.
    conflicts = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#merge-conflicts li")]
    assert conflicts == [f"role: {MAYA}'s engineer is kept; {TYPO}'s manager becomes an observation.",
                         f"office: {SHORT}'s Porto is kept; {TYPO}'s Lisbon becomes an observation."]
    assert browser.switch_to.active_element == browser.find_element(By.ID, "dialog-cancel")

    # Confirmed: what the question said is what the merge did.
    answer_dialog(browser)
    notice(browser, "Merged")
    merged = get_json(f"{ui}api/entity?{urllib.parse.urlencode({'name': MAYA})}")
    entity = merged["entity"]
    assert entity["properties"] == {"role": "engineer", "team": "payments", "office": "Porto"}
    assert {"role: manager (from Maya Chenn)", "office: Lisbon (from Maya Chenn)"} <= set(entity["observations"])
    assert set(entity["aliases"]) == {"M. Chen", TYPO, "Maya C.", SHORT}
    assert [(r["type"], r["target"]) for r in entity["relations"]] == [("WORKS_AT", "Acme")]
    assert sorted(p["document_id"] for p in merged["passages"]["passages"]) == ["offsite", "standup"]


def test_names_of_no_entity_are_refused_before_anything_is_asked(ui: str, browser) -> None:  # noqa: F811
    visit(browser, ui, f"#/entity?{urllib.parse.urlencode({'name': MAYA})}")
    open_entity_page(browser, MAYA)
    browser.find_element(By.ID, "merge").click()
    answer_dialog(browser, "Maya Chem")
    assert notice(browser, "no entity named").startswith("no entity named 'Maya Chem'")
    assert "error" in browser.find_element(By.ID, "notice").get_attribute("class")
    assert not browser.find_element(By.ID, "dialog").get_attribute("open")
    assert get_json(f"{ui}api/entity?{urllib.parse.urlencode({'name': TYPO})}")["entity"]["name"] == TYPO
