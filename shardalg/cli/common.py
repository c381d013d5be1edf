"""What every subcommand shares: help layout and examples, reading ``-`` from standard input, file errors,
the ``--overlap`` option.

Imports: the standard library, :mod:`shardalg.errors` and :mod:`shardalg.planning.overlap` (both light);
the command modules import it.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap

from shardalg.errors import FileError, UsageError
from shardalg.planning.overlap import OverlapPolicy

# shtab's marker for "complete a file name here" (shtab.FILE), written out so shtab stays optional
FILE_COMPLETION = {"bash": "_shtab_compgen_files", "zsh": "_files", "tcsh": "f"}
DIR_COMPLETION = {"bash": "_shtab_compgen_dirs", "zsh": "_files -/", "tcsh": "d"}


class HelpFormatter(argparse.HelpFormatter):
    """Wraps prose paragraphs; keeps indented lines (examples, code) as they are written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out: list[str] = []
        for block in textwrap.dedent(text).strip("\n").split("\n\n"):
            lines = block.split("\n")
            if any(line.startswith(" ") for line in lines) or lines[0].endswith(":"):
                out.append("\n".join(indent + line for line in lines))
            else:
                out.append(textwrap.fill(" ".join(lines), width, initial_indent=indent, subsequent_indent=indent))
        return "\n\n".join(out)


def add_overlap(p: argparse.ArgumentParser, help: str, default: OverlapPolicy | None = None) -> None:
    """``--overlap POLICY``: every policy of :class:`~shardalg.planning.overlap.OverlapPolicy`, by name (the
    handler or the public function it calls turns the name into the policy)."""
    p.add_argument("--overlap", choices=OverlapPolicy.names(), default=default, help=help)


def examples(*commands: str) -> str:
    """An epilog: each command on its own line after ``$``, as the user would type it."""
    return "examples:\n" + "\n".join(f"  $ {c}" for c in commands)


_STDIN_READ = False


def read_source(text: str) -> str:
    """The argument itself, or standard input when it is ``-`` (which can be read once per command), decoded
    strictly in the input's encoding: bytes that are not text are a UsageError naming the first bad byte."""
    global _STDIN_READ
    if text != "-":
        return text
    if _STDIN_READ:
        raise UsageError("only one argument may be - (standard input is read once)")
    _STDIN_READ = True
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:
        return sys.stdin.read()
    data = buffer.read()
    encoding = getattr(sys.stdin, "encoding", None) or "utf-8"
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as err:
        raise UsageError(
            f"standard input is not {encoding} text: byte 0x{data[err.start]:02x} at offset {err.start} "
            f"({err.reason})",
            fix=f"write the notation in {encoding}",
        ) from None


def reset_stdin() -> None:
    """Forget that standard input was read (one command per call of ``main``)."""
    global _STDIN_READ
    _STDIN_READ = False


def file_error(err: OSError, doing: str = "use") -> FileError:
    """An OSError as one line: what we tried, on which file, and why it failed."""
    where = err.filename if err.filename is not None else "a file"
    why = err.strerror or (os.strerror(err.errno) if err.errno else str(err))
    return FileError(f"cannot {doing} {where}: {why}")
