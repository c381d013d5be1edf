"""A collective's time as parts (latency, bandwidth), and the alpha-beta model of a GPU switch (seed 003).

The ici torus formulas live in :mod:`shardalg.costs.stepcost` with the mesh axes they read; the alpha-beta
ones only need the group's size, so they live here, below it:

- ring AllGather / ReduceScatter ``(n−1)·α + (n−1)/n·V/β``; AllToAll (pairwise exchange)
  ``(n−1)·α + (n−1)/n²·V/β``; Permute ``α + S/β``; AllReduce by recursive doubling ``log2(n)·(α + V/β)``.

Over DCN axes β is ``W_dcn``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import sympy
from sympy import Expr

from shardalg.algebra.symbols import axis_size, quantity
from shardalg.lazy import cached

from . import terms as tm
from .terms import ZERO, Term, add, const, maximum

__all__ = [
    "AxisLink",
    "CommCost",
    "NOTHING",
    "Formula",
    "group_size",
    "less_one",
    "ab_ring",
    "ab_recursive_doubling",
    "ab_all_to_all",
    "ab_permute",
]

W_DCN, ALPHA, BETA = quantity("W_dcn"), quantity("alpha"), quantity("beta")


class AxisLink(Protocol):
    """What a formula reads of one mesh axis of a collective's group (:class:`shardalg.costs.stepcost.Link`
    is one): its name, size (and the number when it is one), whether it wraps, runs over DCN, and its rate."""

    @property
    def name(self) -> str: ...
    @property
    def size(self) -> Term: ...
    @property
    def number(self) -> int | None: ...
    @property
    def wraps(self) -> bool: ...
    @property
    def dcn(self) -> bool: ...
    @property
    def rate(self) -> Term: ...


@dataclass(frozen=True)
class CommCost:
    """A collective's time as parts (latency, bandwidth); ``overlapped`` parts cost max(l, b), else l + b.
    A composed collective (AllReduce = ReduceScatter + AllGather) has one part per phase. ``per_axis``: the
    bytes each device moves over each axis's links in the bandwidth term, per byte of V (the per-axis split
    that ``jax.experimental.roofline`` reports), where the model knows it; ``scale`` is V."""

    parts: tuple[tuple[Term, Term], ...]
    overlapped: bool
    per_axis: tuple[tuple[str, Term], ...] = ()
    scale: Term = tm.ONE

    @cached
    def light_parts(self) -> bool:
        """Whether every part is a light term and every bandwidth a monomial (a step scales it by V
        without building its own CommCost)."""
        return all(isinstance(lat, Term) and type(b) is tm.Mono for lat, b in self.parts)

    @property
    def axis_bytes(self) -> tuple[tuple[str, Term], ...]:
        return tuple((a, b * self.scale) for a, b in self.per_axis)

    def term(self, latency: bool = True) -> Term:
        """The time as a light term."""
        parts = self.parts
        if not all(type(lat) is tm.Mono and type(b) is tm.Mono for lat, b in parts):
            parts = tuple((tm._coerce(lat), tm._coerce(b)) for lat, b in parts)
        if not latency:
            return add(*(b for _, b in parts))
        if self.overlapped:
            return add(*(maximum(lat, b) for lat, b in parts))
        return add(*(x for part in parts for x in part))

    def total(self, latency: bool = True) -> Expr:
        """The time as a sympy expression."""
        return self.term(latency).sympy()

    @property
    def latency(self) -> Expr:
        return add(*(tm._coerce(lat) for lat, _ in self.parts)).sympy()

    @property
    def bandwidth(self) -> Expr:
        return add(*(tm._coerce(b) for _, b in self.parts)).sympy()

    def scaled(self, v: Term) -> CommCost:
        """The cost with every bandwidth term times ``v``: a formula worked out for V = 1 applied to V bytes
        (every formula is linear in V)."""
        return CommCost(
            tuple((lat, b * v) for lat, b in self.parts), self.overlapped, self.per_axis, self.scale * v
        )

    def __add__(self, other: CommCost) -> CommCost:
        moved = dict(self.axis_bytes)
        for a, b in other.axis_bytes:
            moved[a] = add(moved[a], b) if a in moved else b
        return CommCost(self.parts + other.parts, self.overlapped and other.overlapped, tuple(moved.items()))


NOTHING = CommCost(((ZERO, ZERO),), True)
Formula = Callable[[Term, tuple[AxisLink, ...]], CommCost]


def group_size(group: tuple[AxisLink, ...]) -> Term:
    out: Term = tm.ONE
    for g in group:
        out = out * g.size
    return out


def beta_of(group: tuple[AxisLink, ...]) -> Term:
    return tm.mono(W_DCN) if any(g.dcn for g in group) else tm.mono(BETA)


def less_one(group: tuple[AxisLink, ...]) -> Term:
    """n − 1 for the group's n devices: a number, or the expression kept whole."""
    if all(g.number is not None for g in group):
        n = 1
        for g in group:
            n *= g.number  # type: ignore[operator]
        return const(n - 1)
    return tm.mono(sympy.Mul(*(axis_size(g.name) if g.number is None else g.number for g in group)) - 1)


def ab_ring(v: Term, group: tuple[AxisLink, ...]) -> CommCost:
    n, less = group_size(group), less_one(group)
    return CommCost(((less * tm.mono(ALPHA), less / n * v / beta_of(group)),), False)


def ab_recursive_doubling(v: Term, group: tuple[AxisLink, ...]) -> CommCost:
    n = sympy.Mul(*(axis_size(g.name) if g.number is None else g.number for g in group))
    steps = tm.mono(sympy.log(n, 2))
    return CommCost(((steps * tm.mono(ALPHA), steps * v / beta_of(group)),), False)


def ab_all_to_all(v: Term, group: tuple[AxisLink, ...]) -> CommCost:
    n, less = group_size(group), less_one(group)
    return CommCost(((less * tm.mono(ALPHA), less / n**2 * v / beta_of(group)),), False)


def ab_permute(shard: Term, group: tuple[AxisLink, ...]) -> CommCost:
    return CommCost(((tm.mono(ALPHA), shard / beta_of(group)),), False)
