"""duckgraph's core: domain model, use cases, configuration, plugin manager, composition root, server, CLI."""

__version__ = "0.1.0"
