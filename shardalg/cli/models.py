"""``shardalg memory | fit | step``: whole models — memory per device, fit and size questions, step and
training time (the presets' ``model`` command: :mod:`.presets`).

    shardalg model show llama-3-70b --params D=X --activations B=X | shardalg memory - --mesh X=256 --hw tpu-v5p
    shardalg fit PROGRAM --mesh X=16 --sizes T=4096 --hw tpu-v5p --solve-for B
    shardalg step PROGRAM --mesh X=8960 --sizes B=8960,T=4096 --hw tpu-v5p --mfu 0.4 --tokens 15e12

PROGRAM is the notation with role declarations (``params``, ``embeddings``, ``saved``, ``kvcache``, ``tokens``,
``layers``), or - for standard input. Every default not chosen on the command line is stated in the output.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from typing import Any

from shardalg.errors import UsageError

from . import EXIT_ILLEGAL, EXIT_OK
from .common import HelpFormatter, add_overlap, examples, json_text, no_made_up_sizes, program_text
from .hwmesh import HW_HELP, MESH_HELP, add_hw, add_slice, chip_and_mesh, say, slice_layout
from .serving import add_efficiencies, efficiency_options

_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?")


def _number(text: str | None, what: str) -> float | None:
    if text is None:
        return None
    example = {"--mfu": "0.4", "--host-link": "64e9"}.get(what, "15e12")
    if not _NUMBER.fullmatch(text.strip()):
        raise UsageError(f"{what} takes a positive number, not {text!r}", fix=f"e.g. {what} {example}")
    if not math.isfinite(value := float(text)):
        raise UsageError(
            f"{what} takes a finite number, not {text!r} (over 1.8e308)", fix=f"e.g. {what} {example}"
        )
    return value


def _program(args: argparse.Namespace) -> Any:
    from shardalg.notation.parse import parse

    program = parse(program_text(args.program))
    if not program.statements:  # a mesh, sizes or roles alone: a model of nothing, never measured as zero
        raise UsageError(
            "the program has no statement: there is no model to measure",
            fix="give a PROGRAM with its products (shardalg model show NAME prints one), or a preset",
        )
    if getattr(args, "attention", None) is not None:  # the attention core's form, set on its softmax
        from shardalg.models.expand import with_attention

        program = with_attention(program, args.attention)
    return program


def _model(args: argparse.Namespace, the_mesh: Any = None, program: Any = None) -> Any:
    """The model program of the command (``program``, else the one it reads), on ``the_mesh`` (``--slice``'s,
    ``--mesh`` or the program's ``mesh`` line, as priced on the chip: :func:`.hwmesh.chip_and_mesh`)."""
    from shardalg.models.program import model_program, refuse_sizes_it_lacks

    program = _program(args) if program is None else program
    refuse_sizes_it_lacks(program, args.sizes)
    return model_program(program, the_mesh, args.sizes)


def _memory_report(args: argparse.Namespace) -> Any:
    return _memory_reporter(args)()


def _memory_reporter(args: argparse.Namespace) -> Callable[[], Any]:
    """The program read (once: it may be standard input) and the memory report to make of it, as a call
    (``fit`` makes it again at a point of each interval of the size it solves for)."""
    from shardalg.models.analysis import analyze
    from shardalg.models.memory import model_memory

    layout = slice_layout(args)
    program = _program(args)  # read once (it may be standard input); its mesh line is placed as --mesh is
    hw, the_mesh, notes = chip_and_mesh(args, layout, program)
    say(notes)
    model = _model(args, the_mesh, program)

    def report() -> Any:
        made = model_memory(
            analyze(model, args.mode, args.remat), hw, args.optimizer, args.grads, **_state(args)
        )
        made.notes.extend(notes)
        return made

    return report


def _microbatches(args: argparse.Namespace) -> int | None:
    micro = args.microbatches
    if micro is not None and not re.fullmatch(r"[0-9]+", micro.strip()):
        raise UsageError(f"--microbatches takes a positive whole number, not {micro!r}", fix="e.g. 8")
    return int(micro) if micro is not None else None


def _state(args: argparse.Namespace) -> dict[str, Any]:
    """The training-state choices of the command line (precision, ZeRO stage, offload, microbatches: with
    ``--pipeline`` they are the pipeline's, not gradient accumulation's)."""
    micro = _microbatches(args)
    return {
        "precision": getattr(args, "precision", None),
        "zero": args.zero,
        "offload": getattr(args, "offload", None),
        "microbatches": None if getattr(args, "pipeline", None) is not None else micro,
        "host_link": _number(getattr(args, "host_link", None), "--host-link"),
        "logits": getattr(args, "logits", None),
    }


def _print(data: dict[str, Any] | str, as_json: bool) -> None:
    print(json_text(data) if as_json else data)


@no_made_up_sizes
def _memory(args: argparse.Namespace) -> int:
    report = _memory_report(args)
    if args.pipeline is not None:
        _with_pipeline(args, report.analysis, report.chip, report.to_json(), str(report))
        return EXIT_OK
    _refuse_pipeline_schedule(args)
    _print(_with_remedies(report, args.json), args.json)
    return EXIT_OK


def _with_remedies(report: Any, as_json: bool) -> dict[str, Any] | str:
    """The report, and when it does not fit, what would make it fit (each change priced)."""
    from shardalg.models.advice import smallest, to_fit

    remedies = to_fit(report)
    best = smallest(remedies)
    if as_json:
        return {
            **report.to_json(),
            "to_fit": [r.to_json() for r in remedies],
            "smallest_change": best.change if best is not None else None,
        }
    lines = [str(report)]
    if remedies:
        lines.append("to fit (each change alone, priced):")
        lines += [f"  {r}" for r in remedies]
        if best is not None:
            how = (
                "a change of layout: the model, the batch and the devices stay"
                if best.change_factor == 0
                else f"it changes the run as asked by {best.change_factor:.0%}, the least of those that fit"
            )
            lines.append(f"smallest change that fits: {best.change} ({how})")
    return "\n".join(lines)


def _check(report: Any, args: argparse.Namespace) -> int:
    """``fit --check``: the memory report with what would make it fit; exit 1 when it does not fit."""
    if report.chip is None:
        raise UsageError("fit --check needs a chip for its HBM", fix="add --hw tpu-v5p")
    if report.fits is None:
        raise UsageError("fit --check needs every size bound", fix="bind them with --sizes B=...,T=...")
    _print(_with_remedies(report, args.json), args.json)
    return EXIT_OK if report.fits else EXIT_ILLEGAL  # 1: it does not fit


def _pipeline_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--pipeline",
        metavar="AXIS",
        help="a mesh axis as pipeline stages (the program is one stage's sharding, never over AXIS): "
        "bubble, step and memory per stage",
    )
    p.add_argument(
        "--pipeline-schedule", metavar="NAME", help="1f1b (the default) or gpipe: activations in flight"
    )


