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
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import sympy
from sympy import Expr

from shardalg.algebra.symbols import quantity
from shardalg.costs.chipspec import as_chip_text
from shardalg.costs.costmodel import CostModel
from shardalg.costs.efficiency import Efficiencies
from shardalg.costs.hardware import Chip
from shardalg.costs.phases import PHASES, Phase, PhasedCost, phased
from shardalg.costs.plancost import priced
from shardalg.costs.schedule import OverlapPolicy, lanes_of
from shardalg.costs.terms import Term, point
from shardalg.errors import UsageError
from shardalg.notation.plan import Plan
from shardalg.notation.printing.display import Shown, Table
from shardalg.notation.syntax import Op

from .analysis import Analysis, Flops, Remat, analyze
from .conventions import step_conventions
from .inference import Roofline, inference_ops
from .program import ModelProgram, model_program
from .quantities import as_json, as_text
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
SECONDS_PER_DAY = 86_400
C = quantity("C")


def _largest(terms: Mapping[str, Expr], values: Mapping[sympy.Symbol, float]) -> str | None:
    """The key of the largest term with the chip's numbers, or None while symbolic."""
    numbers = {k: v.subs(values) if isinstance(v, sympy.Basic) else v for k, v in terms.items()}
    if any(getattr(v, "free_symbols", None) for v in numbers.values()):
        return None
    return max(numbers, key=lambda k: float(numbers[k]))


@dataclass(frozen=True)
class OpPart:
    """One op of an inference step (:class:`.inference.OpRoofline`) as formulas at the cost model's
    efficiencies: compute, HBM time, communication and its roofline ``total``."""

    name: str
    kv_read: bool
    compute: Expr
    memory: Expr
    comms: Expr
    total: Expr
    hbm_bytes: Expr

    def bound(self, values: Mapping[sympy.Symbol, float]) -> str | None:
        return _largest({"compute": self.compute, "comms": self.comms, "hbm": self.memory}, values)


@dataclass(frozen=True)
class Part:
    """One part of a step (the repeated layer, or the part outside it): its terms in seconds (formulas); in
    an inference step priced per op, its ``ops`` (the part's total is their sum, compute, comms and memory
    their sums)."""

    name: str
    count: Expr
    cost: PhasedCost
    compute: Expr
    comms: Expr
    memory: Expr
    total: Expr
    ops: tuple[OpPart, ...] = ()

    def bound(self, values: Mapping[sympy.Symbol, float]) -> str | None:
        """Which term is the largest with the chip's numbers, or None while symbolic; per op, the bound of the
        ops that take the most of the part's time."""
        if not self.ops:
            return _largest({"compute": self.compute, "comms": self.comms, "hbm": self.memory}, values)
        share: dict[str, Expr] = {}
        for op in self.ops:
            b = op.bound(values)
            if b is None:
                return None
            share[b] = share.get(b, sympy.Integer(0)) + op.total
        return _largest(share, values)


