"""`duckgraph ui` as a child process for the UI's tests: started on a free port of 127.0.0.1, its address read
from what it prints, stopped with SIGTERM."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
UI = [sys.executable, "-m", "duckgraph.core.cli", "ui"]
ADDRESS = re.compile(r"the web UI is at (http://\S+)")
START_SECONDS = 120


def child_env(home: Path, *, fake_embedder: bool = False, **extra: str) -> dict[str, str]:
    """Offline, a private HOME (no user config), the run's cache (tests/conftest.py), the checkout importable;
    with `fake_embedder`, the hashing embedder of tests/fakes.py as the configured one (an entry-point plugin, as
    tests/e2e/test_shared_file.py makes it), for files written with it."""
    home.mkdir(parents=True, exist_ok=True)
    path = [str(ROOT)]
    if fake_embedder:
        dist_info = home / "site" / "duckgraph_test_fake-0.1.dist-info"
        dist_info.mkdir(parents=True, exist_ok=True)
        (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: duckgraph-test-fake\nVersion: 0.1\n")
        (dist_info / "entry_points.txt").write_text("[duckgraph]\nfake = tests.fake_embedder_plugin\n")
        path.insert(0, str(home / "site"))
        extra = {"DUCKGRAPH_EMBEDDER": "fake", **extra}
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", str(home / ".cache")),
           "PYTHONPATH": os.pathsep.join(path)}
    return {**env, **extra}


@contextmanager
def running_ui(db: Path, log: Path, env: dict[str, str], *args: str) -> Iterator[str]:
    """The address `duckgraph ui --db db --port 0 ARGS` prints, once its overview answers (with --token, once
    it answers at all)."""
    with log.open("w", encoding="utf-8") as errors:
        process = subprocess.Popen([*UI, "--db", str(db), "--port", "0", *args], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=errors, env=env, cwd=db.parent)
    try:
        url = _wait_for_address(process, log)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_for_address(process: subprocess.Popen, log: Path) -> str:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        found = ADDRESS.search(log.read_text(encoding="utf-8"))
        if found:
            break
        if process.poll() is not None:
            raise AssertionError(f"duckgraph ui exited with {process.returncode}:\n{log.read_text()}")
        time.sleep(0.05)
    else:
        raise AssertionError(f"duckgraph ui printed no address:\n{log.read_text()}")
    url = found.group(1)
    while time.monotonic() < deadline:  # the address is printed just before uvicorn serves it
        try:
            urllib.request.urlopen(url.split("?")[0] + "static/ui.css", timeout=5).close()
            return url
        except urllib.error.HTTPError:
            return url  # it answers (a token is needed)
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"duckgraph ui did not answer at {url}:\n{log.read_text()}")


def get_json(url: str, **headers: str) -> Any:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as response:
        return json.load(response)
