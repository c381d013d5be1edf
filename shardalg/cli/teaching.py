"""Subcommands for teachers: ``proofs``, ``notes``, ``plot``, ``latex``.

shardalg proofs [NAME ...] [--format text|latex|markdown|json]
shardalg notes [--sections ch3,ch5,ch6,ch7] [--pdf | --tex] --out DIR
shardalg plot PROGRAM_A PROGRAM_B --over D --range 128:65536 --mesh X=8 --sizes B=1024,F=8192 --out d.png
shardalg latex EXPR [--mesh X=4,Y=2 --plan] [--markdown]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from shardalg.errors import UsageError

from .common import DIR_COMPLETION, FILE_COMPLETION, examples, file_error, json_text, program_text
from .hwmesh import HW_HELP, add_hw, chip, mesh, priced_mesh

EXIT_OK, EXIT_FAILED = 0, 1

_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9]*\Z")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "proofs",
        help="run the executable proofs and say which lemmas hold",
        description="Run the executable proofs (one lemma a file in proofs/), each built with the engine and "
        "checked with sympy and on numbers; exit 1 when a lemma fails.",
        epilog=examples("shardalg proofs alltoall_quarter", "shardalg proofs --format markdown > proofs.md"),
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="lemmas to run (default: all)")
    p.add_argument(
        "--format",
        choices=("text", "latex", "markdown", "json"),
        default="text",
        help="output format (default: text)",
    )
    p.set_defaults(handler=_proofs)

    p = sub.add_parser(
        "notes",
        help="write the lecture notes (LaTeX, Markdown, PDF or a web page), chapter by chapter of the book",
        description="Write lecture notes computed by shardalg, chapter by chapter of the book: ch3 (the notation, "
        "the four cases, the collectives, the transposes, derivations and the chapter's questions), ch5 (the "
        "training strategies: where each is compute-bound, the strategy map and its picture, a search), ch6 "
        "(LLaMA 3 70B: memory by part and step time), ch7 (inference: a search under a memory cap); the proofs "
        "follow in an appendix. Written as a LaTeX article (shardalg-notes.tex, for pdflatex) and Markdown with "
        "$...$ math (shardalg-notes.md), with the figures when matplotlib is installed; or (--format html) a "
        "static web page, index.html, with the project's own KaTeX beside it (npm ci in the checkout installs "
        "it), which renders with no network. DIR is created if its parent exists. --pdf runs pdflatex as often "
        "as the contents need (two or three runs: the first writes the contents, the next print them); --tex "
        "prints the LaTeX source instead of writing files.",
        epilog=examples(
            "shardalg notes --sections ch3,ch5,ch6,ch7 --pdf --out notes",
            "shardalg notes --sections ch3 --tex > ch3.tex",
            "shardalg notes --format html --out site",
        ),
    )
    out = p.add_argument("--out", default="notes", metavar="DIR", help="output directory (default: ./notes)")
    out.complete = DIR_COMPLETION  # type: ignore[attr-defined]
    p.add_argument(
        "--format",
        choices=("latex", "html"),
        default="latex",
        help="latex: shardalg-notes.tex and .md (default); html: index.html and katex/",
    )
    p.add_argument(
        "--sections",
        default=None,
        metavar="ch3,ch5,ch6,ch7",
        help="the chapters, comma separated: ch3, ch5, ch6, ch7 (default: all); the proofs always follow",
    )
    p.add_argument(
        "--pdf",
        action="store_true",
        help="also compile shardalg-notes.pdf with pdflatex, run as often as the contents need",
    )
    p.add_argument(
        "--tex",
        action="store_true",
        help="print the LaTeX source to standard output and write no file (figures are left out)",
    )
    p.set_defaults(handler=_notes)

    p = sub.add_parser(
        "plot",
        help="draw two plans' costs against one parameter, crossover marked",
        description="Price PROGRAM_A and PROGRAM_B on a chip, sweep one dim size along the x axis and draw both "
        "times, the crossover marked, with the title and labels in the picture. Prints the crossover (or says "
        "there is none in the range), the file written, and a LaTeX figure that includes it under a caption "
        "(chip, mesh, sizes) for the document to number.",
        epilog=examples(
            'shardalg plot "X[B, D_X] ·_LOCAL Y[D_X, F] -> Z[B, F]{U_X}; AllReduce_X(Z[B, F]{U_X}) -> Z[B, F]" '
            '"X[B, D] · AllGather_X(Y[D_X, F]) -> Z[B, F]" --over D --range 128:65536 --mesh X=8 '
            '--sizes B=1024,F=8192 --title "Question 4" --out q4.png'
        ),
    )
    p.add_argument(
        "program_a", metavar="PROGRAM_A", help="the first program (quote it), or - for standard input"
    )
    p.add_argument(
        "program_b", metavar="PROGRAM_B", help="the second program (quote it), or - for standard input"
    )
    p.add_argument(
        "--over", required=True, metavar="DIM", help="the dim whose size is swept along the x axis"
    )
    p.add_argument("--range", required=True, metavar="LO:HI", help="sweep bounds, e.g. 128:65536")
    p.add_argument("--mesh", required=True, metavar="X=8", help="the mesh, e.g. X=8 or X=4,Y=2")
    p.add_argument(
        "--sizes", default="", metavar="B=1024,F=8192", help="the other dim sizes, NAME=INT by commas"
    )
    add_hw(p, default="tpu-v5e", help=HW_HELP + " (default tpu-v5e)")
    p.add_argument(
        "--regime",
        choices=("comms", "total"),
        default="total",
        help="plot communication time only, or the plan's total time (default)",
    )
    p.add_argument(
        "--labels",
        default="",
        metavar="A,B",
        help="two labels, comma separated (default: each plan's collectives in the notation)",
    )
    p.add_argument(
        "--title", default=None, help="the figure's title (default: which plan is cheaper, and when)"
    )
    p.add_argument("--json", action="store_true", help="print the crossovers and the picture's file as JSON")
    out = p.add_argument(
        "--out", required=True, metavar="FILE", help="picture file: .png, .pdf, .pgf or .svg"
    )
    out.complete = FILE_COMPLETION  # type: ignore[attr-defined]
    p.set_defaults(handler=_plot)

    p = sub.add_parser(
        "latex",
        help="print an expression (or its plan) as LaTeX",
        description="Print EXPR as a LaTeX fragment (amsmath), or with --plan its default plan as an aligned "
        "display (where the cheapest plan depends on sizes not given, the plans not beaten at every size, with "
        "plan's note in % comments and on stderr); --markdown wraps it in $$...$$ for Markdown, KaTeX and "
        "MathJax.",
        epilog=examples(
            'shardalg latex "A[I_X, J] · B[J, K] -> C[I_X, K]"',
            'shardalg latex "A[I, J_X] · B[J_X, K] -> C[I, K_X]" --mesh X=4 --plan --markdown',
        ),
    )
    p.add_argument("expr", metavar="EXPR", help="the notation (quote it), or - to read standard input")
    p.add_argument(
        "--mesh", default=None, metavar="X=4,Y=2", help="the mesh for --plan (unless EXPR declares one)"
    )
    p.add_argument("--sizes", default="", metavar="B=1024", help="dim sizes, NAME=INT separated by commas")
    p.add_argument("--plan", action="store_true", help="print the default plan instead of the expression")
    p.add_argument("--markdown", action="store_true", help="wrap as Markdown display math ($$...$$)")
    p.set_defaults(handler=_latex)


def parse_sizes(text: str) -> dict[str, int]:
    """``B=1024,F=8192`` to a dict, read as every ``--sizes`` is (:func:`~shardalg.algebra.context.as_sizes`:
    names, positive integers, each name once); blank text is no sizes."""
    from shardalg.algebra.context import as_sizes

    return as_sizes(text) if text.strip() else {}


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
        print(json_text([lemma.to_json() for lemma in lemmas], ensure_ascii=True))
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
    from shardalg.notes import TEX_NAME, build_notes, parse_sections, write_notes

    chosen = parse_sections(args.sections)
    if args.tex:
        if args.pdf or args.format != "latex":
            raise UsageError("--tex prints the LaTeX source: it goes without --pdf and --format html")
        doc = build_notes(None, chosen)
        print(doc.latex(), end="")
        for problem in doc.problems:
            print(f"error: {problem} [notes]", file=sys.stderr)
        return EXIT_OK if not doc.problems else EXIT_FAILED
    if args.pdf and args.format != "latex":
        raise UsageError("--pdf compiles the LaTeX notes: it goes with --format latex, not html")
    if args.pdf:
        from shardalg.notes.pdf import require_pdflatex

        require_pdflatex()  # before the notes are built
    try:
        written, problems = write_notes(Path(args.out), args.format, chosen)
    except OSError as err:
        raise file_error(err, "write the notes to") from None
    for path in written:
        print(path)
    if args.pdf:
        from shardalg.notes.pdf import compile_pdf

        pdf, runs = compile_pdf(Path(args.out) / TEX_NAME)
        print(f"{pdf} (pdflatex ran {runs} times: until the contents list stopped changing)")
    for problem in problems:
        print(f"error: {problem} [notes]", file=sys.stderr)
    return EXIT_OK if not problems else EXIT_FAILED


def _plot(args: argparse.Namespace) -> int:
    from shardalg.algebra.symbols import dim_size
    from shardalg.notes.costs import program_costs, program_label
    from shardalg.pictures.plot import crossover_plot, latex_figure

    if not _IDENT.match(args.over):
        raise UsageError(f"--over names a dim, like D; not {args.over!r}")
    lo, hi = parse_range(args.range)
    programs = (program_text(args.program_a), program_text(args.program_b))
    labels = (
        [s.strip() for s in args.labels.split(",")] if args.labels else [program_label(p) for p in programs]
    )
    if len(labels) != 2 or not all(labels):
        raise UsageError("--labels takes two labels separated by a comma")
    if labels[0] == labels[1]:
        labels = [f"A: {labels[0]}", f"B: {labels[1]}"]
    sizes = parse_sizes(args.sizes)
    if args.over in sizes:
        raise UsageError(f"{args.over} is swept; do not also give it in --sizes")
    hw = chip(args.hw)
    the_mesh = priced_mesh(args.mesh, hw, *programs)
    over = dim_size(args.over)
    cost_a, cost_b = program_costs(programs, mesh=the_mesh, sizes=sizes, hw=hw, regime=args.regime)
    what = "communication time" if args.regime == "comms" else "total time"
    given = ", ".join(f"{k} = {v}" for k, v in sizes.items())
    hw_name = getattr(hw, "name", args.hw)
    caption = f"{what} on {hw_name}; mesh {the_mesh.text().removeprefix('mesh ')}" + (
        f"; {given}" if given else ""
    )
    title = args.title if args.title is not None else f"{what} against ${args.over}$"
    try:
        curves = crossover_plot(
            cost_a, cost_b, over=over, lo=lo, hi=hi, out=args.out, labels=labels, title=title
        )
    except OSError as err:
        raise file_error(err, "write the picture") from None
    if args.json:
        data = {
            "over": args.over,
            "range": [lo, hi],
            "labels": labels,
            "hw": hw_name,
            "mesh": the_mesh.text().removeprefix("mesh "),
            "sizes": sizes,
            "regime": args.regime,
            "title": title,
            "caption": caption,
            "latex_figure": latex_figure(args.out, caption),
            "out": args.out,
            "crossovers": [
                {"at": c.at, "time": c.cost, "cheaper_above": labels[c.cheaper_above]}
                for c in curves.crossovers
            ],
            "exact": [str(e) for e in curves.exact],
            "cheaper_throughout": None if curves.crossovers else labels[curves.cheaper(lo)],
        }
        print(json_text(data))
        return EXIT_OK
    for c in curves.crossovers:
        print(f"crossover: {args.over} = {c.at:.6g} ({labels[c.cheaper_above]} cheaper above)")
    if not curves.crossovers:
        print(f"no crossover in {lo:g}..{hi:g}: {labels[curves.cheaper(lo)]} is cheaper throughout")
    print(args.out)
    print("the figure for a LaTeX document (its caption is not drawn in the picture: \\caption numbers it):")
    print(latex_figure(args.out, caption))
    return EXIT_OK


def _latex(args: argparse.Namespace) -> int:
    from shardalg.notation.parse import parse

    program = parse(program_text(args.expr))
    if (
        args.plan
    ):  # planned as plan plans it: the program's mesh and where-sizes count, --mesh and --sizes win
        said, blocks = _latex_plans(program, args)
        for line in said:
            print(f"shardalg: note: {line.strip()}", file=sys.stderr)
        if args.markdown:
            notes = [f"`{line.strip()}`" if line.startswith("  ") else line for line in said]
            parts = ["\n".join(notes)] if notes else []
            parts += [(f"{head}\n\n" if head else "") + f"$$\n{body}\n$$" for head, body in blocks]
            print("\n\n".join(parts))
        else:
            lines = [f"% {line.strip()}" for line in said]
            for head, body in blocks:
                lines += [f"% {head}"] if head else []
                lines.append(body)
            print("\n".join(lines))
        return EXIT_OK
    from shardalg.notation.printing import latex

    alone = len(program.statements) == 1 and program.declares_nothing
    out = latex(program.statements[0] if alone else program)  # a mesh, sizes or roles are printed too
    print(f"$$\n{out}\n$$" if args.markdown else out)
    return EXIT_OK


def _latex_plans(program: object, args: argparse.Namespace) -> tuple[list[str], list[tuple[str, str]]]:
    """What ``latex --plan`` says and prints, as ``plan`` does: one plan, or where the cheapest depends on
    sizes not given, the plans not beaten at every size (or the cheapest where each says) with ``plan``'s
    note; a cut search is said too. Returns the notes and (heading, aligned LaTeX) per plan shown; the
    heading is empty where one plan is the cheapest at every size."""
    from shardalg.notation.printing import render
    from shardalg.planning.planner import plan, plans, prepare
    from shardalg.planning.redistribute import plan_bytes

    problem = prepare(program, mesh(args.mesh) if args.mesh else None, parse_sizes(args.sizes) or None)
    found = plans(problem)
    if not found:
        raise UsageError(f"no plan: the search found no plan before a limit cut it: {found.note}")
    choice = found.choice if found.choice is not None and not found.choice.decided else None
    said = [] if found.complete else [f"incomplete: {found.note}"]
    if choice is None:
        return said, [("", plan(problem).latex())]
    said += choice.lines()
    blocks = []
    for piece in choice.contenders:
        where = piece.condition(choice.symbol)
        mark = f"the cheapest where {where}" if where else "not beaten at every size"
        bytes_ = plan_bytes(piece.plan, problem.mesh, problem.sizes)
        head = (
            f"plan {found.index(piece.plan) + 1} of {len(found)} ({mark}): {bytes_} bytes communicated; "
            f"{piece.plan.note}"
        )
        blocks.append((head, render(piece.plan, "latex")))
    return said, blocks
