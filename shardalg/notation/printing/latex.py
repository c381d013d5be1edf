"""LaTeX as the book writes it, rendering in KaTeX and parsing back:
``A[I_{XY}, J] \\{U_{Z}\\}``, ``A[I, J_X] \\cdot_{\\text{LOCAL}} B[J_X, K] \\rightarrow C[I, K] \\{U_X\\}``,
``\\textbf{AllGather}_{XY}(A[I_{XY}, J]) \\rightarrow A[I, J]``.

Words of more than one letter are set upright with ``\\text{...}`` (``\\text{In}``, ``W_{\\text{in}}``,
``I_{\\text{data},\\text{model}}``). A program of several lines is an ``aligned`` block with ``&`` before each
arrow. A plan's reasons quote the notation as math (``\\mathrm{ReduceScatter}_{X,K}``, ``C\\{U_{X}\\}``,
``\\{X, Y{:}(2)2\\}``, ``\\rightarrow``) and set the words as text; in a block each reason takes the rows under
its statement, at most about :data:`REASON_WIDTH` characters a row, so a plan stays within a page; a single
step's follows it after ``\\quad``. Every row of a reason is one ``\\hbox{...}`` (:data:`REASON_BOX`), which
the notation never uses otherwise: the grammar skips it as a remark whatever its words (``LATEX_REASON``), so
a printed plan parses back to its statements, and pdflatex, KaTeX and MathJax set it as text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar

from shardalg.errors import UsageError

from .base import Node
from .symbology import LATEX, latex_escape_text
from .text import TextPrinter

__all__ = ["LatexPrinter", "axis_latex", "latex", "reason_latex", "REASON_WIDTH", "REASON_BOX"]

# A reason's characters per row in a block (a plan of several steps), so a reason stays on a page.
REASON_WIDTH = 44
# The box each row of a reason is set in: text in pdflatex (a primitive), KaTeX and MathJax (both base), with
# math between ``$``; no name of the notation is written with it, so the grammar reads it as a remark.
REASON_BOX = r"\hbox"

# The characters of the notation inside brackets and braces (``K_{Y:(1)2}``, ``Shift_{X,+1}``), and those with
# braced groups one deep (``C[I, K_{Y:(1)2}]``, ``{U_{data,model}}``): nothing that math would take for a command,
# a comment or a column (``\ % & # $``), and braces that balance, so a reason's box always closes.
_CH = r"[A-Za-z0-9_ ,:()'+.\-]"
_IN = rf"(?:{_CH}|\{{{_CH}*\}})*"
# Notation inside a reason's words: a name with a subscript, dims or an unreduced mark (``ReduceScatter_{X,K}``,
# ``C[I, K_Y]``, ``C{U_X, U_Y}``), a bare mark or set of axes (``{U_X}``, ``{X,Y:(2)2}``), an arrow or a
# comparison. A word before a set of axes is a word (``over {Y:(1)2}``): only a mark (``U_``, ``I_``) joins it.
_NOTATION = re.compile(
    rf"[A-Za-z][A-Za-z0-9']*(?:_(?:\{{{_CH}*\}}|[A-Za-z0-9]+))?(?:\[{_IN}\])?(?: ?\{{ ?[UI]_{_IN}\}})?"
    rf"|\{{{_IN}\}}|->|<=|>=|[<>]"
)
_RELATIONS = {"->": r"\rightarrow", "<=": r"\le", ">=": r"\ge", "<": "<", ">": ">"}
_PIECE = re.compile(
    rf"(?P<name>[A-Za-z][A-Za-z0-9']*)?(?:_(?:\{{(?P<bsub>{_CH}*)\}}|(?P<sub>[A-Za-z0-9]+)))?"
    rf"(?:\[(?P<dims>{_IN})\])?(?: ?\{{(?P<mark>{_IN})\}})?"
)
_MARK = re.compile(r"\s*[UI]_")  # an item of an unreduced or invariant mark, not an axis


def _word(word: str) -> str:
    word = word.strip()
    return word if len(word) == 1 else rf"\mathrm{{{word}}}"


def _items(text: str) -> list[str]:
    """``text`` split at its commas outside braces (``I_{X,Y}, K`` is two items), each stripped, none empty."""
    items, depth, at = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            items.append(text[at:i])
            at = i + 1
    items.append(text[at:])
    return [item.strip() for item in items if item.strip()]


def axis_latex(axis: str, upright: Callable[[str], str] = _word) -> str:
    """One axis in LaTeX, a name of more than one letter ``upright`` (``\\mathrm`` by default, which needs no
    amsmath); a sub-axis with its colon braced so TeX sets it as punctuation, not a relation (``Y{:}(1)2``,
    ``\\mathrm{data}{:}(1)2``)."""
    parent, colon, factor = axis.strip().partition(":")
    return upright(parent) + "{:}" + factor.replace(" ", "") if colon else upright(parent)


def _named(text: str) -> str:
    r"""``K_YX`` as ``K_{YX}``, ``ReduceScatter_{X,K}`` as ``\mathrm{ReduceScatter}_{X,K}``, ``W_in`` as
    ``W_{\mathrm{in}}``, ``K_{Y:(1)2}`` as ``K_{Y{:}(1)2}``."""
    name, _, sub = text.strip().partition("_")
    sub = sub.strip().removeprefix("{").removesuffix("}").replace(" ", "")
    if not sub:
        return _word(name)
    if ":" in sub:  # sub-axes among the items: each item on its own (``_{X,Y{:}(2)2}``)
        return _word(name) + "_{" + ",".join(axis_latex(a) for a in _items(sub)) + "}"
    return _word(name) + "_{" + (rf"\mathrm{{{sub}}}" if any(c.islower() for c in sub) else sub) + "}"


def _math(token: str) -> str:
    """One piece of notation from a reason as math: names of more than one letter upright, subscripts braced,
    dims in brackets, the unreduced mark in escaped braces, a set of axes in escaped braces."""
    if token in _RELATIONS:
        return _RELATIONS[token]
    m = _PIECE.fullmatch(token)
    if m is None:  # the pattern that found it takes only these shapes
        return rf"\text{{{latex_escape_text(token)}}}"
    out = ""
    if m["name"]:
        sub = m["bsub"] if m["bsub"] is not None else m["sub"]
        out = _named(m["name"] + (f"_{sub}" if sub else ""))
    if m["dims"] is not None:
        out += "[" + ", ".join(_named(d) for d in _items(m["dims"])) + "]"
    if m["mark"] is not None:
        items = _items(m["mark"])
        if all(_MARK.match(u) for u in items):
            out += r"\{" + ", ".join(_named(u) for u in items) + r"\}"
        else:  # a set of axes, as a reason names the axes a step works over: ``{X,Y:(2)2}``
            out += r"\{" + ", ".join(axis_latex(a) for a in items) + r"\}"
    return out


def reason_pieces(reason: str) -> list[tuple[bool, str]]:
    """A reason split into (is notation, text) pieces, in order."""
    pieces: list[tuple[bool, str]] = []
    at = 0
    for m in _NOTATION.finditer(reason):
        token = m[0]
        if not any(c in token for c in "_[{<>") and token not in _RELATIONS:
            continue  # a plain word
        if m.start() > at:
            pieces.append((False, reason[at : m.start()]))
        pieces.append((True, token))
        at = m.end()
    if at < len(reason):
        pieces.append((False, reason[at:]))
    return pieces


def _render(pieces: list[tuple[bool, str]]) -> str:
    """One row of a reason: one :data:`REASON_BOX` holding the words, escaped, and the notation as math between
    ``$`` (math inside a text box renders alike in pdflatex, KaTeX and MathJax; and the parser skips the box
    as a remark, whatever it holds)."""
    body = "".join(f"${_math(t)}$" if math else latex_escape_text(t) for math, t in pieces)
    return REASON_BOX + "{" + body + "}"


# Punctuation that stays on the row of what it follows, so no row of a reason opens with it.
_CLINGS = tuple(",.;:)")


def reason_latex(reason: str, width: int | None = None) -> list[str]:
    """A plan step's reason as LaTeX math, in parentheses: words in ``\\text``, the notation as math. With
    ``width``, broken at spaces between words into rows of at most about ``width`` characters of the reason."""
    pieces = reason_pieces("(" + " ".join(reason.split()) + ")")
    if width is None:
        return [_render(pieces)]
    rows: list[list[tuple[bool, str]]] = [[]]
    used = 0
    for math, text in pieces:
        if math:
            if used + len(text) > width and used:
                rows.append([])
                used = 0
            rows[-1].append((True, text))
            used += len(text)
            continue
        for word in re.split(r"(?<= )", text):
            if used + len(word) > width and used and word.strip() and not word.startswith(_CLINGS):
                rows.append([])
                used = 0
            rows[-1].append((False, word))
            used += len(word)
    return [_render(r) for r in rows if r]


_MODES = {"plain": ("", ""), "inline": ("$", "$"), "display": ("$$", "$$")}


class LatexPrinter(TextPrinter):
    style: ClassVar[int] = LATEX
    _default_settings: ClassVar[dict[str, Any]] = {"reasons": True, "bold_names": False, "mode": "plain"}

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self._aligned = False
        if self._settings["mode"] not in _MODES:
            raise UsageError(f"mode is one of {', '.join(_MODES)}, not {self._settings['mode']!r}")

    def doprint(self, node: object) -> str:
        opening, closing = _MODES[self._settings["mode"]]
        return opening + super().doprint(node) + closing

    # ------------------------------------------------------------------ words
    @staticmethod
    def _upright(word: str) -> str:
        return word if len(word) == 1 else rf"\text{{{word}}}"

    def _tensor_name(self, name: str) -> str:
        stem = name.rstrip("'")
        primes = name[len(stem) :]
        base, _, sub = stem.partition("_")
        out = rf"\mathbf{{{base}}}" if self._settings["bold_names"] else self._upright(base)
        if sub:
            out += "_{" + (sub if sub.isdigit() else self._upright(sub)) + "}"
        return out + primes

    def _dim_word(self, name: str) -> str:
        return self._upright(name)

    def _axis_word(self, name: str) -> str:
        return axis_latex(name, self._upright)

    def _dtype(self, dtype: Any) -> str:
        return rf"\text{{{dtype.value}}}"

    def _op(self, name: str) -> str:
        return rf"\textbf{{{name}}}"

    def _flag(self, word: str) -> str:
        return rf"\text{{{word}}}"

    def _fn(self, name: str) -> str:
        return rf"\mathrm{{{name}}}"

    def _sub(self, items: list[str]) -> str:
        body = ",".join(items)
        return "_" + body if len(body) == 1 else "_{" + body + "}"

    # ------------------------------------------------------------------ layout
    def _arrow(self) -> str:
        return self.g("aligned_arrow") if self._aligned else self.g("arrow")

    def _block(self, rows: list[str]) -> str:
        if len(rows) == 1:
            return rows[0]
        return "\\begin{aligned}\n" + self.g("line_sep").join(rows) + "\n\\end{aligned}"

    def _print_Program(self, prog: Node) -> str:
        roles = len(self._role_lines(prog.roles)) if prog.roles is not None else 0
        self._aligned = len(prog.statements) + (prog.mesh is not None) + bool(prog.sizes) + roles > 1
        try:
            return self._block(self._program_lines(prog))
        finally:
            self._aligned = False

    def _reason(self, reason: str) -> str:
        if not reason or not self._settings["reasons"]:
            return ""
        if not self._aligned:
            return r" \quad " + reason_latex(reason)[0]
        # in a block, the reason goes on the rows under its statement, indented from the arrow
        return "".join(" \\\\\n& \\qquad " + row for row in reason_latex(reason, REASON_WIDTH))

    def _print_Plan(self, plan: Node) -> str:
        # a block when there are several steps, or one whose reason needs more than a row
        long = self._settings["reasons"] and any(len(s.reason or "") > REASON_WIDTH for s in plan.steps)
        self._aligned = len(plan.steps) > 1 or long
        try:
            rows = [self._print(s) for s in plan.steps]
            if self._aligned and len(rows) == 1:
                return "\\begin{aligned}\n" + rows[0] + "\n\\end{aligned}"
            return self._block(rows)
        finally:
            self._aligned = False


def latex(node: object, **settings: Any) -> str:
    """``node`` in LaTeX (``mode="inline"`` or ``"display"`` adds ``$`` or ``$$``)."""
    return LatexPrinter(**settings).doprint(node)
