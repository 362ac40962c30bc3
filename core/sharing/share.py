"""Several duckgraph servers on one knowledge file: one process owns the file, the others are its thin clients.

DuckDB lets one process at a time open a file for writing, and users run several MCP hosts at once (a chat app,
an editor, a CLI agent), each spawning its own `duckgraph serve` on the same file. So the servers of one file
settle who owns it, and the others forward their work to the owner:

- Ownership is an exclusive `flock` on `<db>.lock`, taken before the database is opened. The kernel drops it
  when the owner exits, however it exits (SIGKILL included), so it can never go stale. The owner writes its pid
  into the lock file, for messages and `duckgraph doctor`. The lock file stays next to the database (removing it
  would let two processes lock two different files).
- The owner listens on a Unix socket, `<db>.sock`, or, when that path is too long for AF_UNIX, a socket named
  after a hash of the database path in a private runtime folder. It is created with mode 0600.
- The protocol is newline-delimited JSON. On connecting, the owner sends `{"hello": {...}}` (pid, protocol, ...).
  A request is `{"id", "method", "params", "exclusive"?}`; the owner answers with any number of `{"id",
  "progress": [done, total, message]}` lines (and `{"id", "started": true}` for an exclusive request) and then
  one `{"id", "result"}` or `{"id", "error": {"type", "message"}}` line, sent only once the work is done (for a
  write: committed). A connection carries one request at a time; a client keeps a pool of connections.
- A server that finds the lock taken is a client: it waits for the lock in a background thread, and when the
  owner goes away it takes the file over (opens it, binds the socket) and runs its calls itself from then on.

What happens to a call when the owner goes away (the rule every caller relies on):

- A request that provably did not run is sent again, to the next owner, or run here once this process owns
  the file: no connection, a failed send, an owner that answered that it is closing, or an exclusive request
  whose "started" line had not come. Clients' writes are exclusive: the owner runs them one at a time (as its
  knowledge base does anyway) and writes "started" to the socket before running one, so that line is readable
  before the end of the stream whenever the write may have run.
- A request that may have run and got no answer is repeated only when the caller says it may be
  (`repeatable`: reads). Otherwise the call fails with `OwnerLostError`, which says that the outcome is unknown
  and to check and retry: a write is never applied twice by duckgraph, and never reported as done unless the
  owner answered after committing it. So when an owner is killed, at most the one write it was running fails
  (and any extraction it was running: those take long, so they do not take turns with the other writes).
- An owner that stops normally (its host closed stdin) refuses new requests, finishes the ones it is running
  and answers them, closes the database and only then releases the lock, so a normal hand-over loses nothing
  and fails no call.

Nothing here knows about MCP: the server passes in the function that runs a request (`Handler`).
Standard library only, so a client never imports numpy, DuckDB or a model.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import select
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from duckgraph.core import __version__
from duckgraph.ports import DuckgraphError, errors

try:
    import fcntl
except ImportError:  # Windows: no flock; each server opens the file itself, as before
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

PROTOCOL = 1
#: AF_UNIX socket paths hold 108 bytes on Linux and 104 on macOS, the terminating NUL included.
MAX_SOCKET_PATH_BYTES = 100
#: How long a call waits for an owner to answer (it may be starting, or taking over and opening the file).
OWNER_WAIT_SECONDS = 30.0
#: How long a process that has just taken the file over retries opening it (the old owner's DuckDB lock may
#: outlive its flock by a moment).
TAKEOVER_OPEN_SECONDS = 10.0
#: How long a stopping owner waits for the requests it is running before it closes the file anyway.
DRAIN_SECONDS = 60.0
#: Idle connections a client keeps for later calls.
POOL_SIZE = 16
#: How often a call that may run twice is sent again after losing its connection (owners dying one after another).
MAX_RESENDS = 5

#: Progress callback: (done, total, message).
Progress = Callable[[float, "float | None", "str | None"], None]
#: Runs one request on the owner: (method, params, progress) -> a JSON-able result; raises to answer an error.
Handler = Callable[[str, dict[str, Any], Progress], Any]


class OwnerLostError(DuckgraphError):
    """The owning process went away while it was running this call: whether it was applied is unknown."""


class NoOwnerError(DuckgraphError):
    """The file is held by a duckgraph process that does not answer, or by none at all (`call_owner`)."""


class RemoteError(DuckgraphError):
    """An error the owner raised that is not one of duckgraph's own; `kind` is its class name."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class RunLocally(Exception):
    """Raised by `FileShare.call` once this process owns the file: run the call here instead."""


