"""Progress of long work, reported without knowing who listens.

Engine code that may take more than a second (the notes, a check that runs generated code, a search over
strategies) opens a task and ticks it; whoever called it decides what, if anything, is shown::

    from shardalg.progress import task

    with task("building the notes", total=len(sections)) as tick:
        for section in sections:
            tick(section.name)  # one more done; the label says what comes next

Nothing is shown by default. The command line installs a :class:`Listener` (``shardalg.cli`` draws a line on
stderr when stderr is a terminal and ``--quiet`` is not given) with :func:`listening`; tests and notebooks may
install their own. The listener lives in a context variable, so threads and nested tasks do not mix.

Imports: the standard library only; anything may import it.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

__all__ = ["Listener", "task", "listening"]


class Listener(Protocol):
    """What a listener hears: a task starts, advances, ends. ``total`` is None when the length is unknown."""

    def started(self, label: str, total: int | None) -> None: ...

    def advanced(self, done: int, total: int | None, detail: str) -> None: ...

    def finished(self, label: str, done: int) -> None: ...


_LISTENER: contextvars.ContextVar[Listener | None] = contextvars.ContextVar("shardalg_progress", default=None)


@contextmanager
def listening(listener: Listener | None) -> Iterator[None]:
    """Send the progress of the tasks opened inside the block to ``listener`` (None: to nobody)."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)


@contextmanager
def task(label: str, total: int | None = None) -> Iterator[Callable[[str], None]]:
    """Open a task; the block gets ``tick(detail="")``, to call once per unit done."""
    listener = _LISTENER.get()
    done = 0

    def tick(detail: str = "") -> None:
        nonlocal done
        done += 1
        if listener is not None:
            listener.advanced(done, total, detail)

    if listener is not None:
        listener.started(label, total)
    try:
        yield tick
    finally:
        if listener is not None:
            listener.finished(label, done)
