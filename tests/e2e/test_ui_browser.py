"""The web UI in a real browser: `duckgraph ui` as a child process on a real DuckDB file built with the real
default model (the demo's documents and graph, and one duplicate to merge), driven in headless Chromium through
Selenium and the system's chromedriver. Also while a `duckgraph serve` process holds the file.

Each view is saved as a PNG for a person to look at: in $DUCKGRAPH_UI_SCREENSHOTS when set, else in a folder of
the run's temporary directory (printed; pytest -s shows it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.ui_server import child_env, get_json, running_ui

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ready  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.model


def test_the_browser_is_installed() -> None:
    # Not a skip: a suite that ran without its browser would pass without testing the page at all.
    assert CHROMIUM and CHROMEDRIVER, "the browser tests need Chromium: apt-get install -y chromium chromium-driver"
WAIT_SECONDS = 60
DUPLICATE = {"name": "Steven Paul Jobs", "type": "Person", "observations": ["Born in San Francisco in 1955."]}
QUERY = "Who runs Apple and which products does the company design?"
WORK_NOTE = {"name": "Quarterly planning", "type": "Meeting", "description": "Planning of the next quarter."}


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("DUCKGRAPH_UI_SCREENSHOTS")
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("ui-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots of the web UI: {folder}")
    return folder


@pytest.fixture
def demo_db(tmp_path: Path, minilm) -> Path:
    """The demo's documents, entities and relations, and a duplicate of Steve Jobs, stored with the real model."""
    data = json.loads(resources.files("duckgraph.core").joinpath("data/demo.json").read_text(encoding="utf-8"))
    path = tmp_path / "ui.duckdb"
    with KnowledgeBase(DuckDBStore(path), minilm) as kb:
        kb.add_documents([DocumentInput(**d) for d in data["documents"]])
        kb.add_knowledge_graph([NodeInput(**n) for n in data["nodes"]] + [NodeInput(**DUPLICATE)],
                               [EdgeInput(**e) for e in data["edges"]])
        kb.add_knowledge_graph([NodeInput(**WORK_NOTE)], [], namespace="work")  # a second memory in the file
    return path


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1400,1000", "--force-device-scale-factor=1"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver, condition, what: str):
    try:
        # The page redraws parts of itself: an element read between two redraws is tried again, not a failure.
        return WebDriverWait(driver, WAIT_SECONDS, ignored_exceptions=(StaleElementReferenceException,)).until(condition)
    except TimeoutException:
        raise AssertionError(f"the page never showed {what}; it shows:\n{driver.find_element(By.TAG_NAME, 'body').text}")


def shown(driver, css: str):
    return wait_for(driver, ready.visibility_of_element_located((By.CSS_SELECTOR, css)), css)


def settled_graph(driver, css: str):
    return wait_for(driver, ready.presence_of_element_located((By.CSS_SELECTOR, f"{css} svg[data-settled]")),
                    f"a settled graph in {css}")


def search(driver, query: str) -> None:
    box = shown(driver, "#q")
    box.clear()
    box.send_keys(query)
    driver.find_element(By.CSS_SELECTOR, "#search-form button").click()
    shown(driver, "#passages")


def answer_dialog(driver, text: str | None = None, *, ok: bool = True) -> None:
    shown(driver, "#dialog[open]")
    if text is not None:
        field = driver.find_element(By.ID, "dialog-input")
        field.clear()
        field.send_keys(text)
    asked = driver.find_element(By.ID, "dialog-title").text
    driver.find_element(By.ID, "dialog-ok" if ok else "dialog-cancel").click()
    # Closed, or already asking the next question (a merge asks for the names, then for a confirmation).
    wait_for(driver, lambda d: not d.find_element(By.ID, "dialog").get_attribute("open")
             or d.find_element(By.ID, "dialog-title").text != asked, "the dialog answered")


