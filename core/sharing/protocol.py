"""The socket protocol between the owner of a file and its client servers: the messages, a client's connection and
the owner's endpoint.

The protocol is newline-delimited JSON. On connecting, the owner sends `{"hello": {...}}` (pid, protocol, version,
and which tools it serves: `SURFACE`). A client sends nothing to an owner of another protocol, nor to one whose
`SURFACE` fields differ from its own (`version_mismatch`): the owner's tools answer its calls, but its own MCP client
checks them against the listing the client server gave it.
A request is `{"id", "method", "params", "exclusive"?}`; the owner answers with any number of `{"id",
"progress": [done, total, message]}` lines (and `{"id", "started": true}` for an exclusive request) and then
one `{"id", "result"}` or `{"id", "error": {"type", "message"}}` line, sent only once the work is done (for a
write: committed). A connection carries one request at a time; a client keeps a pool of connections.

While a request runs, the client may send `{"id", "cancel": true}` on its connection (its own MCP client cancelled
the call): the owner then cancels the request as it cancels a call of its own (none of its commits starts from
then on; see `current_cancel`) and answers it with a `RequestCancelled` error. An owner says in its greeting
(`"cancel": true`) that it understands this line; a client sends it to no other owner, since an older one would
read it as a bad request.

A client sends nothing before it knows the owner is this user's own process: the socket file must be this user's
and private to them, and the process listening on it must run as this user (its credentials, from the kernel). As
root, on another user's memory, that user's too (`memory_owner`): root's owner then gives its socket to that user,
and answers only root's own processes.
"""

from __future__ import annotations

import json
import logging
import os
import select
import socket
import stat
import struct
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from duckgraph.core import __version__
from duckgraph.core.sharing.lock import (
    ForeignFileError,
    Owner,
    check_private,
    identity,
    ours,
    private_folder,
    unlink_if_same,
    user_name,
)
from duckgraph.ports import DuckgraphError

log = logging.getLogger(__name__)

#: 2: the greeting says which tools the owner serves (`SURFACE`). An owner of protocol 1 does not, and every
#: duckgraph of protocol 1 announced the same version, so a mismatch is told by the protocol number.
PROTOCOL = 2
#: The greeting's fields that say which calls an owner answers, and how: a client forwards only to an owner whose
#: values are its own ("tools": a hash of the tool listing, core/mcp/tool_listing.py `surface`).
SURFACE = ("tools",)
#: How long a stopping owner waits for the requests it is running before it closes the file anyway.
DRAIN_SECONDS = 60.0

#: Progress callback: (done, total, message).
Progress = Callable[[float, "float | None", "str | None"], None]
#: Runs one request on the owner: (method, params, progress) -> a JSON-able result; raises to answer an error.
Handler = Callable[[str, dict[str, Any], Progress], Any]


class OtherVersionError(DuckgraphError):
    """The owner runs a duckgraph that serves other tools than this one (`version_mismatch`): no call is sent to it."""


def version_mismatch(hello: dict[str, Any], surface: dict[str, Any] | None = None) -> str | None:
    """Why no call may go to the owner that greeted with `hello` (or described itself so in the lock file), or None:
    it speaks another protocol, or (`surface`: this side's `SURFACE` fields) serves other tools."""
    theirs = hello.get("protocol")
    owner = (f"the duckgraph server that owns {hello.get('db') or 'the file'} (pid {hello.get('pid') or '?'}, "
             f"version {hello.get('version') or '?'})")
    if theirs != PROTOCOL:
        age = ("an older" if theirs < PROTOCOL else "a newer") if isinstance(theirs, int) else "another"
        why = (f"is {age} duckgraph (sharing protocol {theirs}; this one, version {__version__}, speaks {PROTOCOL}), "
               "which may serve other tools than this one")
    elif surface and (differ := [key for key, value in surface.items() if hello.get(key) != value]):
        why = (f"runs another duckgraph version, which serves other tools than this one (version {__version__}; "
               + ", ".join(f"{key} {hello.get(key)}, here {surface[key]}" for key in differ) + ")")
    else:
        return None
    return (f"{owner} {why}. No call is sent to it, since its answers may not fit the tools that a server of this "
            "version lists: stop that server (a duckgraph server of this version waiting on the file then takes it "
            "over), or run the same duckgraph version in every MCP client configuration and restart them")


