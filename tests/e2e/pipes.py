"""Reading a child process's stdout line by line with a timeout (a reader thread feeding a queue)."""

from __future__ import annotations

import queue
import threading
from typing import IO, AnyStr, Generic


class StdoutLines(Generic[AnyStr]):
    """Every line of `stream`, in order; `get` waits for the next one (None once the stream is closed) and raises
    queue.Empty after `timeout` seconds."""

    def __init__(self, stream: IO[AnyStr]) -> None:
        self._queue: queue.Queue[AnyStr | None] = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[AnyStr]) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def get(self, timeout: float) -> AnyStr | None:
        return self._queue.get(timeout=timeout)
