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

__all__ = [
    "dim_size",
    "axis_size",
    "links",
    "quantity",
    "latex_names",
    "device_count",
    "QUANTITIES",
    "symbol",
    "Symbols",
    "symbols",
]

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

# The names that are quantities (positive reals), not dim or axis sizes (positive integers).
QUANTITIES: tuple[str, ...] = tuple(_QUANTITY_LATEX)

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


_LINKS = re.compile(r"M_([A-Za-z][A-Za-z0-9]*)")


def symbol(name: str) -> sympy.Symbol:
    """The package's symbol called ``name``, with the assumptions its formulas use: a quantity
    (:data:`QUANTITIES`: ``T_min``, ``W_ici``, ``C``, ``N``, ...) is a positive real, ``M_X`` is axis X's link
    count, any other identifier a dim or axis size (a positive integer). A ``sympy.Symbol("T_min")`` made
    elsewhere has no assumptions, so it is a different symbol and ``subs`` with it changes nothing."""
    if not isinstance(name, str) or not name.isidentifier():
        raise UsageError(f"a symbol's name is an identifier such as T_min or B, not {name!r}")
    if name in QUANTITIES:
        return quantity(name)
    m = _LINKS.fullmatch(name)
    return links(m[1]) if m else dim_size(name)


class Symbols:
    """The package's symbols by attribute: ``sa.symbols.T_min``, ``sa.symbols.B``, ``sa.symbols.M_X``, the very
    symbols its costs and derivations are made of, so ``cost.total.subs(sa.symbols.T_min, 0)`` substitutes.

        >>> symbols.T_min.is_positive, symbols.B.is_integer
        (True, True)
    """

    def __getattr__(self, name: str) -> sympy.Symbol:
        if name.startswith("__"):
            raise AttributeError(name)
        return symbol(name)

    def __call__(self, *names: str) -> tuple[sympy.Symbol, ...]:
        """Several at once: ``B, D = sa.symbols("B", "D")``."""
        return tuple(symbol(n) for n in names)

    def __dir__(self) -> list[str]:
        return sorted(QUANTITIES)

    def __repr__(self) -> str:
        return (
            f"<symbols: quantities {', '.join(QUANTITIES)} (positive reals); M_<axis> (link counts); any "
            "other name a dim or axis size (a positive integer)>"
        )


symbols = Symbols()

_WORD_SUBSCRIPT = re.compile(r"([A-Za-z])_([a-z]{2,})")


def as_expr(x: object) -> sympy.Expr:
    """A number or sympy value as a sympy value. Used instead of ``sympify``, which would also evaluate
    text: a string here is a UsageError (user text reaches sympy only through the grammar)."""
    if isinstance(x, sympy.Basic):
        return x  # type: ignore[return-value]
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise UsageError(f"expected a number or a sympy expression, not {type(x).__name__} {x!r}")
    return sympy.Integer(x) if isinstance(x, int) else sympy.Float(x)
