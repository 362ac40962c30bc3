"""The Ollama embedder over real HTTP against FakeOllama (tests/ollama_server.py): identity, the width probe,
batching, where the server URL comes from, vectors equal to the local model's, errors that say what to do, and
a knowledge base that behaves the same whether MiniLM runs in-process or behind Ollama.

Nothing inside the plugin is mocked: every request goes over a socket to the fake server.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest

from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from duckgraph.core.plugin_manager import create
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.ollama import OllamaEmbedder
from duckgraph.ports import EmbedderError, EmbedderMismatchError
from tests.e2e.scenario import DOCUMENTS, EDGES, NODES
from tests.fakes import HashingEmbedder
from tests.ollama_server import FakeOllama, minilm_embed_fn
from tests.stored import file_meta

ROOT = Path(__file__).resolve().parents[2]
TEXTS = [f"Sentence number {i} about the Analytical Engine." for i in range(10)]
EMPTY_COUNTS = {"nodes": 0, "edges": 0, "documents": 0, "chunks": 0}


def counts(kb: KnowledgeBase) -> dict[str, int]:
    stats = kb.stats()
    return {key: stats[key] for key in EMPTY_COUNTS}


def closed_port_url() -> str:
    """The URL of a local port nobody listens on: Ollama is not running."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def seed(kb: KnowledgeBase) -> None:
    kb.add_documents([DocumentInput(id="doc-ada", text="Ada Lovelace wrote about the Analytical Engine.")])
    kb.add_knowledge_graph(
        [NodeInput(name="Ada Lovelace", type="Person"), NodeInput(name="Analytical Engine", type="Machine")],
        [EdgeInput(source="Ada Lovelace", target="Analytical Engine", type="WROTE_ABOUT")],
    )


@pytest.fixture
def ollama():
    """FakeOllama with instant hashing vectors (384 dimensions, like all-minilm)."""
    with FakeOllama() as server:
        yield server


@pytest.fixture(scope="module")
def minilm_fn(minilm):
    return minilm_embed_fn(minilm)


@pytest.fixture
def minilm_ollama(minilm_fn):
    """FakeOllama serving the real all-MiniLM-L6-v2 vectors."""
    with FakeOllama(embed_fn=minilm_fn) as server:
        yield server


# -- 1. identity, probe, batching, options -------------------------------------------------------------------


def test_id_names_the_model_with_its_tag_and_construction_sends_nothing(ollama):
    assert OllamaEmbedder(base_url=ollama.base_url).id == "ollama:all-minilm:latest"
    assert OllamaEmbedder("all-minilm:latest", base_url=ollama.base_url).id == "ollama:all-minilm:latest"
    assert OllamaEmbedder("nomic-embed-text:v1.5", base_url=ollama.base_url).id == "ollama:nomic-embed-text:v1.5"
    in_registry = OllamaEmbedder("localhost:5000/me/embed", base_url=ollama.base_url)
    assert in_registry.id == "ollama:localhost:5000/me/embed:latest"
    assert ollama.requests == []


def test_the_plugin_is_registered_as_ollama(plugin_manager, ollama):
    embedder = create(plugin_manager, "embedder", "ollama", base_url=ollama.base_url, keep_alive="5m")
    assert isinstance(embedder, OllamaEmbedder)
    assert embedder.id == "ollama:all-minilm:latest"
    assert ollama.requests == []


def test_dimensions_are_probed_once(ollama):
    embedder = OllamaEmbedder(base_url=ollama.base_url)
    assert [embedder.dimensions for _ in range(3)] == [384, 384, 384]
    embedder.embed_documents(["one text"])
    probes = ollama.requests_to("/api/embed")
    assert len(probes) == 2  # the probe, then the text: the width was not asked again
    assert probes[0]["body"]["model"] == "all-minilm"
    assert isinstance(probes[0]["body"]["input"], list) and len(probes[0]["body"]["input"]) == 1


