"""The web page while another client (an agent) writes to the memory, in a real browser (`duckgraph ui` as a child
process on a real DuckDB file, driven in headless Chromium as tests/e2e/test_ui_browser.py drives it): an Edit never
replaces what was written since the page was drawn, even just before its save, and a refused save keeps what was
typed, says what changed and saves it over the entity as stored now; the start page counts again, and a large
entity's page keeps its place when a relation far down its list is deleted or ended.

The embedder is the hashing fake of tests/fakes.py: what is checked here is the page, the tools and the file."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.test_ui_browser import (  # noqa: F401 (browser: a fixture)
    answer_dialog,
    browser,
    entity_count,
    notice,
    open_entity_page,
    post_tool,
    shown,
    wait_for,
)
from tests.e2e.test_ui_documents_browser import tool_error
from tests.e2e.test_ui_scripts_browser import visit
from tests.e2e.ui_server import child_env, get_json, running_ui
from tests.fakes import HashingEmbedder

JON = "Jonathan Smithers"
HUB = "Noah Novak"
PARTNERS = [f"Partner {i:03d}" for i in range(120)]
READER = "Greta Kimura-Sato"
NOTES = [f"note-kim-{i:02d}" for i in range(14)]


@pytest.fixture
def ui(tmp_path: Path) -> Iterator[str]:
    path = tmp_path / "meanwhile.duckdb"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_documents([DocumentInput(id=n, title=f"Kim note {i}",
                                        text=f"Meeting {i}: {READER} explained the billing migration step {i}.")
                          for i, n in enumerate(NOTES)])
        kb.add_knowledge_graph(
            [NodeInput(name=JON, type="Person", observations=["Likes coffee.", "Works in billing."]),
             NodeInput(name=READER, type="Person", source_ids=NOTES), NodeInput(name=HUB, type="Person")]
            + [NodeInput(name=p, type="Organization") for p in PARTNERS],
            [EdgeInput(source=HUB, target=p, type="PARTNERS_WITH") for p in PARTNERS])
    with running_ui(path, tmp_path / "ui.log", child_env(tmp_path / "home", fake_embedder=True)) as url:
        yield url


def stored(url: str, name: str = JON) -> dict:
    return get_json(f"{url}api/entity?{urllib.parse.urlencode({'name': name})}")["entity"]


def open_edit(driver) -> None:
    driver.find_element(By.ID, "edit").click()
    shown(driver, "#dialog[open]")


def replace(driver, field: str, text: str) -> None:
    element = driver.find_element(By.ID, field)
    element.clear()
    element.send_keys(text)


def test_an_edit_never_replaces_what_another_client_wrote_meanwhile(ui: str, browser) -> None:  # noqa: F811
    visit(browser, ui, f"#/entity?{urllib.parse.urlencode({'name': JON})}")
    open_entity_page(browser, JON)

    # Written after the page was drawn: the dialog shows it (read when it opens), and the save keeps it.
    post_tool(ui, "update_entity", {"name": JON, "properties": {"email": "jon@acme.example", "team": "billing"},
                                    "aliases": ["J. Smithers"]})
    open_edit(browser)
    assert browser.find_element(By.ID, "edit-aliases").get_attribute("value") == "J. Smithers"
    assert '"email": "jon@acme.example"' in browser.find_element(By.ID, "edit-properties").get_attribute("value")
    replace(browser, "edit-properties", '{"email": "jon@acme.example", "team": "invoicing"}')
    replace(browser, "edit-aliases", "J. Smithers\nJonny")
    answer_dialog(browser)
    notice(browser, "Saved")
    entity = stored(ui)
    assert entity["properties"] == {"email": "jon@acme.example", "team": "invoicing"}
    assert entity["aliases"] == ["J. Smithers", "Jonny"]

    # Written while the dialog is open: nothing is saved (the dialog's aliases would replace the new ones); the
    # dialog stays open and says what changed, the aliases showing the one added meanwhile with the typed ones.
    # Cancelled, the page shows the new values.
    open_entity_page(browser, JON)
    open_edit(browser)
    post_tool(ui, "update_entity", {"name": JON, "aliases": ["J. Smithers", "Jonny", "Jon S."]})
    replace(browser, "edit-aliases", "J. Smithers\nJohnny")
    save_refused(browser)
    assert problem(browser) == (f"Not saved: {JON} changed meanwhile (another client wrote to it). Stored now:\n"
                                "Aliases: added Jon S. (you changed it too: Save makes your changes to it as it is "
                                "now)\nWhat you typed is kept, and the fields you left alone show what is stored "
                                "now: Save applies your changes to the entity as it is now.")
    assert browser.find_element(By.ID, "edit-aliases").get_attribute("value") == "J. Smithers\nJon S.\nJohnny"
    assert stored(ui)["aliases"] == ["J. Smithers", "Jonny", "Jon S."]
    answer_dialog(browser, ok=False)
    wait_for(browser, lambda d: "Jon S." in d.find_element(By.CSS_SELECTOR, ".aliases").text, "the new alias")
    assert stored(ui)["aliases"] == ["J. Smithers", "Jonny", "Jon S."]
    # Left unsaved, the focus is on Edit again (of the page drawn again).
    wait_for(browser, lambda d: d.switch_to.active_element == d.find_element(By.ID, "edit"), "the focus on Edit")


def save_refused(driver) -> None:
    """Save, and wait for the dialog, still open, to say why nothing was saved."""
    driver.find_element(By.ID, "dialog-ok").click()
    wait_for(driver, lambda d: d.find_element(By.ID, "edit-problem").text.startswith("Not saved")
             and d.find_element(By.ID, "dialog-ok").is_enabled(), "the dialog saying why nothing was saved")
    assert driver.find_element(By.ID, "dialog").get_attribute("open") is not None


def problem(driver) -> str:
    return driver.find_element(By.ID, "edit-problem").text


def observation_fields(driver) -> list[str]:
    return [f.get_attribute("value") for f in driver.find_elements(By.CSS_SELECTOR, "#edit-observations textarea")]


def test_a_refused_edit_keeps_what_was_typed_and_saves_it_over_what_is_stored_now(ui: str,
                                                                                  browser) -> None:  # noqa: F811
    post_tool(ui, "update_entity", {"name": JON, "description": "Billing engineer.", "aliases": ["J. Smithers"],
                                    "properties": {"team": "billing"}})
    visit(browser, ui, f"#/entity?{urllib.parse.urlencode({'name': JON})}")
    open_entity_page(browser, JON)
    open_edit(browser)
    # Another client writes to the fields the person leaves alone, and to one they change.
    post_tool(ui, "update_entity", {"name": JON, "description": "Head of billing.",
                                    "aliases": ["J. Smithers", "Jon S."],
                                    "properties": {"team": "payments", "email": "jon@acme.example"}})
    replace(browser, "edit-type", "Engineer")
    replace(browser, "edit-properties", '{"team": "invoicing", "desk": 4}')
    replace(browser, "edit-aliases", "Jonny")
    save_refused(browser)
    said = problem(browser)
    assert "Description: now Head of billing." in said
    assert "Aliases: added Jon S. (you changed it too: Save makes your changes to it as it is now)\n" in said
    # Both changed the team: both values said, the typed one kept.
    assert ("Properties: team now payments, was billing (you changed it too, to invoicing: Save keeps yours); email "
            "added: jon@acme.example (you changed it too: Save makes your changes to it as it is now)" in said)
    # What was typed stays, made to what is stored now; the fields left alone show what is stored now.
    assert browser.find_element(By.ID, "edit-type").get_attribute("value") == "Engineer"
    assert json.loads(browser.find_element(By.ID, "edit-properties").get_attribute("value")) == {
        "team": "invoicing", "email": "jon@acme.example", "desk": 4}
    assert browser.find_element(By.ID, "edit-description").get_attribute("value") == "Head of billing."
    assert browser.find_element(By.ID, "edit-aliases").get_attribute("value") == "Jon S.\nJonny"
    assert stored(ui)["type"] == "Person"

    # Saved again: the typed changes are made to the entity as it is now, and what the other client wrote stays.
    answer_dialog(browser)
    notice(browser, "Saved")
    entity = stored(ui)
    assert (entity["type"], entity["properties"]) == ("Engineer", {"team": "invoicing", "email": "jon@acme.example",
                                                                   "desk": 4})
    assert (entity["description"], entity["aliases"]) == ("Head of billing.", ["Jon S.", "Jonny"])


def test_an_observation_edited_while_another_client_removed_it_is_kept_as_typed(ui: str, browser) -> None:  # noqa: F811
    visit(browser, ui, f"#/entity?{urllib.parse.urlencode({'name': JON})}")
    open_entity_page(browser, JON)
    open_edit(browser)
    post_tool(ui, "update_entity", {"name": JON, "remove_observations": ["Likes coffee."],
                                    "add_observations": ["Prefers green tea since 2025."]})
    field = next(f for f in browser.find_elements(By.CSS_SELECTOR, "#edit-observations textarea")
                 if f.get_attribute("value") == "Likes coffee.")
    field.send_keys(" Black.")
    # Refused plainly (not with the tool's "has no observation" error), the typed text kept as one to add.
    save_refused(browser)
    assert ('Observations: added \u201cPrefers green tea since 2025.\u201d; removed \u201cLikes coffee.\u201d'
            in problem(browser))
    assert observation_fields(browser) == ["Works in billing.", "Prefers green tea since 2025.", "Likes coffee. Black.",
                                           ""]
    assert sorted(stored(ui)["observations"]) == ["Prefers green tea since 2025.", "Works in billing."]
    answer_dialog(browser)
    notice(browser, "Saved")
    assert sorted(stored(ui)["observations"]) == ["Likes coffee. Black.", "Prefers green tea since 2025.",
                                                  "Works in billing."]


def test_an_entity_merged_meanwhile_is_never_saved_over_the_one_it_was_merged_into(ui: str,
                                                                                     browser) -> None:  # noqa: F811
    visit(browser, ui, f"#/entity?{urllib.parse.urlencode({'name': JON})}")
    open_entity_page(browser, JON)
    open_edit(browser)
    # Its name now names the entity it was merged into: an alias of hers, read again by that name.
    post_tool(ui, "merge_entities", {"sources": [JON], "target": READER})
    reader = stored(ui, READER)
    replace(browser, "edit-type", "Engineer")
    replace(browser, "edit-aliases", "Jonny")
    save_refused(browser)
    said = (f"Not saved: {JON} was merged into {READER} meanwhile (its name now names that entity). Nothing was "
            "saved; what you typed is still here to copy.")
    assert problem(browser) == said
    assert browser.switch_to.active_element == browser.find_element(By.ID, "edit-problem")
    # What was typed stays, and Save again saves nothing onto her.
    assert browser.find_element(By.ID, "edit-aliases").get_attribute("value") == "Jonny"
    save_refused(browser)
    assert problem(browser) == said
    assert stored(ui, READER) == reader


def test_an_entity_renamed_meanwhile_is_still_the_one_edited(ui: str, browser) -> None:  # noqa: F811
    visit(browser, ui, f"#/entity?{urllib.parse.urlencode({'name': JON})}")
    open_entity_page(browser, JON)
    open_edit(browser)
    post_tool(ui, "update_entity", {"name": JON, "new_name": "Jon Smithers"})
    replace(browser, "edit-description", "Billing engineer.")
    save_refused(browser)
    assert "Name: now Jon Smithers, was Jonathan Smithers" in problem(browser)
    answer_dialog(browser)
    notice(browser, "Saved Jon Smithers")
    assert stored(ui, "Jon Smithers")["description"] == "Billing engineer."


#: Another client's write, made by the page's own fetch just before the page's save is sent: after the dialog's
#: last read, before the server runs the save.
WRITE_BEFORE_THE_SAVE = """
const [write] = arguments;
const send = window.fetch;
window.fetch = async (url, options) => {
  if (String(url).endsWith("/api/tool/update_entity") && !window.wroteMeanwhile) {
    window.wroteMeanwhile = true;
    await send("/api/tool/update_entity", { method: "POST", headers: { "content-type": "application/json" },
                                           body: JSON.stringify({ arguments: write }) });
  }
  return send(url, options);
};
"""


def test_a_write_just_before_the_save_is_never_replaced(ui: str, browser) -> None:  # noqa: F811
    # The server checks that the entity is still as the dialog read it, in the same step as the write: a check
    # of the page's own, by a read just before the save, would leave this moment open.
    post_tool(ui, "update_entity", {"name": JON, "aliases": ["J. Smithers"]})
    visit(browser, ui, f"#/entity?{urllib.parse.urlencode({'name': JON})}")
    open_entity_page(browser, JON)
    open_edit(browser)
    browser.execute_script(WRITE_BEFORE_THE_SAVE, {"name": JON, "aliases": ["J. Smithers", "Jon S."]})
    replace(browser, "edit-aliases", "J. Smithers\nJonny")
    browser.find_element(By.ID, "dialog-ok").click()
    wait_for(browser, lambda d: d.execute_script("return window.wroteMeanwhile") and (
        "Saved" in d.find_element(By.ID, "notice").text or problem(d).startswith("Not saved")), "the save answered")
    assert stored(ui)["aliases"] == ["J. Smithers", "Jon S."]
    assert browser.find_element(By.ID, "dialog").get_attribute("open") is not None
    assert "Aliases: added Jon S." in problem(browser)
    # The typed alias added to those stored now: saved, neither is lost.
    assert browser.find_element(By.ID, "edit-aliases").get_attribute("value") == "J. Smithers\nJon S.\nJonny"
    answer_dialog(browser)
    notice(browser, "Saved")
    assert stored(ui)["aliases"] == ["J. Smithers", "Jon S.", "Jonny"]


def test_a_tools_error_is_its_own_text(ui: str) -> None:
    # The MCP SDK's "Error executing tool update_entity: " is left out: the page says the tool's own words.
    refused = tool_error(ui, "update_entity", {"name": JON, "remove_observations": ["Likes tea."]})
    assert refused["error"].startswith(f"'{JON}' has no observation 'Likes tea.'"), refused
    assert ["".join(list(refused["error"])[a:b]) for a, b in refused["quoted"]][:2] == [JON, "Likes tea."]


def test_the_start_page_counts_again_when_shown(ui: str, browser) -> None:  # noqa: F811
    visit(browser, ui, "#/")
    shown(browser, "#counts")
    before = entity_count(browser)
    post_tool(ui, "delete_entities", {"names": [PARTNERS[-1]]})  # another client, meanwhile
    shown(browser, "#most-connected a.entity-link").click()
    open_entity_page(browser, HUB)
    browser.find_element(By.CSS_SELECTOR, "a.brand").click()
    wait_for(browser, lambda d: entity_count(d) == before - 1, "the start page counting the deleted entity")


def stored_relations(url: str) -> list[dict]:
    """The hub's relations as stored, read 50 at a time as the tool lists them."""
    relations, offset = [], 0
    while offset is not None:
        found = post_tool(url, "get_entities", {"names": [HUB], "relations_offset": offset})["entities"][0]
        relations += found["relations"]
        offset = found["next_relations_offset"]
    return relations


