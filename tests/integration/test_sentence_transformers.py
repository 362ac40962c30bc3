"""The sentence-transformers embedder with a model given by path, its errors, and its queries on onnxruntime."""

import json
import logging
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import duckgraph.plugins.sentence_transformers as st_module
from duckgraph.plugins.sentence_transformers import SentenceTransformersEmbedder, bundled_model_path
from duckgraph.ports import EmbedderError

pytestmark = pytest.mark.model


def test_a_model_given_by_path_loads_and_matches_the_default(tmp_path, minilm):
    copy = tmp_path / "my-minilm"
    shutil.copytree(bundled_model_path(), copy)
    embedder = SentenceTransformersEmbedder(model=str(copy), precision="float32")
    assert embedder.id == f"sentence-transformers:{copy}"
    assert embedder.dimensions == 384
    texts = ["Marie Curie discovered radium.", "The Nile flows north."]
    # Two texts: the warmed default answers them with onnxruntime, which computes in float32 too.
    np.testing.assert_allclose(embedder.embed_documents(texts), minilm.embed_documents(texts), atol=1e-5)


def test_a_missing_model_is_a_clear_error(tmp_path):
    embedder = SentenceTransformersEmbedder(model=str(tmp_path / "no-such-model"))
    with pytest.raises(EmbedderError, match="no-such-model"):
        embedder.embed_query("hello")


def test_texts_are_handed_over_in_calls_of_texts_per_call_and_come_back_in_order(minilm):
    embedder = SentenceTransformersEmbedder(batch_size=2, texts_per_call=5, precision="float32")
    sharing_the_model(embedder, minilm)
    texts = [f"{word} " * length for length, word in zip((9, 1, 5, 2, 7, 3, 8, 4, 6, 1, 2), "abcdefghijk")]
    calls = []
    original = embedder.embed_batch
    embedder.embed_batch = lambda batch: calls.append(len(batch)) or original(batch)
    vectors = embedder.embed_documents(texts)
    assert calls == [5, 5, 1]  # the model sorts each call's texts by length; the order given back is the input's
    one_by_one = np.vstack([minilm.embed_query(text) for text in texts])
    np.testing.assert_allclose(vectors, one_by_one, atol=1e-5)


SHORT = [f"Entity {i} works at Company {i % 7}" for i in range(300)]
LONG = [f"Passage {i}: " + "Marie Curie discovered radium and polonium in Paris. " * 10 for i in range(40)]


def test_without_a_batch_size_short_texts_go_through_pytorch_in_bigger_batches_than_long_ones(minilm):
    embedder = SentenceTransformersEmbedder(precision="float32", onnx_batches=False)
    sharing_the_model(embedder, minilm)
    sizes = []
    original = embedder._model.encode
    embedder._model.encode = lambda texts, batch_size, **options: sizes.append(batch_size) or original(
        texts, batch_size=batch_size, **options)
    try:
        short_vectors = embedder.embed_documents(SHORT)
        long_vectors = embedder.embed_documents(LONG)
    finally:
        del embedder._model.encode  # the session's model is shared
    assert sizes[0] == sizes[1] == 256 and 8 <= sizes[-1] < 32, sizes  # ~12,000 characters a batch, within bounds
    fixed = SentenceTransformersEmbedder(batch_size=32, precision="float32", onnx_batches=False)
    sharing_the_model(fixed, minilm)
    # The batch size changes the padding only: the vectors are the same.
    np.testing.assert_allclose(short_vectors, fixed.embed_documents(SHORT), atol=1e-5)
    np.testing.assert_allclose(long_vectors, fixed.embed_documents(LONG), atol=1e-5)


