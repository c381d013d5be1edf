"""``cached``: a property computed on first use and kept in the instance, without a lock.

``functools.cached_property`` takes a lock on every first use in Python 3.11 (removed in 3.12); the
planner and the costs make many short-lived objects whose lazy attributes are each asked for once or
twice, so the lock costs more than the value. Two threads asking at once may both compute it; the values
here are pure, so either one is kept.

``hashed_once``: a frozen dataclass's hash made on first use and kept in the instance (a value that keys memos
again and again, such as a chip or a cost model, is hashed once, not field by field at every lookup).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")

__all__ = ["cached", "hashed_once"]


class cached(Generic[T]):  # noqa: N801 -- used as a decorator, like property
    """A non-data descriptor: the first ``obj.name`` calls the function and stores its value in
    ``obj.__dict__``, which later lookups find first. Works on frozen dataclasses (it writes the dict)."""

    def __init__(self, fn: Callable[[Any], T]):
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> cached[T]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...

    def __get__(self, obj: object, owner: type | None = None) -> T | cached[T]:
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.fn(obj)
        return value


def hashed_once(cls: type[T]) -> type[T]:
    """A frozen dataclass whose hash (the one ``dataclass`` made: its fields') is worked out on first use and
    kept in the instance, as a ``str`` keeps its own. For values that key memos again and again (a chip, a cost
    model), whose fields hash slowly (fractions, nested dataclasses). Pickled without it: string hashes differ
    per process. Put it above ``@dataclass(frozen=True)``."""
    made = cls.__hash__
    if made is None:
        raise TypeError(f"{cls.__name__} is not hashable: hashed_once takes a frozen dataclass")

    def __hash__(self: Any) -> int:  # noqa: N807 -- the method it replaces
        d = self.__dict__
        got = d.get("_hash")
        if got is None:
            got = d["_hash"] = made(self)
        return got

    def __getstate__(self: Any) -> dict[str, Any]:  # noqa: N807
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state

    cls.__hash__ = __hash__  # type: ignore[method-assign,assignment]
    cls.__getstate__ = __getstate__  # type: ignore[attr-defined]
    return cls
