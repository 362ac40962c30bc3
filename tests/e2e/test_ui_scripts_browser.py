"""The web UI with a memory in several languages and scripts, in a real browser (`duckgraph ui` as a child process
on a real DuckDB file, driven in headless Chromium as tests/e2e/test_ui_browser.py drives it): the namespaces card
in any namespace, the query's words marked as keyword search matches them (Ł, ß, Chinese, Japanese, Hindi,
Persian), hidden direction controls shown as escapes, right-to-left names that keep their place in a line, long
words that never widen the page, and what the tools say to help (a hint, the names a missing one likely meant).

The embedder is the hashing fake of tests/fakes.py: what is checked here is the page and the keyword index."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.test_ui_browser import browser, open_entity_page, shown, wait_for  # noqa: F401 (browser: a fixture)
from tests.e2e.ui_server import child_env, get_json, running_ui
from tests.fakes import HashingEmbedder

LUKASZ = "Łukasz Żółkiewski"
DAVID = "דוד כהן"  # Hebrew
DESIGNER = "مصمم المنتج الرئيسي"  # Arabic: the lead product designer
TROJAN = "payment to \u202e0001$ 9\u202c done"  # reads "payment to 9 $1000 done" when the controls act
LONG = "Supercalifragilistic" * 8  # 160 letters, no space
URL = "https://example.com/" + "a1b2c3d4e5" * 20
PASSAGES = {
    "pl": "Łukasz Żółkiewski spotkał Sørena przy Straße; she painted two paintings.",
    "zh": "我们在北京参加会议。",
    "ja": "東京タワーに行った。",
    "hi": "मैं हिन्दी बोलता हूँ।",
    "fa": "کتاب\u200cها را خواندم.",
}


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("scripts")
    path = folder / "scripts.duckdb"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_documents([DocumentInput(id=key, title=key, text=text) for key, text in PASSAGES.items()])
        kb.add_knowledge_graph(
            [NodeInput(name=LUKASZ, type="Person", observations=["Met Søren in Kraków."], source_ids=["pl"]),
             NodeInput(name="Alice", type="Person"),
             NodeInput(name=DAVID, type="Person"),
             NodeInput(name="Mallory", type="Person", description="Sends \u2067money\u2069 abroad.",
                       observations=[TROJAN]),
             NodeInput(name=LONG, type="Thing", observations=[URL])],
            [EdgeInput(source="Alice", target=DAVID, type="WORKS_WITH", description=DESIGNER),
             EdgeInput(source=DAVID, target="Mallory", type="KNOWS"),
             EdgeInput(source=LONG, target="Alice", type="BELONGS_TO")])
        kb.add_knowledge_graph([NodeInput(name="Quarterly planning", type="Meeting")], [], namespace="work")
    with running_ui(path, folder / "ui.log", child_env(folder / "home", fake_embedder=True)) as url:
        yield url


def visit(driver, url: str, fragment: str) -> None:
    """Open the page at `fragment` (a fresh load: the previous page's state never answers for this one)."""
    driver.get("about:blank")
    driver.get(url + fragment)


def test_namespaces_are_listed_in_any_namespace_and_the_select_follows_the_address(ui: str,
                                                                                   browser) -> None:  # noqa: F811
    visit(browser, ui, "#/?ns=work")
    table = shown(browser, "#namespaces table.namespaces")
    names = [cell.text for cell in table.find_elements(By.CSS_SELECTOR, "tr td:first-child")]
    assert names == ["default (default)", "work"] and not browser.find_elements(By.CSS_SELECTOR, "#namespaces .error")
    assert browser.find_element(By.ID, "namespace").get_attribute("value") == "work"

    # An invalid namespace in a link: the page says why, and the select names that namespace, not the one left.
    browser.execute_script("location.hash = '#/?ns=bad%20name'")
    error = shown(browser, "#view .error")
    assert "invalid namespace 'bad name'" in error.text
    assert browser.find_element(By.ID, "namespace").get_attribute("value") == "bad name"
    browser.execute_script("location.hash = '#/?ns=work'")
    shown(browser, "#namespaces table.namespaces")
    assert browser.find_element(By.ID, "namespace").get_attribute("value") == "work"
    assert "bad name" not in browser.find_element(By.ID, "namespace").text


@pytest.mark.parametrize(("query", "document", "expected"), [
    ("lukasz zolkiewski strasse painting", "pl", ["Łukasz", "Żółkiewski", "Straße", "painted", "paintings"]),
    ("北京", "zh", ["北京"]),
    ("タワー", "ja", ["タワー"]),
    ("हिन्दी", "hi", ["हिन्दी"]),
    ("کتابها", "fa", ["کتاب\u200cها"]),
])
def test_passages_mark_the_words_keyword_search_matched(ui: str, browser, query: str, document: str,  # noqa: F811
                                                        expected: list[str]) -> None:
    answer = get_json(f"{ui}api/search?{urllib.parse.urlencode({'q': query})}")
    passage = next(p for p in answer["passages"] if p["document_id"] == document)
    assert ["".join(list(passage["text"])[a:b]) for a, b in passage["marks"]] == expected

    visit(browser, ui, f"#/search?{urllib.parse.urlencode({'q': query})}")
    article = wait_for(browser, lambda d: [a for a in d.find_elements(By.CSS_SELECTOR, "#passages article.passage")
                                           if a.find_element(By.CSS_SELECTOR, "header strong").text == document],
                       f"the passage {document}")[0]
    shown_marks = [m.get_attribute("textContent") for m in article.find_elements(By.CSS_SELECTOR, "mark")]
    assert shown_marks == expected
    assert article.find_element(By.CSS_SELECTOR, "p").get_attribute("textContent") == PASSAGES[document]


def test_direction_controls_are_shown_as_escapes(ui: str, browser) -> None:  # noqa: F811
    visit(browser, ui, "#/entity?name=Mallory")
    open_entity_page(browser, "Mallory")
    observation = shown(browser, ".observations li").get_attribute("textContent")
    assert observation == "payment to \\u202e0001$ 9\\u202c done"
    description = browser.find_element(By.CSS_SELECTOR, ".entity .description").get_attribute("textContent")
    assert description == "Sends \\u2067money\\u2069 abroad."
    page = browser.find_element(By.ID, "view").get_attribute("textContent")
    assert not set(page) & {"\u202e", "\u202c", "\u2067", "\u2069"}
    assert len(browser.find_elements(By.CSS_SELECTOR, ".observations .control")) == 2
    # As the text is stored, the edit field keeps the controls (what is saved is what was stored).
    browser.find_element(By.ID, "edit").click()
    field = shown(browser, "#edit-observations textarea")
    assert field.get_attribute("value") == TROJAN
    browser.find_element(By.ID, "dialog-cancel").click()


# The left and right edges of the text `needle` in `element` as drawn (a Range over its characters).
PLACE = """
const [element, needle] = arguments;
const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  const at = node.data.indexOf(needle);
  if (at < 0) continue;
  const range = document.createRange();
  range.setStart(node, at);
  range.setEnd(node, at + needle.length);
  const box = range.getBoundingClientRect();
  return [box.left, box.right];
}
return null;
"""


def test_right_to_left_names_keep_their_place_in_the_line(ui: str, browser) -> None:  # noqa: F811
    visit(browser, ui, f"#/search?{urllib.parse.urlencode({'q': 'Alice ' + DAVID})}")
    fact = wait_for(browser, lambda d: [li for li in d.find_elements(By.CSS_SELECTOR, "#facts li")
                                        if "WORKS_WITH" in li.get_attribute("textContent")], "the WORKS_WITH fact")[0]
    pieces = ["Alice", "WORKS_WITH", "→", DAVID, DESIGNER]
    places = [browser.execute_script(PLACE, fact, piece) for piece in pieces]
    assert None not in places, places
    # In a left-to-right page the pieces are drawn left to right in the order written: source, type, arrow,
    # target, description (a right-to-left target and description do not swap places).
    for (_, right), (left, _), names in zip(places, places[1:], zip(pieces, pieces[1:])):
        assert right <= left + 0.5, (names, places)

    visit(browser, ui, "#/")
    item = wait_for(browser, lambda d: [li for li in d.find_elements(By.CSS_SELECTOR, "#most-connected li")
                                        if DAVID in li.get_attribute("textContent")], "David in most connected")[0]
    places = [browser.execute_script(PLACE, item, piece) for piece in (DAVID, "Person", "2 relations")]
    assert None not in places, places
    assert places[0][1] <= places[1][0] + 0.5 and places[1][1] <= places[2][0] + 0.5, places


def test_long_words_never_widen_the_page(ui: str, browser) -> None:  # noqa: F811
    def fits() -> None:
        width = browser.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], width

    visit(browser, ui, f"#/entity?{urllib.parse.urlencode({'name': LONG})}")
    open_entity_page(browser, LONG)
    shown(browser, "#relations .delete-relation")
    fits()
    right = browser.execute_script("return window.innerWidth")
    for button in ("#delete", "#relations .delete-relation", "#relations .end-relation"):
        assert browser.find_element(By.CSS_SELECTOR, button).rect["x"] + \
            browser.find_element(By.CSS_SELECTOR, button).rect["width"] <= right, button
    visit(browser, ui, "#/")
    wait_for(browser, lambda d: LONG in d.find_element(By.ID, "most-connected").text, "the long name listed")
    fits()
    visit(browser, ui, f"#/search?{urllib.parse.urlencode({'q': LONG})}")
    wait_for(browser, lambda d: LONG in d.find_element(By.ID, "facts").text, "the long name's facts")
    fits()


