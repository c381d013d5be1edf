"""``shardalg search --choose-degrees``: the whole-model search over a slice's degrees (pipeline axis and
microbatches, pods over DCN, the factoring of the torus sides) with the search space's dimension maps inside
(:mod:`shardalg.search.degrees`), as text or JSON, the winner written as a program with ``--emit-program``.

    shardalg search llama-3-70b --slice v5p-8960 --choose-degrees --sizes B=1280,T=4096 --remat block
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from shardalg.errors import UsageError

from . import EXIT_OK
from .common import write_winner

# flags of the inner search that the degrees search does not take, each with why
_REFUSED = (
    (
        "mesh",
        "--mesh: the degrees search chooses the factoring of the slice (drop it, or drop --choose-degrees)",
    ),
    ("per_statement", "--per-statement"),
    ("zero", "--zero"),
    ("precision", "--precision"),
    ("keep_gathered", "--keep-gathered"),
)


def search_degrees_cli(args: argparse.Namespace, bar: Any = None) -> int:
    """The handler of ``search --choose-degrees`` (called by :mod:`.search`, with its progress bar over the
    degree points: called with (done, total), closed at the end)."""
    from shardalg.search.degrees import search_degrees

    if not args.slice:
        raise UsageError("--choose-degrees chooses the degrees of a real slice", fix="add --slice v5p-8960")
    for name, flag in _REFUSED:
        if getattr(args, name, None) not in (None, False):
            raise UsageError(f"--choose-degrees does not take {flag}")
    if args.mode == "infer":
        raise UsageError("--choose-degrees searches training (a pipeline's ticks are forward and backward)")
    if args.format != "text":
        raise UsageError("--choose-degrees prints text or --json, not --format latex")
    if args.top is not None and (isinstance(args.top, bool) or args.top < 1):
        raise UsageError(f"--top takes a positive number of rows, not {args.top!r}")
    from shardalg.models.program import refuse_sizes_it_lacks
    from shardalg.notation.parse import parse
    from shardalg.notation.syntax import Program

    from .common import program_text

    program = parse(program_text(args.program))
    if isinstance(program, Program):  # a size for a dim the program lacks would be ignored without a word
        refuse_sizes_it_lacks(program, args.sizes)
    try:
        result = search_degrees(
            program,
            args.slice,
            args.sizes,
            args.hw,
            args.memory,
            args.optimizer,
            args.remat,
            args.overlap,
            progress=bar,
        )
    finally:
        if bar is not None:
            bar.close()
    if (
        result.floored.count
    ):  # the maps the memory floor pruned, on stderr too: the table holds what was priced
        print(f"shardalg: note: floor: {result.floored.text(result.cap)}", file=sys.stderr)
    top = 10 if args.top is None else args.top
    if args.emit_program is not None:
        _emit(result, args.emit_program)
    if args.json:
        print(json.dumps(result.to_json(top, args.explain), indent=2, ensure_ascii=False))
    else:
        print(result.text(top, args.explain))
        if args.emit_program is not None:
            print(f"note: the winner's program written to {args.emit_program}")
    return EXIT_OK


def _emit(result: Any, path: str) -> None:
    """Write the winner as a program file (:func:`.common.write_winner`)."""
    from shardalg.search.degreestext import program_file

    write_winner(result, path, program_file, "a larger slice")
