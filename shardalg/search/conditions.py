"""Conditions in log space: a comparison of two monomials is a half-space, a region a union of polyhedra.

The map's coordinates are the parameters the user maps over (``B/N``, ``C/W_ici``, ``F``, ``M_X``): each a
monomial, its logarithm a coordinate. A comparison ``p < q`` of monomials is ``c·Π P_k^λ_k < 1`` (``P_k`` the
parameters): an :class:`Atom`. A comparison that involves the maximum or sum of several monomials becomes a
formula over atoms (:data:`Formula`: a tree of conjunctions and disjunctions, never expanded up front).

Sums are compared exactly when they can be: like terms on both sides cancel first (``c + 8a < c + 12a`` is
true everywhere, ``c + 8a < c + b`` is ``8a < b``). When more than one term is left on a side the comparison
has no monomial form; it is then replaced by the comparison of the largest terms and marked with the factor
``k`` that brackets it (``max ≤ sum ≤ k·max``): the true boundary lies within that factor of the printed one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import sympy
from sympy import Expr, Rational

from shardalg.errors import UsageError

from .logspace import Cost, Mono, Term, _at_least, _positive_number, mono_of

__all__ = [
    "Coordinates",
    "Atom",
    "All",
    "AnyOf",
    "Formula",
    "atom",
    "less",
    "cost_less",
    "negate",
    "both",
    "either",
    "conjunction",
    "brackets",
]


class Coordinates:
    """The parameters mapped over, each a monomial of positive symbols, and the change of variables: a
    ratio of monomials written as ``c·Π P_k^λ_k``. The parameters must be independent; a ratio that no
    combination of them expresses is an error naming the symbols left over."""

    def __init__(self, over: Sequence[Expr]) -> None:
        if not over:
            raise UsageError("a strategy map needs at least one parameter to map over", rule="parameters")
        monos = []
        for p in over:
            m = mono_of(p)
            if m is None or not m.exps:
                raise UsageError(
                    f"the parameter {sympy.sstr(p)} is not a monomial of positive symbols",
                    rule="parameters",
                    fix="map over products of powers, like B/N or C/W_ici",
                )
            monos.append(m)
        self.params: tuple[Expr, ...] = tuple(over)
        self.monos: tuple[Mono, ...] = tuple(monos)
        syms: list[sympy.Symbol] = []
        for m in monos:
            syms += [s for s, _ in m.exps if s not in syms]
        self.symbols = tuple(syms)
        rows = sympy.Matrix([[m.powers.get(s, 0) for s in syms] for m in monos])
        if rows.rank() < len(monos):
            raise UsageError(
                f"the parameters {', '.join(map(sympy.sstr, over))} are not independent",
                rule="parameters",
                fix="drop a parameter that is a product of the others",
            )
        self._rows = rows
        self._left = rows.T * (rows * rows.T).inv()
        self._memo: dict[tuple, tuple[tuple[Rational, ...], Expr]] = {}

    def split(self, ratio: Mono) -> tuple[tuple[Rational, ...], Expr]:
        """``ratio`` as (λ, c) with ratio = c·Π P_k^λ_k; a UsageError when the parameters do not cover it."""
        key = (ratio.exps, ratio.coef)
        if key in self._memo:
            return self._memo[key]
        powers = ratio.powers
        outside = sorted(s.name for s in powers if s not in self.symbols)
        d = sympy.Matrix([[powers.get(s, 0) for s in self.symbols]])
        lam = d * self._left
        if outside or lam * self._rows != d:
            left = outside or [
                s.name for s, e in zip(self.symbols, d - lam * self._rows, strict=True) if e != 0
            ]
            raise UsageError(
                f"the condition {sympy.sstr(ratio.expr())} < 1 depends on {', '.join(left)} beyond the parameters "
                f"{', '.join(map(sympy.sstr, self.params))}",
                rule="parameters",
                fix="add a parameter that covers them, or substitute their values",
            )
        lam_t = tuple(Rational(x) for x in lam)
        coef = ratio.coef / sympy.Mul(*(m.coef**k for m, k in zip(self.monos, lam_t, strict=True)))
        self._memo[key] = (lam_t, coef)
        return self._memo[key]

    def logs(self, values: dict[sympy.Symbol, float]) -> tuple[float, ...]:
        """The coordinates (log of each parameter) of a point given by its symbols' values."""
        missing = sorted({s.name for s in self.symbols if s not in values})
        if missing:
            raise UsageError(f"a point of the map needs values for {', '.join(missing)}", rule="parameters")
        out = []
        for p, m in zip(self.params, self.monos, strict=True):
            v = float(m.coef) * math.prod(float(values[s]) ** float(e) for s, e in m.exps)
            if not v > 0:
                raise UsageError(
                    f"the parameter {sympy.sstr(p)} is {v} at that point; the map lives where every "
                    "parameter is positive",
                    rule="parameters",
                )
            out.append(math.log(v))
        return tuple(out)


