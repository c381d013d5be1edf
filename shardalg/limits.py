"""How much work shardalg takes on before it refuses: every limit, its value and why, as data.

    >>> require("axes", 8, "the mesh X=2, ... (8 axes)")
    Traceback (most recent call last):
    shardalg.errors.LimitExceeded: ...

Each limit is checked up front, before the work it bounds starts, and a refusal is a
:class:`~shardalg.errors.LimitExceeded` (a ``UsageError``, CLI exit 2) that names the limit, its value, what
grows with it, and how to lift it: ``--max-<name> N`` on the command line, or in Python::

    with shardalg.limits.lifted(axes=8, devices=1024):
        plans = shardalg.plans(expr, mesh)

Two limits cannot be lifted: ``depth`` (Python's own stack bounds the printers and the checks) and ``size``
(sizes are 64-bit integers in numpy and in generated code). The README's "Limits" section is this table.

Imports: shardalg.errors only (this module sits below the notation, so the parser can use it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from shardalg.errors import LimitExceeded, Span

__all__ = ["Limit", "LIMITS", "value", "require", "refuse", "lifted", "require_digits", "require_size"]


@dataclass(frozen=True)
class Limit:
    """One limit: its name (also ``--max-<name>`` and the keyword of :func:`lifted`), its value, the unit it
    counts, what it bounds, and what grows with it (the reason it exists)."""

    name: str
    value: int
    unit: str
    bounds: str
    why: str
    liftable: bool = True


LIMITS: dict[str, Limit] = {
    limit.name: limit
    for limit in (
        Limit(
            "text",
            50_000,
            "characters",
            "one input of notation",
            "parsing is linear but slow: measured 1.2 s for 38,000 characters of statements (2 busy cores)",
        ),
        Limit(
            "statements",
            1_000,
            "statements",
            "one program",
            "check, backward and export plan every statement",
        ),
        Limit(
            "depth",
            64,
            "levels",
            "products and collectives nested in one statement",
            "the printers and checks recurse once a level, on Python's stack",
            liftable=False,
        ),
        Limit(
            "dims",
            32,
            "dims",
            "one tensor",
            "einsum subscripts and the executor's buffers have one axis a dim",
        ),
        Limit(
            "axes",
            4,
            "axes",
            "a mesh that is checked or planned",
            "the planner's layout search grows about twenty-fold an axis: fuzzing found a statement that takes "
            "5 s to plan and 13 s to differentiate on 5 axes of size 2, 0.3 s and 0.9 s on 4",
        ),
        Limit(
            "devices",
            256,
            "devices",
            "the executor, show and export --check, which make each device",
            "a collective's data movement costs devices x group size block copies: 5 s at 1,024 devices",
        ),
        Limit(
            "elements",
            4_194_304,
            "elements",
            "one value on all devices of the executor",
            "the executor holds every value as real numpy buffers, 8 bytes an element",
        ),
        Limit(
            "size",
            2**63 - 1,
            "",
            "a mesh axis size or a dim size",
            "sizes are 64-bit integers in numpy and in generated code",
            liftable=False,
        ),
    )
}

_LIFTED: ContextVar[Mapping[str, int] | None] = ContextVar("shardalg_limits", default=None)


def value(name: str) -> int:
    """The limit in force: lifted by :func:`lifted`, else the default of :data:`LIMITS`."""
    return (_LIFTED.get() or {}).get(name, LIMITS[name].value)


@contextmanager
def lifted(**values: int) -> Iterator[None]:
    """Raise (or lower) limits inside a ``with`` block: ``with lifted(axes=8, devices=1024): ...``."""
    for name, v in values.items():
        limit = LIMITS.get(name)
        if limit is None:
            raise LimitExceeded(f"no limit is called {name!r}; the limits are {', '.join(LIMITS)}")
        if not limit.liftable:
            raise LimitExceeded(f"the {name} limit cannot be changed: {limit.why}")
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise LimitExceeded(f"a limit is a positive integer, not {name}={v!r}")
    token = _LIFTED.set({**(_LIFTED.get() or {}), **values})
    try:
        yield
    finally:
        _LIFTED.reset(token)


def _how(limit: Limit, wanted: int) -> str:
    if not limit.liftable:
        return f"keep it within {limit.value:,}"
    return f"lift it with --max-{limit.name} {wanted} (Python: with shardalg.limits.lifted({limit.name}={wanted}): ...)"


def require(name: str, n: int, what: str | Callable[[], str], *, span: Span | None = None) -> None:
    """Refuse (LimitExceeded) when ``n`` is over the limit ``name``; ``what`` says whose count it is (or makes
    the text, only when it is needed)."""
    limit = LIMITS[name]
    cap = value(name)
    if n <= cap:
        return
    what = what() if callable(what) else what
    raise LimitExceeded(
        f"{what} has {n:,} {limit.unit}, over the {name} limit of {cap:,} for {limit.bounds} ({limit.why})",
        span=span,
        fix=_how(limit, n),
        rule=f"limit-{name}",
    )


def refuse(name: str, what: str, *, span: Span | None = None) -> LimitExceeded:
    """The refusal of ``require`` for a count that is not known exactly (only that it is over the limit)."""
    limit = LIMITS[name]
    cap = value(name)
    return LimitExceeded(
        f"{what}, over the {name} limit of {cap:,} {limit.unit} for {limit.bounds} ({limit.why})",
        span=span,
        fix=_how(limit, cap * 2),
        rule=f"limit-{name}",
    )


def _too_big(digits: int, what: str, span: Span | None) -> LimitExceeded:
    size = LIMITS["size"]
    return LimitExceeded(
        f"{what} is a number of {digits:,} digits, over the size limit of {size.value:,} for {size.bounds} "
        f"({size.why})",
        span=span,
        fix=_how(size, size.value),
        rule="limit-size",
    )


def require_size(n: int, what: str, *, span: Span | None = None) -> int:
    """``n`` itself, refused when it is over the size limit (its digits counted without printing it)."""
    if n > LIMITS["size"].value:
        raise _too_big(int(n.bit_length() * 0.30103) + 1, what, span)
    return n


def require_digits(digits: str, what: str, *, span: Span | None = None) -> int:
    """A size written as decimal digits, as an int; refused (without converting) when it is over ``size``."""
    stripped = digits.lstrip("0") or "0"
    cap = LIMITS["size"].value
    if len(stripped) > len(str(cap)) or int(stripped) > cap:
        raise _too_big(len(stripped), what, span)
    return int(stripped)
