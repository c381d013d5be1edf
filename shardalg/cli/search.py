"""``shardalg search``: the fastest sharding of a program that fits a memory cap, the best of each named
strategy (DP, FSDP, TP, FSDP+TP, SP, EP) and why each other one lost, as a ranked table.

    shardalg search PROGRAM --mesh X=2,Y=2 --sizes B=128,D=8192,F=32768 --hw tpu-v5e --memory 300MB --mode infer

PROGRAM is the notation without shardings, with ``params`` declared (``tokens B, T`` names the batch dims),
or - for standard input. A progress bar (``rich`` when installed: ``pip install 'shardalg[progress]'``, else
a line on stderr) shows on a terminal when the search takes more than a second; ``--quiet`` turns it off.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import time
from typing import Any

from shardalg.errors import UsageError

from . import EXIT_OK
from .common import (
    HelpFormatter,
    add_format_or_json,
    add_keep,
    add_overlap,
    examples,
    json_text,
    no_made_up_sizes,
    program_text,
    write_winner,
)
from .hwmesh import HW_HELP, MESH_HELP, add_hw, add_slice, chip_and_mesh, mesh, slice_layout

DELAY = 1.0  # seconds before a progress bar shows


class _Bar:
    """A progress callback for the searches (numeric, chain, graph; a per-statement search's total grows once
    its edges are counted): after :data:`DELAY` seconds, a rich bar on a terminal's stderr (a plain line when
    rich is not installed); nothing off a terminal."""

    def __init__(self, enabled: bool):
        self.enabled = enabled and sys.stderr.isatty()
        self.start = time.monotonic()
        self.bar: Any = None
        self.task: Any = None
        self.plain = False
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self.bar is None and not self.plain:
            if now - self.start < DELAY:
                return
            try:
                from rich.console import Console
                from rich.progress import Progress
            except ImportError:
                self.plain = True
            else:
                self.bar = Progress(console=Console(stderr=True), transient=True)
                self.bar.start()
                self.task = self.bar.add_task("search", total=total)
        if self.bar is not None:
            self.bar.update(self.task, completed=done, total=total)  # a per-statement search's grows
        elif now - self.last > 0.2 or done == total:
            self.last = now
            print(f"\rsearch: {done:,}/{total:,}", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
        elif self.plain:
            print(file=sys.stderr)


@no_made_up_sizes
def _search(args: argparse.Namespace) -> int:
    from shardalg.models.program import refuse_sizes_it_lacks
    from shardalg.notation.parse import parse
    from shardalg.notation.syntax import Program
    from shardalg.search.numeric import search

    if args.choose_degrees:  # the outer search over the slice's degrees (shardalg.cli.degrees)
        from .degrees import search_degrees_cli

        return search_degrees_cli(args, _Bar(not args.quiet))
    program = parse(program_text(args.program))
    if isinstance(program, Program):  # a size for a dim the program lacks would be ignored without a word
        refuse_sizes_it_lacks(program, args.sizes)
    layout = slice_layout(args)
    # the slice's logical mesh, and its chip unless --hw names one; else --mesh placed into --hw's nodes
    hw, the_mesh, notes = chip_and_mesh(args, layout)
    args.mesh_value, args.hw_value, args.slice_notes = the_mesh, hw, notes
    if args.per_statement:
        if args.zero is not None or args.precision is not None:
            raise UsageError(
                "--per-statement prices the book's recipe as written: --zero and --precision do not apply"
            )
        if args.keep_gathered:
            raise UsageError(
                "--per-statement's backward gathers again (its cap is a knapsack on parameter bytes, blind "
                "to kept copies): --keep-gathered does not apply"
            )
        return _per_statement(program, args)
    bar = _Bar(not args.quiet)
    try:
        result = search(
            program,
            **_settings(args),
            top=10 if args.top is None else args.top,
            progress=bar,
            precision=args.precision,
            zero=args.zero,
            keep_gathered=args.keep_gathered,
        )
    finally:
        bar.close()
    slice_notes = getattr(args, "slice_notes", [])
    if args.emit_program is not None:
        _emit(result, args.emit_program)
    if args.json:
        data = result.to_json()
        if args.explain:
            from shardalg.search.emit import explain_json

            data["explain"] = explain_json(result)
        if layout is not None:
            data["slice"] = {**layout.topology.to_json(), "mesh": layout.to_json()["axes"]}
        print(json_text(data))
        for k, v in [*result.notes, *slice_notes]:
            print(f"note: {k}: {v}", file=sys.stderr)
    elif args.format == "latex":
        print(result.latex())
        for k, v in slice_notes:
            print(f"% note: {k}: {v}")
    else:
        print(result)
        if args.explain:
            from shardalg.search.emit import explain

            print()
            print(explain(result))
        for k, v in slice_notes:
            print(f"note: {k}: {v}")
        if args.emit_program is not None:
            print(f"note: the winner's program written to {args.emit_program}")
    return EXIT_OK


def _emit(result: Any, path: str) -> None:
    """Write the winner as a program file (:func:`.common.write_winner`)."""
    from shardalg.search.emit import program_file

    write_winner(result, path, program_file, "a larger mesh")


def _mesh_of(args: argparse.Namespace):
    """The mesh of ``--slice`` (factored by ``--mesh``), else ``--mesh``."""
    return getattr(args, "mesh_value", None) or mesh(args.mesh)


def _hw_of(args: argparse.Namespace):
    """The chip of ``--hw``, or the slice's."""
    return getattr(args, "hw_value", None) or args.hw


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    """What every search of the command takes from it: the mesh and the chip (or the slice's), the sizes, the
    memory cap, the mode, the optimizer, the remat policy and the overlap policy."""
    return {
        "mesh": _mesh_of(args),
        "sizes": args.sizes,
        "hw": _hw_of(args),
        "memory": args.memory,
        "mode": args.mode,
        "optimizer": args.optimizer,
        "remat": args.remat,
        "overlap": args.overlap,
    }


