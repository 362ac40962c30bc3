"""Reading a document beyond the passage a search shows, through the official MCP client on the real server, a real
DuckDB file and the real default model: `read_document` (in the default set) gives the passages before and after a
search's hit in document order, each with its place ("passage 7 of 12") and section, from the start without a
chunk_id, within its token bound and with the call that reads on; each passage after the first shown without what
it repeats of the one before it (the overlap chunking keeps, a table's header); a passage longer than the bound cut
and marked; at a document's ends, the document the text goes on from (its last passage) or in (the turn before or
after in a conversation); and an unknown id, a passage's header given as the id, a passage of another document or one
edited since, each refused with what to give instead."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mcp import Client

from duckgraph.core.domain.document_reading import READ_TOKENS
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput
from duckgraph.core.domain.render import estimate_tokens
from duckgraph.core.mcp.server import build_server
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.test_delete_documents_mcp import serve
from tests.e2e.test_mcp_inmemory import call_ok, error_text

pytestmark = pytest.mark.model

#: Twelve paragraphs under three headings, each long enough to be a passage of its own.
FILLER = (" The team wrote down what it measured each night, compared it with the plan, and noted what to check "
          "again the next week before anyone drew conclusions from it.") * 4
TOPICS = {
    "Methods": ["We ground the telescope mirror from borosilicate glass.", "The spectrograph was calibrated on argon "
                "lamps.", "Observers logged the seeing every hour.", "Data were reduced with a custom pipeline."],
    "Results": ["Seventeen new variable stars were found.", "The comet's tail pointed away from the sun.",
                "Two supernovae brightened in March.", "The galaxy survey reached magnitude twenty-one."],
    "Discussion": ["Light pollution from the new stadium hurt the faint targets.", "The cryogenic camera cracked "
                   "during the January cold snap.", "Funding for a second dome is uncertain.", "Students should "
                   "run the archive next year."],
}
REPORT = {"id": "observatory-report.md", "title": "Observatory annual report", "time": "2024-12-20",
          "text": "\n\n".join(f"# {heading}\n\n" + "\n\n".join(f"{topic}{FILLER}" for topic in topics)
                              for heading, topics in TOPICS.items())}
CHAT = [{"id": f"chat-{i}", "title": "Chat with Ana, 3 May", "text": text}
        for i, text in enumerate(["Did the camera survive the cold?", "No, it cracked in January.", "Too bad."])]
#: A table of three passages: each of its rows after the first repeats its header row and delimiter line.
HEADER = "| Host | Rack | State |\n|---|---|---|\n"
HOSTS = {"id": "hosts.md", "title": "Rack inventory", "text": "Hosts by rack, checked weekly.\n\n" + HEADER + "\n".join(
    f"| host-{i:02d} | rack {i % 4} | {'ok' if i % 3 else 'degraded'} since the {i}th of May |" for i in range(40))
    + "\n\nThe degraded hosts are replaced in June."}


async def refusal(client: Client, arguments: dict) -> str:
    """The error of a read_document call, without the SDK's "Error executing tool read_document: "."""
    return error_text(await client.call_tool("read_document", arguments)).removeprefix(
        "Error executing tool read_document: ")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def services(tmp_path: Path, plugin_manager, minilm):
    return serve(tmp_path, plugin_manager, minilm, tools="graphrag")