def _refuse_pipeline_schedule(args: argparse.Namespace) -> None:
    if args.pipeline_schedule is not None:
        raise UsageError("--pipeline-schedule is a pipeline's", fix="add --pipeline AXIS")


def _with_pipeline(
    args: argparse.Namespace, analysis: Any, chip: Any, data: dict[str, Any], text: str
) -> None:
    """Print the report with the pipeline of ``--pipeline`` (:mod:`shardalg.models.pipeline`)."""
    from shardalg.models.pipeline import model_pipeline
    from shardalg.models.trainstate import TrainState

    state = TrainState(getattr(args, "optimizer", None), getattr(args, "grads", "param"), **_state(args))
    if args.microbatches is None:
        analysis.own_notes.append(("microbatches", "1 (default: --microbatches N)"))
    pipe = model_pipeline(
        analysis,
        chip,
        args.pipeline,
        _microbatches(args) or 1,
        args.pipeline_schedule,
        getattr(args, "overlap", None),
        state,
    )
    if args.json:
        _print({**data, "pipeline": pipe.to_json()}, True)
        return
    head, _, notes = text.partition("\nnote: ")
    lines = [head, *pipe.lines()]
    shown = {n for n in notes.split("\nnote: ") if n} if notes else set()
    extra = [f"{k}: {v}" for k, v in pipe.notes if f"{k}: {v}" not in shown]
    print("\n".join(lines + [f"note: {n}" for n in ([*notes.split("\nnote: ")] if notes else []) + extra]))