def supported() -> bool:
    """Whether this platform can share a file between servers (flock and Unix sockets)."""
    return fcntl is not None and hasattr(socket, "AF_UNIX")


# -- where things are --------------------------------------------------------------------------------------


def _resolved(db: str | Path) -> Path:
    """One name per file: `./kb.duckdb`, `~/kb.duckdb` and a symlink to it all lock the same lock file."""
    return Path(db).expanduser().resolve()


def lock_path(db: str | Path) -> Path:
    path = _resolved(db)
    return path.with_name(path.name + ".lock")


def socket_path(db: str | Path) -> Path:
    """`<db>.sock`, or `<runtime dir>/<hash of the db path>.sock` when that is too long for AF_UNIX."""
    path = _resolved(db)
    beside = path.with_name(path.name + ".sock")
    if len(os.fsencode(beside)) <= MAX_SOCKET_PATH_BYTES:
        return beside
    digest = hashlib.sha256(os.fsencode(path)).hexdigest()[:32]
    for folder in _runtime_dirs():
        candidate = folder / f"{digest}.sock"
        if len(os.fsencode(candidate)) <= MAX_SOCKET_PATH_BYTES:
            return candidate
    raise DuckgraphError(f"no folder with a path short enough for a Unix socket for {path}")


def _runtime_dirs() -> list[Path]:
    folders = []
    if runtime := os.environ.get("XDG_RUNTIME_DIR"):
        folders.append(Path(runtime) / "duckgraph")
    folders.append(Path(tempfile.gettempdir()) / f"duckgraph-{os.getuid()}")
    folders.append(Path("/tmp") / f"duckgraph-{os.getuid()}")
    return folders


