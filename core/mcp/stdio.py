"""The stdio transport of `duckgraph serve`, in place of the SDK's `mcp.server.stdio.stdio_server`, for two things
that one does not do:

- Every message gets an answer. The SDK's reader hands a line it cannot parse or validate to the session as an
  exception, which the session logs at DEBUG and drops: the client waits for its timeout. Here such a line is
  answered with a JSON-RPC error (`read_message`), with the request's id whenever it can be read, so the client
  can match it. A lone UTF-16 surrogate escape ("\\ud83d", what a JavaScript client sends when it cuts a text
  inside an emoji) is replaced with U+FFFD and the request runs, as invalid UTF-8 bytes already are (as over
  HTTP: core/mcp/json_text.py).
- SIGINT and SIGTERM stop the server gracefully: new requests are refused, the calls under way get up to
  `grace` seconds to answer, then the session ends as when the client closes stdin (the lifespan closes the
  file). A second signal stops waiting.

Like the SDK's, it moves the wire off fds 0 and 1 while it serves: fd 0 reads /dev/null and fd 1 writes to
stderr, so a library or child process that reads stdin or prints cannot corrupt the protocol.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import BinaryIO

import anyio
import anyio.abc
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from duckgraph.core.mcp.json_text import (
    BAD_ID,
    has_bad_id,
    not_a_message,
    request_id,
    valid_id,
    without_lone_surrogates,
)

log = logging.getLogger(__name__)

#: The JSON-RPC error code of a request refused because the server is stopping (implementation-defined range).
STOPPING = -32000
#: JSON tokens, enough to find the top-level "id" of a message no parser accepts (see `_top_level_id`).
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')


# -- reading one message ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Refusal:
    """The transport's own answer to a line that is no valid JSON-RPC message. Kept apart from the messages: a
    client's error response (a JSONRPCError, e.g. to a sampling or roots request it declines) is a message for
    the session, and sent back to the client it would leave the server's request unanswered."""

    answer: JSONRPCError


def read_message(line: bytes) -> JSONRPCMessage | Refusal:
    """The message on one line, or the refusal to answer it with when it is not a valid JSON-RPC message."""
    text = line.decode("utf-8", errors="replace")  # as the SDK: invalid UTF-8 bytes become U+FFFD
    try:
        message = jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError as exc:
        problem = exc.errors()[0]
    else:
        if isinstance(message, JSONRPCNotification) and '"id"' in text and has_bad_id(json.loads(text)):
            return Refusal(_error(None, INVALID_REQUEST, BAD_ID))
        return message
    if problem["type"] == "json_invalid":
        mended = without_lone_surrogates(text)
        if mended is None:
            return _parse_error(text, problem["msg"])
        try:
            return jsonrpc_message_adapter.validate_json(mended, by_name=False)
        except ValidationError as exc:
            problem = exc.errors()[0]
            if problem["type"] == "json_invalid":
                return _parse_error(text, problem["msg"])
            text = mended
    return _invalid(text)


def _parse_error(text: str, reason: str) -> Refusal:
    if "recursion limit" in reason:
        reason += " (the JSON is nested too deeply)"
    # JSON-RPC answers a parse error with id null; the id is given when it can be read all the same, because a
    # client cannot match an answer without it and waits for its timeout.
    return Refusal(_error(_top_level_id(text), PARSE_ERROR, f"Parse error: {reason}"))


def _invalid(text: str) -> Refusal:
    """Valid JSON that is no JSON-RPC 2.0 message: params that are not an object, or a missing/wrong member."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    return Refusal(_error(request_id(value), *not_a_message(value)))


def _error(request_id: str | int | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


def _top_level_id(text: str) -> str | int | None:
    """The "id" member of the outermost object, read without parsing the rest (which may be nested deeper than
    any parser goes, or broken)."""
    depth, expect_key, key, after_colon = 0, False, None, False
    for match in _TOKEN.finditer(text):
        token = match.group()
        if depth == 1 and after_colon and key == '"id"':
            if token in "{[":
                return None
            try:
                return valid_id(json.loads(token))
            except ValueError:
                return None
        if token in ("{", "["):
            depth += 1
            expect_key = depth == 1 and token == "{"
        elif token in ("}", "]"):
            depth -= 1
            if depth <= 0:
                return None
        elif depth == 1:
            if token == ",":
                expect_key, after_colon = True, False
            elif token == ":":
                after_colon = True
            elif expect_key:
                key, expect_key, after_colon = token, False, False
    return None


# -- the transport ------------------------------------------------------------------------------------------


class _Wire:
    """The client's pipes on private descriptors; fds 0 and 1 point elsewhere until `restore`."""

    def __init__(self) -> None:
        self.reading: BinaryIO = os.fdopen(os.dup(0), "rb")  # os.dup: above 2, not inherited by children
        self.writing: BinaryIO = os.fdopen(os.dup(1), "wb")
        self._saved = (os.dup(0), os.dup(1))
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(2, 1)

    def restore(self) -> None:
        for fd, saved in zip((0, 1), self._saved):
            os.dup2(saved, fd)
            os.close(saved)


