"""The one cache layer: every cache of the package is made here, registered by kind, bounded by one size
setting and cleared by one call (sympy's ``cacheit`` and ``clear_cache`` are the model).

- ``@memoized(kind)`` memoizes a function by the values of its arguments (``functools.lru_cache`` underneath):
  the arguments are frozen, hashable values (tensors, meshes, sizes, limits), never ``id()`` of anything.
- ``memo(name, kind)`` is a registered :class:`Memo` (a dict whose ``keep`` starts it again at ``SIZE``
  entries), for the caches that must stay containers (filled by a method, or bounded in their own way);
  ``clear_caches`` clears it like the rest.
- ``clear_caches(kind=None)`` forgets every piece and answer (``shardalg.clear_caches()``: a fresh start),
  or only those of one kind (the bench clears answers before a warm run and keeps pieces).
- ``SIZE`` is the one size setting: the entries each cache keeps, ``SHARDALG_CACHE_SIZE`` in the environment
  when the package is imported (default 65536). Tables are not bounded.

A cache's kind says what it holds:

- ``Kind.PIECE``: a piece of a query (one resharding search, one layout space, one step's cost), shared by
  the queries that meet it;
- ``Kind.ANSWER``: a whole query's answer, or a part of it keyed by the whole query;
- ``Kind.TABLE``: made once for the process (the grammar, interned atoms, rules by node type, symbols):
  cleared by no call, since what it hands out is referred to by what was built from it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar, overload

from shardalg.errors import UsageError

__all__ = [
    "Kind",
    "Cache",
    "Memo",
    "SIZE",
    "memoized",
    "memo",
    "register",
    "registered",
    "clear_caches",
    "size_setting",
]

F = TypeVar("F", bound=Callable[..., Any])
M = TypeVar("M")


class Kind(Enum):
    """What a cache holds (see the module docstring)."""

    PIECE = "piece"
    ANSWER = "answer"
    TABLE = "table"


DEFAULT_SIZE = 1 << 16


def size_setting(text: str | None) -> int:
    """The entries each cache keeps, read from the text of ``SHARDALG_CACHE_SIZE`` (None: the default)."""
    if text is None or not text.strip():
        return DEFAULT_SIZE
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise UsageError(
            f"SHARDALG_CACHE_SIZE is the entries each cache keeps, a positive integer, not {text!r}",
            fix=f"unset it (default {DEFAULT_SIZE}) or set e.g. SHARDALG_CACHE_SIZE=4096",
        )
    return n


SIZE = size_setting(os.environ.get("SHARDALG_CACHE_SIZE"))


@dataclass(frozen=True)
class Cache:
    """One registered cache: its qualified name, its kind, how to clear it, how many entries it holds, and
    the object that holds them (the memoized function, or the container)."""

    name: str
    kind: Kind
    clear: Callable[[], None]
    size: Callable[[], int]
    holds: object = None


_REGISTRY: dict[str, Cache] = {}


def register(
    name: str, kind: Kind, clear: Callable[[], None], size: Callable[[], int], holds: object = None
) -> Cache:
    """Register a cache by its qualified name (``module.name``); a module imported again replaces its own."""
    if not isinstance(kind, Kind):
        raise UsageError(f"a cache's kind is a Kind (piece, answer or table), not {kind!r}")
    entry = _REGISTRY[name] = Cache(name, kind, clear, size, holds)
    return entry


def memoized(kind: Kind) -> Callable[[F], F]:
    """Memoize a function by its arguments' values, as a cache of ``kind``: ``SIZE`` entries, least recently
    used dropped first (tables unbounded). The function keeps ``cache_clear`` and ``cache_info``."""

    def wrap(fn: F) -> F:
        made = functools.lru_cache(maxsize=None if kind is Kind.TABLE else SIZE)(fn)
        name = f"{fn.__module__}.{fn.__qualname__}"
        register(name, kind, made.cache_clear, lambda: made.cache_info().currsize, made)
        return made  # type: ignore[return-value]

    return wrap


class Memo(dict[Any, Any]):
    """A cache kept in a dict: read it as a dict, fill it with :meth:`keep`, which starts it again once it
    holds ``SIZE`` entries (the setting as it is at the call)."""

    __slots__ = ()

    def keep(self, key: Any, value: M) -> M:
        if len(self) >= SIZE:
            self.clear()
        self[key] = value
        return value


@overload
def memo(name: str, kind: Kind, container: None = None, clear: Callable[[], None] | None = None) -> Memo: ...
@overload
def memo(name: str, kind: Kind, container: M, clear: Callable[[], None] | None = None) -> M: ...


def memo(name: str, kind: Kind, container: Any = None, clear: Callable[[], None] | None = None) -> Any:
    """A registered container (a new :class:`Memo` unless ``container`` is given) named ``name``
    (``module.NAME``), cleared by ``clear`` (its own ``clear`` unless given) when :func:`clear_caches` clears
    its kind."""
    got: Any = Memo() if container is None else container
    register(name, kind, clear or got.clear, got.__len__, got)
    return got


def registered(kind: Kind | None = None) -> Iterator[Cache]:
    """The registered caches (of ``kind``), by name."""
    for name in sorted(_REGISTRY):
        entry = _REGISTRY[name]
        if kind is None or entry.kind is kind:
            yield entry


def clear_caches(kind: Kind | None = None) -> None:
    """Forget every cached piece and answer (a fresh start), or only those of ``kind``. Tables are kept."""
    if kind is not None and not isinstance(kind, Kind):
        raise UsageError(f"clear_caches takes a Kind (Kind.PIECE or Kind.ANSWER) or nothing, not {kind!r}")
    if kind is Kind.TABLE:
        raise UsageError(
            "a table is made once for the process and is not cleared (what it handed out refers to it)"
        )
    for entry in list(_REGISTRY.values()):
        if entry.kind is not Kind.TABLE and (kind is None or entry.kind is kind):
            entry.clear()