@dataclass(frozen=True)
class Atom:
    """``lhs < rhs`` (``strict``) or ``lhs <= rhs`` between monomials, as ``c·Π P_k^λ_k < 1`` in the map's
    coordinates. ``bracket`` > 1 marks a comparison of sums replaced by that of their largest terms: the
    true boundary lies within that factor. ``why`` says what the comparison is for."""

    lam: tuple[Rational, ...]
    coef: Expr
    lhs: Expr
    rhs: Expr
    strict: bool = True
    bracket: int = 1
    why: str = ""

    @property
    def constant(self) -> bool:
        return not any(self.lam)

    def truth(self) -> bool:
        """The value of a constant atom (no parameter left): exact, and ``<=`` holds at equality."""
        if self.coef == 1:
            return not self.strict
        return not _at_least(self.coef, 1)

    def __hash__(self) -> int:  # the fields' hash once (atoms key the engine's tables, in tuples)
        return self._hash

    def __eq__(self, other: object) -> bool:  # the hashes first: unequal atoms differ there, at once
        if self is other:
            return True
        if not isinstance(other, Atom) or self._hash != other._hash:
            return False
        return (self.lam, self.coef, self.lhs, self.rhs, self.strict, self.bracket, self.why) == (
            other.lam,
            other.coef,
            other.lhs,
            other.rhs,
            other.strict,
            other.bracket,
            other.why,
        )

    @cached_property
    def _hash(self) -> int:
        return hash((self.lam, self.coef, self.lhs, self.rhs, self.strict, self.bracket, self.why))

    @cached_property
    def log_coef(self) -> float:
        return float(sympy.log(self.coef).evalf(30))

    @cached_property
    def vec(self) -> tuple[float, ...]:
        """λ in floats."""
        return tuple(float(k) for k in self.lam)

    @cached_property
    def half(self) -> tuple[float, ...]:
        """The half-space alone (λ and log c in floats), whatever the comparison was written as or for."""
        return (*self.vec, self.log_coef)

    def margin(self, y: Sequence[float]) -> float:
        """-log(ratio) at the point y: positive inside the half-space."""
        return -(sum(k * v for k, v in zip(self.vec, y, strict=True)) + self.log_coef)

    def negated(self) -> Atom:
        """The complement. A boundary has measure zero, so a non-constant atom stays strict (regions are
        open); only a constant atom's strictness matters, and :func:`atom` decides those on the spot."""
        strict = True if not self.constant else not self.strict
        return Atom(
            tuple(-k for k in self.lam), 1 / self.coef, self.rhs, self.lhs, strict, self.bracket, self.why
        )

    def solved(self, coords: Coordinates, order: Sequence[int]) -> sympy.Basic:
        """The atom solved for the first parameter of ``order`` it involves: ``P < bound`` or ``P > bound``."""
        k = next((i for i in order if self.lam[i] != 0), None)
        if k is None:
            k = next(i for i, v in enumerate(self.lam) if v != 0)
        e = self.lam[k]
        rest = sympy.Mul(*(coords.params[i] ** (-v / e) for i, v in enumerate(self.lam) if i != k and v != 0))
        bound = sympy.powsimp(sympy.expand_power_base(self.coef ** (-1 / e) * rest, force=True), force=True)
        bound = sympy.factor(bound) if bound.is_Add else bound
        p = coords.params[k]
        if e > 0:
            return (sympy.StrictLessThan if self.strict else sympy.LessThan)(p, bound, evaluate=False)
        return (sympy.StrictGreaterThan if self.strict else sympy.GreaterThan)(p, bound, evaluate=False)

    def relation(self) -> sympy.Basic:
        """The comparison as first written (in the symbols, before the change of variables)."""
        return (sympy.StrictLessThan if self.strict else sympy.LessThan)(self.lhs, self.rhs, evaluate=False)


# A formula: an atom, a constant, or a conjunction / disjunction of formulas, kept as a tree. It is never
# distributed into a union of polyhedra up front (a comparison of two maxima of k sums each would expand to
# k^k pieces): the engine intersects polyhedra with it part by part, dropping the empty ones as it goes.
@dataclass(frozen=True)
class All:
    parts: tuple[Formula, ...]