def relation_rows(driver) -> list:
    return driver.find_elements(By.CSS_SELECTOR, "#relations tr.relation")


def target_of(row) -> str:
    return row.find_elements(By.TAG_NAME, "td")[2].text


def test_a_relation_far_down_is_deleted_and_ended_in_place(ui: str, browser) -> None:  # noqa: F811
    visit(browser, ui, f"#/entity?{urllib.parse.urlencode({'name': HUB})}")
    open_entity_page(browser, HUB)
    for listed in (100, 120):
        shown(browser, "#more-relations").click()
        wait_for(browser, lambda d, n=listed: len(relation_rows(d)) == n, f"{listed} relations")

    # Deleted: its row goes, the others stay listed, the page keeps its place and the focus goes to the next row.
    rows = relation_rows(browser)
    gone, after = target_of(rows[110]), target_of(rows[111])
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", rows[110])
    scrolled = browser.execute_script("return scrollY")
    rows[110].find_element(By.CSS_SELECTOR, ".delete-relation").click()
    answer_dialog(browser)
    notice(browser, "Deleted")
    wait_for(browser, lambda d: len(relation_rows(d)) == 119, "119 relations")
    assert gone not in [target_of(r) for r in relation_rows(browser)]
    assert browser.find_element(By.CSS_SELECTOR, "#relations h2").text == "Relations (119)"
    assert abs(browser.execute_script("return scrollY") - scrolled) < 200
    assert browser.switch_to.active_element == relation_rows(browser)[110].find_element(By.CSS_SELECTOR, "button")
    assert target_of(relation_rows(browser)[110]) == after
    assert gone not in [r["target"] for r in stored_relations(ui)] and len(stored_relations(ui)) == 119

    # Ended: the row stays, greyed with its period and without its buttons; the focus goes to the next row.
    rows = relation_rows(browser)
    ended, after = target_of(rows[100]), target_of(rows[101])
    rows[100].find_element(By.CSS_SELECTOR, ".end-relation").click()
    answer_dialog(browser, "2025-06-30")
    notice(browser, "Ended")
    row = wait_for(browser, lambda d: [r for r in d.find_elements(By.CSS_SELECTOR, "#relations tr.relation.ended")
                                       if target_of(r) == ended], "the ended row")[0]
    assert "to 2025-06-30" in row.text and not row.find_elements(By.TAG_NAME, "button")
    assert len(relation_rows(browser)) == 119
    assert next(r for r in stored_relations(ui) if r["target"] == ended)["valid_until"].startswith("2025-06-30")
    assert browser.switch_to.active_element == relation_rows(browser)[101].find_element(By.CSS_SELECTOR, "button")
    assert target_of(relation_rows(browser)[101]) == after


