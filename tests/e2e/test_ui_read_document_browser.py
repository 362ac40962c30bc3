"""Reading a passage's document in a real browser (`duckgraph ui` as a child process on a real DuckDB file, driven in
headless Chromium as tests/e2e/test_ui_browser.py drives it): from a search's passage and from an entity's, the
document's page shows its passages in order around the one opened (marked, and focused), each with its place and
its section and without what it repeats of the one before it, reads back and on in place (the text still read once),
links the turns of a conversation (the one before opened at its end), and shows a document's markup as text.

The embedder is the hashing fake of tests/fakes.py: what is checked here is the page."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.test_read_document_mcp import CHAT, FILLER, REPORT, TOPICS
from tests.e2e.test_ui_browser import (  # noqa: F401 (browser, screenshots: fixtures)
    browser,
    open_entity_page,
    screenshots,
    shown,
    wait_for,
)
from tests.e2e.test_ui_scripts_browser import visit
from tests.e2e.ui_server import child_env, get_json, running_ui
from tests.fakes import HashingEmbedder

QUERY = "Which camera cracked in the cold snap?"
HOSTILE = {"id": "inbox/<b>note</b>.html", "title": "<script>document.title='pwned'</script> Minutes",
           "text": "Budget <img src=x onerror=\"document.title='pwned'\"> approved by <b>Mallory</b> &amp; "
                   "<a href=\"javascript:alert(1)\">the board</a>."}


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[int]]]:
    """The address of the UI, and the ids of the report's twelve passages."""
    folder = tmp_path_factory.mktemp("reading")
    path = folder / "reading.duckdb"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        ids = kb.add_documents([DocumentInput(**REPORT)]).documents[0].chunk_ids
        kb.add_documents([DocumentInput(**d) for d in [*CHAT, HOSTILE]])
        kb.add_knowledge_graph([NodeInput(name="Cryogenic camera", type="Instrument", source_ids=[REPORT["id"]])], [])
    with running_ui(path, folder / "ui.log", child_env(folder / "home", fake_embedder=True)) as url:
        yield url, ids


def shown_passages(driver) -> list[tuple[int, str, str]]:
    """The document page's passages as drawn: each one's chunk_id, place and id as search shows it."""
    return [(int(a.get_attribute("data-chunk")), a.find_element(By.CSS_SELECTOR, "header strong").text,
             a.find_element(By.CSS_SELECTOR, "header code").text)
            for a in driver.find_elements(By.CSS_SELECTOR, ".document article.passage")]


def passage_texts(driver) -> list[str]:
    return [p.text for p in driver.find_elements(By.CSS_SELECTOR, ".document article.passage p")]


def report_words(first: int, last: int) -> list[str]:
    """The words of the report's passages `first` to `last` (1-based; its sections' paragraphs), each once."""
    paragraphs = [f"{topic}{FILLER}" for topics in TOPICS.values() for topic in topics][first - 1:last]
    return " ".join(paragraphs).split()


def places(ids: list[int], first: int, last: int) -> list[tuple[int, str, str]]:
    """The report's passages `first` to `last` (1-based), as the page draws them."""
    return [(ids[i - 1], f"passage {i} of 12", f"[{REPORT['id']}#{ids[i - 1]}]") for i in range(first, last + 1)]


def focused_chunk(driver) -> int:
    return int(driver.switch_to.active_element.get_attribute("data-chunk"))


def test_a_searched_passage_opens_its_document_which_reads_back(
        stored, browser, screenshots: Path) -> None:  # noqa: F811
    url, ids = stored
    [hit] = [p for p in get_json(f"{url}api/search?{urllib.parse.urlencode({'q': QUERY})}")["passages"]
             if p["document_id"] == REPORT["id"]]
    at = ids.index(hit["chunk_id"]) + 1
    assert at == 10  # "The cryogenic camera cracked ...", under Discussion
    visit(browser, url, f"#/search?{urllib.parse.urlencode({'q': QUERY})}")
    link = shown(browser, f'#passages article.passage[data-document="{REPORT["id"]}"] a.read-document')
    assert link.get_attribute("aria-label") == f"Read the document {REPORT['id']} at this passage"
    link.send_keys(Keys.ENTER)  # a link: the keyboard opens it

    opened = shown(browser, ".document .passage.opened")
    assert shown(browser, "#document-title").text == REPORT["title"]
    assert int(opened.get_attribute("data-chunk")) == hit["chunk_id"]
    assert opened.get_attribute("aria-current") == "true" and "the passage opened" in opened.text
    assert focused_chunk(browser) == hit["chunk_id"]  # the focus is on it, in view
    # Shown after passage 9: without the sentences it repeats of it, which search shows with it.
    shown_text = opened.find_element(By.CSS_SELECTOR, "p").text
    assert shown_text.startswith(TOPICS["Discussion"][1]) and hit["text"].strip().endswith(shown_text)
    assert not hit["text"].startswith(TOPICS["Discussion"][1])
    assert shown_passages(browser) == places(ids, 8, 12)
    assert " ".join(passage_texts(browser)[1:]).split() == report_words(9, 12)  # the first shown: whole
    assert [s.text for s in browser.find_elements(By.CSS_SELECTOR, ".document h2.section")] == ["Results", "Discussion"]
    assert browser.find_element(By.ID, "document-about").text == (
        f"{REPORT['id']} · 2024-12-20 · 12 passages · shown: passages 8 to 12")
    browser.save_screenshot(str(screenshots / "document.png"))
    assert not browser.find_element(By.ID, "read-on").is_displayed()  # the last passage is shown

    # Earlier passages: 1 to 7 added above, in place, the focus on the first added; the one opened stays marked.
    back = browser.find_element(By.ID, "read-back")
    assert back.text == "Earlier passages (1 to 7)"
    back.send_keys(Keys.ENTER)
    wait_for(browser, lambda d: len(shown_passages(d)) == 12, "the earlier passages")
    assert shown_passages(browser) == places(ids, 1, 12)
    assert " ".join(passage_texts(browser)).split() == report_words(1, 12)  # passage 8 now follows 7: as the rest
    assert focused_chunk(browser) == ids[0]
    assert [s.text for s in browser.find_elements(By.CSS_SELECTOR, ".document h2.section")] == [
        "Methods", "Results", "Discussion"]
    assert [int(a.get_attribute("data-chunk")) for a in browser.find_elements(By.CSS_SELECTOR, ".passage.opened")] \
        == [hit["chunk_id"]]
    assert not browser.find_element(By.ID, "read-back").is_displayed()


