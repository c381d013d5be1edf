"""``shardalg backward | verify``: derive the backward of a program; check one written by hand.

    shardalg backward "In[B_X, D] · W[D_X, F] -> Out[B_X, F]" --mesh X=4 --sizes B=65536,D=1024,F=4096
    shardalg verify "In[B_X, D] · W[D, F] -> Out[B_X, F]" "In[B_X, D] · dOut[B_X, F] -> dW[D, F]{U_X}" --mesh X=4

``verify`` also takes ``--forward F --backward B``. It exits 0 when the backward is right (warnings allowed),
1 with the differences otherwise. PROGRAM may be ``-`` to read standard input.
"""

from __future__ import annotations

import argparse
import sys

from shardalg.errors import UsageError
from shardalg.progress import task

from . import EXIT_ILLEGAL, EXIT_OK
from .common import add_format_or_json, add_seed, examples, json_text, program_text
from .hwmesh import mesh

FORMATS = ("text", "unicode", "latex", "json")


def _backward(args: argparse.Namespace) -> int:
    from shardalg.planning.backward import backward
    from shardalg.planning.symbolic import piecewise

    program, the_mesh = program_text(args.program), mesh(args.mesh or None)
    pieces = piecewise(
        lambda: backward(
            program,
            the_mesh,
            args.sizes,
            defer_reductions=args.defer_reductions,
            keep_gathered=args.keep_gathered,
        )
    )
    fmt = "json" if args.json else args.format
    checks = [_derivative(bw, args.seed) for _, bw in pieces] if args.check else [None] * len(pieces)
    if fmt == "json":
        got = [
            {**bw.to_json(), **({"check": c.to_json()} if c else {})}
            for (_, bw), c in zip(pieces, checks, strict=True)
        ]
        if len(pieces) == 1:
            print(json_text(got[0]))
        else:  # a plan's choice is piecewise in one size: each piece's backward with its condition
            print(
                json_text(
                    {"pieces": [{"where": where, **j} for (where, _), j in zip(pieces, got, strict=True)]}
                )
            )
        return _checked(pieces, checks)
    comment = "%" if fmt == "latex" else "#"
    for where, bw in pieces:
        if where:  # the cheapest plans differ with a size not given: this piece's backward
            print(f"{comment} where {where}:")
        out = str(bw) if fmt == "text" else getattr(bw, fmt)()
        # one newline ends it, as a plan's: LaTeX's ends its last `%` note with one of its own, and a blank line
        # would end a paragraph inside the math that includes it (`\[ \input{bw.tex} \]`)
        print(out.rstrip("\n"))
    return _checked(pieces, checks)


def _derivative(bw: object, seed: int) -> object:
    """``--check``: the derived backward against the forward's derivative (:mod:`shardalg.numeric.gradcheck`)."""
    from shardalg.numeric.gradcheck import gradcheck

    with task("checking the backward against the forward's derivative"):
        return gradcheck(bw, seed=seed)  # type: ignore[arg-type]


def _checked(pieces: list, checks: list) -> int:
    """Each check's line on stderr (after its piece's condition where the backward is piecewise); exit 1 when
    one failed, 0 otherwise (or without ``--check``)."""
    failed = False
    for (where, _), c in zip(pieces, checks, strict=True):
        if c is None:
            continue
        print(f"{'where ' + where + ': ' if where else ''}{c}", file=sys.stderr)
        failed = failed or not c.ok
    return EXIT_ILLEGAL if failed else EXIT_OK


