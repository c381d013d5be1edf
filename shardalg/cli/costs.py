"""``shardalg cost | compare | optimum | bound | hw``: prices, conditions and presets.

    shardalg cost "AllGather_Y(bf16[E_Y, F])" --mesh X=8,Y=4 --sizes E=2048,F=8192 --hw tpu-v5e --json
    shardalg cost "$PROGRAM" --mesh X=2,Y=4 --sizes I=256,J=512,K=256 --hw tpu-v5e --schedule
    shardalg compare "$LOCAL_THEN_ALLREDUCE" "$GATHER_WEIGHTS" --mesh X=4 --solve-for D --json
    shardalg optimum "$FSDP_TP" --mesh X,Y --over X --subject-to X*Y=N --symbolic-links
    shardalg bound "$DP_BACKWARD" --mesh X --solve-for B --symbolic-links
    shardalg hw list ; shardalg hw show tpu-v5p

A mesh axis written without a size (``--mesh X,Y``) stays a symbol. ``--overlap schedule|steady|serial`` is
the overlap policy (:mod:`shardalg.costs.schedule`): ``cost`` defaults to ``schedule`` (a step waits for its
inputs), the derivations to ``steady`` (the book's layer-level view); ``--exact`` keeps the ring's (N − 1)/N
of a gather's bytes; ``--ring uni`` uses each ring one way. A statement priced by its cheapest plan (its
operands do not meet) is said so on stderr as well as in the output. ``--solve-for`` and ``--over`` name a dim
or an axis (an identifier); ``--subject-to`` is ``NAME*NAME=NAME`` (a product of names equal to a name or an
integer). No user text reaches a sympy parser.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import TYPE_CHECKING

from shardalg.errors import UsageError
from shardalg.planning.overlap import OverlapPolicy

from . import EXIT_OK
from .common import add_overlap, examples, json_text, no_made_up_sizes, program_text
from .hwmesh import HW_HELP, MESH_HELP, add_hw, add_slice, chip_and_mesh, slice_layout

if TYPE_CHECKING:  # sympy is imported by the handlers only: the CLI's cold start stays light
    import sympy

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_CONSTRAINT = re.compile(
    r"\s*([A-Za-z][A-Za-z0-9]*(?:\s*\*\s*[A-Za-z][A-Za-z0-9]*)*)\s*=\s*([A-Za-z][A-Za-z0-9]*|\d+)\s*"
)


def _name(text: str | None, what: str) -> str | None:
    if text is None:
        return None
    if not _NAME.fullmatch(text):
        raise UsageError(f"{what} takes a dim or axis name (an identifier such as D), not {text!r}")
    return text


def _symbol(name: str) -> sympy.Symbol:
    from shardalg.costs.derive import _symbol as resolve

    return resolve(name)


def _constraint(text: str) -> sympy.Eq:
    """``X*Y=N``: a product of names equal to a name or an integer, built from symbols, never parsed by sympy."""
    import sympy

    from shardalg.algebra.symbols import device_count

    m = _CONSTRAINT.fullmatch(text)
    if m is None:
        raise UsageError(f"--subject-to takes NAME*NAME=NAME or NAME*NAME=INT, not {text!r}")
    lhs = sympy.Mul(*(_symbol(n.strip()) for n in m[1].split("*")))
    rhs = sympy.Integer(m[2]) if m[2].isdigit() else device_count() if m[2] == "N" else _symbol(m[2])
    return sympy.Eq(lhs, rhs)


def _options(args: argparse.Namespace, *programs: object) -> dict:
    """The keyword options of pricing ``programs``; the slice's notes are said here, the mesh's (a flat mesh
    placed into a GPU chip's nodes) are kept in ``args.mesh_notes`` for the result to carry (:func:`_noted`)."""
    layout = slice_layout(args)  # --slice: its logical mesh (--mesh factors it) and its chip by default
    hw, the_mesh, notes = chip_and_mesh(args, layout, *programs)
    _notes(f"{k}: {v}" for k, v in notes if k != "mesh")
    args.mesh_notes = tuple(f"{k}: {v}" for k, v in notes if k == "mesh")
    out: dict = {
        "mesh": the_mesh,
        "sizes": args.sizes,
        "hw": hw,
        "model": args.model,
        "symbolic_links": args.symbolic_links,
        "exact": args.exact,
        "ring": args.ring,
    }
    if args.dcn:
        out["dcn_axes"] = tuple(a for a in args.dcn.split(",") if a)
    if getattr(args, "hbm", None):
        out["hbm"] = tuple(a for a in args.hbm.split(",") if a)
    return out


def _parse(text: str):
    from shardalg.notation.parse import parse

    return parse(program_text(text))


def _print_derivation(d, as_json: bool, key: str) -> None:
    if as_json:
        data = d.to_json()
        data[key] = data["result"]
        print(json_text(data))
    else:
        print(d)


def _notes(notes) -> None:
    for n in notes:
        print(f"shardalg: note: {n}", file=sys.stderr)


def _noted(result, args: argparse.Namespace):
    """``result`` (a plan's cost or a derivation) carrying the mesh's notes of :func:`_options` first, so its
    text, its JSON and stderr say them."""
    result.notes = (*getattr(args, "mesh_notes", ()), *result.notes)
    return result


@no_made_up_sizes
def _cost(args: argparse.Namespace) -> int:
    from shardalg.costs.plancost import cost

    overlap = None if args.overlap is None else OverlapPolicy.of(args.overlap)
    if args.serial and overlap not in (None, OverlapPolicy.SERIAL):
        raise UsageError(f"--serial is --overlap serial; it contradicts --overlap {overlap}")
    overlap = OverlapPolicy.SERIAL if args.serial else overlap
    program = _parse(args.expr)
    pc = _noted(cost(program, overlap=overlap, latency=not args.no_latency, **_options(args, program)), args)
    _notes(pc.notes)
    if args.json:
        print(json_text(pc.to_json()))
        return EXIT_OK
    print(pc)
    if args.schedule:
        print(pc.gantt())
    return EXIT_OK


@no_made_up_sizes
def _compare(args: argparse.Namespace) -> int:
    from shardalg.costs.derive import compare

    a, b = _parse(args.program_a), _parse(args.program_b)
    d = compare(
        a,
        b,
        _name(args.solve_for, "--solve-for"),
        args.regime,
        latency=args.latency,
        overlap=args.overlap,
        **_options(args, a, b),
    )
    _notes(_noted(d, args).notes)
    _print_derivation(d, args.json, "condition")
    return EXIT_OK


@no_made_up_sizes
def _optimum(args: argparse.Namespace) -> int:
    from shardalg.costs.derive import optimum
    from shardalg.costs.plancost import cost

    program = _parse(args.program)
    pc = cost(
        program,
        latency=args.latency,
        overlap=OverlapPolicy.of(args.overlap, OverlapPolicy.STEADY),
        **_options(args, program),
    )
    _notes(_noted(pc, args).notes)
    over = _name(args.over, "--over")
    d = optimum(
        pc,
        over,
        _constraint(args.subject_to) if args.subject_to else None,
        term=args.term,
        values=pc.values,
        overlap=args.overlap,
    )
    _print_derivation(d, args.json, "optimum")
    return EXIT_OK


@no_made_up_sizes
def _bound(args: argparse.Namespace) -> int:
    from shardalg.costs.derive import compute_bound

    program = _parse(args.program)
    d = compute_bound(
        program,
        _name(args.solve_for, "--solve-for"),
        bound=args.bound,
        latency=args.latency,
        overlap=args.overlap,
        **_options(args, program),
    )
    _notes(_noted(d, args).notes)
    _print_derivation(d, args.json, "condition")
    return EXIT_OK


def _hw_list(args: argparse.Namespace) -> int:
    from shardalg.costs import hardware

    chips = [hardware.get(n) for n in hardware.names()]
    if args.json:
        print(json_text([c.to_json() for c in chips], ensure_ascii=True))
    else:
        for c in chips:
            print(f"{c.name:<8} {c.model:<11} {c.description}")
    return EXIT_OK


def _hw_show(args: argparse.Namespace) -> int:
    from shardalg.costs.chipspec import chip_from_text

    chip = chip_from_text(args.name)  # what --hw accepts: a preset, a TOML file or NAME=VALUE pairs
    print(json_text(chip.to_json(), ensure_ascii=True) if args.json else str(chip))
    return EXIT_OK


def _hw_slice(args: argparse.Namespace) -> int:
    from shardalg.costs.topology import slice_topology

    topology = slice_topology(args.name)
    layout = topology.layout(args.mesh)
    if args.json:
        print(json_text({**topology.to_json(), "mesh": layout.to_json()["axes"]}, ensure_ascii=True))
    else:
        print(topology)
        print("mesh: " + "; ".join(layout.lines()))
    return EXIT_OK


def _costing(
    p: argparse.ArgumentParser,
    latency_flag: str,
    overlap_default: OverlapPolicy = OverlapPolicy.STEADY,
) -> None:
    p.add_argument("--mesh", metavar="X=4,Y", help=MESH_HELP)
    p.add_argument("--sizes", metavar="B=1024,D=4096", help="dim sizes, NAME=INT separated by commas")
    add_hw(p, help=HW_HELP + "; its numbers give seconds, its rule the wraparound")
    add_slice(p)
    p.add_argument(
        "--model", choices=("ici", "alpha-beta", "alpha-beta-rd"), help="default: the chip's, else ici"
    )
    p.add_argument(
        "--symbolic-links", action="store_true", help="write link counts as M_X instead of numbers"
    )
    p.add_argument("--dcn", metavar="AXES", help="mesh axes that run over the data-center network, e.g. P")
    add_overlap(
        p,
        help=f"what runs at once: schedule (a step waits for its inputs), steady (the book's layer-level "
        f"max(compute, max over axes)) or serial (the sum); default {overlap_default}",
    )
    p.add_argument(
        "--exact",
        action="store_true",
        help="keep the ring's (N-1)/N of a gather's bytes (as "
        "jax.experimental.roofline counts); default the book's V/W",
    )
    p.add_argument(
        "--ring",
        choices=("bi", "uni"),
        default="bi",
        help="rings carry data both ways (the book's W_ici, default) or one way",
    )
    if latency_flag == "--latency":
        p.add_argument("--latency", action="store_true", help="keep the T_min / alpha latency terms")
    else:
        p.add_argument("--no-latency", action="store_true", help="drop the latency terms (bandwidth only)")
    p.add_argument("--json", action="store_true", help="print JSON")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "cost",
        help="symbolic and numeric cost of a collective, einsum or program",
        description="Cost each step of EXPR and the total under the overlap policy.",
        epilog=examples(
            'shardalg cost "AllGather_Y(bf16[E_Y, F])" --mesh X=8,Y=4 --sizes E=2048,F=8192 --hw tpu-v5e'
        ),
    )
    p.add_argument("expr", metavar="EXPR_OR_PROGRAM", help="the notation, or - for standard input")
    p.add_argument("--serial", action="store_true", help="the same as --overlap serial")
    p.add_argument("--schedule", action="store_true", help="also print the schedule: when each step runs")
    _costing(p, "--no-latency", OverlapPolicy.SCHEDULE)
    p.set_defaults(handler=_cost)

    p = subparsers.add_parser(
        "compare",
        help="the condition under which program A is faster than B",
        description="Derive when PROGRAM_A is faster than PROGRAM_B, solved for a symbol.",
        epilog=examples(
            'shardalg compare "X[B, D_X] ·_LOCAL Y[D_X, F] -> Z[B, F]{U_X}; '
            'AllReduce_X(Z[B, F]{U_X}) -> Z[B, F]" '
            '"X[B, D] · AllGather_X(Y[D_X, F]) -> Z[B, F]" --mesh X --solve-for D'
        ),
    )
    p.add_argument(
        "program_a", metavar="PROGRAM_A", help="the first program (quote it), or - for standard input"
    )
    p.add_argument(
        "program_b", metavar="PROGRAM_B", help="the second program (quote it), or - for standard input"
    )
    p.add_argument("--solve-for", metavar="NAME", help="the dim or axis to isolate, e.g. D")
    p.add_argument(
        "--regime",
        choices=("comms", "compute", "total", "overlap", "serial"),
        default="comms",
        help="what each plan's time is: comms, a's total against b's compute, both totals; overlap "
        "and serial are total under those policies",
    )
    _costing(p, "--latency")
    p.set_defaults(handler=_compare)

    p = subparsers.add_parser(
        "optimum",
        help="minimize a program's communication over an axis size",
        description="Minimize the program's comms (or --term) over --over.",
        epilog=examples(
            'shardalg optimum "AllGather_X(Win[D_X, F_Y]) -> Win[D, F_Y]; '
            'AllGather_Y(In[B_X, D_Y]) -> In[B_X, D]" --mesh X,Y --over X '
            "--subject-to X*Y=N --symbolic-links"
        ),
    )
    p.add_argument("program", metavar="PROGRAM", help="the program (quote it), or - for standard input")
    p.add_argument("--over", metavar="NAME", required=True, help="the axis or dim size to optimize, e.g. X")
    p.add_argument(
        "--subject-to", metavar="X*Y=N", help="a product constraint that eliminates another symbol"
    )
    p.add_argument(
        "--term",
        choices=("comms", "compute", "memory", "total"),
        default="comms",
        help="which time to minimize (default: comms)",
    )
    _costing(p, "--latency")
    p.set_defaults(handler=_optimum)

    p = subparsers.add_parser(
        "bound",
        help="the condition for compute (or HBM time) to dominate comms",
        description="Derive when PROGRAM is compute-bound (or memory-bound).",
        epilog=examples(
            'shardalg bound "In[B_X, D] ·_LOCAL dOut[B_X, F] -> dW[D, F]{U_X}; '
            'AllReduce_X(dW[D, F]{U_X}) -> dW[D, F]" --mesh X --solve-for B '
            "--symbolic-links"
        ),
    )
    p.add_argument("program", metavar="PROGRAM", help="the program (quote it), or - for standard input")
    p.add_argument("--solve-for", metavar="NAME", help="the dim or axis to isolate, e.g. B")
    p.add_argument(
        "--bound",
        choices=("compute", "memory"),
        default="compute",
        help="compute time (default) or HBM time must dominate the communication",
    )
    p.add_argument(
        "--hbm", metavar="TENSORS", help="count HBM traffic of these tensors only, e.g. W_in,W_out"
    )
    _costing(p, "--latency")
    p.set_defaults(handler=_bound)

    p = subparsers.add_parser(
        "hw",
        help="hardware presets",
        description="List or show the hardware presets.",
        epilog=examples("shardalg hw list", "shardalg hw show tpu-v5p"),
    )
    sub = p.add_subparsers(dest="hw_command", metavar="{list,show,slice}", parser_class=type(p))
    sub.required = True
    q = sub.add_parser(
        "list",
        help="every preset",
        description="List every hardware preset: name, model, chip.",
        epilog=examples("shardalg hw list --json"),
    )
    q.add_argument("--json", action="store_true", help="print the presets' numbers as JSON")
    q.set_defaults(handler=_hw_list)
    q = sub.add_parser(
        "show",
        help="one chip's numbers and their sources",
        description="Show one chip (a preset, a TOML file or NAME=VALUE pairs, as --hw takes): its "
        "bandwidths, FLOP/s, link counts and where each came from.",
        epilog=examples("shardalg hw show tpu-v5p", "shardalg hw show my-chip.toml"),
    )
    q.add_argument(
        "name", metavar="CHIP", help="a preset's name (shardalg hw list), a TOML file or NAME=VALUE pairs"
    )
    q.add_argument("--json", action="store_true", help="print the preset as JSON")
    q.set_defaults(handler=_hw_show)
    q = sub.add_parser(
        "slice",
        help="a real slice: its physical axes, network levels and sources, and a logical mesh of it",
        description="Show a real slice (v5p-8960, v5e-256, v4-4096, h100-1024): its torus axes with "
        "wraparound and hops, pods over DCN, or a GPU network's levels (radix, switches, link bandwidths), each "
        "with its source; --mesh factors the physical axes into logical ones (what --slice gives a command).",
        epilog=examples("shardalg hw slice v5p-8960 --mesh X=x*y,Y=z", "shardalg hw slice h100-1024 --json"),
    )
    q.add_argument("name", metavar="SLICE", help="PRODUCT-CHIPS: v5p-8960, v5e-256, v4-4096, h100-1024")
    q.add_argument("--mesh", metavar="X=x*y,Y=z", help="logical axes as products of the physical axes")
    q.add_argument("--json", action="store_true", help="print the slice as JSON")
    q.set_defaults(handler=_hw_slice)
