"""``shardalg serve``: a model served end to end (prefill of P tokens, N generated), and the efficiency and
roofline options ``step`` shares with it.

    shardalg serve llama-2-13b --mesh X=8 --sizes B=32 --hw h100 --params F=X,K=X,V=X \\
        --activations F=X,K=X,V=X --prefill 2048 --generate 256 --price-per-chip-hour 2.5

Prints the time to first token, each decode step's range, tokens per second per user and per chip, the cost
per million generated tokens, the prefill step and the last decode step as sums of per-op rooflines, and every
default not chosen (efficiencies at peak said in words). ``--json``: ``ttft_s``, ``tokens_per_s``
(``per_user``, ``per_chip``, ``in_all``), ``cost_per_million_tokens`` and the rest (README).
"""

from __future__ import annotations

import argparse
import re

from shardalg.errors import UsageError

from . import EXIT_OK
from .common import HelpFormatter, add_overlap, examples, json_text
from .hwmesh import HW_HELP, MESH_HELP, add_hw, chip, mesh, say

_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+")
_WHOLE = re.compile(r"[0-9]+")


def number(text: str | None, flag: str, example: str = "0.4") -> float | None:
    """A positive finite number from the command line (a strict pattern, never evaluated), or None."""
    if text is None:
        return None
    if not _NUMBER.fullmatch(text.strip()) or not 0 < float(text) < float("inf"):
        raise UsageError(f"{flag} takes a positive number, not {text!r}", fix=f"e.g. {flag} {example}")
    return float(text)


def _whole(text: str, flag: str) -> int:
    if not _WHOLE.fullmatch(text.strip()) or int(text) < 1:
        raise UsageError(f"{flag} takes a positive whole number, not {text!r}", fix=f"e.g. {flag} 256")
    return int(text)


def add_efficiencies(p: argparse.ArgumentParser) -> None:
    """``--hbm-efficiency``, ``--net-efficiency`` (``--mfu`` is each command's own) and ``--roofline``."""
    p.add_argument(
        "--hbm-efficiency",
        metavar="FRACTION",
        help="fraction of peak HBM bandwidth reached: W_hbm becomes it times W_hbm "
        "(default: the chip's measured one, else peak, said in the output)",
    )
    p.add_argument(
        "--net-efficiency",
        metavar="FRACTION",
        help="fraction of peak network bandwidth reached: W_ici, W_dcn and beta scaled by it (latency not) "
        "(default: the chip's measured one, else peak)",
    )
    p.add_argument(
        "--roofline",
        choices=("per-op", "whole-step"),
        help="an inference step: per-op (each op the max of its compute, HBM reads and unhidden "
        "communication, the step their sum; the default) or whole-step (one max over the step)",
    )


def efficiency_options(args: argparse.Namespace) -> dict[str, object]:
    return {
        "hbm_efficiency": number(args.hbm_efficiency, "--hbm-efficiency", "0.9"),
        "network_efficiency": number(args.net_efficiency, "--net-efficiency", "0.8"),
        "roofline": args.roofline,
    }


def _serve(args: argparse.Namespace) -> int:
    from shardalg.models.serving import serve

    report = serve(  # a flat mesh larger than a GPU node is placed into nodes there, and noted
        args.name,
        mesh(args.mesh),
        args.sizes,
        chip(args.hw),
        _whole(args.prefill, "--prefill"),
        _whole(args.generate, "--generate"),
        params=args.params,
        activations=args.activations,
        dtype=args.dtype,
        kv_dtype=args.kv_dtype,
        price_per_chip_hour=number(args.price_per_chip_hour, "--price-per-chip-hour", "2.5"),
        overlap=args.overlap,
        mfu=number(args.mfu, "--mfu"),
        **efficiency_options(args),  # type: ignore[arg-type]
    )
    say(report.notes)  # the placement's note on stderr too
    print(json_text(report.to_json()) if args.json else report.text(args.steps))
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="serving end to end: time to first token, tokens per second, cost per million tokens",
        description="Serve a model preset: a prefill of --prefill tokens (the time to first token), then "
        "--generate tokens, each decode step over its own context, every step a sum of per-op rooflines; "
        "tokens per second per user and per chip, and the cost per million generated tokens at "
        "--price-per-chip-hour.",
        epilog=examples(
            "shardalg serve llama-2-13b --mesh X=8 --sizes B=32 --hw h100 --params F=X,K=X,V=X "
            "--activations F=X,K=X,V=X --prefill 2048 --generate 256 --price-per-chip-hour 2.5"
        ),
        formatter_class=HelpFormatter,
    )
    p.add_argument("name", metavar="NAME", help="a model preset (shardalg model list)")
    p.add_argument("--mesh", metavar="X=4,Y=2", required=True, help=MESH_HELP)
    p.add_argument("--sizes", metavar="B=32", required=True, help="the batch B (sequences served at once)")
    add_hw(p, help=HW_HELP)
    p.add_argument("--prefill", metavar="P", required=True, help="the prompt's tokens")
    p.add_argument(
        "--generate", metavar="N", required=True, help="the tokens generated (the first by the prefill)"
    )
    p.add_argument("--price-per-chip-hour", metavar="DOLLARS", help="the price of one chip for an hour")
    p.add_argument("--params", metavar="D=X,F=Y", help="shard the parameters: DIM=AXES (as model show)")
    p.add_argument("--activations", metavar="B=X", help="shard the activations and KV cache: DIM=AXES")
    p.add_argument("--dtype", metavar="DTYPE", help="the parameters' dtype (default bf16), e.g. int8")
    p.add_argument("--kv-dtype", metavar="DTYPE", help="the KV cache's dtype (default: --dtype)")
    add_overlap(
        p,
        help="steady: an op's collectives hide behind its compute and HBM reads (the default); serial: they "
        "add to it; schedule: as their dependencies allow",
    )
    p.add_argument(
        "--mfu",
        metavar="FRACTION",
        help="fraction of peak FLOP/s: C becomes MFU*C (default: the chip's, else peak)",
    )
    add_efficiencies(p)
    p.add_argument(
        "--steps", action="store_true", help="also print the prefill step and the last decode step, op by op"
    )
    p.add_argument("--json", action="store_true", help="print the JSON documented in the README")
    p.set_defaults(handler=_serve)
