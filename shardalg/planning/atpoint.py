"""Plan choices decided at a point of one size: the numeric way to a formula per interval of that size.

A question solved for one size (``fit --solve-for B``: every other size bound) needs the memory as a formula
in that size, one per interval where the plans stay the same. Planning with the size a symbol and splitting
at every choice it decides (:func:`.symbolic.piecewise`) plans the whole program once per interval and
compares polynomials at each choice of each run. Here the size stays a symbol in the formulas, but each
choice is decided at a number (:func:`deciding_at`): the contenders' bytes (polynomials in that one size)
are compared at the point, exactly (Fractions), the cheapest leads, and the choice is recorded
(:class:`Crossing`). One run gives the formula of the interval holding the point, and the recorded choices
give that interval exactly (:func:`around`): the open interval around the point in which no recorded
choice's cheapest plan changes (its bounds are the roots of the cheapest's bytes minus another's where the
sign changes). Inside it every choice of the run is made the same way, so every run at a point of it gives
the same formulas: the intervals tile the size's range, and :func:`after` names a point past the next
crossing to try.

A choice whose contenders' bytes depend on any other unknown size is not decided here (its caller's rule
applies: under :func:`.symbolic.strict`, :class:`~.symbolic.NeedsSizes`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from shardalg.algebra.traffic import Bytes, Factor

__all__ = ["Crossing", "deciding_at", "decide", "around", "after"]

Poly = tuple[tuple[int, Fraction], ...]  # (power, coefficient) pairs of a polynomial in one size


@dataclass(frozen=True)
class Crossing:
    """One choice decided at a point: each contender's bytes as a polynomial in the size, and which was the
    cheapest there (the first of equal ones)."""

    costs: tuple[Poly, ...]
    winner: int


# The size choices are decided at, its value, and the choices recorded so far (None: decide nothing).
_AT: ContextVar[tuple[Factor, Fraction, list[Crossing]] | None] = ContextVar("shardalg_at", default=None)


@contextmanager
def deciding_at(factor: Factor, value: Fraction | int) -> Iterator[list[Crossing]]:
    """Within the block, a choice between plans whose bytes depend on ``factor`` (``("dim", "B")``) alone is
    decided at ``factor = value``; the list yielded collects each such choice, in the order they are made."""
    made: list[Crossing] = []
    token = _AT.set((factor, Fraction(value), made))
    try:
        yield made
    finally:
        _AT.reset(token)


def _poly(b: Bytes, factor: Factor) -> Poly | None:
    """``b`` as (power, coefficient) pairs of ``factor``, or None when it depends on another size."""
    acc: dict[int, Fraction] = {}
    for mono, c in b.terms:
        if any(f != factor for f, _e in mono):
            return None
        power = sum(e for _f, e in mono)
        acc[power] = acc.get(power, Fraction(0)) + c
    return tuple(sorted((p, c) for p, c in acc.items() if c))


def _at(p: Poly, x: Fraction) -> Fraction:
    return sum((c * x**e for e, c in p), Fraction(0))


def decide(costs: Sequence[Bytes]) -> int | None:
    """The index of the cheapest of ``costs`` at the point of :func:`deciding_at` (the first of equal ones),
    the choice recorded; None outside it, or when a cost depends on a size other than the point's."""
    at = _AT.get()
    if at is None:
        return None
    factor, x, made = at
    polys = [_poly(c, factor) for c in costs]
    if any(p is None for p in polys):
        return None
    values = [_at(p, x) for p in polys]  # type: ignore[arg-type]
    winner = min(range(len(values)), key=lambda k: (values[k], k))
    made.append(Crossing(tuple(polys), winner))  # type: ignore[arg-type]
    return winner


def _minus(a: Poly, b: Poly) -> Poly:
    acc = dict(a)
    for e, c in b:
        acc[e] = acc.get(e, Fraction(0)) - c
    return tuple(sorted((e, c) for e, c in acc.items() if c))


def _roots(p: Poly) -> list[tuple[Any, bool]]:
    """The positive real roots of ``p``, each once, with whether ``p`` changes sign there (an odd
    multiplicity); exact: a Fraction for a linear one, sympy's exact roots otherwise."""
    top = max((e for e, _ in p), default=0)
    low = min((e for e, _ in p), default=0)
    if top - low == 0:  # c * x**e: no positive root
        return []
    if top - low == 1:  # x**low * (a*x + b)
        coeffs = dict(p)
        r = -coeffs.get(low, Fraction(0)) / coeffs[top]
        return [(r, True)] if r > 0 else []
    import sympy

    x = sympy.Symbol("x", positive=True)
    poly = sympy.Poly(sum(sympy.Rational(c.numerator, c.denominator) * x ** (e - low) for e, c in p), x)
    found: dict[Any, int] = {}
    for r in poly.real_roots():
        if r.is_positive:
            found[r] = found.get(r, 0) + 1
    return [(r, n % 2 == 1) for r, n in found.items()]


def _bigger(a: Any, b: Any) -> bool:
    return bool(a > b)


def around(made: Sequence[Crossing], value: Fraction | int) -> tuple[Any, Any] | None:
    """The open interval around ``value`` in which each of ``made``'s choices keeps its cheapest plan (either
    bound None: 0, or no bound), or None when ``value`` is itself a crossing (two contenders tie there)."""
    x = Fraction(value)
    lo: Any = None
    hi: Any = None
    for c in made:
        best = c.costs[c.winner]
        for k, other in enumerate(c.costs):
            if k == c.winner:
                continue
            diff = _minus(other, best)  # > 0 at x: other costs more there
            if _at(diff, x) <= 0:
                return None
            for r, turns in _roots(diff):
                if not turns:
                    continue
                if _bigger(r, x) and (hi is None or _bigger(hi, r)):
                    hi = r
                elif _bigger(x, r) and (lo is None or _bigger(r, lo)):
                    lo = r
    return lo, hi


def after(made: Sequence[Crossing], bound: Any) -> Any:
    """The first root past ``bound`` of any two contenders' difference in ``made`` (None when there is
    none): between ``bound`` and it none of these choices changes."""
    first: Any = None
    for c in made:
        for i, a in enumerate(c.costs):
            for b in c.costs[i + 1 :]:
                for r, _turns in _roots(_minus(a, b)):
                    if _bigger(r, bound) and (first is None or _bigger(first, r)):
                        first = r
    return first
