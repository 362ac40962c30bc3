"""Hooks a duckgraph plugin can implement. Each receives `register(id, factory)`; factories build lazily."""

import pluggy

hookspec = pluggy.HookspecMarker("duckgraph")
hookimpl = pluggy.HookimplMarker("duckgraph")


@hookspec
def register_embedders(register):
    """Register embedder factories: ``register("my-id", lambda **options: MyEmbedder(**options))``."""


@hookspec
def register_stores(register):
    """Register graph store factories: ``register("my-id", lambda path, **options: MyStore(path, **options))``."""


@hookspec
def register_extractors(register):
    """Register extractor factories: ``register("my-id", lambda **options: MyExtractor(**options))``."""


@hookspec
def register_community_detectors(register):
    """Register community detector factories: ``register("my-id", lambda **options: MyDetector(**options))``."""


@hookspec
def register_converters(register):
    """Register document converters: ``register("my-id", lambda: MyConverter())`` (ports/converter.py)."""
