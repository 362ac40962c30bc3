"""Pages and sites as documents: a page's main text, title and date through the converter of its media type; a
crawl follows links within the same site (scheme, host and port) breadth first, to a depth and a number of pages,
asking robots.txt first, starting from the sitemap when there is one, and waiting between requests.

A crawl says whether it was whole, for `ingest --prune`: the documents under a crawled URL's folder that it did
not reach are gone from the site only if the crawl stopped because there was nothing more to follow, not at the
page limit, and no page failed to load (the pages only that one links to would look gone). A page that answers
404 or 410 is gone itself."""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ElementTree
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from html.parser import HTMLParser
from pathlib import PurePosixPath
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urldefrag, urlsplit
from urllib.robotparser import RobotFileParser

from duckgraph.core.files.folder import SUFFIXES, Contents, as_documents, longest_suffix
from duckgraph.core.files.front_matter import read_markdown
from duckgraph.core.web.fetch import USER_AGENT, Fetcher, FetchError, Response
from duckgraph.ports import DuckgraphError

if TYPE_CHECKING:
    from duckgraph.core.files.converters import Converters

#: What a server sends when it does not say what a body is: the URL's suffix says it instead.
GENERIC_MEDIA_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream"})

_TEXT_TYPES = {"text/plain": False, "text/markdown": True, "text/x-markdown": True}  # -> has front matter
#: The suffixes duckgraph reads itself (core/files/folder.py), as the media type a server should have sent.
_TEXT_SUFFIXES = {suffix: "text/plain" if suffix == ".txt" else "text/markdown" for suffix in SUFFIXES}
#: Links to these are not pages: not followed.
_NOT_PAGES = {".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".ico", ".css", ".js", ".zip", ".gz", ".mp3",
              ".mp4", ".woff", ".woff2", ".ttf", ".xml", ".json"}
_TOP_HEADING = re.compile(r"^# +(.+)$", re.MULTILINE)
_SITEMAP_NS = "{http://www.sitemaps.org/schemas/sitemap/0.9}"


@dataclass
class CrawlOptions:
    depth: int = 0  # links followed from the pages given: 0 fetches those pages only
    max_pages: int = 50  # per URL given
    delay: float = 1.0  # seconds between two requests to a site (more when robots.txt asks it)
    allow_private: bool = False


@dataclass
class Page:
    """A URL as `core/files/folder.ingest` stores it: its documents, or why there are none; `gone` when the site
    says it no longer has it (404, 410)."""

    id: str
    refused: str = ""
    contents: Contents = field(default_factory=Contents)
    gone: bool = False

    @property
    def path(self) -> str:
        return self.id

    def read(self) -> Contents:
        return self.contents


@dataclass
class Crawl:
    pages: list[Page]
    #: The folders (URL prefixes, see `scope`) of the URLs crawled whole (see the module).
    whole: list[str] = field(default_factory=list)
    #: (folder, why) of the crawls that were not.
    partial: list[tuple[str, str]] = field(default_factory=list)


def fetch_pages(urls: Sequence[str], converters: Converters, options: CrawlOptions,
                progress: Callable[[int, int, str], None] | None = None) -> Crawl:
    """The pages of `urls` (and, with a depth, those their links lead to on the same site), each once."""
    fetcher = Fetcher(allow_private=options.allow_private)
    pages: dict[str, Page] = {}
    crawl = Crawl([])
    try:
        for url in urls:
            why = _Site(fetcher, converters, options, pages, progress).crawl(_normal(url))
            if options.depth > 0:
                (crawl.partial.append((scope(url), why)) if why else crawl.whole.append(scope(url)))
    finally:
        fetcher.close()
    crawl.pages = list(pages.values())
    return crawl


def scope(url: str) -> str:
    """The folder of a URL: up to the last `/` of its path (`https://h/docs/` of `https://h/docs/a.html`)."""
    parts = urlsplit(_normal(url))
    return f"{parts.scheme}://{parts.netloc}{parts.path.rpartition('/')[0]}/"