@no_made_up_sizes
def _fit(args: argparse.Namespace) -> int:
    from shardalg.models import fit
    from shardalg.models.conventions import memory_conventions
    from shardalg.models.slices import parse_slices
    from shardalg.planning.atpoint import deciding_at
    from shardalg.planning.symbolic import NeedsSizes, piecewise

    if args.check or args.solve_for is None:
        report = _memory_report(args)  # the program is read first, as by every command
        if args.solve_for is not None:
            raise UsageError("fit takes --check or --solve-for, not both")
        if not args.check:
            raise UsageError("fit needs --solve-for NAME (B, devices, slice, params) or --check")
        return _check(report, args)
    target = args.solve_for
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", target):
        raise UsageError(f"--solve-for takes a dim name, devices, slice or params, not {target!r}")
    make = _memory_reporter(args)
    try:
        if target in ("devices", "slice", "params"):
            report = make()
        else:  # the dim solved for may decide plans: any value's serves (fit.largest plans it again)
            try:
                with deciding_at(("dim", target), 1):
                    report = make()
            except NeedsSizes as err:
                if target in err.choice.symbols:
                    raise
                report = piecewise(make)[0][1]  # another size decides: as memory, one piece per interval
    except NeedsSizes:
        if args.hw is None and getattr(args, "slice", None) is None:  # what is missing first: the chip
            report = None
        else:
            raise
    if report is None or report.chip is None:
        raise UsageError(
            "fit needs a chip for its HBM", fix="add --hw tpu-v5p (or --hw base=tpu-v5p,hbm=96e9)"
        )
    extra: dict[str, Any] = {}
    if target == "devices":
        d = fit.fewest_devices(report)
    elif target == "slice":
        d, pick = fit.smallest_slice(report, parse_slices(args.slices) if args.slices else None)
        extra = {"slice": pick.text, "slice_source": pick.source}
    elif target == "params":
        d = fit.largest_params(report)
    else:
        d = fit.largest(report, target)
    if args.json:
        data = {
            "solve_for": target,
            **d.to_json(),
            **extra,
            "chip": report.chip.name,
            "hbm_bytes": report.hbm,
            "defaults": [{"key": k, "value": v} for k, v in report.notes],
            "conventions": [{"key": k, "value": v} for k, v in memory_conventions(report)],
        }
        _print(data, True)
    else:
        print(d)
        for k, v in report.notes:
            print(f"note: {k}: {v}")
        for k, v in memory_conventions(report):
            print(f"convention: {k}: {v}")
    return EXIT_OK