def test_what_the_tools_say_to_help_is_shown(ui: str, browser) -> None:  # noqa: F811
    # A search in a namespace that holds nothing (a misspelt one) says so.
    visit(browser, ui, f"#/search?{urllib.parse.urlencode({'q': 'planning', 'ns': 'wrok'})}")
    assert "The namespace 'wrok' holds nothing yet" in shown(browser, "#search-hint").text

    # A name written without its accents: the API and the page name the entity it likely meant, as a link.
    name = "Lukasz Zolkiewski"
    with pytest.raises(urllib.error.HTTPError) as missing:
        get_json(f"{ui}api/entity?{urllib.parse.urlencode({'name': name})}")
    assert missing.value.code == 404
    body = json.load(missing.value)
    assert body["did_you_mean"] == [LUKASZ] and name in body["error"]
    visit(browser, ui, f"#/entity?{urllib.parse.urlencode({'name': name})}")
    link = shown(browser, "#did-you-mean a.entity-link")
    assert link.text == LUKASZ
    link.click()
    open_entity_page(browser, LUKASZ)


def test_an_entitys_passages_mark_its_name(ui: str, browser) -> None:  # noqa: F811
    found = get_json(f"{ui}api/entity?{urllib.parse.urlencode({'name': LUKASZ})}")["passages"]["passages"]
    assert [(p["document_id"], p["marks"]) for p in found] == [("pl", [[0, 6], [7, 17]])]
    visit(browser, ui, f"#/entity?{urllib.parse.urlencode({'name': LUKASZ})}")
    open_entity_page(browser, LUKASZ)
    marks = shown(browser, "#entity-passages article").find_elements(By.CSS_SELECTOR, "mark")
    assert [m.get_attribute("textContent") for m in marks] == ["Łukasz", "Żółkiewski"]