def test_the_buttons_of_rows_and_passages_name_what_they_act_on(ui: str, browser) -> None:  # noqa: F811
    # For a screen reader: otherwise one of a hundred identical "End" and "Delete" buttons.
    visit(browser, ui, f"#/entity?{urllib.parse.urlencode({'name': HUB})}")
    open_entity_page(browser, HUB)
    row = relation_rows(browser)[0]
    labels = [b.get_attribute("aria-label") for b in row.find_elements(By.TAG_NAME, "button")]
    assert labels == [f"End relation {HUB} PARTNERS_WITH {target_of(row)}",
                      f"Delete relation {HUB} PARTNERS_WITH {target_of(row)}"]
    visit(browser, ui, f"#/entity?{urllib.parse.urlencode({'name': READER})}")
    open_entity_page(browser, READER)
    article = shown(browser, "#entity-passages article.passage")
    assert article.find_element(By.CSS_SELECTOR, ".delete-document").get_attribute("aria-label") == (
        f"Delete document {article.get_attribute('data-document')}")


def test_every_passage_of_an_entity_is_reachable(ui: str, browser) -> None:  # noqa: F811
    visit(browser, ui, f"#/entity?{urllib.parse.urlencode({'name': READER})}")
    open_entity_page(browser, READER)

    def documents() -> list[str]:
        return [a.get_attribute("data-document")
                for a in browser.find_elements(By.CSS_SELECTOR, "#entity-passages article.passage")]

    assert len(documents()) == 10
    assert browser.find_element(By.CSS_SELECTOR, "#entity-passages h2").text == "Passages that mention it (10+)"
    shown(browser, "#more-passages").click()
    wait_for(browser, lambda d: len(documents()) == 14, "the next passages")
    assert sorted(documents()) == NOTES
    assert browser.find_element(By.CSS_SELECTOR, "#entity-passages h2").text == "Passages that mention it (14)"
    assert not browser.find_element(By.ID, "more-passages").is_displayed()
    # The API's pages, as the page reads them: each passage once, with the marks of the entity's name.
    first = get_json(f"{ui}api/passages?{urllib.parse.urlencode({'name': READER})}")
    rest = get_json(f"{ui}api/passages?{urllib.parse.urlencode({'name': READER, 'offset': first['next_offset']})}")
    assert (len(first["passages"]), first["next_offset"]) == (10, 10)
    assert (len(rest["passages"]), rest["next_offset"]) == (4, None)
    assert all(p["marks"] for p in rest["passages"])
    with pytest.raises(urllib.error.HTTPError) as refused:
        get_json(f"{ui}api/passages?{urllib.parse.urlencode({'name': READER, 'offset': -1})}")
    assert refused.value.code == 400 and json.load(refused.value)["error"] == "offset must be 0 or more, not -1"