def _step(args: argparse.Namespace) -> int:
    from shardalg.models.analysis import analyze
    from shardalg.models.step import model_step
    from shardalg.models.trainstate import TrainState
    from shardalg.planning.symbolic import piecewise

    layout = slice_layout(args)
    program = _program(args)  # read once (it may be standard input); its mesh line is placed as --mesh is
    hw, the_mesh, notes = chip_and_mesh(args, layout, program)
    say(notes)
    model = _model(args, the_mesh, program)

    def run() -> tuple[Any, Any]:
        analysis = analyze(model, args.mode, args.remat)
        report = model_step(
            analysis,
            hw,
            args.overlap,
            args.mfu and _number(args.mfu, "--mfu"),
            _number(args.tokens, "--tokens"),
            **efficiency_options(args),  # type: ignore[arg-type]
            state=TrainState(**{k: v for k, v in _state(args).items() if k in ("zero", "microbatches")}),
        )
        return analysis, report

    pieces = piecewise(run)
    if len(pieces) > 1:  # a plan's choice is piecewise in one size: each piece's step with its condition
        _refuse_pipeline_schedule(args)
        if args.pipeline is not None or layout is not None:
            raise UsageError(
                "the step's plans differ with a size not given, and --pipeline or --slice time one plan",
                fix="give the size (--sizes)",
            )
        for _where, (_a, r) in pieces:
            r.notes.extend(notes)
        if args.json:
            _print({"pieces": [{"where": w, **r.to_json()} for w, (_a, r) in pieces]}, True)
        else:
            print("\n".join(f"where {w}:\n" + str(r) for w, (_a, r) in pieces))
        return EXIT_OK
    analysis, report = pieces[0][1]
    report.notes.extend(notes)
    if args.pipeline is not None:
        _with_pipeline(args, analysis, report.chip, report.to_json(), str(report))
        return EXIT_OK
    _refuse_pipeline_schedule(args)
    if layout is None:
        _print(report.to_json() if args.json else str(report), args.json)
        return EXIT_OK
    from shardalg.models.slicecomms import slice_comms, slice_lines

    if args.json:
        data = report.to_json()
        data["slice"] = {
            **layout.topology.to_json(),
            "mesh": layout.to_json()["axes"],
            "comms": [
                {"part": p.part, "axes": [c.to_json() for c in p.axes]} for p in slice_comms(report, layout)
            ],
        }
        _print(data, True)
    else:
        text = str(report).split("\nnote: ", 1)
        print(
            "\n".join([text[0], *slice_lines(report, layout)])
            + ("\nnote: " + text[1] if len(text) > 1 else "")
        )
    return EXIT_OK


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "program",
        metavar="PROGRAM",
        help="the model in the notation with its role declarations "
        "(params, embeddings, saved, kvcache, tokens, layers), or - for standard input",
    )
    p.add_argument(
        "--mesh",
        metavar="X=4,Y=2",
        help=MESH_HELP + " (required unless PROGRAM declares one); with --slice, logical axes as products of "
        "the slice's physical axes: X=x*y,Y=z",
    )
    p.add_argument("--sizes", metavar="B=1024,T=4096", help="dim sizes, NAME=INT separated by commas")
    add_hw(p, help=HW_HELP + "; its HBM is what the model must fit in")
    add_slice(p)
    p.add_argument(
        "--mode",
        choices=("train", "infer"),
        help="train (params, grads, optimizer, saved activations) or infer (params, KV cache); "
        "default: infer when PROGRAM declares a kvcache, else train",
    )
    p.add_argument(
        "--remat",
        metavar="POLICY",
        help="what the backward keeps, over the whole model: none (every activation it reads, the "
        "logits too), block (each layer's input and the head's; the logits made again), saved (the "
        "program's saved list) or names such as G,U,Out (the logits kept when named); default: the "
        "program's saved list, else none",
    )
    p.add_argument(
        "--attention",
        choices=("fused", "materialized"),
        help="the attention core's form, set on its softmax: fused (flash: the scores are not kept for "
        "the backward, each row's softmax statistics are) or materialized (the scores kept); the FLOPs "
        "are the same; default: as PROGRAM writes it (a preset's training program: fused)",
    )
    p.add_argument("--json", action="store_true", help="print the JSON documented in the README")


def _memory_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--optimizer",
        metavar="NAME",
        help="adam (fp32 moments, 8 bytes per parameter; the default), "
        "adam-fp32 (12), momentum (4), sgd (0), none, or a number of bytes per parameter",
    )
    p.add_argument(
        "--grads",
        choices=("param", "none"),
        default="param",
        help="count gradients in the parameters' dtype and sharding (param, the default) or not (none: "
        "applied as they are made, as the book's 10 bytes per parameter counts)",
    )
    _state_options(p)
    p.add_argument(
        "--offload",
        metavar="PARTS",
        help="keep optimizer (state and update; ZeRO-Offload), params (ZeRO-Infinity) or "
        "optimizer,params in host memory: host bytes and PCIe traffic per step",
    )
    p.add_argument(
        "--logits",
        metavar="POLICY",
        help="the head's logits: kept for the backward, recomputed, or chunked=N (a chunked loss: one "
        "chunk of tokens held at a time, none kept); default: as --remat does",
    )
    p.add_argument(
        "--host-link",
        metavar="BYTES_PER_S",
        help="the host link's bandwidth each way for --offload (default: the chip's, e.g. h100: "
        "PCIe Gen5, 64e9)",
    )


