"""`add_urls` through the official MCP client: off unless the server's configuration enables it; then pages of a
site served on 127.0.0.1 (allowed explicitly) are fetched, crawled within the site, stored and searchable, with
progress notifications; a redirect to a private address is checked again and refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from duckgraph.core.bootstrap import bootstrap
from duckgraph.core.config import load_settings
from duckgraph.core.mcp.server import build_server
from tests.site_server import serve

pytestmark = pytest.mark.model


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def server(tmp_path: Path, minilm, plugin_manager, **settings):
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    loaded = load_settings(config, env={}, db=str(tmp_path / "kb.duckdb"), warm_up=False, fetch_delay=0.0,
                           **settings)
    return build_server(bootstrap(loaded, plugin_manager=plugin_manager, embedder=minilm))


PAGES = {
    "/": ("text/html", "<html><head><title>Tea shop</title></head><body><article><h1>Tea shop</h1><p>We sell "
                       "green and black tea from Darjeeling and Assam.</p><a href='/opening'>Opening hours</a>"
                       "</article></body></html>"),
    "/opening": ("text/markdown", "# Opening hours\n\n## Sunday\n\nThe tea shop is closed on Sundays.\n"),
}


@pytest.mark.anyio
async def test_add_urls_is_off_by_default(tmp_path, minilm, plugin_manager):
    with serve(dict(PAGES)) as site:
        async with Client(server(tmp_path, minilm, plugin_manager)) as client:
            result = await client.call_tool("add_urls", {"urls": [site.url + "/"]})
        assert result.is_error and "fetch_urls = true" in result.content[0].text
        assert site.requests == []


@pytest.mark.anyio
async def test_add_urls_fetches_crawls_and_refuses_private_hosts(tmp_path, minilm, plugin_manager):
    progress = []

    async def on_progress(done, total, message):
        progress.append(message)

    with serve(dict(PAGES)) as site:
        async with Client(server(tmp_path, minilm, plugin_manager, fetch_urls=True)) as client:
            refused = await client.call_tool("add_urls", {"urls": [site.url + "/"]})
            assert refused.structured_content["failed"][0]["reason"].startswith("127.0.0.1 is a private")
            assert site.requests == []
        async with Client(server(tmp_path, minilm, plugin_manager, fetch_urls=True,
                                 fetch_private_hosts=True)) as client:
            result = await client.call_tool("add_urls", {"urls": [site.url + "/", "file:///etc/passwd"],
                                                         "crawl_depth": 1}, progress_callback=on_progress)
            assert not result.is_error, result.content
            stored = result.structured_content
            assert sorted(stored["stored"]) == [site.url + "/", site.url + "/opening"]
            assert stored["failed"] == [{"url": "file:///etc/passwd",
                                         "reason": "only http:// and https:// URLs are fetched"}]
            assert "fetching pages" in progress and "embedding passages" in progress
            again = (await client.call_tool("add_urls", {"urls": [site.url + "/opening"]})).structured_content
            assert again["unchanged"] == [site.url + "/opening"] and again["stored"] == []
            found = await client.call_tool("search", {"query": "Is the tea shop open on Sunday?", "max_passages": 1})
            assert f"[{site.url}/opening#" in found.content[0].text
            assert "Opening hours § Sunday: The tea shop is closed on Sundays." in found.content[0].text


@pytest.mark.anyio
async def test_the_tool_uses_the_url_fetching_of_the_composition_root(tmp_path, minilm, plugin_manager):
    from duckgraph.core.web.add_urls import UrlFetching

    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    off = load_settings(config, env={}, db=str(tmp_path / "kb.duckdb"), warm_up=False)
    on = load_settings(config, env={}, db=str(tmp_path / "kb.duckdb"), warm_up=False, fetch_urls=True,
                       fetch_private_hosts=True, fetch_delay=0.0)
    fetching = UrlFetching(on, plugin_manager)  # given in place of the one the settings (fetching off) would make
    services = bootstrap(off, plugin_manager=plugin_manager, embedder=minilm, url_fetching=fetching)
    assert services.url_fetching is fetching
    assert bootstrap(off, plugin_manager=plugin_manager, embedder=minilm).url_fetching.settings is off
    with serve(dict(PAGES)) as site:
        async with Client(build_server(services)) as client:
            result = await client.call_tool("add_urls", {"urls": [site.url + "/opening"]})
        assert result.structured_content["stored"] == [site.url + "/opening"]
