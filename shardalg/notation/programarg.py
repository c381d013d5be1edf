"""What a PROGRAM argument is, told from its text alone: notation, or a word that names a file (``.sa``,
``.tex``, ``.txt``) or a model preset. The CLI and the Python API (:mod:`shardalg.models.source`) read it alike.

Imports: the standard library only, so a command's start does not load the presets.
"""

from __future__ import annotations

import re

__all__ = ["NOTATION", "PROGRAM_FILES", "PROGRAM_FORMS", "holds_nothing", "looks_like_notation"]

# A program is notation when it holds any of these (no file name or preset name does); else a word.
NOTATION = re.compile(r"[\s\[\](){};=,*@·→'\\]|->")
PROGRAM_FILES = (".sa", ".tex", ".txt")  # what a file name that does not exist is recognised by
PROGRAM_FORMS = "notation text, - for standard input, a file (.sa, .tex, .txt) or a model preset"
# What the grammar (grammar/shardalg.lark) reads as no statement at all: blanks, statement separators (`;`, a
# newline, LaTeX's `\\`, math delimiters, aligned environments), comments (`#`, LaTeX's unescaped `%`) and
# LaTeX spacing; text made only of these parses to a program with nothing in it.
_NOTHING = re.compile(
    r"(?:\s|;|\\\\|\$|\\\[|\\\]|&|\\[ ,;:!]|#[^\n]*|(?<!\\)%[^\n]*"
    r"|\\(?:begin|end)\{(?:aligned|align\*?|gathered|equation\*?|split)\}"
    r"|\\(?:qquad|quad|displaystyle|textstyle)(?![A-Za-z]))*"
)


def looks_like_notation(text: str) -> bool:
    """Whether ``text`` is notation rather than the name of a file or a preset."""
    return bool(NOTATION.search(text)) or not text


def holds_nothing(text: str) -> bool:
    """Whether ``text`` holds no notation: only blanks, separators, comments and LaTeX spacing (``''``,
    ``';'``, ``'$$ $$'``, ``'# a comment'``), which parse to an empty program."""
    return _NOTHING.fullmatch(text) is not None