def test_given_dimensions_skip_the_probe_and_batches_are_lists(ollama):
    embedder = OllamaEmbedder(base_url=ollama.base_url, dimensions=384, batch_size=4)
    assert embedder.dimensions == 384
    assert ollama.requests == []

    vectors = embedder.embed_documents(TEXTS)
    assert vectors.shape == (10, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    bodies = [r["body"] for r in ollama.requests_to("/api/embed")]
    assert len(ollama.requests) == len(bodies) == 3
    assert [b["input"] for b in bodies] == [TEXTS[0:4], TEXTS[4:8], TEXTS[8:10]]
    assert all(b["model"] == "all-minilm" and b["truncate"] is True for b in bodies)
    assert all("keep_alive" not in b for b in bodies)  # not set: Ollama's own default applies


def test_keep_alive_is_passed_through(ollama):
    OllamaEmbedder(base_url=ollama.base_url, keep_alive="30m").embed_documents(["a", "b"])
    OllamaEmbedder(base_url=ollama.base_url, keep_alive=-1, dimensions=384).embed_query("c")
    assert [r["body"]["keep_alive"] for r in ollama.requests_to("/api/embed")] == ["30m", "30m", -1]


@pytest.mark.parametrize("form", ["http://127.0.0.1:{port}", "127.0.0.1:{port}", "0.0.0.0:{port}"],
                         ids=["url", "host:port", "bind-all"])
def test_base_url_comes_from_ollama_host(ollama, monkeypatch, form):
    # Ollama itself accepts OLLAMA_HOST without a scheme, and 0.0.0.0 (what a server binds to) to mean this host.
    monkeypatch.setenv("OLLAMA_HOST", form.format(port=ollama.port))
    embedder = OllamaEmbedder()
    assert embedder.dimensions == 384
    assert len(ollama.requests_to("/api/embed")) == 1


def test_the_base_url_option_wins_over_ollama_host(ollama, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", closed_port_url())
    assert OllamaEmbedder(base_url=ollama.base_url).dimensions == 384
    assert len(ollama.requests) == 1


@pytest.mark.model
def test_vectors_equal_the_local_minilm(minilm_ollama, minilm):
    embedder = OllamaEmbedder(base_url=minilm_ollama.base_url)
    texts = ["Vera Rubin measured galaxy rotation curves.", "Pulsars were discovered in 1967.", "dark matter"]
    assert embedder.dimensions == minilm.dimensions == 384
    np.testing.assert_allclose(embedder.embed_documents(texts), minilm.embed_documents(texts), atol=1e-6)
    np.testing.assert_allclose(embedder.embed_query(texts[0]), minilm.embed_query(texts[0]), atol=1e-6)


# -- 2. failures: an EmbedderError that says what to do, and nothing written -----------------------------------


def test_ollama_not_running(db_path):
    url = closed_port_url()
    embedder = OllamaEmbedder(base_url=url)
    with pytest.raises(EmbedderError) as err:
        embedder.embed_documents(["hello"])
    message = str(err.value)
    assert url in message and "`ollama serve`" in message and "OLLAMA_HOST" in message

    with KnowledgeBase(DuckDBStore(db_path), OllamaEmbedder(base_url=url)) as kb:
        with pytest.raises(EmbedderError, match=re.escape(url)):
            seed(kb)
        with pytest.raises(EmbedderError, match="ollama serve"):
            kb.search("Ada Lovelace")
        assert counts(kb) == EMPTY_COUNTS
        assert kb.store.embedder_info() is None  # the file was not bound to a width nobody confirmed


def test_ollama_stopping_after_use_is_reported_the_same_way(db_path):
    with FakeOllama() as server:
        url = server.base_url
        kb = KnowledgeBase(DuckDBStore(db_path), OllamaEmbedder(base_url=url)).open()
        seed(kb)
        before = counts(kb)
    try:  # the server is gone; the client still holds a kept-alive connection to it
        with pytest.raises(EmbedderError) as err:
            kb.search("Ada Lovelace")
        assert url in str(err.value) and "`ollama serve`" in str(err.value)
        with pytest.raises(EmbedderError, match="ollama serve"):
            kb.add_knowledge_graph([NodeInput(name="Charles Babbage", type="Person")], [])
        assert counts(kb) == before
    finally:
        kb.close()


def test_model_not_pulled(db_path):
    with FakeOllama(models=["qwen3:8b"]) as server:
        embedder = OllamaEmbedder("all-minilm", base_url=server.base_url)
        with pytest.raises(EmbedderError) as err:
            embedder.embed_documents(["hello"])
        assert "`ollama pull all-minilm`" in str(err.value)
        assert server.base_url in str(err.value)

        with KnowledgeBase(DuckDBStore(db_path), OllamaEmbedder("nomic-embed-text", base_url=server.base_url)) as kb:
            with pytest.raises(EmbedderError, match=re.escape("`ollama pull nomic-embed-text`")):
                kb.add_documents([DocumentInput(id="d", text="Some text.")])
            assert counts(kb) == EMPTY_COUNTS
            assert kb.store.embedder_info() is None


def test_timeout(ollama, db_path):
    ollama.delay_seconds = 3
    embedder = OllamaEmbedder(base_url=ollama.base_url, timeout=0.3, dimensions=384)
    with pytest.raises(EmbedderError) as err:
        embedder.embed_documents(["hello"])
    message = str(err.value)
    assert "0.3 s" in message and "timeout" in message and ollama.base_url in message

    with KnowledgeBase(DuckDBStore(db_path), OllamaEmbedder(base_url=ollama.base_url, timeout=0.3)) as kb:
        with pytest.raises(EmbedderError, match="timeout"):
            seed(kb)
        ollama.delay_seconds = 0
        assert counts(kb) == EMPTY_COUNTS and kb.store.embedder_info() is None


def test_the_timeout_is_a_deadline_for_the_whole_request(ollama, db_path):
    # A byte every 0.4 s never lets a per-read timeout of 1.5 s expire; the answer would take minutes.
    ollama.drip_seconds = 0.4
    embedder = OllamaEmbedder(base_url=ollama.base_url, timeout=1.5, dimensions=384)
    started = time.monotonic()
    with pytest.raises(EmbedderError) as err:
        embedder.embed_documents(["hello"])
    assert time.monotonic() - started < 1.5 + 1.0
    message = str(err.value)
    assert "1.5 s deadline" in message and f"{ollama.base_url}/api/embed" in message and "timeout" in message

    with KnowledgeBase(DuckDBStore(db_path), OllamaEmbedder(base_url=ollama.base_url, timeout=1.5,
                                                            dimensions=384)) as kb:
        started = time.monotonic()
        with pytest.raises(EmbedderError, match="deadline"):
            kb.add_documents([DocumentInput(id="d", text="Some text about the Analytical Engine.")])
        with pytest.raises(EmbedderError, match="deadline"):
            kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])
        assert time.monotonic() - started < 2 * 1.5 + 2.0
        ollama.drip_seconds = 0
        assert counts(kb) == EMPTY_COUNTS


