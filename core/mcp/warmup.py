"""The background warm-up of a server, so that the first tool call waits for nothing."""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable

from duckgraph.core.domain.knowledge_base import KnowledgeBase

log = logging.getLogger(__name__)

# The warm-up imports torch (seconds of GIL-heavy work); waiting a moment lets the handshake finish first.
WARM_UP_DELAY_SECONDS = 0.5
#: How long an interpreter that exits normally (a server run in-process, e.g. by tests) waits for a warm-up
#: still under way: see `WarmUp._join_at_exit`.
WARM_UP_EXIT_WAIT_SECONDS = 60


class WarmUp:
    """The background warm-up of a server: its tools, then the knowledge base and the embedder, so that the first
    call waits for none of them.

    A closing server calls `stop()`: no new step starts, and nothing waits for the step under way. That step may
    be PyTorch's import or the model's ONNX export, seconds of native code that no flag can interrupt, while an
    MCP client kills the server ~2 s after closing its stdin. So the server closes its file without it (the
    knowledge base refuses to open again once closed for good, so a warm-up that reaches `open` late opens
    nothing) and `duckgraph serve` then ends the process with `os._exit` (core/mcp/transports.py), which never
    runs the interpreter's teardown under that thread. An interpreter that does tear down (a server run
    in-process) first waits for the thread (`_join_at_exit`): finalizing the interpreter under a thread inside
    native code aborts the process.

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
        # The listing last: a failure to keep it must not keep the file closed or the model cold.
        self._start((self._build_tools, self._kb.open, self._kb.embedder.warm_up, self._check_communities,
                     self._remember_listing), WARM_UP_DELAY_SECONDS, "knowledge base open and embedder ready")

    def start_after_first_call(self) -> None:
        """With the warm-up off (nothing opened or loaded before the first call): only the communities' look at
        start, once the first call has opened the file (or opening it, should that call have failed before: the
        keeper reads it), in the same thread."""
        self._start((self._kb.open, self._check_communities), 0.0, "communities looked at")

    def _start(self, steps: tuple[Callable[[], None], ...], delay: float, done: str) -> None:
        with self._lock:
            if self._thread is None and not self._stopping.is_set():
                self._thread = threading.Thread(target=self._run, args=(steps, delay, done),
                                                name="duckgraph-warm-up", daemon=True)
                self._thread.start()
                atexit.register(self._join_at_exit)

    def stop(self) -> None:
        """No new step; the one under way, if any, goes on (see the class)."""
        with self._lock:
            self._stopping.set()

    @property
    def busy(self) -> bool:
        """Whether a step is still under way."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def _join_at_exit(self) -> None:
        thread = self._thread
        if thread is not None:
            thread.join(WARM_UP_EXIT_WAIT_SECONDS)

    def _check_communities(self) -> None:
        """Have the communities' keeper look once, as after a write: the file may have changed while no server ran
        (`duckgraph import`, another process), and only a write of this one would wake it. In the background: a
        rebuild it starts never holds up the first call. Not without a detector, which nothing could rebuild with."""
        if self._kb.community_detector is not None:
            self._kb.communities.keeper.wake()

    def _run(self, steps: tuple[Callable[[], None], ...], delay: float, done: str) -> None:
        try:
            if delay and self._stopping.wait(delay):
                return
            for step in steps:
                if self._stopping.is_set():
                    return
                step()
            log.info(done)
        except Exception as exc:  # the first tool call reports the same problem to the model
            if not self._stopping.is_set():  # a stopping server closed the file under it: nothing to report
                log.warning("warm-up failed: %s", exc)
        finally:
            atexit.unregister(self._join_at_exit)
