"""``shardalg plan | simulate``: every way to compute a sharded einsum (or resharding), and proof on numbers.

    shardalg plan "A[I, J_X] · B[J, K] -> C[I, K]" --mesh X=4 --all
    shardalg plan "X[B, D] ·_D Y[D_X, F] -> Z[B, F]" --mesh X=4 --sizes B=128,D=8192,F=32768 --json
    shardalg plan "A[I_X, J] -> A[I, J_X]" --mesh X=4
    shardalg simulate "A[I_X, J] · B[J, K_Y] -> C[I, K]" --mesh X=4,Y=2

``plan`` prints the default (cheapest) plan, or every plan with ``--all``, each step with its reason.
Its JSON (``--json`` or ``--format json``) is ``{"complete", "case": [...], "plans": [{"steps": [{"op", "axes", "tensor",
"before", "after", "reason"}], "output", "bytes_communicated"}]}``, the default plan first (all plans with
``--all``, else the default alone); ``before``/``after`` are in the text notation; ``bytes_communicated`` is a
number when the sizes are known, else the sympy expression as text. With ``--hw CHIP`` plans are ranked by
their seconds on that chip (under ``--overlap``, default ``schedule``: a step waits for its inputs) and each
plan in the JSON also has ``"seconds"``. ``"complete"`` is false (with a ``"note"`` naming the limit, and a
warning on stderr) when a search budget (``--max-labels``) cut the list. ``simulate`` runs every plan on a numpy
virtual mesh and compares it with the dense result; it exits 1 when any plan is wrong.
"""

from __future__ import annotations

import argparse
from typing import Any

from shardalg.errors import ShardalgError, UsageError
from shardalg.notation.printing import render, text
from shardalg.notation.syntax import Op, Product
from shardalg.planning.overlap import OverlapPolicy
from shardalg.planning.search import MAX_LABELS
from shardalg.progress import task

from . import EXIT_ILLEGAL, EXIT_OK
from .common import (
    add_format_or_json,
    add_overlap,
    add_seed,
    examples,
    json_text,
    no_made_up_sizes,
    program_text,
)
from .hwmesh import HW_HELP, add_hw, chip, priced_mesh

FORMATS = ("text", "unicode", "latex", "json")