def test_http_500_carries_ollamas_error(ollama, db_path):
    ollama.fail_next(500, "boom")
    embedder = OllamaEmbedder(base_url=ollama.base_url)
    with pytest.raises(EmbedderError) as err:
        embedder.embed_documents(["hello"])
    assert "HTTP 500" in str(err.value) and "boom" in str(err.value) and "/api/embed" in str(err.value)

    with KnowledgeBase(DuckDBStore(db_path), OllamaEmbedder(base_url=ollama.base_url)) as kb:
        seed(kb)
        before = counts(kb)
        ollama.fail_next(500, "llama runner process has terminated", path="/api/embed")
        with pytest.raises(EmbedderError, match="HTTP 500.*llama runner process has terminated"):
            kb.add_documents([DocumentInput(id="doc-2", text="Charles Babbage designed it.")])
        assert counts(kb) == before
        assert kb.store.get_documents(["doc-2"], "default") == []


BROKEN_EMBED_REPLIES = {  # what a proxy or a broken server may answer: (status, body, what the error says)
    "500-json-string": (500, "upstream error", 'Ollama at {url} answered /api/embed with HTTP 500: "upstream error"'),
    "200-list": (200, [[0.1, 0.2]],
                 "Ollama at {url} sent a reply to /api/embed that is JSON but not an object (a list)"),
    "200-null": (200, None, "Ollama at {url} sent a reply to /api/embed that is JSON but not an object (null)"),
    # The vectors themselves are the port's to check (Embedder.vectors_from_json), in its words.
    "strings": (200, {"embeddings": [["a", "b"], ["c", "d"]]},
                '{embedder} returned a vector that is not a list of numbers (row 0, item 0 is "a")'),
    "nulls": (200, {"embeddings": [[0.1, None], [0.2, 0.3]]},
              "{embedder} returned a vector that is not a list of numbers (row 0, item 1 is null)"),
    "numeric-strings": (200, {"embeddings": [[0.1], ["0.2"]]},
                        '{embedder} returned a vector that is not a list of numbers (row 1, item 0 is "0.2")'),
    "booleans": (200, {"embeddings": [[0.1, True], [0.2, 0.3]]},
                 "{embedder} returned a vector that is not a list of numbers (row 0, item 1 is true)"),
    "nested": (200, {"embeddings": [[0.1, 0.2], [[0.2], 0.3]]},
               "{embedder} returned a vector that is not a list of numbers (row 1, item 0 is [0.2])"),
    "row-not-a-list": (200, {"embeddings": [[0.1, 0.2], "AAAA"]},
                       "{embedder} returned a vector that is not a list of numbers (row 1 is a string)"),
    "ragged": (200, {"embeddings": [[0.1], [0.2, 0.3]]}, "{embedder} returned vectors of different widths (1, 2)"),
    "one-empty": (200, {"embeddings": [[0.1], []]}, "{embedder} returned vectors of different widths (0, 1)"),
    "no-embeddings": (200, {"embeddings": "none"}, "{embedder} returned no vectors for 2 texts (a string, not a list)"),
    "too-few": (200, {"embeddings": [[0.1, 0.2]]}, "{embedder} returned 1 vector for 2 texts"),
    "nan": (200, {"embeddings": [[0.1, 0.2], [float("nan"), 0.3]]},  # Python's json sends and reads NaN
            "{embedder} returned a vector holding NaN, an infinity or a number too large for float32 (row 1)"),
    "too-large": (200, {"embeddings": [[1e39, 0.2], [0.1, 0.3]]},
                  "{embedder} returned a vector holding NaN, an infinity or a number too large for float32 (row 0)"),
}


