"""The web page's /api/read: read_document's answer, a document's passages in order around a passage or from its
start, through `duckgraph ui` as a child process over a real DuckDB file and plain HTTP requests (the hashing
embedder of tests/fakes.py): positions, sections, the ids to read back and on, the next turn of a conversation, a
namespace, and bad requests refused with the tool's words, as /api/document's delete preview stays."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.test_read_document_mcp import CHAT, REPORT, TOPICS
from tests.e2e.test_ui_security import request
from tests.e2e.ui_server import child_env, get_json, running_ui
from tests.fakes import HashingEmbedder


def read(url: str, **params: object) -> dict:
    return get_json(f"{url}api/read?{urllib.parse.urlencode(params)}")


def refused(url: str, **params: object) -> tuple[int, str]:
    status, _, body = request(url, f"/api/read?{urllib.parse.urlencode(params)}")
    return status, json.loads(body)["error"]


def test_the_page_reads_a_document_around_a_passage_and_on(tmp_path: Path) -> None:
    db = tmp_path / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder()) as kb:
        ids = kb.add_documents([DocumentInput(**REPORT)]).documents[0].chunk_ids
        kb.add_documents([DocumentInput(**turn) for turn in CHAT])
        kb.add_documents([DocumentInput(id="minutes", text="The guild met.")], namespace="work")
    assert len(ids) == 12  # one passage a paragraph
    env = child_env(tmp_path / "home", fake_embedder=True, DUCKGRAPH_WARM_UP="0")
    with running_ui(db, tmp_path / "ui.log", env) as url:
        around = read(url, id=REPORT["id"], chunk_id=ids[9], before=1, after=1)
        assert [(p["chunk_id"], p["position"], p["section"]) for p in around["passages"]] == [
            (ids[8], 9, "Discussion"), (ids[9], 10, "Discussion"), (ids[10], 11, "Discussion")]
        assert TOPICS["Discussion"][1] in around["passages"][1]["text"]
        assert (around["document_id"], around["title"], around["time"], around["passages_total"]) == (
            REPORT["id"], REPORT["title"], "2024-12-20T00:00:00Z", 12)
        assert (around["previous_chunk_id"], around["next_chunk_id"], around["truncated"]) == (ids[7], ids[11], False)
        assert "text" not in around  # the tool's words for a model (read_document calls); the page reads by the ids

        # Back and on by those ids, as the page's Earlier and Later passages do.
        back = read(url, id=REPORT["id"], chunk_id=around["previous_chunk_id"], before=7, after=0)
        assert [p["position"] for p in back["passages"]] == list(range(1, 9))
        assert [p["section"] for p in back["passages"]] == ["Methods"] * 4 + ["Results"] * 4
        assert back["previous_chunk_id"] is None and back["previous_document"] is None
        on = read(url, id=REPORT["id"], chunk_id=around["next_chunk_id"], before=0, after=7)
        assert [p["chunk_id"] for p in on["passages"]] == [ids[11]] and on["next_chunk_id"] is None

        # From the start without chunk_id; at a turn's end, the next turn of the conversation.
        assert [p["chunk_id"] for p in read(url, id=REPORT["id"])["passages"]] == ids[:6]
        turn = read(url, id="chat-1")
        assert (turn["previous_document"], turn["next_document"]) == ("chat-0", "chat-2")
        assert [p["text"] for p in read(url, id="minutes", namespace="work")["passages"]] == ["The guild met."]

        # The delete preview of the same document is as it was.
        assert get_json(f"{url}api/document?id={urllib.parse.quote(REPORT['id'])}") == {
            "id": REPORT["id"], "title": REPORT["title"], "parts": [REPORT["id"]], "passages": 12}

        assert refused(url) == (400, "give the document's id: id=, a passage's document_id")
        assert refused(url, id="chat-0", chunk_id="ten") == (400, "chunk_id must be a whole number")
        assert refused(url, id="chat-0", after=101) == (400, "after: must be at most 100")
        status, error = refused(url, id="minutes")  # another namespace's document is no document here
        assert status == 400 and error.startswith("no document 'minutes' in the namespace 'default'")
        status, error = refused(url, id="chat-0", chunk_id=ids[3])
        assert status == 400 and error.startswith(f"chunk_id {ids[3]} is a passage of the document "
                                                  f"'{REPORT['id']}', not of 'chat-0'")
