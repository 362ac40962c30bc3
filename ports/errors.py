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


class CallCancelled(BaseException):
    """The call a write runs for was cancelled (an MCP client's notifications/cancelled, or the client gone)
    before the write committed: it was not committed, nothing of it was stored. A BaseException, as asyncio's
    CancelledError is: code that handles errors and goes on (an ingest's failed passage) must stop here instead."""


def interruption(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C (or SIGTERM, which the command line raises as a KeyboardInterrupt) behind `exc`: itself, or a
    cause or context of it, as DuckDB's RuntimeError "Query interrupted" for one that landed during a query. It must
    stop what runs, never be taken for a failure to work around."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
