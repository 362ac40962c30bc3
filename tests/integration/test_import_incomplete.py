"""An export ends with a line that counts its lines of each kind, and an import refuses a file of that format that
lacks it or whose lines do not match it: an export to standard output stopped midway (a cron job's `duckgraph
export > backup.jsonl` under timeout or systemd) ends on a whole line, and imported silently it would restore a
fraction of the memory. `--allow-incomplete` imports what such a file holds, said; an older export (format
version 1, no end line) imports with the warning that its completeness cannot be checked. On real DuckDB files,
with the hashing embedder; the command line as a subprocess."""

from __future__ import annotations

import io
import json
import signal
import textwrap
from pathlib import Path

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, NodeInput
from duckgraph.core.files.export import export_jsonl
from duckgraph.core.files.import_ import import_lines
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import InvalidInputError
from tests.fakes import HashingEmbedder
from tests.integration.test_cli_interrupts import env, memory, signal_at, start  # noqa: F401 (fixtures)
from tests.integration.test_compact import duckgraph


def _kb(path: Path) -> KnowledgeBase:
    return KnowledgeBase(DuckDBStore(path), HashingEmbedder())


def _exported(tmp_path: Path) -> list[str]:
    with _kb(tmp_path / "source.duckdb") as kb:
        kb.add_knowledge_graph([NodeInput(name=f"Person {i}", type="Person") for i in range(6)],
                               [EdgeInput(source=f"Person {i}", target=f"Person {i + 1}", type="KNOWS")
                                for i in range(5)])
        out = io.StringIO()
        export_jsonl(kb, out)
    return out.getvalue().splitlines()


def _nodes(db: Path) -> int:
    with _kb(db) as kb:
        return kb.stats()["nodes"]


def test_an_export_cut_at_a_line_is_refused_and_nothing_is_written(tmp_path) -> None:
    lines = _exported(tmp_path)
    assert json.loads(lines[-1]) == {"kind": "end", "lines": {"document": 0, "chunk": 0, "node": 6, "edge": 5,
                                                              "mention": 0, "edge_evidence": 0, "community_report": 0}}
    db = tmp_path / "copy.duckdb"
    with _kb(db) as kb:
        with pytest.raises(InvalidInputError) as refused:
            import_lines(kb, lines[:9], source="cut.jsonl")  # `head -n 9`: the meta line, 6 nodes, 2 edges
    assert str(refused.value) == (
        "cut.jsonl is incomplete: it ends after 6 node and 2 edge lines without the end line that an export writes "
        "last: the export was stopped midway, or the file was cut; nothing was imported. Export the memory again "
        "(`duckgraph export -o FILE` writes the whole file or none), or import what the file holds with "
        "--allow-incomplete")
    assert _nodes(db) == 0

    # The end line kept, lines taken out of the middle: its counts say so.
    with _kb(db) as kb:
        with pytest.raises(InvalidInputError, match=r"^edited.jsonl is incomplete: its lines do not match the counts "
                                                    r"of its end line \(edge lines: 3, the end line says 5\); nothing "
                                                    "was imported"):
            import_lines(kb, [*lines[:10], lines[-1]], source="edited.jsonl")
    assert _nodes(db) == 0

    # A line added by hand.
    added = [*lines[:-1], json.dumps({"kind": "node", "name": "Someone", "type": "Person"}), lines[-1]]
    with _kb(db) as kb:
        with pytest.raises(InvalidInputError, match=r"^added.jsonl was changed since it was exported: its lines do "
                                                    r"not match the counts of its end line \(node lines: 7, the end "
                                                    r"line says 6\); nothing was imported"):
            import_lines(kb, added, source="added.jsonl")
        assert import_lines(kb, added, allow_incomplete=True).nodes_created == 7
    assert _nodes(db) == 7

    db = tmp_path / "whole.duckdb"
    with _kb(db) as kb:  # whole, it imports
        summary = import_lines(kb, lines)
    assert (summary.complete, summary.completeness, summary.nodes_created, summary.edges_created) == (True, "", 6, 5)


def test_allow_incomplete_imports_what_the_file_holds_and_says_what_it_lacks(tmp_path) -> None:
    lines = _exported(tmp_path)
    with _kb(tmp_path / "copy.duckdb") as kb:
        summary = import_lines(kb, lines[:9], source="cut.jsonl", allow_incomplete=True)
    assert (summary.complete, summary.nodes_created, summary.edges_created) == (False, 6, 2)
    assert summary.completeness == (
        "cut.jsonl is incomplete: it ends after 6 node and 2 edge lines without the end line that an export writes "
        "last: the export was stopped midway, or the file was cut; imported what it holds (--allow-incomplete)")