def test_float32_batches_run_on_the_onnx_export_in_batches_sized_by_length_with_pytorchs_vectors(tmp_path, minilm):
    cache = str(tmp_path / "cache")
    embedder = SentenceTransformersEmbedder(precision="float32", cache_dir=cache)
    sharing_the_model(embedder, minilm)
    embedder.warm_up()
    assert embedder.describe()["batches"] == ("onnxruntime in float32, the model exported at warm-up "
                                              "(the precision option)")
    runs = recorded_runs(embedder)
    pytorch_calls = []
    encode = embedder._encode
    embedder._encode = lambda *args, **options: pytorch_calls.append(1) or encode(*args, **options)
    short_vectors = embedder.embed_documents(SHORT)
    long_vectors = embedder.embed_documents(LONG)
    assert pytorch_calls == []
    assert {session for session, _ in runs} == {embedder._onnx._batch_session}  # not the one-thread query session
    # ~2,000 characters a run within bounds: 64 (the most) of the ~28-character facts, in calls of 256 texts, and 4
    # (the fewest) of the ~540-character passages.
    assert [size for _, size in runs] == [64] * 4 + [44] + [4] * 10
    pytorch = SentenceTransformersEmbedder(precision="float32", onnx_queries=False, onnx_batches=False)
    sharing_the_model(pytorch, minilm)
    np.testing.assert_allclose(short_vectors, pytorch.embed_documents(SHORT), atol=1e-5)
    np.testing.assert_allclose(long_vectors, pytorch.embed_documents(LONG), atol=1e-5)

    fixed = SentenceTransformersEmbedder(precision="float32", batch_size=7, cache_dir=cache)
    fixed.warm_up()  # the export cached above
    runs = recorded_runs(fixed)
    np.testing.assert_allclose(fixed.embed_batch(SHORT), short_vectors, atol=1e-5)
    assert [size for _, size in runs] == [7] * 42 + [6]  # a batch_size set is kept


def recorded_runs(embedder: SentenceTransformersEmbedder) -> list:
    """(session, texts) of each run of `embedder`'s ONNX export from now on."""
    runs = []
    run = embedder._onnx._run
    embedder._onnx._run = lambda session, texts: runs.append((session, len(texts))) or run(session, texts)
    return runs


def sharing_the_model(embedder: SentenceTransformersEmbedder, loaded: SentenceTransformersEmbedder) -> None:
    """Give `embedder` the session's PyTorch model, loaded once (its own state stays its own)."""
    embedder._model, embedder._default_threads = loaded._load(), loaded._default_threads


# -- queries through onnxruntime -------------------------------------------------------------------------------

QUESTIONS = [
    "Where did the performer of Hello Love die?",
    "  Qui a découvert le radium ?\n",
    "which university did the founder of Microsoft drop out of " * 30,  # past the model's 256-token limit
]


def test_after_warm_up_queries_run_on_onnxruntime_with_the_models_own_vectors(minilm):
    assert minilm.describe()["queries"].startswith("onnxruntime")
    embedder = SentenceTransformersEmbedder(precision="float32", onnx_batches=False)  # batches on PyTorch
    sharing_the_model(embedder, minilm)
    embedder.warm_up()
    pytorch = SentenceTransformersEmbedder(onnx_queries=False, onnx_batches=False, precision="float32")
    sharing_the_model(pytorch, minilm)
    assert pytorch.describe()["queries"] == "PyTorch (onnx_queries is off)"
    calls = []
    original = embedder._encode
    embedder._encode = lambda model, texts: calls.append(len(texts)) or original(model, texts)
    one_by_one = np.vstack([embedder.embed_query(text) for text in QUESTIONS])
    together = embedder.embed_documents(QUESTIONS)  # three texts of different lengths: padded
    assert calls == []  # none of them went through PyTorch
    embedder.embed_documents(QUESTIONS + QUESTIONS)  # more than a query's few texts: a batch
    assert calls == [6]
    expected = pytorch.embed_documents(QUESTIONS)
    np.testing.assert_allclose(one_by_one, expected, atol=2e-6)
    np.testing.assert_allclose(together, expected, atol=2e-6)
    assert np.allclose(np.linalg.norm(one_by_one, axis=1), 1.0, atol=1e-6)

    batches_only = SentenceTransformersEmbedder(precision="float32", onnx_queries=False)  # batches on the export
    sharing_the_model(batches_only, minilm)
    batches_only.warm_up()
    assert batches_only.describe()["queries"] == "PyTorch (onnx_queries is off)"
    calls.clear()
    encode = batches_only._encode
    batches_only._encode = lambda model, texts: calls.append(len(texts)) or encode(model, texts)
    batches_only.embed_query(QUESTIONS[0])
    batches_only.embed_documents(QUESTIONS + QUESTIONS)
    assert calls == [1]  # the query on PyTorch, as doctor says; the batch on the export


