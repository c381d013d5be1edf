"""Fast evaluation of costs and conditions over parameter grids: sympy expressions compiled to numpy.

    >>> from shardalg.costs.sweep import sweep
    >>> sweep(expr, values=chip.values(), B=numpy.arange(1, 4096), D=8192)      # doctest: +SKIP

Inputs are passed by symbol name and broadcast against each other; a chip's numbers (or any substitution)
are applied before compiling. Max/Min and And/Or become element-wise numpy reductions, so scalars and
arrays mix freely. Relations and their combinations evaluate to boolean arrays. A light cost term
(:mod:`shardalg.costs.terms`, e.g. ``PlanCost.light("total")``) is evaluated on the arrays directly: no
sympy expression is built or compiled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import reduce

import numpy as np
import sympy

from shardalg.algebra.symbols import as_expr
from shardalg.errors import UsageError

from .terms import Term, const

__all__ = ["Compiled", "lambdify", "sweep"]

# sympy head -> (stand-in function name, numpy element-wise reduction)
_ELEMENTWISE: dict[type, tuple[str, Callable[..., np.ndarray]]] = {
    sympy.Max: ("_sa_max", lambda *a: reduce(np.maximum, a)),
    sympy.Min: ("_sa_min", lambda *a: reduce(np.minimum, a)),
    sympy.And: ("_sa_and", lambda *a: reduce(np.logical_and, a)),
    sympy.Or: ("_sa_or", lambda *a: reduce(np.logical_or, a)),
}


@dataclass(frozen=True)
class Compiled:
    """A compiled expression: call it with arrays by symbol name, e.g. ``f(B=..., D=...)``."""

    expr: sympy.Basic
    names: tuple[str, ...]
    function: Callable[..., np.ndarray]

    def __call__(self, **grids: object) -> np.ndarray:
        missing = [n for n in self.names if n not in grids]
        extra = [n for n in grids if n not in self.names]
        if missing or extra:
            raise UsageError(
                f"sweep of {self.expr} takes {', '.join(self.names) or 'no inputs'}"
                + (f"; missing {', '.join(missing)}" if missing else "")
                + (f"; unknown {', '.join(extra)}" if extra else "")
            )
        arrays = np.broadcast_arrays(*(np.asarray(grids[n], dtype=float) for n in self.names))
        out = self.function(*arrays)
        shape = arrays[0].shape if arrays else ()
        return np.broadcast_to(np.asarray(out), shape) if np.ndim(out) == 0 else np.asarray(out)


def _stand_ins(expr: sympy.Basic) -> sympy.Basic:
    for head, (name, _) in _ELEMENTWISE.items():
        fn = sympy.Function(name)
        expr = expr.replace(lambda e, h=head: isinstance(e, h), lambda e, f=fn: f(*e.args))
    return expr


def _of_term(term: Term, values: Mapping[sympy.Symbol, float] | None) -> Compiled:
    if values:
        term = term.subs({k: const(float(v)) for k, v in values.items()})
    symbols = sorted(term.symbols(), key=lambda s: s.name)
    names = tuple(s.name for s in symbols)
    if len(set(names)) != len(names):
        raise UsageError(f"two different symbols share a name in {term}; substitute one of them first")

    def function(*arrays: np.ndarray) -> np.ndarray:
        got = term.evaluate(dict(zip(symbols, arrays, strict=True)))
        return np.asarray(got, dtype=float)

    return Compiled(term, names, function)  # type: ignore[arg-type]


def lambdify(expr: sympy.Basic | Term, values: Mapping[sympy.Symbol, float] | None = None) -> Compiled:
    """Compile ``expr`` (a cost, a relation, a derivation's result) after substituting ``values``; a light
    term is evaluated directly instead."""
    if isinstance(expr, Term):
        return _of_term(expr, values)
    expr = as_expr(expr)
    if values:
        expr = expr.subs(values)
    symbols = sorted(expr.free_symbols, key=lambda s: s.name)
    names = tuple(s.name for s in symbols)
    if len(set(names)) != len(names):
        raise UsageError(f"two different symbols share a name in {expr}; substitute one of them first")
    modules = [{name: fn for name, fn in _ELEMENTWISE.values()}, "numpy"]
    function = sympy.lambdify(symbols, _stand_ins(expr), modules=modules)
    return Compiled(expr, names, function)


def sweep(
    expr: sympy.Basic | Term, values: Mapping[sympy.Symbol, float] | None = None, **grids: object
) -> np.ndarray:
    """Evaluate ``expr`` on the broadcast grid of ``grids`` (symbol name -> scalar or array)."""
    return lambdify(expr, values)(**grids)