@pytest.mark.anyio
async def test_the_passages_around_a_search_hit_are_read_in_order_and_on_to_the_end(services):
    async with Client(build_server(services)) as client:
        [stored] = (await call_ok(client, "add_documents", {"documents": [REPORT]}))["documents"]
        ids = stored["chunk_ids"]
        assert len(ids) == 12  # one passage a paragraph

        found = await call_ok(client, "search", {"query": "Which camera cracked in the cold snap?"})
        hit = next(p for p in found["passages"] if p["document_id"] == REPORT["id"])
        assert hit["chunk_id"] == ids[9] and f"[{REPORT['id']}#{ids[9]}]" in found["text"]

        read = await call_ok(client, "read_document", {"document_id": REPORT["id"], "chunk_id": hit["chunk_id"],
                                                       "before": 1, "after": 1})
        assert [(p["chunk_id"], p["position"], p["section"]) for p in read["passages"]] == [
            (ids[8], 9, "Discussion"), (ids[9], 10, "Discussion"), (ids[10], 11, "Discussion")]
        assert read["passages"][0]["text"].startswith("Light pollution from the new stadium")
        assert read["passages"][2]["text"].endswith(TOPICS["Discussion"][2] + FILLER)
        assert (read["title"], read["time"], read["passages_total"], read["truncated"]) == (
            "Observatory annual report", "2024-12-20T00:00:00Z", 12, False)
        assert (read["previous_chunk_id"], read["next_chunk_id"]) == (ids[7], ids[11])
        lines = read["text"].splitlines()
        assert lines[0] == ("Document observatory-report.md: Observatory annual report (2024-12-20). Shown: "
                            "passages 9 to 11 of 12.")
        assert lines[1] == (f"(Passages 1 to 8 come before: read back with read_document(document_id="
                            f"\"observatory-report.md\", chunk_id={ids[7]}, after=0).)")
        assert lines[2].startswith(f"[observatory-report.md#{ids[8]}] passage 9 of 12 § Discussion: Light pollution")
        assert lines[3].startswith(f"[observatory-report.md#{ids[9]}] passage 10 of 12: ")  # the section said once
        assert lines[-1] == (f"(Passage 12 follows: read on with read_document(document_id=\"observatory-report.md\""
                             f", chunk_id={ids[11]}, before=0).)")

        # Read on as the note says: the last passage, and nothing after it.
        on = await call_ok(client, "read_document", {"document_id": REPORT["id"], "chunk_id": ids[11], "before": 0})
        assert [p["position"] for p in on["passages"]] == [12]
        assert on["next_chunk_id"] is None and on["next_document"] is None and "read on" not in on["text"]

        # Without chunk_id: from the start, the first and `after` more; with the section of the first.
        start = await call_ok(client, "read_document", {"document_id": REPORT["id"]})
        assert [p["chunk_id"] for p in start["passages"]] == ids[:6]
        assert start["previous_chunk_id"] is None and "come before" not in start["text"]
        assert f"[observatory-report.md#{ids[0]}] passage 1 of 12 § Methods: We ground" in start["text"]


@pytest.mark.anyio
async def test_an_answer_stays_within_its_bound_and_says_where_it_stopped(services):
    long_report = {**REPORT, "id": "long", "text": "\n\n".join([REPORT["text"]] * 4)}  # 48 passages
    async with Client(build_server(services)) as client:
        [stored] = (await call_ok(client, "add_documents", {"documents": [long_report]}))["documents"]
        ids = stored["chunk_ids"]
        read = await call_ok(client, "read_document", {"document_id": "long", "chunk_id": ids[20], "before": 100,
                                                       "after": 100})
        assert read["truncated"] and estimate_tokens(read["text"]) <= READ_TOKENS
        shown = [p["chunk_id"] for p in read["passages"]]
        first, last = ids.index(shown[0]), ids.index(shown[-1])
        assert shown == ids[first:last + 1] and first > 0 and last < 47 and ids[20] in shown  # a run around it
        assert (read["previous_chunk_id"], read["next_chunk_id"]) == (ids[first - 1], ids[last + 1])
        assert read["text"].endswith(f"(Passages {last + 2} to 48 follow (an answer takes at most 4,000 tokens): "
                                     f"read on with read_document(document_id=\"long\", chunk_id={ids[last + 1]}, "
                                     "before=0).)")


