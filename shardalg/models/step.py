"""Step time, tokens per second and days to train; inference steps (prefill, decode) as a sum of rooflines.

    >>> s = step_time("params W\\nIn[B_X, D] * W[D_X, F] -> Out[B_X, F]", mesh="X=4", hw="tpu-v5p")
    >>> s.total                                                     # doctest: +SKIP

Training: one repeated layer runs its forward plans, then its backward (the forward the remat policy
recomputes and the derived backward's plans), priced by phase (:mod:`shardalg.costs.phases`) under the overlap
policy (``steady``: each collective overlaps the compute of its own phase across layers, forward gathers behind
forward compute, gradient reductions behind backward compute; ``serial``: they add up; ``schedule``: the steps
of one layer as their dependencies allow); the step is ``layers`` times that plus the part outside the repeated
layer. The cost model's efficiencies scale the chip's rates (MFU: ``C`` becomes ``MFU*C``; HBM: ``W_hbm``;
network: ``W_ici``, ``W_dcn``, ``beta``), each said in the output, ``peak`` in words where it is 1
(:mod:`shardalg.costs.efficiency`). Inference: the forward only, as a sum of per-op rooflines
(:mod:`.inference`: each op the max of its compute, its HBM reads of the parameters and KV cache, and its
communication when not overlapped; the KV-cache read is the attention's own op), or with
``roofline="whole-step"`` one max over the whole part (the older accounting). A decode step is the forward of a
program that reads a KV cache; a prefill step is the forward of the training program (``mode="infer"``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import sympy
from sympy import Expr

from shardalg.algebra.mesh import as_mesh
from shardalg.algebra.symbols import quantity
from shardalg.costs.chipspec import as_chip_text
from shardalg.costs.costmodel import CostModel
from shardalg.costs.efficiency import Efficiencies
from shardalg.costs.hardware import Chip
from shardalg.costs.nodes import Placed, place_in_nodes
from shardalg.costs.phases import PHASES, PhasedCost, priced_by_phase
from shardalg.costs.schedule import OverlapPolicy, lanes_of
from shardalg.costs.terms import Term, point
from shardalg.errors import UsageError
from shardalg.notation.plan import Plan
from shardalg.notation.syntax import Op
from shardalg.planning import symbolic

from .analysis import Analysis, Remat, analyze
from .inference import Roofline, inference_ops
from .planchoice import plans_note, slower_plans
from .program import ModelProgram, model_program
from .stages import End, statement_ends
from .stepreport import SECONDS_PER_DAY, OpPart, Part, StepReport
from .trainstate import TrainState
from .zerostep import pass_analysis, step_parts

__all__ = [
    "StepReport",
    "step_time",
    "model_step",
    "DEFAULT_POLICY",
    "SECONDS_PER_DAY",
    "step_seconds",
    "PartSeconds",
    "OpPart",
]

DEFAULT_POLICY = OverlapPolicy.STEADY  # a whole step: the book's layer-level view (DESIGN.md section 5)
C = quantity("C")


def _cost_model(
    a: Analysis, chip: Chip | None, policy: OverlapPolicy, efficiency: Efficiencies | None = None
) -> CostModel:
    """The cost model a step is priced under: the chip, the policy, the efficiencies (default: the chip's
    measured ones, else peak), and in inference the HBM reads of its parameters and KV cache alone."""
    return CostModel.of(chip, overlap=policy, hbm=_hbm_names(a), efficiency=efficiency, on_chip=a.on_chip)


def _part_cost(name: str, phases: list[list[Plan]], a: Analysis, costs: CostModel) -> PhasedCost | None:
    """The plans of one part priced by phase (what overlaps what: :mod:`shardalg.costs.phases`): each phase's
    plans once, the part as a whole joined from them; None when it has no step."""
    if len(phases) > len(PHASES):
        raise ValueError(f"a part has at most {len(PHASES)} phases ({', '.join(PHASES)}), not {len(phases)}")
    return priced_by_phase(name, list(zip(PHASES, phases, strict=False)), a.model.mesh, a.model.sizes, costs)


def _whole_step(policy: OverlapPolicy, compute, memory, comms, scheduled, *, add, big):
    """The older inference accounting: one roofline over the whole part (``add`` and ``big`` are the sum and
    the max of the terms' kind: sympy's or floats')."""
    if policy is OverlapPolicy.SERIAL:
        return add(compute, memory, comms)
    if policy is OverlapPolicy.STEADY:
        return big(compute, memory, comms)
    return big(scheduled, memory)  # schedule: compute and collectives as dependencies allow; HBM beside


def _part(
    name: str,
    count: Expr,
    once: bool,
    plans: list[Plan],
    a: Analysis,
    costs: CostModel,
    roofline: Roofline | None,
) -> Part | None:
    cost = _part_cost(name, plans, a, costs)
    if cost is None:
        return None
    scale = costs.efficiency.scaling()

    def f(e: Expr | Term) -> Expr:
        e = e.sympy() if isinstance(e, Term) else e
        return e.subs(scale) if scale else e

    compute, comms, memory = f(cost.compute), f(cost.comms), f(cost.memory)
    if a.mode == "train":
        return Part(name, count, cost, compute, comms, memory, f(cost.total), hbm_counted=False)
    if roofline is Roofline.WHOLE_STEP:
        total = _whole_step(
            costs.overlap, compute, memory, comms, f(cost.total), add=sympy.Add, big=sympy.Max
        )
        return Part(name, count, cost, compute, comms, memory, total)
    ops = tuple(
        OpPart(o.name, o.kv_read, f(o.compute), f(o.hbm), f(o.comms), f(o.total), o.hbm_bytes.sympy())
        for o in inference_ops(a, once, costs)
    )
    total = sympy.Add(*(o.total for o in ops))
    return Part(name, count, cost, compute, sympy.Add(*(o.comms for o in ops)), memory, total, ops)


def _hbm_names(a: Analysis) -> tuple[str, ...] | None:
    """The tensors whose HBM reads an inference step counts (its parameters and KV cache); in training every
    einsum operand and result (None), but those that stay on chip (:attr:`Analysis.on_chip`)."""
    if a.mode != "infer":
        return None
    m = a.model
    keep = {v.name for v in (*m.params, *m.kv_cache)}
    return tuple(n for n, root in m.aliases.items() if root in keep)


def _part_plans(a: Analysis, once: bool, end: End | None = None) -> list[list[Plan]]:
    """The plans one part of a step runs, by phase: the forward; the backward (the forward it recomputes,
    then the gradients, and outside the layer the embedding lookup's: :mod:`.lookup`); ``end``: of the part
    outside, the statements at that end of a pipeline alone."""
    ends = statement_ends(a.model) if end is not None else {}

    def part(i: int) -> bool:
        return a.model.statements[i].once == once and (end is None or ends.get(i) is end)

    forward = [p for i, p in a.forward_plans.items() if part(i)]
    backward = [a.forward_plans[i] for i in a.recomputed if part(i)]
    backward += [p for info, p in a.grad_plans if part(info.index)]
    backward += [p for info, p in a.routing_transposes if part(info.index)]
    if once and end in (None, End.FIRST):  # the embedding lookup's gradient, on the embedding side
        backward += [g.plan for g in a.lookup_grads]
    return [forward, backward]


@dataclass(frozen=True)
class PartSeconds:
    """One part of a step in seconds on a chip (count: times per step), with each mesh axis's communication
    (under ``steady`` the part's comms is their maximum, under ``serial`` the sum of every collective); in an
    inference step priced per op, ``ops`` gives each op's (name, total); ``end``: the end of a pipeline that
    runs this piece of the part outside the repeated layer (:func:`step_seconds`' ``by_end``)."""

    name: str
    count: float
    compute: float
    comms: float
    hbm: float
    total: float
    axes: tuple[tuple[str, float], ...]
    ops: tuple[tuple[str, float], ...] = ()
    end: End | None = None


def step_seconds(
    analysis: Analysis,
    chip: Chip | str,
    policy: object = DEFAULT_POLICY,
    efficiency: Efficiencies | None = None,
    roofline: object = None,
    state: TrainState | None = None,
    by_end: bool = False,
) -> list[PartSeconds]:
    """The parts of a step (as :func:`model_step` prices them; efficiencies default to the chip's measured
    ones, else peak) straight in seconds, without building a formula: the fast path of a search over many
    shardings. Every size must be bound. None is :data:`DEFAULT_POLICY`, as in :func:`model_step`.
    ``by_end`` (a pipeline, one pass as written): the part outside priced apart at each end that runs it, the
    embedding side on stage 0 and the head on the last stage (:mod:`.stages`), each a part with its ``end``."""
    policy = OverlapPolicy.of(policy, DEFAULT_POLICY)
    a = analysis
    hw = as_chip_text(chip)
    if hw is None:
        raise UsageError("seconds need a chip: pass hw='tpu-v5e' (CLI: --hw tpu-v5e)")
    out: list[PartSeconds] = []
    state = state or TrainState()
    a, _ = pass_analysis(a, state, strict=False)
    costs = _cost_model(a, hw, policy, efficiency)
    at = point(costs.efficiency.effective(hw.values()))
    shape = Roofline.of(roofline) if a.mode == "infer" else None
    parts = [(*part, None) for part in step_parts(a, state, _part_plans, state.micro)]
    if by_end:  # the part outside, each end's statements priced apart (a pipeline runs them on two stages)
        if state.stage.stage or state.micro > 1:
            raise ValueError("the ends of a pipeline are priced for one pass of a step as written")
        parts = [p for p in parts if not p[0]]
        parts += [(True, "outside", sympy.Integer(1), _part_plans(a, True, e), e) for e in End]
    for once, name, count, plans, end in parts:
        cost = _part_cost(name, plans, a, costs)
        if cost is None:
            continue
        got = {k: cost.light(k).evaluate(at) for k in ("compute", "comms", "memory", "total")}
        axes: dict[str, float] = {}
        for sc in cost.steps:
            for lane in lanes_of(sc.step) if sc.step.op is not Op.EINSUM else ():
                axes[lane] = axes.get(lane, 0.0) + float(sc.comms.evaluate(at) or 0.0)
        if any(v is None for v in got.values()) or count.free_symbols:
            raise UsageError(
                f"seconds need every size bound; the {name} is symbolic",
                fix="bind every dim with --sizes (API: sizes={...})",
            )
        total, ops = float(got["total"]), ()  # type: ignore[arg-type]
        if shape is Roofline.WHOLE_STEP:  # as model_step's _part: HBM reads beside compute and communication
            total = _whole_step(
                policy, got["compute"], got["memory"], got["comms"], got["total"], add=_sum, big=max
            )
        elif shape is Roofline.PER_OP:
            timed = [(o, o.total.evaluate(at)) for o in inference_ops(a, once, costs)]
            ops = tuple((o.name, float(v or 0.0)) for o, v in timed)
            total = sum(v for _, v in ops)
            got["comms"] = sum(float(o.comms.evaluate(at) or 0.0) for o, _ in timed)
        out.append(
            PartSeconds(
                name,
                float(count),
                float(got["compute"]),  # type: ignore[arg-type]
                float(got["comms"]),  # type: ignore[arg-type]
                float(got["memory"]),  # type: ignore[arg-type]
                float(total),
                tuple(axes.items()),
                ops,
                end,
            )
        )
    return out


def _sum(*xs: float) -> float:
    return float(sum(xs))


def model_step(
    analysis: Analysis,
    chip: Chip | str | None = None,
    policy: object = None,
    mfu: float | str | None = None,
    train_tokens: float | None = None,
    *,
    hbm_efficiency: float | str | None = None,
    network_efficiency: float | str | None = None,
    roofline: object = None,
    state: TrainState | None = None,
    say_plans: bool = True,
) -> StepReport:
    """The step report of an analysed model (see :func:`step_time`); ``state``: the ZeRO stage and
    microbatches of a training step (:class:`shardalg.models.trainstate.TrainState`); ``say_plans``: note the
    forward products whose plan is slower than another of theirs (:mod:`.planchoice`; a caller that shows
    none of the report's notes, pricing many steps, leaves them out)."""
    a, m = analysis, analysis.model
    notes = list(a.notes)
    if policy is None:
        policy = DEFAULT_POLICY
        notes.append(
            (
                "overlap",
                f"{policy} (default for a whole step: compute and each axis's collectives overlap across "
                "layers"
                + (
                    ", each collective behind its own phase's compute: forward gathers the forward's, "
                    "gradient reductions the backward's)"
                    if a.mode == "train"
                    else "); in an inference op, its collectives hide behind its own compute and HBM reads"
                ),
            )
        )
    policy = OverlapPolicy.of(policy)
    hw = as_chip_text(chip)
    efficiency = Efficiencies.of(hw, mfu, hbm_efficiency, network_efficiency)
    notes += efficiency.notes()
    shape = None
    if a.mode == "infer":
        shape = Roofline.of(roofline)
        if roofline is None:
            notes.append(
                (
                    "roofline",
                    "per-op (default: each op the max of its compute, HBM reads and unhidden communication, "
                    "the step their sum; whole-step takes one max over the step)",
                )
            )
        if shape is Roofline.PER_OP and m.kv_cache:
            notes.append(
                (
                    "attention",
                    "the products that read the KV cache ("
                    + ", ".join(v.name for v in m.kv_cache)
                    + ") are one op, the attention core, whose HBM time is the KV-cache read ("
                    + (
                        "the softmax between them is part of it, its scores kept on chip"
                        if a.cores
                        else "the program writes no softmax between them, so no causal mask: every query is "
                        "priced against every key (softmax_{S,causal} halves a prefill's pairs)"
                    )
                    + "; a cache no product reads is read by it from its role)",
                )
            )
    elif roofline is not None:
        raise UsageError("--roofline prices an inference step; this step trains", fix="add --mode infer")
    parts: list[Part] = []
    state = state or TrainState()
    run, more = pass_analysis(a, state)
    notes += more
    costs = _cost_model(run, hw, policy, efficiency)
    # with no chip there are no seconds to compare
    slower = plans_note(slower_plans(a, costs), hw.name, policy) if say_plans and hw is not None else None
    if slower is not None:
        notes.append(slower)
    for once, name, count, plans in step_parts(run, state, _part_plans, state.micro):
        part = _part(name, count, once, plans, run, costs, shape)
        if part is not None:
            parts.append(part)
    if not parts:
        raise UsageError("nothing to time: the program has no product or collective")
    if m.tokens is None:
        notes.append(("tokens", "no 'tokens' declaration: tokens per second and days are not computed"))
    if train_tokens is not None and (isinstance(train_tokens, bool) or not train_tokens > 0):
        raise UsageError(
            f"the training tokens are a positive number, not {train_tokens!r}", fix="e.g. --tokens 15e12"
        )
    return StepReport(
        a, hw, policy, efficiency, parts, a.flops(), train_tokens, notes, roofline=shape, state=state
    )


def step_time(
    program: Any,
    mesh: Any = None,
    sizes: Mapping[str, int] | str | None = None,
    hw: Chip | str | None = None,
    overlap: object = None,
    mfu: float | str | None = None,
    tokens: float | None = None,
    remat: str | Iterable[str] | Remat | None = None,
    mode: str | None = None,
    *,
    hbm_efficiency: float | str | None = None,
    network_efficiency: float | str | None = None,
    roofline: object = None,
    keep_gathered: bool = False,
    **state: Any,
) -> StepReport:
    """The time of one step of ``program`` on ``mesh`` (training, or an inference step when the program
    declares a KV cache or ``mode="infer"``); ``tokens``: train on that many tokens (days to train);
    ``mfu``, ``hbm_efficiency``, ``network_efficiency``: fractions of peak (default: the chip's measured
    ones, else peak, said in the notes); ``roofline``: ``per-op`` (default) or ``whole-step`` (inference);
    ``state``: ``zero`` and ``microbatches`` (:class:`shardalg.models.trainstate.TrainState`);
    ``keep_gathered``: training's backward keeps the forward's gathered copies instead of gathering again.

    No plan is chosen by a made-up size: where the cheapest plan of a statement depends on sizes not given,
    :class:`~shardalg.planning.symbolic.NeedsSizes` is raised; where one size decides,
    ``shardalg.piecewise(lambda: step_time(...))`` gives each piece's step with its condition, as ``shardalg
    step`` prints them."""
    placed = Placed(None)
    if not isinstance(program, ModelProgram):  # a flat mesh larger than a GPU chip's node: placed, said
        placed = place_in_nodes(as_mesh(mesh), as_chip_text(hw), (), (program,))
        mesh = placed.mesh
    with symbolic.strict():
        model = program if isinstance(program, ModelProgram) else model_program(program, mesh, sizes)
        report = model_step(
            analyze(model, mode, remat, keep_gathered),
            hw,
            overlap,
            mfu,
            tokens,
            hbm_efficiency=hbm_efficiency,
            network_efficiency=network_efficiency,
            roofline=roofline,
            state=TrainState(**state),
        )
    report.notes[:0] = placed.pairs()
    return report
