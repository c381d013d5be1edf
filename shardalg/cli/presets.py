"""``shardalg model list | show``: the model presets, each number with its source, and one as a program in the
notation (sharded by dim if asked) that memory, fit, step, plan and backward accept.

    shardalg model list ; shardalg model show mixtral-8x7b --phase decode --format latex
"""

from __future__ import annotations

import argparse
import re
from fractions import Fraction

from shardalg.errors import UsageError

from . import EXIT_OK
from .models import _parser, _print


def _model_list(args: argparse.Namespace) -> int:
    from shardalg.models import presets

    configs = [presets.get(n) for n in presets.names()]
    if args.json:
        _print({"models": [c.to_json() for c in configs]}, True)
    else:
        for c in configs:
            print(f"{c.name:<14} {c.description}")
    return EXIT_OK


def _model_show(args: argparse.Namespace) -> int:
    from shardalg.models import presets
    from shardalg.models.expand import CAPACITY_FACTOR, attention_form, expand, shard
    from shardalg.notation.printing import render

    config = presets.get(args.name)
    cf = _capacity_factor(args.capacity_factor) or CAPACITY_FACTOR
    program = expand(
        config,
        args.phase,
        args.dtype,
        args.kv_dtype,
        functions=args.functions,
        capacity_factor=cf,
        attention=args.attention,
    )
    form, chosen = attention_form(args.attention, args.phase, args.functions)
    core = args.phase == "train" and args.functions  # the training core's form is written
    if args.params or args.activations or args.megatron_sp is not None:
        program = shard(program, args.params, args.activations, sequence=args.megatron_sp)
    if args.format == "json":
        _print(
            {
                "model": config.to_json(),
                "phase": args.phase,
                "functions": args.functions,
                "attention": {"form": form, "chosen": chosen} if core else None,
                "program": render(program, "json", spans=False),
            },
            True,
        )
        return EXIT_OK
    comment = "%" if args.format == "latex" else "#"
    print(f"{comment} {config.name}: {config.description}")
    for line in config.sources():
        print(f"{comment}   {line}")
    if config.check:
        print(f"{comment}   published: {config.check}")
    if config.moe and args.functions:
        given = (
            "given" if args.capacity_factor is not None else "default, a choice: --capacity-factor sets it"
        )
        print(
            f"{comment}   routing: top-{config.top_k.value if config.top_k else 1}, capacity factor "
            f"{float(cf):g} ({given}; Mixtral itself drops no token): C = cf·k·B·T/E slots an expert"
        )
    print(
        f"{comment} functions written (norms, softmax, gated activation, residual adds; --no-functions enters "
        "their results as inputs)"
        if args.functions
        else f"{comment} functions not written: their results are inputs (--no-functions)"
    )
    if core:
        print(
            f"{comment} attention: {form}"
            + (
                " (flash: softmax_{S,causal,flash}; the scores are not kept for the backward, each row's "
                "softmax statistics are"
                if form == "fused"
                else " (softmax_{S,causal}: the scores are written and kept for the backward"
            )
            + (
                "; given)"
                if chosen
                else "; the default, as the models train: --attention materialized keeps the scores)"
            )
        )
    print(render(program, args.format))
    return EXIT_OK


def _capacity_factor(text: str | None) -> Fraction | None:
    """``--capacity-factor``: a positive decimal (1.25), or None (the default)."""
    if text is None:
        return None
    if not re.fullmatch(r"[0-9]{1,6}(\.[0-9]{1,6})?", text) or Fraction(text) == 0:
        raise UsageError(f"--capacity-factor is a positive decimal such as 1.25, not {text!r}")
    return Fraction(text)


def register(sub: argparse._SubParsersAction) -> None:
    p = _parser(
        sub,
        "model",
        "model presets: list them, or show one as a program in the notation",
        "Model presets as data, each number with its source; 'show' expands one into a program that "
        "memory, fit, step, plan and backward accept.",
        "shardalg model show llama-3-70b --params D=X,F=Y --activations B=X,F=Y",
    )
    msub = p.add_subparsers(dest="model_command", metavar="{list,show}", parser_class=type(p))
    msub.required = True
    q = _parser(msub, "list", "every preset", "List the model presets.", "shardalg model list --json")
    q.add_argument(
        "--json", action="store_true", help="print each preset's numbers and their sources as JSON"
    )
    q.set_defaults(handler=_model_list)
    q = _parser(
        msub,
        "show",
        "one preset as a program in the notation",
        "Print a preset as a program in the notation (its numbers and sources as comments), sharded by "
        "dim if asked: parameters by --params, every other tensor by --activations; a parameter that would "
        "share an axis with its product's other operand (FSDP) is gathered first.",
        "shardalg model show mixtral-8x7b --phase decode --dtype int8 --format latex",
    )
    q.add_argument("name", metavar="NAME", help="a preset (shardalg model list)")
    q.add_argument(
        "--phase",
        choices=("train", "prefill", "decode"),
        default="train",
        help="train: one layer's forward and the unembedding (default); prefill: the prompt, with the "
        "attention core over its KV cache; decode: one token over a KV cache",
    )
    q.add_argument("--dtype", metavar="DTYPE", help="the parameters' dtype (default bf16), e.g. int8")
    q.add_argument("--kv-dtype", metavar="DTYPE", help="the KV cache's dtype (default: --dtype)")
    q.add_argument("--params", metavar="D=X,F=Y", help="shard the parameters: DIM=AXES (S=XY for two axes)")
    q.add_argument("--activations", metavar="B=X", help="shard the activations and KV cache: DIM=AXES")
    q.add_argument(
        "--functions",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="write the norms, the softmax, the gated activation and the residual adds in the notation "
        "(rmsnorm_D, softmax_S, silu, +; the default); --no-functions enters their results as inputs",
    )
    q.add_argument(
        "--attention",
        choices=("fused", "materialized"),
        help="the training core's form: fused (flash, softmax_{S,causal,flash}: the scores are not kept for "
        "the backward, each row's softmax statistics are; the default, said in the output) or materialized "
        "(the scores kept); the FLOPs are the same",
    )
    q.add_argument(
        "--capacity-factor",
        metavar="CF",
        help="with --functions, a MoE's capacity factor: each expert holds CF times its even share of the "
        "tokens' top-k choices (default 1.25, said in the output)",
    )
    q.add_argument(
        "--megatron-sp",
        metavar="AXES",
        help="Megatron sequence parallelism on these tensor-parallel axes (e.g. Y): the norm and elementwise "
        "regions sharded over the sequence dim, AllGather before and ReduceScatter after each "
        "tensor-parallel region instead of an AllReduce",
    )
    q.add_argument(
        "--format",
        choices=("text", "unicode", "latex", "json"),
        default="text",
        help="output format (default: text)",
    )
    q.set_defaults(handler=_model_show)