def entity_count(driver) -> int:
    """The overview's count of entities (the first of its counts)."""
    found = driver.find_elements(By.CSS_SELECTOR, "#counts dd")
    return int(found[0].text.replace(",", "")) if found else -1


def open_entity_page(driver, name: str) -> None:
    wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f'.entity[data-entity="{name}"]'), f"{name}'s page")


def test_browse_search_open_and_merge(demo_db: Path, tmp_path: Path, browser, screenshots: Path) -> None:
    with running_ui(demo_db, tmp_path / "ui.log", child_env(tmp_path / "home")) as url:
        browser.get(url)
        shown(browser, "#counts")
        assert entity_count(browser) == 24  # the demo's 23 and the duplicate
        assert "Apple Inc." in shown(browser, "#most-connected").text
        shown(browser, "#recent-changes > :not(h2)")  # a view of a tool, or "not available" without it
        shown(browser, "#communities > :not(h2)")
        tools = get_json(f"{url}api/overview")["tools"]
        if "recent_changes" in tools:
            wait_for(browser, lambda d: "Steven Paul Jobs" in d.find_element(By.ID, "recent-changes").text,
                     "the entities created among the recent changes")
        if "build_communities" in tools:
            check_communities(browser, url, screenshots)
            browser.get(url)
            shown(browser, "#communities article.report")
        browser.save_screenshot(str(screenshots / "browse.png"))

        # Search: the drawing holds exactly the entities the search returned; passages mark the query's words.
        search(browser, QUERY)
        graph = settled_graph(browser, "#search-graph")
        result = get_json(f"{url}api/search?{urllib.parse.urlencode({'q': QUERY, 'max_nodes': 60})}")
        expected = {n["name"] for n in result["anchors"] + result["nodes"]}
        drawn = {g.get_attribute("data-name") for g in browser.find_elements(By.CSS_SELECTOR, "#search-graph g.node")}
        assert drawn == expected and len(expected) > 3
        assert graph.get_attribute("data-nodes") == str(len(expected))
        anchors = {g.get_attribute("data-name") for g in browser.find_elements(By.CSS_SELECTOR, "#search-graph g.anchor")}
        assert anchors == {a["name"] for a in result["anchors"]}
        assert len(browser.find_elements(By.CSS_SELECTOR, "#search-graph g.edge")) == len(result["edges"])
        marks = {m.text.casefold() for m in browser.find_elements(By.CSS_SELECTOR, "#passages mark")}
        assert {"apple", "design"} & marks, marks
        browser.save_screenshot(str(screenshots / "search.png"))

        # Zoom and pan change the view's transform; a click on a node opens its entity.
        viewport = browser.find_element(By.CSS_SELECTOR, "#search-graph .viewport")
        before = viewport.get_attribute("transform")
        browser.find_element(By.CSS_SELECTOR, "#search-graph .graph-controls button[title='zoom in']").click()
        assert viewport.get_attribute("transform") != before
        browser.find_element(By.CSS_SELECTOR, "#search-graph .graph-controls button[title='fit the drawing']").click()
        browser.find_element(By.CSS_SELECTOR, '#search-graph g.node[data-name="Steve Jobs"] circle').click()
        open_entity_page(browser, "Steve Jobs")
        settled_graph(browser, "#entity-graph")
        page = browser.find_element(By.CSS_SELECTOR, ".entity").text
        assert "Co-founder and former chief executive of Apple." in page
        assert "FOUNDED" in browser.find_element(By.ID, "relations").text
        assert "Apple" in browser.find_element(By.ID, "entity-passages").text
        browser.save_screenshot(str(screenshots / "entity.png"))

        # Merge the duplicate into it: asked, confirmed, and the page shows the merged entity.
        browser.find_element(By.ID, "merge").click()
        answer_dialog(browser, DUPLICATE["name"])
        shown(browser, "#dialog[open]")
        assert "cannot be undone" in browser.find_element(By.ID, "dialog-body").text
        browser.save_screenshot(str(screenshots / "merge-confirm.png"))
        browser.find_element(By.ID, "dialog-ok").click()
        wait_for(browser, lambda d: DUPLICATE["name"] in d.find_element(By.CSS_SELECTOR, ".entity").text,
                 "the merged name among the aliases")
        assert DUPLICATE["name"] in browser.find_element(By.CSS_SELECTOR, ".aliases").text
        assert DUPLICATE["observations"][0] in browser.find_element(By.CSS_SELECTOR, ".observations").text
        browser.save_screenshot(str(screenshots / "merged.png"))
        stored = get_json(f"{url}api/entity?{urllib.parse.urlencode({'name': DUPLICATE['name']})}")
        assert stored["entity"]["name"] == "Steve Jobs"  # the duplicate's name now leads to the merged entity

        browser.get(url)
        shown(browser, "#counts")
        assert entity_count(browser) == 23  # the browse view counts again