def test_every_recent_change_is_reachable(ui: str, browser) -> None:  # noqa: F811
    visit(browser, ui, "#/")

    def rows() -> list[str]:
        return [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#recent-changes table.changes tr")]

    wait_for(browser, lambda d: len(rows()) == 30, "30 changes")
    # Written meanwhile: the list moves down (an update is two changes: the entity and its observation), and the
    # changes read again are not listed twice.
    post_tool(ui, "update_entity", {"name": JON, "add_observations": ["Moved to Lisbon."]})
    changes = post_tool(ui, "recent_changes", {"limit": 62})["changes"]
    assert [c["change"] for c in changes[:2]] == ["entity updated", "observations added"]
    shown(browser, "#more-changes").click()
    wait_for(browser, lambda d: len(rows()) == 58, "the next changes")
    assert len(set(rows())) == 58 and "Lisbon" not in " ".join(rows())
    assert [r.split(" ", 2)[:2] for r in rows()] == [str(c["at"]).replace("T", " ")[:19].split(" ")
                                                     for c in changes[2:60]]


def test_the_edit_dialog_for_a_keyboard_and_a_screen_reader(ui: str, browser) -> None:  # noqa: F811
    visit(browser, ui, f"#/entity?{urllib.parse.urlencode({'name': JON})}")
    open_entity_page(browser, JON)
    open_edit(browser)
    dialog = browser.find_element(By.ID, "dialog")
    # Named by its title, the focus on its first field; the properties' error read with the field.
    assert browser.find_element(By.ID, dialog.get_attribute("aria-labelledby")).text == f"Edit {JON}"
    assert browser.switch_to.active_element == browser.find_element(By.ID, "edit-type")
    replace(browser, "edit-properties", "{team")
    properties = browser.find_element(By.ID, "edit-properties")
    assert browser.find_element(By.ID, properties.get_attribute("aria-describedby")).text.startswith(
        "Properties: not valid JSON")
    # Left with Escape: the focus is on Edit again.
    properties.send_keys(Keys.ESCAPE)
    wait_for(browser, lambda d: d.find_element(By.ID, "dialog").get_attribute("open") is None, "the dialog closed")
    assert browser.switch_to.active_element == browser.find_element(By.ID, "edit")