class RequestCancelled(DuckgraphError):
    """The client cancelled the request: the owner stopped it before it ran, or none of its commits started after
    the cancel (as for a call of the owner's own)."""


class CancelSignal:
    """On the owner: whether the client cancelled the request running on this thread (`current_cancel`), and what
    to run when it does."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._callbacks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        with self._lock:
            return self._cancelled

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Run `callback` once the client cancels (at once if it has): on the connection's thread, so it must not
        block."""
        with self._lock:
            if not self._cancelled:
                self._callbacks.append(callback)
                return
        callback()

    def cancel(self) -> None:
        with self._lock:
            if self._cancelled:
                return
            self._cancelled, callbacks, self._callbacks = True, self._callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # one failing hook must not keep the others from stopping the request
                log.exception("cancelling a client's request failed")


#: The cancel signal of the client's request that the handler runs on this thread (None outside a request).
_CANCEL: ContextVar[CancelSignal | None] = ContextVar("duckgraph_request_cancel", default=None)


def current_cancel() -> CancelSignal | None:
    """The cancel signal of the client's request being handled on this thread, for the handler to honour."""
    return _CANCEL.get()


class CallCancel:
    """On a client: cancels one `FileShare.call`, whichever connection it is sent on (it may be sent again to a
    next owner). Not sent yet, it never will be; sent, the owner is told over the request's connection."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._sent: tuple[Connection, int] | None = None  # the connection and id of the request out now

    @property
    def cancelled(self) -> bool:
        with self._lock:
            return self._cancelled

    def cancel(self) -> str:
        """Cancel; never blocks (the event loop calls it). Returns "unsent" (the owner never gets the request),
        "told" (the owner is told, and stops it), "unsupported" (an older owner, which runs it to its end), or
        "again" (cancelled before)."""
        with self._lock:
            if self._cancelled:
                return "again"
            self._cancelled, sent = True, self._sent
        if sent is None:
            return "unsent"
        conn, request_id = sent
        if not conn.hello.get("cancel"):
            return "unsupported"
        # On a thread of its own: the request's line may still be going out (a large add_documents), and the event
        # loop that cancels must not wait for it, nor for an owner that does not read.
        threading.Thread(target=conn.send_cancel, args=(request_id,), name="duckgraph-share-cancel",
                         daemon=True).start()
        return "told"

    def _sending(self, conn: Connection, request_id: int) -> bool:
        """Mark the request as out on `conn` (with the connection's send lock held); False once cancelled."""
        with self._lock:
            if self._cancelled:
                return False
            self._sent = (conn, request_id)
            return True

    def _answered(self) -> None:
        with self._lock:
            self._sent = None


def _encode(message: dict[str, Any]) -> bytes:
    # NaN stays the bare token NaN (as MCP clients may send it), so the owner refuses it exactly as a local call.
    return (json.dumps(message, ensure_ascii=False, separators=(",", ":"), default=str) + "\n").encode("utf-8")


def _error_reply(exc: BaseException) -> dict[str, Any]:
    return {"type": type(exc).__name__, "message": str(exc)}


class ConnectionLost(Exception):
    """The connection broke; `sent` says whether the owner may have run the request."""

    def __init__(self, sent: bool) -> None:
        super().__init__("connection to the owner lost")
        self.sent = sent


class Connection:
    """A client's connection to the owner: one request at a time. `owner`: the memory's owner (`memory_owner`).
    Refused (`OtherVersionError`) when the owner speaks another protocol, or (`surface`: this side's `SURFACE`
    fields) serves other tools."""

    def __init__(self, path: Path, timeout: float = 5.0, owner: Owner | None = None,
                 surface: dict[str, Any] | None = None) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._send_lock = threading.Lock()  # a cancel line goes out from another thread than its request
        try:
            self.sock.settimeout(timeout)
            self.sock.connect(str(path))
            _check_owner(path, self.sock, owner)
            self.reader = self.sock.makefile("rb")
            line = self.reader.readline()
            hello = json.loads(line).get("hello") if line.endswith(b"\n") else None
            if not isinstance(hello, dict):
                raise ConnectionError("the owner sent no greeting")
            self.sock.settimeout(None)
        except BaseException:
            self.sock.close()
            raise
        self.hello: dict[str, Any] = hello
        if mismatch := version_mismatch(hello, surface):
            self.close()
            raise OtherVersionError(mismatch)

    def idle_and_open(self) -> bool:
        """An idle connection has nothing to read; if it has, the owner closed it (or broke the protocol)."""
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    def request(self, request_id: int, method: str, params: dict[str, Any], progress: Progress | None,
                exclusive: bool = False, cancel: CallCancel | None = None) -> dict:
        """Send one request and wait for its reply. An `exclusive` request waits on the owner for the other
        exclusive ones, and the owner says "started" before running it: until then, it provably has not run.
        `cancel`, once cancelled, tells the owner to cancel the request; cancelled before, it is not sent
        (`RequestCancelled`)."""
        message = {"id": request_id, "method": method, "params": params}
        if exclusive:
            message["exclusive"] = True
        try:
            with self._send_lock:  # marked as out before a cancel can look for it, sent before its cancel line
                if cancel is not None and not cancel._sending(self, request_id):
                    raise RequestCancelled("the call was cancelled before it was sent to the owner: it did not run")
                self.sock.sendall(_encode(message))
        except OSError as exc:
            # The owner only runs a request once it has read the whole line, newline included.
            raise ConnectionLost(sent=False) from exc
        try:
            return self._reply(request_id, progress, started=not exclusive)
        finally:
            if cancel is not None:
                cancel._answered()  # a later cancel must not reach the next request on this connection

    def send_cancel(self, request_id: int) -> None:
        """Tell the owner that the client cancelled request `request_id` (ignored once it was answered)."""
        try:
            with self._send_lock:
                self.sock.sendall(_encode({"id": request_id, "cancel": True}))
        except OSError as exc:  # the connection broke: the request's own reader reports that
            log.info("could not tell the owner that request %s was cancelled: %s", request_id, exc)

    def _reply(self, request_id: int, progress: Progress | None, started: bool) -> dict:
        while True:
            # The owner's "started" line is in our socket before it runs anything, so it is read before the
            # end of the stream whatever happens to the owner afterwards.
            try:
                line = self.reader.readline()
            except OSError as exc:
                raise ConnectionLost(sent=started) from exc
            try:
                reply = json.loads(line) if line.endswith(b"\n") else None
            except ValueError:
                reply = None
            if not isinstance(reply, dict):  # closed (or garbled) after the request went out
                raise ConnectionLost(sent=started)
            if reply.get("id") != request_id:
                continue
            if reply.get("started"):
                started = True
                continue
            if "progress" in reply:
                if progress is not None:
                    done, total, message = (list(reply["progress"]) + [None, None, None])[:3]
                    progress(done, total, message)
                continue
            return reply

    def close(self) -> None:
        for closing in (getattr(self, "reader", None), self.sock):
            try:
                if closing is not None:
                    closing.close()
            except OSError:
                pass


def peer_credentials(conn: socket.socket) -> tuple[int | None, int | None]:
    """(pid, uid) of the process at the other end of a Unix socket, as the kernel tells it; None where the
    platform does not say (the pid is not told on macOS)."""
    try:
        if hasattr(socket, "SO_PEERCRED"):  # Linux
            pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                                  struct.calcsize("3i")))
            return pid, uid
        if hasattr(socket, "LOCAL_PEERCRED"):  # macOS, BSD: struct xucred {u_int version; uid_t uid; ...}
            _version, uid = struct.unpack("2I", conn.getsockopt(0, socket.LOCAL_PEERCRED, 76)[:8])
            return None, uid
    except (OSError, struct.error):
        pass
    return None, None


