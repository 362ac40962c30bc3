"""A `?token=` login link whose path would send the browser to another site once the login reloads the address
without the token (an open redirect: Chromium reads "/\\host" as "//host" and drops a tab from "/<tab>/host"),
followed in headless Chromium (as tests/e2e/test_ui_security_browser.py drives it): the browser stays on the UI.

Real parts: `duckgraph ui` as a child process on a real DuckDB file, a second web site on another port of
127.0.0.1 (tests/site_server.py) as the other site, Chromium. The embedder is the hashing fake of tests/fakes.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.test_ui_browser import browser, shown  # noqa: F401 (browser: a fixture)
from tests.e2e.ui_server import child_env, running_ui
from tests.fakes import HashingEmbedder
from tests.site_server import serve

TOKEN = "redirect-token"


@pytest.fixture
def small_db(tmp_path: Path) -> Path:
    path = tmp_path / "small.duckdb"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Bob", type="Person")], [])
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
