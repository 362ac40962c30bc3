"""Peak memory of `duckgraph import`: generates a duckgraph export of N lines, imports it into a fresh file with
`duckgraph import` in a subprocess, and reports the subprocess's peak resident memory (ru_maxrss) and its time;
then the peak of `duckgraph stats` on the imported file: what any process that opens a file of that size holds
(the store's mirror, DuckDB's indexes), to tell import's own share from it.

    python contrib/bench/import_memory.py [--lines 50000 500000] [--baseline /tmp/h/.venv/bin/duckgraph]
                                          [--no-embeddings] [--keep DIR]

The file is what `duckgraph export --embeddings` writes for the default embedder (its id, 384 dimensions): a
meta line, then per 20 lines 1 document with 3 chunks, 9 entities (a description, 2 observations) and 7
relations; every chunk, entity and relation carries a vector (random unit vectors, 5 decimals), so the import
computes none and the model is never loaded. `--no-embeddings` leaves them out (the import then embeds every
text: minutes per 10k lines on a laptop). `--keep` reuses a file of the same size left there by an earlier run. `--baseline` runs another install's `duckgraph` on the same file in the
same run (e.g. the code before a change: a git worktree of HEAD with a venv, see docs/performance.md), each
import alternating with the other.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EMBEDDER = {"id": "sentence-transformers:all-MiniLM-L6-v2", "dimensions": 384}


def vector(rng: random.Random, dims: int) -> list[float]:
    values = [rng.gauss(0.0, 1.0) for _ in range(dims)]
    norm = sum(v * v for v in values) ** 0.5
    return [round(v / norm, 5) for v in values]


def generate(path: Path, lines: int, embeddings: bool) -> None:
    """Write an export of about `lines` lines (see the module doc)."""
    rng = random.Random(7)
    dims = EMBEDDER["dimensions"]

    def line(obj: dict) -> str:
        if embeddings and obj["kind"] in ("chunk", "node", "edge"):
            obj["embedding"] = vector(rng, dims)
        return json.dumps(obj, separators=(",", ":")) + "\n"

    groups = max(1, (lines - 1) // 20)
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"kind": "meta", "format": "duckgraph", "version": 1, "schema_version": None,
                              "embedder": EMBEDDER, "embeddings": embeddings}) + "\n")
        chunk_id = 0
        for g in range(groups):
            text = " ".join(f"Passage {g}.{i}: the Analytical Engine of group {g} had a mill and a store."
                            for i in range(3))
            out.write(line({"kind": "document", "id": f"doc-{g}", "title": f"Document {g}", "text": text}))
            for ordinal in range(3):
                chunk_id += 1
                out.write(line({"kind": "chunk", "id": chunk_id, "document_id": f"doc-{g}", "ordinal": ordinal,
                                "text": f"Passage {g}.{ordinal}: the Analytical Engine of group {g}."}))
        node_id = 0
        for g in range(groups):
            for i in range(9):
                node_id += 1
                out.write(line({"kind": "node", "id": node_id, "name": f"Entity {g}-{i}", "type": "Thing",
                                "description": f"Entity {i} of group {g}, a part of the Analytical Engine.",
                                "observations": [f"Seen in passage {g}.{i % 3}.", f"Weighs {i} kg."]}))
        edge_id = 0
        for g in range(groups):
            base = g * 9
            for i in range(7):
                edge_id += 1
                out.write(line({"kind": "edge", "id": edge_id, "source_id": base + i + 1, "target_id": base + i + 2,
                                "type": "PART_OF", "description": f"Entity {g}-{i} is part of Entity {g}-{i + 1}."}))


def count_lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for _ in handle)


def run_import(duckgraph: str, export: Path, workdir: Path) -> tuple[float, float, str]:
    """(peak RSS in MB, seconds, the last line it printed) of one `duckgraph import` into a fresh file."""
    for leftover in workdir.glob("import.duckdb*"):
        leftover.unlink()
    return run(duckgraph, ["import", str(export)], workdir)


def run(duckgraph: str, args: list[str], workdir: Path) -> tuple[float, float, str]:
    """(peak RSS in MB, seconds, the last line it printed) of one `duckgraph` command on workdir's file."""
    db = workdir / "import.duckdb"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "XDG_CONFIG_HOME": str(workdir / "config")}
    env.pop("DUCKGRAPH_EMBEDDER", None)
    started = time.perf_counter()
    with (workdir / "out.txt").open("w+") as out, (workdir / "err.txt").open("w+") as err:
        process = subprocess.Popen([duckgraph, *args, "--db", str(db)], env=env, stdout=out,
                                   stderr=err)
        _, status, usage = os.wait4(process.pid, 0)  # the child's own peak, not the largest of all children
        process.returncode = code = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        said = (err.read() if code else out.read()).strip().splitlines()
    tail = said[-1] if said else ""
    return usage.ru_maxrss / 1024, seconds, f"FAILED ({code}): {tail}" if code else tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, nargs="+", default=[50_000, 500_000])
    parser.add_argument("--baseline", help="another install's duckgraph executable, run on the same files")
    parser.add_argument("--no-embeddings", action="store_true")
    parser.add_argument("--keep", type=Path, help="keep the generated files in this folder")
    args = parser.parse_args(argv)

    current = shutil.which("duckgraph", path=str(Path(sys.executable).parent)) or "duckgraph"
    installs = [("current", current)] + ([("baseline", args.baseline)] if args.baseline else [])
    workdir = Path(tempfile.mkdtemp(prefix="duckgraph-import-memory-"))
    try:
        for lines in args.lines:
            export = (args.keep or workdir) / f"export-{lines}.jsonl"
            export.parent.mkdir(parents=True, exist_ok=True)
            if not (args.keep and export.exists() and count_lines(export) == 1 + max(1, (lines - 1) // 20) * 20):
                generate(export, lines, not args.no_embeddings)
            size = export.stat().st_size / 2**20
            print(f"{lines} lines, {size:.0f} MB file")
            for label, duckgraph in (installs if lines % 2 else list(reversed(installs))):
                peak, seconds, said = run_import(duckgraph, export, workdir)
                print(f"  {label:9} peak RSS {peak:8.0f} MB  {seconds:7.1f} s  {said[:110]}", flush=True)
                if label == "current":
                    peak, seconds, _ = run(duckgraph, ["stats"], workdir)
                    print(f"  {'open':9} peak RSS {peak:8.0f} MB  {seconds:7.1f} s  duckgraph stats on the imported "
                          "file", flush=True)
            if args.keep is None:
                export.unlink()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