def _problem(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """The prepared problem, its plans, and the one CostModel of the call (None without --hw), which ranks
    the plans and prices each one printed."""
    from shardalg.algebra.legality import as_sizes
    from shardalg.costs.costmodel import CostModel
    from shardalg.costs.ranking import BySeconds
    from shardalg.planning.planner import plans, prepare
    from shardalg.planning.planset import Limits

    source = program_text(args.expr)
    limits = Limits(max_labels=args.max_labels) if args.max_labels is not None else Limits()
    try:
        hw = chip(getattr(args, "hw", None))
        problem = prepare(source, priced_mesh(args.mesh, hw, source), as_sizes(args.sizes))
        costs = (
            None
            if hw is None
            else CostModel.of(hw, getattr(args, "model", None), getattr(args, "overlap", None))
        )
        found = plans(problem, rank=None if costs is None else BySeconds(costs), limits=limits)
    except ShardalgError as err:
        raise err.with_source(source) from None  # the planner's spans point into the text: show the caret
    return problem, found, costs


def plan_json(
    found: list,
    mesh: Any,
    sizes: Any,
    seconds: list[float | None] | None = None,
    overlap: OverlapPolicy | None = None,
) -> dict[str, Any]:
    """The documented JSON of a list of plans (the default first); with ``seconds`` (from --hw), each
    plan also has ``"seconds"``, and ``"overlap"`` names the policy they are taken under."""
    from shardalg.planning.redistribute import plan_bytes

    def step(s: Any) -> dict[str, Any]:
        if s.op is Op.EINSUM:
            left, right = s.inputs
            before = text(Product(left, right, s.contract or None, s.local))
            tensor = s.output.name
        else:
            before, tensor = text(s.inputs[0]), s.inputs[0].name
        return {
            "op": s.op.value,
            "axes": list(s.axes),
            "tensor": tensor,
            "before": before,
            "after": text(s.output),
            "reason": s.reason,
        }

    complete = getattr(found, "complete", True)
    choice = getattr(found, "choice", None)
    return {
        **({} if choice is None else {"choice": choice.to_json()}),
        **({} if seconds is None or overlap is None else {"overlap": overlap.value}),
        "complete": complete,
        **({"note": found.note} if getattr(found, "note", "") else {}),  # type: ignore[attr-defined]
        "case": list(found[0].cases) if found else [],
        "plans": [
            {
                "steps": [step(s) for s in p.steps],
                "output": text(p.output),
                "bytes_communicated": plan_bytes(p, mesh, sizes).json(),
                **({} if seconds is None else {"seconds": seconds[n]}),
            }
            for n, p in enumerate(found)
        ],
    }


def _statements(source: str) -> list[str] | None:
    """A program of several statements (a file ``search --emit-program`` wrote) as one source per
    statement, each with the program's ``mesh`` and ``where`` lines; None for what the planner plans as one
    problem (:func:`shardalg.planning.planner.one_problem`)."""
    from shardalg.notation.parse import parse
    from shardalg.notation.syntax import Program
    from shardalg.planning.planner import one_problem

    try:
        node = parse(source)
    except ShardalgError:
        return None  # the planner reports it, with its caret
    if not isinstance(node, Program) or one_problem(node):
        return None
    head = []
    if node.mesh is not None:
        head.append(text(node.mesh))
    if node.sizes:
        head.append("where " + ", ".join(f"{k}={v}" for k, v in node.sizes))
    return ["\n".join([*head, text(st)]) for st in node.statements]


@no_made_up_sizes
def _plan(args: argparse.Namespace) -> int:
    if args.expr == "-":  # standard input is read once, here
        args = argparse.Namespace(**{**vars(args), "expr": program_text(args.expr)})
    statements = _statements(program_text(args.expr))
    if statements is None:
        return _plan_one(args)
    if args.json or args.format == "json":
        raise UsageError(
            f"plan --json takes one statement, not {len(statements)}: plan each statement of the program"
        )
    for k, source in enumerate(statements, 1):
        comment = "%" if args.format == "latex" else "#"
        print(f"{comment} statement {k} of {len(statements)}: {source.splitlines()[-1]}")
        _plan_one(argparse.Namespace(**{**vars(args), "expr": source}))
    return EXIT_OK


def _plan_one(args: argparse.Namespace) -> int:
    from shardalg.costs.plancost import priced
    from shardalg.planning.planset import Plans
    from shardalg.planning.redistribute import plan_bytes

    problem, found, costs = _problem(args)
    sizes = problem.sizes
    choice = found.choice if found.choice is not None and not found.choice.decided else None
    first = [c.plan for c in choice.contenders] if choice is not None else found[:1]
    shown = Plans(found if args.all else first, found.complete, found.note, choice=found.choice)
    fmt = "json" if args.json else args.format
    seconds = None if costs is None else [priced(p, problem.mesh, sizes.known, costs).seconds for p in shown]
    if fmt == "json":
        print(
            json_text(
                plan_json(shown, problem.mesh, sizes, seconds, None if costs is None else costs.overlap)
            )
        )
        return EXIT_OK
    comment = "%" if fmt == "latex" else "#"
    if not found.complete:
        print(f"{comment} incomplete: {found.note}")
    elif found.note:  # complete, with something said about how (sub-axes not searched)
        print(f"{comment} note: {found.note}")
    if not found:
        return EXIT_OK
    for line in found[0].cases:
        print(f"{comment} {line}")
    where = {} if choice is None else {id(c.plan): c.condition(choice.symbol) for c in choice.contenders}
    for line in [] if choice is None else choice.lines():
        print(f"{comment} {line.strip()}")
    for n, p in enumerate(shown, 1):
        if choice is not None:
            said = where.get(id(p))
            mark = (
                ""
                if said is None
                else f" (the cheapest where {said})"
                if said
                else " (not beaten at every size)"
            )
            head = f"plan {found.index(p) + 1} of {len(found)}{mark}"
        else:
            head = (
                f"plan {n} of {len(found)}"
                if args.all
                else f"default plan (1 of {len(found)}; --all lists them)"
            )
        timing = ""
        if costs is not None and seconds is not None:
            t = seconds[n - 1]
            name, policy = costs.chip.name, costs.overlap
            timing = (
                f", {t * 1e6:.3g} us on {name} (overlap {policy})"
                if t is not None
                else f", symbolic on {name}"
            )
        print(f"{comment} {head}: {plan_bytes(p, problem.mesh, sizes)} bytes communicated{timing}; {p.note}")
        print(render(p, fmt) if p.steps else f"{comment} nothing to do")
    return EXIT_OK


def _simulate(args: argparse.Namespace) -> int:
    import numpy as np

    from shardalg.numeric.execute import run_plan

    problem, found, _ = _problem(args)
    sizes = problem.sizes
    results = []
    with task("running the plans on numbers", total=len(found)) as tick:
        for p in found:
            results.append(run_plan(p, problem.mesh, sizes.known or None, np.random.default_rng(args.seed)))
            tick(p.note)
    if args.json:
        print(
            json_text(
                {
                    "plans": [
                        {"ok": r.ok, "max_error": r.max_error, "note": p.note}
                        for p, r in zip(found, results, strict=True)
                    ]
                },
                ensure_ascii=True,
            )
        )
    else:
        for n, (p, r) in enumerate(zip(found, results, strict=True), 1):
            print(
                f"plan {n} of {len(found)}: {'ok' if r.ok else 'WRONG'} (max relative error {r.max_error:.1e}); {p.note}"
            )
    return EXIT_OK if all(r.ok for r in results) else EXIT_ILLEGAL


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "expr", metavar="EXPR", help="an einsum, a collective or a resharding (quote it), or - for stdin"
    )
    p.add_argument("--mesh", metavar="X=4,Y=2", help="the mesh (required unless EXPR declares one)")
    p.add_argument("--sizes", metavar="B=1024,D=4096", help="dim sizes, NAME=INT separated by commas")
    p.add_argument(
        "--max-labels",
        type=int,
        metavar="N",
        help="the planning limit: labels one layout search may "
        f"settle (default {MAX_LABELS:,}); a plan list cut by it says so (complete: false)",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "plan",
        help="every legal plan for a sharded einsum or resharding",
        description="Plan EXPR: which case applies, and the collectives of the default plan (or of every plan with "
        "--all), each step with its reason. Plans are ranked by bytes communicated, then steps (by seconds "
        "on a chip with --hw).",
        epilog=examples(
            'shardalg plan "A[I, J_X] · B[J, K] -> C[I, K]" --mesh X=4 --all',
            'shardalg plan "X[B, D] · Y[D_X, F] -> Z[B, F]" --mesh X=4 --sizes B=512,D=8192,F=16384 '
            "--hw tpu-v5p --json",
            'shardalg plan "A[I_X, J] -> A[I, J_X]" --mesh X=4',
        ),
    )
    _common(p)
    p.add_argument("--all", action="store_true", help="list every plan, not just the default")
    add_hw(p, help=HW_HELP + "; ranks plans by seconds on it (needs every size)")
    p.add_argument(
        "--model",
        choices=("ici", "alpha-beta", "alpha-beta-rd"),
        help="the communication model for --hw (default: the chip's)",
    )
    add_overlap(p, help="with --hw: what runs at once (default schedule: a step waits for its inputs)")
    add_format_or_json(p, FORMATS, "the JSON documented in the module help (= --format json)")
    p.set_defaults(handler=_plan)

    p = subparsers.add_parser(
        "simulate",
        help="run every plan on a numpy virtual mesh and compare with the dense result",
        description="Run each plan of EXPR on random data cut into per-device buffers; exit 1 if any plan is wrong.",
        epilog=examples('shardalg simulate "A[I_X, J] · B[J, K_X] -> C[I_X, K]" --mesh X=4'),
    )
    _common(p)
    add_seed(p)
    p.add_argument("--json", action="store_true", help='print {"plans": [{"ok", "max_error", "note"}]}')
    p.set_defaults(handler=_simulate)