def test_a_model_the_export_cannot_reproduce_stays_on_pytorch_and_says_why(tmp_path, minilm, caplog):
    # The same model pooling the first token instead of the mean: the export's mean differs, the check sees it.
    copy = tmp_path / "cls-minilm"
    shutil.copytree(bundled_model_path(), copy)
    pooling = copy / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    config = {k: (k == "pooling_mode_cls_token") if k.startswith("pooling_mode_") else v for k, v in config.items()}
    pooling.write_text(json.dumps(config))
    embedder = SentenceTransformersEmbedder(model=str(copy), precision="float32")
    with caplog.at_level(logging.WARNING, logger="duckgraph.plugins.sentence_transformers"):
        embedder.warm_up()
    reason = embedder.describe()["queries"]
    assert reason.startswith("PyTorch: the exported model's vectors differ from the model's own")
    assert "the model runs on PyTorch only" in caplog.text
    assert embedder.describe()["batches"] == "PyTorch in float32 (the precision option)"
    vector = embedder.embed_query(QUESTIONS[0])
    cls_vector = embedder._encode(embedder._model, [QUESTIONS[0]])[0]
    np.testing.assert_allclose(vector, cls_vector, atol=1e-6)
    assert not np.allclose(vector, minilm.embed_query(QUESTIONS[0]), atol=1e-3)


def test_without_onnxruntime_queries_stay_on_pytorch_and_doctor_says_what_to_install(monkeypatch, minilm):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnxruntime" else real_find_spec(name, *a))
    embedder = SentenceTransformersEmbedder(precision="float32")  # to compare with onnxruntime's float32
    assert embedder.describe()["queries"] == (
        "PyTorch: onnxruntime not installed (pip install 'duckgraph[local]')")
    sharing_the_model(embedder, minilm)
    embedder.warm_up()
    assert embedder._onnx is None
    assert embedder.describe()["queries"] == "PyTorch: onnxruntime not installed (pip install 'duckgraph[local]')"
    np.testing.assert_allclose(embedder.embed_query(QUESTIONS[0]), minilm.embed_query(QUESTIONS[0]), atol=2e-6)


def test_on_another_device_queries_stay_with_the_model():
    embedder = SentenceTransformersEmbedder(device="cuda")
    assert embedder.describe() == {"queries": "PyTorch (on device cuda; onnxruntime is used on the CPU only)",
                                   "batches": "PyTorch in float32 (precision auto: bfloat16 only on the CPU)"}


# -- the cached export ---------------------------------------------------------------------------------------------

LOAD_FROM_CACHE = """
import json, sys
from duckgraph.plugins.sentence_transformers import SentenceTransformersEmbedder

embedder = SentenceTransformersEmbedder(cache_dir=sys.argv[1], precision="float32")
vector = embedder.embed_query(sys.argv[2])
embedder.warm_up()
batch = embedder.embed_documents(json.loads(sys.argv[3]))
print(json.dumps({"torch_imported": "torch" in sys.modules, **embedder.describe(), "vector": vector.tolist(),
                  "batch": batch.tolist()}))
"""


