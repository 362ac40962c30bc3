"""An embedder plugin's unexpected exception (its bug, or numpy's error on what it returned) is an EmbedderError
naming the embedder at the port, the original kept as its cause and its traceback logged once, so that `ingest`
and `search` report it as they report an embedder that is down instead of crashing with a traceback."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from duckgraph.ports import Embedder, EmbedderError


class Faulty(Embedder):
    id = "faulty:v1"

    def __init__(self, answer) -> None:
        self.answer = answer

    def embed_batch(self, texts):
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


@pytest.mark.parametrize("call", ["embed_query", "embed_documents", "dimensions"])
def test_a_plugin_s_exception_is_an_embedder_error_naming_it_with_the_cause_kept(call, caplog):
    crash = RuntimeError("model server exploded")
    embedder = Faulty(crash)
    with caplog.at_level(logging.INFO, logger="duckgraph.ports.embedder"), pytest.raises(EmbedderError) as err:
        if call == "embed_query":
            embedder.embed_query("who is Ada?")
        elif call == "embed_documents":
            embedder.embed_documents(["a", "b"])
        else:
            embedder.dimensions  # noqa: B018 - the width probe a store's binding makes
    assert str(err.value) == ("embedder 'faulty:v1' failed: RuntimeError: model server exploded; check the embedder "
                              "plugin and its settings")
    assert err.value.__cause__ is crash
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert len(tracebacks) == 1 and tracebacks[0].levelno == logging.INFO  # once, however deep the calls went


def test_a_numpy_error_on_what_the_plugin_returned_is_an_embedder_error():
    embedder = Faulty([[1.0, 0.0], [1.0]])  # ragged rows: numpy raises ValueError
    embedder._dimensions = 2
    with pytest.raises(EmbedderError, match=r"^embedder 'faulty:v1' failed: ValueError: ") as err:
        embedder.embed_documents(["a", "b"])
    assert isinstance(err.value.__cause__, ValueError)


def test_an_embedder_error_passes_as_it_is():
    own = EmbedderError("the server at http://127.0.0.1:9 is down: start it")
    with pytest.raises(EmbedderError) as err:
        Faulty(own).embed_query("x")
    assert err.value is own


def test_a_working_embedder_is_untouched():
    vectors = Faulty(np.array([[3.0, 4.0]], dtype=np.float32)).embed_documents(["a"])
    assert vectors.tolist() == [[0.6000000238418579, 0.800000011920929]]
