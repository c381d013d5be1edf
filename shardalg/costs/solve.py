"""Solving cost relations for one symbol: ``T_a < T_b`` between positive costs, and ``f = g`` for a
positive root, on light terms first and through sympy only where they are not monomials.

A relation between maxima splits into max-free ones (``x < max(p, q)`` is ``x < p ∨ x < q``; a sum with a
maximum inside is first spread, ``a + max(b, c) = max(a + b, a + c)``); a relation between monomials is
divided through (``g·x^k < 1``) and ``x`` isolated: ``x < g^(-1/k)`` for k > 0, ``x > g^(-1/k)`` for k < 0,
exactly (roots of integers stay roots: ``sqrt(2)``). What is not a monomial goes to sympy
(``factor(powsimp(cancel(...)))`` and ``solve_univariate_inequality`` over a positive real stand-in).

Each step is recorded in a :class:`Steps` list as a lazy value: the sympy expression is made when the
derivation is printed, not while it is solved.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from itertools import product

import sympy
from sympy import Expr

from shardalg.algebra.symbols import as_expr
from shardalg.errors import UsageError

from .fromsympy import from_sympy
from .terms import ONE, Max, Mono, Sum, Term, add, atom, atom_id, maximum

__all__ = ["Lazy", "Steps", "solve_less", "positive_root", "substitute", "simplify", "MAX_BRANCHES"]

MAX_BRANCHES = 64  # a sum of maxima spread into more maxima than this is left to sympy


class Lazy:
    """A value of a derivation step made on demand (a sympy expression or relation)."""

    __slots__ = ("make", "_value")

    def __init__(self, make: Callable[[], sympy.Basic]):
        self.make = make
        self._value: sympy.Basic | None = None

    def get(self) -> sympy.Basic:
        if self._value is None:
            self._value = self.make()
        return self._value


def realize(x: object) -> sympy.Basic:
    """A step's value as sympy: a Lazy made, a term converted, a sympy value as is."""
    if isinstance(x, Lazy):
        return x.get()
    if isinstance(x, Term):
        return x.sympy()
    return x  # type: ignore[return-value]


class Steps(list):
    """(label, value) pairs of a derivation. A value may be stored lazily (a term, a :class:`Lazy`); reading
    the list (iterating, indexing) gives it as sympy, made once."""

    def add(self, label: str, value: object) -> object:
        self.append((label, value))
        return value

    def _real(self, i: int) -> tuple[str, sympy.Basic]:
        label, value = list.__getitem__(self, i)
        if isinstance(value, Lazy | Term):
            value = realize(value)
            list.__setitem__(self, i, (label, value))
        return label, value

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self._real(k) for k in range(*i.indices(len(self)))]
        return self._real(i if i >= 0 else len(self) + i)

    def __iter__(self):
        for i in range(len(self)):
            yield self._real(i)


def _term(x: object) -> Term:
    """A step's value as a light term (a term as is: converting it to sympy and back would evaluate its
    maxima)."""
    return x if isinstance(x, Term) else from_sympy(realize(x))


def simplify(e: object) -> Expr:
    """sympy's simplification of a non-monomial cost: ``factor(powsimp(cancel(e)))``."""
    return sympy.factor(sympy.powsimp(sympy.cancel(as_expr(realize(e)))))


def _lt(a: object, b: object, evaluate: bool = False) -> sympy.Basic:
    return sympy.StrictLessThan(realize(a), realize(b), evaluate=evaluate)


# ---- substitution to a fixed point -------------------------------------------------------------------
def substitute(e: Term | Expr, mapping: Mapping) -> Term | Expr:
    """``e`` with each key of ``mapping`` replaced by its value, repeated until no key is left (a value may
    name another key: ``{Y: N/(X*Z), X: X_opt}``); a UsageError when the substitution is circular."""
    if not mapping:
        return e
    keys = set(mapping)
    if not all(isinstance(k, sympy.Symbol) for k in keys):
        raise UsageError("substitute maps symbols to expressions, e.g. {X: X_opt}")
    for _ in range(len(keys) + 1):
        if isinstance(e, Term):
            if not (e.symbols() & keys):
                return e
            e = e.subs({k: from_sympy(v) for k, v in mapping.items()})
            if e.symbols() & keys:  # a key inside an atom that is not a symbol, e.g. a line's (Y - 1)
                e = from_sympy(e.sympy().xreplace(dict(mapping)))
        else:
            if not (e.free_symbols & keys):
                return e
            e = e.xreplace(dict(mapping))
    raise UsageError(
        f"the substitution {dict(mapping)} is circular: a symbol is left after {len(keys) + 1} rounds"
    )


