"""``cached``: a property computed on first use and kept in the instance, without a lock.

``functools.cached_property`` takes a lock on every first use in Python 3.11 (removed in 3.12); the
planner and the costs make many short-lived objects whose lazy attributes are each asked for once or
twice, so the lock costs more than the value. Two threads asking at once may both compute it; the values
here are pure, so either one is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")

__all__ = ["cached"]


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
