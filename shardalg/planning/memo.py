"""Memos keyed by an object's identity, for the planner's per-call helpers whose inputs share objects (the
plans of one einsum share their steps and tensors): hashing a frozen node costs about what the answer does.

An id can be reused once its object is gone, so the memo keeps the object beside its answer: ``per_object``
checks it, and ``kept`` (a module-level memo of pieces whose keys hold ids) relies on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
Memo = dict[int, tuple[Any, Any]]

__all__ = ["Memo", "kept", "per_object", "KEEP"]

KEEP = 1 << 14  # answers a module-level memo keeps before it starts again


def per_object(memo: Memo, obj: Any, make: Callable[[Any], T]) -> T:
    """``make(obj)``, made once per object while ``memo`` lives."""
    got = memo.get(id(obj))
    if got is None or got[0] is not obj:
        got = memo[id(obj)] = (obj, make(obj))
    return got[1]


def kept(memo: dict[Any, tuple[tuple[object, ...], Any]], key: Any, objects: tuple[object, ...],
         make: Callable[[], T]) -> T:  # fmt: skip
    """``make()``, kept in ``memo`` under ``key`` (which holds the ids of ``objects``) with the objects
    themselves: while they are kept no other object can have their ids, so a key found is a key of these very
    objects. Past :data:`KEEP` answers the memo starts again."""
    got = memo.get(key)
    if got is None:
        if len(memo) >= KEEP:
            memo.clear()
        got = memo[key] = (objects, make())
    return got[1]  # type: ignore[no-any-return]
