"""Keeps contrib/bench/write.py from rotting: a tiny run on real DuckDB files. Nothing here checks a speed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np

BENCH = Path(__file__).resolve().parents[2] / "contrib" / "bench"
sys.path.insert(0, str(BENCH))

import write  # noqa: E402


def test_vectors_alone_writes_every_call_s_vectors_into_the_store_s_tables(tmp_path: Path):
    writing, closing = write.vectors_alone(tmp_path, [(100, 150), (50, 0)], 8)
    assert writing > 0 and closing >= 0
    with duckdb.connect(str(tmp_path / "vectors-alone.duckdb"), read_only=True) as con:
        nodes = con.execute("SELECT count(*), count(DISTINCT node_id), max(node_id) FROM node_vectors").fetchone()
        edges = con.execute("SELECT count(*), count(DISTINCT edge_id) FROM edge_vectors").fetchone()
        norms = np.linalg.norm(np.array([r[0] for r in con.execute("SELECT embedding FROM node_vectors").fetchall()]),
                               axis=1)
    assert nodes == (150, 150, 150) and edges == (150, 150)
    assert (norms > 0).all()


def test_the_script_prints_the_rates_and_the_ceiling_of_the_same_calls():
    run = subprocess.run([sys.executable, str(BENCH / "write.py"), "--nodes", "600", "--batch", "300", "--dims", "8"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("600 nodes and ") and "in 2 calls" in lines[0] and "nodes/s" in lines[0]
    assert lines[1].startswith("close (final checkpoint): ")
    assert lines[2].startswith("the same calls' vectors alone through DuckDB: ") and "vectors/s" in lines[2]
