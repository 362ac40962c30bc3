"""The web UI's relation rows in a real browser (as tests/e2e/test_ui_browser.py drives it): a planned fact (not
begun) and one whose end is still to come offer Delete and End, since the tools reach them; a relation with two
periods that have not ended offers neither (the tools would act on both); an ended one is history."""

from __future__ import annotations

from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.test_ui_browser import answer_dialog, browser, open_entity_page, wait_for  # noqa: F401 (fixture)
from tests.e2e.ui_server import child_env, running_ui

pytestmark = pytest.mark.model


def test_a_planned_fact_can_be_deleted_and_ended_from_its_row(tmp_path: Path, minilm, browser) -> None:  # noqa: F811
    path = tmp_path / "periods.duckdb"
    with KnowledgeBase(DuckDBStore(path), minilm) as kb:
        kb.add_knowledge_graph(
            [NodeInput(name="Dana", type="Person")]
            + [NodeInput(name=n, type="Organization") for n in ("Acme", "Globex", "Initech", "Umbrella")],
            [EdgeInput(source="Dana", target="Acme", type="WORKS_AT", valid_from="2099-01-01"),
             EdgeInput(source="Dana", target="Globex", type="ADVISES", valid_until="2090-01-01"),
             # planned first: then a period that ends before it starts is a second one
             EdgeInput(source="Dana", target="Initech", type="OWNS", valid_from="2099-01-01"),
             EdgeInput(source="Dana", target="Initech", type="OWNS", valid_until="2050-01-01"),
             EdgeInput(source="Dana", target="Umbrella", type="FOUNDED", valid_from="2001-01-01",
                       valid_until="2002-01-01")])
    with running_ui(path, tmp_path / "ui.log", child_env(tmp_path / "home")) as url:
        browser.get(f"{url}#/entity?name=Dana")
        open_entity_page(browser, "Dana")

        def row(target: str, *, index: int = 0):
            rows = browser.find_elements(By.CSS_SELECTOR, "#relations tr.relation")
            return [r for r in rows if target in r.text][index]

        def actions(element) -> list[str]:
            return [b.text for b in element.find_elements(By.CSS_SELECTOR, ".row-actions button")]

        assert actions(row("Acme")) == ["End", "Delete"]  # not begun
        assert actions(row("Globex")) == ["End", "Delete"]  # its end still to come
        for index in (0, 1):
            assert actions(row("Initech", index=index)) == []
            assert row("Initech", index=index).find_element(By.CSS_SELECTOR, ".no-delete").text == "several periods"
        assert row("Umbrella").find_element(By.CSS_SELECTOR, ".no-delete").text == "history"

        row("Acme").find_element(By.CSS_SELECTOR, ".delete-relation").click()
        answer_dialog(browser)
        wait_for(browser, lambda d: "Acme" not in d.find_element(By.ID, "relations").text, "the planned fact deleted")
