"""Hooks a duckgraph plugin can implement. Each receives `register(id, factory)`; factories build lazily.

Register the adapter class itself (or a function with explicit keyword parameters), never ``lambda **options:
MyEmbedder(**options)``: the configured options are checked against the factory's signature, so that a misspelt
one is a ConfigError naming the plugin before anything is built; ``**options`` lets any name through.
"""

import pluggy

hookspec = pluggy.HookspecMarker("duckgraph")
hookimpl = pluggy.HookimplMarker("duckgraph")


@hookspec
def register_embedders(register):
    """Register embedder factories: ``register("my-id", MyEmbedder)``, called with the [embedder] options."""


@hookspec
def register_stores(register):
    """Register graph store factories: ``register("my-id", MyStore)``, called with the path and [store] options."""


@hookspec
def register_extractors(register):
    """Register extractor factories: ``register("my-id", MyExtractor)``, called with the [extractor] options."""


@hookspec
def register_community_detectors(register):
    """Register community detectors: ``register("my-id", MyDetector)``, called with [community_detector] options."""


@hookspec
def register_converters(register):
    """Register document converters: ``register("my-id", MyConverter)``, built without arguments."""
