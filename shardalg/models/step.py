"""Step time, tokens per second and days to train; inference steps (prefill, decode) as a roofline.

    >>> s = step_time("params W\\nIn[B_X, D] * W[D_X, F] -> Out[B_X, F]", mesh="X=4", hw="tpu-v5p")
    >>> s.total                                                     # doctest: +SKIP

Training: one repeated layer runs its forward plans, then its backward (the forward the remat policy
recomputes and the derived backward's plans), priced by phase (:mod:`shardalg.costs.phases`) under the overlap
policy (``steady``: each collective overlaps the compute of its own phase across layers, forward gathers behind
forward compute, gradient reductions behind backward compute; ``serial``: they add up; ``schedule``: the steps
of one layer as their dependencies allow); the step is ``layers`` times that plus the part outside the repeated layer. An MFU factor scales the
chip's FLOP/s (``C`` becomes ``MFU*C``). Inference: the forward only, as a roofline of compute, HBM reads
(the parameters and the KV cache each device holds) and communication, the max of the three under ``steady``,
their sum under ``serial``, and under ``schedule`` the plan's schedule beside the HBM reads. A decode step is the forward of a program that reads a KV cache; a prefill
step is the forward of the training program (``mode="infer"``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import sympy
from sympy import Expr, Integer

from shardalg.algebra.symbols import quantity
from shardalg.costs.chipspec import as_chip_text
from shardalg.costs.costmodel import CostModel
from shardalg.costs.hardware import Chip
from shardalg.costs.phases import PHASES, Phase, PhasedCost, phased
from shardalg.costs.plancost import priced
from shardalg.costs.schedule import OverlapPolicy, lanes_of
from shardalg.errors import UsageError
from shardalg.notation.plan import Plan
from shardalg.notation.syntax import Op

from .analysis import Analysis, Flops, Remat, analyze
from .program import ModelProgram, model_program
from .quantities import as_json, as_text

__all__ = [
    "StepReport",
    "step_time",
    "model_step",
    "DEFAULT_POLICY",
    "SECONDS_PER_DAY",
    "step_seconds",
    "PartSeconds",
]

DEFAULT_POLICY = OverlapPolicy.STEADY  # a whole step: the book's layer-level view (DESIGN.md section 5)
SECONDS_PER_DAY = 86_400
C = quantity("C")


def _mfu(mfu: float | str | None) -> Fraction:
    if mfu is None:
        return Fraction(1)
    try:
        value = Fraction(str(mfu)) if isinstance(mfu, str) else Fraction(mfu).limit_denominator(10**6)
    except (ValueError, ZeroDivisionError):
        raise UsageError(f"the MFU is a number between 0 and 1, not {mfu!r}", fix="e.g. --mfu 0.4") from None
    if not 0 < value <= 1:
        raise UsageError(f"the MFU is a fraction of peak FLOP/s in (0, 1], not {mfu}", fix="e.g. --mfu 0.4")
    return value


@dataclass(frozen=True)
class Part:
    """One part of a step (the repeated layer, or the part outside it): its terms in seconds (formulas)."""

    name: str
    count: Expr
    cost: PhasedCost
    compute: Expr
    comms: Expr
    memory: Expr
    total: Expr

    def bound(self, values: Mapping[sympy.Symbol, float]) -> str | None:
        """Which term is the largest with the chip's numbers, or None while symbolic."""
        terms = {"compute": self.compute, "comms": self.comms, "hbm": self.memory}
        numbers = {k: v.subs(values) if isinstance(v, sympy.Basic) else v for k, v in terms.items()}
        if any(getattr(v, "free_symbols", None) for v in numbers.values()):
            return None
        return max(numbers, key=lambda k: float(numbers[k]))