@dataclass(repr=False)
class StepReport(Shown):
    """A step's time (a formula, and seconds on a chip), its parts, FLOPs and throughput."""

    analysis: Analysis
    chip: Chip | None
    policy: OverlapPolicy
    efficiency: Efficiencies
    parts: list[Part]
    flops: Flops
    train_tokens: float | None = None
    notes: list[tuple[str, str]] = field(default_factory=list)
    roofline: Roofline | None = None  # an inference step's: per op and summed, or once over the step
    state: TrainState = field(default_factory=TrainState)  # ZeRO stage, microbatches (training)

    @property
    def mfu(self) -> Fraction:
        return self.efficiency.compute.value

    @property
    def model(self) -> ModelProgram:
        return self.analysis.model

    @property
    def values(self) -> dict[sympy.Symbol, float]:
        return self.chip.values() if self.chip is not None else {}

    @property
    def total(self) -> Expr:
        return sympy.Add(*(p.count * p.total for p in self.parts))

    def seconds_of(self, expr: Expr | float) -> float | None:
        """An expression of this report (a part's total, compute, ...) in seconds with its chip's numbers; None
        while a symbol is unbound. Text is refused: it would have to go through sympy's parser."""
        if isinstance(expr, int | float):
            return float(expr)
        if not isinstance(expr, sympy.Basic):
            raise UsageError(f"seconds_of takes an expression of the report, not {type(expr).__name__}")
        v = expr.subs(self.values)
        return None if v.free_symbols else float(v)

    @property
    def seconds(self) -> float | None:
        return self.seconds_of(self.total)

    @property
    def tokens(self) -> Expr | None:
        return self.model.tokens

    @property
    def tokens_per_second(self) -> float | None:
        t, s = self.tokens, self.seconds
        if t is None or s is None or t.free_symbols:
            return None
        return float(t) / s

    @property
    def days(self) -> float | None:
        """Days to train on ``train_tokens`` at this step's tokens per second."""
        rate = self.tokens_per_second
        if self.train_tokens is None or rate is None:
            return None
        return self.train_tokens / rate / SECONDS_PER_DAY

    def to_json(self) -> dict[str, Any]:
        """The documented JSON (README, "JSON of shardalg step")."""

        def term(e: Expr) -> dict[str, Any]:
            return {"formula": sympy.sstr(e), "seconds": self.seconds_of(e)}

        return {
            "mode": self.analysis.mode,
            "overlap": self.policy.value,
            "roofline": self.roofline.value if self.roofline is not None else None,
            "mfu": float(self.mfu),
            "efficiency": self.efficiency.to_json(),
            "chip": self.chip.name if self.chip is not None else None,
            "layers": as_json(self.model.layers),
            "parts": [
                {
                    "part": p.name,
                    "count": as_json(p.count),
                    "compute": term(p.compute),
                    "comms": term(p.comms),
                    "hbm": term(p.memory),
                    "total": term(p.total),
                    "bound": p.bound(self.values),
                    "ops": [
                        {
                            "op": o.name,
                            "kv_read": o.kv_read,
                            "compute": term(o.compute),
                            "comms": term(o.comms),
                            "hbm": term(o.memory),
                            "hbm_bytes": as_json(o.hbm_bytes),
                            "total": term(o.total),
                            "bound": o.bound(self.values),
                        }
                        for o in p.ops
                    ],
                }
                for p in self.parts
            ],
            "step": term(self.total),
            "flops": {
                "forward": as_json(self.flops.forward),
                "backward": as_json(self.flops.backward),
                "recompute": as_json(self.flops.recompute),
                "total": as_json(self.flops.total),
                "per_device": as_json(self.flops.total_per_device),
            },
            "tokens_per_step": as_json(self.tokens),
            "tokens_per_second": self.tokens_per_second,
            "train_tokens": self.train_tokens,
            "days": self.days,
            "defaults": [{"key": k, "value": v} for k, v in self.notes],
            **(self.state.step_json() if self.analysis.mode == "train" else {}),
            "conventions": [{"key": k, "value": v} for k, v in step_conventions(self)],
        }

    def _t(self, e: Expr) -> str:
        s = self.seconds_of(e)
        return _time(s) if s is not None else sympy.sstr(e)

    def _what(self) -> str:
        mode = "training" if self.analysis.mode == "train" else "inference"
        chip = f" on {self.chip.name}" if self.chip is not None else ""
        return f"{mode}{chip}, overlap {self.policy}, MFU {float(self.mfu):g}"

    def summary(self) -> str:
        """``step 9.303 s (training on tpu-v5p, overlap steady, MFU 0.4); 44.01 days for 1.5e+13 tokens``."""
        days = f"; {self.days:.4g} days for {self.train_tokens:.4g} tokens" if self.days is not None else ""
        return f"step {self._t(self.total)} ({self._what()}){days}"

    def table(self) -> Table:
        """Each part (a layer, repeated; what is outside it) with its compute, communication and HBM time, the
        bound, then the step, the FLOPs and the throughput."""
        rows = [
            (
                p.name,
                as_text(p.count),
                self._t(p.compute),
                self._t(p.comms),
                self._t(p.memory),
                self._t(p.total),
                p.bound(self.values) or "-",
            )
            for p in self.parts
        ]
        rows.append(("step", "", "", "", "", self._t(self.total), ""))
        notes = [
            f"FLOPs: {as_text(self.flops.total)} in all, {as_text(self.flops.total_per_device)} per device"
        ]
        if self.tokens is not None:
            rate = self.tokens_per_second
            notes.append(
                f"tokens: {as_text(self.tokens)} per step"
                + (f", {rate:.4g} per second" if rate is not None else "")
            )
        if self.days is not None:
            notes.append(f"training: {self.train_tokens:.4g} tokens in {self.days:.4g} days")
        notes += [f"note: {k}: {v}" for k, v in self.notes]
        return Table(
            ("part", "count", "compute", "comms", "HBM", "time", "bound"),
            tuple(rows),
            f"step time: {self._what()}",
            notes=tuple(notes),
        )

    def __str__(self) -> str:
        t = self._t

        if self.analysis.mode == "train":
            what = "training (forward + backward)"
        elif self.roofline is Roofline.WHOLE_STEP:
            what = "inference (one roofline over each part: whole-step)"
        else:
            what = "inference (a sum of per-op rooflines)"
        lines = [
            f"{'step':<12} {what}; overlap {self.policy}; {self.efficiency.label()}"
            + (f"; chip {self.chip.name}" if self.chip is not None else "")
        ]
        for p in self.parts:
            bound = p.bound(self.values)
            lines.append(
                f"{p.name:<12} x{as_text(p.count)}: compute {t(p.compute)}, comms {t(p.comms)}, "
                f"HBM {t(p.memory)} -> {t(p.total)}" + (f" ({bound}-bound)" if bound else "")
            )
            for o in p.ops:
                b = o.bound(self.values)
                lines.append(
                    f"  {'op':<10} {o.name}: compute {t(o.compute)}, comms {t(o.comms)}, HBM {t(o.memory)} "
                    f"-> {t(o.total)}" + (f" ({b}-bound)" if b else "")
                )
        lines.append(f"{'step time':<12} {t(self.total)}")
        lines.append(
            f"{'FLOPs':<12} {as_text(self.flops.total)} in all, {as_text(self.flops.total_per_device)} "
            "per device"
        )
        if self.tokens is not None:
            rate = self.tokens_per_second
            lines.append(
                f"{'tokens':<12} {as_text(self.tokens)} per step"
                + (f", {rate:.4g} per second" if rate is not None else "")
            )
        if self.days is not None:
            lines.append(f"{'training':<12} {self.train_tokens:.4g} tokens in {self.days:.4g} days")
        for k, v in self.notes:
            lines.append(f"note: {k}: {v}")
        lines += [f"convention: {k}: {v}" for k, v in step_conventions(self)]
        return "\n".join(lines)


