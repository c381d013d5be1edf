"""A map parameter written as text: a product of powers of named symbols, ``B/N``, ``C/W_ici``, ``F``,
``M_X``, ``B^2/N``. Read by a small tokenizer against the symbols the costs use (never sympify: user text
does not reach the expression parser). A bad name or token is an error with a caret under it."""

from __future__ import annotations

import re
from collections.abc import Mapping

import sympy
from sympy import Expr

from shardalg.errors import Span, UsageError

__all__ = ["parameter", "parameters_text"]

_TOKEN = re.compile(r"\s*(?:(?P<name>[A-Za-z][A-Za-z0-9_]*)(?:\^(?P<pow>-?[0-9]+))?|(?P<op>[*/·]))")


def parameter(text: str, known: Mapping[str, sympy.Symbol]) -> Expr:
    """``text`` as a monomial of ``known`` symbols."""
    pos, expect_name, sign, out = 0, True, 1, sympy.Integer(1)
    stripped = text.rstrip()
    if not stripped.strip():
        raise UsageError("an empty map parameter", rule="parameters", fix="e.g. B/N or C/W_ici")
    while pos < len(stripped):
        m = _TOKEN.match(stripped, pos)
        if m is None or (m["name"] is None) == expect_name:
            start = pos + (len(stripped[pos:]) - len(stripped[pos:].lstrip()))
            raise UsageError(
                f"cannot read the map parameter {text!r}",
                span=Span(start, start + 1),
                source=text,
                rule="parameters",
                fix="a product of powers of names: B/N, C/W_ici, F, M_X",
            )
        if m["name"] is not None:
            sym = known.get(m["name"])
            if sym is None:
                raise UsageError(
                    f"unknown name {m['name']!r} in the map parameter {text!r}; known: "
                    f"{', '.join(sorted(known))}",
                    span=Span(m.start("name"), m.end("name")),
                    source=text,
                    rule="parameters",
                )
            out *= sym ** (sign * int(m["pow"] or 1))
        else:
            sign = -1 if m["op"] == "/" else 1
        expect_name = not expect_name
        pos = m.end()
    if expect_name:
        raise UsageError(
            f"the map parameter {text!r} ends with an operator",
            span=Span(len(stripped) - 1, len(stripped)),
            source=text,
            rule="parameters",
        )
    if out.is_number:
        raise UsageError(f"the map parameter {text!r} is a constant", rule="parameters")
    return out


def parameters_text(text: str) -> tuple[str, ...]:
    """``"B/N,F"`` (CLI) as ``("B/N", "F")``."""
    parts = tuple(p.strip() for p in text.split(","))
    if not text.strip() or any(not p for p in parts):
        raise UsageError(
            f"--over takes parameters separated by commas, not {text!r}", fix="e.g. --over B/N,F"
        )
    return parts
