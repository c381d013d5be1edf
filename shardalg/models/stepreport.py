"""The report of a step: its parts (the repeated layer, the part outside it; an inference step's ops), the
total, FLOPs, tokens and days, printed as text, a table and JSON (made by :mod:`.step`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import sympy
from sympy import Expr

from shardalg.algebra.symbols import QUANTITIES, quantity
from shardalg.costs.derive import compute_bound
from shardalg.costs.efficiency import Efficiencies
from shardalg.costs.hardware import Chip
from shardalg.costs.phases import PhasedCost
from shardalg.costs.schedule import OverlapPolicy
from shardalg.errors import UsageError
from shardalg.notation.printing.display import Shown, Table

from .analysis import Analysis, Flops
from .conventions import step_conventions
from .inference import Roofline
from .program import ModelProgram
from .quantities import as_json, as_text, time_text
from .trainstate import TrainState

__all__ = ["StepReport", "Part", "OpPart", "SECONDS_PER_DAY"]

SECONDS_PER_DAY = 86_400


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
    hbm_counted: bool = True  # False in training: the step's time is compute and communication alone

    def bound(self, values: Mapping[sympy.Symbol, float]) -> str | None:
        """Which term the part's time is bound by with the chip's numbers (of those its time counts: in
        training compute and communication, the HBM time beside), or None while symbolic; per op, the bound of
        the ops that take the most of the part's time."""
        if not self.ops:
            terms = {"compute": self.compute, "comms": self.comms}
            return _largest({**terms, "hbm": self.memory} if self.hbm_counted else terms, values)
        share: dict[str, Expr] = {}
        for op in self.ops:
            b = op.bound(values)
            if b is None:
                return None
            share[b] = share.get(b, sympy.Integer(0)) + op.total
        return _largest(share, values)

    def hbm_above(self, values: Mapping[sympy.Symbol, float]) -> bool:
        """Whether the HBM time, which a training step's time does not count, exceeds the part's time (the
        part would be HBM-bound if it did): said beside the bound, not hidden behind it."""
        if self.hbm_counted:
            return False
        gap = (self.memory - self.total).subs(values)
        return not getattr(gap, "free_symbols", None) and float(gap) > 0


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

    @property
    def unknown_sizes(self) -> tuple[sympy.Symbol, ...]:
        """The dim sizes the step's time still depends on (not the chip's quantities, links or axes)."""
        axes = {a.name for a in self.model.mesh}
        free = self.total.free_symbols
        return tuple(
            sorted(
                (
                    s
                    for s in free
                    if s.name not in QUANTITIES and s.name not in axes and not s.name.startswith("M_")
                ),
                key=lambda s: s.name,
            )
        )

    @property
    def compute_bound(self) -> Any:
        """A training step with a size left symbolic: the condition for every phase's compute to exceed its
        communication (each part, forward and backward apart, under the step's policy), from bandwidth
        terms alone (``T_min`` taken as 0, the book's bandwidth-bound regime), at the step's efficiencies,
        solved for the first unknown size; None for inference or when every size is known."""
        sizes = self.unknown_sizes
        if self.analysis.mode != "train" or not sizes:
            return None
        mapping = {quantity("T_min"): sympy.Integer(0), **self.efficiency.scaling()}
        found = [
            compute_bound(phase.cost, sizes[0], substitute=mapping).result
            for p in self.parts
            for phase in p.cost.phases
        ]
        return sympy.And(*found)

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
                    "hbm_counted": p.hbm_counted,
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
            **(
                {}
                if (bound := self.compute_bound) is None
                else {
                    "compute_bound": {
                        "condition": sympy.sstr(bound),
                        "on_chip": None if self.chip is None else sympy.sstr(bound.subs(self.values)),
                        "latency": False,
                    }
                }
            ),
            "flops": {
                "forward": as_json(self.flops.forward),
                "backward": as_json(self.flops.backward),
                "recompute": as_json(self.flops.recompute),
                "total": as_json(self.flops.total),
                "per_device": as_json(self.flops.total_per_device),
                "vector": as_json(self.flops.vector),
                "vector_per_device": as_json(self.flops.vector_per_device),
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
        return time_text(s) if s is not None else sympy.sstr(e)

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
            beside = (
                f"; HBM {t(p.memory)} above it, not counted in training" if p.hbm_above(self.values) else ""
            )
            lines.append(
                f"{p.name:<12} x{as_text(p.count)}: compute {t(p.compute)}, comms {t(p.comms)}, "
                f"HBM {t(p.memory)} -> {t(p.total)}" + (f" ({bound}-bound{beside})" if bound else "")
            )
            for o in p.ops:
                b = o.bound(self.values)
                lines.append(
                    f"  {'op':<10} {o.name}: compute {t(o.compute)}, comms {t(o.comms)}, HBM {t(o.memory)} "
                    f"-> {t(o.total)}" + (f" ({b}-bound)" if b else "")
                )
        lines.append(f"{'step time':<12} {t(self.total)}")
        bound = self.compute_bound
        if bound is not None:
            chip = (
                f"; on {self.chip.name}: {sympy.sstr(bound.subs(self.values))}"
                if self.chip is not None
                else ""
            )
            lines.append(
                f"{'compute':<12} bound when {sympy.sstr(bound)}{chip} (each phase's compute over its "
                "communication; bandwidth terms, T_min not counted)"
            )
        lines.append(
            f"{'FLOPs':<12} {as_text(self.flops.total)} in all, {as_text(self.flops.total_per_device)} "
            "per device"
        )
        if self.flops.vector != 0:
            lines.append(
                f"{'vector FLOPs':<12} {as_text(self.flops.vector)} in all, "
                f"{as_text(self.flops.vector_per_device)} per device (the functions' forward, apart)"
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
