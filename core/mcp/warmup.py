"""The background warm-up of a server, so that the first tool call waits for nothing."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from duckgraph.core.domain.knowledge_base import KnowledgeBase

log = logging.getLogger(__name__)

# The warm-up imports torch (seconds of GIL-heavy work); waiting a moment lets the handshake finish first.
WARM_UP_DELAY_SECONDS = 0.5
#: How long a server that is shutting down waits for its warm-up to finish.
WARM_UP_EXIT_WAIT_SECONDS = 60


class WarmUp:
    """The background warm-up of a server: its tools, then the knowledge base and the embedder, so that the first
    call waits for none of them. A closing server stops it between steps and waits for the step under way:
    its native work (PyTorch's import, the ONNX export) cut short by the interpreter's exit aborts the process.

    `build_tools` and `remember_listing` are the server's (see core/mcp/server.py)."""

    def __init__(self, kb: KnowledgeBase, build_tools: Callable[[], None],
                 remember_listing: Callable[[], None]) -> None:
        self._kb = kb
        self._build_tools, self._remember_listing = build_tools, remember_listing
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start it in a thread, unless it has started already or the server is closing."""
        with self._lock:
            if self._thread is None and not self._stopping.is_set():
                self._thread = threading.Thread(target=self._run, name="duckgraph-warm-up", daemon=True)
                self._thread.start()

    def stop(self, timeout: float) -> None:
        """No new step; wait up to `timeout` seconds for the one under way (at worst the model's import, ~10 s)."""
        with self._lock:
            self._stopping.set()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        if self._stopping.wait(WARM_UP_DELAY_SECONDS):
            return
        self._build_tools()
        try:
            # The listing last: a failure to keep it must not keep the file closed or the model cold.
            for step in (self._kb.open, self._kb.embedder.warm_up, self._remember_listing):
                if self._stopping.is_set():
                    return
                step()
            log.info("knowledge base open and embedder ready")
        except Exception as exc:  # the first tool call reports the same problem to the model
            log.warning("warm-up failed: %s", exc)