class StdioTransport:
    """Serves one MCP session over the process's stdin and stdout (see the module's docstring)."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        #: The signal that stopped the server, if one did.
        self.stopped_by: signal.Signals | None = None
        self._in_flight: set[str | int] = set()
        self._hurry = anyio.Event()

    @asynccontextmanager
    async def streams(self) -> AsyncIterator[tuple[MemoryObjectReceiveStream[SessionMessage | Exception],
                                                   MemoryObjectSendStream[SessionMessage]]]:
        """The session's read and write streams; the session ends when stdin closes or a signal stops it."""
        wire = _Wire()
        to_session, session_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        session_writes, to_client = anyio.create_memory_object_stream[SessionMessage](0)
        reading, writer_done = anyio.CancelScope(), anyio.Event()
        try:
            async with anyio.create_task_group() as tasks:
                # The reader answers what it cannot pass on through its own clone of the write stream: the writer
                # ends once the session and the reader have both closed theirs.
                tasks.start_soon(self._read, wire.reading, to_session, session_writes.clone(), reading)
                tasks.start_soon(self._write, wire.writing, to_client, writer_done)
                tasks.start_soon(self._watch_signals, tasks, reading)
                yield session_reads, session_writes
                # The session has ended (its lifespan closed the file): nothing more to read; the last answers
                # go out unless the client has stopped reading them.
                reading.cancel()
                with anyio.move_on_after(1.0):
                    await writer_done.wait()
                tasks.cancel_scope.cancel()
        finally:
            wire.restore()

    async def _read(self, wire: BinaryIO, to_session: MemoryObjectSendStream[SessionMessage | Exception],
                    replies: MemoryObjectSendStream[SessionMessage], scope: anyio.CancelScope) -> None:
        with scope:
            async with to_session, replies:
                while True:
                    # Abandoned when cancelled: the thread stays blocked on the pipe until the process ends.
                    line = await anyio.to_thread.run_sync(wire.readline, abandon_on_cancel=True)
                    if not line:
                        return  # the client closed stdin: the session ends (closing `to_session` says so)
                    if not line.strip():
                        continue
                    message = read_message(line)
                    if isinstance(message, Refusal):
                        log.warning("answered a message that is not valid JSON-RPC: %s", message.answer.error.message)
                        await replies.send(SessionMessage(message.answer))
                    elif self.stopped_by is not None and isinstance(message, JSONRPCRequest):
                        await replies.send(SessionMessage(_error(
                            message.id, STOPPING,
                            f"duckgraph is stopping ({self.stopped_by.name}): {message.method} was not run")))
                    else:
                        self._track(message)
                        await to_session.send(SessionMessage(message))

    def _track(self, message: JSONRPCMessage) -> None:
        if isinstance(message, JSONRPCRequest):
            self._in_flight.add(message.id)
        elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            self._in_flight.discard((message.params or {}).get("requestId"))  # a cancelled call is not answered

    async def _write(self, wire: BinaryIO, to_client: MemoryObjectReceiveStream[SessionMessage],
                     done: anyio.Event) -> None:
        try:
            await self._write_all(wire, to_client)
        finally:
            done.set()

    async def _write_all(self, wire: BinaryIO, to_client: MemoryObjectReceiveStream[SessionMessage]) -> None:
        async with to_client:
            async for session_message in to_client:
                message = session_message.message
                data = message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
                try:
                    await anyio.to_thread.run_sync(_send, wire, data, abandon_on_cancel=True)
                except OSError:  # the client is gone: what is left has no reader
                    return
                if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None:
                    self._in_flight.discard(message.id)

    async def _watch_signals(self, tasks: anyio.abc.TaskGroup, reading: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                if self.stopped_by is None:
                    self.stopped_by = signal.Signals(signum)
                    tasks.start_soon(self._stop, reading)
                else:
                    self._hurry.set()

    async def _stop(self, reading: anyio.CancelScope) -> None:
        """Let the calls under way answer (at most `grace` seconds, or until a second signal), then end the
        session by closing what it reads, as a client closing stdin does."""
        assert self.stopped_by is not None
        log.info("stopping on %s: finishing %d call(s) under way (at most %g s)", self.stopped_by.name,
                 len(self._in_flight), self.grace)
        with anyio.move_on_after(self.grace):
            while self._in_flight and not self._hurry.is_set():
                await anyio.sleep(0.05)
        if self._in_flight:
            log.warning("stopping on %s with %d call(s) unanswered", self.stopped_by.name, len(self._in_flight))
        reading.cancel()


def _send(wire: BinaryIO, data: bytes) -> None:
    wire.write(data)
    wire.flush()
