"""``shardalg audit FILE.py:FUNCTION``: what XLA communicates for a jax function, in the notation, against
shardalg's plans.

    shardalg audit model.py:mlp --inputs "x[B_X, D]; w_in[D, F_Y]; w_out[F_Y, D]" --mesh X=2,Y=4 \\
        --sizes B=64,D=128,F=256 --backward

The function is traced and compiled with jax in a subprocess on as many CPU devices as the mesh has; the
report is the program in XLA's shardings, XLA's collectives as each statement's plan, where that plan ranks
among ``shardalg plan --all``'s, and a FLAG with the ratio where it costs more than shardalg's best. Exit 0
when the audit ran (flags included), 2 when it could not (the file, the function, the inputs, jax).
``--dtensor`` audits a PyTorch DTensor module instead (:mod:`shardalg.audit.dtensor`).
"""

from __future__ import annotations

import argparse

from shardalg.errors import UsageError

from . import EXIT_OK
from .common import add_overlap, examples, json_text
from .hwmesh import MESH_HELP, add_hw, chip


def _audit(args: argparse.Namespace) -> int:
    from shardalg.algebra.legality import as_sizes
    from shardalg.algebra.mesh import Mesh
    from shardalg.audit.report import report_html, report_json, report_latex, report_text
    from shardalg.audit.run import audit_file

    if args.dtensor:
        from shardalg.audit.dtensor import audit_dtensor

        if args.inputs or args.backward or args.sizes:
            raise UsageError(
                "--dtensor: the function builds the module and its inputs; no --inputs, --sizes or --backward"
            )
        if args.format in ("latex", "html"):
            raise UsageError("--dtensor reports as text or json")
        d = audit_dtensor(args.target, Mesh.parse(args.mesh), hw=chip(args.hw), overlap=args.overlap)
        print(
            json_text(d.to_json(), ensure_ascii=True) if args.format == "json" else d.text(),
            end="\n" if args.format == "json" else "",
        )
        return EXIT_OK
    if not args.inputs:
        raise UsageError("give the function's inputs: --inputs 'x[B_X, D]; w[D, F_Y]'")
    a = audit_file(
        args.target,
        [args.inputs],
        Mesh.parse(args.mesh),
        as_sizes(args.sizes),
        backward=args.backward,
        hw=chip(args.hw),
        overlap=args.overlap,
    )
    if args.format == "json":
        print(json_text(report_json(a), ensure_ascii=True))
    elif args.format == "latex":
        print(report_latex(a), end="")
    elif args.format == "html":
        print(report_html(a), end="")
    else:
        print(report_text(a), end="")
    return EXIT_OK


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "audit",
        help="read the collectives XLA inserts for a jax function and judge them against shardalg's plans",
        description="Trace and compile FILE.py:FUNCTION with jax on CPU devices (one per mesh device), with its "
        "inputs sharded as --inputs says; write the function's dot_generals as a shardalg program in XLA's "
        "shardings and XLA's collectives as each statement's plan (replica groups as mesh axes, sub-axes in "
        "Shardy's spelling Y:(1)2); rank that plan among shardalg's and flag it, with the ratio and the "
        "cheaper plan, where it costs more. --backward also reads jax.grad of the sum of the output and pairs "
        "each backward collective with the forward one it transposes.",
        epilog=examples(
            'shardalg audit model.py:mlp --inputs "x[B_X, D]; w_in[D, F_Y]; w_out[F_Y, D]" --mesh X=2,Y=4 '
            "--sizes B=64,D=128,F=256",
            'shardalg audit model.py:matmul --inputs "A[I_XY, J]; B[J_XY, K]" --mesh X=2,Y=4 '
            "--sizes I=8,J=4096,K=4096 --format json",
        ),
    )
    p.add_argument("target", metavar="FILE.py:FUNCTION", help="the Python file and the function in it")
    p.add_argument(
        "--inputs",
        metavar="TENSORS",
        help="the function's inputs in order, in the notation, separated by ';': their dims' names and "
        "shardings, e.g. 'x[B_X, D]; w[D, F_Y]' (bf16[...] for bfloat16; float32 otherwise)",
    )
    p.add_argument("--mesh", metavar="X=2,Y=4", required=True, help=MESH_HELP)
    p.add_argument("--sizes", metavar="B=64,D=128", help="dim sizes, NAME=INT separated by commas")
    p.add_argument("--backward", action="store_true", help="also audit jax.grad of the sum of the output")
    p.add_argument(
        "--dtensor",
        action="store_true",
        help="FUNCTION(mesh) returns a torch module and its inputs: run forward and backward on one gloo process "
        "per device under CommDebugMode and compare the counts with shardalg's plans",
    )
    add_hw(p, help="the chip the plans are priced on (default tpu-v5p, said in the report)")
    add_overlap(p, "what runs at once when the plans are priced (default schedule)")
    p.add_argument(
        "--format",
        choices=("text", "json", "latex", "html"),
        default="text",
        help="output format (default: text; latex and html for the jax audit)",
    )
    p.set_defaults(handler=_audit)
