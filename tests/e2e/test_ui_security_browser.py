"""The web UI's defences as a real browser meets them (`duckgraph ui` as a child process on a real DuckDB file,
headless Chromium as tests/e2e/test_ui_browser.py drives it): another site's page cannot show the UI in a frame
(clickjacking), the page works under its Content Security Policy, and the "token needed" form logs in without the
token ever reaching the address or the log.

The embedder is the hashing fake of tests/fakes.py: what is checked here does not depend on it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, NodeInput
from duckgraph.core.ui.security import COOKIE, COOKIE_SECONDS
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.test_ui_browser import CHROMEDRIVER, CHROMIUM, open_entity_page, shown, wait_for
from tests.e2e.ui_server import child_env, running_ui
from tests.fakes import HashingEmbedder
from tests.site_server import serve

TOKEN = "browser-token-never-in-the-log"


@pytest.fixture
def small_db(tmp_path: Path) -> Path:
    path = tmp_path / "small.duckdb"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Bob", type="Person"), NodeInput(name="Acme", type="Organization")],
                               [EdgeInput(source="Bob", target="Acme", type="WORKS_AT")])
    return path


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return child_env(tmp_path / "home", fake_embedder=True, DUCKGRAPH_WARM_UP="0")


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    """tests/e2e/test_ui_browser.py's browser, with its console kept: where it says what it refused."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1400,1000"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def refusals(driver) -> list[str]:
    """What the console said the page's Content Security Policy refused since the last call."""
    return [entry["message"] for entry in driver.get_log("browser") if "Content Security Policy" in entry["message"]]


def test_another_site_cannot_show_the_ui_in_a_frame(small_db: Path, tmp_path: Path, env: dict[str, str],
                                                    browser) -> None:
    with running_ui(small_db, tmp_path / "ui.log", env) as url:
        # The tester's page: the UI's entity page in a frame (it would be transparent, over a decoy), and a frame
        # of the site's own, which shows that frames do render.
        hostile = ("<!doctype html><title>decoy</title><script>window.loaded = [];</script>"
                   f"<iframe id=ui src='{url}#/entity?name=Bob' onload=\"loaded.push('ui')\"></iframe>"
                   "<iframe id=own src='/own' onload=\"loaded.push('own')\"></iframe>")
        with serve({"/": ("text/html", hostile),
                    "/own": ("text/html", "<!doctype html><p id=own-text>the site's own frame</p>")}) as site:
            browser.get(site.url + "/")
            wait_for(browser, lambda d: sorted(d.execute_script("return window.loaded")) == ["own", "ui"],
                     "both frames loaded")
            browser.switch_to.frame("own")
            assert browser.find_element(By.ID, "own-text").text == "the site's own frame"
            browser.switch_to.default_content()
            browser.switch_to.frame("ui")
            # Nothing of the UI: no search box, no entity, no buttons to click.
            assert not browser.find_elements(By.ID, "q") and not browser.find_elements(By.CSS_SELECTOR, ".entity")
            assert "Bob" not in browser.find_element(By.TAG_NAME, "html").text
            browser.switch_to.default_content()
            said = [entry["message"] for entry in browser.get_log("browser")]
            assert any("frame-ancestors 'none'" in message for message in said), said


def test_the_page_works_under_its_content_security_policy(small_db: Path, tmp_path: Path, env: dict[str, str],
                                                          browser) -> None:
    with running_ui(small_db, tmp_path / "ui.log", env) as url:
        browser.get(url)
        shown(browser, "#counts dd")
        browser.get(f"{url}#/entity?name=Bob")
        open_entity_page(browser, "Bob")
        shown(browser, "#relations tr.relation")
        # The type badge's colour is a style attribute the page sets: allowed by the policy, so applied.
        badge = shown(browser, ".entity .type")
        assert badge.value_of_css_property("background-color") not in ("rgba(0, 0, 0, 0)", "transparent")
        assert refusals(browser) == []


def test_the_token_form_logs_in_and_the_token_stays_out_of_address_and_log(small_db: Path, tmp_path: Path,
                                                                           env: dict[str, str], browser) -> None:
    log = tmp_path / "ui.log"
    with running_ui(small_db, log, {**env, "DUCKGRAPH_HTTP_TOKEN": TOKEN}, "--log-level", "DEBUG") as url:
        assert TOKEN not in url
        browser.get(url)
        field = shown(browser, "input[name=token]")
        field.send_keys("not-the-token")
        browser.find_element(By.TAG_NAME, "button").click()
        wait_for(browser, lambda d: "That token is not this server's." in d.find_element(By.TAG_NAME, "body").text,
                 "the wrong token refused")
        assert browser.get_cookie(COOKIE) is None
        field = shown(browser, "input[name=token]")
        field.send_keys(TOKEN)
        browser.find_element(By.TAG_NAME, "button").click()
        shown(browser, "#counts dd")  # the UI, its API answering with the cookie
        assert browser.current_url == url and TOKEN not in browser.current_url
        cookie = browser.get_cookie(COOKIE)
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and TOKEN not in cookie["value"]
        assert abs(cookie["expiry"] - (time.time() + COOKIE_SECONDS)) < 600
        assert refusals(browser) == []

        # The printed address's way: the token in the link, the page reloaded at once without it.
        browser.delete_all_cookies()
        browser.get(url)
        shown(browser, "input[name=token]")
        browser.get(f"{url}?token={TOKEN}")
        shown(browser, "#counts dd")
        assert browser.current_url == url
    written = log.read_text(encoding="utf-8")
    assert '"POST /login HTTP/1.1" 303' in written and '"GET /?token=[hidden] HTTP/1.1" 303' in written
    assert TOKEN not in written
