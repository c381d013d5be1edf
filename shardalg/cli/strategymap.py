"""``shardalg strategy-map``: where DP, FSDP, TP and FSDP+TP are each fastest, as symbolic regions.

    shardalg strategy-map "$(cat mlp.sa)" --mesh X=4,Y=4,Z=4 --hw tpu-v5p --sizes B=48000,D=8192,F=32768
    shardalg strategy-map mlp.sa --over B/N,F --overlap serial --plot map.png --format latex

PROGRAM is a block in the notation with its parameters declared (``params W_in, W_out``), a file holding
one, or - for standard input. Every default not chosen is stated in the output (``note:``).
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import Any

from shardalg.errors import UsageError
from shardalg.planning.overlap import OverlapPolicy

from . import EXIT_OK
from .common import HelpFormatter, add_keep, add_overlap, examples, json_text, program_text
from .hwmesh import HW_HELP, MESH_HELP, add_hw, chip, priced_mesh

EXAMPLE = (
    'shardalg strategy-map "params W_in, W_out; In[B, D] * W_in[D, F] -> Tmp[B, F]; '
    'Tmp[B, F] * W_out[F, D] -> Out[B, D]" --mesh X=4,Y=4,Z=4 --hw tpu-v5p --sizes B=48000,D=8192,F=32768 '
    "--memory hbm --plot map.png"
)


def _run(args: argparse.Namespace) -> int:
    from shardalg.algebra.context import as_sizes
    from shardalg.search.monotext import parameters_text
    from shardalg.search.programresult import program_map

    text = program_text(args.program)
    result = program_map(
        text,
        priced_mesh(args.mesh, chip(args.hw), text),
        chip(args.hw),
        parameters_text(args.over),
        overlap=args.overlap,
        passes=args.passes,
        sizes=as_sizes(args.sizes),
        remat=args.remat,
        memory=args.memory,
        optimizer=args.optimizer,
        names=_names(args.strategies),
        keep_gathered=args.keep_gathered,
    )
    picture: Any = None
    if args.plot:
        from shardalg.pictures.plot import latex_figure
        from shardalg.pictures.regionmap import region_map

        over = parameters_text(args.over)
        if len(over) < 2:
            raise UsageError("--plot draws two parameters: give --over with two, e.g. --over B/N,F")
        picture = region_map(result, args.plot, over[0], over[1], decades=args.decades)
        caption = _caption(args, text, result, over[0], over[1])
    if args.format == "json":
        data = result.to_json()
        if picture is not None:
            data["plot"] = {
                "path": str(picture.path),
                "labels": list(picture.labels),
                "shares": picture.shares,
                "caption": caption,
                "latex_figure": latex_figure(picture.path, caption),
            }
        print(json_text(data))
    elif args.format == "latex":
        print(result.latex())
    else:
        print(result)
    for n in result.notes:
        print(f"note: {n}", file=sys.stderr)
    if picture is not None:
        print(f"wrote {picture.path}: {', '.join(picture.labels)}", file=sys.stderr)
        print("the figure for a LaTeX document (\\caption numbers it):", file=sys.stderr)
        print(latex_figure(picture.path, caption), file=sys.stderr)
    return EXIT_OK


def _names(text: str | None) -> tuple[str, ...]:
    """``--strategies DP,ZeRO-1,FSDP`` as names (the map checks them); the default, the book's four."""
    from shardalg.search.programmap import STRATEGY_NAMES

    if text is None:
        return STRATEGY_NAMES
    return tuple(n.strip() for n in text.split(","))


