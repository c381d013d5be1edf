"""What a PROGRAM argument is, told from its text alone: notation, or a word that names a file (``.sa``,
``.tex``, ``.txt``) or a model preset. The CLI and the Python API (:mod:`shardalg.models.source`) read it alike.

Imports: the standard library only, so a command's start does not load the presets.
"""

from __future__ import annotations

import re

__all__ = ["NOTATION", "PROGRAM_FILES", "PROGRAM_FORMS", "looks_like_notation"]

# A program is notation when it holds any of these (no file name or preset name does); else a word.
NOTATION = re.compile(r"[\s\[\](){};=,*@·→'\\]|->")
PROGRAM_FILES = (".sa", ".tex", ".txt")  # what a file name that does not exist is recognised by
PROGRAM_FORMS = "notation text, - for standard input, a file (.sa, .tex, .txt) or a model preset"


def looks_like_notation(text: str) -> bool:
    """Whether ``text`` is notation rather than the name of a file or a preset."""
    return bool(NOTATION.search(text)) or not text
