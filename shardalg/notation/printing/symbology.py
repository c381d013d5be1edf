"""Every glyph the printers emit, as (ascii, unicode, latex) triples in one table, and the one
precedence table that decides brackets (sympy's ``pretty_symbology`` and ``precedence``).

The three spellings of each entry parse back to the same thing (``grammar/shardalg.lark``).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "Glyph",
    "GLYPHS",
    "ROLE_KEYWORDS",
    "ASCII",
    "UNICODE",
    "LATEX",
    "PRECEDENCE",
    "INFIX",
    "precedence",
    "latex_escape_text",
    "latex_escape_prose",
]

ASCII, UNICODE, LATEX = 0, 1, 2


class Glyph(NamedTuple):
    ascii: str
    unicode: str
    latex: str


GLYPHS: dict[str, Glyph] = {
    # operators
    "product": Glyph(" * ", " · ", r" \cdot "),
    "product_tight": Glyph("*", "·", r"\cdot"),  # before a subscript: A *_D B
    "arrow": Glyph(" -> ", " → ", r" \rightarrow "),
    # elementwise operators: `*` is the einsum product, so the elementwise product is `.*` / `⊙` / `\odot`
    "add": Glyph(" + ", " + ", " + "),
    "subtract": Glyph(" - ", " − ", " - "),
    "multiply": Glyph(" .* ", " ⊙ ", r" \odot "),
    "aligned_arrow": Glyph(" -> ", " → ", r" &\rightarrow "),
    "colon": Glyph(": ", ": ", ": "),
    # brackets
    "dims_open": Glyph("[", "[", "["),
    "dims_close": Glyph("]", "]", "]"),
    "marks_open": Glyph("{", "{", r" \{"),
    "marks_close": Glyph("}", "}", r"\}"),
    "paren_open": Glyph("(", "(", "("),
    "paren_close": Glyph(")", ")", ")"),
    "sub_open": Glyph("_{", "_{", "_{"),
    "sub_close": Glyph("}", "}", "}"),
    "sep": Glyph(", ", ", ", ", "),
    "item_sep": Glyph(",", ",", ","),
    "piece_sep": Glyph(" ", " ", r"\,"),
    # marks inside {...}
    "unreduced": Glyph("U", "U", "U"),
    "invariant": Glyph("I", "I", "I"),
    "local": Glyph("LOCAL", "LOCAL", r"\text{LOCAL}"),
    # keywords
    "mesh": Glyph("mesh ", "mesh ", r"\text{mesh}\; "),
    "where": Glyph("where ", "where ", r"\text{where}\; "),
    "bind": Glyph("=", "=", "="),
    # role declarations (whole models), in the order a program prints them
    "params": Glyph("params ", "params ", r"\text{params}\; "),
    "embeddings": Glyph("embeddings ", "embeddings ", r"\text{embeddings}\; "),
    "saved": Glyph("saved ", "saved ", r"\text{saved}\; "),
    "kvcache": Glyph("kvcache ", "kvcache ", r"\text{kvcache}\; "),
    "tokens": Glyph("tokens ", "tokens ", r"\text{tokens}\; "),
    "layers": Glyph("layers ", "layers ", r"\text{layers}\; "),
    # program layout
    "line_sep": Glyph("\n", "\n", " \\\\\n"),
    "comment": Glyph("  # ", "  # ", r" \quad\hbox{("),  # LaTeX: a reason's box (printing/latex.py)
    "comment_end": Glyph("", "", ")}"),
}

# The role declarations that list tensors, in printing order (each is a field of Roles and a glyph above).
ROLE_KEYWORDS: tuple[str, ...] = ("params", "embeddings", "saved", "kvcache")

# Binding strength, by node class name: a child printed inside a parent of higher precedence gets parentheses.
PRECEDENCE: dict[str, int] = {
    "Arrow": 10,
    "Sum": 15,  # elementwise + and - (an Apply of add or subtract)
    "Product": 20,  # also the elementwise product (an Apply of multiply)
    "Collective": 30,  # always printed with its argument in parentheses: an atom
    "Apply": 30,  # a function: its operands in parentheses (infix operators: see INFIX)
    "Tensor": 40,
}


# the infix elementwise operators (by the op's value) and the precedence they print at
INFIX: dict[str, str] = {"add": "Sum", "subtract": "Sum", "multiply": "Product"}


def precedence(node: object) -> int:
    op = getattr(node, "op", None)
    if type(node).__name__ == "Apply" and op is not None and op.value in INFIX:
        return PRECEDENCE[INFIX[op.value]]
    for cls in type(node).__mro__:
        if cls.__name__ in PRECEDENCE:
            return PRECEDENCE[cls.__name__]
    return max(PRECEDENCE.values())


# Characters that must be escaped inside \text{...}. Each is set as a little math ($...$) so that it renders
# alike in pdflatex, KaTeX and MathJax without its textmacros extension (which shows \_ or \% in \text{}
# literally, but renders math inside \text{} in every configuration).
_TEXT_ESCAPES: dict[str, str] = {
    "\\": r"$\backslash$",
    "{": r"$\{$",
    "}": r"$\}$",
    "$": r"$\$$",
    "&": r"$\&$",
    "#": r"$\#$",
    "%": r"$\%$",
    "_": r"$\_$",
    "^": r"$\hat{\ }$",
    "~": r"$\sim$",
    "<": "$<$",  # pdflatex's text font sets < and > as ¡ and ¿
    ">": "$>$",
    "\n": " ",
    # Unicode math glyphs that reasons use: set as math, since neither KaTeX's nor pdflatex's text mode has them.
    "·": r"$\cdot$",
    "→": r"$\rightarrow$",
    "ᵀ": r"$^{T}$",
    "×": r"$\times$",
    "≤": r"$\le$",
    "≥": r"$\ge$",
    "≠": r"$\ne$",
    "−": "-",
    "⊗": r"$\otimes$",
}


# The same characters in a document's running text (pdflatex's text mode, not inside math): text commands.
_PROSE_ESCAPES: dict[str, str] = {
    **_TEXT_ESCAPES,
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "$": r"\$",
    "&": r"\&",
    "#": r"\#",
    "%": r"\%",
    "_": r"\_",
    "^": r"\textasciicircum{}",
    "~": r"\textasciitilde{}",
    # < and > as typed: the notes set running text in T1, which has them (a \text inside math escapes them)
    "<": "<",
    ">": ">",
}


def latex_escape_prose(text: str) -> str:
    """``text`` made safe for a LaTeX document's running text (a paragraph, a heading, a table cell)."""
    return "".join(_PROSE_ESCAPES.get(ch, ch) for ch in text)


def latex_escape_text(text: str) -> str:
    """``text`` made safe for ``\\text{...}`` in pdflatex, KaTeX and MathJax (with or without textmacros)."""
    return "".join(_TEXT_ESCAPES.get(ch, ch) for ch in text)