def _private_folder(folder: Path) -> None:
    """Create the socket's folder when it is a runtime folder of ours; refuse one others could write to."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if folder.name.startswith("duckgraph"):
        info = folder.stat()
        if info.st_uid != os.getuid() or info.st_mode & 0o022:
            raise DuckgraphError(f"{folder} belongs to another user or others can write to it; remove it")


# -- the lock ----------------------------------------------------------------------------------------------


class _LockFile:
    """An exclusive flock on `<db>.lock`, held through one open file description."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self, *, blocking: bool) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        return True

    def describe(self, info: dict[str, Any]) -> None:
        assert self.fd is not None
        data = json.dumps(info).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)

    def release(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def holder(db: str | Path) -> dict[str, Any] | None:
    """The duckgraph process that holds the file, as it describes itself ({} until it has), or None."""
    if not supported():
        return None
    path = lock_path(db)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pass
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        try:
            info = json.loads(os.pread(fd, 65_536, 0) or b"{}")
        except (OSError, ValueError):
            info = {}
        return info if isinstance(info, dict) else {}
    finally:
        os.close(fd)


# -- the wire ----------------------------------------------------------------------------------------------


def _encode(message: dict[str, Any]) -> bytes:
    # NaN stays the bare token NaN (as MCP clients may send it), so the owner refuses it exactly as a local call.
    return (json.dumps(message, ensure_ascii=False, separators=(",", ":"), default=str) + "\n").encode("utf-8")


def _error_reply(exc: BaseException) -> dict[str, Any]:
    return {"type": type(exc).__name__, "message": str(exc)}


def _remote_error(error: dict[str, Any]) -> DuckgraphError:
    """The owner's error as the same duckgraph error class (same message), or a RemoteError."""
    kind, message = str(error.get("type", "Error")), str(error.get("message", ""))
    cls = getattr(errors, kind, None)
    if isinstance(cls, type) and issubclass(cls, DuckgraphError):
        return cls(message)
    if kind in ("OwnerLostError", "NoOwnerError"):
        return {"OwnerLostError": OwnerLostError, "NoOwnerError": NoOwnerError}[kind](message)
    return RemoteError(message, kind)


class _Lost(Exception):
    """The connection broke; `sent` says whether the owner may have run the request."""

    def __init__(self, sent: bool) -> None:
        super().__init__("connection to the owner lost")
        self.sent = sent


class _Connection:
    """A client's connection to the owner: one request at a time."""

    def __init__(self, path: Path, timeout: float = 5.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.settimeout(timeout)
            self.sock.connect(str(path))
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
        if hello.get("protocol") != PROTOCOL:
            self.close()
            raise DuckgraphError(
                f"the duckgraph server that owns the file (pid {hello.get('pid')}, version {hello.get('version')}) "
                f"speaks sharing protocol {hello.get('protocol')}, this one {PROTOCOL}: run the same duckgraph "
                "version in every MCP client configuration, or restart them"
            )

    def idle_and_open(self) -> bool:
        """An idle connection has nothing to read; if it has, the owner closed it (or broke the protocol)."""
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    def request(self, request_id: int, method: str, params: dict[str, Any], progress: Progress | None,
                exclusive: bool = False) -> dict:
        """Send one request and wait for its reply. An `exclusive` request waits on the owner for the other
        exclusive ones, and the owner says "started" before running it: until then, it provably has not run."""
        message = {"id": request_id, "method": method, "params": params}
        if exclusive:
            message["exclusive"] = True
        try:
            self.sock.sendall(_encode(message))
        except OSError as exc:
            # The owner only runs a request once it has read the whole line, newline included.
            raise _Lost(sent=False) from exc
        started = not exclusive
        while True:
            # The owner's "started" line is in our socket before it runs anything, so it is read before the
            # end of the stream whatever happens to the owner afterwards.
            try:
                line = self.reader.readline()
            except OSError as exc:
                raise _Lost(sent=started) from exc
            try:
                reply = json.loads(line) if line.endswith(b"\n") else None
            except ValueError:
                reply = None
            if not isinstance(reply, dict):  # closed (or garbled) after the request went out
                raise _Lost(sent=started)
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


def _peer_pid(conn: socket.socket) -> int | None:
    """The pid of the process at the other end of a Unix socket (Linux), for `duckgraph doctor`."""
    try:
        pid, _uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                              struct.calcsize("3i")))
        return pid
    except (AttributeError, OSError, struct.error):
        return None


