"""The Embedder contract, as a reusable check any embedder plugin can run against its own class.

    from tests.contract.test_embedder_contract import check_embedder_contract
    check_embedder_contract(MyEmbedder(...))
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import numpy as np
import pytest

from duckgraph.ports import Embedder, EmbedderError
from tests.fakes import HashingEmbedder

TEXTS = [
    "Marie Curie discovered polonium and radium.",
    "The Eiffel Tower is in Paris.",
    "Photosynthesis turns light into chemical energy.",
    "Ada Lovelace wrote the first published algorithm.",
    "DuckDB is an in-process analytical database.",
    "A short one.",
    "Graphs have nodes and edges.",
]


class _Wrong(Embedder):
    """Wraps an embedder and damages what its embed_batch returns."""

    def __init__(self, inner: Embedder, damage) -> None:
        self.inner = inner
        self.damage = damage
        self.batch_size = inner.batch_size

    @property
    def id(self) -> str:
        return self.inner.id

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        return self.damage(np.asarray(self.inner.embed_batch(texts)))


def check_embedder_contract(embedder: Embedder, *, atol: float = 1e-5) -> None:
    """Everything the core relies on from an embedder. Restores `batch_size` when done."""
    d = embedder.dimensions
    assert isinstance(embedder.id, str) and embedder.id.strip()
    assert isinstance(d, int) and d > 0

    # embed_batch: one row per text, `dimensions` columns.
    raw = np.asarray(embedder.embed_batch(TEXTS[:3]))
    assert raw.shape == (3, d)

    # embed_documents: unit-length float32 rows, shape (n, d).
    vectors = embedder.embed_documents(TEXTS)
    assert isinstance(vectors, np.ndarray)
    assert vectors.dtype == np.float32
    assert vectors.shape == (len(TEXTS), d)
    assert np.all(np.isfinite(vectors))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)

    # Deterministic, and different texts get different vectors.
    np.testing.assert_allclose(embedder.embed_documents(TEXTS), vectors, atol=atol)
    assert len({v.tobytes() for v in vectors}) == len(TEXTS)

    # embed_query == embed_documents([q])[0]
    query = embedder.embed_query(TEXTS[0])
    assert query.shape == (d,)
    assert query.dtype == np.float32
    np.testing.assert_allclose(query, embedder.embed_documents([TEXTS[0]])[0], atol=atol)
    np.testing.assert_allclose(query, vectors[0], atol=atol)

    # describe(): label -> text, for `duckgraph doctor`.
    facts = embedder.describe()
    assert isinstance(facts, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in facts.items())

    # Empty input: an empty (0, d) float32 array.
    empty = embedder.embed_documents([])
    assert empty.shape == (0, d)
    assert empty.dtype == np.float32

    # Batching over more than batch_size texts: the same as embedding each batch on its own.
    original = embedder.batch_size
    calls: list[int] = []
    inner_batch = embedder.embed_batch
    try:
        embedder.batch_size = 3

        def counting(texts: Sequence[str]) -> np.ndarray:
            calls.append(len(texts))
            return inner_batch(texts)

        embedder.embed_batch = counting  # type: ignore[method-assign]
        batched = embedder.embed_documents(TEXTS)
        assert calls == [3, 3, 1]
        per_batch = np.vstack([embedder.embed_documents(TEXTS[i : i + 3]) for i in range(0, len(TEXTS), 3)])
    finally:
        embedder.batch_size = original
        del embedder.embed_batch  # back to the class's method
    assert batched.shape == (len(TEXTS), d)
    np.testing.assert_allclose(batched, per_batch, atol=atol)
    np.testing.assert_allclose(batched, vectors, atol=max(atol, 1e-4))

    # Wrong output from embed_batch is an EmbedderError, never silently stored.
    for damage in (
        lambda v: v[:-1],  # a row missing
        lambda v: v[:, :-1],  # too few dimensions
        lambda v: v[0],  # 1-D
        lambda v: np.full_like(v, np.nan),  # NaN
    ):
        with pytest.raises(EmbedderError):
            _Wrong(embedder, damage).embed_documents(TEXTS[:2])


# -- the built-in embedder and the test double --------------------------------------------------------------


def test_hashing_embedder_meets_the_contract() -> None:
    check_embedder_contract(HashingEmbedder())


def test_hashing_embedder_with_other_dimensions_meets_the_contract() -> None:
    check_embedder_contract(HashingEmbedder(dimensions=7))


@pytest.mark.model
def test_sentence_transformers_embedder_meets_the_contract(minilm) -> None:
    assert minilm.id == "sentence-transformers:all-MiniLM-L6-v2"
    assert minilm.dimensions == 384
    minilm.embed_documents(TEXTS)  # decides its precision
    # In bfloat16 (where the CPU has it) a batch's vectors differ from the float32 ones of onnxruntime's queries
    # by up to ~1e-3 a component (cosine >= 0.9999); in float32 both give the same vectors.
    in_bfloat16 = minilm.describe()["batches"].startswith("PyTorch in bfloat16")
    check_embedder_contract(minilm, atol=2e-3 if in_bfloat16 else 1e-4)


@pytest.mark.model
def test_sentence_transformers_vectors_are_semantic(minilm) -> None:
    cat, kitten, tax = minilm.embed_documents(["a cat", "a small kitten", "income tax return deadline"])
    assert float(cat @ kitten) > float(cat @ tax) + 0.2


# -- the base class's own guarantees -------------------------------------------------------------------------


def test_zero_vectors_stay_zero_rather_than_nan() -> None:
    class Zero(HashingEmbedder):
        def embed_batch(self, texts):
            return np.zeros((len(texts), self.dimensions), dtype=np.float64)

    vectors = Zero().embed_documents(["x"])
    assert vectors.dtype == np.float32
    assert not np.isnan(vectors).any()


def test_float64_output_is_converted_to_float32() -> None:
    class Doubles(HashingEmbedder):
        def embed_batch(self, texts):
            return super().embed_batch(texts).astype(np.float64) * 10

    vectors = Doubles().embed_documents(TEXTS)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_empty_vectors_are_refused_at_the_width_probe_and_in_every_batch() -> None:
    class Probed(Embedder):  # the port probes the width, as a plugin without a `dimensions` of its own gets
        id = "probed"

        def embed_batch(self, texts):
            return np.zeros((len(texts), 0), dtype=np.float32)

    with pytest.raises(EmbedderError, match="0-dimensional"):
        _ = Probed().dimensions
    with pytest.raises(EmbedderError, match="0-dimensional"):
        Probed().embed_documents(["x"])

    class OwnWidth(Probed):  # a plugin that reads its width elsewhere (the model's files) is checked too
        dimensions = 0

    with pytest.raises(EmbedderError, match="0-dimensional"):
        OwnWidth().embed_documents(["x"])


def test_embed_documents_checks_each_batch() -> None:
    class Short(HashingEmbedder):
        batch_size = 2

        def embed_batch(self, texts):
            out = super().embed_batch(texts)
            return out if len(self.calls) == 1 else out[:-1]  # the second batch loses a row

    with pytest.raises(EmbedderError, match="shape"):
        Short().embed_documents(TEXTS[:4])


# -- vectors_from_json: the check of a server's reply that HTTP plugins hand their vectors to ----------------------


class JsonReplyEmbedder(Embedder):
    """A fake HTTP plugin implementing the minimum: its "server" answers JSON text, which it decodes and hands to
    `vectors_from_json` as Ollama's and the OpenAI plugin's do. `reply(texts)` gives the decoded vectors."""

    id = "fake-http:json"

    def __init__(self, reply=None, source: str | None = "http://127.0.0.1:9/embed") -> None:
        self.hashing = HashingEmbedder(dimensions=8)
        self.reply = reply or (lambda texts: self.hashing.embed_batch(texts).tolist())
        self.source = source

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        decoded = json.loads(json.dumps(self.reply(list(texts))))  # what the wire carries (NaN included)
        return self.vectors_from_json(decoded, len(texts), source=self.source)


def test_a_plugin_using_vectors_from_json_meets_the_contract() -> None:
    check_embedder_contract(JsonReplyEmbedder())
    check_embedder_contract(JsonReplyEmbedder(source=None))


def test_vectors_from_json_gives_float32_rows_and_takes_whole_numbers() -> None:
    vectors = JsonReplyEmbedder(lambda texts: [[1, 2.5, -3]] * len(texts)).embed_batch(["a", "b"])
    assert vectors.dtype == np.float32 and vectors.shape == (2, 3)
    np.testing.assert_array_equal(vectors, [[1, 2.5, -3]] * 2)
    empty = JsonReplyEmbedder().vectors_from_json([], 0)
    assert empty.dtype == np.float32 and empty.shape[0] == 0


WHO = "embedder 'fake-http:json' (http://127.0.0.1:9/embed)"
NOT_NUMBERS = f"{WHO} returned a vector that is not a list of numbers"
NOT_FINITE = f"{WHO} returned a vector holding NaN, an infinity or a number too large for float32"
BAD_REPLIES = {  # the decoded reply for ["one", "two"]: what the one message says
    "not-a-list": ({"data": []}, f"{WHO} returned no vectors for 2 texts (an object, not a list)"),
    "null": (None, f"{WHO} returned no vectors for 2 texts (null, not a list)"),
    "too-few": ([[0.1, 0.2]], f"{WHO} returned 1 vector for 2 texts"),
    "too-many": ([[0.1], [0.2], [0.3]], f"{WHO} returned 3 vectors for 2 texts"),
    "string-row": ([[0.1, 0.2], "AAAAAAA="], f"{NOT_NUMBERS} (row 1 is a string)"),
    "object-row": ([{"embedding": [0.1]}, [0.2]], f"{NOT_NUMBERS} (row 0 is an object)"),
    "number-row": ([0.1, 0.2], f"{NOT_NUMBERS} (row 0 is a number)"),
    "string": ([[0.1, 0.2], [0.3, "n/a"]], f'{NOT_NUMBERS} (row 1, item 1 is "n/a")'),
    "numeric-string": ([["0.1"], [0.2]], f'{NOT_NUMBERS} (row 0, item 0 is "0.1")'),
    "null-item": ([[0.1, None], [0.2, 0.3]], f"{NOT_NUMBERS} (row 0, item 1 is null)"),
    "boolean": ([[0.1, 0.2], [True, 0.3]], f"{NOT_NUMBERS} (row 1, item 0 is true)"),
    "nested": ([[[0.1, 0.2]], [[0.3, 0.4]]], f"{NOT_NUMBERS} (row 0, item 0 is [0.1, 0.2])"),
    "object-item": ([[0.1, {"x": 1}], [0.2, 0.3]], f'{NOT_NUMBERS} (row 0, item 1 is {{"x": 1}})'),
    "ragged": ([[0.1], [0.2, 0.3]], f"{WHO} returned vectors of different widths (1, 2) in one reply"),
    "one-empty": ([[0.1, 0.2], []], f"{WHO} returned vectors of different widths (0, 2) in one reply"),
    "all-empty": ([[], []], "embedder 'fake-http:json' gives 0-dimensional (empty) vectors, which cannot be stored"),
    "nan": ([[0.1, float("nan")], [0.2, 0.3]], f"{NOT_FINITE} (row 0)"),
    "infinity": ([[0.1, 0.2], [float("-inf"), 0.3]], f"{NOT_FINITE} (row 1)"),
    "beyond-float32": ([[0.1, 0.2], [1e39, 0.3]], f"{NOT_FINITE} (row 1)"),
    "beyond-float64": ([[0.1, 0.2], [10**400, 0.3]], f"{NOT_FINITE} (row 1)"),
}


@pytest.mark.parametrize("kind", list(BAD_REPLIES))
def test_vectors_from_json_refuses_what_is_not_one_list_of_numbers_per_text(kind) -> None:
    reply, said = BAD_REPLIES[kind]
    embedder = JsonReplyEmbedder(lambda texts: reply)
    with pytest.raises(EmbedderError) as raised:
        embedder.embed_documents(["one", "two"])
    assert said in str(raised.value)
    assert "could not convert" not in str(raised.value)  # numpy's words


def test_the_width_probe_goes_through_the_same_check() -> None:
    # A plugin without its own `dimensions` is probed with one text: a bad reply is refused there, in the same
    # words, rather than its length taken as the width.
    with pytest.raises(EmbedderError, match=re.escape(f'{NOT_NUMBERS} (row 0, item 1 is "0.2")')):
        _ = JsonReplyEmbedder(lambda texts: [[0.1, "0.2"]] * len(texts)).dimensions
    with pytest.raises(EmbedderError, match=re.escape(f"{NOT_NUMBERS} (row 0 is a string)")):
        _ = JsonReplyEmbedder(lambda texts: ["AAAAAAA="] * len(texts)).dimensions
    with pytest.raises(EmbedderError, match="0-dimensional"):
        _ = JsonReplyEmbedder(lambda texts: [[]] * len(texts)).dimensions
    assert JsonReplyEmbedder(lambda texts: [[0.5, 1, 2]] * len(texts)).dimensions == 3


def test_vectors_from_json_names_its_source_only_when_given() -> None:
    with pytest.raises(EmbedderError) as raised:
        JsonReplyEmbedder(lambda texts: [["x"]], source=None).embed_batch(["one"])
    assert str(raised.value).startswith(
        "embedder 'fake-http:json' returned a vector that is not a list of numbers (row 0, item 0 is \"x\")")
