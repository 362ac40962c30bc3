"""Keeps contrib/bench/first_calls.py from rotting: one spawn of a real server. Nothing here checks a speed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "contrib" / "bench"


@pytest.mark.model
def test_the_script_writes_searches_and_reads_the_memory_of_each_variant(minilm):  # minilm: the export cached
    run = subprocess.run([sys.executable, str(BENCH / "first_calls.py"), "--runs", "1", "--nodes", "6", "--edges",
                          "6", "--settle", "0", "--variant", 'float32={"precision": "float32"}'],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("a search right after tools/list, then 6 entities and 6 relations written")
    assert lines[1] == 'float32 ({"precision": "float32"}):'
    figures = {m["key"]: float(m["median"].replace(",", "")) for m in (
        re.match(r"\s*(?P<key>\w+):\s+\S+\s+(?P<median>\S+)\s+\S+$", line) for line in lines[2:]) if m}
    assert set(figures) == {"tools_list_ms", "first_search_ms", "then_write_ms", "then_search_ms", "rss_mb", "peak_mb"}
    assert all(value > 0 for value in figures.values()) and figures["peak_mb"] >= figures["rss_mb"]