# ---- splitting maxima ----------------------------------------------------------------------------
def _branches(t: Term) -> list[Term] | None:
    """Terms without a maximum whose maximum is ``t`` (None past MAX_BRANCHES)."""
    if type(t) is Mono:
        return [t]
    if type(t) is Max:
        out: list[Term] = []
        for a in t.args:
            got = _branches(a)
            if got is None:
                return None
            out.extend(got)
        return out if len(out) <= MAX_BRANCHES else None
    parts = [_branches(a) for a in t.args]  # a Sum
    if any(p is None for p in parts):
        return None
    total = 1
    for p in parts:
        total *= len(p)  # type: ignore[arg-type]
    if total > MAX_BRANCHES:
        return None
    return [add(*combo) for combo in product(*parts)]  # type: ignore[arg-type]


def _spread(t: Term) -> Term:
    got = _branches(t)
    return t if got is None else maximum(*got)


class Rel:
    """``lhs < rhs`` between light terms, or an And/Or of such (``kind``)."""

    __slots__ = ("kind", "args")

    def __init__(self, kind: str, args: tuple):
        self.kind, self.args = kind, args

    def sympy(self) -> sympy.Basic:
        if self.kind == "<":
            return _lt(*self.args)
        head = sympy.Or if self.kind == "or" else sympy.And
        return head(*(a.sympy() for a in self.args), evaluate=False)


def _split(lhs: Term, rhs: Term) -> Rel:
    if type(rhs) is Max:
        return Rel("or", tuple(_split(lhs, a) for a in rhs.args))
    if type(lhs) is Max:
        return Rel("and", tuple(_split(a, rhs) for a in lhs.args))
    return Rel("<", (lhs, rhs))


# ---- solving -------------------------------------------------------------------------------------
def solve_less(lhs: object, rhs: object, x: sympy.Symbol | None, steps: Steps) -> sympy.Basic:
    """The condition ``lhs < rhs`` (positive costs) solved for ``x``, recording the steps."""
    a, b = _spread(_term(lhs)), _spread(_term(rhs))
    split = _split(a, b)
    if split.kind != "<":
        steps.add("split the maxima", Lazy(split.sympy))
    return _solve_tree(split, x, steps)


def _solve_tree(node: Rel, x: sympy.Symbol | None, steps: Steps) -> sympy.Basic:
    if node.kind != "<":
        head = sympy.Or if node.kind == "or" else sympy.And
        return head(*(_solve_tree(a, x, steps) for a in node.args))
    lhs, rhs = node.args
    if type(lhs) is Mono and type(rhs) is Mono and not rhs.is_zero:
        return _solve_monomial(lhs / rhs, x, steps)
    return _solve_sympy(lhs.sympy(), rhs.sympy(), x, steps)


def _inside(m: Mono, x: sympy.Symbol) -> bool:
    """Whether ``x`` hides inside an atom of ``m`` kept whole (then the monomial route cannot isolate it)."""
    i = atom_id(x)
    return any(a != i and x in atom(a).free_symbols for a, _ in m.powers)


def _solve_monomial(ratio: Mono, x: sympy.Symbol | None, steps: Steps) -> sympy.Basic:
    steps.add("divide by the right side", Lazy(lambda: _lt(ratio, 1)))
    free = ratio.symbols()
    if not free:
        value = ratio.evaluate({})
        return sympy.true if value is not None and value < 1 else sympy.false
    target = x if x is not None and x in free else None
    if target is None and len(free) == 1:
        (target,) = free
    if target is None:
        return sympy.StrictLessThan(ratio.sympy(), 1)
    if _inside(ratio, target):
        return _solve_sympy(ratio.sympy(), sympy.Integer(1), target, steps, divided=True)
    k = ratio.exponent(target)
    rest = ratio / Mono(1, ((atom_id(target), k),))
    bound = (ONE / rest) ** (1 / _fraction(k))
    solved = _bound(target, bound, above=k < 0)
    steps.add(f"solve for {target}", solved)
    return solved


