"""Any engine object as a LaTeX fragment or as Markdown with ``$...$`` math, for pasting into notes.

    >>> from shardalg.notes.fragments import to_latex, to_markdown
    >>> to_markdown(parse_statement("A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]"))
    '$A[I_X, J] \\\\cdot B[J, K_Y] \\\\rightarrow C[I_X, K_Y]$'

Expressions and tensors are inline math; plans, programs, derivations and lemmas are display blocks;
tables and sections are text-mode LaTeX (or Markdown tables and headings).
"""

from __future__ import annotations

from typing import Any

import sympy

from shardalg.errors import UsageError
from shardalg.notation.plan import Plan
from shardalg.notation.syntax import Node, Program
from shardalg.numeric.proofs import Lemma, sym_latex

from .document import Block, Display, Prose, Raw, Section, Table, block_latex, block_markdown

__all__ = ["to_latex", "to_markdown"]


def _math(obj: Any) -> tuple[str, bool] | None:
    """(LaTeX math, display?) for objects that are math; None otherwise."""
    if isinstance(obj, Program):
        return obj.latex(), True
    if isinstance(obj, Node):
        return obj.latex(), False
    if isinstance(obj, Plan):
        return obj.latex(), True
    if isinstance(obj, sympy.Basic):
        return sym_latex(obj), False
    for attr in ("latex",):  # Derivation, PlanCost, BackwardProgram: display blocks with .latex()
        method = getattr(obj, attr, None)
        if callable(method) and not isinstance(obj, Lemma):
            return method(), True
    return None


def to_latex(obj: Any) -> str:
    """The LaTeX of ``obj``: math objects without delimiters; lemmas, tables and sections as text-mode LaTeX."""
    if isinstance(obj, Lemma):
        return obj.latex()
    if isinstance(obj, Prose | Display | Table | Raw):
        return block_latex(obj)
    if isinstance(obj, Section):
        return "\n".join(block_latex(b) for b in obj.blocks)
    found = _math(obj)
    if found is None:
        raise UsageError(f"no LaTeX form for {type(obj).__name__}")
    return found[0]


def to_markdown(obj: Any) -> str:
    """Markdown with ``$...$`` (inline) or ``$$...$$`` (display) math."""
    if isinstance(obj, Lemma):
        return obj.markdown()
    if isinstance(obj, Prose | Display | Table | Raw):
        return block_markdown(obj)
    if isinstance(obj, Section):
        blocks: tuple[Block, ...] = obj.blocks
        return f"## {obj.title}\n\n" + "\n".join(block_markdown(b) for b in blocks)
    found = _math(obj)
    if found is None:
        raise UsageError(f"no Markdown form for {type(obj).__name__}")
    latex, display = found
    return f"$$\n{latex}\n$$" if display else f"${latex}$"
