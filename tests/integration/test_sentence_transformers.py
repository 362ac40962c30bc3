"""The sentence-transformers embedder with a model given by path, and its errors."""

import shutil

import numpy as np
import pytest

from duckgraph.plugins.sentence_transformers import SentenceTransformersEmbedder, bundled_model_path
from duckgraph.ports import EmbedderError

pytestmark = pytest.mark.model


def test_a_model_given_by_path_loads_and_matches_the_default(tmp_path, minilm):
    copy = tmp_path / "my-minilm"
    shutil.copytree(bundled_model_path(), copy)
    embedder = SentenceTransformersEmbedder(model=str(copy))
    assert embedder.id == f"sentence-transformers:{copy}"
    assert embedder.dimensions == 384
    texts = ["Marie Curie discovered radium.", "The Nile flows north."]
    np.testing.assert_allclose(embedder.embed_documents(texts), minilm.embed_documents(texts), atol=1e-5)


def test_a_missing_model_is_a_clear_error(tmp_path):
    embedder = SentenceTransformersEmbedder(model=str(tmp_path / "no-such-model"))
    with pytest.raises(EmbedderError, match="no-such-model"):
        embedder.embed_query("hello")


def test_texts_are_handed_over_in_calls_of_texts_per_call_and_come_back_in_order(minilm):
    embedder = SentenceTransformersEmbedder(batch_size=2, texts_per_call=5)
    texts = [f"{word} " * length for length, word in zip((9, 1, 5, 2, 7, 3, 8, 4, 6, 1, 2), "abcdefghijk")]
    calls = []
    original = embedder.embed_batch
    embedder.embed_batch = lambda batch: calls.append(len(batch)) or original(batch)
    vectors = embedder.embed_documents(texts)
    assert calls == [5, 5, 1]  # the model sorts each call's texts by length; the order given back is the input's
    one_by_one = np.vstack([minilm.embed_query(text) for text in texts])
    np.testing.assert_allclose(vectors, one_by_one, atol=1e-5)