def check_communities(driver, url: str, screenshots: Path) -> None:
    """None built yet; Build now lists them by level, largest first; one opens with its entities drawn."""
    wait_for(driver, lambda d: "No communities are built" in d.find_element(
        By.CSS_SELECTOR, "#communities .tool-view:last-child").text, "no communities yet")
    driver.find_element(By.ID, "build-communities").click()
    shown(driver, "#communities article.report")
    listed = get_json(f"{url}api/communities?level=0")
    titles = [a.find_element(By.CSS_SELECTOR, "h3 a").text
              for a in driver.find_elements(By.CSS_SELECTOR, "#communities article.report")]
    assert titles == [c["title"] for c in listed["communities"]] and titles
    assert [int(o.get_attribute("value")) for o in driver.find_elements(By.CSS_SELECTOR, "#community-level option")
            ] == listed["levels"]
    first = listed["communities"][0]
    driver.find_element(By.CSS_SELECTOR, f'#communities article[data-community="{first["id"]}"] .community-link').click()
    settled_graph(driver, "#community-graph")
    drawn = {g.get_attribute("data-name") for g in driver.find_elements(By.CSS_SELECTOR, "#community-graph g.node")}
    one = get_json(f"{url}api/community?id={first['id']}")
    assert drawn == {n["name"] for n in one["nodes"]} and len(drawn) > 1
    ringed = {g.get_attribute("data-name") for g in driver.find_elements(By.CSS_SELECTOR, "#community-graph g.anchor")}
    assert ringed == {e["name"] for e in first["key_entities"]}
    assert len(driver.find_elements(By.CSS_SELECTOR, "#community-graph g.edge")) == len(one["edges"])
    assert first["summary"][:40] in driver.find_element(By.CSS_SELECTOR, ".community").text
    driver.save_screenshot(str(screenshots / "community.png"))


def search_in_time(driver, query: str, *, as_of: str = "", history: bool = False, fails: bool = False) -> None:
    """Search with the form's time controls; wait for the new answer (drawn, or the error when it `fails`)."""
    for field, value in (("#q", query), ("#as-of", as_of)):
        shown(driver, field).clear()
        driver.find_element(By.CSS_SELECTOR, field).send_keys(value)
    box = driver.find_element(By.ID, "history")
    if box.is_selected() != history:
        box.click()
    before = driver.find_elements(By.CSS_SELECTOR, "#view > *")
    driver.find_element(By.CSS_SELECTOR, "#search-form button").click()
    if before:
        wait_for(driver, ready.staleness_of(before[0]), "a new answer")
    if fails:
        shown(driver, "#view .error")
    else:
        settled_graph(driver, "#search-graph")


def facts(driver, css: str = "#facts li") -> list[str]:
    return [li.text for li in driver.find_elements(By.CSS_SELECTOR, css)]


