"""This server's part in sharing one database file: its owner, or a thin client of the process that owns it, which
takes the file over when that process goes away.

A server that finds the lock taken is a client: it waits for the lock in a background thread, and when the
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
- An owner that stops normally (its host closed stdin) refuses new requests, lets the ones it is running finish
  and answers them (within the `drain_seconds` its server gives: a call still running then fails as when an
  owner dies), closes the database and only then releases the lock.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from duckgraph.core import __version__
from duckgraph.core.sharing.lock import (
    LockFile,
    announced_socket,
    check_lock_file,
    holder,
    lock_path,
    memory_owner,
    socket_path,
)
from duckgraph.core.sharing.protocol import (
    DRAIN_SECONDS,
    PROTOCOL,
    SURFACE,
    CallCancel,
    Connection,
    ConnectionLost,
    Endpoint,
    Handler,
    OtherVersionError,
    Progress,
    RequestCancelled,
)
from duckgraph.ports import DuckgraphError, errors

log = logging.getLogger(__name__)

#: How long a call waits for an owner to answer (it may be starting, or taking over and opening the file).
OWNER_WAIT_SECONDS = 30.0
#: How long a process that has just taken the file over retries opening it (the old owner's DuckDB lock may
#: outlive its flock by a moment).
TAKEOVER_OPEN_SECONDS = 10.0
#: Idle connections a client keeps for later calls.
POOL_SIZE = 16
#: How often a call that may run twice is sent again after losing its connection (owners dying one after another).
MAX_RESENDS = 5
#: The duckgraph command this process runs ("serve", "ui"), named in the lock file so that another command refused
#: the file can say who holds it and what to do (see `set_command`).
_command: str | None = None


def set_command(name: str) -> None:
    """Name the command this process runs (the command line sets it) in the lock file of a file it comes to own."""
    global _command
    _command = name


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


def _remote_error(error: dict[str, Any]) -> DuckgraphError:
    """The owner's error as the same duckgraph error class (same message), or a RemoteError."""
    kind, message = str(error.get("type", "Error")), str(error.get("message", ""))
    cls = getattr(errors, kind, None)
    if isinstance(cls, type) and issubclass(cls, DuckgraphError):
        return cls(message)
    if kind in ("OwnerLostError", "NoOwnerError", "RequestCancelled"):
        return {"OwnerLostError": OwnerLostError, "NoOwnerError": NoOwnerError,
                "RequestCancelled": RequestCancelled}[kind](message)
    return RemoteError(message, kind)