@pytest.mark.anyio
async def test_each_passage_shown_after_another_leaves_out_what_it_repeats_of_it(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_documents", {"documents": [REPORT, HOSTS]})
        read = await call_ok(client, "read_document", {"document_id": REPORT["id"], "after": 100})
        passages = read["passages"]
        assert len(passages) == 12 and not read["truncated"]
        # Read in order, the passages hold the document's text once (its headings are their sections).
        body = [w for line in REPORT["text"].splitlines() if not line.startswith("#") for w in line.split()]
        assert " ".join(p["text"] for p in passages).split() == body
        assert passages[0]["repeats"] == 0 and passages[0]["text"].startswith("We ground the telescope mirror")
        assert passages[1]["text"].startswith(TOPICS["Methods"][1]) and passages[1]["repeats"] > 0
        assert f"[{REPORT['id']}#{passages[1]['chunk_id']}] passage 2 of 12: {TOPICS['Methods'][1]} The team" \
            in read["text"]
        assert passages[8]["repeats"] == 0  # the first of its section: passages of two sections never overlap

        # What it leaves out is the start of the passage, whole when shown first, that repeats the one before.
        alone = await call_ok(client, "read_document", {"document_id": REPORT["id"],
                                                        "chunk_id": passages[1]["chunk_id"], "before": 0, "after": 0})
        [whole] = alone["passages"]
        assert whole["repeats"] == 0 and whole["text"].endswith(passages[1]["text"])
        repeated = whole["text"][:passages[1]["repeats"]].strip()
        assert repeated.startswith("down what it measured") and passages[0]["text"].endswith(repeated)
        assert f"passage 2 of 12 § Methods: {repeated}" in alone["text"]

        # A table's later passages leave out its header row and delimiter line too, and the rows they repeat.
        table = await call_ok(client, "read_document", {"document_id": HOSTS["id"]})
        assert [p["position"] for p in table["passages"]] == [1, 2, 3]
        assert " ".join(p["text"] for p in table["passages"]).split() == HOSTS["text"].split()
        assert table["text"].count("| Host | Rack | State |") == 1
        later = table["passages"][1]
        assert later["text"].startswith("| host-") and later["repeats"] > len(HEADER)
        again = await call_ok(client, "read_document", {"document_id": HOSTS["id"], "chunk_id": later["chunk_id"],
                                                        "before": 0, "after": 0})
        assert again["passages"][0]["text"].startswith(HEADER)  # shown first: whole, its header with it


@pytest.mark.anyio
async def test_a_passage_longer_than_an_answer_is_cut_and_said_to_be(tmp_path: Path, plugin_manager, minilm):
    # A file written with passages of up to 40,000 characters: one passage alone takes more than an answer's bound.
    ledger = {"id": "ledger.md", "text": " ".join(f"Entry {i}: the hall paid {i * 7} crowns for lamp oil."
                                                    for i in range(700))}
    with KnowledgeBase(DuckDBStore(tmp_path / "kb.duckdb"), minilm, chunk_chars=40_000) as kb:
        kb.add_documents([DocumentInput(**ledger), DocumentInput(**CHAT[0])])
    async with Client(build_server(serve(tmp_path, plugin_manager, minilm, tools="graphrag"))) as client:
        read = await call_ok(client, "read_document", {"document_id": "ledger.md"})
        [passage] = read["passages"]
        assert passage["cut"] and read["truncated"] and estimate_tokens(read["text"]) <= READ_TOKENS
        assert passage["text"].endswith("…") and ledger["text"].startswith(passage["text"][:-1])
        assert read["text"].splitlines()[1].startswith(
            f"[ledger.md#{passage['chunk_id']}] passage 1 of 1 (cut short: alone it takes more than an answer's 4,000 "
            "tokens): Entry 0: the hall paid 0 crowns")
        whole = await call_ok(client, "read_document", {"document_id": "chat-0"})
        assert not whole["passages"][0]["cut"] and "cut short" not in whole["text"]


@pytest.mark.anyio
async def test_a_heading_longer_than_an_answer_is_cut_too(tmp_path: Path, plugin_manager, minilm):
    # A heading of some 5,000 tokens: the passage under it is cut, and so is the heading, within the bound.
    heading = " ".join(f"word{i}" for i in range(3_000))
    with KnowledgeBase(DuckDBStore(tmp_path / "kb.duckdb"), minilm, chunk_chars=40_000) as kb:
        kb.add_documents([DocumentInput(id="odd.md", text=f"# {heading}\n\nThe lamp oil cost 7 crowns.")])
    async with Client(build_server(serve(tmp_path, plugin_manager, minilm, tools="graphrag"))) as client:
        read = await call_ok(client, "read_document", {"document_id": "odd.md"})
        [passage] = read["passages"]
        assert passage["cut"] and estimate_tokens(read["text"]) <= READ_TOKENS
        assert passage["section"].endswith("…") and heading.startswith(passage["section"][:-1])
        assert passage["text"] == "The lamp oil cost 7 crowns."


@pytest.mark.anyio
async def test_a_turn_names_the_last_passage_of_the_turn_it_goes_on_from(services):
    # The first turn takes three passages: read back from the next one's start, its end.
    question = {**CHAT[0], "text": "\n\n".join(f"{topic}{FILLER}" for topic in TOPICS["Methods"])}
    async with Client(build_server(services)) as client:
        stored = (await call_ok(client, "add_documents", {"documents": [question, CHAT[1]]}))["documents"]
        first = stored[0]["chunk_ids"]
        assert len(first) == 4
        answer = await call_ok(client, "read_document", {"document_id": "chat-1"})
        assert (answer["previous_document"], answer["previous_document_chunk_id"]) == ("chat-0", first[-1])
        assert answer["text"].splitlines()[1] == (
            "(The text goes on from the document chat-0: read its end with read_document(document_id=\"chat-0\", "
            f"chunk_id={first[-1]}, after=0).)")
        end = await call_ok(client, "read_document", {"document_id": "chat-0", "chunk_id": first[-1], "after": 0})
        assert [p["position"] for p in end["passages"]] == [2, 3, 4] and end["next_document"] == "chat-1"
        start = await call_ok(client, "read_document", {"document_id": "chat-0"})
        assert start["previous_document"] is None and start["previous_document_chunk_id"] is None


@pytest.mark.anyio
async def test_at_a_turns_end_the_answer_names_the_next_turn_of_the_conversation(services):
    async with Client(build_server(services)) as client:
        stored = (await call_ok(client, "add_documents", {"documents": CHAT}))["documents"]
        middle = await call_ok(client, "read_document", {"document_id": "chat-1"})
        assert [p["text"] for p in middle["passages"]] == ["No, it cracked in January."]
        assert (middle["previous_document"], middle["next_document"]) == ("chat-0", "chat-2")
        assert middle["text"].splitlines()[1] == (
            "(The text goes on from the document chat-0: read its end with read_document(document_id=\"chat-0\", "
            f"chunk_id={stored[0]['chunk_ids'][0]}, after=0).)")
        assert middle["text"].splitlines()[-1] == (
            "(The text goes on in the document chat-2: read_document(document_id=\"chat-2\").)")


@pytest.mark.anyio
async def test_a_document_of_the_same_title_goes_on_from_another_only_within_one_sitting(services):
    # Two emails of one subject line, days apart: each read alone. A reply five minutes after the first: named.
    mails = [{"id": "mail:a", "title": "Quick question", "time": "2026-11-20T09:00:00Z",
              "text": "From: Dana (HR)\n\nDo you still need the parking permit for the Clarendon garage?"},
             {"id": "mail:b", "title": "Quick question", "time": "2026-11-25T15:00:00Z",
              "text": "From: Zoë Müller (Acme)\n\nNo, we cancelled it last month."},
             {"id": "mail:c", "title": "Quick question", "time": "2026-11-25T15:05:00Z",
              "text": "From: Dana (HR)\n\nThanks, I will ignore the invoice then."}]
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_documents", {"documents": mails})
        first, asked, reply = [await call_ok(client, "read_document", {"document_id": mail["id"]}) for mail in mails]
        assert (first["previous_document"], first["next_document"]) == (None, None)
        assert first["text"].splitlines()[-1].startswith("[mail:a#") and "goes on" not in first["text"]
        assert (asked["previous_document"], asked["next_document"]) == (None, "mail:c")
        assert (reply["previous_document"], reply["next_document"]) == ("mail:b", None)
        assert asked["text"].splitlines()[-1] == (
            "(The text goes on in the document mail:c: read_document(document_id=\"mail:c\").)")


@pytest.mark.anyio
async def test_a_wrong_id_or_passage_is_refused_with_what_to_give_instead(services):
    async with Client(build_server(services)) as client:
        [report] = (await call_ok(client, "add_documents", {"documents": [REPORT]}))["documents"]
        chat = (await call_ok(client, "add_documents", {"documents": CHAT}))["documents"]
        await call_ok(client, "add_documents", {"documents": [{"id": "minutes", "text": "The guild met."}],
                                                "namespace": "work"})
        refusals = {
            "unknown": {"document_id": "observatory report"},
            "header": {"document_id": f"observatory-report.md#{report['chunk_ids'][3]}"},
            "other namespace": {"document_id": "minutes"},
            "other document": {"document_id": "chat-0", "chunk_id": report["chunk_ids"][3]},
            "no passage": {"document_id": "chat-0", "chunk_id": 10**12},
            "negative": {"document_id": "chat-0", "after": -1},
        }
        errors = {name: await refusal(client, arguments) for name, arguments in refusals.items()}
        assert errors["unknown"] == (
            "no document 'observatory report' in the namespace 'default': give each id exactly as search shows it (a "
            "passage's document_id); recent_changes lists the documents added")
        assert errors["header"] == (
            f"no document 'observatory-report.md#{report['chunk_ids'][3]}': that is a passage's header "
            f"[document_id#chunk_id]; give document_id 'observatory-report.md' and chunk_id {report['chunk_ids'][3]}")
        # Another namespace's document is never named to the model (namespaces.md): not found here, as any other.
        assert errors["other namespace"].startswith("no document 'minutes' in the namespace 'default'")
        assert errors["other document"] == (
            f"chunk_id {report['chunk_ids'][3]} is a passage of the document 'observatory-report.md', not of "
            "'chat-0': give document_id 'observatory-report.md' with it, or leave chunk_id out to read 'chat-0' from "
            "its start")
        assert errors["no passage"].startswith("no passage has chunk_id 1000000000000 in the namespace 'default'")
        assert errors["negative"] == "read_document refused its arguments: after: must be at least 0"
        work = await call_ok(client, "read_document", {"document_id": "minutes", "namespace": "work"})
        assert [p["text"] for p in work["passages"]] == ["The guild met."]
        # A passage of another namespace's document is no passage here, though its id is stored.
        other = await call_ok(client, "read_document", {"document_id": "minutes", "namespace": "work"})
        stray = await refusal(client, {"document_id": "chat-0", "chunk_id": other["passages"][0]["chunk_id"]})
        assert stray.startswith(f"no passage has chunk_id {other['passages'][0]['chunk_id']} in the namespace "
                                "'default'")

        # A passage edited since search showed it has a new id: the old one is refused, saying so.
        edited = {**REPORT, "text": REPORT["text"].replace("cryogenic camera cracked", "cryogenic camera broke")}
        await call_ok(client, "add_documents", {"documents": [edited]})
        stale = await refusal(client, {"document_id": REPORT["id"], "chunk_id": report["chunk_ids"][9]})
        assert re.fullmatch(
            rf"no passage has chunk_id {report['chunk_ids'][9]} in the namespace 'default': give the number after '#' "
            r"of a passage as search shows it \(\[observatory-report\.md#N\] is chunk_id N\); a passage edited since "
            r"gets a new id, so search again, or leave chunk_id out to read 'observatory-report\.md' from its start",
            stale)
        assert chat  # stored, and read above
