"""Light terms as sympy expressions: a light :class:`~shardalg.costs.terms.Max` as a sympy ``Max`` without
sympy's evaluation, and the formulas made so far, shared by equal trees.

The light Max's arguments are already none structurally below another (:func:`shardalg.costs.terms.maximum`
drops those), so sympy's own reduction, which compares every pair of arguments through ``factor_terms``
(about 90% of a plan cost's build time, issue 10), is skipped: the Max is built unevaluated from its
flattened, distinct arguments, the form sympy's evaluation keeps for them. Numbers alone are still
evaluated (a Max of numbers is a number).

A plan's cost is rebuilt as a new light tree each time it is asked for, and equal trees (the same steps priced
again, by another query or another candidate of a search) give the same expression, so :func:`formula` makes
it once. Bounded: emptied when full. Trees with a float coefficient are left out by the caller (1.0 and 1 are
equal coefficients there, but not equal formulas).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import sympy

from shardalg.cache import Kind, Memo, memo

__all__ = ["unevaluated_max", "formula"]

_FORMULAS: Memo = memo(f"{__name__}._FORMULAS", Kind.PIECE)  # a term's formula, by the term


def formula(term: Hashable, make: Callable[[bool], sympy.Expr]) -> sympy.Expr:
    """``make(True)``, the term's (evaluated) formula, made once per equal term."""
    got = _FORMULAS.get(term)
    if got is None:
        got = _FORMULAS.keep(term, make(True))
    return got


def unevaluated_max(parts: list[sympy.Expr]) -> sympy.Expr:
    """``Max(*parts)``: nested maxima flattened, repeats dropped, one argument returned as itself."""
    args: list[sympy.Expr] = []
    for e in parts:
        for x in e.args if isinstance(e, sympy.Max) else (e,):
            if x not in args:
                args.append(x)
    if len(args) == 1:
        return args[0]
    if all(x.is_number for x in args):
        return sympy.Max(*args)
    return sympy.Max(*args, evaluate=False)