def _state_options(p: argparse.ArgumentParser, precision: bool = True) -> None:
    if precision:
        p.add_argument(
            "--precision",
            metavar="RECIPE",
            help="the dtypes of params, grads, master copy and moments: book (the default: the parameters' "
            "dtype, no master, fp32 moments), deepspeed (fp16 params and grads, fp32 master and moments: "
            "16 bytes per parameter with Adam), bf16, fp8; or changed: deepspeed,grads=fp32",
        )
    p.add_argument(
        "--zero",
        choices=("0", "1", "2", "3"),
        help="ZeRO stage over the data axes (the axes sharding the layer's input): 1 optimizer state, "
        "2 and gradients, 3 and parameters; default 0: as the program writes them",
    )
    p.add_argument(
        "--microbatches",
        metavar="N",
        help="gradient accumulation: the batch (the first 'tokens' dim) in N microbatches; "
        "activations are one microbatch's, the step N passes (default 1)",
    )


def _parser(sub: argparse._SubParsersAction, name: str, help: str, description: str, *example: str):
    return sub.add_parser(
        name, help=help, description=description, epilog=examples(*example), formatter_class=HelpFormatter
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = _parser(
        sub,
        "memory",
        "bytes per device by part (params, grads, optimizer, activations, KV cache)",
        "Count the memory of each device for a model in the notation: parameters, gradients, optimizer "
        "state, activations kept for the backward, KV cache and transient gathered weights, from each "
        "tensor's sharding; with --hw, whether it fits in HBM.",
        'shardalg memory "$(shardalg model show llama-3-8b --params D=X --activations B=X)" --mesh X=64 '
        "--sizes B=64,T=4096 --hw tpu-v5p",
        "shardalg model show llama-3-8b --params D=X --activations B=X | "
        "shardalg memory - --mesh X=64 --sizes B=64,T=4096 --hw tpu-v5p",
    )
    _common(p)
    _memory_options(p)
    _pipeline_options(p)
    p.set_defaults(handler=_memory)

    p = _parser(
        sub,
        "fit",
        "the largest batch, fewest devices, smallest slice or largest model that fits",
        "Derive a size from the memory per device and the chip's HBM, with each step: the largest value "
        "of a dim (--solve-for B), the fewest devices whose HBM holds the model (devices), the smallest "
        "allowed slice (slice), or the largest parameter count (params).",
        'shardalg fit "$(shardalg model show llama-3-70b --phase decode --dtype int8)" --mesh X=4,Y=4 '
        "--sizes S=8192 --hw tpu-v5e --solve-for B",
    )
    _common(p)
    _memory_options(p)
    p.add_argument(
        "--solve-for",
        metavar="NAME",
        help="a dim (its largest value that fits, e.g. B), devices, slice, or params",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="whether it fits: the memory report and what would make it fit; exit 1 when it does not",
    )
    p.add_argument(
        "--slices",
        metavar="2x2,4x4",
        help="allowed slice shapes for --solve-for slice "
        "(default: the chip's table, known for tpu-v5e and tpu-v5p)",
    )
    p.set_defaults(handler=_fit)

    p = _parser(
        sub,
        "step",
        "step time, tokens per second and days to train (or an inference roofline)",
        "Time one training step (forward, recomputed forward and the derived backward, priced under "
        "the overlap policy) or one inference step (a sum of per-op rooflines: each op's compute, HBM "
        "reads and communication) on a chip; a prefill and a generation end to end: shardalg serve.",
        "shardalg step PROGRAM --mesh X=256 --sizes B=256,T=4096 --hw tpu-v5p --mfu 0.4 --tokens 15e12",
    )
    _common(p)
    add_overlap(
        p,
        help="steady: compute and each axis's collectives overlap across layers (the default); "
        "serial: they add up; schedule: one layer's steps as their dependencies allow",
    )
    p.add_argument(
        "--mfu",
        metavar="FRACTION",
        help="model FLOPs utilisation: C becomes MFU*C (default: the chip's measured one, else peak, "
        "said in the output)",
    )
    add_efficiencies(p)
    _state_options(p, precision=False)
    p.add_argument(
        "--tokens", metavar="COUNT", help="train on this many tokens: days to train (needs 'tokens')"
    )
    _pipeline_options(p)
    p.set_defaults(handler=_step)