def _caption(args: argparse.Namespace, text: str, result: Any, x: str, y: str) -> str:
    """The picture's caption: what it shows, and the chip, mesh, sizes and memory cap of the point marked
    (the mesh and sizes: ``--mesh`` and ``--sizes`` over the program's own mesh line and sizes)."""
    from shardalg.algebra.context import merged_sizes
    from shardalg.notation.parse import parse
    from shardalg.notation.printing.display import bytes_both

    prog = parse(text)
    own_mesh = getattr(prog, "mesh", None)
    sizes = merged_sizes(getattr(prog, "sizes", ()), args.sizes)[0]
    parts = [f"The fastest strategy over {x} and {y}, the point marked at"]
    where = [f"chip {getattr(chip(args.hw), 'name', args.hw)}" if args.hw else "no chip (symbolic)"]
    if args.mesh:
        where.append(f"mesh {args.mesh}")
    elif own_mesh is not None:
        where.append("mesh " + ",".join(f"{a}={n}" for a, n in own_mesh.axes))
    else:
        where.append("a symbolic mesh")
    if sizes:
        where.append("sizes " + ",".join(f"{d}={n}" for d, n in sizes.items()))
    cap = {str(k): v for k, v in result.values.items()}.get("H")
    where.append(f"memory cap {bytes_both(float(cap))} per device" if cap else "no memory cap")
    return f"{parts[0]} {', '.join(where)}."


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "strategy-map",
        help="where DP, FSDP, TP and FSDP+TP are each fastest, as symbolic regions",
        description=textwrap.fill(
            "Build the book's strategies (DP, FSDP, TP, FSDP+TP) as shardings of PROGRAM, cost each from its "
            "plans and derived backward, and derive the regions of the parameters where each is fastest, as "
            "solved inequalities with their derivations; FSDP+TP at its continuous X_opt, with the integer splits "
            "of the mesh next to it. Sizes, mesh and chip place the current point.",
            100,
        ),
        epilog=examples(EXAMPLE),
        formatter_class=HelpFormatter,
    )
    p.add_argument(
        "program",
        metavar="PROGRAM",
        help="the block in the notation with 'params' declared, a file holding it, or - for standard input",
    )
    p.add_argument("--mesh", metavar="X=4,Y=4,Z=4", help=MESH_HELP + "; its device count is N")
    add_hw(p, help=HW_HELP + "; its C and W_ici place the current point")
    p.add_argument("--sizes", metavar="B=48000,F=32768", help="dim sizes of the current point, NAME=INT")
    p.add_argument(
        "--over",
        default="B/N,F",
        metavar="B/N,F",
        help="the parameters to map over, products of powers of names (default B/N,F); the costs' "
        "other parameters (C/W_ici, M_X, M_Y, N) are added as needed, and said",
    )
    add_overlap(
        p,
        default=OverlapPolicy.STEADY,
        help="steady: compute and each axis's collectives overlap (the "
        "default); serial: they add up; schedule: one layer's steps as their dependencies allow",
    )
    p.add_argument(
        "--passes",
        choices=("step", "forward", "backward"),
        default="step",
        help="the whole training step (default), or the forward or backward pass alone",
    )
    p.add_argument(
        "--remat", metavar="POLICY", help="what the backward keeps (see shardalg step); default none"
    )
    p.add_argument(
        "--memory",
        metavar="BYTES|hbm",
        help="cap the parameters, gradients and optimizer state per "
        "device (bytes, e.g. 95e9, or hbm: the chip's); the map gains D*F/H. Default: no cap",
    )
    p.add_argument(
        "--optimizer",
        metavar="NAME",
        help="the optimizer state the cap counts (see shardalg memory; default adam)",
    )
    add_keep(p)
    p.add_argument(
        "--strategies",
        metavar="DP,FSDP,...",
        help="the strategies to map, comma-separated: DP, FSDP, TP, FSDP+TP (the default) and FSDP's family's "
        "ZeRO-1, ZeRO-2 and ZeRO-3 (which is FSDP)",
    )
    p.add_argument(
        "--plot",
        metavar="OUT.png",
        help="draw the map over the first two --over parameters "
        "(.png, .pdf, .svg; needs the plot extra), the current point marked",
    )
    p.add_argument(
        "--decades",
        type=float,
        default=2.0,
        help="the picture's reach each side of the point (powers of ten, default 2)",
    )
    p.add_argument(
        "--format", choices=("text", "latex", "json"), default="text", help="output (default text)"
    )
    p.set_defaults(handler=_run)