@pytest.mark.parametrize("kind", list(BROKEN_EMBED_REPLIES))
def test_a_reply_that_is_not_vectors_is_an_embedder_error(ollama, kind):
    status, body, said = BROKEN_EMBED_REPLIES[kind]
    ollama.answer_next(status, body, path="/api/embed")
    with pytest.raises(EmbedderError) as err:
        OllamaEmbedder(base_url=ollama.base_url, dimensions=384).embed_documents(["one", "two"])
    # Each names where the reply came from: the server, or the embedder and the endpoint it asked.
    embedder = f"embedder 'ollama:all-minilm:latest' ({ollama.base_url}/api/embed)"
    assert said.format(url=ollama.base_url, embedder=embedder) in str(err.value)


def test_empty_vectors_are_refused_at_the_width_probe(db_path):
    with FakeOllama(embed_fn=lambda texts: [[] for _ in texts]) as server:
        embedder = OllamaEmbedder(base_url=server.base_url)
        with pytest.raises(EmbedderError, match=r"0-dimensional \(empty\) vectors"):
            _ = embedder.dimensions
        with KnowledgeBase(DuckDBStore(db_path), OllamaEmbedder(base_url=server.base_url)) as kb:
            with pytest.raises(EmbedderError, match="0-dimensional"):
                kb.add_documents([DocumentInput(id="d", text="Some text.")])
            assert counts(kb) == EMPTY_COUNTS and kb.store.embedder_info() is None
        with pytest.raises(EmbedderError, match="0-dimensional"):
            OllamaEmbedder(base_url=server.base_url, dimensions=0).embed_documents(["hello"])


