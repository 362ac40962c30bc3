"""The embedder port: turns texts into vectors."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING

from duckgraph.ports.errors import EmbedderError

if TYPE_CHECKING:
    import numpy as np


class Embedder(ABC):
    """Embeds texts as unit-length float32 vectors.

    A plugin implements `id` and `embed_batch`, and `dimensions` where probing it (below) will not do; batching,
    normalisation and shape checks live here. Constructing an embedder must be cheap: load models or open
    connections on first use.
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
        return self.embed_documents([text])[0]

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed any number of texts in batches of `batch_size`; unit vectors, shape (n, dimensions)."""
        import numpy as np  # imported on use: ~0.1 s that the MCP handshake should not wait for

        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        parts = [self._checked(self.embed_batch(texts[i : i + self.batch_size]), len(texts[i : i + self.batch_size]))
                 for i in range(0, len(texts), self.batch_size)]
        return normalize(np.vstack(parts))

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
