"""Where a login sends the browser, followed in headless Chromium (as tests/e2e/test_ui_security_browser.py drives
it): a `?token=` login link whose path would send the browser to another site once the login reloads the address
without the token (an open redirect: Chromium reads "/\\host" as "//host" and drops a tab from "/<tab>/host") keeps
it on the UI, and a login by the token form or by a link lands on the view the address asked for (its fragment,
`#/entity?name=...`, which a browser never sends to the server).

Real parts: `duckgraph ui` as a child process on a real DuckDB file, a second web site on another port of
127.0.0.1 (tests/site_server.py) as the other site, Chromium. The embedder is the hashing fake of tests/fakes.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.test_ui_browser import browser, open_entity_page, shown, wait_for  # noqa: F401 (browser: a fixture)
from tests.e2e.ui_server import child_env, running_ui
from tests.fakes import HashingEmbedder
from tests.site_server import serve

TOKEN = "redirect-token"


@pytest.fixture
def small_db(tmp_path: Path) -> Path:
    path = tmp_path / "small.duckdb"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Bob", type="Person"), NodeInput(name="Maya Chen", type="Person"),
                                NodeInput(name="Zoë Ålund", type="Person")], [])
    return path


def test_a_token_link_never_takes_the_browser_to_another_site(small_db: Path, tmp_path: Path, browser) -> None:
    env = child_env(tmp_path / "home", fake_embedder=True, DUCKGRAPH_WARM_UP="0", DUCKGRAPH_HTTP_TOKEN=TOKEN)
    with running_ui(small_db, tmp_path / "ui.log", env) as url:
        origin = url.rstrip("/")
        with serve({"/landed": ("text/html", "<!doctype html><p id=landed>another site</p>")}) as site:
            other = site.url.removeprefix("http://")  # 127.0.0.1 and another port: another origin
            for path in (f"/%5C{other}/landed", f"/%09/{other}/landed", f"/%5C%09{other}/landed"):
                browser.delete_all_cookies()
                browser.get(f"{origin}{path}?token={TOKEN}")
                assert browser.current_url.startswith(f"{origin}/"), (path, browser.current_url)
                assert site.requests == [], path
            # The link as `duckgraph ui` prints it still logs in and shows the page.
            browser.get(f"{origin}/?token={TOKEN}")
            shown(browser, "#counts dd")
            assert browser.current_url == url


def log_in_by_the_form(browser, token: str) -> None:
    shown(browser, "input[name=token]").send_keys(token)
    browser.find_element(By.TAG_NAME, "button").click()


def test_a_login_lands_on_the_view_the_address_asked_for(small_db: Path, tmp_path: Path, browser) -> None:
    env = child_env(tmp_path / "home", fake_embedder=True, DUCKGRAPH_WARM_UP="0", DUCKGRAPH_HTTP_TOKEN=TOKEN)
    with running_ui(small_db, tmp_path / "ui.log", env) as url:
        # A bookmarked entity's page, opened without the login: the token form, a wrong token first (the page
        # that refuses it is /login's answer, whose address has no fragment), then the right one.
        maya = f"{url}#/entity?name=Maya+Chen"
        browser.get(maya)
        log_in_by_the_form(browser, "not-the-token")
        wait_for(browser, lambda d: "That token is not this server's." in d.find_element(By.TAG_NAME, "body").text,
                 "the wrong token refused")
        log_in_by_the_form(browser, TOKEN)
        open_entity_page(browser, "Maya Chen")
        assert browser.current_url == maya
        # A name beyond ASCII, its address percent-encoded as the page writes it.
        browser.delete_all_cookies()
        browser.get("about:blank")  # opened anew, not a move within the page open
        zoe = f"{url}#/entity?name=Zo%C3%AB+%C3%85lund"
        browser.get(zoe)
        log_in_by_the_form(browser, TOKEN)
        open_entity_page(browser, "Zoë Ålund")
        assert browser.current_url == zoe
        # The printed link's way, with a view: the address reloaded without the token, on that view still.
        browser.delete_all_cookies()
        browser.get(f"{url}?token={TOKEN}#/entity?name=Maya+Chen")
        open_entity_page(browser, "Maya Chen")
        assert browser.current_url == maya


def test_a_login_that_ends_while_the_page_is_open_asks_for_the_token_again(small_db: Path, tmp_path: Path,
                                                                             browser) -> None:  # noqa: F811
    env = child_env(tmp_path / "home", fake_embedder=True, DUCKGRAPH_WARM_UP="0", DUCKGRAPH_HTTP_TOKEN=TOKEN)
    with running_ui(small_db, tmp_path / "ui.log", env) as url:
        browser.get(f"{url}?token={TOKEN}#/entity?name=Bob")
        open_entity_page(browser, "Bob")
        # The cookie expired (or the UI restarted): the next move within the page shows the token form, not an
        # error, and the login returns to the view asked for.
        browser.delete_all_cookies()
        browser.execute_script("location.hash = '#/entity?name=Maya+Chen'")
        log_in_by_the_form(browser, TOKEN)
        open_entity_page(browser, "Maya Chen")
        assert browser.current_url == f"{url}#/entity?name=Maya+Chen"