def _bound(x: sympy.Symbol, bound: Term, above: bool) -> sympy.Basic:
    """``x > bound`` (``above``) or ``x < bound`` for a positive symbol x and a positive bound free of x:
    decided here when the bound is a number (a positive integer is > 1/2 and never < 1), else left as a
    relation (sympy's evaluation would only ask its assumptions the same, slowly)."""
    b = bound.sympy()
    if not b.free_symbols:
        floor = 1 if x.is_integer else 0
        if above and float(b) < floor:
            return sympy.true
        if not above and float(b) <= floor:
            return sympy.false
    return (
        sympy.StrictGreaterThan(x, b, evaluate=False) if above else sympy.StrictLessThan(x, b, evaluate=False)
    )


def _fraction(k: object):
    return Fraction(k) if not isinstance(k, float) else k


def _solve_sympy(
    lhs: Expr, rhs: Expr, x: sympy.Symbol | None, steps: Steps, divided: bool = False
) -> sympy.Basic:
    if not divided and rhs == 0:  # a cost is never below nothing (costs are positive or 0)
        steps.add("the right side is 0: a cost is never less", sympy.StrictLessThan(lhs, 0, evaluate=False))
        return sympy.false
    ratio = simplify(lhs / rhs) if not divided else lhs
    if not divided:
        steps.add("divide by the right side", sympy.StrictLessThan(ratio, 1, evaluate=False))
    if not ratio.free_symbols:
        return sympy.true if bool(ratio < 1) else sympy.false
    target = x if x is not None and x in ratio.free_symbols else None
    if target is None and len(ratio.free_symbols) == 1:
        (target,) = ratio.free_symbols
    if target is None:
        return sympy.StrictLessThan(ratio, 1)
    real = sympy.Dummy(target.name, positive=True)
    try:
        found = sympy.solve_univariate_inequality(ratio.subs(target, real) < 1, real, relational=True)
    except (NotImplementedError, ValueError, TypeError):
        steps.add(f"no closed form in {target}", sympy.StrictLessThan(ratio, 1))
        return sympy.StrictLessThan(ratio, 1)
    solved = sympy.simplify(found.subs(real, target))
    steps.add(f"solve for {target}", solved)
    return solved


def positive_root(lhs: object, rhs: object, x: sympy.Symbol) -> Term | Expr:
    """The positive solution of ``lhs = rhs`` for ``x``: exactly when lhs/rhs is a monomial g·x^k (then
    x = g^(-1/k)), else by sympy's solve over a positive real stand-in."""
    a, b = _term(lhs), _term(rhs)
    if type(a) is Mono and type(b) is Mono and not b.is_zero:
        ratio = a / b
        k = ratio.exponent(x) if type(ratio) is Mono else 0
        if k != 0 and not _inside(ratio, x):  # type: ignore[arg-type]
            rest = ratio / Mono(1, ((atom_id(x), k),))
            return (ONE / rest) ** (1 / _fraction(k))
    eq = sympy.Eq(realize(lhs), realize(rhs), evaluate=False)
    real = sympy.Dummy(x.name, positive=True)
    try:
        found = sympy.solve(eq.lhs.subs(x, real) - eq.rhs.subs(x, real), real)
    except (NotImplementedError, ValueError, TypeError) as err:
        raise UsageError(
            f"no closed form for {x} in {eq}: sympy cannot solve it ({type(err).__name__}); a cost "
            "with a maximum inside a sum has none here (take it under overlap steady or serial)"
        ) from None
    roots = [r for r in found if r.is_positive is not False]
    if len(roots) != 1:
        raise UsageError(f"expected one positive solution for {x}, found {len(roots)}: {roots}")
    return simplify(roots[0].subs(real, x))


def stationary(t: Term, x: sympy.Symbol) -> tuple[Term, Term] | None:
    """For a posynomial in ``x``, its derivative's rising and falling parts (each a monomial) when the
    derivative has exactly one of each; None otherwise (sympy then differentiates)."""
    monos = t.monomials()
    if monos is None:
        return None
    up: list[Term] = []
    down: list[Term] = []
    for m in monos:
        k = m.exponent(x)
        if k == 0:
            continue
        if _inside(m, x):
            return None
        d = m * _fraction(k) / Mono(1, ((atom_id(x), 1),))
        (up if k > 0 else down).append(d if k > 0 else d * -1)
    if len(up) != 1 or len(down) != 1:
        return None
    return up[0], down[0]


__all__ += ["stationary", "realize", "Rel", "Sum"]
