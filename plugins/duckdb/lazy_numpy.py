"""numpy, imported on first use: registering the plugin must not cost the MCP handshake numpy's import."""

from __future__ import annotations

from typing import Any


class NumpyOnFirstUse:
    """Stands in for a module's global `np` until first used, then puts numpy itself there (so that later uses
    cost nothing): each module makes its own, `np: Any = NumpyOnFirstUse(globals())`."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self._namespace = namespace

    def __getattr__(self, name: str) -> Any:
        import numpy

        self._namespace["np"] = numpy
        return getattr(numpy, name)
