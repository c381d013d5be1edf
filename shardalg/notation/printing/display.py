"""How objects show themselves in a REPL and a notebook: one short line for ``repr``, HTML tables.

    >>> short("Plan", "AllGather_X(B); A[I_X, J]·B[J, K] -> C[I_X, K]")
    '<Plan AllGather_X(B); A[I_X, J]·B[J, K] -> C[I_X, K]>'
    >>> seconds_text(1.26e-3), seconds_text(2.8e-4), seconds_text(45.0)
    ('1.26 ms', '280 µs', '45 s')

``repr`` of a shardalg object is ``<Kind what it is in the notation>``, one line where it can be, so a list of
plans or a result holding a plan stays readable; ``_repr_pretty_`` (IPython) prints the same, and tables
(ranked plans, a cost breakdown, a legality report, the chips) also have ``_repr_html_`` built here.

Imports: the standard library only.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

__all__ = ["short", "html_table", "pretty_text", "seconds_text", "bytes_text"]

_LIMIT = 160


def short(kind: str, body: str, limit: int = _LIMIT) -> str:
    """``<kind body>`` on one line; a body longer than ``limit`` is cut at a word and says how much is left."""
    flat = " ".join(body.split())
    if len(flat) > limit:
        cut = flat.rfind(" ", 0, limit)
        cut = cut if cut > limit // 2 else limit
        flat = f"{flat[:cut]} ... (+{len(flat) - cut} characters)"
    return f"<{kind} {flat}>" if flat else f"<{kind}>"


def seconds_text(seconds: float) -> str:
    """A time to three significant digits in the unit that keeps it between 1 and 1000 (s, ms, µs, ns)."""
    seconds = float(f"{seconds:.3g}")  # rounded first, so 999.9e-6 reads 1 ms
    if abs(seconds) >= 1000:
        return f"{seconds:,.0f} s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale or seconds == 0:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def bytes_text(text: str) -> str:
    """A byte count with thousands separators when it is a whole number (``16,777,216``); a formula as is."""
    return f"{int(text):,}" if text.isdigit() else text


def pretty_text(obj: Any, p: Any, cycle: bool) -> None:
    """IPython's ``_repr_pretty_``: the object's one-line repr."""
    p.text(repr(obj) if not cycle else f"<{type(obj).__name__} ...>")


def html_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    caption: str | None = None,
    code: Sequence[int] = (),
) -> str:
    """An HTML table; every cell is escaped; columns listed in ``code`` are set in monospace."""
    esc = html.escape

    def cell(k: int, v: object) -> str:
        text = esc(str(v))
        return f"<td><code>{text}</code></td>" if k in code else f"<td>{text}</td>"

    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(cell(k, v) for k, v in enumerate(row)) + "</tr>" for row in rows)
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
