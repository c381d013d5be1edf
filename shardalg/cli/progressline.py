"""The progress line on stderr: what :mod:`shardalg.progress` reports, drawn for a person at a terminal.

One line, redrawn in place (``building the notes [3/7] transposes  4.2 s``), refreshed a few times a second by
a daemon thread so a long step still shows its clock, and erased when the task ends. Nothing is drawn when
stderr is not a terminal, under ``--quiet``, or for a task that ends within ``delay`` seconds.

Imports: the standard library and :mod:`shardalg.progress`.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


class ProgressLine:
    """A :class:`shardalg.progress.Listener` that draws one line on a terminal."""

    def __init__(self, stream: TextIO, delay: float = 0.5, every: float = 0.25) -> None:
        self.stream, self.delay, self.every = stream, delay, every
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._label, self._done, self._total, self._detail = "", 0, None, ""
        self._start = 0.0
        self._drawn = False

    # -- the Listener protocol ---------------------------------------------------------------------------
    def started(self, label: str, total: int | None) -> None:
        with self._lock:
            self._label, self._done, self._total, self._detail = label, 0, total, ""
            self._start = time.monotonic()
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="shardalg-progress", daemon=True)
            self._thread.start()

    def advanced(self, done: int, total: int | None, detail: str) -> None:
        with self._lock:
            self._done, self._total, self._detail = done, total, detail

    def finished(self, label: str, done: int) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            if self._drawn:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
                self._drawn = False

    # -- drawing -----------------------------------------------------------------------------------------
    def line(self) -> str:
        """The text of the line now (no escape codes)."""
        count = (
            f" [{self._done}/{self._total}]" if self._total else (f" [{self._done}]" if self._done else "")
        )
        detail = f" {self._detail}" if self._detail else ""
        return f"{self._label}{count}{detail}  {time.monotonic() - self._start:.1f} s"

    def _run(self) -> None:
        if self._stop.wait(self.delay):
            return
        while True:
            with self._lock:
                self.stream.write("\r\x1b[K" + self.line()[:100])
                self.stream.flush()
                self._drawn = True
            if self._stop.wait(self.every):
                return


def for_stderr(quiet: bool) -> ProgressLine | None:
    """The listener for this run: a progress line when stderr is a terminal and --quiet was not given."""
    if quiet or not sys.stderr.isatty():
        return None
    return ProgressLine(sys.stderr)
