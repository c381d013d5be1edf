"""A sympy expression of positive symbols read back as a light term (:mod:`shardalg.costs.terms`).

    >>> from_sympy(sympy.Max(2*B/W, T))      # doctest: +SKIP
    Max(2*B/W_ici, T_min)

Monomials, sums of positive terms and maxima keep their structure; anything else (a difference, a
logarithm, a sum with a negative term) is kept whole as an atom.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from functools import reduce

import sympy

from .terms import ONE, Mono, Term, _coerce, _mul, _power, add, atom_id, const, maximum

__all__ = ["from_sympy", "total_symbols"]


def from_sympy(e: object) -> Term:
    """A sympy expression of positive symbols as a term; what is not a monomial, a sum of positive terms
    or a maximum is kept whole as an atom."""
    if isinstance(e, Term):
        return e
    if not isinstance(e, sympy.Basic):
        return _coerce(e)
    if e.is_Integer:
        return const(int(e))
    if e.is_Rational:
        return const(Fraction(int(e.p), int(e.q)))
    if e.is_Float:
        return const(float(e))
    if e.is_Symbol:
        return Mono(1, ((atom_id(e), 1),))
    if isinstance(e, sympy.Mul):
        factors = [from_sympy(a) for a in e.args]
        if any(type(f) is Mono and f.coeff < 0 for f in factors):
            return _opaque(e)
        return reduce(_mul, factors, ONE)
    if isinstance(e, sympy.Pow) and e.exp.is_Rational:
        base = from_sympy(e.base)
        if type(base) is Mono and base.coeff > 0 or type(base) is not Mono:
            return _power(base, Fraction(int(e.exp.p), int(e.exp.q)))
    if isinstance(e, sympy.Add):
        parts = [from_sympy(a) for a in e.args]
        if all(not (type(p) is Mono and p.coeff < 0) for p in parts):
            return add(*parts)
    if isinstance(e, sympy.Max):
        return maximum(*(from_sympy(a) for a in e.args))
    return _opaque(e)


def _opaque(e: sympy.Expr) -> Term:
    return Mono(1, ((atom_id(e), 1),))


def total_symbols(terms: Iterable[Term]) -> frozenset[sympy.Symbol]:
    """The symbols of several terms together."""
    return frozenset().union(*(t.symbols() for t in terms))
