"""The notes as data: sections of blocks (prose, math, tables, lemma blocks), rendered to LaTeX and Markdown.

One model, two renderings, so the .tex and the .md say the same thing; every math string in the model can be
listed (:meth:`Document.fragments`) and checked on its own (KaTeX). Prose is plain text: notation and
formulas in it (``C{U_X}``, ``N^2/4``) are set as math by :mod:`.mathtext`, the rest escaped for TeX; a
:class:`Code` cell is shown as typed, in monospace.

The LaTeX uses the article class with lmodern, amsmath, amssymb, booktabs, graphicx and array only (all in any
TeX distribution's base or recommended set); a wide table wraps its long columns (:func:`ragged`) to fit the
text width.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from shardalg.notation.printing.symbology import latex_escape_prose

from .mathtext import MathPart, split_math

__all__ = [
    "Math",
    "Code",
    "Prose",
    "Display",
    "Table",
    "Raw",
    "Figure",
    "Section",
    "Document",
    "PREAMBLE",
    "tex_text",
    "md_text",
    "ragged",
]

PREAMBLE = r"""\documentclass[10pt]{article}
\usepackage[T1]{fontenc}
\usepackage{lmodern}
\usepackage{amsmath}
\usepackage{amssymb}
\usepackage{booktabs}
\usepackage{graphicx}
\usepackage{array}
\setlength{\textwidth}{6.3in}
\setlength{\oddsidemargin}{0.1in}
\setlength{\evensidemargin}{0.1in}
\setlength{\textheight}{8.9in}
\setlength{\topmargin}{-0.4in}
\setlength{\parindent}{0pt}
\setlength{\parskip}{0.5em}
\allowdisplaybreaks
\sloppy
\setlength{\emergencystretch}{3em}
\setlength{\tabcolsep}{4pt}
"""


@dataclass(frozen=True)
class Math:
    """Inline math (``$...$``) inside prose or a table cell."""

    latex: str


@dataclass(frozen=True)
class Code:
    """Text shown exactly as typed, in monospace (what a user types: ``A[I_X, J] -> A[I, J]``)."""

    text: str


def tex_text(text: str) -> str:
    """Running text as LaTeX: math runs in ``$...$`` (:func:`.mathtext.split_math`), the rest escaped."""
    return "".join(
        f"${p.latex}$" if isinstance(p, MathPart) else latex_escape_prose(p) for p in split_math(text)
    )


def md_text(text: str) -> str:
    """Running text as Markdown: math runs in ``$...$``, the rest as written."""
    return "".join(f"${p.latex}$" if isinstance(p, MathPart) else p for p in split_math(text))


def text_math(text: str) -> list[str]:
    """The math runs of running text, as LaTeX (for the KaTeX check)."""
    return [p.latex for p in split_math(text) if isinstance(p, MathPart)]


@dataclass(frozen=True)
class Prose:
    """A paragraph: plain-text pieces and inline math."""

    parts: tuple[str | Math | Code, ...]

    @classmethod
    def of(cls, *parts: str | Math | Code) -> Prose:
        return cls(tuple(parts))


@dataclass(frozen=True)
class Display:
    """Display math: one equation, or an ``aligned``/``align*`` block (``latex`` is the body)."""

    latex: str
    label: str = ""  # plain text shown before the math


def ragged(width: str) -> str:
    """A table column (for :attr:`Table.columns`) ``width`` wide, e.g. ``0.3\\linewidth``, whose cells wrap
    ragged right: a long cell breaks into lines instead of running past the text width."""
    return rf">{{\raggedright\arraybackslash}}p{{{width}}}"


@dataclass(frozen=True)
class Table:
    """A table whose cells are text or inline math."""

    header: tuple[str, ...]
    rows: tuple[tuple[str | Math | Code, ...], ...]
    caption: str = ""
    columns: str = ""  # LaTeX column spec; default all left-aligned
    size: str = "small"  # a LaTeX font size command for the table: small, footnotesize, scriptsize


@dataclass(frozen=True)
class Raw:
    """A block rendered elsewhere (a lemma, a derivation): its LaTeX, its Markdown, its math fragments."""

    latex: str
    markdown: str
    fragments: tuple[str, ...] = ()


@dataclass(frozen=True)
class Figure:
    """A picture with a numbered caption: ``pdf`` for the LaTeX notes, ``web`` (SVG) for Markdown and the web
    page, both file names in the notes' folder; the caption is running text (its math set as math)."""

    pdf: str
    web: str
    caption: str
    width: str = "0.8"  # of the text width


