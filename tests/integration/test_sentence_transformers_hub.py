"""A sentence-transformers model named on the Hugging Face hub when the hub cannot be reached (no network; here an
HF_ENDPOINT on a closed port) or is turned off (HF_HUB_OFFLINE): one not in the cache is refused within seconds,
saying how to get it, and at once on later calls (the hub's client retried for ~200 s, then ~75 s a call, past MCP
hosts' ~60 s); one in the cache loads from it without a retry; the default model (a folder in the install) never
asks the hub. Each runs in a process of its own: huggingface_hub reads its variables once, at import."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from duckgraph.plugins.sentence_transformers import bundled_model_path

CALLS = """
import json, sys, time
from duckgraph.plugins.sentence_transformers import SentenceTransformersEmbedder
from duckgraph.ports import EmbedderError

calls = []
for model in sys.argv[2:]:  # on PyTorch: the ONNX export would hide whether the model itself loads
    embedder = SentenceTransformersEmbedder(model=model, onnx_queries=False, onnx_batches=False)
    for _ in range(int(sys.argv[1])):
        start = time.monotonic()
        try:
            vector = embedder.embed_query("Marie Curie discovered radium.")
            calls.append({"vector": [round(float(x), 5) for x in vector]})
        except EmbedderError as exc:
            calls.append({"error": str(exc)})
        calls[-1]["seconds"] = time.monotonic() - start
print(json.dumps(calls))
"""


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def embed(tmp_path: Path, models: list[str], calls: int, hf_home: Path, *, offline: bool = False
          ) -> tuple[list, str]:
    """`calls` queries embedded by each of `models` in turn, in one process with the hub out of reach."""
    env = {name: value for name, value in os.environ.items()
           if name not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "SENTENCE_TRANSFORMERS_HOME", "HF_HUB_CACHE")}
    env.update(HF_HOME=str(hf_home), HF_ENDPOINT=f"http://127.0.0.1:{closed_port()}", HOME=str(tmp_path))
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    done = subprocess.run([sys.executable, "-c", CALLS, str(calls), *models], capture_output=True, text=True,
                          timeout=600, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def refusal(model: str, hf_home: Path, reason: str) -> str:
    return (f"the model {model!r} is not in the Hugging Face cache ({hf_home / 'hub'}) and {reason}: run `duckgraph "
            "doctor` once with the network (and HF_HUB_OFFLINE unset) and the same embedder settings: it loads the "
            "model, which downloads it into the cache; or copy a cache that holds it there (HF_HOME sets where the "
            "cache is). Then restart the server: a process that found the model missing does not ask again")


def test_a_model_not_in_the_cache_with_the_hub_out_of_reach_is_refused_in_seconds_then_at_once(tmp_path: Path):
    hf_home = tmp_path / "empty-cache"
    calls, stderr = embed(tmp_path, ["all-MiniLM-L12-v2"], 3, hf_home)
    first, *later = calls
    assert first["error"].startswith(refusal("all-MiniLM-L12-v2", hf_home, "X").split(" and X")[0])
    assert " cannot be reached (ConnectError" in first["error"]
    assert first["seconds"] < 20  # the probe's 5 s at most, and no PyTorch import (imports on a busy machine)
    for call in later:  # remembered: the hub is not asked again
        assert call["error"] == first["error"] and call["seconds"] < 0.5
    assert "Retrying" not in stderr
    assert not (hf_home / "hub").exists() or not any((hf_home / "hub").iterdir())


def test_with_hf_hub_offline_a_model_not_in_the_cache_says_so(tmp_path: Path):
    hf_home = tmp_path / "empty-cache"
    calls, _ = embed(tmp_path, ["sentence-transformers/all-MiniLM-L12-v2"], 2, hf_home, offline=True)
    expected = refusal("sentence-transformers/all-MiniLM-L12-v2", hf_home, "HF_HUB_OFFLINE is set")
    assert [call["error"] for call in calls] == [expected, expected]
    assert calls[1]["seconds"] < 0.5


def hub_cache_with(hf_home: Path, name: str) -> None:
    """A Hugging Face cache holding the default model's files as the model sentence-transformers/`name`, laid out as
    the hub's client lays it out (refs/main names the snapshot), the files linked rather than copied."""
    repo = hf_home / "hub" / f"models--sentence-transformers--{name}"
    revision = "0123456789abcdef0123456789abcdef01234567"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    for source in bundled_model_path().rglob("*"):
        if source.is_file():
            target = repo / "snapshots" / revision / source.relative_to(bundled_model_path())
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(source)


@pytest.mark.model
def test_a_cached_model_loads_from_the_cache_without_retrying_the_hub_and_the_default_never_asks_it(
        tmp_path: Path, minilm):
    hf_home = tmp_path / "cache"
    hub_cache_with(hf_home, "cached-minilm")
    calls, stderr = embed(tmp_path, ["cached-minilm", "all-MiniLM-L6-v2"], 2, hf_home)
    expected = [round(float(x), 5) for x in minilm.embed_query("Marie Curie discovered radium.")]
    for call in calls:  # the cached model's two calls, then the default's
        assert call["vector"] == pytest.approx(expected, abs=2e-4)
    # The hub's client logs each retry ("Retrying in 1s [Retry 1/5]"): none, for either model.
    assert "Retrying" not in stderr
    assert "thrown while requesting" not in stderr
