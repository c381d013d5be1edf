"""What every subcommand shares: help layout and examples, one reader of a PROGRAM argument (notation text,
``-`` for standard input, a file, or a model preset), file errors, the ``--overlap`` option.

Imports: the standard library, :mod:`shardalg.errors` and :mod:`shardalg.planning.overlap` (both light);
the command modules import it; :func:`program_text` imports the model presets when a word is not a file.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import textwrap
from collections.abc import Callable
from typing import Any

from shardalg.errors import FileError, UsageError
from shardalg.notation.programarg import PROGRAM_FORMS, holds_nothing, looks_like_notation
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
                out.append(
                    textwrap.fill(" ".join(lines), width, initial_indent=indent, subsequent_indent=indent)
                )
        return "\n\n".join(out)


def add_overlap(p: argparse.ArgumentParser, help: str, default: OverlapPolicy | None = None) -> None:
    """``--overlap POLICY``: every policy of :class:`~shardalg.planning.overlap.OverlapPolicy`, by name (the
    handler or the public function it calls turns the name into the policy)."""
    p.add_argument("--overlap", choices=OverlapPolicy.names(), default=default, help=help)


def add_keep(p: argparse.ArgumentParser) -> None:
    """``--keep-gathered`` / ``--gather-again``: force what training's backward does with the forward's gathered
    copies (``args.keep_gathered`` True or False); neither: None, each strategy takes the faster that fits."""
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--keep-gathered",
        dest="keep_gathered",
        action="store_true",
        default=None,
        help="training: the backward keeps the forward's gathered copies (memory) "
        "(default: the faster of keeping and gathering again that fits the cap, said)",
    )
    g.add_argument(
        "--gather-again",
        dest="keep_gathered",
        action="store_false",
        help="training: the backward gathers the forward's gathered copies again (time)",
    )


class _FormatOrJson(argparse.Action):
    """``--format FMT`` or ``--json``: stores the option's value, and refuses the other option given after
    it asking for another format (``--format json --json`` agree). (argparse's mutually exclusive groups
    compare a value with the default by identity, so in-process ``main(["--json", "--format", "text"])``
    would pass where the shell's would not.)"""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        fmt = "json" if self.nargs == 0 else values
        given = getattr(namespace, "_format_or_json", None)  # (option, the format it asked for)
        if given is not None and given[1] != fmt:
            raise argparse.ArgumentError(self, f"not allowed with argument {given[0]} (one output format)")
        namespace._format_or_json = (option_string, fmt)
        setattr(namespace, self.dest, True if self.nargs == 0 else values)


def add_format_or_json(
    p: argparse.ArgumentParser, choices: tuple[str, ...], json_help: str, format_help: str | None = None
) -> None:
    """``--format FMT`` and ``--json``, one or the other: ``--json --format latex`` is a usage error, never
    one of the two silently dropped (``args.format`` defaults to text, ``args.json`` to False)."""
    p.add_argument(
        "--format",
        choices=choices,
        default="text",
        action=_FormatOrJson,
        help=format_help or "output format (default: text)",
    )
    p.add_argument("--json", nargs=0, default=False, action=_FormatOrJson, help=json_help)


def json_text(obj: object, ensure_ascii: bool = False) -> str:
    """The ``--json`` output: ``obj`` indented by two, its text as written (``ensure_ascii``: escaped).
    :mod:`json` is imported here: a command run without ``--json`` (the README's ``plan`` and ``compare``)
    starts without it (~3 ms of a cold start)."""
    import json

    return json.dumps(obj, indent=2, ensure_ascii=ensure_ascii)


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


def program_text(arg: str) -> str:
    """The notation a PROGRAM (or EXPR) argument gives: the text itself; standard input for ``-``; the file it
    names; or, for a model preset's name (``llama-3-70b``), the program ``shardalg model show NAME`` prints.
    An empty program (nothing but blanks, separators such as ``;`` and comments), a file that cannot be read
    and a word that is none of these are errors (a FileError; a UsageError with the closest preset)."""
    if arg == "-":
        text = read_source(arg)
    elif looks_like_notation(arg):
        text = arg
    else:
        from shardalg.models.source import named_program  # the presets load only for a word

        text = named_program(arg)
    if holds_nothing(text) or ("[" not in text and _reads_as_nothing(text)):
        where = {"-": "standard input"}.get(arg, repr(arg))
        raise UsageError(
            f"the program is empty: {where} holds no notation",
            fix=f"give a PROGRAM: {PROGRAM_FORMS} (shardalg model list)",
        )
    return text


def _reads_as_nothing(text: str) -> bool:
    """Whether the parser reads ``text`` as a program with nothing in it (no statement, mesh, sizes or roles:
    LaTeX remarks and spacing only, ``\\text{(a remark)}``). Asked only of text without a ``[`` (every
    statement has a tensor), so a program is not parsed twice; a text that does not parse is not nothing
    (the command reports its error)."""
    from shardalg.errors import ShardalgError
    from shardalg.notation.parse import parse

    try:
        program = parse(text)
    except ShardalgError:
        return False
    return not program.statements and program.declares_nothing


def reset_stdin() -> None:
    """Forget that standard input was read (one command per call of ``main``)."""
    global _STDIN_READ
    _STDIN_READ = False


def file_error(err: OSError, doing: str = "use") -> FileError:
    """An OSError as one line: what we tried, on which file, and why it failed."""
    where = err.filename if err.filename is not None else "a file"
    why = err.strerror or (os.strerror(err.errno) if err.errno else str(err))
    return FileError(f"cannot {doing} {where}: {why}")


def no_made_up_sizes(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A command that answers with one plan per statement: where the cheapest plan depends on sizes not
    given, it asks for them (:func:`shardalg.planning.symbolic.strict`), never choosing by a made-up size."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        from shardalg.planning.symbolic import strict

        with strict():
            return handler(args)

    return run


def write_winner(result: Any, path: str, program_file: Callable[[Any, str], str], larger: str) -> None:
    """``--emit-program``: write a search's winner as a program file (``program_file`` writes its text); no
    winner (nothing fits the cap) is a UsageError naming ``larger`` (a mesh, a slice) and nothing is written."""
    if result.winner is None:
        raise UsageError(
            f"--emit-program {path}: no candidate fits the memory cap, so there is no winner to write",
            fix=f"raise --memory or use {larger}",
        )
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(program_file(result, path))
    except OSError as err:
        raise UsageError(f"--emit-program {path}: cannot write it ({err.strerror})") from None


def _seed(text: str) -> int:
    """``--seed``: a non-negative integer (numpy's generators take no negative seed)."""
    if not text.isdigit() or len(text) > 19:
        raise argparse.ArgumentTypeError(f"a seed is an integer from 0 to 2**63, not {text!r}")
    return int(text)


def add_seed(p: argparse.ArgumentParser) -> None:
    """``--seed N``: the random data of a numeric run (simulate, backward --check)."""
    p.add_argument("--seed", type=_seed, default=0, help="random seed for the data, 0 or more (default 0)")
