"""Memos keyed by an object's identity, for per-call helpers whose inputs share objects (the plans of one
einsum share their steps and tensors): hashing a frozen node costs about what the answer does.

Such a memo lives as long as the call (or the ranking) that made it, never at module level: module-level
caches go through the cache layer (:mod:`shardalg.cache`), keyed by values. An id can be reused once its
object is gone, so the memo keeps the object beside its answer and ``per_object`` checks it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
Memo = dict[int, tuple[Any, Any]]

__all__ = ["Memo", "per_object"]


def per_object(memo: Memo, obj: Any, make: Callable[[Any], T]) -> T:
    """``make(obj)``, made once per object while ``memo`` lives."""
    got = memo.get(id(obj))
    if got is None or got[0] is not obj:
        got = memo[id(obj)] = (obj, make(obj))
    return got[1]
