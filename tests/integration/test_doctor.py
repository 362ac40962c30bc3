"""`duckgraph doctor` diagnoses for real: it builds the configured embedder and embeds a probe, reaches the
extractor's model, reads the file without ever creating it, and exits 1 with the fix when something is broken.

Ollama is the HTTP stand-in of tests/ollama_server.py (real sockets, Ollama's answers); "Ollama down" is a local
port nobody listens on. The missing extra is a fresh interpreter in which torch and sentence-transformers cannot
be imported.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from duckgraph.core import plugin_manager as plugin_manager_module
from duckgraph.core.cli import main
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.ollama import OllamaEmbedder
from duckgraph.ports import EmbedderError, hookimpl
from tests.fakes import HashingEmbedder
from tests.ollama_server import FakeOllama


def closed_port_url() -> str:
    """The URL of a local port nobody listens on: Ollama is not running."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """No user config and no DUCKGRAPH_* variable but those a test sets."""
    config = tmp_path / "empty-config.toml"
    config.write_text("", encoding="utf-8")
    for name in [n for n in os.environ if n.startswith("DUCKGRAPH_")]:
        monkeypatch.delenv(name)
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    monkeypatch.setenv("DUCKGRAPH_CONFIG", str(config))
    return monkeypatch


def use_ollama(env: pytest.MonkeyPatch, base_url: str, *, extractor: str | None = None,
               embedder: str = "all-minilm") -> None:
    env.setenv("DUCKGRAPH_EMBEDDER", "ollama")
    env.setenv("DUCKGRAPH_EMBEDDER_OPTIONS", json.dumps({"base_url": base_url, "model": embedder}))
    if extractor is not None:
        env.setenv("DUCKGRAPH_EXTRACTOR", "ollama")
        env.setenv("DUCKGRAPH_EXTRACTOR_OPTIONS", json.dumps({"base_url": base_url, "model": extractor}))


def doctor(capsys, db: Path) -> tuple[int, dict]:
    code = main(["doctor", "--db", str(db), "--json"])
    return code, json.loads(capsys.readouterr().out)


def checks(report: dict) -> dict[str, bool]:
    return {check["check"]: check["ok"] for check in report["checks"]}


# -- Ollama: up, down, model missing --------------------------------------------------------------------------


def test_ollama_up_embeds_a_probe_reaches_the_chat_model_and_only_warns(env, tmp_path: Path, capsys):
    with FakeOllama(models=("all-minilm", "qwen3:8b")) as ollama:
        use_ollama(env, ollama.base_url, extractor="qwen3:8b")
        code, report = doctor(capsys, tmp_path / "kb.duckdb")
        assert code == 0, report
        assert report["problems"] == []
        assert checks(report) == {"plugins": True, "converters": True, "embedder": True, "extractor": True,
                                  "database": True}
        assert report["extractor"] == {"id": "ollama:qwen3:8b"}
        embedded = [r["body"] for r in ollama.requests_to("/api/embed")]
        assert {body["model"] for body in embedded} == {"all-minilm"}
        assert [len(body["input"]) for body in embedded][-2:] == [1, 8]  # a query, then a batch
        assert [r["body"]["model"] for r in ollama.requests_to("/api/show")] == ["qwen3:8b"]
        assert ollama.requests_to("/api/chat") == []  # reaching the model needs no extraction
        # all-minilm behind Ollama is the local default's model: its calibrated floor holds.
        assert report["relevance_floor"] == {"value": 0.40, "from": "calibrated for ollama:all-minilm:latest"}
        assert not any(w.startswith("no relevance floor") for w in report["warnings"])

        assert main(["doctor", "--db", str(tmp_path / "kb.duckdb")]) == 0
        printed = capsys.readouterr().out
    assert "check embedder: ok, ollama:all-minilm:latest embedded a query and a batch of 8 (384 dimensions)" in printed
    assert "check extractor: ok, ollama:qwen3:8b is reachable" in printed


def test_an_ollama_model_with_no_calibrated_floor_works_degraded_and_doctor_says_so(env, tmp_path: Path, capsys):
    # all-minilm:33m is all-MiniLM-L12-v2: not the model the floor was calibrated for.
    with FakeOllama(models=("all-minilm:33m",)) as ollama:
        use_ollama(env, ollama.base_url, embedder="all-minilm:33m")
        code, report = doctor(capsys, tmp_path / "kb.duckdb")
        assert code == 0, report
        assert report["relevance_floor"] is None
        assert any(w.startswith("no relevance floor: ollama:all-minilm:33m") for w in report["warnings"])
        assert main(["doctor", "--db", str(tmp_path / "kb.duckdb")]) == 0
    assert "warning:   no relevance floor" in capsys.readouterr().out


def test_ollama_down_is_a_problem_that_says_to_start_it(env, tmp_path: Path, capsys):
    url = closed_port_url()
    use_ollama(env, url, extractor="qwen3:8b")
    code, report = doctor(capsys, tmp_path / "kb.duckdb")
    assert code == 1
    embedder_problem, extractor_problem = report["problems"]
    for problem in (embedder_problem, extractor_problem):
        assert f"cannot reach Ollama at {url}: is it running? Start it with `ollama serve`" in problem
        assert "OLLAMA_HOST or the base_url option" in problem
    assert embedder_problem.startswith("the embedder ollama:all-minilm:latest cannot embed: ")
    assert extractor_problem.startswith("the extractor ollama:qwen3:8b cannot extract: ")
    assert checks(report) == {"plugins": True, "converters": True, "embedder": False, "extractor": False,
                              "database": True}


def test_a_model_not_pulled_is_a_problem_that_says_what_to_pull(env, tmp_path: Path, capsys):
    with FakeOllama(models=("llama3.2",)) as ollama:
        url = ollama.base_url
        use_ollama(env, url, extractor="qwen3:8b")
        code, report = doctor(capsys, tmp_path / "kb.duckdb")
    assert code == 1
    assert report["problems"] == [
        f"the embedder ollama:all-minilm:latest cannot embed: Ollama at {url} does not have the model "
        "'all-minilm': run `ollama pull all-minilm`",
        f"the extractor ollama:qwen3:8b cannot extract: Ollama at {url} does not have the model "
        "'qwen3:8b': run `ollama pull qwen3:8b`",
    ]


def test_an_embedder_giving_empty_vectors_is_a_problem_not_an_ok_of_0_dimensions(env, tmp_path: Path, capsys):
    with FakeOllama(embed_fn=lambda texts: [[] for _ in texts]) as ollama:
        use_ollama(env, ollama.base_url)
        code, report = doctor(capsys, tmp_path / "kb.duckdb")
    assert code == 1 and checks(report)["embedder"] is False
    assert report["problems"] == [(
        "the embedder ollama:all-minilm:latest cannot embed: embedder 'ollama:all-minilm:latest' gives "
        "0-dimensional (empty) vectors, which cannot be stored or searched: check its model (an embedding model?) "
        "and its dimensions option")]


def test_an_embedding_model_configured_as_the_extractor_is_a_problem(env, tmp_path: Path, capsys):
    with FakeOllama(models=("all-minilm",)) as ollama:
        use_ollama(env, ollama.base_url, extractor="all-minilm")
        code, report = doctor(capsys, tmp_path / "kb.duckdb")
    assert code == 1
    assert report["problems"] == [
        "the extractor ollama:all-minilm:latest cannot extract: all-minilm cannot chat (embedding): configure a chat "
        "model for extraction, e.g. qwen3:8b (`ollama pull qwen3:8b`)"]


# -- the file: never created, the embedder it was built with ----------------------------------------------------


def test_a_missing_file_is_reported_and_not_created(env, tmp_path: Path, capsys):
    db = tmp_path / "not-yet" / "kb.duckdb"
    with FakeOllama() as ollama:
        use_ollama(env, ollama.base_url)
        code, report = doctor(capsys, db)
        assert main(["doctor", "--db", str(db)]) == 0
        printed = capsys.readouterr().out
    assert code == 0, report
    note = f"no database yet at {db}: it is created when first opened"
    assert report["database"] == {"path": str(db), "exists": False, "note": note}
    assert "store" not in report and report["problems"] == []
    assert f"database:  {db} (no database yet: it is created when first opened)" in printed
    assert not (tmp_path / "not-yet").exists()  # neither the file nor its folder


def test_a_file_that_could_not_be_created_is_a_problem(env, tmp_path: Path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    with FakeOllama() as ollama:
        use_ollama(env, ollama.base_url)
        code, report = doctor(capsys, blocker / "kb.duckdb")
    assert code == 1
    assert report["problems"] == [f"{blocker / 'kb.duckdb'} cannot be created: {blocker} is not a writable folder "
                                  "for this user; choose another file with --db or DUCKGRAPH_DB"]


def test_an_existing_file_is_read_and_left_as_it_was(env, tmp_path: Path, capsys):
    db = tmp_path / "kb.duckdb"
    with FakeOllama() as ollama:
        with KnowledgeBase(DuckDBStore(db), OllamaEmbedder(base_url=ollama.base_url)) as kb:
            kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])
        before = sorted(p.name for p in tmp_path.iterdir())
        use_ollama(env, ollama.base_url)
        code, report = doctor(capsys, db)
    assert code == 0, report
    assert report["database"] == {"path": str(db), "exists": True}
    assert report["store"]["embedder"] == {"id": "ollama:all-minilm:latest", "dimensions": 384}
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_configured_namespace_that_holds_nothing_beside_others_is_a_warning(env, tmp_path: Path, capsys):
    # A memory kept in "work": a server started with the default namespace would answer "nothing relevant".
    db = tmp_path / "kb.duckdb"
    with FakeOllama() as ollama:
        with KnowledgeBase(DuckDBStore(db), OllamaEmbedder(base_url=ollama.base_url)) as kb:
            kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [], namespace="work")
        use_ollama(env, ollama.base_url)
        env.setenv("DUCKGRAPH_NAMESPACE", "Work")
        code, report = doctor(capsys, db)
        assert code == 0, report
        assert [w for w in report["warnings"] if "holds nothing" in w] == [
            "the namespace 'Work', where calls that name no namespace read and write, holds nothing, while the file "
            "holds others: did you mean 'work' (names are case-sensitive)? The file's namespaces are 'work'. Set the "
            "one you meant (--namespace, DUCKGRAPH_NAMESPACE or the config file)"]
        env.setenv("DUCKGRAPH_NAMESPACE", "work")
        code, report = doctor(capsys, db)
    assert not [w for w in report["warnings"] if "holds nothing" in w], report["warnings"]


def test_an_embedder_mismatch_is_a_problem_with_the_fix(env, tmp_path: Path, capsys):
    db = tmp_path / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])
    with FakeOllama() as ollama:
        use_ollama(env, ollama.base_url)
        code, report = doctor(capsys, db)
    assert code == 1
    assert report["problems"] == [
        "the file was built with 'test:fake-hashing' but 'ollama:all-minilm:latest' is configured: select the plugin "
        "that gives 'test:fake-hashing' again: DUCKGRAPH_EMBEDDER (use in [embedder]) takes the id that plugin "
        "registers (one of the embedder ids duckgraph doctor lists), not 'test:fake-hashing', with the options that "
        f"gave it, or move the knowledge to a new file with the new embedder: duckgraph export -o kb.jsonl --db {db}, "
        "then duckgraph import --re-embed kb.jsonl --db NEW.duckdb"]


def test_the_same_model_name_with_other_vectors_is_a_mismatch(env, tmp_path: Path, capsys):
    """A model re-pulled under the same name with another width: the id matches, the vectors do not."""
    db = tmp_path / "kb.duckdb"
    with FakeOllama() as ollama:
        with KnowledgeBase(DuckDBStore(db), OllamaEmbedder(base_url=ollama.base_url)) as kb:
            kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])
        ollama.wrong_dimensions = 768
        use_ollama(env, ollama.base_url)
        code, report = doctor(capsys, db)
    assert code == 1
    assert report["problems"][0].startswith(
        "the file was built with 'ollama:all-minilm:latest' but 'ollama:all-minilm:latest (768 dimensions, the file "
        "has 384)' is configured")


# -- an embedder that cannot load -------------------------------------------------------------------------------


class _NeedsAnExtra:
    """A plugin whose factory fails as an adapter does when its optional package is not installed."""

    @hookimpl
    def register_embedders(self, register):
        def factory(**options):
            raise EmbedderError("the package 'heavy-embeddings' is not installed; run: pip install 'duckgraph[heavy]'")

        register("needs-extra", factory)


def test_an_embedder_whose_plugin_cannot_build_it_is_a_problem(env, tmp_path: Path, capsys):
    build = plugin_manager_module.build_plugin_manager

    def with_the_plugin(**kwargs):
        pm = build(load_entry_points=False)
        pm.register(_NeedsAnExtra(), name="needs-extra")
        return pm

    env.setattr(plugin_manager_module, "build_plugin_manager", with_the_plugin)
    env.setenv("DUCKGRAPH_EMBEDDER", "needs-extra")
    code, report = doctor(capsys, tmp_path / "kb.duckdb")
    assert code == 1
    assert report["embedder"] == {"id": "needs-extra (not created)"}
    assert report["problems"] == [
        "the embedder 'needs-extra' cannot be created: the package 'heavy-embeddings' is not installed; run: "
        "pip install 'duckgraph[heavy]'"]
    assert not (tmp_path / "kb.duckdb").exists()


BLOCKED_IMPORTS = """
    import importlib.abc, sys

    class NotInstalled(importlib.abc.MetaPathFinder):
        # As in an installation without the [local] extra: these packages cannot be imported.
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in {"torch", "sentence_transformers"}:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NotInstalled())
    from duckgraph.core.cli import main
    sys.exit(main(sys.argv[1:]))
"""


def test_the_default_embedder_without_its_extra_is_a_problem_that_says_what_to_install(tmp_path: Path):
    config = tmp_path / "empty-config.toml"
    config.write_text("", encoding="utf-8")
    environment = {name: value for name, value in os.environ.items() if not name.startswith("DUCKGRAPH_")}
    # An empty cache: no ONNX export of the model from an earlier run could answer without PyTorch.
    environment.update(DUCKGRAPH_CONFIG=str(config), XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(BLOCKED_IMPORTS), "doctor", "--json", "--db",
                           str(tmp_path / "kb.duckdb")], capture_output=True, text=True, timeout=120, env=environment)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["problems"] == [
        "the embedder sentence-transformers:all-MiniLM-L6-v2 cannot embed: sentence-transformers is not installed; "
        "run: pip install 'duckgraph[local]' or configure another embedder (DUCKGRAPH_EMBEDDER=ollama)"]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "kb.duckdb").exists()
