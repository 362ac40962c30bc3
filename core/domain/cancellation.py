"""Cancelling a call: a thread cannot be stopped midway, so a cancelled call runs on, but none of its commits
starts once it is cancelled (the MCP server cancels a call when its client does: core/mcp/tools/common.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar

from duckgraph.core.domain.ingest import Progress
from duckgraph.ports.errors import CallCancelled


class Cancellation:
    """Whether the call a use case runs for was cancelled (an MCP client's notifications/cancelled, or the client
    gone), shared by whoever runs the call and its commits. A thread cannot be stopped midway, so a cancelled call
    runs on, but none of its commits starts once it is cancelled (`CallCancelled`): a write cancelled before it
    committed stores nothing, one that committed before stays stored."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._committed = 0  # commits done
        self._committing = False  # a commit under way

    def cancel(self) -> tuple[int, bool]:
        """Cancel the call: none of its commits starts from now on. Returns how many it had done, and whether one
        is under way (it goes on: whether it is stored is known when it ends)."""
        with self._lock:
            self._cancelled = True
            return self._committed, self._committing

    @property
    def committed(self) -> int:
        """How many commits of the call were done."""
        with self._lock:
            return self._committed

    @contextmanager
    def applied(self) -> Iterator[None]:
        """Run the block (on this thread) as the cancellable call: its commits and long steps check first."""
        token = _CANCELLATION.set(self)
        try:
            yield
        finally:
            _CANCELLATION.reset(token)

    def check(self) -> None:
        """Raise CallCancelled once the call is cancelled (where a long step of it ends)."""
        with self._lock:
            self._refuse_if_cancelled()

    @contextmanager
    def committing(self) -> Iterator[None]:
        """Around one commit of the call: refused once the call is cancelled, counted once done."""
        with self._lock:  # checked and marked as one step: `cancel` then tells exactly what was stored
            self._refuse_if_cancelled()
            self._committing = True
        done = False
        try:
            yield
            done = True
        finally:
            with self._lock:
                self._committing = False
                self._committed += done

    def _refuse_if_cancelled(self) -> None:
        if self._cancelled:
            raise CallCancelled("the call was cancelled before this write committed: nothing of it was stored")


#: The cancellation of the call running on this thread (set by whoever runs it, the MCP server: see
#: core/mcp/tools/common.py); None where nothing can cancel it (the command line).
_CANCELLATION: ContextVar[Cancellation | None] = ContextVar("duckgraph_cancellation", default=None)


def commit_of_call() -> AbstractContextManager[None]:
    cancellation = _CANCELLATION.get()
    return nullcontext() if cancellation is None else cancellation.committing()


def unless_cancelled(progress: Progress | None) -> Progress:
    """`progress`, after a check that the call was not cancelled: an ingest reports it after each long step (an
    embedding batch, an extracted passage), where a cancelled call stops rather than compute what it will not
    store."""

    def report(done: int, total: int, message: str) -> None:
        cancellation = _CANCELLATION.get()
        if cancellation is not None:
            cancellation.check()
        if progress is not None:
            progress(done, total, message)

    return report
