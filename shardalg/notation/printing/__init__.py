"""Printers: text (canonical ASCII), Unicode, LaTeX, and a JSON dict form, each a class dispatching on node
type (sympy's pattern), wrapped by thin functions.

    >>> from shardalg.notation.parse import parse_statement
    >>> s = parse_statement("A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]")
    >>> text(s), unicode(s)
    ('A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]', 'A[I_X, J] · B[J, K_Y] → C[I_X, K_Y]')
    >>> latex(s)
    'A[I_X, J] \\\\cdot B[J, K_Y] \\\\rightarrow C[I_X, K_Y]'

For every node ``x`` and printer ``f`` among text, unicode and latex, ``parse(f(x))`` gives ``x`` back.
"""

from __future__ import annotations

from typing import Any

from shardalg.errors import UsageError

from .base import Printer
from .json import JsonPrinter, to_json
from .latex import LatexPrinter, latex
from .text import TextPrinter, text
from .unicode import UnicodePrinter, unicode

__all__ = [
    "Printer",
    "TextPrinter",
    "UnicodePrinter",
    "LatexPrinter",
    "JsonPrinter",
    "text",
    "unicode",
    "latex",
    "to_json",
    "printer_named",
    "render",
]

_PRINTERS: dict[str, type[Printer]] = {
    "text": TextPrinter,
    "unicode": UnicodePrinter,
    "latex": LatexPrinter,
    "json": JsonPrinter,
}


def printer_named(fmt: str) -> type[Printer]:
    """The printer class for ``--format`` names: text, unicode, latex, json."""
    try:
        return _PRINTERS[fmt]
    except KeyError:
        raise UsageError(f"unknown format {fmt!r}; known: {', '.join(_PRINTERS)}") from None


def render(node: object, fmt: str = "text", **settings: Any) -> Any:
    """``node`` printed in the format named ``fmt`` (a str, or a dict for json)."""
    return printer_named(fmt)(**settings).doprint(node)
