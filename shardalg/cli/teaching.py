"""Subcommands for teachers: ``proofs``, ``notes``, ``plot``, ``latex``.

    shardalg proofs [NAME ...] [--format text|latex|markdown|json]
    shardalg notes --out DIR
    shardalg plot PROGRAM_A PROGRAM_B --over D --range 128:65536 --mesh X=8 --sizes B=1024,F=8192 --out d.png
    shardalg latex EXPR [--mesh X=4,Y=2 --plan] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from shardalg.errors import UsageError

from .hwmesh import HW_HELP, add_hw, chip, mesh

EXIT_OK, EXIT_FAILED = 0, 1

_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9]*\Z")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("proofs", help="run the executable proofs and say which lemmas hold")
    p.add_argument("names", nargs="*", metavar="NAME", help="lemmas to run (default: all)")
    p.add_argument("--format", choices=("text", "latex", "markdown", "json"), default="text")
    p.set_defaults(handler=_proofs)

    p = sub.add_parser("notes", help="write the lecture notes (LaTeX and Markdown) generated from the engine")
    p.add_argument("--out", default="notes", metavar="DIR", help="output directory (default: ./notes)")
    p.set_defaults(handler=_notes)

    p = sub.add_parser("plot", help="draw two plans' costs against one parameter, crossover marked")
    p.add_argument("program_a", metavar="PROGRAM_A")
    p.add_argument("program_b", metavar="PROGRAM_B")
    p.add_argument("--over", required=True, metavar="DIM", help="the dim size swept along the x axis")
    p.add_argument("--range", required=True, metavar="LO:HI", help="sweep bounds, e.g. 128:65536")
    p.add_argument("--mesh", required=True, help="mesh, e.g. X=8 or X=4,Y=2")
    p.add_argument("--sizes", default="", help="the other dim sizes, e.g. B=1024,F=8192")
    add_hw(p, default="tpu-v5e", help=HW_HELP + " (default tpu-v5e)")
    p.add_argument("--regime", choices=("comms", "total"), default="total",
                   help="plot communication time only, or the plan's total time (default)")
    p.add_argument("--labels", default="", help="two labels, comma separated")
    p.add_argument("--out", required=True, help="picture file: .png, .pdf, .pgf or .svg")
    p.set_defaults(handler=_plot)

    p = sub.add_parser("latex", help="print an expression (or its plan) as LaTeX")
    p.add_argument("expr", metavar="EXPR")
    p.add_argument("--mesh", default=None, help="mesh, needed with --plan")
    p.add_argument("--sizes", default="", help="dim sizes, e.g. B=1024")
    p.add_argument("--plan", action="store_true", help="print the default plan instead of the expression")
    p.add_argument("--markdown", action="store_true", help="wrap as Markdown display math ($$...$$)")
    p.set_defaults(handler=_latex)


def parse_sizes(text: str) -> dict[str, int]:
    """``B=1024,F=8192`` to a dict; names must be identifiers and sizes positive integers."""
    out: dict[str, int] = {}
    for part in re.split(r"[,\s]+", text.strip()):
        if not part:
            continue
        m = re.fullmatch(r"([A-Za-z][A-Za-z0-9]*)=(\d+)", part)
        if m is None or int(m[2]) < 1:
            raise UsageError(f"bad size {part!r}: write NAME=POSITIVE_INTEGER, e.g. B=1024")
        out[m[1]] = int(m[2])
    return out


def parse_range(text: str) -> tuple[float, float]:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?(?:e\d+)?)\s*:\s*(\d+(?:\.\d+)?(?:e\d+)?)\s*", text)
    if m is None:
        raise UsageError(f"bad range {text!r}: write LO:HI with positive numbers, e.g. 128:65536")
    lo, hi = float(m[1]), float(m[2])
    if not 0 < lo < hi:
        raise UsageError(f"bad range {text!r}: need 0 < LO < HI")
    return lo, hi


def _proofs(args: argparse.Namespace) -> int:
    from shardalg.numeric.proofs import run_all

    lemmas = run_all(args.names or None)
    if args.format == "json":
        print(json.dumps([lemma.to_json() for lemma in lemmas], indent=2))
    elif args.format == "latex":
        print("\n".join(lemma.latex() for lemma in lemmas))
    elif args.format == "markdown":
        print("\n".join(lemma.markdown() for lemma in lemmas))
    else:
        for lemma in lemmas:
            print(lemma.text())
        held = sum(lemma.holds for lemma in lemmas)
        print(f"{held} of {len(lemmas)} lemmas hold")
    return EXIT_OK if all(lemma.holds for lemma in lemmas) else EXIT_FAILED


def _notes(args: argparse.Namespace) -> int:
    from shardalg.notes import write_notes

    written, problems = write_notes(Path(args.out))
    for path in written:
        print(path)
    for problem in problems:
        print(f"shardalg notes: {problem}", file=sys.stderr)
    return EXIT_OK if not problems else EXIT_FAILED


def _plot(args: argparse.Namespace) -> int:
    from shardalg.algebra.symbols import dim_size
    from shardalg.notes.costs import program_costs
    from shardalg.pictures.plot import crossover_plot

    if not _IDENT.match(args.over):
        raise UsageError(f"--over names a dim, like D; not {args.over!r}")
    lo, hi = parse_range(args.range)
    labels = [s.strip() for s in args.labels.split(",")] if args.labels else ["plan A", "plan B"]
    if len(labels) != 2 or not all(labels):
        raise UsageError("--labels takes two labels separated by a comma")
    sizes = parse_sizes(args.sizes)
    if args.over in sizes:
        raise UsageError(f"{args.over} is swept; do not also give it in --sizes")
    over = dim_size(args.over)
    cost_a, cost_b = program_costs(
        (args.program_a, args.program_b), mesh=mesh(args.mesh), sizes=sizes, hw=chip(args.hw), regime=args.regime
    )
    curves = crossover_plot(cost_a, cost_b, over=over, lo=lo, hi=hi, out=args.out, labels=labels)
    for c in curves.crossovers:
        print(f"crossover: {args.over} = {c.at:.6g} ({labels[c.cheaper_above]} cheaper above)")
    if not curves.crossovers:
        print(f"no crossover in {lo:g}..{hi:g}: {labels[curves.cheaper(lo)]} is cheaper throughout")
    print(args.out)
    return EXIT_OK


def _latex(args: argparse.Namespace) -> int:
    from shardalg.notation.parse import parse

    program = parse(args.expr)
    if args.plan:
        if args.mesh is None:
            raise UsageError("--plan needs --mesh, e.g. --mesh X=4,Y=2")
        from shardalg.planning.planner import plan

        if len(program.statements) != 1:
            raise UsageError("--plan takes one statement (an einsum or a resharding)")
        out = plan(program.statements[0], mesh=mesh(args.mesh), sizes=parse_sizes(args.sizes) or None).latex()
    else:
        from shardalg.notation.printing import latex

        node = program.statements[0] if len(program.statements) == 1 else program
        out = latex(node)
    print(f"$$\n{out}\n$$" if args.markdown else out)
    return EXIT_OK