def _time(s: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.4g} {unit}"
    return f"{s * 1e9:.4g} ns"


def _cost_model(
    a: Analysis, chip: Chip | None, policy: OverlapPolicy, efficiency: Efficiencies | None = None
) -> CostModel:
    """The cost model a step is priced under: the chip, the policy, the efficiencies (default: the chip's
    measured ones, else peak), and in inference the HBM reads of its parameters and KV cache alone."""
    return CostModel.of(chip, overlap=policy, hbm=_hbm_names(a), efficiency=efficiency)


def _as_plan(plans: list[Plan], name: str) -> Plan | None:
    steps = tuple(s for p in plans for s in p.steps)
    return Plan((), steps, steps[-1].output, note=name) if steps else None


def _part_cost(name: str, phases: list[list[Plan]], a: Analysis, costs: CostModel) -> PhasedCost | None:
    """The plans of one part as one plan, priced under the cost model, with each phase's plans priced apart
    (what overlaps what: :mod:`shardalg.costs.phases`); None when it has no step."""
    m = a.model
    plan = _as_plan([p for phase in phases for p in phase], name)
    if plan is None:
        return None
    whole = priced(plan, m.mesh, m.sizes, costs)
    parts = []
    for phase_name, plans in zip(PHASES, phases, strict=False):
        got = _as_plan(plans, f"{name} {phase_name}")
        if got is not None:
            parts.append(Phase(phase_name, priced(got, m.mesh, m.sizes, costs)))
    return phased(whole, parts)


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
        return Part(name, count, cost, compute, comms, memory, f(cost.total))
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
    """The tensors whose HBM reads an inference step counts (its parameters and KV cache); None in training
    (every einsum operand and result)."""
    if a.mode != "infer":
        return None
    m = a.model
    keep = {v.name for v in (*m.params, *m.kv_cache)}
    return tuple(n for n, root in m.aliases.items() if root in keep)