def _per_statement(program, args: argparse.Namespace) -> int:
    from shardalg.search.chainsolve import search_chain
    from shardalg.search.graph import is_graph

    if args.format != "text" or args.top is not None:
        raise UsageError(
            "--per-statement prints one choice per statement: --format latex and --top do not apply"
        )
    if is_graph(program):
        return _per_statement_graph(program, args)
    bar = _Bar(not args.quiet)
    try:
        result = search_chain(program, **_settings(args), progress=bar)
    finally:
        bar.close()
    return _print_per_statement(result, args)


def _per_statement_graph(program, args: argparse.Namespace) -> int:
    """A per-statement search over a dataflow graph that is not a chain (Q, K and V from one input): the tree
    DP or the integer program, its solver and whether it is optimal in the text and the JSON."""
    from shardalg.search.graph import search_graph

    bar = _Bar(not args.quiet)
    try:
        result = search_graph(program, **_settings(args), progress=bar)
    finally:
        bar.close()
    return _print_per_statement(result, args)


def _print_per_statement(result: Any, args: argparse.Namespace) -> int:
    """A per-statement search's result, text or JSON; the slice's notes after it (JSON: the problem's notes
    too, on stderr)."""
    slice_notes = getattr(args, "slice_notes", [])
    if args.json:
        print(json_text(result.to_json()))
        for k, v in [*result.problem.notes, *slice_notes]:
            print(f"note: {k}: {v}", file=sys.stderr)
    else:
        print(result)
        for k, v in slice_notes:
            print(f"note: {k}: {v}")
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "search",
        help="the fastest sharding that fits a memory cap, and why each strategy lost",
        description=textwrap.fill(
            "Search every assignment of mesh axes to the dims of the parameters and activations of PROGRAM "
            "(DP, FSDP, TP, FSDP+TP, sequence and expert parallelism among them), price each by its plans, "
            "derived backward, overlap policy and memory per device, and print the fastest that fits, the "
            "best of each named strategy, and a ranked table with each one's binding reason in numbers.",
            100,
        ),
        epilog=examples(
            'shardalg search "params W_in, W_out; In[B, D] * W_in[D, F] -> Tmp[B, F]; '
            'Tmp[B, F] * W_out[F, D] -> Out[B, D]" --mesh X=2,Y=2 --sizes B=128,D=8192,F=32768 '
            "--hw tpu-v5e --memory 300MB --mode infer"
        ),
        formatter_class=HelpFormatter,
    )
    p.add_argument(
        "program",
        metavar="PROGRAM",
        help="the program without shardings, with 'params' declared "
        "(and 'tokens B, T' for the batch dims), or - for standard input",
    )
    p.add_argument("--mesh", metavar="X=2,Y=2", help=MESH_HELP + " (every size given)")
    p.add_argument(
        "--sizes", metavar="B=128,D=8192", help="dim sizes, NAME=INT separated by commas (all of them)"
    )
    add_hw(p, help=HW_HELP + "; required unless --slice gives it")
    add_slice(p)
    p.add_argument(
        "--memory",
        metavar="BYTES",
        help="the memory cap per device, e.g. 300MB or 16GiB (default: the chip's HBM)",
    )
    p.add_argument(
        "--mode",
        choices=("train", "infer"),
        help="train (forward, derived backward, gradients and "
        "optimizer state; the default) or infer (forward; parameters, KV cache, gathered weights)",
    )
    p.add_argument(
        "--optimizer",
        metavar="NAME",
        help="training: adam (the default), adam-fp32, momentum, sgd, none, or bytes per parameter",
    )
    p.add_argument(
        "--remat",
        metavar="POLICY",
        help="training: none, block, saved or activation names "
        "(default: the program's saved list, else none)",
    )
    p.add_argument(
        "--precision",
        metavar="RECIPE",
        help="training: book (the default), deepspeed, bf16, fp8 (see shardalg memory --help)",
    )
    p.add_argument(
        "--zero",
        choices=("0", "1", "2", "3"),
        help="training: ZeRO stage over the data axes (1 optimizer state, 2 and gradients, 3 and "
        "parameters); 1 and 2 leave out the candidates that shard parameters over them",
    )
    add_overlap(
        p,
        help="steady (compute and each axis's collectives overlap; the default), serial (they add) "
        "or schedule (one layer's steps as their dependencies allow)",
    )
    add_keep(p)
    p.add_argument(
        "--top",
        type=int,
        metavar="K",
        help="rows of the ranked table (default 10); in training a candidate bounded out of every row and of "
        "its strategy's best is left unpriced",
    )
    add_format_or_json(
        p, ("text", "latex"), "print the JSON documented in the README", "the table as text or LaTeX"
    )
    p.add_argument(
        "--emit-program",
        metavar="FILE.sa",
        help="write the winner as a program (its mesh and sizes as lines, the search's settings as comments) "
        "that plan, backward, step, memory and export take",
    )
    p.add_argument(
        "--explain",
        action="store_true",
        help="print why each named strategy lost, in numbers: its time and memory against the winner's "
        "and the cap (JSON: 'explain')",
    )
    p.add_argument(
        "--per-statement",
        action="store_true",
        help="products of an activation by a parameter, a chain of layers (each statement fed by the "
        "one before) or a graph (statements reading one input, as Q, K and V): a sharding per statement, "
        "resharding between them, parameters within the cap (solved exactly by a DP on a chain or a tree, "
        "or an integer program when the cap binds or the graph has a cycle; the output names the solver "
        "and whether it is optimal)",
    )
    p.add_argument(
        "--choose-degrees",
        action="store_true",
        help="with --slice, training: choose the pipeline axis and microbatches, the pods over DCN and the "
        "factoring of the torus sides too, with a dimension map of the search space inside each (the winner's step and "
        "memory commands printed)",
    )
    p.set_defaults(handler=_search)