def test_a_later_process_embeds_queries_and_float32_batches_with_the_cached_export_without_pytorch(tmp_path, minilm):
    cache = tmp_path / "cache"
    first = SentenceTransformersEmbedder(cache_dir=str(cache))
    sharing_the_model(first, minilm)
    first.warm_up()
    assert first.describe()["queries"] == "onnxruntime (the model exported at warm-up)"
    assert sorted(p.suffix for p in cache.iterdir()) == [".json", ".onnx"]
    key = next(cache.glob("*.json")).stem
    record = json.loads((cache / f"{key}.json").read_text())
    (cache / "0123456789abcdef01234567.json").write_text(json.dumps(record))  # as if made by older libraries
    (cache / "0123456789abcdef01234567.onnx").write_bytes(b"an older export")
    (cache / "fedcba9876543210fedcba98.json").write_text(json.dumps({**record, "model": "/another/model"}))
    first._onnx = None
    first.warm_up()  # exports again: one export of this model is kept, another model's stays
    assert sorted(p.name for p in cache.iterdir()) == sorted([f"{key}.json", f"{key}.onnx",
                                                               "fedcba9876543210fedcba98.json"])

    run = subprocess.run([sys.executable, "-c", LOAD_FROM_CACHE, str(cache), QUESTIONS[0], json.dumps(SHORT[:100])],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, run.stderr
    answer = json.loads(run.stdout)
    assert answer["torch_imported"] is False  # the warm-up did not load it, nor did a write of 100 texts
    assert answer["queries"] == f"onnxruntime (the export cached in {cache})"
    assert answer["batches"] == f"onnxruntime in float32, the export cached in {cache} (the precision option)"
    np.testing.assert_allclose(answer["vector"], minilm.embed_query(QUESTIONS[0]), atol=2e-6)
    pytorch = SentenceTransformersEmbedder(precision="float32", onnx_queries=False, onnx_batches=False)
    sharing_the_model(pytorch, minilm)
    np.testing.assert_allclose(answer["batch"], pytorch.embed_documents(SHORT[:100]), atol=1e-5)


def test_for_bfloat16_batches_writes_of_up_to_64_texts_run_on_the_cached_export_until_pytorch_is_loaded(tmp_path,
                                                                                                         minilm):
    cache = tmp_path / "cache"
    first = SentenceTransformersEmbedder(cache_dir=str(cache))
    sharing_the_model(first, minilm)
    first.warm_up()  # leaves the export in the cache, as an earlier server would
    later = SentenceTransformersEmbedder(cache_dir=str(cache), precision="bfloat16")  # batches want PyTorch
    loading, release = threading.Event(), threading.Event()

    def held_load():  # PyTorch's import, held until the test lets it finish
        loading.set()
        release.wait(60)
        sharing_the_model(later, minilm)
        return later._model

    later._load = held_load
    texts = [f"Entity {i} works at Company {i % 7}" for i in range(64)]
    vectors = later.embed_documents(texts)
    exported = []  # the sizes of the writes the export answers from here on
    embed = later._onnx.embed_batches
    later._onnx.embed_batches = lambda batch, size: exported.append(len(batch)) or embed(batch, size)
    assert not loading.is_set()  # answered without PyTorch
    with minilm._lock:
        np.testing.assert_allclose(vectors, minilm._encode(minilm._model, texts, bfloat16=False), atol=1e-5)
    bigger: list = []
    waiting = threading.Thread(target=lambda: bigger.append(later.embed_documents([*texts, "one more"])))
    waiting.start()
    try:
        assert loading.wait(60)  # 65 texts wait for the batch model
        later.embed_documents(texts[:10])  # meanwhile a small write still goes through the export
        assert exported == [10]
    finally:
        release.set()
        waiting.join(60)
    assert len(bigger[0]) == 65 and exported == [10]
    assert not later._onnx.batches  # bfloat16 on PyTorch from here: the export's batch session is freed
    later.embed_documents(texts)
    assert exported == [10]  # loaded: 64 texts go to the batch model again


def test_the_batch_session_opens_on_the_first_batch_not_for_the_first_query(tmp_path, minilm):
    cache = tmp_path / "cache"
    first = SentenceTransformersEmbedder(cache_dir=str(cache), precision="float32")
    sharing_the_model(first, minilm)
    first.warm_up()  # leaves the export in the cache
    later = SentenceTransformersEmbedder(cache_dir=str(cache), precision="float32")
    later.embed_query(QUESTIONS[0])
    assert later._onnx.batches and later._onnx._batch_session is None  # the query did not wait for it
    vectors = later.embed_documents(SHORT[:10])
    session = later._onnx._batch_session
    assert session is not None and session is not later._onnx._session
    np.testing.assert_allclose(vectors, first.embed_documents(SHORT[:10]), atol=1e-5)
    later._onnx.drop_batches()  # as when PyTorch's bfloat16 takes the batches over
    assert not later._onnx.batches and later._onnx._batch_session is None
    # A write that chose the export just before finishes on the query session rather than fail or reopen one.
    np.testing.assert_allclose(later._onnx.embed_batches(SHORT[:10]), vectors, atol=1e-5)
    assert later._onnx._batch_session is None


def test_a_cached_export_that_no_longer_gives_its_vectors_is_ignored_and_made_again(tmp_path, minilm, caplog):
    cache = tmp_path / "cache"
    first = SentenceTransformersEmbedder(cache_dir=str(cache))
    sharing_the_model(first, minilm)
    first.warm_up()
    record_path = next(cache.glob("*.json"))
    record = json.loads(record_path.read_text())
    record["probe_vectors"] = (-np.asarray(record["probe_vectors"])).tolist()  # not what the export gives
    record_path.write_text(json.dumps(record))

    later = SentenceTransformersEmbedder(cache_dir=str(cache))
    sharing_the_model(later, minilm)
    with caplog.at_level(logging.WARNING, logger="duckgraph.plugins.sentence_transformers"):
        later.warm_up()
    assert "ignoring the cached ONNX export" in caplog.text and "vectors differ" in caplog.text
    assert later.describe()["queries"] == "onnxruntime (the model exported at warm-up)"  # exported anew
    assert json.loads(record_path.read_text())["probe_vectors"] != record["probe_vectors"]  # and cached again
    np.testing.assert_allclose(later.embed_query(QUESTIONS[0]), minilm.embed_query(QUESTIONS[0]), atol=2e-6)


# -- the precision of batches ----------------------------------------------------------------------------------

SENTENCES = [*QUESTIONS, "Kai P. Dunwood lives in Lower Inverarcliff", "Marie Curie (person)", "a cat", "tax law"]


def sharing(minilm: SentenceTransformersEmbedder, **options) -> SentenceTransformersEmbedder:
    """A PyTorch-only embedder with these options on the session's loaded model."""
    embedder = SentenceTransformersEmbedder(onnx_queries=False, onnx_batches=False, **options)
    sharing_the_model(embedder, minilm)
    return embedder


def test_bfloat16_batches_stay_within_a_cosine_of_0_9999_of_float32(minilm):
    full, half = sharing(minilm, precision="float32"), sharing(minilm, precision="bfloat16")
    expected, vectors = full.embed_documents(SENTENCES), half.embed_documents(SENTENCES)
    assert not np.allclose(vectors, expected, atol=1e-5)  # computed in bfloat16 indeed
    assert np.min(np.sum(vectors * expected, axis=1)) >= 0.9999
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert full.describe()["batches"] == "PyTorch in float32 (the precision option)"
    assert half.describe()["batches"].startswith(
        "PyTorch in bfloat16 (the precision option; cosine to float32 on probe texts 0.9999")


@pytest.mark.parametrize("has_amx", [False, True])
def test_auto_takes_bfloat16_where_the_cpu_has_amx(minilm, monkeypatch, has_amx):
    monkeypatch.setattr(st_module, "_cpu_has_amx", lambda: has_amx)
    auto = sharing(minilm)
    assert auto.describe()["batches"] == (  # what doctor says before the model loads
        "PyTorch in bfloat16 if the model's vectors of probe texts agree with float32's (precision auto; the CPU "
        "has AMX)" if has_amx else "PyTorch in float32 (precision auto: bfloat16 only on a CPU with AMX)")
    chosen = "bfloat16" if has_amx else "float32"
    np.testing.assert_allclose(auto.embed_documents(SENTENCES),
                               sharing(minilm, precision=chosen).embed_documents(SENTENCES), atol=1e-6)
    reason = ("precision auto; the CPU has AMX; cosine to float32 on probe texts 0.9999"
              if has_amx else "precision auto: bfloat16 only on a CPU with AMX")
    assert auto.describe()["batches"].startswith(f"PyTorch in {chosen} ({reason}")


def test_auto_keeps_float32_and_warns_when_the_models_bfloat16_vectors_drift(minilm, monkeypatch, caplog):
    monkeypatch.setattr(st_module, "_cpu_has_amx", lambda: True)
    monkeypatch.setattr(st_module, "_BFLOAT16_AGREEMENT", 1.0)  # as if the model needed float32's exact vectors
    auto = sharing(minilm)
    with caplog.at_level(logging.WARNING, logger="duckgraph.plugins.sentence_transformers"):
        vectors = auto.embed_documents(SENTENCES)
    assert "batches are embedded in float32: the model's bfloat16 vectors differ" in caplog.text
    np.testing.assert_allclose(vectors, sharing(minilm, precision="float32").embed_documents(SENTENCES), atol=1e-6)
    assert auto.describe()["batches"].startswith("PyTorch in float32 (precision auto; the CPU has AMX; cosine")


@pytest.mark.parametrize("precision", ["auto", "bfloat16"])
def test_a_model_that_fails_in_bfloat16_stays_on_float32_or_says_so(minilm, monkeypatch, caplog, precision):
    import torch

    monkeypatch.setattr(st_module, "_cpu_has_amx", lambda: True)
    embedder = sharing(minilm, precision=precision)
    real_autocast = torch.autocast

    def autocast(device_type, dtype=None, **kwargs):
        if dtype == torch.bfloat16:
            raise RuntimeError("no bfloat16 kernel for this operation")
        return real_autocast(device_type, dtype=dtype, **kwargs)

    monkeypatch.setattr(torch, "autocast", autocast)
    if precision == "bfloat16":  # asked for: a clear error, whatever the call
        with pytest.raises(EmbedderError, match="cannot run in bfloat16 here .*set the embedder's precision option"):
            embedder.embed_documents(SENTENCES)
        return
    with caplog.at_level(logging.WARNING, logger="duckgraph.plugins.sentence_transformers"):
        vectors = embedder.embed_documents(SENTENCES)
    assert "batches are embedded in float32: the model failed in bfloat16" in caplog.text
    assert embedder.describe()["batches"] == ("PyTorch in float32 (precision auto; the CPU has AMX; bfloat16 failed: "
                                              "RuntimeError: no bfloat16 kernel for this operation)")
    np.testing.assert_allclose(vectors, sharing(minilm, precision="float32").embed_documents(SENTENCES), atol=1e-6)


def test_with_bfloat16_batches_the_query_export_is_still_checked_against_float32(tmp_path, minilm):
    embedder = SentenceTransformersEmbedder(cache_dir=str(tmp_path / "cache"), precision="bfloat16")
    sharing_the_model(embedder, minilm)
    embedder.warm_up()
    assert embedder.describe()["queries"] == "onnxruntime (the model exported at warm-up)"
    expected = sharing(minilm, precision="float32").embed_documents(QUESTIONS)
    np.testing.assert_allclose(np.vstack([embedder.embed_query(q) for q in QUESTIONS]), expected, atol=2e-6)


def test_queries_on_onnxruntime_leave_no_telemetry_behind(tmp_path, minilm):
    """onnxruntime's telemetry, on by default, looks up Microsoft's collector and writes a device id under the
    user's cache: a local memory must do neither."""
    graph = next(minilm._cache_folder().glob("*.onnx"))
    env = {k: v for k, v in os.environ.items() if k not in ("ORT_DISABLE_TELEMETRY", "XDG_CACHE_HOME")}
    env["HOME"] = str(tmp_path)
    script = ("import sys, time, numpy as np\n"
              "from pathlib import Path\n"
              "from duckgraph.plugins.sentence_transformers import _onnx_session\n"
              "session = _onnx_session(Path(sys.argv[1]), 1)\n"
              "feed = {i.name: np.ones((1, 8), dtype=np.int64) for i in session.get_inputs()}\n"
              "for _ in range(5):\n"
              "    session.run(None, feed)\n"
              "time.sleep(3)\n")  # telemetry writes its files from a thread of its own
    subprocess.run([sys.executable, "-c", script, str(graph)], env=env, check=True, timeout=120)
    assert not (tmp_path / ".cache" / "Microsoft").exists()