@pytest.mark.parametrize("suffix", ["/v1", "/api"])
def test_a_url_without_the_api_is_not_reported_as_a_missing_model(ollama, suffix):
    # Ollama's route 404 is plain text ("404 page not found"); its missing model is JSON {"error": "model ..."}.
    with pytest.raises(EmbedderError) as err:
        OllamaEmbedder(base_url=ollama.base_url + suffix).embed_documents(["hello"])
    message = str(err.value)
    assert f"Ollama at {ollama.base_url}{suffix} has no /api/embed (HTTP 404)" in message
    assert "check base_url" in message and "without /v1" in message and "ollama pull" not in message
    ollama.answer_next(404, {"error": "page not found"}, path="/api/embed")  # a JSON 404 that names no model
    with pytest.raises(EmbedderError, match="has no /api/embed") as err:
        OllamaEmbedder(base_url=ollama.base_url).embed_documents(["hello"])
    assert "ollama pull" not in str(err.value)


def test_wrong_dimensions_for_an_existing_file(ollama, db_path):
    with KnowledgeBase(DuckDBStore(db_path), OllamaEmbedder(base_url=ollama.base_url)) as kb:
        seed(kb)
        before = counts(kb)
        assert before == {"nodes": 2, "edges": 1, "documents": 1, "chunks": 1}
        ollama.wrong_dimensions = 10  # the model behind the name changed
        with pytest.raises(EmbedderError, match="10-dimensional vectors, expected 384"):
            kb.add_knowledge_graph([NodeInput(name="Charles Babbage", type="Person")], [])
        with pytest.raises(EmbedderError, match="10-dimensional"):
            kb.add_documents([DocumentInput(id="doc-2", text="Charles Babbage designed it.")])
        assert counts(kb) == before

    # Reopened: the fresh embedder probes 10 dimensions and the file, built with 384, refuses it at bind.
    with KnowledgeBase(DuckDBStore(db_path), OllamaEmbedder(base_url=ollama.base_url)) as kb:
        with pytest.raises(EmbedderMismatchError) as err:
            kb.add_knowledge_graph([NodeInput(name="Charles Babbage", type="Person")], [])
        assert "384 dimensions" in str(err.value) and "10 dimensions" in str(err.value)
        with pytest.raises(EmbedderMismatchError):
            kb.search("Ada Lovelace")
        assert counts(kb) == before
        assert kb.store.embedder_info() == ("ollama:all-minilm:latest", 384)


def test_a_file_built_with_another_embedder_is_refused_before_asking_ollama(ollama, db_path):
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder(dimensions=384)) as kb:
        seed(kb)
        before = counts(kb)
    with KnowledgeBase(DuckDBStore(db_path), OllamaEmbedder(base_url=ollama.base_url)) as kb:
        with pytest.raises(EmbedderMismatchError, match="'ollama:all-minilm:latest' is configured"):
            kb.search("Ada Lovelace")
        assert counts(kb) == before
    assert ollama.requests == []


# -- 3. parity: the same knowledge base through Ollama as in-process ------------------------------------------

PARITY_QUERIES = [
    "Where did Vera Rubin work?",
    "Who discovered pulsars?",
    "What are stars made of?",
    "evidence for dark matter",
    "Who supervised the graduate student at Cambridge?",
]


def load_scenario(kb: KnowledgeBase) -> None:
    kb.add_documents([DocumentInput(**d) for d in DOCUMENTS])
    kb.add_knowledge_graph([NodeInput(**n) for n in NODES], [EdgeInput(**e) for e in EDGES])


def answers(kb: KnowledgeBase) -> list[tuple[list[str], list[str], list[float]]]:
    found = []
    for query in PARITY_QUERIES:
        result = kb.search(query, max_passages=3)
        found.append(([p.document_id for p in result.passages], [a.name for a in result.anchors],
                      [p.score for p in result.passages]))
    return found


