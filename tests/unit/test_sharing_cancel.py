"""core/sharing/ on its own: a client cancels a request it forwarded (its MCP client cancelled the call). The owner
must learn it while the request runs (`current_cancel`), and a request not yet run or sent must never run.

Two FileShare objects in one process behave as two processes would (see tests/unit/test_sharing.py).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from duckgraph.core import sharing
from duckgraph.core.sharing import CallCancel, FileShare, RequestCancelled, current_cancel
from tests.unit.test_sharing import wait_for

pytestmark = pytest.mark.skipif(not sharing.supported(), reason="needs flock and Unix sockets")

WAIT = 10.0


class Owner:
    """A handler whose "hold" requests wait until the test releases them, and which records what it saw."""

    def __init__(self) -> None:
        self.running = threading.Event()
        self.release = threading.Event()
        self.cancelled_seen = threading.Event()
        self.ran: list[Any] = []

    def __call__(self, method: str, params: dict[str, Any], progress) -> Any:
        self.ran.append(params.get("n"))
        if method == "hold":
            signal = current_cancel()
            assert signal is not None, "a client's request runs with its cancel signal"
            signal.on_cancel(self.cancelled_seen.set)
            self.running.set()
            self.release.wait(WAIT)
            if signal.cancelled:
                raise RequestCancelled("stopped")
        return {"n": params.get("n")}


@pytest.fixture
def pair(tmp_path):
    made: list[FileShare] = []

    def make(handler) -> tuple[FileShare, FileShare]:
        owner = FileShare(tmp_path / "kb.duckdb", handler)
        owner.start()
        client = FileShare(tmp_path / "kb.duckdb", handler)
        client.start()
        made.extend([client, owner])
        assert owner.is_owner and client.role == "client"
        return owner, client

    yield make
    for share in made:
        share.close(drain_seconds=1)


def calling(client: FileShare, method: str, n: int, cancel: CallCancel | None, exclusive: bool = True
            ) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(client.call(method, {"n": n}, repeatable=False, exclusive=exclusive, cancel=cancel))
        except BaseException as exc:  # noqa: BLE001 (the test reads what it was)
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_the_owner_learns_that_a_running_request_was_cancelled(pair):
    handler = Owner()
    _owner, client = pair(handler)
    cancel = CallCancel()
    thread, outcome = calling(client, "hold", 1, cancel)
    assert handler.running.wait(WAIT)
    assert cancel.cancel() == "told"
    assert handler.cancelled_seen.wait(WAIT), "the owner never learnt of the cancellation"  # before: never
    handler.release.set()
    thread.join(WAIT)
    assert isinstance(outcome[0], RequestCancelled)
    # The connection goes on serving: the next call on it is answered, and not cancelled.
    handler.running.clear()
    handler.cancelled_seen.clear()
    assert client.call("echo", {"n": 2}, repeatable=True) == {"n": 2}
    assert not handler.cancelled_seen.is_set()


def test_a_request_cancelled_while_it_waits_for_its_turn_never_runs(pair, monkeypatch):
    handler = Owner()
    _owner, client = pair(handler)
    # "told" means the cancel line is on its way; the turn is released only once the owner has read it (released
    # before, the write may start first and then only its commits are refused: that race is the handler's to honour).
    owner_read_cancel = threading.Event()
    real_cancel = sharing.protocol.CancelSignal.cancel

    def cancel_read(self: Any) -> None:
        real_cancel(self)
        owner_read_cancel.set()

    monkeypatch.setattr(sharing.protocol.CancelSignal, "cancel", cancel_read)
    first, first_outcome = calling(client, "hold", 1, CallCancel())  # holds the owner's turn for writes
    assert handler.running.wait(WAIT)
    cancel = CallCancel()
    second, outcome = calling(client, "write", 2, cancel)
    # The second request is out (on a connection of its own) and waits for its turn on the owner.
    wait_for(lambda: cancel._sent is not None)
    assert cancel.cancel() == "told"
    assert owner_read_cancel.wait(WAIT), "the owner never read the cancel line"
    handler.release.set()
    first.join(WAIT)
    second.join(WAIT)
    assert first_outcome == [{"n": 1}]
    assert isinstance(outcome[0], RequestCancelled) and "did not run" in str(outcome[0])
    assert handler.ran == [1], "the cancelled write ran when its turn came"


def test_a_request_cancelled_before_it_is_sent_is_never_sent(pair):
    handler = Owner()
    _owner, client = pair(handler)
    cancel = CallCancel()
    assert cancel.cancel() == "unsent"
    with pytest.raises(RequestCancelled):
        client.call("write", {"n": 1}, repeatable=False, cancel=cancel)
    assert handler.ran == []
    assert cancel.cancel() == "again"


def test_an_owner_that_does_not_say_it_understands_cancel_lines_gets_none(pair, monkeypatch):
    """An older owner reads an unknown line as a bad request: it is never sent one."""
    handler = Owner()
    _owner, client = pair(handler)
    sent: list[int] = []
    monkeypatch.setattr(sharing.protocol.Connection, "send_cancel", lambda self, request_id: sent.append(request_id))
    real_init = sharing.protocol.Connection.__init__

    def older(self, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        self.hello.pop("cancel", None)

    monkeypatch.setattr(sharing.protocol.Connection, "__init__", older)
    cancel = CallCancel()
    thread, outcome = calling(client, "hold", 1, cancel)
    assert handler.running.wait(WAIT)
    assert cancel.cancel() == "unsupported"
    handler.release.set()
    thread.join(WAIT)
    assert sent == [] and not handler.cancelled_seen.is_set()
    assert outcome == [{"n": 1}]
