"""Helpers for plugins that call a server over HTTP: one request from synchronous code under one deadline, and
URLs made safe to show."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx


def request(method: str, url: str, *, timeout: float, json: Any = None,
            headers: dict[str, str] | None = None) -> httpx.Response:
    """Send one request; `timeout` bounds it as a whole (connecting, sending, waiting, reading every byte), so a
    server that sends a byte now and then cannot hold the caller (and the write it is part of) without end.

    Raises TimeoutError or httpx.TimeoutException past the deadline, httpx.ConnectError when nothing answers,
    httpx.HTTPError, anyio.BrokenResourceError or OSError otherwise: the caller words them for its user."""
    return _run_sync(_request, method, url, timeout, json, headers)


async def _request(method: str, url: str, timeout: float, json: Any, headers: dict[str, str] | None) -> httpx.Response:
    import anyio  # imported on first call: registering a plugin stays cheap
    import httpx

    # Cancellation interrupts any await, the reading of the headers included, so the deadline holds however
    # slowly the server sends; httpx's own timeout only bounds each read.
    with anyio.fail_after(timeout):
        async with httpx.AsyncClient(timeout=timeout) as client:
            return await client.request(method, url, json=json, headers=headers)


#: The userinfo of a URL ("user:password@", or a bare token before "@"), up to the last "@" before the path.
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^\s/?#]*@")
#: A query parameter whose name says it carries a secret (token=, api_key=, sig=, ...).
_SECRET_PARAMETER = re.compile(r"(?P<name>[?&][^=&#\s]*(?:key|token|secret|passw|pwd|sig|auth|credential)[^=&#\s]*=)"
                               r"[^&#\s]*", re.IGNORECASE)


def redact_urls(text: str) -> str:
    """`text` (a URL, or a message with URLs in it) with every URL's credentials replaced by ***: the userinfo
    (http://user:password@host) and the values of query parameters named like a secret. What a user shows of
    doctor's output or an error (an issue, a log) must not carry the password of their server."""
    return _SECRET_PARAMETER.sub(r"\g<name>***", _USERINFO.sub(r"\g<scheme>***@", text))


class _RedactUrls(logging.Filter):
    """httpx logs every request's URL at INFO ("HTTP Request: POST http://user:password@host/..."): with
    log_level INFO or DEBUG the password would reach stderr, an MCP client's log."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_urls(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


logging.getLogger("httpx").addFilter(_RedactUrls())


def _run_sync(function: Any, *args: Any) -> Any:
    """Run a coroutine function to completion from synchronous code, also from a thread with a running event
    loop (anyio.run refuses that one: the call then runs on a thread of its own)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    import anyio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(function, *args)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, function, *args).result()
