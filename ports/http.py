"""A helper for plugins that call a server over HTTP: one request from synchronous code under one deadline."""

from __future__ import annotations

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
