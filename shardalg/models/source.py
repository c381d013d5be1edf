"""Where a program comes from: notation text, a file (``.sa``, ``.tex``, ``.txt``) or a model preset's name.

The CLI's PROGRAM argument and the Python API read a program the same way, so ``sa.memory("llama-3-70b",
mesh="X=64", ...)`` and ``sa.memory("l70.sa", ...)`` work as ``shardalg memory llama-3-70b`` does; a word that
is none of these is refused with the nearest preset ("did you mean").

    >>> from shardalg.models.source import program_source
    >>> program_source("A[I_X, J] -> A[I, J]")
    'A[I_X, J] -> A[I, J]'

Imports: :mod:`.presets` and :mod:`.expand` (for a preset's program), the notation's printer and
:mod:`~shardalg.notation.programarg`, the errors.
"""

from __future__ import annotations

import os
from pathlib import Path

from shardalg.errors import FileError, UsageError, closest
from shardalg.notation.printing import render
from shardalg.notation.programarg import PROGRAM_FILES, PROGRAM_FORMS, looks_like_notation

from . import presets
from .expand import expand

__all__ = ["named_program", "program_source"]


def named_program(word: str) -> str:
    """The program of a file or model preset called ``word``: the file's text, or the program ``shardalg model
    show NAME`` prints. A file that cannot be read is a FileError; a word that is neither, a UsageError that
    names the closest preset."""
    path = Path(word).expanduser()
    if path.is_file() or path.is_dir():
        try:
            return path.read_text(encoding="utf-8")
        except OSError as err:
            where = err.filename if err.filename is not None else "a file"
            why = err.strerror or (os.strerror(err.errno) if err.errno else str(err))
            raise FileError(f"cannot read {where}: {why}") from None
        except UnicodeDecodeError as err:
            raise FileError(f"cannot read {word}: not UTF-8 text (byte at offset {err.start})") from None
    if word.lower() in presets.PRESETS:
        return render(expand(presets.get(word), "train", None, None), "text")
    if path.suffix in PROGRAM_FILES or os.sep in word or "/" in word:
        raise FileError(
            f"cannot read {word}: no such file", fix=f"PROGRAM is {PROGRAM_FORMS} (shardalg model list)"
        )
    near = closest(word, presets.names())
    guess = f"did you mean {near}? " if near else ""
    raise UsageError(
        f"{word!r} is not notation, a file or a model preset",
        fix=f"{guess}PROGRAM is {PROGRAM_FORMS}: {', '.join(presets.names())}",
    )


def program_source(text: str) -> str:
    """``text`` itself when it is notation, else the program of the file or preset it names."""
    return text if looks_like_notation(text) else named_program(text)
