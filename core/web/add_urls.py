"""Fetching pages and crawling sites with the settings' address rules and delay and the plugins' converters: for
`duckgraph ingest`, and for the `add_urls` use case (pages fetched for an MCP host), which is off unless the
server's configuration enables it: a server that fetches URLs for a model must be opt-in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from duckgraph.core.files.converters import Converters, load_converters
from duckgraph.core.files.folder import ingest
from duckgraph.ports import InvalidInputError

if TYPE_CHECKING:
    import pluggy

    from duckgraph.core.config import Settings
    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from duckgraph.core.domain.model import AddUrlsResult
    from duckgraph.core.web.crawl import Crawl

#: URLs per call, and pages fetched for each (a crawl's bound).
MAX_URLS = 20
MAX_PAGES = 20
DISABLED = ("this server does not fetch URLs: its configuration must enable it (fetch_urls = true, or "
            "DUCKGRAPH_FETCH_URLS=1). Otherwise fetch the page yourself and call add_documents with its text.")


@dataclass
class UrlFetching:
    settings: Settings
    plugin_manager: pluggy.PluginManager

    @cached_property
    def converters(self) -> Converters:
        return load_converters(self.plugin_manager)

    def fetch(self, urls: Sequence[str], *, depth: int = 0, max_pages: int = MAX_PAGES,
              progress: Callable[[int, int, str], None] | None = None) -> Crawl:
        """The pages of `urls`, and with a depth those of their sites (core/web/crawl.py)."""
        # Imported here: httpx and the crawler load when a page is fetched, not with every command.
        from duckgraph.core.web.crawl import CrawlOptions, fetch_pages

        options = CrawlOptions(depth=depth, max_pages=max_pages, delay=self.settings.fetch_delay,
                               allow_private=self.settings.fetch_private_hosts)
        return fetch_pages(urls, self.converters, options, progress)

    def add_urls(self, kb: KnowledgeBase, urls: Sequence[str], *, depth: int = 0, max_pages: int = MAX_PAGES,
                 progress: Callable[[int, int, str], None] | None = None,
                 namespace: str | None = None) -> AddUrlsResult:
        from duckgraph.core.domain.model import AddUrlsResult, FailedUrl

        if not self.settings.fetch_urls:
            raise InvalidInputError(DISABLED)
        if len(urls) > MAX_URLS:
            raise InvalidInputError(f"{len(urls)} URLs in one call; the limit is {MAX_URLS}: split them")
        crawl = self.fetch(urls, depth=depth, max_pages=max_pages, progress=progress)
        report = ingest(kb, crawl.pages, extract=False, progress=progress, namespace=namespace)
        return AddUrlsResult(stored=report.stored, unchanged=report.unchanged, replaced=report.replaced,
                             failed=[FailedUrl(url=url, reason=why) for url, why in report.skipped],
                             chunks_written=sum(r.chunks_written for r in report.results))