def test_deleting_a_relation_asks_first(demo_db: Path, tmp_path: Path, browser, screenshots: Path) -> None:
    with running_ui(demo_db, tmp_path / "ui.log", child_env(tmp_path / "home")) as url:
        # Another namespace of the file: its own counts and entities, then back.
        browser.get(url)
        shown(browser, "#counts")
        if get_json(f"{url}api/overview")["switch_namespaces"]:
            Select(browser.find_element(By.ID, "namespace")).select_by_value("work")
            wait_for(browser, lambda d: "Namespace work" in d.find_element(By.ID, "counts").text, "the work namespace")
            assert entity_count(browser) == 1
            search(browser, WORK_NOTE["name"])
            settled_graph(browser, "#search-graph")
            drawn = [g.get_attribute("data-name") for g in browser.find_elements(By.CSS_SELECTOR, "#search-graph g.node")]
            assert drawn == [WORK_NOTE["name"]]
            browser.save_screenshot(str(screenshots / "namespace.png"))
            Select(browser.find_element(By.ID, "namespace")).select_by_value("default")
            wait_for(browser, lambda d: entity_count(d) == 24, "the default namespace again")

        browser.get(f"{url}#/entity?name=Bill%20Gates")
        open_entity_page(browser, "Bill Gates")
        rows = browser.find_elements(By.CSS_SELECTOR, "#relations tr.relation")
        dropped = next(r for r in rows if "DROPPED_OUT_OF" in r.text)
        dropped.find_element(By.CSS_SELECTOR, ".delete-relation").click()
        answer_dialog(browser, ok=False)  # cancelled: nothing changes
        assert "DROPPED_OUT_OF" in browser.find_element(By.ID, "relations").text
        rows = browser.find_elements(By.CSS_SELECTOR, "#relations tr.relation")
        next(r for r in rows if "DROPPED_OUT_OF" in r.text).find_element(By.CSS_SELECTOR, ".delete-relation").click()
        answer_dialog(browser)
        wait_for(browser, lambda d: "DROPPED_OUT_OF" not in d.find_element(By.ID, "relations").text,
                 "the relation gone")
        assert len(browser.find_elements(By.CSS_SELECTOR, "#relations tr.relation")) == len(rows) - 1

        # Ending a fact (where the server can): asked when, then no longer listed as holding.
        if "end_relations" in get_json(f"{url}api/overview")["tools"]:
            browser.get(f"{url}#/entity?name=Tim%20Cook")
            open_entity_page(browser, "Tim Cook")
            row = next(r for r in browser.find_elements(By.CSS_SELECTOR, "#relations tr.relation") if "CEO_OF" in r.text)
            row.find_element(By.CSS_SELECTOR, ".end-relation").click()
            answer_dialog(browser, "2025-06-30")
            wait_for(browser, lambda d: not any("CEO_OF" in r.text and "2025-06-30" not in r.text
                                                for r in d.find_elements(By.CSS_SELECTOR, "#relations tr.relation")),
                     "CEO_OF ended")
            ended = browser.find_element(By.CSS_SELECTOR, "#relations tr.relation.ended")
            assert "CEO_OF" in ended.text and "to 2025-06-30" in ended.text
            assert not ended.find_elements(By.CSS_SELECTOR, ".end-relation")  # ended once

            # Time in search: now the fact is gone; with history it is drawn dashed and listed with its period;
            # as of a day when it held, it is an ordinary fact again.
            question = "Who is the chief executive of Apple?"
            search_in_time(browser, question)
            assert not [f for f in facts(browser) if "CEO_OF" in f]
            search_in_time(browser, question, history=True)
            assert "including those that ended" in browser.find_element(By.ID, "search-time").text
            old = [f for f in facts(browser, "#facts li.ended") if "CEO_OF" in f]
            assert old and "to 2025-06-30" in old[0] and "ended" in old[0]
            result = get_json(f"{url}api/search?{urllib.parse.urlencode({'q': question, 'include_history': 'true'})}")
            assert len(browser.find_elements(By.CSS_SELECTOR, "#search-graph g.edge.ended")) == len(
                [e for e in result["edges"] if e["valid_until"]]) >= 1
            browser.save_screenshot(str(screenshots / "search-history.png"))
            search_in_time(browser, question, as_of="2025-01-01")
            assert "as of 2025-01-01" in browser.find_element(By.ID, "search-time").text
            assert [f for f in facts(browser, "#facts li:not(.ended)") if "CEO_OF" in f]
            assert "as_of=2025-01-01" in browser.current_url  # the address keeps it: reload, share
            # On the day it ended, with history, it shows as ended (results write their times with a zone).
            search_in_time(browser, question, as_of="2025-06-30", history=True)
            assert [f for f in facts(browser, "#facts li.ended") if "CEO_OF" in f]
            search_in_time(browser, question, as_of="the day before", fails=True)
            assert "as_of: 'the day before' is not an ISO 8601 date" in browser.find_element(
                By.CSS_SELECTOR, "#view .error").text  # the tool's own reason, without pydantic's dump
            search_in_time(browser, question)  # the next search starts from now again
            browser.get(f"{url}#/entity?name=Bill%20Gates")
            open_entity_page(browser, "Bill Gates")

        # Rename: the page follows the new name, and the old one stays an alias.
        browser.find_element(By.ID, "rename").click()
        answer_dialog(browser, "William Henry Gates III")
        open_entity_page(browser, "William Henry Gates III")
        assert "Bill Gates" in browser.find_element(By.CSS_SELECTOR, ".aliases").text

        # Delete the entity: confirmed, then back to the overview, one entity fewer.
        browser.find_element(By.ID, "delete").click()
        answer_dialog(browser)
        wait_for(browser, lambda d: entity_count(d) == 23, "the overview with 23 entities")


