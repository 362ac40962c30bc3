"""Ctrl-C (SIGINT) and SIGTERM in the command line: every command but serve and ui stops the same way, cleans up,
says in one line what the interruption leaves, and exits 128 + the signal (core/cli.py's main)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from duckgraph.core.terminal import ProgressBar
from duckgraph.ports import interruption


class Terminated(KeyboardInterrupt):
    """SIGTERM (timeout(1), systemd, kill), raised where Ctrl-C raises KeyboardInterrupt, so that the same clean-up
    runs (a partial export removed, the demo's temporary folder deleted, DuckDB's query stopped) and the command
    says what it did and did not do."""

    def __init__(self, on_answer: Callable[[], None] | None = None) -> None:
        super().__init__()
        self._on_answer = on_answer

    def answer(self) -> None:
        """The command answers it (says so and exits): see `_SigtermHandler`."""
        if self._on_answer is not None:
            self._on_answer()


def sigterm_as_interrupt(command: str) -> Callable[[], None]:
    """Have SIGTERM stop this command as Ctrl-C does (see `Terminated`); returns what puts the previous handler
    back. serve and ui stop gracefully on SIGTERM themselves (core/mcp, core/ui)."""
    global _handler
    if command in _SERVERS or threading.current_thread() is not threading.main_thread():
        return lambda: None  # a handler can be set from the main thread only (main() called from a thread)
    _handler = _SigtermHandler()
    return _handler.put_back


def stopped_by(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM that `exc` stops the command for: its cause (`interruption`), or a SIGTERM that came
    before it and that it hides (DuckDB turns an exception raised in Python code it called into an error of its
    own: "Terminated: <EMPTY MESSAGE>")."""
    stop = interruption(exc)
    if stop is None and _handler is not None and _handler.received and not _handler.answered:
        stop = Terminated(_handler.answer)
    return stop


class _SigtermHandler:
    """Raises `Terminated`, and again should that one be lost on its way to the command.

    DuckDB runs the handler when it checks for signals during a query and drops its exception when the query ends
    anyway, and one raised in a finalizer or a weakref callback is only printed: the command would go on with
    SIGTERM unanswered (a systemd stop would end in SIGKILL, without the clean-up). So the signal is delivered again
    when its `Terminated` is freed before the command answered it (`exit_status`)."""

    #: Seconds after the loss: from another thread, so that the handler does not run where it was lost.
    again_after = 0.05

    def __init__(self) -> None:
        self.answered = False
        self._raised: Any = None  # a weak reference to the Terminated raised (None: no SIGTERM yet)
        self._previous = signal.signal(signal.SIGTERM, self)
        self._hook, sys.unraisablehook = sys.unraisablehook, self.unraisable

    def put_back(self) -> None:
        """The handler and the unraisable hook as they were before (the command is over)."""
        global _handler
        self.answered = True
        if _handler is self:
            _handler = None
        signal.signal(signal.SIGTERM, self._previous if self._previous is not None else signal.SIG_DFL)
        sys.unraisablehook = self._hook

    def __call__(self, _signal: int, _frame: Any) -> None:
        if self.answered or (self._raised is not None and self._raised() is not None):
            return  # the first one is stopping the command: a second must not cut its clean-up short
        raise self._terminated()  # not held by this frame, which its traceback holds: freed once dropped

    def _terminated(self) -> Terminated:
        stop = Terminated(self.answer)
        self._raised = weakref.ref(stop, self._lost)
        return stop

    @property
    def received(self) -> bool:
        return self._raised is not None

    def answer(self) -> None:
        self.answered = True

    def unraisable(self, unraisable: Any) -> None:
        """No traceback for a Terminated lost in a finalizer or a callback: it is delivered again."""
        if not isinstance(unraisable.exc_value, Terminated):
            self._hook(unraisable)

    def _lost(self, _ref: Any) -> None:
        if not self.answered:
            timer = threading.Timer(self.again_after, self._deliver_again, (threading.main_thread().ident,))
            timer.daemon = True
            timer.start()

    def _deliver_again(self, main_thread: int) -> None:
        if not self.answered:
            signal.pthread_kill(main_thread, signal.SIGTERM)  # ends a wait in the main thread, as the first did