@dataclass
class StepReport:
    """A step's time (a formula, and seconds on a chip), its parts, FLOPs and throughput."""

    analysis: Analysis
    chip: Chip | None
    policy: OverlapPolicy
    mfu: Fraction
    parts: list[Part]
    flops: Flops
    train_tokens: float | None = None
    notes: list[tuple[str, str]] = field(default_factory=list)

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
            "mfu": float(self.mfu),
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
        }

    def __str__(self) -> str:
        def t(e: Expr) -> str:
            s = self.seconds_of(e)
            return _time(s) if s is not None else sympy.sstr(e)

        what = (
            "training (forward + backward)"
            if self.analysis.mode == "train"
            else "inference (forward roofline)"
        )
        lines = [
            f"{'step':<12} {what}; overlap {self.policy}; MFU {float(self.mfu):g}"
            + (f"; chip {self.chip.name}" if self.chip is not None else "")
        ]
        for p in self.parts:
            bound = p.bound(self.values)
            lines.append(
                f"{p.name:<12} x{as_text(p.count)}: compute {t(p.compute)}, comms {t(p.comms)}, "
                f"HBM {t(p.memory)} -> {t(p.total)}" + (f" ({bound}-bound)" if bound else "")
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
        return "\n".join(lines)


def _time(s: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.4g} {unit}"
    return f"{s * 1e9:.4g} ns"


def _cost_model(a: Analysis, chip: Chip | None, policy: OverlapPolicy) -> CostModel:
    """The cost model a step is priced under: the chip, the policy, and in inference the HBM reads of its
    parameters and KV cache alone."""
    return CostModel.of(chip, overlap=policy, hbm=_hbm_names(a))


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


def _part(
    name: str, count: Expr, plans: list[Plan], a: Analysis, costs: CostModel, mfu: Fraction
) -> Part | None:
    cost = _part_cost(name, plans, a, costs)
    policy = costs.overlap
    if cost is None:
        return None
    scale = {C: sympy.Rational(mfu.numerator, mfu.denominator) * C} if mfu != 1 else {}
    compute = cost.compute.subs(scale)
    if a.mode == "train":
        total = cost.total.subs(scale)
    else:
        terms = (compute, cost.memory, cost.comms)
        if policy is OverlapPolicy.SERIAL:
            total = sympy.Add(*terms)
        elif policy is OverlapPolicy.STEADY:
            total = sympy.Max(*terms)
        else:  # schedule: compute and collectives as their dependencies allow; HBM reads beside the compute
            total = sympy.Max(cost.total.subs(scale), cost.memory)
    return Part(name, count, cost, compute, cost.comms, cost.memory, total)


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
    (under ``steady`` the part's comms is their maximum, under ``serial`` the sum of every collective)."""

    name: str
    count: float
    compute: float
    comms: float
    hbm: float
    total: float
    axes: tuple[tuple[str, float], ...]


def step_seconds(analysis: Analysis, chip: Chip | str, policy: object = DEFAULT_POLICY) -> list[PartSeconds]:
    """The parts of a step (as :func:`model_step` prices them, at peak FLOP/s) straight in seconds, without
    building a formula: the fast path of a search over many shardings. Every size must be bound."""
    policy = OverlapPolicy.of(policy)
    a, m = analysis, analysis.model
    hw = as_chip_text(chip)
    if hw is None:
        raise UsageError("seconds need a chip: pass hw='tpu-v5e' (CLI: --hw tpu-v5e)")
    out: list[PartSeconds] = []
    costs = _cost_model(a, hw, policy)
    for once, name, count in ((False, "layer", m.layers), (True, "outside", Integer(1))):
        cost = _part_cost(name, _part_plans(a, once), a, costs)
        if cost is None:
            continue
        got = {k: cost.evaluate(cost.light(k)) for k in ("compute", "comms", "memory", "total")}
        axes: dict[str, float] = {}
        for sc in cost.steps:
            for lane in lanes_of(sc.step) if sc.step.op is not Op.EINSUM else ():
                axes[lane] = axes.get(lane, 0.0) + (cost.evaluate(sc.comms) or 0.0)
        if any(v is None for v in got.values()) or count.free_symbols:
            raise UsageError(
                f"seconds need every size bound; the {name} is symbolic",
                fix="bind every dim with --sizes (API: sizes={...})",
            )
        total = got["total"]
        if a.mode == "infer":  # as model_step's _part: HBM reads beside compute and communication
            terms = (got["compute"], got["memory"], got["comms"])
            if policy is OverlapPolicy.SERIAL:
                total = sum(terms)
            elif policy is OverlapPolicy.STEADY:
                total = max(terms)
            else:
                total = max(got["total"], got["memory"])
        out.append(
            PartSeconds(
                name, float(count), got["compute"], got["comms"], got["memory"], total, tuple(axes.items())
            )
        )
    return out


def model_step(
    analysis: Analysis,
    chip: Chip | str | None = None,
    policy: object = None,
    mfu: float | str | None = None,
    train_tokens: float | None = None,
) -> StepReport:
    """The step report of an analysed model (see :func:`step_time`)."""
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
                    else ")"
                ),
            )
        )
    policy = OverlapPolicy.of(policy)
    if mfu is None:
        notes.append(("mfu", "1 (default: peak FLOP/s)"))
    fraction = _mfu(mfu)
    hw = as_chip_text(chip)
    parts: list[Part] = []
    costs = _cost_model(a, hw, policy)
    for once, name, count in ((False, "layer", m.layers), (True, "outside", Integer(1))):
        part = _part(name, count, _part_plans(a, once), a, costs, fraction)
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
    return StepReport(a, hw, policy, fraction, parts, a.flops(), train_tokens, notes)


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
) -> StepReport:
    """The time of one step of ``program`` on ``mesh`` (training, or an inference step when the program
    declares a KV cache or ``mode="infer"``); ``tokens``: train on that many tokens (days to train)."""
    model = program if isinstance(program, ModelProgram) else model_program(program, mesh, sizes)
    return model_step(analyze(model, mode, remat), hw, overlap, mfu, tokens)