def test_an_entity_with_many_relations_shows_them_all(tmp_path: Path, minilm, browser) -> None:
    """The tool lists 50 relations at a time: the page's "More relations" reads on until every one is listed."""
    spokes = [f"Service {i:03d}" for i in range(120)]
    path = tmp_path / "hub.duckdb"
    with KnowledgeBase(DuckDBStore(path), minilm) as kb:
        kb.add_knowledge_graph([NodeInput(name="Platform Team", type="Team")]
                               + [NodeInput(name=s, type="Service") for s in spokes],
                               [EdgeInput(source="Platform Team", target=s, type="OWNS") for s in spokes])
    with running_ui(path, tmp_path / "ui.log", child_env(tmp_path / "home")) as url:
        browser.get(f"{url}#/entity?name=Platform%20Team")
        open_entity_page(browser, "Platform Team")
        heading = browser.find_element(By.CSS_SELECTOR, "#relations h2")
        assert len(browser.find_elements(By.CSS_SELECTOR, "#relations tr.relation")) == 50
        assert heading.text == "Relations (50+)"
        for listed in (100, 120):
            shown(browser, "#more-relations").click()
            wait_for(browser, lambda d, n=listed: len(d.find_elements(By.CSS_SELECTOR, "#relations tr.relation")) == n,
                     f"{listed} relations")
        assert browser.find_element(By.CSS_SELECTOR, "#relations h2").text == "Relations (120)"
        assert not browser.find_element(By.ID, "more-relations").is_displayed()
        targets = [row.find_elements(By.TAG_NAME, "td")[2].text
                   for row in browser.find_elements(By.CSS_SELECTOR, "#relations tr.relation")]
        assert sorted(targets) == spokes


