"""`duckgraph ingest` of a DOCX and a PPTX whose body text starts lines with "#" (a paragraph "# of open bugs ...",
tables headed "#"): that text is in the stored passages and found by search, and the sections are the documents'
own headings (a slide's title, not '| Item'). Real files from python-docx and python-pptx, the real DuckDB file
and the real default model."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from duckgraph.core.cli import main
from duckgraph.plugins.duckdb import DuckDBStore

pytestmark = pytest.mark.model
docx = pytest.importorskip("docx")
pptx = pytest.importorskip("pptx")


@pytest.fixture
def env(tmp_path: Path, monkeypatch) -> Path:
    for name in ("DUCKGRAPH_DB", "DUCKGRAPH_NAMESPACE", "DUCKGRAPH_STORE", "DUCKGRAPH_EMBEDDER", "DUCKGRAPH_EXTRACTOR"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    monkeypatch.setenv("DUCKGRAPH_CONFIG", str(config))
    return tmp_path


def run(db: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main([*args, "--db", str(db)])
    return code, out.getvalue().strip()


def write_files(folder: Path) -> tuple[Path, Path]:
    from pptx.util import Inches

    folder.mkdir()
    document = docx.Document()
    document.add_heading("Kestrel sprint", 1)
    document.add_paragraph("Sprint plan for the Kestrel release.")
    table = document.add_table(rows=3, cols=3)
    for r, row in enumerate([["#", "Task", "Owner"], ["1", "Write spec", "Ann"], ["2", "Review", "Bo"]]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    document.add_paragraph("# of open bugs is 12 and the freeze is Friday.")
    document.save(str(folder / "plan.docx"))
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Backlog"
    grid = slide.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(6), Inches(2)).table
    for r, row in enumerate([["#", "Item"], ["1", "Kestrel login"], ["2", "Kestrel export"]]):
        for c, value in enumerate(row):
            grid.cell(r, c).text = value
    deck.save(str(folder / "backlog.pptx"))
    return (folder / "plan.docx").resolve(), (folder / "backlog.pptx").resolve()


def test_hash_lines_of_a_docx_and_a_pptx_are_in_passages_and_found(env):
    plan, backlog = write_files(env / "docs")
    db = env / "kb.duckdb"
    assert run(db, "ingest", str(env / "docs")) == (0, "2 documents stored, 0 unchanged, 0 skipped, 2 passages")
    store = DuckDBStore(db)
    store.open()
    try:
        chunks = {c.document_id: (c.section, c.text) for c in store.document_chunks(
            "default", [plan.as_posix(), backlog.as_posix()])}
    finally:
        store.close()
    assert chunks[plan.as_posix()] == ("Kestrel sprint", (
        "Sprint plan for the Kestrel release.\n\n\\# | Task | Owner\n\n1 | Write spec | Ann\n\n2 | Review | Bo\n\n"
        "\\# of open bugs is 12 and the freeze is Friday."))
    assert chunks[backlog.as_posix()] == ("Backlog", "\\# | Item\n\n1 | Kestrel login\n\n2 | Kestrel export")

    code, text = run(db, "search", "How many open bugs are there?", "--max-passages", "1")
    passage = text.split("Passages:\n", 1)[1].splitlines()[0]
    assert code == 0 and passage.startswith(f"[{plan.as_posix()}#")
    assert "§ Kestrel sprint:" in passage and "of open bugs is 12" in passage
