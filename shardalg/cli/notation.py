"""``shardalg parse | check | shape``: read the notation, judge it, measure it.

    shardalg parse "A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]" --format latex
    shardalg check "A[I_X, J] · B[J, K_X]" --mesh X=4,Y=2
    shardalg shape "A: fp32[I_XY, J] where I=1024, J=4096" --mesh X=8,Y=2 --json

EXPR may be ``-`` to read it from standard input. ``--sizes`` is strictly ``NAME=INT,NAME=INT``.
"""

from __future__ import annotations

import argparse
import sys

from . import EXIT_ILLEGAL, EXIT_OK
from .common import examples, json_text, program_text
from .hwmesh import mesh

FORMATS = ("text", "unicode", "latex", "json")


def _dump(obj: object) -> str:
    return obj if isinstance(obj, str) else json_text(obj)


def _parse(args: argparse.Namespace) -> int:
    from shardalg.notation import printing
    from shardalg.notation.parse import parse

    program = parse(program_text(args.expr))
    out = printing.to_json(program) if args.format == "json" else getattr(printing, args.format)(program)
    print(_dump(out))
    return EXIT_OK


def _check(args: argparse.Namespace) -> int:
    from shardalg.algebra.context import as_sizes
    from shardalg.algebra.legality import check, notes
    from shardalg.errors import ParseError, ShapeMismatch
    from shardalg.notation.parse import parse
    from shardalg.notation.printing import text
    from shardalg.planning.programs import check_program

    source = program_text(args.expr)
    try:
        program = parse(source)
    except ParseError as err:  # --json answers in JSON whatever was wrong (and the error is said on stderr)
        if args.json:
            print(_dump({"legal": False, "violations": [err.to_json()], "notes": []}))
        raise
    found = [v.to_error() for v in check(program, mesh(args.mesh or None), args.sizes)]
    if not found and len(program.statements) > 1 and (args.mesh or program.mesh is not None):
        try:  # what each statement reads: a layout the program holds the value in (as backward reads it)
            check_program(program, mesh(args.mesh or None), as_sizes(args.sizes))
        except ShapeMismatch as err:
            found = [err]
    noted = [] if found else notes(program, mesh(args.mesh or None), args.sizes)
    if args.json:
        print(
            _dump(
                {
                    "legal": not found,
                    "violations": [e.to_json() for e in found],
                    "notes": [v.to_error().to_json() for v in noted],
                }
            )
        )
    if found:
        print("\n".join(str(e) for e in found), file=sys.stderr)
        return EXIT_ILLEGAL
    if not args.json:
        print("\n".join([f"legal: {text(program)}", *(v.note() for v in noted)]))
    return EXIT_OK


def _shape(args: argparse.Namespace) -> int:
    from shardalg.algebra.shape import shape
    from shardalg.notation.parse import parse

    info = shape(parse(program_text(args.expr)), mesh(args.mesh or None), args.sizes)
    print(_dump(info.to_json()) if args.json else str(info))
    return EXIT_OK


def _common(p: argparse.ArgumentParser, mesh_help: str) -> None:
    p.add_argument("expr", metavar="EXPR", help="the notation (quote it), or - to read standard input")
    p.add_argument("--mesh", metavar="X=4,Y=2", help=mesh_help)
    p.add_argument("--sizes", metavar="I=1024,J=4096", help="dim sizes, NAME=INT separated by commas")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "parse",
        help="parse the notation and print it back",
        description="Parse EXPR (ASCII, Unicode or the book's LaTeX) and print it back in one format; printing is "
        "the inverse of parsing.",
        epilog=examples(
            r"shardalg parse 'A[I_{XY}, J] \cdot B[J, K] \to C[I_{XY}, K]{U_Z}' --format latex",
            "echo 'A[I_X, J]' | shardalg parse - --format json",
        ),
    )
    p.add_argument("expr", metavar="EXPR", help="the notation (quote it), or - to read standard input")
    p.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    p.set_defaults(handler=_parse)

    p = subparsers.add_parser(
        "check",
        help="check the legality rules",
        description="Check EXPR against the legality rules; exit 1 and list the violations when it is illegal.",
        epilog=examples('shardalg check "A[I_X, J] · B[J, K_X] -> C[I, K]" --mesh X=4,Y=2'),
    )
    _common(p, "the mesh; enables the unknown-axis and divisibility rules")
    p.add_argument("--json", action="store_true", help='print {"legal": ..., "violations": [...]} as JSON')
    p.set_defaults(handler=_check)

    p = subparsers.add_parser(
        "shape",
        help="global and local shape, bytes, replication of a tensor",
        description="Measure one sharded tensor on a mesh. A tensor without a dtype is taken as bf16.",
        epilog=examples('shardalg shape "A: int8[I_XY, J]" --mesh X=2,Y=8,Z=2 --sizes I=128,J=2048 --json'),
    )
    _common(p, "the mesh (required unless EXPR declares one: 'mesh X=4, Y=2; A[I_X, J]')")
    p.add_argument("--json", action="store_true", help="print the JSON documented in the README")
    p.set_defaults(handler=_shape)
