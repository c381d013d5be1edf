"""Integer axis sizes: the continuous optimum of a split (X_opt) next to the divisors of the mesh.

The map's optimum over a split ``X·Y = N`` is continuous (``X_opt = sqrt(B·M_X·N/(F·M_Y))``); a mesh takes
divisors of N, and a torus takes whole physical axes (which also sets the link counts M_X, M_Y). Given
numbers, :func:`axis_splits` prices every split with the cost expression and ranks them, and reports the
divisors that bracket the continuous optimum, so the two can be read side by side.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import sympy
from sympy import Expr

from shardalg.algebra.symbols import as_expr
from shardalg.costs.steps import numeric
from shardalg.errors import UsageError

from .minimize import Minimum

__all__ = ["Split", "AxisSplits", "divisors", "torus_splits", "axis_splits", "MAX_DEVICES"]

MAX_DEVICES = 10**12  # divisors by trial division up to sqrt(N): refused above this


def divisors(n: int) -> tuple[int, ...]:
    """The divisors of ``n``, ascending."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise UsageError(f"a device count is a positive integer, not {n!r}", rule="parameters")
    if n > MAX_DEVICES:
        raise UsageError(
            f"{n} devices: more than {MAX_DEVICES} is refused (divisors by trial division)",
            rule="search-limit",
        )
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return tuple(sorted(set(small + [n // d for d in small])))


def torus_splits(
    shape: Sequence[int], x: sympy.Symbol, y: sympy.Symbol, x_links: sympy.Symbol, y_links: sympy.Symbol
) -> tuple[dict[sympy.Symbol, int], ...]:
    """The splits of a torus into X and Y by whole physical axes: X the product of the axes it takes and
    ``M_X`` their count (the book's link multiplicity), Y the rest. Both sides get at least one axis (a side
    with none is a different strategy: pure FSDP or pure TP). Ordered by X, then M_X."""
    dims = tuple(shape)
    if len(dims) < 2 or any(isinstance(d, bool) or not isinstance(d, int) or d < 2 for d in dims):
        raise UsageError(f"a torus shape is two or more axis lengths >= 2, not {shape!r}", rule="parameters")
    seen: dict[tuple[int, int], dict[sympy.Symbol, int]] = {}
    for k in range(1, len(dims)):
        for chosen in combinations(range(len(dims)), k):
            xs = math.prod(dims[i] for i in chosen)
            key = (xs, k)
            seen.setdefault(key, {x: xs, y: math.prod(dims) // xs, x_links: k, y_links: len(dims) - k})
    return tuple(seen[k] for k in sorted(seen))


@dataclass(frozen=True)
class Split:
    """One integer split, its cost with the given numbers, and the tie-breaking value (``then``) if any."""

    values: tuple[tuple[sympy.Symbol, int], ...]
    cost: float
    then: float | None = None

    def text(self) -> str:
        return ", ".join(f"{s}={v}" for s, v in self.values)


@dataclass(frozen=True)
class AxisSplits:
    """The splits of ``x`` ranked by cost, with the continuous optimum and the divisors around it."""

    x: sympy.Symbol
    n: int
    optimum: Expr | None
    continuous: float | None
    below: int | None
    above: int | None
    ranked: tuple[Split, ...]

    @property
    def best(self) -> Split:
        return self.ranked[0]

    def __str__(self) -> str:
        lines = []
        if self.optimum is not None:
            lines.append(
                f"continuous optimum: {self.x}_opt = {sympy.sstr(self.optimum)} = {self.continuous:.6g}"
            )
            near = " and ".join(str(v) for v in (self.below, self.above) if v is not None)
            lines.append(f"divisors of {self.n} next to it: {near}")
        lines.append(f"splits by cost (best first, {len(self.ranked)}):")
        lines += [
            f"  {s.text():<32} {s.cost:.6g}" + (f"   then {s.then:.6g}" if s.then is not None else "")
            for s in self.ranked
        ]
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        return {
            "x": str(self.x),
            "n": self.n,
            "optimum": None if self.optimum is None else sympy.sstr(self.optimum),
            "continuous": self.continuous,
            "below": self.below,
            "above": self.above,
            "ranked": [
                {"values": {str(s): v for s, v in sp.values}, "cost": sp.cost, "then": sp.then}
                for sp in self.ranked
            ],
        }


def _number(expr: Expr, values: Mapping[sympy.Symbol, float], what: str) -> float:
    v = numeric(expr, values)
    if v is None:
        left = sorted(s.name for s in as_expr(expr).subs(values).free_symbols)
        raise UsageError(f"{what} needs values for {', '.join(left)}", rule="parameters")
    return v


def axis_splits(
    cost: Expr,
    x: sympy.Symbol,
    n: int,
    values: Mapping[sympy.Symbol, float],
    *,
    optimum: Minimum | Expr | None = None,
    splits: Sequence[Mapping[sympy.Symbol, int]] | None = None,
    then: Expr | None = None,
) -> AxisSplits:
    """Every split priced with ``cost`` (in ``x``, and in whatever ``splits`` set), ranked; next to the
    continuous ``optimum`` (a :class:`.Minimum` or its X_opt) evaluated with ``values``.

    ``splits`` default to ``{x: d}`` for each divisor d of ``n`` (``cost`` must then have Y eliminated);
    :func:`torus_splits` gives the splits of a torus, each with its link counts. Splits of equal cost (all
    compute-bound, say) rank by ``then`` when given (the communication time: the least exposed), then by the
    order of ``splits``, so the result is deterministic."""
    if splits is None:
        splits = [{x: d} for d in divisors(n)]
    if not splits:
        raise UsageError("no splits to rank", rule="parameters")
    vals = {k: as_expr(v) for k, v in values.items()}
    priced = []
    for sp in splits:
        point = dict(vals)
        point.update({k: as_expr(v) for k, v in sp.items()})
        items = tuple((k, int(v)) for k, v in sp.items())
        second = _number(then, point, f"the tie-break at {dict(sp)}") if then is not None else None
        priced.append(Split(items, _number(cost, point, f"the cost at {dict(sp)}"), second))
    # relative rounding must not split a tie: costs equal to 1e-12 rank as equal, then by ``then``
    ranked = tuple(sorted(priced, key=lambda s: (float(f"{s.cost:.12g}"), s.then or 0.0)))
    if isinstance(optimum, Minimum):  # no continuous optimum to bracket unless there is one stationary point
        star_expr = optimum.optimum if len(optimum.optima) == 1 else None
    else:
        star_expr = optimum
    star = _number(star_expr, vals, f"{x}_opt") if star_expr is not None else None
    ds = divisors(n)
    below = max((d for d in ds if star is not None and d <= star), default=None)
    above = min((d for d in ds if star is not None and d >= star), default=None)
    return AxisSplits(x, n, star_expr, star, below, above, ranked)