Block = Prose | Display | Table | Raw | Figure


@dataclass(frozen=True)
class Section:
    title: str
    blocks: tuple[Block, ...]
    subsections: tuple[Section, ...] = ()


@dataclass
class Document:
    title: str
    author: str
    sections: list[Section] = field(default_factory=list)
    appendix: list[Section] = field(default_factory=list)  # after \\appendix: lettered sections (the proofs)
    problems: list[str] = field(default_factory=list)  # sections that could not be generated, and why

    # ---- fragments -------------------------------------------------------------------------------

    def fragments(self) -> list[tuple[str, bool, str]]:
        """Every math string: (latex, display?, where it appears)."""
        out: list[tuple[str, bool, str]] = []
        for path, block in self._walk():
            if isinstance(block, Prose):
                out += [(p.latex, False, path) for p in block.parts if isinstance(p, Math)]
                out += [(m, False, path) for p in block.parts if isinstance(p, str) for m in text_math(p)]
            elif isinstance(block, Display):
                out.append((block.latex, True, path))
                out += [(m, False, path) for m in text_math(block.label)]
            elif isinstance(block, Table):
                out += [(c.latex, False, path) for row in block.rows for c in row if isinstance(c, Math)]
                out += [
                    (m, False, path)
                    for row in block.rows
                    for c in row
                    if isinstance(c, str)
                    for m in text_math(c)
                ]
            elif isinstance(block, Figure):
                out += [(m, False, path) for m in text_math(block.caption)]
            else:
                out += [(f, True, path) for f in block.fragments]
        return out

    def _walk(self) -> Iterator[tuple[str, Block]]:
        def walk(sec: Section, path: str) -> Iterator[tuple[str, Block]]:
            here = f"{path} / {sec.title}" if path else sec.title
            for b in sec.blocks:
                yield here, b
            for sub in sec.subsections:
                yield from walk(sub, here)

        for s in [*self.sections, *self.appendix]:
            yield from walk(s, "")

    # ---- LaTeX -----------------------------------------------------------------------------------

    def latex(self) -> str:
        lines = [
            PREAMBLE,
            rf"\title{{{tex_text(self.title)}}}",
            rf"\author{{{tex_text(self.author)}}}",
            r"\date{}",
            r"\begin{document}",
            r"\maketitle",
            r"\tableofcontents",
            "",
        ]
        for s in self.sections:
            lines.append(_section_latex(s, 0))
        if self.appendix:
            lines.append(r"\appendix")
            lines += [_section_latex(s, 0) for s in self.appendix]
        if self.problems:
            lines.append(r"\section*{Sections that could not be generated}")
            lines += [tex_text(p) + r"\par" for p in self.problems]
        lines.append(r"\end{document}")
        return "\n".join(lines) + "\n"

    # ---- Markdown --------------------------------------------------------------------------------

    def markdown(self) -> str:
        lines = [f"# {self.title}", "", f"*{self.author}*", ""]
        figures = [0]
        for s in self.sections:
            lines.append(_section_markdown(s, 2, figures))
        for k, s in enumerate(self.appendix):
            lines.append(
                _section_markdown(
                    Section(f"Appendix {chr(65 + k)}: {s.title}", s.blocks, s.subsections), 2, figures
                )
            )
        if self.problems:
            lines += ["## Sections that could not be generated", ""]
            lines += [f"- {p}" for p in self.problems]
        return "\n".join(lines) + "\n"


_LATEX_HEADINGS = (r"\section", r"\subsection", r"\subsubsection", r"\paragraph")


