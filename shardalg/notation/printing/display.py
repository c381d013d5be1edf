"""How objects show themselves in a REPL and a notebook: one short line for ``repr``, HTML tables.

    >>> short("Plan", "AllGather_X(B); A[I_X, J]·B[J, K] -> C[I_X, K]")
    '<Plan AllGather_X(B); A[I_X, J]·B[J, K] -> C[I_X, K]>'
    >>> seconds_text(1.26e-3), seconds_text(2.8e-4), seconds_text(45.0)
    ('1.26 ms', '280 µs', '45 s')

``repr`` of a shardalg object is ``<Kind what it is in the notation>``, one line where it can be, so a list of
plans or a result holding a plan stays readable; ``_repr_pretty_`` (IPython) prints the same, and tables
(ranked plans, a cost breakdown, a legality report, the chips) also have ``_repr_html_`` built here.

A result that is a report (memory, step, search, a chain's search, a strategy map) derives from :class:`Shown`:
it says what it is in one line (``summary``) and as one :class:`Table`; ``repr``, ``_repr_html_`` and a
``_repr_latex_`` that KaTeX and MathJax render (an ``array`` of ``\\text`` cells, not a ``tabular``) all come
from those two.

    >>> bytes_both(21_816_657_408)
    '21.8 GB (20.3 GiB)'

Imports: the standard library (:mod:`html` on first use) and :mod:`.symbology` (the one text escaper).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .symbology import latex_escape_text

__all__ = [
    "short",
    "html_table",
    "html_escape",
    "latex_table",
    "pretty_text",
    "seconds_text",
    "bytes_text",
    "bytes_both",
    "Table",
    "Shown",
]

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


def html_escape(text: str) -> str:
    """Text made safe inside HTML (``html.escape``). :mod:`html` is imported here, on a notebook's first
    table: a command never shows HTML, and the module costs its cold start ~1.5 ms."""
    import html

    return html.escape(text)


def html_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    caption: str | None = None,
    code: Sequence[int] = (),
) -> str:
    """An HTML table; every cell is escaped; columns listed in ``code`` are set in monospace."""
    esc = html_escape

    def cell(k: int, v: object) -> str:
        text = esc(str(v))
        return f"<td><code>{text}</code></td>" if k in code else f"<td>{text}</td>"

    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(cell(k, v) for k, v in enumerate(row)) + "</tr>" for row in rows)
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def bytes_both(n: float) -> str:
    """A byte count in decimal and binary units, each labelled: ``21.8 GB (20.3 GiB)``; under a kilobyte,
    ``512 B``. GB is 10^9 bytes (chip datasheets, memory caps), GiB 2^30 (what allocators report)."""
    if abs(n) < 1000:
        return f"{n:.0f} B"
    dec = next((u, s) for u, s in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)) if abs(n) >= s)
    binary = next(
        ((u, s) for u, s in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)) if abs(n) >= s), ("KiB", 2**10)
    )
    return f"{n / dec[1]:.3g} {dec[0]} ({n / binary[1]:.3g} {binary[0]})"


@dataclass(frozen=True)
class Table:
    """A report as a table: column headers, rows of cell text, a caption, the columns set in monospace (code in
    the notation) and notes shown under it."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""
    code: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()


def latex_table(table: Table) -> str:
    r"""``table`` as display math that KaTeX and MathJax render: an ``array`` of ``\text`` cells (a ``tabular``
    is not math, and KaTeX has no ``\multicolumn``), with the caption above it and the notes below it as the
    rows of a ``gathered`` block."""

    def cell(v: str) -> str:
        return rf"\text{{{latex_escape_text(v)}}}"

    head = " & ".join(rf"\textbf{{{latex_escape_text(h)}}}" for h in table.headers)
    body = " \\\\\n".join(" & ".join(cell(str(v)) for v in row) for row in table.rows)
    array = f"\\begin{{array}}{{{'l' * len(table.headers)}}}\n{head} \\\\ \\hline\n{body}\n\\end{{array}}"
    rows = [cell(table.caption)] if table.caption else []
    rows += [array, *(cell(n) for n in table.notes)]
    return "$$\\begin{gathered}\n" + " \\\\\n".join(rows) + "\n\\end{gathered}$$"


class Shown:
    """What a report needs to show itself: ``summary()`` (one line, for ``repr``) and ``table()``; ``repr``,
    IPython's pretty printer, ``_repr_html_`` and ``_repr_latex_`` come from them. A dataclass that derives
    from it is declared with ``repr=False``, so the dataclass does not write its field dump over ``repr``."""

    def summary(self) -> str:
        raise NotImplementedError(f"{type(self).__name__} must say what it is in one line")

    def table(self) -> Table:
        raise NotImplementedError(f"{type(self).__name__} must say what it is as a table")

    def __repr__(self) -> str:
        return short(type(self).__name__, self.summary())

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        pretty_text(self, p, cycle)

    def _repr_html_(self) -> str:
        t = self.table()
        notes = "".join(f"<p>{html_escape(n)}</p>" for n in t.notes)
        return html_table(t.headers, t.rows, t.caption, t.code) + notes

    def _repr_latex_(self) -> str:
        return latex_table(self.table())