def _part_plans(a: Analysis, once: bool) -> list[list[Plan]]:
    """The plans one part of a step runs, by phase: the forward; the backward (the forward it recomputes,
    then the gradients)."""
    by_index = {s.index: s for s in a.model.statements}
    forward = [p for i, p in a.forward_plans.items() if by_index[i].once == once]
    backward = [a.forward_plans[i] for i in a.recomputed if by_index[i].once == once]
    backward += [p for info, p in a.grad_plans if info.once == once]
    return [forward, backward]


@dataclass(frozen=True)
class PartSeconds:
    """One part of a step in seconds on a chip (count: times per step), with each mesh axis's communication
    (under ``steady`` the part's comms is their maximum, under ``serial`` the sum of every collective); in an
    inference step priced per op, ``ops`` gives each op's (name, total)."""

    name: str
    count: float
    compute: float
    comms: float
    hbm: float
    total: float
    axes: tuple[tuple[str, float], ...]
    ops: tuple[tuple[str, float], ...] = ()


def step_seconds(
    analysis: Analysis,
    chip: Chip | str,
    policy: object = DEFAULT_POLICY,
    efficiency: Efficiencies | None = None,
    roofline: object = None,
    state: TrainState | None = None,
) -> list[PartSeconds]:
    """The parts of a step (as :func:`model_step` prices them; efficiencies default to the chip's measured
    ones, else peak) straight in seconds, without building a formula: the fast path of a search over many
    shardings. Every size must be bound."""
    policy = OverlapPolicy.of(policy)
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
    for once, name, count, plans in step_parts(a, state, _part_plans, state.micro):
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
) -> StepReport:
    """The step report of an analysed model (see :func:`step_time`); ``state``: the ZeRO stage and
    microbatches of a training step (:class:`shardalg.models.trainstate.TrainState`)."""
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
                    + ") are one op, the attention core, whose HBM time is the KV-cache read (the softmax "
                    "between them is not in the notation; a cache no product reads is read by it from its role)",
                )
            )
    elif roofline is not None:
        raise UsageError("--roofline prices an inference step; this step trains", fix="add --mode infer")
    parts: list[Part] = []
    state = state or TrainState()
    run, more = pass_analysis(a, state)
    notes += more
    costs = _cost_model(run, hw, policy, efficiency)
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
    **state: Any,
) -> StepReport:
    """The time of one step of ``program`` on ``mesh`` (training, or an inference step when the program
    declares a KV cache or ``mode="infer"``); ``tokens``: train on that many tokens (days to train);
    ``mfu``, ``hbm_efficiency``, ``network_efficiency``: fractions of peak (default: the chip's measured
    ones, else peak, said in the notes); ``roofline``: ``per-op`` (default) or ``whole-step`` (inference);
    ``state``: ``zero`` and ``microbatches`` (:class:`shardalg.models.trainstate.TrainState`)."""
    model = program if isinstance(program, ModelProgram) else model_program(program, mesh, sizes)
    return model_step(
        analyze(model, mode, remat),
        hw,
        overlap,
        mfu,
        tokens,
        hbm_efficiency=hbm_efficiency,
        network_efficiency=network_efficiency,
        roofline=roofline,
        state=TrainState(**state),
    )