def _section_latex(sec: Section, depth: int) -> str:
    out = [f"{_LATEX_HEADINGS[min(depth, 3)]}{{{tex_text(sec.title)}}}", ""]
    out += [block_latex(b) for b in sec.blocks]
    out += [_section_latex(s, depth + 1) for s in sec.subsections]
    return "\n".join(out)


def _section_markdown(sec: Section, level: int, figures: list[int]) -> str:
    out = [f"{'#' * min(level, 6)} {md_text(sec.title)}", ""]
    for b in sec.blocks:
        if isinstance(b, Figure):
            figures[0] += 1
            out.append(figure_markdown(b, figures[0]))
        else:
            out.append(block_markdown(b))
    out += [_section_markdown(s, level + 1, figures) for s in sec.subsections]
    return "\n".join(out)


def _cell_latex(cell: str | Math | Code) -> str:
    if isinstance(cell, Code):
        return r"\texttt{" + latex_escape_prose(cell.text) + "}"
    return f"${cell.latex}$" if isinstance(cell, Math) else tex_text(cell)


def _cell_markdown(cell: str | Math | Code) -> str:
    if isinstance(cell, Code):
        return "`" + cell.text.replace("|", r"\|") + "`"
    text = f"${cell.latex}$" if isinstance(cell, Math) else md_text(cell)
    return text.replace("|", r"\|")


def block_latex(block: Block) -> str:
    """One block as LaTeX (a paragraph, a display, a table)."""
    if isinstance(block, Prose):
        return "".join(_cell_latex(p) for p in block.parts) + "\n"
    if isinstance(block, Display):
        label = tex_text(block.label) + "\n" if block.label else ""
        return f"{label}\\[\n{block.latex}\n\\]\n"
    if isinstance(block, Table):
        spec = block.columns or "l" * len(block.header)
        rows = [" & ".join(tex_text(h) for h in block.header) + r" \\", r"\midrule"]
        rows += [" & ".join(_cell_latex(c) for c in row) + r" \\" for row in block.rows]
        caption = f"\\par\\smallskip\\emph{{{tex_text(block.caption)}}}\n" if block.caption else ""
        body = "\n".join(rows)
        return (
            f"\\begin{{center}}\\{block.size}\n\\begin{{tabular}}{{{spec}}}\n\\toprule\n{body}\n"
            f"\\bottomrule\n\\end{{tabular}}\n{caption}\\end{{center}}\n"
        )
    if isinstance(block, Figure):
        return (
            f"\\begin{{figure}}[htbp]\n\\centering\n\\includegraphics[width={block.width}\\textwidth]{{{block.pdf}}}\n"
            f"\\caption{{{tex_text(block.caption)}}}\n\\end{{figure}}\n"
        )
    return block.latex


def figure_markdown(block: Figure, number: int) -> str:
    """A figure in Markdown: the SVG, then its numbered caption (LaTeX numbers it the same, in order)."""
    return f"![Figure {number}]({block.web})\n\n*Figure {number}: {md_text(block.caption)}*\n"


def block_markdown(block: Block) -> str:
    """One block as Markdown with ``$...$`` math."""
    if isinstance(block, Prose):
        return (
            "".join(
                f"${p.latex}$"
                if isinstance(p, Math)
                else f"`{p.text}`"
                if isinstance(p, Code)
                else md_text(p)
                for p in block.parts
            )
            + "\n"
        )
    if isinstance(block, Display):
        label = md_text(block.label) + "\n\n" if block.label else ""
        return f"{label}$$\n{block.latex}\n$$\n"
    if isinstance(block, Table):
        head = "| " + " | ".join(block.header) + " |"
        sep = "|" + "|".join("---" for _ in block.header) + "|"
        rows = ["| " + " | ".join(_cell_markdown(c) for c in row) + " |" for row in block.rows]
        caption = f"\n*{md_text(block.caption)}*\n" if block.caption else ""
        return "\n".join([head, sep, *rows]) + "\n" + caption
    return block.markdown
