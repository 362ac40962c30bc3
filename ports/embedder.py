"""The embedder port: turns texts into vectors."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from duckgraph.ports.errors import EmbedderError

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

#: The relevance floor of all-MiniLM-L6-v2, whoever runs it (sentence-transformers, Ollama's `all-minilm`):
#: calibrated on the public LoCoMo conversations, where 0.41-0.43 left <= 3% of a conversation's own questions
#: without an answer and >= 90% of the other conversation's (contrib/bench/locomo.py).
ALL_MINILM_L6_V2_FLOOR = 0.40


class Embedder(ABC):
    """Embeds texts as unit-length float32 vectors.

    A plugin implements `id` and `embed_batch`, and `dimensions` where probing it (below) will not do; batching,
    normalisation and shape checks live here, and so does `vectors_from_json`, which a plugin calling a server
    hands the reply's vectors to. Constructing an embedder must be cheap: load models or open connections on
    first use.
    """

    #: How many texts `embed_documents` sends to `embed_batch` at once.
    batch_size: int = 32
    #: The cosine similarity below which a query and a stored text are unrelated for this model, if it has been
    #: calibrated (contrib/bench/locomo.py measures it): search returns nothing when no entity or passage
    #: reaches it. None: no floor unless the `relevance_floor` search setting gives one (doctor says so).
    relevance_floor: float | None = None

    @property
    @abstractmethod
    def id(self) -> str:
        """Stable identity of the vector space, e.g. ``sentence-transformers:all-MiniLM-L6-v2``.

        Two embedders with the same id must produce comparable vectors; the store records it.
        """

    #: The width when known (a plugin's option, or its first reply); None until `dimensions` probes it.
    _dimensions: int | None = None

    @property
    def dimensions(self) -> int:
        """Length of every vector. By default probed once, by embedding one text, unless `_dimensions` is known;
        a plugin that can read it elsewhere (the model's files) overrides this."""
        if self._dimensions is None:
            with self._plugin_failures():
                self._dimensions = len(self.embed_batch(["dimension probe"])[0])
        _check_width(self.id, self._dimensions)
        return self._dimensions

    @abstractmethod
    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Embed one batch: an array of shape (len(texts), dimensions)."""

    def warm_up(self) -> None:
        """Load whatever the first call would load; the server calls it in the background."""
        self.embed_batch(["warm-up"])

    def describe(self) -> dict[str, str]:
        """Facts about how this embedder runs, for `duckgraph doctor` (label to text; none by default)."""
        return {}

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query text; a unit vector of shape (dimensions,)."""
        with self._plugin_failures():
            return self.embed_documents([text])[0]

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed any number of texts in batches of `batch_size`; unit vectors, shape (n, dimensions)."""
        import numpy as np  # imported on use: ~0.1 s that the MCP handshake should not wait for

        with self._plugin_failures():
            if not texts:
                return np.zeros((0, self.dimensions), dtype=np.float32)
            parts = [self._checked(self.embed_batch(texts[i : i + self.batch_size]),
                                   len(texts[i : i + self.batch_size]))
                     for i in range(0, len(texts), self.batch_size)]
            return normalize(np.vstack(parts))

    @contextmanager
    def _plugin_failures(self) -> Iterator[None]:
        """A plugin's unexpected exception (its bug, a numpy error on what it returned) as an EmbedderError naming
        the embedder, the original as its cause and its traceback logged once, so that every caller reports it as
        it reports an embedder that is down, rather than crashing."""
        try:
            yield
        except EmbedderError:  # already says what to do (and an inner call's wrapping passes through once)
            raise
        except Exception as exc:
            who = _name(self)
            # The message reaches the user; the traceback, for the plugin's author, at INFO (--log-level INFO), as
            # for converters and extractors.
            log.info("embedder %s raised an unexpected exception", who, exc_info=True)
            raise EmbedderError(f"embedder {who} failed: {type(exc).__name__}: {exc}; check the embedder plugin "
                                "and its settings") from exc

    def vectors_from_json(self, rows: Any, expected_rows: int, *, source: str | None = None) -> np.ndarray:
        """The vectors of a decoded JSON reply (one list of numbers per text, in the texts' order) as a float32
        array of shape (expected_rows, width), for `embed_batch` to return.

        A plugin calling a server hands the reply's vectors here rather than to numpy, which would read "1.5",
        true and null as numbers and refuse others in its own words. Refused, with an EmbedderError naming the
        embedder (and `source`, e.g. the endpoint's URL, when given), the row and what is wrong: anything but a
        list of `expected_rows` rows; a row that is not a list of numbers (a string, such as base64, an object,
        null, a boolean, a nested list); rows of different widths; empty rows; NaN, infinities and numbers too
        large for float32. The width is not compared with `dimensions` here (the width probe comes through
        here): `embed_documents` does that for every embedder.
        """
        import numpy as np

        who = f"embedder {self.id!r}" + (f" ({source})" if source else "")
        texts = f"{expected_rows} text{'s' * (expected_rows != 1)}"
        if not isinstance(rows, list):
            raise EmbedderError(f"{who} returned no vectors for {texts} ({json_kind(rows)}, not a list): check "
                                "the server and its model")
        if len(rows) != expected_rows:
            raise EmbedderError(f"{who} returned {len(rows)} vector{'s' * (len(rows) != 1)} for {texts}: check the "
                                "server and its model")
        for i, row in enumerate(rows):
            if type(row) is not list:
                problem = f"row {i} is {json_kind(row)}"
            elif not _JSON_NUMBERS.issuperset(map(type, row)):
                j, item = next((j, x) for j, x in enumerate(row) if type(x) not in _JSON_NUMBERS)
                problem = f"row {i}, item {j} is {_shown(item)}"
            else:
                continue
            raise EmbedderError(f"{who} returned a vector that is not a list of numbers ({problem}): check the "
                                "server and its model (an embedding model?)")
        widths = sorted({len(row) for row in rows})
        if len(widths) > 1:
            raise EmbedderError(f"{who} returned vectors of different widths ({', '.join(map(str, widths))}) "
                                "in one reply: check the server and its model")
        if not rows:
            return np.zeros((0, self._dimensions or 0), dtype=np.float32)
        _check_width(self.id, widths[0])  # every row empty: the message the width probe gives
        with np.errstate(over="ignore"):
            try:
                vectors = np.array(rows, dtype=np.float64).astype(np.float32)
                finite = np.isfinite(vectors).all(axis=1).tolist()
            except OverflowError:  # an integer beyond even float64
                finite = [all(-_FLOAT32_MAX <= x <= _FLOAT32_MAX for x in row) for row in rows]
        if False in finite:
            raise EmbedderError(f"{who} returned a vector holding NaN, an infinity or a number too large for "
                                f"float32 (row {finite.index(False)}): check the server and its model")
        return vectors

    def _checked(self, vectors: np.ndarray, expected_rows: int) -> np.ndarray:
        import numpy as np

        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != expected_rows:
            raise EmbedderError(
                f"embedder {self.id!r} returned shape {vectors.shape} for {expected_rows} texts"
            )
        _check_width(self.id, vectors.shape[1])  # also where a plugin's own `dimensions` says otherwise
        if vectors.shape[1] != self.dimensions:
            raise EmbedderError(
                f"embedder {self.id!r} returned {vectors.shape[1]}-dimensional vectors, "
                f"expected {self.dimensions}"
            )
        if not np.isfinite(vectors).all():
            raise EmbedderError(f"embedder {self.id!r} returned NaN or infinite values")
        return vectors


#: The types of a decoded JSON number (bool, a subclass of int, is not one).
_JSON_NUMBERS = frozenset({int, float})
_FLOAT32_MAX = 3.4028234663852886e38


def json_kind(value: Any) -> str:
    """What a decoded JSON value is, for a message: "an object", "a list", "null", "a number"..."""
    return {dict: "an object", list: "a list", str: "a string", type(None): "null", bool: "a boolean",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _shown(value: Any) -> str:
    """A value as the JSON it came from, shortened: null, true, "n/a", [0.5]."""
    import json

    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _name(embedder: Embedder) -> str:
    """The embedder's id for a message; its class when even the id fails."""
    try:
        return repr(embedder.id)
    except Exception:
        return type(embedder).__name__


def _check_width(embedder_id: str, width: int) -> None:
    # A vector of no numbers cannot be searched, and a store cannot even make its column (DuckDB: FLOAT[0]).
    if width < 1:
        raise EmbedderError(f"embedder {embedder_id!r} gives {width}-dimensional (empty) vectors, which cannot be "
                            "stored or searched: check its model (an embedding model?) and its dimensions option")


def normalize(vectors: np.ndarray) -> np.ndarray:
    """Scale rows to unit length (zero rows stay zero), so a dot product is the cosine."""
    import numpy as np

    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return (vectors / np.where(norms == 0, 1, norms)).astype(np.float32, copy=False)
