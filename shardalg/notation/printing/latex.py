"""LaTeX as the book writes it, rendering in KaTeX and parsing back:
``A[I_{XY}, J] \\{U_{Z}\\}``, ``A[I, J_X] \\cdot_{\\text{LOCAL}} B[J_X, K] \\rightarrow C[I, K] \\{U_X\\}``,
``\\textbf{AllGather}_{XY}(A[I_{XY}, J]) \\rightarrow A[I, J]``.

Words of more than one letter are set upright with ``\\text{...}`` (``\\text{In}``, ``W_{\\text{in}}``,
``I_{\\text{data},\\text{model}}``). A program of several lines is an ``aligned`` block with ``&`` before each
arrow; a plan's reasons follow each row as ``\\quad\\text{(reason)}``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from shardalg.errors import UsageError

from .base import Node
from .symbology import LATEX, latex_escape_text
from .text import TextPrinter

__all__ = ["LatexPrinter", "latex"]

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
        return opening + self._print(node) + closing

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
        return self._upright(name)

    def _dtype(self, dtype: Any) -> str:
        return rf"\text{{{dtype.value}}}"

    def _op(self, name: str) -> str:
        return rf"\textbf{{{name}}}"

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
        return super()._reason(latex_escape_text(reason))

    def _print_Plan(self, plan: Node) -> str:
        self._aligned = len(plan.steps) > 1
        try:
            return self._block([self._print(s) for s in plan.steps])
        finally:
            self._aligned = False


def latex(node: object, **settings: Any) -> str:
    """``node`` in LaTeX (``mode="inline"`` or ``"display"`` adds ``$`` or ``$$``)."""
    return LatexPrinter(**settings).doprint(node)