def test_an_entitys_passage_opens_its_document_and_one_read_from_its_start_reads_on(
        stored, browser) -> None:  # noqa: F811
    url, ids = stored
    visit(browser, url, "#/entity?name=Cryogenic%20camera")
    open_entity_page(browser, "Cryogenic camera")
    links = browser.find_elements(By.CSS_SELECTOR, f'#entity-passages article[data-document="{REPORT["id"]}"] '
                                                   "a.read-document")
    assert links
    chunk = int(urllib.parse.parse_qs(links[0].get_attribute("href").split("?", 1)[1])["chunk"][0])
    links[0].click()
    assert int(shown(browser, ".document .passage.opened").get_attribute("data-chunk")) == chunk
    assert focused_chunk(browser) == chunk

    # From its start (no passage opened): passages 1 to 7, nothing marked; Later passages reads on to the end.
    visit(browser, url, f"#/document?{urllib.parse.urlencode({'id': REPORT['id']})}")
    wait_for(browser, lambda d: shown_passages(d) == places(ids, 1, 7), "passages 1 to 7")
    assert not browser.find_elements(By.CSS_SELECTOR, ".passage.opened")
    assert not browser.find_element(By.ID, "read-back").is_displayed()
    assert browser.find_element(By.ID, "document-about").text == (
        f"{REPORT['id']} · 2024-12-20 · 12 passages · shown: passages 1 to 7")
    later = browser.find_element(By.ID, "read-on")
    assert later.text == "Later passages (8 to 12)"
    later.click()
    wait_for(browser, lambda d: shown_passages(d) == places(ids, 1, 12), "passages 1 to 12")
    assert " ".join(passage_texts(browser)).split() == report_words(1, 12)  # passage 8 follows 7 shown before
    assert focused_chunk(browser) == ids[7]
    assert not browser.find_element(By.ID, "read-on").is_displayed()

    # A conversation kept one turn per document: the turns before (opened at its end) and after, as links.
    visit(browser, url, "#/document?id=chat-1")
    assert shown(browser, "#document-before").text == "Its text goes on from the document chat-0."
    assert browser.find_element(By.ID, "document-after").text == "Its text goes on in the document chat-2."
    browser.find_element(By.CSS_SELECTOR, "#document-after a.document-link").click()
    wait_for(browser, lambda d: passage_texts(d) == ["Too bad."], "the next turn")
    visit(browser, url, "#/document?id=chat-1")
    [end] = get_json(f"{url}api/read?id=chat-0")["passages"]
    shown(browser, "#document-before a.document-link").click()
    assert int(shown(browser, ".document .passage.opened").get_attribute("data-chunk")) == end["chunk_id"]
    assert passage_texts(browser) == [CHAT[0]["text"]] and focused_chunk(browser) == end["chunk_id"]


def test_a_documents_markup_is_shown_as_text(stored, browser, screenshots: Path) -> None:  # noqa: F811
    url, _ = stored
    visit(browser, url, f"#/search?{urllib.parse.urlencode({'q': 'Budget approved by Mallory'})}")
    shown(browser, f'#passages article.passage[data-document="{HOSTILE["id"]}"] a.read-document').click()
    opened = shown(browser, ".document .passage.opened")
    assert shown(browser, "#document-title").text == HOSTILE["title"]
    assert opened.find_element(By.CSS_SELECTOR, "p").text == HOSTILE["text"]
    assert f"[{HOSTILE['id']}#" in opened.find_element(By.CSS_SELECTOR, "header").text
    assert HOSTILE["id"] in browser.find_element(By.ID, "document-about").text
    browser.save_screenshot(str(screenshots / "document-markup.png"))
    # Nothing of it became an element, and no script of it ran.
    assert not browser.find_elements(By.CSS_SELECTOR, "#view script, #view img, #view b, #view a[href^=javascript]")
    assert browser.title == f"{HOSTILE['title']} — duckgraph"  # as text, never set to 'pwned' by it