def post_tool(url: str, name: str, arguments: dict) -> dict:
    """What another client (a model) does meanwhile: one tool call through the API."""
    request = urllib.request.Request(f"{url}api/tool/{name}", data=json.dumps({"arguments": arguments}).encode(),
                                     headers={"content-type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.load(response)


def notice(driver, wanted: str) -> str:
    return wait_for(driver, lambda d: wanted in d.find_element(By.ID, "notice").text
                    and d.find_element(By.ID, "notice").text, f"a notice with {wanted!r}")


NOTE = "First line of a note\nsecond line of the same note"


def test_curation_changes_only_what_it_says(demo_db: Path, tmp_path: Path, browser) -> None:
    """Edits leave untouched observations whole; what the page reports is what the tool did; refusals are short."""
    with running_ui(demo_db, tmp_path / "ui.log", child_env(tmp_path / "home")) as url:
        post_tool(url, "update_entity", {"name": "Steve Wozniak", "add_observations": [NOTE]})

        def stored() -> list[str]:
            return get_json(f"{url}api/entity?name=Steve%20Wozniak")["entity"]["observations"]

        before = stored()
        assert NOTE in before

        # Edit the type alone: each observation stays whole, as stored (the one with a line break is not split).
        browser.get(f"{url}#/entity?name=Steve%20Wozniak")
        open_entity_page(browser, "Steve Wozniak")
        browser.find_element(By.ID, "edit").click()
        shown(browser, "#dialog[open]")
        kind = browser.find_element(By.ID, "edit-type")
        kind.clear()
        kind.send_keys("Engineer")
        browser.find_element(By.ID, "dialog-ok").click()
        wait_for(browser, lambda d: "Engineer" in d.find_element(By.CSS_SELECTOR, ".entity-head").text, "the new type")
        assert stored() == before

        # Invalid properties keep the dialog open, with the reason and what was typed; an observation's own field
        # edits it whole.
        browser.find_element(By.ID, "edit").click()
        shown(browser, "#dialog[open]")
        note = next(f for f in browser.find_elements(By.CSS_SELECTOR, "#edit-observations textarea")
                    if f.get_attribute("value") == NOTE)
        note.send_keys("\nthird line")
        properties = browser.find_element(By.ID, "edit-properties")
        properties.send_keys(" not json")
        browser.find_element(By.ID, "dialog-ok").click()
        assert "not valid JSON" in shown(browser, "#edit-properties-error").text
        assert browser.find_element(By.ID, "dialog").get_attribute("open") is not None
        assert note.get_attribute("value") == NOTE + "\nthird line"
        for _ in " not json":
            properties.send_keys("\ue003")  # backspace: valid again
        answer_dialog(browser)
        wait_for(browser, lambda d: "third line" in d.find_element(By.CSS_SELECTOR, ".observations").text,
                 "the edited observation")
        assert sorted(stored()) == sorted([o for o in before if o != NOTE] + [NOTE + "\nthird line"])

        # A refused argument is said in a few words, not as pydantic's dump.
        browser.find_element(By.ID, "rename").click()
        answer_dialog(browser, "   ")
        assert notice(browser, "new_name") == "new_name: must not be empty"

        # A relation deleted meanwhile by another client: the page says nothing was deleted.
        post_tool(url, "delete_relations", {"relations": [{"source": "Steve Wozniak", "target": "Apple Inc.",
                                                           "type": "FOUNDED"}]})
        row = next(r for r in browser.find_elements(By.CSS_SELECTOR, "#relations tr.relation") if "FOUNDED" in r.text)
        row.find_element(By.CSS_SELECTOR, ".delete-relation").click()
        assert "End it instead" in shown(browser, "#dialog-body").text  # a relation that holds now
        answer_dialog(browser)
        assert notice(browser, "Nothing was deleted").startswith("Nothing was deleted: Steve Wozniak —FOUNDED→")

        # An ended relation offers no Delete: the tool names a relation by its ends and type, and would delete the
        # one that holds now, or nothing.
        post_tool(url, "end_relations", {"relations": [{"source": "Paul Allen", "target": "Microsoft",
                                                        "type": "FOUNDED", "ended_at": "2018-10-15"}]})
        browser.get(f"{url}#/entity?name=Paul%20Allen")
        open_entity_page(browser, "Paul Allen")
        ended = browser.find_element(By.CSS_SELECTOR, "#relations tr.relation.ended")
        assert "FOUNDED" in ended.text and not ended.find_elements(By.CSS_SELECTOR, ".delete-relation")
        assert "holds now" in ended.find_element(By.CSS_SELECTOR, ".no-delete").get_attribute("title")

        # Delete asks with Cancel focused (Enter does not delete); deleted meanwhile, the page says so.
        browser.find_element(By.ID, "delete").click()
        shown(browser, "#dialog[open]")
        assert browser.switch_to.active_element.get_attribute("id") == "dialog-cancel"
        answer_dialog(browser, ok=False)
        post_tool(url, "delete_entities", {"names": ["Paul Allen"]})
        browser.find_element(By.ID, "delete").click()
        answer_dialog(browser)
        assert notice(browser, "Nothing was deleted").startswith("Nothing was deleted: there is no entity Paul Allen")

        # The address decides the namespace: Back after a switch shows the page left, in its namespace.
        if get_json(f"{url}api/overview")["switch_namespaces"]:
            browser.get(f"{url}#/entity?name=Steve%20Jobs")
            open_entity_page(browser, "Steve Jobs")
            Select(browser.find_element(By.ID, "namespace")).select_by_value("work")
            wait_for(browser, lambda d: "Namespace work" in d.find_element(By.ID, "view").text, "the work namespace")
            browser.back()
            open_entity_page(browser, "Steve Jobs")
            assert Select(browser.find_element(By.ID, "namespace")).first_selected_option.text == "default"
            browser.forward()
            wait_for(browser, lambda d: "Namespace work" in d.find_element(By.ID, "view").text, "work again")


def test_the_ui_works_while_a_server_holds_the_file(demo_db: Path, tmp_path: Path, browser, screenshots: Path) -> None:
    env = child_env(tmp_path / "home")
    server_log = (tmp_path / "serve.log").open("w", encoding="utf-8")
    # An MCP client's server: it owns the file from its start, and keeps it while its stdin stays open.
    serve = subprocess.Popen([sys.executable, "-m", "duckgraph.core.cli", "serve", "--db", str(demo_db)],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=server_log, env=env)
    try:
        _wait_until_held(demo_db)
        with running_ui(demo_db, tmp_path / "ui.log", env) as url:
            browser.get(url)
            shown(browser, "#counts")
            assert "through the duckgraph server" in browser.find_element(By.ID, "role").text
            # The communities read no tool answers goes to the owner too (core/mcp/forwarding.py's browse).
            built = urllib.request.Request(f"{url}api/tool/build_communities", data=b'{"arguments": {}}',
                                           headers={"content-type": "application/json"}, method="POST")
            urllib.request.urlopen(built, timeout=120).close()
            listed = get_json(f"{url}api/communities")
            assert listed["communities"] and get_json(f"{url}api/community?id={listed['communities'][0]['id']}")["nodes"]
            search(browser, "Which university did the founder of Microsoft drop out of?")
            settled_graph(browser, "#search-graph")
            assert browser.find_elements(By.CSS_SELECTOR, '#search-graph g.node[data-name="Harvard University"]')
            browser.save_screenshot(str(screenshots / "search-through-owner.png"))
            browser.get(f"{url}#/entity?name=Steve%20Jobs")
            open_entity_page(browser, "Steve Jobs")
            browser.find_element(By.ID, "merge").click()
            answer_dialog(browser, DUPLICATE["name"])
            answer_dialog(browser)
            wait_for(browser, lambda d: DUPLICATE["name"] in d.find_element(By.CSS_SELECTOR, ".aliases").text,
                     "the duplicate merged into Steve Jobs by the owner")
        assert serve.poll() is None  # the owner served the UI's calls and still holds the file
    finally:
        serve.stdin.close()
        serve.wait(60)
        server_log.close()


def _wait_until_held(db: Path) -> None:
    from duckgraph.core import sharing

    deadline = time.monotonic() + 60
    while sharing.holder(db) is None:
        assert time.monotonic() < deadline, "duckgraph serve never took the file"
        time.sleep(0.05)