@dataclass(frozen=True)
class AnyOf:
    parts: tuple[Formula, ...]


Formula = Atom | All | AnyOf | bool


def atom(
    p: Mono, q: Mono, coords: Coordinates, *, strict: bool = True, bracket: int = 1, why: str = ""
) -> Formula:
    """``p < q`` (or ``<=``) as a formula: a constant one decided exactly, else one atom."""
    lam, coef = coords.split(p / q)
    a = Atom(lam, coef, p.expr(), q.expr(), strict, bracket, why)
    if a.constant:
        return a.truth()
    return replace(a, strict=True)


def _join(kind: type, absorbing: bool, formulas: tuple[Formula, ...]) -> Formula:
    """A conjunction (``All``, absorbed by False) or disjunction (``AnyOf``, absorbed by True): flattened,
    repeats and neutral parts dropped, one part returned as itself."""
    parts: list[Formula] = []
    for f in formulas:
        if f is absorbing:
            return absorbing
        if f is (not absorbing):
            continue
        for g in f.parts if isinstance(f, kind) else (f,):
            if g not in parts:
                parts.append(g)
    return (not absorbing) if not parts else parts[0] if len(parts) == 1 else kind(tuple(parts))


def both(*formulas: Formula) -> Formula:
    """The conjunction (flattened; True parts dropped; False if any part is)."""
    return _join(All, False, formulas)


def either(*formulas: Formula) -> Formula:
    """The disjunction (flattened; False parts dropped; True if any part is)."""
    return _join(AnyOf, True, formulas)


def negate(f: Formula) -> Formula:
    """De Morgan down the tree: no expansion."""
    if isinstance(f, bool):
        return not f
    if isinstance(f, Atom):
        return f.negated()
    if isinstance(f, All):
        return either(*(negate(g) for g in f.parts))
    return both(*(negate(g) for g in f.parts))


def conjunction(f: Formula) -> tuple[Atom, ...] | None:
    """The atoms of a formula that is a plain conjunction (True: none), or None when it is not one."""
    if f is True:
        return ()
    if isinstance(f, Atom):
        return (f,)
    if isinstance(f, All) and all(isinstance(g, Atom) for g in f.parts):
        return tuple(f.parts)  # type: ignore[arg-type]
    return None


def brackets(f: Formula) -> int:
    """The largest bracket factor among a formula's atoms (1: every comparison exact)."""
    if isinstance(f, bool):
        return 1
    if isinstance(f, Atom):
        return f.bracket
    return max(brackets(g) for g in f.parts)


def _cancel(p: Sequence[Term], q: Sequence[Term]) -> tuple[list[Mono], list[Mono]]:
    """Like monomials of two sums cancelled: what is left on each side, coefficients positive."""
    acc: dict[tuple, list] = {}
    for t in p:
        acc.setdefault(t.mono.exps, [sympy.Integer(0), sympy.Integer(0)])[0] += t.mono.coef
    for t in q:
        acc.setdefault(t.mono.exps, [sympy.Integer(0), sympy.Integer(0)])[1] += t.mono.coef
    left, right = [], []
    for exps, (a, b) in acc.items():
        d = a - b
        if d == 0:
            continue
        (left if _positive_number(d) else right).append(Mono(abs(d), exps))
    return left, right


def less(
    p: Sequence[Term], q: Sequence[Term], coords: Coordinates, *, strict: bool = True, why: str = ""
) -> Formula:
    """``sum(p) < sum(q)`` (``<=`` when not strict): exact when, after cancelling like terms, at most one
    monomial is left on each side; otherwise the largest terms are compared, bracketed by the term count."""
    left, right = _cancel(p, q)
    if not left:
        return bool(right) or not strict
    if not right:
        return False
    if len(left) == 1 and len(right) == 1:
        return atom(left[0], right[0], coords, strict=strict, why=why)
    k = max(len(left), len(right))
    return either(
        *(both(*(atom(a, b, coords, strict=strict, bracket=k, why=why) for a in left)) for b in right)
    )


def cost_less(a: Cost, b: Cost, coords: Coordinates, *, strict: bool = True, why: str = "") -> Formula:
    """``max_i A_i < max_j B_j`` = some B_j exceeds every A_i (each A, B a sum)."""
    return either(*(both(*(less(pa, pb, coords, strict=strict, why=why) for pa in a)) for pb in b))
