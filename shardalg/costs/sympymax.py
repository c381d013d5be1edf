"""A light :class:`~shardalg.costs.terms.Max` as a sympy ``Max``, without sympy's evaluation.

The light Max's arguments are already none structurally below another (:func:`shardalg.costs.terms.maximum`
drops those), so sympy's own reduction, which compares every pair of arguments through ``factor_terms``
(about 90% of a plan cost's build time, issue 10), is skipped: the Max is built unevaluated from its
flattened, distinct arguments, the form sympy's evaluation keeps for them. Numbers alone are still
evaluated (a Max of numbers is a number).
"""

from __future__ import annotations

import sympy

__all__ = ["unevaluated_max"]


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