def _verify_programs(args: argparse.Namespace) -> tuple[str, str]:
    """FORWARD and BACKWARD: each from its option (``--forward``, ``--backward``) or else from the
    positional arguments, in order (``verify --forward F B`` reads B as the backward); a program given both
    ways, or one missing, is a UsageError."""
    roles = {"forward": args.forward_opt, "backward": args.backward_opt}
    given = [text for text in (args.forward, args.backward) if text is not None]
    free = [role for role, text in roles.items() if text is None]
    if len(given) > len(free):
        said = " and ".join(f"--{role}" for role, text in roles.items() if text is not None)
        raise UsageError(
            f"{len(given)} programs given as arguments besides {said}: verify reads one forward and one "
            "backward",
            fix="give each program once: FORWARD BACKWARD, or --forward F --backward B",
        )
    roles.update(zip(free, given, strict=False))
    missing = [role for role, text in roles.items() if text is None]
    if missing:
        raise UsageError(
            f"verify needs the {' and the '.join(missing)} program",
            fix="give FORWARD BACKWARD, or --forward F --backward B",
        )
    return roles["forward"], roles["backward"]


def _verify(args: argparse.Namespace) -> int:
    from shardalg.planning.verify import verify

    forward, written = _verify_programs(args)
    report = verify(
        program_text(forward),
        program_text(written),
        mesh(args.mesh or None),
        args.sizes,
        defer_reductions=args.defer_reductions,
    )
    if args.json:
        print(json_text(report.to_json()))
    elif report.ok:
        print(str(report))
    if not report.ok:
        if not args.json:
            print(str(report), file=sys.stderr)
        return EXIT_ILLEGAL
    return EXIT_OK


def _common(p: argparse.ArgumentParser, json: bool = True) -> None:
    p.add_argument("--mesh", metavar="X=4,Y=2", help="the mesh (required unless the program declares one)")
    p.add_argument("--sizes", metavar="B=1024,D=4096", help="dim sizes, NAME=INT separated by commas")
    p.add_argument(
        "--defer-reductions",
        action="store_true",
        help="let gradients stay unreduced where their primal is replicated (not invariant)",
    )
    if json:
        p.add_argument("--json", action="store_true", help="print JSON")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "backward",
        help="derive the backward program",
        description="Derive the backward of PROGRAM: each product's two gradient einsums, in reverse order, "
        "planned from the cotangent's sharding to the gradient's (the primal's own).",
        epilog=examples(
            'shardalg backward "X[B, D] · W1[D, F_Y] -> H[B, F_Y]; H[B, F_Y] · W2[F_Y, D] -> Out[B, D]" '
            "--mesh Y=4"
        ),
    )
    p.add_argument(
        "program", metavar="PROGRAM", help="the forward program (quote it), or - for standard input"
    )
    add_format_or_json(p, FORMATS, "print JSON (= --format json)")
    p.add_argument(
        "--keep-gathered",
        action="store_true",
        help="read the forward's gathered copies instead of gathering again (costs their memory, "
        "shown in bytes per device)",
    )
    _common(p, json=False)
    p.add_argument(
        "--check",
        action="store_true",
        help="run the backward's plans on per-device buffers and hold each input's gradient against central "
        "differences of the forward (float64; small sizes for dims not given); exit 1 on a mismatch",
    )
    add_seed(p)
    p.set_defaults(handler=_backward)

    p = subparsers.add_parser(
        "verify",
        help="check a hand-written backward",
        description="Check BACKWARD (per-device statements; gradients named dW, dIn, ...) against FORWARD. "
        "Exit 0 when it is right, 1 with the differences.",
        epilog=examples(
            'shardalg verify "In[B_X, D] · W[D, F] -> Out[B_X, F]" "dOut[B_X, F] · W[D, F] -> '
            'dIn[B_X, D]; In[B_X, D] ·_LOCAL dOut[B_X, F] -> dW[D, F]{U_X}" --mesh X=4'
        ),
    )
    p.add_argument(
        "forward", metavar="FORWARD", nargs="?", help="the forward program, or - for standard input"
    )
    p.add_argument(
        "backward",
        metavar="BACKWARD",
        nargs="?",
        help="the hand-written backward program, or - for standard input",
    )
    p.add_argument("--forward", dest="forward_opt", metavar="F", help="the forward program")
    p.add_argument("--backward", dest="backward_opt", metavar="B", help="the hand-written backward program")
    _common(p)
    p.set_defaults(handler=_verify)