#: The handler of the command running in this process (`sigterm_as_interrupt`), for `stopped_by`.
_handler: _SigtermHandler | None = None

_SERVERS = ("serve", "ui")


def say_interrupted(args: argparse.Namespace, stop: KeyboardInterrupt) -> int:
    """Say in one line that the command was interrupted and what that leaves; the exit status is 128 + the signal,
    as a shell gives for a command the signal ended: 130 after Ctrl-C (SIGINT), 143 after SIGTERM."""
    if args.command not in _SERVERS:  # they say themselves that they stop
        ProgressBar.end_line()
        try:
            print(f"duckgraph: {_command_name(args)} {how(stop)}: {_left_by_interruption(args)}", file=sys.stderr,
                  flush=True)
        except (OSError, ValueError):  # stderr gone too: the status says it
            pass
    return exit_status(stop)


def exit_status(stop: KeyboardInterrupt) -> int:
    """The exit status for an interruption the command answers (and so not to deliver again: `_SigtermHandler`)."""
    if isinstance(stop, Terminated):
        stop.answer()
    return 143 if isinstance(stop, Terminated) else 130


def how(stop: KeyboardInterrupt) -> str:
    return "stopped by SIGTERM" if isinstance(stop, Terminated) else "interrupted"


def _command_name(args: argparse.Namespace) -> str:
    action = getattr(args, "action", None)
    named = args.command in ("communities", "documents", "namespaces")  # the action says what was interrupted
    return f"{args.command} {action}" if named and action else args.command


def _left_by_interruption(args: argparse.Namespace) -> str:
    """What an interrupted command leaves, in words. Each writes in one transaction, or beside its target renamed
    into place at the end, so that does not depend on where it stopped; communities write keeps each report it
    wrote, and ingest says its own (core/commands/ingest.py)."""
    command, action = args.command, getattr(args, "action", None)
    if command == "import":
        removed = getattr(args, "new_file_said", None)  # a new file removed: `import_command`
        also = f" and {removed}" if removed else ""
        return f"nothing was imported (an import is one transaction){also}: run it again"
    if command == "export":
        from duckgraph.ports.store import special_file

        output = args.output
        if not output or output == "-":
            return "what it wrote to standard output is incomplete"
        try:  # a device or a pipe is written as it is, not beside it and renamed (files/export.py)
            special = special_file(Path(output).expanduser().stat().st_mode) is not None
        except OSError:
            special = False
        return (f"what it wrote to {output} is incomplete" if special
                else f"{output} was not written (a file there before is left as it was)")
    if command == "backup":
        return (f"no copy was made at {args.path} (a file there before is left as it was); the memory's file is "
                "unchanged")
    if command == "restore":
        return "the memory's file is unchanged: the backup was not put in its place"
    if command == "compact":
        return "the memory's file is unchanged (not compacted), and no temporary copy is left"
    if command == "ingest":  # before a file was stored (fetching pages)
        return "nothing was stored"
    if command == "demo":
        if not args.db:
            return "its temporary file was removed"
        kept = Path(args.db).expanduser()
        return (f"{kept} holds what was loaded until then: delete it to run the demo into it again" if kept.exists()
                else "nothing was kept")
    if command == "documents":
        return "nothing was deleted (the documents are deleted in one transaction)"
    if command == "namespaces" and action == "delete":
        return "nothing was deleted (a namespace is deleted in one transaction)"
    if command == "communities" and action == "build":
        return "nothing was stored: the communities of the last build stay"
    if command == "communities" and action == "write":
        return "the reports written before it are stored: run it again to write the rest"
    return "it only reads: nothing was changed"