def test_an_export_of_format_version_1_imports_with_a_warning(tmp_path) -> None:
    lines = _exported(tmp_path)
    older = [json.dumps({**json.loads(lines[0]), "version": 1}), *lines[1:-1]]  # as duckgraph wrote it before
    with _kb(tmp_path / "copy.duckdb") as kb:
        summary = import_lines(kb, older, source="old.jsonl")
    assert (summary.complete, summary.nodes_created, summary.edges_created) == (None, 6, 5)
    assert summary.completeness == (
        "old.jsonl has no end line (it was written by a duckgraph before version 2 of the format): whether it holds "
        "the whole export cannot be checked; if the export was stopped midway, what it lacks is not imported")
    with _kb(tmp_path / "by-hand.duckdb") as kb:  # no meta line: written by hand
        summary = import_lines(kb, lines[1:-1], source="hand.jsonl")
    assert summary.complete is None and summary.completeness.startswith(
        "hand.jsonl has no end line (it has no meta line: written by hand, or not from the start of an export)")


def test_a_line_after_the_end_line_is_refused(tmp_path) -> None:
    lines = _exported(tmp_path)
    db = tmp_path / "copy.duckdb"
    with _kb(db) as kb:
        with pytest.raises(InvalidInputError, match=rf"^two.jsonl:{len(lines) + 1}: a line after the end line"):
            import_lines(kb, [*lines, *lines], source="two.jsonl")  # `cat a.jsonl b.jsonl`
    assert _nodes(db) == 0


def test_an_empty_memory_exports_and_imports_whole(tmp_path) -> None:
    with _kb(tmp_path / "empty.duckdb") as kb:
        out = io.StringIO()
        export_jsonl(kb, out)
    lines = out.getvalue().splitlines()
    assert [json.loads(line)["kind"] for line in lines] == ["meta", "end"]
    with _kb(tmp_path / "copy.duckdb") as kb:
        assert import_lines(kb, lines).complete is True


def test_an_export_to_standard_output_stopped_by_sigterm_is_refused_by_import(memory: Path, env) -> None:
    """The probe's case: `timeout -s TERM 6 duckgraph export > cut.jsonl`, then `duckgraph import cut.jsonl`. The
    export is stopped after its nodes and relations, before its last lines."""
    patch = textwrap.dedent('''
        from duckgraph.core.files import export

        def stalled(*args, **options):
            sys.stdout.flush()
            stall()

        export._write_reports = stalled
    ''')
    process = start("export", "--db", str(memory), env=env, cwd=memory.parent, patch=patch)
    code, out, err = signal_at(process, "STALLED", signal.SIGTERM)
    assert code == 143, err
    assert err.splitlines()[-1] == ("duckgraph: export stopped by SIGTERM: what it wrote to standard output is "
                                    "incomplete")
    cut = memory.parent / "cut.jsonl"
    cut.write_text(out, encoding="utf-8")
    assert out.endswith("\n") and '"kind":"node"' in out  # whole lines, as a whole file's

    db = memory.parent / "restored.duckdb"
    done = duckgraph("import", str(cut), "--db", str(db), env=env, cwd=memory.parent)
    assert done.returncode == 1, done.stderr
    assert "cut.jsonl is incomplete: it ends after 3 document, 5 chunk, 6 node, 3 edge and 2 edge_evidence lines " \
           "without the end line that an export writes last" in done.stderr
    assert "--allow-incomplete" in done.stderr and not db.exists()

    done = duckgraph("import", str(cut), "--db", str(db), "--allow-incomplete", env=env, cwd=memory.parent)
    assert done.returncode == 0, done.stderr
    assert "6 entities created" in done.stdout
    assert "imported what it holds (--allow-incomplete)" in done.stderr


def test_a_file_that_ends_in_the_middle_of_a_line_is_refused_as_cut(tmp_path) -> None:
    """`head -c`, a copy or a full disk stops anywhere: the last line, with no line break, is no JSON. It is said to
    be cut (not "not JSON", which sends one to look for a wrong character), and --allow-incomplete imports the
    lines before it; a line in the middle that is no JSON is still refused as such."""
    lines = [line + "\n" for line in _exported(tmp_path)]
    cut = [*lines[:8], lines[8][: len(lines[8]) // 2]]  # the meta line, 6 nodes, half an edge line
    db = tmp_path / "copy.duckdb"
    with _kb(db) as kb:
        with pytest.raises(InvalidInputError) as refused:
            import_lines(kb, cut, source="cut.jsonl")
        assert str(refused.value).startswith("cut.jsonl:9: the file ends in the middle of this line: it is "
                                              "incomplete (copied or written only in part); nothing was imported.")
        assert "--allow-incomplete" in str(refused.value)
    assert _nodes(db) == 0
    with _kb(db) as kb:
        summary = import_lines(kb, cut, source="cut.jsonl", allow_incomplete=True)
    assert (summary.nodes_created, summary.complete) == (6, False)
    assert "is incomplete" in summary.completeness
    with _kb(tmp_path / "other.duckdb") as kb:  # the same half line followed by others: an error in the file
        with pytest.raises(InvalidInputError, match=r"^middle.jsonl:9: not JSON \("):
            import_lines(kb, [*cut[:8], cut[8] + "\n", *lines[9:]], source="middle.jsonl", allow_incomplete=True)
