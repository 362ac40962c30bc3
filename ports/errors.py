"""Domain errors. Each message is written for the person (or model) who has to fix the problem."""


class DuckgraphError(Exception):
    """Base of every error duckgraph raises on purpose."""


class InvalidInputError(DuckgraphError, ValueError):
    """The caller sent something that cannot be stored or answered; nothing was written."""


class NotFoundError(DuckgraphError, LookupError):
    """A named entity, document or plugin does not exist."""


class ConfigError(DuckgraphError):
    """The configuration is wrong (unknown plugin id, bad option, unreadable file)."""


class EmbedderMismatchError(DuckgraphError):
    """The database was built with a different embedder than the one configured."""


class StoreError(DuckgraphError):
    """The database cannot be opened or written (locked, corrupt, newer schema, read-only)."""


class EmbedderError(DuckgraphError):
    """The embedder failed (model missing, service down, wrong output)."""


class ExtractionError(DuckgraphError):
    """The extractor could not produce a valid graph from a text."""