class _Site:
    def __init__(self, fetcher: Fetcher, converters: Converters, options: CrawlOptions, pages: dict[str, Page],
                 progress: Callable[[int, int, str], None] | None) -> None:
        self.fetcher, self.converters, self.options, self.pages, self.progress = (
            fetcher, converters, options, pages, progress)
        self.last_request = 0.0

    def crawl(self, start: str) -> str:
        """Fetch `start` and the pages it leads to; "" when the crawl was whole, else why not (see the module)."""
        origin = _origin(start)
        robots = self._robots(origin)
        delay = max(self.options.delay, float(robots.crawl_delay(USER_AGENT) or 0))
        queue = deque([(start, 0)])
        if self.options.depth > 0:
            queue += [(url, 1) for url in self._sitemap(origin, robots) if _origin(url) == origin]
        fetched, failed = 0, ""
        while queue and fetched < self.options.max_pages:
            url, depth = queue.popleft()
            if url in self.pages:
                continue
            if not robots.can_fetch(USER_AGENT, url):
                self.pages[url] = Page(url, refused="forbidden by the site's robots.txt")
                continue
            self._wait(delay)
            fetched += 1
            page, links, loaded = self._page(url)
            self.pages[url] = page
            if not loaded:
                failed = failed or f"{url} could not be fetched"
            if depth < self.options.depth:
                queue += [(link, depth + 1) for link in links if _origin(link) == origin and link not in self.pages]
            if self.progress is not None:
                self.progress(fetched, min(self.options.max_pages, fetched + len(queue)), "fetching pages")
        if failed:
            return failed
        return f"stopped at {self.options.max_pages} pages" if any(u not in self.pages for u, _ in queue) else ""

    def _page(self, url: str) -> tuple[Page, list[str], bool]:
        """The page, its links, and whether it loaded (a page that is gone did: the site answered for it)."""
        try:
            response = self.fetcher.get(url)
        except FetchError as exc:
            gone = exc.status in (404, 410)
            return Page(url, refused=str(exc), gone=gone), [], gone
        try:
            return Page(url, contents=page_documents(url, response, self.converters)), _links(response), True
        except (DuckgraphError, ValueError) as exc:  # ValueError: pydantic's, e.g. a URL too long for an id
            return Page(url, refused=" ".join(str(exc).split())[:300]), [], True

    def _wait(self, delay: float) -> None:
        pause = self.last_request + delay - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        self.last_request = time.monotonic()

    def _robots(self, origin: str) -> RobotFileParser:
        """The site's robots.txt; none (or one that cannot be read) allows everything."""
        robots = RobotFileParser(origin + "/robots.txt")
        try:
            response = self.fetcher.get(origin + "/robots.txt")
            robots.parse(response.body.decode(response.encoding, errors="replace").splitlines())
        except FetchError:
            robots.parse([])
        return robots

    def _sitemap(self, origin: str, robots: RobotFileParser) -> list[str]:
        """The page URLs the site's sitemaps list (those robots.txt names, else /sitemap.xml), nested ones read
        one level down."""
        found: list[str] = []
        sitemaps = robots.site_maps() or [origin + "/sitemap.xml"]
        for number, sitemap in enumerate(sitemaps):
            try:
                root = ElementTree.fromstring(self.fetcher.get(sitemap).body)
            except (FetchError, ElementTree.ParseError):
                continue
            locations = [_normal(e.text.strip()) for e in root.iter(_SITEMAP_NS + "loc") if e.text]
            if root.tag == _SITEMAP_NS + "sitemapindex":
                sitemaps += [u for u in locations if _origin(u) == origin and number < 10]
            else:
                found += locations
        return found


def page_documents(url: str, response: Response, converters: Converters) -> Contents:
    """A fetched page as documents: text and Markdown read here, other types by the converter of their media
    type; when the server names none or a generic one (application/octet-stream), the URL's suffix picks the
    reader, as a file's does. Its time: the date the page states, else its Last-Modified header."""
    media_type, converter = response.media_type, converters.by_media_type.get(response.media_type)
    if media_type in GENERIC_MEDIA_TYPES:
        name = PurePosixPath(urlsplit(url).path).name
        if (suffix := longest_suffix(name, converters.by_suffix.keys() | _TEXT_SUFFIXES.keys())) is not None:
            converter = converters.by_suffix.get(suffix)
            media_type = _TEXT_SUFFIXES.get(suffix, media_type) if converter is None else media_type
    if converter is None and media_type in _TEXT_TYPES:
        text = response.body.decode(response.encoding, errors="replace")
        title, text, moment, metadata = read_markdown(text, front_matter=_TEXT_TYPES[media_type])
        if not title and _TEXT_TYPES[media_type] and (heading := _TOP_HEADING.search(text)):
            title = heading.group(1).strip()
    elif converter is not None:
        converted = converter.convert(response.body, url)
        title, text, moment, metadata = converted.title, converted.text, converted.time, dict(converted.metadata)
    else:
        generic = " (nor is the URL's suffix)" if media_type in GENERIC_MEDIA_TYPES else ""
        raise DuckgraphError(f"{media_type or 'an unnamed type'} is not a format duckgraph reads{generic}")
    contents = as_documents(url, title, text, moment, metadata, fallback_time=_http_date(response.last_modified))
    if not contents.documents:
        raise DuckgraphError("no text")
    return contents


def _http_date(value: str | None) -> str | None:
    try:
        return parsedate_to_datetime(value).isoformat() if value else None
    except (TypeError, ValueError):
        return None


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs += [value for name, value in attrs if name == "href" and value]


def _links(response: Response) -> list[str]:
    """The http(s) links of an HTML page, absolute, without fragments, skipping what is plainly not a page."""
    if response.media_type not in ("text/html", "application/xhtml+xml"):
        return []
    parser = _Links()
    parser.feed(response.body.decode(response.encoding, errors="replace"))
    links = (_normal(urljoin(response.url, href)) for href in parser.hrefs)
    return list(dict.fromkeys(link for link in links if urlsplit(link).scheme in ("http", "https")
                              and PurePosixPath(urlsplit(link).path).suffix.lower() not in _NOT_PAGES))


def _normal(url: str) -> str:
    return urldefrag(url.strip())[0]


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()