class _Endpoint:
    """The owner's side: accepts connections on the socket and runs their requests with the handler."""

    def __init__(self, path: Path, handler: Handler, hello: dict[str, Any]) -> None:
        self.path = path
        self._handler = handler
        self._hello = _encode({"hello": hello})
        self._cond = threading.Condition()
        self._connections: dict[socket.socket, int | None] = {}  # -> the peer's pid, where the OS tells it
        self._running = 0
        self._closing = False
        #: Exclusive requests (the clients' writes) run one at a time, so that those still waiting when the owner
        #: dies have provably not run and can go to the next owner.
        self._gate = threading.Lock()
        _private_folder(path.parent)
        try:
            path.unlink()  # left by an owner that was killed; only the lock holder gets here
        except FileNotFoundError:
            pass
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.bind(str(path))
            os.chmod(path, 0o600)  # before listen(): nobody can connect in between
            self._sock.listen(64)
        except BaseException:
            self._sock.close()
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
            with self._cond:
                if self._closing:
                    conn.close()
                    return
                self._connections[conn] = _peer_pid(conn)
            threading.Thread(target=self._serve, args=(conn,), name="duckgraph-share-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        write_lock = threading.Lock()

        def send(message: dict[str, Any]) -> None:
            with write_lock:
                conn.sendall(_encode(message))

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
                    request_id, method, params = request["id"], str(request["method"]), request.get("params") or {}
                    exclusive = bool(request.get("exclusive"))
                except (ValueError, KeyError, TypeError) as exc:
                    send({"id": None, "error": {"type": "ProtocolError", "message": f"bad request: {exc}"}})
                    continue
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
                    continue
                try:
                    if exclusive:
                        send({"id": request_id, "started": True})

                    def progress(done: float, total: float | None = None, message: str | None = None,
                                 _id: Any = request_id) -> None:
                        try:
                            send({"id": _id, "progress": [done, total, message]})
                        except OSError:
                            pass

                    try:
                        reply = {"id": request_id, "result": self._handler(method, params, progress)}
                    except Exception as exc:
                        if not isinstance(exc, DuckgraphError):
                            log.exception("request %s from a client server failed", method)
                        reply = {"id": request_id, "error": _error_reply(exc)}
                    send(reply)  # before it counts as done: a stopping owner waits for the answer to go out
                finally:
                    if exclusive:
                        self._gate.release()
                    with self._cond:
                        self._running -= 1
                        self._cond.notify_all()
        except OSError:
            pass
        finally:
            with self._cond:
                self._connections.pop(conn, None)
            try:
                conn.close()
            except OSError:
                pass

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
        try:
            self.path.unlink()
        except OSError:
            pass


# -- the share -------------------------------------------------------------------------------------------


class FileShare:
    """This server's part in sharing one database file: its owner, or a client of the process that owns it.

    `start()` settles the role without waiting. A client's calls go through `call()`, which raises `RunLocally`
    once this process owns the file. `on_takeover` runs when a client takes the file over, before it accepts
    connections (it opens the database); `info` goes into the greeting and the lock file.
    """

    def __init__(
        self,
        db: str | Path,
        handler: Handler,
        *,
        on_takeover: Callable[[], None] | None = None,
        info: dict[str, Any] | None = None,
    ) -> None:
        self.db = Path(db).expanduser()
        self.lock_path = lock_path(db)
        self.socket_path = socket_path(db)
        self._handler = handler
        self._on_takeover = on_takeover
        self._after_takeover: list[Callable[[], None]] = []
        self._info = dict(info or {})
        self._cond = threading.Condition()
        self._role = "new"
        self._lock: _LockFile | None = None
        self._endpoint: _Endpoint | None = None
        self._pool: list[_Connection] = []
        self._ids = itertools.count(1)
        self._owner: dict[str, Any] = {}
        self._since = ""
        self._token = os.urandom(8).hex()  # tells our own socket apart from another owner's

    # -- role ------------------------------------------------------------------------------------------

    @property
    def role(self) -> str:
        """"owner", "client" or "closed"."""
        return self._role

    @property
    def is_owner(self) -> bool:
        return self._role == "owner"

    @property
    def owner_pid(self) -> int | None:
        if self._role == "owner":
            return os.getpid()
        pid = self._owner.get("pid")
        return pid if isinstance(pid, int) else None

    def start(self) -> str:
        """Own the file if nobody does, else become a client and wait for the lock in the background."""
        lock = _LockFile(self.lock_path)
        if lock.acquire(blocking=False):
            with self._cond:
                self._own(lock)
            log.info("this process (pid %d) owns %s; other duckgraph servers on it forward their calls over %s",
                     os.getpid(), self.db, self.socket_path)
        else:
            with self._cond:
                self._role = "client"
                self._owner = holder(self.db) or {}
            threading.Thread(target=self._wait_for_the_lock, name="duckgraph-share-wait", daemon=True).start()
            pid = self._owner.get("pid")
            log.info("%s is held by duckgraph pid %s: this server (pid %d) is its client and forwards every call "
                     "there", self.db, pid if pid else "(starting)", os.getpid())
        return self._role

    def _own(self, lock: _LockFile) -> None:
        """Become the owner (with `_cond` held): describe ourselves in the lock file and open the socket."""
        self._since = datetime.now(timezone.utc).isoformat(timespec="seconds")
        hello = {**self._info, "pid": os.getpid(), "protocol": PROTOCOL, "version": __version__,
                 "db": str(self.db), "since": self._since, "instance": self._token}
        try:
            lock.describe({**hello, "socket": str(self.socket_path)})
            self._endpoint = _Endpoint(self.socket_path, self._handler, hello)
        except BaseException:
            lock.release()
            raise
        self._lock = lock
        self._role = "owner"
        self._owner = hello
        for conn in self._pool:
            conn.close()
        self._pool.clear()
        self._cond.notify_all()

    def _wait_for_the_lock(self) -> None:
        lock = _LockFile(self.lock_path)
        try:
            lock.acquire(blocking=True)
        except OSError as exc:
            log.warning("cannot wait for %s: %s; this server stays a client", self.lock_path, exc)
            return
        if self._role == "closed":
            lock.release()
            return
        previous = self._owner.get("pid")
        log.warning("the duckgraph server that owned %s (pid %s) has stopped: this process (pid %d) takes it over",
                    self.db, previous or "?", os.getpid())
        self._prepare()
        with self._cond:
            if self._role == "closed":
                lock.release()
                return
            try:
                self._own(lock)
            except Exception as exc:
                log.error("cannot serve %s to other servers (%s); this process keeps it for itself", self.db, exc)
                self._lock, self._role = lock, "owner"
                self._cond.notify_all()
        for callback in list(self._after_takeover):  # read once the role is "owner": see `after_takeover`
            callback()

    def after_takeover(self, callback: Callable[[], None]) -> None:
        """Run `callback` (on the share's thread) once this client has taken the file over and owns it. One
        registered while the role changes may run and also see `is_owner` true: it must be safe to run twice."""
        self._after_takeover.append(callback)

    def _prepare(self) -> None:
        """Run `on_takeover` (opening the database), retrying while the old owner's DuckDB lock lingers."""
        if self._on_takeover is None:
            return
        deadline = time.monotonic() + TAKEOVER_OPEN_SECONDS
        while True:
            try:
                self._on_takeover()
                return
            except Exception as exc:
                if time.monotonic() >= deadline or self._role == "closed":
                    log.warning("after taking %s over: %s (tool calls will report it)", self.db, exc)
                    return
                time.sleep(0.1)

    # -- calls -----------------------------------------------------------------------------------------

    def call(
        self,
        method: str,
        params: dict[str, Any],
        *,
        repeatable: bool,
        exclusive: bool | None = None,
        progress: Progress | None = None,
        wait: float = OWNER_WAIT_SECONDS,
    ) -> Any:
        """Run `method` on the owner and return its result; raises `RunLocally` when this process owns the file.

        `repeatable`: the call may run twice without harm (a read), so it is sent again after the owner went
        away without answering; otherwise that is an `OwnerLostError`. `exclusive` (the default for calls that
        are not repeatable): the owner runs it after the other exclusive calls of its clients, and tells when
        it starts, so a call still waiting its turn when the owner dies is sent to the next owner, not failed.
        """
        exclusive = not repeatable if exclusive is None else exclusive
        deadline = time.monotonic() + wait
        delay = 0.01
        losses = 0
        while True:
            if self._role == "owner":
                raise RunLocally()
            if self._role == "closed":
                raise DuckgraphError("this duckgraph server is shutting down")
            conn = self._checkout()
            if conn is None:
                if time.monotonic() >= deadline:
                    raise self._no_answer(wait)
                with self._cond:
                    if self._role == "client":
                        self._cond.wait(delay)
                delay = min(delay * 2, 0.2)
                continue
            if conn.hello.get("instance") == self._token:  # we have just taken the file over ourselves
                conn.close()
                raise RunLocally()
            pid = conn.hello.get("pid")
            try:
                reply = conn.request(next(self._ids), method, params, progress, exclusive)
            except _Lost as lost:
                conn.close()
                if lost.sent and not repeatable:
                    raise OwnerLostError(
                        f"the duckgraph server that owned {self.db} (pid {pid}) stopped while it was running this "
                        "call, so it is unknown whether the change was stored. Check with a read (search, "
                        "get_entities, open_nodes) and repeat the call if it is missing: adding the same entities, "
                        "relations, observations or documents again merges into what is stored. The file passes "
                        "to another server (or this one), so the next call works."
                    ) from None
                losses += 1
                if losses > MAX_RESENDS:
                    raise OwnerLostError(f"the connection to the duckgraph server that owns {self.db} broke "
                                         f"{losses} times while it was running this call; giving up") from None
                log.info("the owner (pid %s) went away; sending %s again", pid, method)
                deadline = max(deadline, time.monotonic() + wait)
                continue
            error = reply.get("error")
            if isinstance(error, dict) and error.get("type") == "Closing":
                conn.close()  # the owner is stopping and did not run it: the next owner will
                continue
            self._checkin(conn)
            if error is not None:
                raise _remote_error(error if isinstance(error, dict) else {"message": str(error)})
            return reply.get("result")

    def _checkout(self) -> _Connection | None:
        with self._cond:
            while self._pool:
                conn = self._pool.pop()
                if conn.idle_and_open():
                    return conn
                conn.close()
        try:
            conn = _Connection(self.socket_path)
        except (OSError, ValueError):  # no socket yet, refused (owner starting or gone), or a garbled greeting
            return None
        with self._cond:
            if conn.hello.get("pid") != self._owner.get("pid"):
                self._owner = conn.hello
                log.info("connected to the duckgraph server that owns %s (pid %s)", self.db, conn.hello.get("pid"))
                theirs, ours = conn.hello.get("embedder"), self._info.get("embedder")
                if theirs and ours and theirs != ours:
                    log.warning("the owner of %s (pid %s) embeds with %s; this server is configured with %s, "
                                "which is not used while it is a client", self.db, conn.hello.get("pid"), theirs, ours)
        return conn

    def _checkin(self, conn: _Connection) -> None:
        with self._cond:
            if self._role == "client" and len(self._pool) < POOL_SIZE:
                self._pool.append(conn)
                return
        conn.close()

    def _no_answer(self, wait: float) -> NoOwnerError:
        info = holder(self.db) or self._owner
        who = f"duckgraph pid {info['pid']}" if info.get("pid") else "another duckgraph process"
        return NoOwnerError(
            f"{self.db} is held by {who}, which did not answer on {self.socket_path} within {wait:.0f} s. "
            "If that process is stuck, stop it: this server then takes the file over."
        )

    # -- state and shutdown ----------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """For health reports and `duckgraph doctor`: this process's role, and the owner's pid."""
        state: dict[str, Any] = {"role": self._role, "pid": os.getpid(), "lock": str(self.lock_path),
                                 "socket": str(self.socket_path)}
        if self._role == "owner":
            state.update(since=self._since, client_pids=self._endpoint.client_pids if self._endpoint else [])
        else:
            state["owner_pid"] = self.owner_pid
        return state

    def close(self, finalize: Callable[[], None] | None = None, drain_seconds: float = DRAIN_SECONDS) -> None:
        """Stop sharing. An owner stops taking requests, lets running ones finish, runs `finalize` (closing
        the database) and only then releases the lock, so the next owner opens a closed file."""
        with self._cond:
            role, self._role = self._role, "closed"
            endpoint, self._endpoint = self._endpoint, None
            lock, self._lock = self._lock, None
            pool, self._pool = self._pool, []
            self._cond.notify_all()
        for conn in pool:
            conn.close()
        try:
            if endpoint is not None:
                endpoint.close(drain_seconds)
            if finalize is not None:
                finalize()
        finally:
            if lock is not None:
                lock.release()
        if role == "owner":
            log.info("released %s", self.db)


def call_owner(db: str | Path, method: str, params: dict[str, Any] | None = None, *,
               wait: float = OWNER_WAIT_SECONDS) -> Any:
    """Ask the duckgraph server that holds `db` to run `method` (e.g. "health", "status", "backup") once.

    Raises NoOwnerError when no duckgraph server holds the file (or it does not answer within `wait`), and
    OwnerLostError when it stopped before answering.
    """
    if holder(db) is None:
        raise NoOwnerError(f"no duckgraph server holds {Path(db).expanduser()}")
    path = socket_path(db)
    deadline = time.monotonic() + wait
    while True:
        try:
            conn = _Connection(path)
            break
        except (OSError, ValueError):
            if time.monotonic() >= deadline or holder(db) is None:
                info = holder(db)
                raise NoOwnerError(
                    f"{Path(db).expanduser()} is held by "
                    f"{'duckgraph pid ' + str(info['pid']) if info and info.get('pid') else 'no duckgraph server'}"
                    f", which does not answer on {path}"
                ) from None
            time.sleep(0.05)
    try:
        reply = conn.request(1, method, params or {}, None)
    except _Lost:
        raise OwnerLostError(
            f"the duckgraph server that holds {Path(db).expanduser()} (pid {conn.hello.get('pid')}) stopped "
            f"before answering {method!r}; run the command again"
        ) from None
    finally:
        conn.close()
    if reply.get("error") is not None:
        raise _remote_error(reply["error"])
    return reply.get("result")