def _check_owner(path: Path, conn: socket.socket, owner: Owner | None) -> None:
    """Refuse an owner that is not this user's own process, before anything is sent to it. Checked once
    connected: an owner binds its socket, makes it private and only then listens."""
    found = os.lstat(path)
    check_private(path, found, "the owner's socket", owner)
    if not stat.S_ISSOCK(found.st_mode):  # the path comes from the lock file: it must still be a socket
        raise ForeignFileError(f"{path} (the owner's socket) is not a socket: remove it")
    pid, uid = peer_credentials(conn)
    if uid is not None and not ours(uid, owner):
        raise ForeignFileError(
            f"the process listening on {path} (pid {pid if pid is not None else '?'}) runs as {user_name(uid)}, "
            f"not as you, {user_name(os.getuid())}: it is not your duckgraph server, so nothing was sent to it. "
            "Have that user or an administrator stop it, or keep the database in a folder only you can write to"
        )


class Endpoint:
    """The owner's side: accepts connections on the socket and runs their requests with the handler.

    `owner` (root on another user's memory, `memory_owner`): the socket is given to that user, so that one left
    behind (SIGKILL) is theirs to replace; only root's own processes are answered, since that user may now connect.
    """

    def __init__(self, path: Path, handler: Handler, hello: dict[str, Any], owner: Owner | None = None) -> None:
        self.path = path
        self._owner = owner
        self._handler = handler
        self._hello = _encode({"hello": {**hello, "cancel": True}})  # understands a client's cancel line
        self._cond = threading.Condition()
        self._connections: dict[socket.socket, int | None] = {}  # -> the peer's pid, where the OS tells it
        self._running = 0
        self._closing = False
        #: Exclusive requests (the clients' writes) run one at a time, so that those still waiting when the owner
        #: dies have provably not run and can go to the next owner.
        self._gate = threading.Lock()
        private_folder(path.parent)
        try:
            found = os.lstat(path)
        except FileNotFoundError:
            pass
        else:
            if not ours(found.st_uid, owner):  # planted by another user: say so rather than fail to remove it
                check_private(path, found, "the owner's socket", owner)
            path.unlink()  # left by an owner that was killed; only the lock holder gets here
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._made: tuple[int, int] | None = None  # the socket file bound, the one `close` may remove
        try:
            self._sock.bind(str(path))
            self._made = identity(os.lstat(path))
            os.chmod(path, 0o600)  # before listen(): nobody can connect in between
            if owner is not None:
                os.chown(path, *owner, follow_symlinks=False)
            self._sock.listen(64)
        except BaseException:
            self._sock.close()
            if self._made is not None:
                unlink_if_same(path, self._made)
            raise
        self._sock.settimeout(1.0)
        threading.Thread(target=self._accept, name="duckgraph-share-accept", daemon=True).start()

    @property
    def client_pids(self) -> list[int]:
        """The processes connected (a client server keeps several connections); [] where the OS does not say."""
        with self._cond:
            return sorted({pid for pid in self._connections.values() if pid})

    def _accept(self) -> None:
        while not self._closing:
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._closing:
                    return
                time.sleep(0.05)
                continue
            conn.settimeout(None)
            pid, uid = peer_credentials(conn)
            if self._owner is not None and uid != os.getuid():  # the socket's user, not root: they get nothing
                log.warning("refused a connection from %s (pid %s): this server runs as %s, and answers only its "
                            "own user's processes", user_name(uid) if uid is not None else "an unknown user",
                            pid if pid is not None else "?", user_name(os.getuid()))
                conn.close()
                continue
            with self._cond:
                if self._closing:
                    conn.close()
                    return
                self._connections[conn] = pid
            threading.Thread(target=self._serve, args=(conn,), name="duckgraph-share-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        """Read the connection's lines. A request runs on a thread of its own, so that a cancel line sent while it
        runs is read (and the request cancelled) at once; the next request waits for it to end."""
        write_lock = threading.Lock()

        def send(message: dict[str, Any]) -> None:
            with write_lock:
                conn.sendall(_encode(message))

        running: tuple[Any, CancelSignal, threading.Thread] | None = None
        try:
            with write_lock:
                conn.sendall(self._hello)
            reader = conn.makefile("rb")
            while True:
                line = reader.readline()
                if not line.endswith(b"\n"):  # closed, or a request cut short: never run a partial request
                    return
                try:
                    request = json.loads(line)
                    if request.get("cancel"):
                        if running is not None and running[0] == request["id"] and running[2].is_alive():
                            running[1].cancel()
                        continue  # a cancel for a request already answered: nothing left to stop
                    request_id, method, params = request["id"], str(request["method"]), request.get("params") or {}
                    exclusive = bool(request.get("exclusive"))
                except (ValueError, KeyError, TypeError, AttributeError) as exc:
                    send({"id": None, "error": {"type": "ProtocolError", "message": f"bad request: {exc}"}})
                    continue
                if running is not None:
                    running[2].join()  # one request at a time on a connection
                signal = CancelSignal()
                worker = threading.Thread(target=self._run, args=(send, signal, request_id, method, params, exclusive),
                                          name="duckgraph-share-request", daemon=True)
                running = (request_id, signal, worker)
                worker.start()
        except OSError:
            pass
        finally:
            if running is not None:
                running[2].join()  # its answer goes out (or fails) before the connection is closed
            with self._cond:
                self._connections.pop(conn, None)
            try:
                conn.close()
            except OSError:
                pass

    def _run(self, send: Callable[[dict[str, Any]], None], signal: CancelSignal, request_id: Any, method: str,
             params: dict[str, Any], exclusive: bool) -> None:
        """Run one request with the handler and answer it (on the request's own thread)."""
        try:
            if exclusive:
                self._gate.acquire()
            with self._cond:
                refused = self._closing
                if not refused:
                    self._running += 1
            if refused:
                if exclusive:
                    self._gate.release()
                send({"id": request_id, "error": {"type": "Closing", "message": "the owner is stopping"}})
                return
        except OSError:
            return
        try:
            if signal.cancelled:  # while it waited for its turn: it never runs
                send({"id": request_id, "error": _error_reply(RequestCancelled(
                    "the call was cancelled before it started on the owner: it did not run"))})
                return
            if exclusive:
                send({"id": request_id, "started": True})

            def progress(done: float, total: float | None = None, message: str | None = None) -> None:
                try:
                    send({"id": request_id, "progress": [done, total, message]})
                except OSError:
                    pass

            token = _CANCEL.set(signal)
            try:
                reply = {"id": request_id, "result": self._handler(method, params, progress)}
            except Exception as exc:
                if not isinstance(exc, DuckgraphError):
                    log.exception("request %s from a client server failed", method)
                reply = {"id": request_id, "error": _error_reply(exc)}
            finally:
                _CANCEL.reset(token)
            send(reply)  # before it counts as done: a stopping owner waits for the answer to go out
        except OSError:
            pass
        finally:
            if exclusive:
                self._gate.release()
            with self._cond:
                self._running -= 1
                self._cond.notify_all()

    def close(self, drain_seconds: float = DRAIN_SECONDS) -> None:
        """Refuse new requests, let running ones finish and answer (up to `drain_seconds`), then disconnect."""
        with self._cond:
            self._closing = True
        try:
            self._sock.close()
        except OSError:
            pass
        deadline = time.monotonic() + drain_seconds
        with self._cond:
            while self._running and time.monotonic() < deadline:
                self._cond.wait(0.1)
            if self._running:
                log.warning("stopping with %d client requests still running", self._running)
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._made is not None:
            unlink_if_same(self.path, self._made)
