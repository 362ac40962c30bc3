"""The web page in a real browser (`duckgraph ui` as a child process on a real DuckDB file, driven in headless
Chromium as tests/e2e/test_ui_browser.py drives it): deleting a passage's document (asked first, cancelled or
done, a document another client deleted meanwhile, a long file in parts deleted whole from any part's passage),
planned facts marked as ended ones are, and names in the page's own notices and questions, and in the tools' errors
it shows, isolated, so a right-to-left name keeps its place in the sentence.

The embedder is the hashing fake of tests/fakes.py: what is checked here is the page, the tools and the file."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import part_title
from tests.e2e.test_ui_browser import (  # noqa: F401 (browser: a fixture)
    answer_dialog,
    browser,
    notice,
    open_entity_page,
    post_tool,
    shown,
    wait_for,
)
from tests.e2e.test_ui_scripts_browser import PLACE, visit
from tests.e2e.ui_server import child_env, get_json, running_ui
from tests.fakes import HashingEmbedder

SALARY = "Priya Raman's salary is 184,000 dollars a year."
QUERY = "salary 184,000 dollars"
DAVID = "דוד כהן"  # Hebrew
SARAH = "שרה לוי"
WORKS_WITH = "עובד עם"  # Hebrew: works with


@pytest.fixture
def ui(tmp_path: Path) -> Iterator[str]:
    path = tmp_path / "documents.duckdb"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_documents([DocumentInput(id="hr-note-17", title="HR note", text=SALARY),
                          DocumentInput(id="roadmap", title="Roadmap",
                                        text="Billing moves to Kafka in May, salary reviews in June.")])
        kb.add_knowledge_graph(
            [NodeInput(name="Priya Raman", type="Person", source_ids=["hr-note-17"]),
             NodeInput(name="Kafka", type="Technology", source_ids=["roadmap"]),
             NodeInput(name="Dana", type="Person"), NodeInput(name=DAVID, type="Person"),
             NodeInput(name=SARAH, type="Person"), NodeInput(name="Alice", type="Person")]
            + [NodeInput(name=n, type="Organization") for n in ("Acme", "Globex", "Umbrella")],
            [EdgeInput(source="Dana", target="Acme", type="WORKS_AT", valid_from="2099-01-01"),  # planned
             EdgeInput(source="Dana", target="Globex", type="ADVISES", valid_from="2001-01-01"),  # holds now
             EdgeInput(source="Dana", target="Umbrella", type="FOUNDED", valid_from="2001-01-01",
                       valid_until="2002-01-01"),  # ended
             EdgeInput(source=DAVID, target=SARAH, type=WORKS_WITH)])
    with running_ui(path, tmp_path / "ui.log", child_env(tmp_path / "home", fake_embedder=True)) as url:
        yield url


def searched_documents(url: str) -> list[str]:
    return [p["document_id"] for p in get_json(f"{url}api/search?{urllib.parse.urlencode({'q': QUERY})}")["passages"]]


def passage_of(driver, document: str):
    return driver.find_elements(By.CSS_SELECTOR, f'#passages article.passage[data-document="{document}"]')


def test_a_passages_document_is_deleted_after_a_confirmation(ui: str, browser) -> None:  # noqa: F811
    assert "hr-note-17" in searched_documents(ui)
    visit(browser, ui, f"#/search?{urllib.parse.urlencode({'q': QUERY})}")
    article = wait_for(browser, lambda d: passage_of(d, "hr-note-17"), "the HR note's passage")[0]

    # Cancelled (Cancel focused, as for every destructive action): nothing changes.
    article.find_element(By.CSS_SELECTOR, ".delete-document").click()
    question = shown(browser, "#dialog-body").text
    assert "HR note (hr-note-17)" in question and "cannot be undone" in question
    assert browser.switch_to.active_element.get_attribute("id") == "dialog-cancel"
    answer_dialog(browser, ok=False)
    assert passage_of(browser, "hr-note-17") and "hr-note-17" in searched_documents(ui)
    assert get_json(f"{ui}api/overview")["stats"]["documents"] == 2

    # Confirmed: the tool's counts are said, and the same search, drawn again, no longer has it.
    passage_of(browser, "hr-note-17")[0].find_element(By.CSS_SELECTOR, ".delete-document").click()
    answer_dialog(browser)
    assert notice(browser, "Deleted the document") == ("Deleted the document HR note (hr-note-17), with 1 entity and "
                                                       "0 relations that only it supported.")
    assert "error" not in browser.find_element(By.ID, "notice").get_attribute("class")
    wait_for(browser, lambda d: not passage_of(d, "hr-note-17") and passage_of(d, "roadmap"),
             "the search again, without the deleted document")
    assert searched_documents(ui) == ["roadmap"]
    assert get_json(f"{ui}api/overview")["stats"]["documents"] == 1
    with pytest.raises(urllib.error.HTTPError) as gone:  # the entity only that document supported went with it
        get_json(f"{ui}api/entity?{urllib.parse.urlencode({'name': 'Priya Raman'})}")
    assert gone.value.code == 404


def test_a_document_deleted_meanwhile_is_refused_as_such(ui: str, browser) -> None:  # noqa: F811
    # Deleted by another client before the click: nothing to ask about.
    visit(browser, ui, "#/entity?name=Kafka")
    open_entity_page(browser, "Kafka")
    button = shown(browser, '#entity-passages article[data-document="roadmap"] .delete-document')
    post_tool(ui, "delete_documents", {"ids": ["roadmap"]})  # another client
    button.click()
    assert notice(browser, "Nothing was deleted") == ("Nothing was deleted: there is no document Roadmap (roadmap) "
                                                      "any more (deleted meanwhile).")
    assert "error" in browser.find_element(By.ID, "notice").get_attribute("class")
    assert not browser.find_element(By.ID, "dialog").get_attribute("open")
    assert get_json(f"{ui}api/overview")["stats"]["documents"] == 1

    # Deleted while the question is asked: the tool found nothing, and the page says so.
    visit(browser, ui, f"#/entity?{urllib.parse.urlencode({'name': 'Priya Raman'})}")
    open_entity_page(browser, "Priya Raman")
    shown(browser, '#entity-passages article[data-document="hr-note-17"] .delete-document').click()
    shown(browser, "#dialog[open]")
    post_tool(ui, "delete_documents", {"ids": ["hr-note-17"]})
    answer_dialog(browser)
    assert notice(browser, "Nothing was deleted") == ("Nothing was deleted: there is no document HR note "
                                                      "(hr-note-17) any more (deleted meanwhile).")
    assert get_json(f"{ui}api/overview")["stats"]["documents"] == 0


def test_planned_facts_are_marked_in_the_search_and_on_the_entitys_page(ui: str, browser) -> None:  # noqa: F811
    visit(browser, ui, f"#/search?{urllib.parse.urlencode({'q': 'Dana Acme Globex Umbrella', 'history': '1'})}")

    def fact(target: str):
        return wait_for(browser, lambda d: [li for li in d.find_elements(By.CSS_SELECTOR, "#facts li")
                                            if target in li.text], f"the fact of {target}")[0]

    def tags(element) -> list[str]:
        return [t.text for t in element.find_elements(By.CSS_SELECTOR, ".ended-tag, .planned-tag")]

    acme, globex, umbrella = fact("Acme"), fact("Globex"), fact("Umbrella")
    assert acme.get_attribute("class") == "fact planned" and tags(acme) == ["planned"]
    assert acme.find_element(By.CSS_SELECTOR, ".period").text == "from 2099-01-01"
    assert globex.get_attribute("class") == "fact" and tags(globex) == []
    assert globex.find_element(By.CSS_SELECTOR, ".period").text == "since 2001-01-01"
    assert umbrella.get_attribute("class") == "fact ended" and tags(umbrella) == ["ended"]
    assert ", 1 ended, 1 planned)" in browser.find_element(By.CSS_SELECTOR, "#facts h2").text
    drawn = wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#search-graph g.edge.planned"),
                     "the planned fact drawn")
    assert len(drawn) == 1 and "WORKS_AT" in drawn[0].get_attribute("textContent")

    # As of a day after it began, it is no longer planned.
    visit(browser, ui, f"#/search?{urllib.parse.urlencode({'q': 'Dana Acme', 'as_of': '2099-06-01'})}")
    acme = fact("Acme")
    assert acme.get_attribute("class") == "fact" and tags(acme) == []

    visit(browser, ui, "#/entity?name=Dana")
    open_entity_page(browser, "Dana")
    rows = {r.find_elements(By.CSS_SELECTOR, "td")[2].text: r
            for r in browser.find_elements(By.CSS_SELECTOR, "#relations tr.relation")}
    assert rows["Acme"].get_attribute("class") == "relation planned" and tags(rows["Acme"]) == ["planned"]
    assert rows["Acme"].find_element(By.CSS_SELECTOR, ".period").text == "from 2099-01-01"
    assert rows["Globex"].get_attribute("class") == "relation" and tags(rows["Globex"]) == []


def in_line(driver, element, pieces: list[str]) -> None:
    """`pieces` are drawn left to right in the order written (none swapped by a right-to-left neighbour)."""
    places = [driver.execute_script(PLACE, element, piece) for piece in pieces]
    assert None not in places, places
    for (_, right), (left, _), names in zip(places, places[1:], zip(pieces, pieces[1:])):
        assert right <= left + 0.5, (names, places)


def test_names_in_notices_and_questions_keep_their_place(ui: str, browser) -> None:  # noqa: F811
    david = get_json(f"{ui}api/entity?{urllib.parse.urlencode({'name': DAVID})}")["entity"]
    stored_type = david["relations"][0]["type"]
    visit(browser, ui, f"#/entity?{urllib.parse.urlencode({'name': DAVID})}")
    open_entity_page(browser, DAVID)

    # The question: "Delete דוד כהן —עובד_עם→ שרה לוי?", source, type and target in that order.
    shown(browser, "#relations .delete-relation").click()
    body = shown(browser, "#dialog-body p")
    in_line(browser, body, ["Delete", DAVID, stored_type, SARAH, "cannot be undone"])
    answer_dialog(browser)
    box = wait_for(browser, lambda d: "Deleted" in d.find_element(By.ID, "notice").text
                   and d.find_element(By.ID, "notice"), "the notice of the deleted relation")
    assert [b.text for b in box.find_elements(By.TAG_NAME, "bdi")] == [DAVID, stored_type, SARAH]
    in_line(browser, box, ["Deleted", DAVID, stored_type, SARAH])

    # A list of names: "Merged דוד כהן, שרה לוי into Alice." keeps the list's order.
    visit(browser, ui, "#/entity?name=Alice")
    open_entity_page(browser, "Alice")
    browser.find_element(By.ID, "merge").click()
    answer_dialog(browser, f"{DAVID}\n{SARAH}")
    in_line(browser, shown(browser, "#dialog-body p"), ["Merge", DAVID, SARAH, "Alice"])
    answer_dialog(browser)
    box = wait_for(browser, lambda d: "Merged" in d.find_element(By.ID, "notice").text
                   and d.find_element(By.ID, "notice"), "the notice of the merge")
    assert [b.text for b in box.find_elements(By.TAG_NAME, "bdi")] == [DAVID, SARAH, "Alice"]
    in_line(browser, box, ["Merged", DAVID, SARAH, "Alice"])


def tool_error(url: str, name: str, arguments: dict) -> dict:
    """The API's answer to a tool call it refuses (400)."""
    call = urllib.request.Request(f"{url}api/tool/{name}", data=json.dumps({"arguments": arguments}).encode(),
                                  headers={"content-type": "application/json"}, method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(call, timeout=120)
    assert refused.value.code == 400
    return json.load(refused.value)


def quoted_values(answer: dict) -> list[str]:
    return ["".join(list(answer["error"])[start:end]) for start, end in answer["quoted"]]


def test_the_names_a_tools_error_quotes_keep_their_place(ui: str, browser) -> None:  # noqa: F811
    # The API places the values an error quotes, as the tools quote them (Python's repr: a name with an apostrophe
    # in double quotes); the apostrophes of the sentence itself are not taken for quotes.
    clash = tool_error(ui, "update_entity", {"name": SARAH, "new_name": DAVID})
    assert clash["error"].endswith(f"an entity named '{DAVID}' exists already; to combine the two use "
                                   f"merge_entities(sources=['{SARAH}'], target='{DAVID}')")
    assert quoted_values(clash) == [DAVID, SARAH, DAVID]
    missing = tool_error(ui, "merge_entities", {"sources": ["O'Brien", 'say "hi"', "Bob's"], "target": "Alice"})
    assert "no entity named " + ", ".join(map(repr, ["O'Brien", 'say "hi"', "Bob's"])) in missing["error"], missing
    assert quoted_values(missing)[:3] == ["O'Brien", 'say "hi"', "Bob's"]

    # A merge of two names that do not exist: "no entity named 'משה', 'רחל'" keeps its list's order (drawn as one
    # run, the right-to-left run would put רחל first). Refused before its confirmation, which would say what they
    # bring along.
    moshe, rachel = "משה", "רחל"
    visit(browser, ui, "#/entity?name=Alice")
    open_entity_page(browser, "Alice")
    browser.find_element(By.ID, "merge").click()
    answer_dialog(browser, f"{moshe}\n{rachel}")
    box = wait_for(browser, lambda d: "no entity named" in d.find_element(By.ID, "notice").text
                   and d.find_element(By.ID, "notice"), "the merge's error")
    assert "error" in box.get_attribute("class")
    assert [b.text for b in box.find_elements(By.TAG_NAME, "bdi")][:2] == [moshe, rachel]
    in_line(browser, box, ["no entity named", moshe, rachel])

    # A rename to a name taken: the error names both, each in its place.
    visit(browser, ui, f"#/entity?{urllib.parse.urlencode({'name': SARAH})}")
    open_entity_page(browser, SARAH)
    browser.find_element(By.ID, "rename").click()
    answer_dialog(browser, DAVID)
    box = wait_for(browser, lambda d: "exists already" in d.find_element(By.ID, "notice").text
                   and d.find_element(By.ID, "notice"), "the rename's error")
    assert [b.text for b in box.find_elements(By.TAG_NAME, "bdi")] == [DAVID, SARAH, DAVID]
    assert box.get_attribute("textContent") == clash["error"]  # the tool's text, as it said it
    in_line(browser, box, ["an entity named", DAVID, "exists already"])
    in_line(browser, box, ["sources", SARAH, "target"])


LONG_FILE = "notes/report.md"


@pytest.fixture
def parts_ui(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A file ingested in three parts (`<id>`, `<id>#part-2`, `<id>#part-3`, titled as ingest titles them), another
    document, and one whose own id ends like a part's though no file of that id is stored; the UI's address and how
    many passages the three parts hold."""
    path = tmp_path / "parts.duckdb"
    texts = ["The quarterly report opens with revenue.", "Zeppelin Logistics signed the freight contract.",
             "The report closes with hiring plans."]
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_documents([DocumentInput(id=LONG_FILE if n == 1 else f"{LONG_FILE}#part-{n}",
                                        title=part_title("Report", n, 3), text=text)
                          for n, text in enumerate(texts, start=1)]
                         + [DocumentInput(id="roadmap", title="Roadmap", text="Billing moves to Kafka in May."),
                            DocumentInput(id="scratch#part-2", title="Scratch", text="A stray note on zeppelins.")])
        kb.add_knowledge_graph([NodeInput(name="Zeppelin Logistics", type="Organization",
                                          source_ids=[f"{LONG_FILE}#part-2"])], [])
        passages = len(kb.store.document_chunks("default", [LONG_FILE, f"{LONG_FILE}#part-2", f"{LONG_FILE}#part-3"]))
    with running_ui(path, tmp_path / "ui.log", child_env(tmp_path / "home", fake_embedder=True)) as url:
        yield url, passages


def test_a_later_parts_passage_deletes_the_whole_document(parts_ui: tuple[str, int], browser) -> None:  # noqa: F811
    ui, passages = parts_ui
    parts = [LONG_FILE, f"{LONG_FILE}#part-2", f"{LONG_FILE}#part-3"]
    document = get_json(f"{ui}api/document?{urllib.parse.urlencode({'id': parts[1]})}")
    assert document == {"id": LONG_FILE, "title": "Report (part 1 of 3)", "parts": parts, "passages": passages}
    # An id that only looks like a part's (no file "scratch" is stored) is its own document.
    alone = get_json(f"{ui}api/document?{urllib.parse.urlencode({'id': 'scratch#part-2'})}")
    assert (alone["id"], alone["parts"]) == ("scratch#part-2", ["scratch#part-2"])

    visit(browser, ui, f"#/entity?{urllib.parse.urlencode({'name': 'Zeppelin Logistics'})}")
    open_entity_page(browser, "Zeppelin Logistics")
    shown(browser, f'#entity-passages article[data-document="{parts[1]}"] .delete-document').click()
    question = shown(browser, "#dialog-body").text
    assert question == (f"Delete the document Report (part 1 of 3) ({LONG_FILE}), a long file stored in 3 parts, "
                        f"with all their {passages} passages, and the entities and relations that only it supports? "
                        "This cannot be undone.")
    answer_dialog(browser)
    assert notice(browser, "Deleted the document") == (
        f"Deleted the document Report (part 1 of 3) ({LONG_FILE}) and its 2 later parts, with 1 entity and "
        "0 relations that only it supported.")
    overview = wait_for(browser, lambda d: get_json(f"{ui}api/overview"), "the overview")
    assert overview["stats"]["documents"] == 2  # the roadmap and the scratch note stay
    with pytest.raises(urllib.error.HTTPError) as gone:
        get_json(f"{ui}api/document?{urllib.parse.urlencode({'id': parts[2]})}")
    assert gone.value.code == 404
