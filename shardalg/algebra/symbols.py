"""The only place shardalg makes sympy Symbols.

Symbols with different assumptions are different symbols, so every symbol is made here, once, positive,
and cached: ``dim_size("B") is dim_size("B")``. Dim sizes and axis sizes are positive integers; rates and
times are positive reals. Each symbol carries the LaTeX name the book uses.
"""

from __future__ import annotations

import re

import sympy

from shardalg.cache import Kind, memo, memoized
from shardalg.errors import UsageError

__all__ = ["dim_size", "axis_size", "links", "quantity", "latex_names", "device_count"]

# LaTeX spelling of each named quantity (the book's): the name -> its LaTeX.
_QUANTITY_LATEX: dict[str, str] = {
    "V": "V",
    "W_ici": r"W_{\text{ici}}",
    "W_dcn": r"W_{\text{dcn}}",
    "W_hbm": r"W_{\text{hbm}}",
    "T_min": r"T_{\min}",
    "C": "C",
    "alpha": r"\alpha",
    "beta": r"\beta",
    "N": "N",
}

_latex: dict[sympy.Symbol, str] = memo(f"{__name__}._latex", Kind.TABLE, {})  # each symbol's LaTeX name


@memoized(Kind.PIECE)
def dim_size(name: str) -> sympy.Symbol:
    """The size of dim ``name`` (``B``, ``D``, ...): a positive integer symbol."""
    s = sympy.Symbol(name, positive=True, integer=True)
    _latex[s] = name
    return s


@memoized(Kind.PIECE)
def axis_size(name: str) -> sympy.Symbol:
    """The size of mesh axis ``name``, written ``X`` in the book's formulas (``|X|`` in prose)."""
    s = sympy.Symbol(name, positive=True, integer=True)
    _latex[s] = name
    return s


@memoized(Kind.PIECE)
def links(axis: str) -> sympy.Symbol:
    """The link multiplicity M of mesh axis ``axis`` (the book's ``M_X``)."""
    s = sympy.Symbol(f"M_{axis}", positive=True, integer=True)
    _latex[s] = f"M_{{{axis}}}"
    return s


@memoized(Kind.PIECE)
def quantity(name: str) -> sympy.Symbol:
    """A hardware or cost quantity (``W_ici``, ``T_min``, ``C``, ``alpha``, ...): a positive real symbol."""
    s = sympy.Symbol(name, positive=True)
    _latex[s] = _QUANTITY_LATEX.get(name, name)
    return s


def device_count() -> sympy.Symbol:
    """N, the number of devices a derivation splits (``X·Y = N``): a positive real symbol like the rates."""
    return quantity("N")


def latex_names(*exprs: object) -> dict[sympy.Symbol, str]:
    """``symbol_names`` for ``sympy.latex``: every symbol made here with its book spelling; and for the other
    symbols of ``exprs`` whose subscript is a word (``X_opt``, ``V_shard``), the word upright
    (``X_{\\text{opt}}``), as the book sets it."""
    names = dict(_latex)
    for e in exprs:
        for s in getattr(e, "free_symbols", ()):
            m = _WORD_SUBSCRIPT.fullmatch(getattr(s, "name", ""))
            if s not in names and m:
                names[s] = rf"{m[1]}_{{\text{{{m[2]}}}}}"
    return names


_WORD_SUBSCRIPT = re.compile(r"([A-Za-z])_([a-z]{2,})")


def as_expr(x: object) -> sympy.Expr:
    """A number or sympy value as a sympy value. Used instead of ``sympify``, which would also evaluate
    text: a string here is a UsageError (user text reaches sympy only through the grammar)."""
    if isinstance(x, sympy.Basic):
        return x  # type: ignore[return-value]
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise UsageError(f"expected a number or a sympy expression, not {type(x).__name__} {x!r}")
    return sympy.Integer(x) if isinstance(x, int) else sympy.Float(x)
