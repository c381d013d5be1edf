"""The grammar file (``grammar/shardalg.lark``, shipped in the wheel as ``shardalg/grammar``) and its LALR
parser: :mod:`.lalr`, generated from the grammar by lark's standalone generator and committed, so parsing
imports no lark and keeps no cache. ``python -m shardalg.notation.grammar`` regenerates it (lark needed then
only); a test regenerates it and compares, so a grammar edit without regeneration fails.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from shardalg.cache import Kind, memoized

from .lalr import Lark_StandAlone

if TYPE_CHECKING:
    from .lalr import Lark

START = {"program": "start", "tensor": "tensor_start", "statement": "statement_start"}  # kind -> start rule
GENERATED = Path(__file__).with_name("lalr.py")
# lark's standalone generator and its options: every start rule, spans on the tree (propagate_positions),
# None for an absent optional part (maybe_placeholders); the lexer is lark's contextual one (its default).
GENERATOR = (
    "-m",
    "lark.tools.standalone",
    "--propagate_positions",
    "--maybe_placeholders",
    *(a for s in START.values() for a in ("-s", s)),
)
HEADER = '''\
# Generated file: do not edit. `python -m shardalg.notation.grammar` remakes it from grammar/shardalg.lark
# (python {command} grammar/shardalg.lark).
"""The LALR parser of ``grammar/shardalg.lark``: lark's standalone parser, generated (see the lines above)."""

'''


def grammar_path() -> Path:
    """Where the grammar file is: inside the installed package, else in the source checkout, else where
    ``importlib.resources`` finds it (imported only then: it costs a cold start several ms)."""
    here = Path(__file__).resolve().parents
    for candidate in (here[1] / "grammar" / "shardalg.lark", here[2] / "grammar" / "shardalg.lark"):
        if candidate.is_file():  # an installed wheel, then a source checkout
            return candidate
    try:
        from importlib.resources import files

        found = files("shardalg.grammar").joinpath("shardalg.lark")
        if found.is_file():
            return Path(str(found))
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError, TypeError):
        pass
    return here[2] / "grammar" / "shardalg.lark"


def grammar_text() -> str:
    return grammar_path().read_text(encoding="utf-8")


@memoized(Kind.TABLE)
def lalr_parser() -> Lark:
    """The one LALR parser of the process (the generated module's tables, loaded on first use)."""
    parser: Lark = Lark_StandAlone()
    return parser


# The generator's line for tables it would compress (``-c``, which we do not pass: the tables are literals).
# pickle costs a cold start ~3 ms, and only lark's grammar cache and ``Lark.save``/``load`` use it, which the
# standalone parser never runs; the generated module says where the line went.
PICKLE_LINE = "import pickle, zlib, base64"
PICKLE_NOTE = (
    f"# {PICKLE_LINE}: left out by shardalg.notation.grammar (tables are literals; no cache, save or load)"
)


def unpickled(generated: str) -> str:
    """The generator's output without its import of pickle, zlib and base64 (see :data:`PICKLE_LINE`)."""
    lines = generated.split("\n")
    if lines.count(PICKLE_LINE) != 1:
        raise RuntimeError(
            f"lark's standalone output has {lines.count(PICKLE_LINE)} lines {PICKLE_LINE!r}, not 1"
        )
    return "\n".join(PICKLE_NOTE if line == PICKLE_LINE else line for line in lines)


def generate(out: Path = GENERATED) -> None:
    """Write the standalone parser of the grammar to ``out``, with lark's generator in a new process (lark's
    table construction orders states by set iteration, so two runs may number them differently); written
    under a temporary name in the same folder, then renamed over ``out``."""
    import subprocess

    made = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    env = {**os.environ, "PYTHONUTF8": "1"}
    try:
        subprocess.run(
            [sys.executable, *GENERATOR, str(grammar_path()), "-o", str(made)], env=env, check=True
        )
        made.write_text(
            HEADER.format(command=" ".join(GENERATOR)) + unpickled(made.read_text(encoding="utf-8")),
            encoding="utf-8",
        )
        os.replace(
            made, out
        )  # a process importing the parser meanwhile reads the old module or the new, whole
    finally:
        made.unlink(missing_ok=True)


if __name__ == "__main__":
    generate()
