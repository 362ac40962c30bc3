"""Progress of long calls (adding documents, extraction), sent to the client as MCP progress notifications."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

import anyio.from_thread
from mcp.server.mcpserver import Context

log = logging.getLogger(__name__)


def progress_reporter(ctx: Context) -> Callable[[int, int, str], None]:
    """A callback for worker threads that forwards progress to the client as MCP progress notifications."""

    def report(done: int, total: int, message: str) -> None:
        try:
            anyio.from_thread.run(functools.partial(ctx.report_progress, done, total, message))
        except Exception as exc:  # progress is best effort; the work goes on
            log.debug("progress notification failed: %s", exc)

    return report