@pytest.mark.model
def test_search_through_ollama_matches_the_local_model(tmp_path, minilm, minilm_ollama):
    with KnowledgeBase(DuckDBStore(tmp_path / "local.duckdb"), minilm) as kb:
        load_scenario(kb)
        local = answers(kb)
    with KnowledgeBase(DuckDBStore(tmp_path / "ollama.duckdb"), OllamaEmbedder(base_url=minilm_ollama.base_url)) as kb:
        load_scenario(kb)
        remote = answers(kb)
        assert kb.store.embedder_info() == ("ollama:all-minilm:latest", 384)

    assert [r[:2] for r in remote] == [r[:2] for r in local]
    for (_, _, remote_scores), (_, _, local_scores) in zip(remote, local):
        assert remote_scores == pytest.approx(local_scores, abs=1e-3)
    # The answers are about the question, not empty on both sides.
    assert local[0][0][0] == "doc-rubin" and "Vera Rubin" in local[0][1]
    assert local[1][0][0] == "doc-bell"


# -- 7. Ollama only: no PyTorch in the process, nor in the install ---------------------------------------------

OLLAMA_ONLY = textwrap.dedent("""
    import json, sys
    from duckgraph.core.bootstrap import bootstrap
    from duckgraph.core.domain.model import EdgeInput, NodeInput

    services = bootstrap()
    with services.knowledge_base as kb:
        kb.add_knowledge_graph(
            [NodeInput(name="Ada Lovelace", type="Person", description="Wrote the first program."),
             NodeInput(name="Analytical Engine", type="Machine", description="Babbage's mechanical computer.")],
            [EdgeInput(source="Ada Lovelace", target="Analytical Engine", type="WROTE_PROGRAM_FOR")])
        result = kb.search("What did Ada Lovelace program?")
        print(json.dumps({
            "embedder": kb.embedder.id,
            "anchors": [a.name for a in result.anchors],
            "edges": [e.type for e in result.edges],
            "loaded": sorted(m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules),
        }))
""")


def test_ollama_only_mode_never_imports_torch(tmp_path, ollama):
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1",
        "DUCKGRAPH_CONFIG": str(config), "DUCKGRAPH_DB": str(tmp_path / "kb.duckdb"),
        "DUCKGRAPH_EMBEDDER": "ollama", "DUCKGRAPH_EMBEDDER_OPTIONS": json.dumps({"base_url": ollama.base_url}),
    }
    done = subprocess.run([sys.executable, "-c", OLLAMA_ONLY], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["embedder"] == "ollama:all-minilm:latest"
    assert "Ada Lovelace" in report["anchors"] and report["edges"] == ["WROTE_PROGRAM_FOR"]
    assert report["loaded"] == []
    assert ollama.requests_to("/api/embed")  # the vectors really came from "Ollama"


HEAVY = {"torch", "sentence-transformers", "transformers"}


def requirement_name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1)).lower()


def test_the_ollama_install_names_no_pytorch():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    assert "ollama" in extras
    core = {requirement_name(r) for r in project["dependencies"]}
    ollama_extra = {requirement_name(r) for r in extras["ollama"]}
    assert not (core | ollama_extra) & HEAVY, core | ollama_extra
    assert "httpx" in core  # what the Ollama plugins speak HTTP with
    assert {requirement_name(r) for r in extras["local"]} & HEAVY  # the heavy stack lives in the other extra


def test_the_core_dependencies_do_not_pull_pytorch_in_transitively():
    """Walk the installed requirement graph of the core dependencies (no extras): torch is never reached."""
    from importlib import metadata

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    todo = [Requirement(r) for r in project["dependencies"]]
    seen: set[str] = set()
    while todo:
        requirement = todo.pop()
        name = requirement_name(requirement.name)
        if name in seen or (requirement.marker is not None and not requirement.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            continue  # an optional platform-only dependency not installed here
        todo.extend(Requirement(r) for r in requires)
    assert "mcp" in seen and "duckdb" in seen
    assert not seen & HEAVY, sorted(seen & HEAVY)


def test_the_file_records_the_ollama_embedder(ollama, db_path):
    with KnowledgeBase(DuckDBStore(db_path), OllamaEmbedder(base_url=ollama.base_url)) as kb:
        seed(kb)
    meta = file_meta(db_path)
    assert meta["embedder_id"] == "ollama:all-minilm:latest" and meta["dimensions"] == "384"