class FileShare:
    """This server's part in sharing one database file: its owner, or a client of the process that owns it.

    `start()` settles the role without waiting. A client's calls go through `call()`, which raises `RunLocally`
    once this process owns the file. `on_takeover` runs when a client takes the file over, before it accepts
    connections (it opens the database); `info` goes into the greeting and the lock file, and its `SURFACE` fields
    (which tools this server serves) must be the owner's for a call to be sent there.
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
        self._surface = {key: self._info.get(key) for key in SURFACE}
        self._refusal = ""  # the last owner refused (OtherVersionError), logged once
        self._cond = threading.Condition()
        self._role = "new"
        self._lock: LockFile | None = None
        self._endpoint: Endpoint | None = None
        self._pool: list[Connection] = []
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
        lock = LockFile(self.lock_path)
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

    def _own(self, lock: LockFile) -> None:
        """Become the owner (with `_cond` held): describe ourselves in the lock file and open the socket."""
        self._since = datetime.now(timezone.utc).isoformat(timespec="seconds")
        hello = {**self._info, **({"command": _command} if _command else {}), "pid": os.getpid(),
                 "protocol": PROTOCOL, "version": __version__, "db": str(self.db), "since": self._since,
                 "instance": self._token}
        try:
            lock.describe({**hello, "socket": str(self.socket_path)})
            self._endpoint = Endpoint(self.socket_path, self._handler, hello, memory_owner(self.db))
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
        lock = LockFile(self.lock_path)
        try:
            lock.acquire(blocking=True)
        except (OSError, DuckgraphError) as exc:
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
        cancel: CallCancel | None = None,
    ) -> Any:
        """Run `method` on the owner and return its result; raises `RunLocally` when this process owns the file.

        `repeatable`: the call may run twice without harm (a read), so it is sent again after the owner went
        away without answering; otherwise that is an `OwnerLostError`. `exclusive` (the default for calls that
        are not repeatable): the owner runs it after the other exclusive calls of its clients, and tells when
        it starts, so a call still waiting its turn when the owner dies is sent to the next owner, not failed.
        `cancel`: once cancelled, the call is sent to no owner any more, and the owner running it is told to
        cancel it (`RequestCancelled`).
        """
        exclusive = not repeatable if exclusive is None else exclusive
        deadline = time.monotonic() + wait
        delay = 0.01
        losses = 0
        while True:
            if cancel is not None and cancel.cancelled:  # never sent again, to this owner or the next
                raise RequestCancelled("the call was cancelled before it was sent to the owner: it did not run")
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
                reply = conn.request(next(self._ids), method, params, progress, exclusive, cancel)
            except RequestCancelled:  # cancelled before it went out: the connection is as good as before
                self._checkin(conn)
                raise
            except ConnectionLost as lost:
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

    def _checkout(self) -> Connection | None:
        with self._cond:
            while self._pool:
                conn = self._pool.pop()
                if conn.idle_and_open():
                    return conn
                conn.close()
        try:
            conn = Connection(self._owner_socket(), owner=memory_owner(self.db), surface=self._surface)
        except (OSError, ValueError):  # no socket yet, refused (owner starting or gone), or a garbled greeting
            return None
        except OtherVersionError as exc:  # every call fails with it: said once in this server's log too
            with self._cond:
                said, self._refusal = self._refusal, str(exc)
            if said != str(exc):
                log.error("%s", exc)
            raise
        with self._cond:
            if conn.hello.get("pid") != self._owner.get("pid"):
                self._owner = conn.hello
                log.info("connected to the duckgraph server that owns %s (pid %s)", self.db, conn.hello.get("pid"))
                theirs, ours = conn.hello.get("embedder"), self._info.get("embedder")
                if theirs and ours and theirs != ours:
                    log.warning("the owner of %s (pid %s) embeds with %s; this server is configured with %s, "
                                "which is not used while it is a client", self.db, conn.hello.get("pid"), theirs, ours)
        return conn

    def _checkin(self, conn: Connection) -> None:
        with self._cond:
            if self._role == "client" and len(self._pool) < POOL_SIZE:
                self._pool.append(conn)
                return
        conn.close()

    def _owner_socket(self) -> Path:
        """Where the owner listens: the path it wrote into the lock file, read again for each new connection (the
        next owner may listen elsewhere), else, for an owner that wrote none, the path this process would use."""
        return announced_socket(self.db) or self.socket_path

    def _no_answer(self, wait: float) -> NoOwnerError:
        info = holder(self.db) or self._owner
        who = f"duckgraph pid {info['pid']}" if info.get("pid") else "another duckgraph process"
        return NoOwnerError(f"{self.db} is held by {who}, {_unanswered(self.db, self.socket_path, wait)}")

    # -- state and shutdown ----------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """For health reports and `duckgraph doctor`: this process's role, and the owner's pid."""
        mine = self._role in ("owner", "closed")
        try:
            where = self.socket_path if mine else self._owner_socket()
        except DuckgraphError:  # another user's lock file: the calls say so; the status names our own path
            where = self.socket_path
        state: dict[str, Any] = {"role": self._role, "pid": os.getpid(), "lock": str(self.lock_path),
                                 "socket": str(where)}
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


def _unanswered(db: str | Path, computed: Path, wait: float) -> str:
    """Why the owner did not answer, and what to do: said from the socket it announced in the lock file, since a
    socket this process cannot see is no sign of a stuck owner (stopping it would be the wrong advice)."""
    described = holder(db) or {}
    try:
        announced = announced_socket(db)
    except DuckgraphError:
        announced = None
    if announced is not None and not os.path.lexists(announced):
        return (f"which announced its socket at {announced}, but this process sees no such file: that process sees "
                "another /tmp or runtime folder (a sandbox, a container), or the socket was removed. Run every MCP "
                "host's duckgraph server on this file in the same environment, or restart that server (stop it: "
                "this server then takes the file over)")
    sock = announced or computed
    said = f"which did not answer on {sock} within {wait:.0f} s."
    if announced is None and described.get("pid") and "socket" not in described and not os.path.lexists(computed):
        # An older duckgraph writes no socket path: it may have chosen another runtime folder from its environment.
        return (f"{said} It is a duckgraph of another version (version {described.get('version', '?')}), which does "
                "not say where it listens, and may listen in another folder (its XDG_RUNTIME_DIR or TMPDIR): run the "
                "same duckgraph version in every MCP host's configuration, or restart that server")
    return f"{said} If that process is stuck, stop it: this server then takes the file over."


def call_owner(db: str | Path, method: str, params: dict[str, Any] | None = None, *,
               wait: float = OWNER_WAIT_SECONDS) -> Any:
    """Ask the duckgraph server that holds `db` to run `method` (e.g. "health", "status", "backup") once.

    Raises NoOwnerError when no duckgraph server holds the file (or it does not answer within `wait`), and
    OwnerLostError when it stopped before answering.
    """
    if holder(db) is None:
        raise NoOwnerError(f"no duckgraph server holds {Path(db).expanduser()}")
    check_lock_file(db)
    computed = socket_path(db)
    deadline = time.monotonic() + wait
    while True:
        try:
            # The socket read again each time: a new owner may listen elsewhere.
            conn = Connection(announced_socket(db) or computed, owner=memory_owner(db))
            break
        except (OSError, ValueError):
            if time.monotonic() >= deadline or holder(db) is None:
                info = holder(db)
                if info is None:
                    raise NoOwnerError(f"no duckgraph server holds {Path(db).expanduser()} any more") from None
                who = f"duckgraph pid {info['pid']}" if info.get("pid") else "another duckgraph process"
                raise NoOwnerError(f"{Path(db).expanduser()} is held by {who}, "
                                   f"{_unanswered(db, computed, wait)}") from None
            time.sleep(0.05)
    try:
        reply = conn.request(1, method, params or {}, None)
    except ConnectionLost:
        raise OwnerLostError(
            f"the duckgraph server that holds {Path(db).expanduser()} (pid {conn.hello.get('pid')}) stopped "
            f"before answering {method!r}; run the command again"
        ) from None
    finally:
        conn.close()
    if reply.get("error") is not None:
        raise _remote_error(reply["error"])
    return reply.get("result")
