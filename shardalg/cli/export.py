"""``shardalg export jax|torch`` and ``shardalg show``: the plan as code, the sharding as a picture.

    shardalg export jax "In[B_X, D] * W[D_X, F] -> Out[B_X, F]" --mesh X=8 --check
    shardalg export torch "A[I, J_X] * B[J_X, K] -> C[I, K]" --mesh X=4,Y=2 --backward
    shardalg show "A[I_X, J]{U_Y}" --mesh X=2,Y=2
    shardalg show "AllGather_X(A[I_X, J])" --mesh X=4 --format tikz

``--check`` runs the generated code (8 fake CPU devices for JAX, one gloo process per device for torch)
against the dense einsum and exits 0 only when they agree (1 when they do not, 2 when it cannot run). With
``--backward`` that dense backward is also held against the forward's derivative (central differences:
:mod:`shardalg.numeric.gradcheck`), so the check does not rest on the derivation it exports.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from shardalg.errors import UsageError
from shardalg.progress import task

from . import EXIT_ILLEGAL, EXIT_OK
from .common import FILE_COMPLETION, examples, file_error, program_text

PICTURES = ("png", "svg")

BACKENDS = ("jax", "torch")


def _mesh(args: argparse.Namespace, program: object):
    from shardalg.algebra.context import chosen_mesh, say_replaced
    from shardalg.algebra.mesh import Mesh

    m, said = chosen_mesh(getattr(program, "mesh", None), Mesh.parse(args.mesh) if args.mesh else None)
    if m is None:
        raise UsageError("give the mesh: --mesh X=4,Y=2 (or a 'mesh X=4, Y=2' line in the program)")
    say_replaced(said)
    return m


def _export(args: argparse.Namespace) -> int:
    from shardalg.algebra.context import merged_sizes, say_replaced
    from shardalg.models.program import refuse_sizes_it_lacks
    from shardalg.notation.parse import parse

    if args.keep_gathered and not args.backward:  # it changes only the backward: without it, ignored
        raise UsageError(
            "--keep-gathered changes only the backward program, and this exports the forward",
            fix="add --backward, or drop --keep-gathered",
        )
    program = parse(program_text(args.expr))
    refuse_sizes_it_lacks(program, args.sizes)  # a size for a dim the program lacks would be ignored
    mesh = _mesh(args, program)
    sizes, said = merged_sizes(program.sizes, args.sizes)
    say_replaced(said)
    obj: object = program
    name = "forward"
    if args.backward:
        from shardalg.planning.backward import backward

        obj, name = backward(program, mesh, sizes, keep_gathered=args.keep_gathered), "backward"
    if args.dtensor and args.backend != "torch":
        raise UsageError("--dtensor is a form of the torch export: shardalg export torch ... --dtensor")
    if args.check:  # before the code is printed: without the extra, one line and exit 2
        from shardalg.export.harness import require_extra

        require_extra(args.backend, args.backend, f"export {args.backend} --check")
    if args.backend == "jax":
        from shardalg.export.jax import check_jax as check
        from shardalg.export.jax import export_jax as export

        print(export(obj, mesh, sizes=sizes or None, name=name), end="")
    else:
        from shardalg.export.torch_check import check_torch as check
        from shardalg.export.torch_export import export_torch

        print(export_torch(obj, mesh, sizes=sizes or None, name=name, dtensor=args.dtensor), end="")
    if not args.check:
        return EXIT_OK
    from shardalg.export import as_flow

    where = f"{mesh.devices} CPU devices" if args.backend == "jax" else f"{mesh.devices} gloo processes"
    extra = {"dtensor": True} if args.dtensor else {}
    with task(f"checking on {where}"):
        (result,) = check(as_flow(obj, mesh, sizes or None), mesh, sizes=sizes or None, **extra)
    if result.ok:
        print(
            f"check: ok on {where}, max relative error {result.max_error:.2g} ({result.seconds:.1f} s)",
            file=sys.stderr,
        )
    else:
        print(f"check: FAILED on {where}: {result.message}", file=sys.stderr)
    derivative = True
    if args.backward:  # the dense backward the code was held against, held against the forward's derivative
        from shardalg.numeric.gradcheck import gradcheck

        with task("checking the backward against the forward's derivative"):
            got = gradcheck(obj)  # type: ignore[arg-type]
        print(got, file=sys.stderr)
        derivative = got.ok
    return EXIT_OK if result.ok and derivative else EXIT_ILLEGAL


def _show(args: argparse.Namespace) -> int:
    from shardalg.algebra.context import merged_sizes, say_replaced
    from shardalg.errors import ShardalgError
    from shardalg.notation.parse import parse
    from shardalg.notation.syntax import Tensor
    from shardalg.pictures.show import show, show_collective, show_tikz

    text = program_text(args.expr)
    fmt = args.format or (Path(args.out).suffix.lstrip(".").lower() if args.out else "text")
    if fmt in PICTURES:
        if not args.out:
            raise UsageError(
                f"--format {fmt} writes a picture: give the file with --out, e.g. --out grid.{fmt}"
            )
        if Path(args.out).suffix.lower() != f".{fmt}":
            raise UsageError(f"--out {args.out} does not end in .{fmt}")
    elif fmt not in ("text", "tikz"):
        raise UsageError(f"--out {args.out}: a picture is .png or .svg (text and tikz go to standard output)")
    elif args.out:
        raise UsageError(f"--format {fmt} prints to standard output; --out is for png and svg")
    program = parse(text)  # read as every command reads a program: its mesh and where-sizes count
    if len(program.statements) != 1:
        raise UsageError(
            f"show draws one tensor or one collective, not {len(program.statements)} statements",
            fix="show each statement on its own",
        )
    (statement,) = program.statements
    mesh = _mesh(args, program)
    sizes, said = merged_sizes(program.sizes, args.sizes)
    say_replaced(said)
    try:  # the statement's spans point into the program's text: an error shows its caret there
        if fmt in PICTURES:
            from shardalg.pictures.grids import draw_show

            try:
                print(draw_show(statement, mesh, args.out, sizes=sizes))
            except OSError as err:
                raise file_error(err, "write the picture") from None
        elif not isinstance(statement, Tensor):
            print(show_collective(statement, mesh, format=fmt, sizes=sizes))
        else:
            print(show_tikz(statement, mesh, sizes=sizes) if fmt == "tikz" else show(statement, mesh, sizes))
    except ShardalgError as err:
        raise err.with_source(text) from None
    return EXIT_OK


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "export",
        help="print a plan as JAX shard_map or torch.distributed code",
        description="Plan EXPR (a statement or program) and print it as a runnable Python module: JAX shard_map "
        "with jax.lax collectives, or torch.distributed on a DeviceMesh (DTensor with --dtensor). --check runs the "
        "code (8 fake CPU devices for JAX, one gloo process per device for torch) against the dense einsum; exit "
        "0 when they agree, 1 when they do not, 2 when it cannot run.",
        epilog=examples(
            'shardalg export jax "A[I, J_X] · B[J_X, K] -> C[I, K_X]" --mesh X=4',
            'shardalg export torch "In[B_X, D] · W[D_X, F] -> Out[B_X, F]" --mesh X=4 --backward --check',
        ),
    )
    p.add_argument("backend", choices=BACKENDS, help="jax (shard_map + jax.lax) or torch (torch.distributed)")
    p.add_argument(
        "expr", metavar="EXPR_OR_PROGRAM", help="the notation (quote it), or - to read standard input"
    )
    p.add_argument("--mesh", metavar="X=4,Y=2", help="the mesh (numeric sizes)")
    p.add_argument("--sizes", metavar="B=64,D=32", help="dim sizes, NAME=INT separated by commas")
    p.add_argument("--backward", action="store_true", help="export the derived backward program instead")
    p.add_argument(
        "--dtensor",
        action="store_true",
        help="torch only: DTensors with the plan's Shard/Replicate/Partial placements, each collective a "
        "redistribute",
    )
    p.add_argument(
        "--keep-gathered", action="store_true", help="with --backward: read the forward's gathered copies"
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="run the code against the dense einsum (with --backward, also the backward against central "
        "differences of the forward); exit 1 on a mismatch",
    )
    p.set_defaults(handler=_export)

    s = subparsers.add_parser(
        "show",
        help="draw which block of a tensor lives on which device",
        description="Draw EXPR (a tensor, or one collective: before and after) on the mesh: which block of "
        "each dim every device holds, partial sums marked; as text, TikZ, or a PNG/SVG picture.",
        epilog=examples(
            'shardalg show "A[I_X, J]{U_Y}" --mesh X=2,Y=2',
            'shardalg show "ReduceScatter_{X,K}(C[I, K]{U_X})" --mesh X=4,Y=2 --format png --out rs.png',
            'shardalg show "AllGather_X(A[I_X, J])" --mesh X=4 --format tikz',
        ),
    )
    s.add_argument("expr", metavar="EXPR", help="a tensor like 'A[I_X, J]{U_Y}' or a collective, or -")
    s.add_argument(
        "--mesh", metavar="X=4,Y=2", help="the mesh (numeric sizes; required unless EXPR declares one)"
    )
    s.add_argument("--sizes", metavar="I=1024,J=4096", help="dim sizes: cells show index ranges")
    s.add_argument(
        "--format",
        choices=("text", "tikz", *PICTURES),
        help="text grids (default), TikZ for LaTeX (needs only \\usepackage{tikz}), or a png/svg picture "
        "drawn with matplotlib (with --out)",
    )
    out = s.add_argument(
        "--out", metavar="FILE", help="the picture file for --format png|svg (the suffix may imply it)"
    )
    out.complete = FILE_COMPLETION  # type: ignore[attr-defined]
    s.set_defaults(handler=_show)
