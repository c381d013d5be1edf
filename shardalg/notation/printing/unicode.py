"""The Unicode notation: the ASCII text with `` · `` for products and `` → `` for arrows
(``A[I_X, J] · B[J, K_Y] → C[I_X, K_Y]``)."""

from __future__ import annotations

from typing import Any, ClassVar

from .symbology import UNICODE
from .text import TextPrinter

__all__ = ["UnicodePrinter", "unicode"]


class UnicodePrinter(TextPrinter):
    style: ClassVar[int] = UNICODE


def unicode(node: object, **settings: Any) -> str:
    """``node`` in the Unicode notation."""
    return UnicodePrinter(**settings).doprint(node)
