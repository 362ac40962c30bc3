"""SIGTERM in the command line (core/interrupts.py) when its exception does not reach the command as it is:
DuckDB turns one raised in Python code it called (a UDF, an object it reads) into an error of its own, or drops it
when it was raised while DuckDB checked for signals during a query that then ended. The command must still stop,
say it was stopped by SIGTERM, and exit 143. Real signals to this process, on a real DuckDB connection."""

from __future__ import annotations

import signal
import threading
import time

import duckdb
import pytest

from duckgraph.core import interrupts
from duckgraph.core.interrupts import Terminated, exit_status, sigterm_as_interrupt, stopped_by
from duckgraph.ports import interruption


@pytest.fixture
def sigterm():
    put_back = sigterm_as_interrupt("stats")
    yield
    put_back()


def sigterm_to_this_thread() -> None:
    """SIGTERM to the main thread (where its handler runs), which this is: its wait ends at once."""
    signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)


def query_that_gets_sigterm() -> Exception:
    """The error of a query whose Python function (run in this thread: one DuckDB thread) gets SIGTERM."""
    con = duckdb.connect()
    con.execute("SET threads = 1")

    def terminated_inside(x: int) -> int:
        sigterm_to_this_thread()
        time.sleep(30)  # the handler raises here
        return x

    con.create_function("terminated_inside", terminated_inside, ["BIGINT"], "BIGINT")
    with pytest.raises(duckdb.Error) as caught:
        con.execute("SELECT terminated_inside(1)").fetchall()
    return caught.value


def test_a_sigterm_that_duckdb_turned_into_its_own_error_stops_the_command(sigterm, monkeypatch):
    monkeypatch.setattr(interrupts._SigtermHandler, "again_after", 60)  # not delivered again during the test
    error = query_that_gets_sigterm()
    assert "Terminated" in str(error) and interruption(error) is None  # no KeyboardInterrupt in its causes

    stop = stopped_by(error)
    assert isinstance(stop, Terminated)
    assert exit_status(stop) == 143


def test_a_sigterm_lost_on_its_way_is_delivered_again(sigterm):
    """Its Terminated freed before the command answered it, the signal comes again (a moment later): the command
    would otherwise go on, with SIGTERM ignored."""
    started = time.monotonic()
    with pytest.raises(Terminated) as again:  # not the first: DuckDB turned that one into its error
        query_that_gets_sigterm()  # its error not looked at: as where DuckDB drops it
        time.sleep(30)
    assert time.monotonic() - started < 25
    exit_status(again.value)  # answered, as the command does: not delivered once more into the next test


def test_a_second_sigterm_does_not_cut_the_clean_up_short(sigterm):
    with pytest.raises(Terminated) as first:  # held, as while it goes up through the clean-up
        sigterm_to_this_thread()
        time.sleep(30)
    try:
        sigterm_to_this_thread()
        time.sleep(0.5)
    except Terminated:
        pytest.fail("a second SIGTERM interrupted the clean-up of the first")
    assert exit_status(first.value) == 143
    del first
    time.sleep(0.5)  # answered, then freed: not delivered again
