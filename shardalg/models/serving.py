"""Serving end to end: a prefill of P tokens, then N generated tokens; time to first token, tokens per second
per user and per chip, and cost per million tokens from a price per chip-hour.

    >>> r = serve("llama-2-13b", mesh="X=8", sizes="B=32", hw="h100", prefill=2048, generate=256,
    ...           params="F=X,K=X,V=X", activations="F=X,K=X,V=X", price_per_chip_hour=2.5)  # doctest: +SKIP
    >>> r.ttft_s, r.tokens_per_s_per_user, r.cost_per_million_tokens                          # doctest: +SKIP

The prefill step is the prefill program (:func:`.expand.expand` phase ``prefill``: ``T = S = P``) priced by
:func:`.step.model_step`; it yields the first token, so the time to first token (TTFT) is that step. Its
attention core is causal (``softmax_{S,causal}``): the two products count half the prompt's (T, S) pairs,
T·S/2 = P²/2 (the training core's convention, :mod:`.inference`), and read the whole K/V cache; a decode step's
core counts every pair (its one new token attends to all S). Each
later token is one decode step (phase ``decode``) over a context of ``S = P + i`` tokens (the prompt and the
``i`` tokens generated before it), for ``i`` = 1 .. N − 1: every decode step is priced as a sum of per-op
rooflines (:mod:`.inference`) at its own ``S``, and the generation is their sum. The plans are made once: the
planner's choice for a statement, by bytes, compares costs affine in ``S``, so the plan chosen at both ends of
the range is chosen in between; that is checked, and where the ends differ every step is planned on its own.

Figures: ``total_s`` = TTFT + the decode steps; tokens per second per user = N / ``total_s``; in all
= B·N / ``total_s``; per chip = that over the devices; time per output token after the first = the decode
steps' sum over N − 1. Cost per million tokens = price per chip-hour × devices × ``total_s`` / 3600 over the
B·N generated tokens, × 10⁶ (prompt tokens are not counted as tokens served; the prefill's time is).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import sympy

from shardalg.algebra.context import as_sizes
from shardalg.algebra.mesh import as_mesh
from shardalg.algebra.symbols import dim_size
from shardalg.costs.chipspec import as_chip_text
from shardalg.costs.costmodel import CostModel
from shardalg.costs.nodes import place_in_nodes
from shardalg.costs.plancost import priced
from shardalg.costs.terms import Term, add, maximum, point
from shardalg.errors import IndivisibleDim, UsageError
from shardalg.notation.plan import Plan
from shardalg.notation.syntax import Program

from .analysis import Analysis, analyze
from .expand import expand, shard
from .inference import Roofline, inference_ops
from .memory import MemoryReport, model_memory
from .program import model_program
from .quantities import as_json, bytes_text, time_text
from .step import StepReport, _cost_model, _part_plans, _whole_step, model_step

__all__ = ["ServeReport", "serve"]

SECONDS_PER_HOUR = 3600
PER_MILLION = 1_000_000


@dataclass
class ServeReport:
    """A prefill and a generation: the prefill step's report, the first and last decode steps' reports, each
    decode step's (S, seconds), and the figures (see the module's docstring)."""

    prefill_tokens: int
    generate: int
    batch: int
    devices: int
    prefill: StepReport
    decode_first: StepReport | None
    decode_last: StepReport | None
    decode_steps: list[tuple[int, float]]
    price_per_chip_hour: float | None
    memory: MemoryReport  # at the longest cache of the request (S = P + N − 1)
    notes: list[tuple[str, str]] = field(default_factory=list)

    @property
    def longest(self) -> int:
        """The longest context of the request: the cache the memory is counted at."""
        return self.prefill_tokens + self.generate - 1

    @property
    def ttft_s(self) -> float:
        s = self.prefill.seconds
        assert s is not None  # serve refuses unbound sizes
        return s

    @property
    def decode_s(self) -> float:
        return float(sum(t for _, t in self.decode_steps))

    @property
    def total_s(self) -> float:
        return self.ttft_s + self.decode_s

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first (the decode steps' mean); None when N = 1."""
        return self.decode_s / len(self.decode_steps) if self.decode_steps else None

    @property
    def tokens_per_s_per_user(self) -> float:
        return self.generate / self.total_s

    @property
    def tokens_per_s(self) -> float:
        return self.batch * self.generate / self.total_s

    @property
    def tokens_per_s_per_chip(self) -> float:
        return self.tokens_per_s / self.devices

    @property
    def cost_per_million_tokens(self) -> float | None:
        if self.price_per_chip_hour is None:
            return None
        dollars = self.price_per_chip_hour * self.devices * self.total_s / SECONDS_PER_HOUR
        return dollars / (self.batch * self.generate) * PER_MILLION

    def to_json(self) -> dict[str, Any]:
        def step(r: StepReport | None) -> dict[str, Any] | None:
            return None if r is None else r.to_json()

        return {
            "prefill_tokens": self.prefill_tokens,
            "generate": self.generate,
            "batch": self.batch,
            "devices": self.devices,
            "chip": self.prefill.chip.name if self.prefill.chip is not None else None,
            "ttft_s": self.ttft_s,
            "tpot_s": self.tpot_s,
            "decode_s": self.decode_s,
            "total_s": self.total_s,
            "tokens_per_s": {
                "per_user": self.tokens_per_s_per_user,
                "per_chip": self.tokens_per_s_per_chip,
                "in_all": self.tokens_per_s,
            },
            "price_per_chip_hour": self.price_per_chip_hour,
            "cost_per_million_tokens": self.cost_per_million_tokens,
            "memory": {
                "bytes_per_device": as_json(self.memory.total),
                "at_S": self.longest,
                "hbm_bytes": self.memory.hbm,
                "fits": self.memory.fits,
            },
            "decode_steps": [{"S": s, "seconds": t} for s, t in self.decode_steps],
            "prefill": step(self.prefill),
            "decode_first": step(self.decode_first),
            "decode_last": step(self.decode_last),
            "defaults": [{"key": k, "value": v} for k, v in self.notes],
        }

    def __str__(self) -> str:
        return self.text()

    def text(self, steps: bool = False) -> str:
        """The figures and the defaults; with ``steps``, the prefill step and the last decode step op by op."""
        t = time_text
        chip = self.prefill.chip.name if self.prefill.chip is not None else "?"
        lines = [
            f"{'serve':<14} prefill {self.prefill_tokens:,} tokens + {self.generate:,} generated, batch "
            f"{self.batch:,}, on {self.devices:,} x {chip}; overlap {self.prefill.policy}; "
            f"{self.prefill.efficiency.label()}",
            f"{'TTFT':<14} {t(self.ttft_s)} (the prefill step)",
        ]
        if self.decode_steps:
            (s0, t0), (s1, t1) = self.decode_steps[0], self.decode_steps[-1]
            lines.append(
                f"{'decode':<14} {len(self.decode_steps):,} steps, {t(self.decode_s)} in all: "
                f"{t(t0)} at S={s0:,} .. {t(t1)} at S={s1:,}; per output token {t(self.tpot_s or 0.0)}"
            )
        lines += [
            f"{'total':<14} {t(self.total_s)} per request",
            f"{'tokens/s':<14} {self.tokens_per_s_per_user:.4g} per user, {self.tokens_per_s_per_chip:.4g} "
            f"per chip, {self.tokens_per_s:.4g} in all",
        ]
        fits = {True: "fits", False: "does NOT fit", None: "fit unknown"}[self.memory.fits]
        lines.append(
            f"{'memory':<14} {bytes_text(self.memory.total)} per device with the cache at S={self.longest:,}: "
            f"{fits} in {chip}'s HBM ({bytes_text(sympy.Float(self.memory.hbm or 0))})"
        )
        if self.cost_per_million_tokens is not None:
            lines.append(
                f"{'cost':<14} ${self.cost_per_million_tokens:.4g} per million generated tokens at "
                f"${self.price_per_chip_hour:g} per chip-hour"
            )
        for title, r in (("prefill step", self.prefill), ("last decode", self.decode_last)):
            if r is None or not steps:
                continue
            lines.append(f"-- {title}:")
            lines += [ln for ln in str(r).splitlines() if not ln.startswith("note:")]
        for k, v in self.notes:
            lines.append(f"note: {k}: {v}")
        return "\n".join(lines)


def _programs(
    model: Any,
    params: Mapping[str, tuple[str, ...]] | str | None,
    activations: Mapping[str, tuple[str, ...]] | str | None,
    dtype: str | None,
    kv_dtype: str | None,
) -> tuple[Program | str, Program | str]:
    """The prefill and decode programs: a preset expanded and sharded, or the two programs given."""
    if isinstance(model, tuple):
        if len(model) != 2 or params or activations or dtype or kv_dtype:
            raise UsageError(
                "serve takes a preset (with params, activations, dtype, kv_dtype) or two programs "
                "(prefill, decode) already sharded"
            )
        return model
    out = []
    for phase in ("prefill", "decode"):
        program = expand(model, phase, dtype, kv_dtype)
        if params or activations:
            program = shard(program, params, activations)
        out.append(program)
    return out[0], out[1]


def _positive(value: object, what: str, flag: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{what} is a positive whole number, not {value!r}", fix=f"e.g. {flag} 256")


def _devices(a: Analysis) -> int:
    d = a.model.devices
    if d.free_symbols:
        raise UsageError("serving needs every mesh axis sized", fix="e.g. --mesh X=8")
    return int(d)


def _step_terms(a: Analysis, costs: CostModel, shape: Roofline, sizes: Mapping[str, int]) -> list[Term]:
    """Each part's total (times its count) as a light term at peak rates, the plans priced at ``sizes``."""
    m = a.model
    out: list[Term] = []
    for once, count in ((False, m.layers), (True, sympy.Integer(1))):
        if shape is Roofline.PER_OP:
            ops = inference_ops(a, once, costs, sizes)
            if not ops:
                continue
            part = add(*(o.total for o in ops))
        else:
            steps = tuple(s for phase in _part_plans(a, once) for p in phase for s in p.steps)
            if not steps:
                continue
            part = _whole_terms(Plan((), steps, steps[-1].output, note="part"), a, costs, sizes)
        out.append(part * int(count))
    return out


def _whole_terms(plan: Plan, a: Analysis, costs: CostModel, sizes: Mapping[str, int]) -> Term:
    """A part under the whole-step roofline, as a light term at ``sizes``."""
    cost = priced(plan, a.model.mesh, sizes, costs)
    light = {k: cost.light(k) for k in ("compute", "memory", "comms", "total")}
    return _whole_step(
        costs.overlap, light["compute"], light["memory"], light["comms"], light["total"], add=add, big=maximum
    )


def serve(
    model: Any,
    mesh: Any = None,
    sizes: Mapping[str, int] | str | None = None,
    hw: Any = None,
    prefill: int = 0,
    generate: int = 1,
    *,
    params: Mapping[str, tuple[str, ...]] | str | None = None,
    activations: Mapping[str, tuple[str, ...]] | str | None = None,
    dtype: str | None = None,
    kv_dtype: str | None = None,
    price_per_chip_hour: float | None = None,
    overlap: object = None,
    mfu: float | str | None = None,
    hbm_efficiency: float | str | None = None,
    network_efficiency: float | str | None = None,
    roofline: object = None,
) -> ServeReport:
    """Serve ``model`` (a preset name or configuration, sharded by ``params`` and ``activations``; or a
    tuple of the prefill and decode programs): a prompt of ``prefill`` tokens, ``generate`` tokens out, the
    batch ``B`` from ``sizes``; on ``hw``. See the module's docstring for each figure."""
    _positive(prefill, "the prompt's length", "--prefill")
    _positive(generate, "the number of generated tokens", "--generate")
    if price_per_chip_hour is not None and (
        isinstance(price_per_chip_hour, bool) or not 0 < price_per_chip_hour < float("inf")
    ):
        raise UsageError(
            f"the price per chip-hour is a positive number, not {price_per_chip_hour!r}",
            fix="e.g. --price-per-chip-hour 2.5",
        )
    chip = as_chip_text(hw)
    if chip is None:
        raise UsageError("serving needs a chip for its seconds", fix="add --hw h100 (or another preset)")
    given_programs = model if isinstance(model, tuple) else ()  # their mesh line, when no mesh is given
    placed = place_in_nodes(as_mesh(mesh), chip, (), given_programs)  # a flat mesh larger than a GPU node
    mesh = placed.mesh
    given = dict(as_sizes(sizes))
    for dim, why in (("T", "--prefill"), ("S", "--prefill and --generate")):
        if dim in given:
            raise UsageError(f"serving sets {dim} from {why}; do not give it in the sizes")
    if "B" not in given:
        raise UsageError("serving needs the batch: sizes B=...", fix="e.g. --sizes B=32")
    pre_program, dec_program = _programs(model, params, activations, dtype, kv_dtype)
    options = dict(hbm_efficiency=hbm_efficiency, network_efficiency=network_efficiency, roofline=roofline)

    pre = analyze(model_program(pre_program, mesh, {**given, "T": prefill, "S": prefill}), "infer")
    pre_report = model_step(pre, chip, overlap, mfu, **options)
    if pre_report.seconds is None:
        raise UsageError("the prefill step stays symbolic: bind every size", fix="e.g. --sizes B=32")
    devices = _devices(pre)
    notes = [*placed.pairs(), *pre_report.notes]
    notes.append(
        (
            "ttft",
            "the prefill step: every prompt token through every layer, the first token's logits at the end",
        )
    )
    if not isinstance(model, tuple):
        notes.append(
            (
                "prefill",
                "the preset's prefill program: its attention core is causal (softmax_{S,causal}), its two "
                "products' FLOPs and compute over half the prompt's (T, S) pairs (T·S/2 at S = T = P, the "
                "training core's convention), its K/V read whole; its unembedding the last position only",
            )
        )

    steps: list[tuple[int, float]] = []
    first = last = None
    hi = pre
    if generate > 1:
        lengths = range(prefill + 1, prefill + generate)
        try:
            dec_model = model_program(dec_program, mesh, {**given, "S": lengths[0]})
            dec_model.with_sizes(S=lengths[-1])
        except IndivisibleDim as e:
            raise UsageError(
                f"the decode steps attend to S = {lengths[0]:,} .. {lengths[-1]:,} tokens, one more a step: "
                f"{e.message}",
                fix="leave S unsharded in --activations (the cache grows by a token each step)",
            ) from None
        lo = analyze(dec_model, "infer")
        hi = analyze(dec_model.with_sizes(S=lengths[-1]), "infer") if len(lengths) > 1 else lo
        first = model_step(lo, chip, overlap, mfu, **options)
        last = model_step(hi, chip, overlap, mfu, say_plans=False, **options) if hi is not lo else first
        # of the decode steps' notes, the first step's plan choice is said (the prefill's notes are shown)
        slower = dict(first.notes).get("plans")
        if slower is not None:
            notes.append(("decode plans", f"{slower} (the first decode step, S = {lengths[0]:,})"))
        if hi.forward_plans == lo.forward_plans:
            costs = _cost_model(hi, chip, first.policy, first.efficiency)
            unbound = {k: v for k, v in hi.model.sizes.items() if k != "S"}  # S: each step's own
            total = add(*_step_terms(hi, costs, first.roofline or Roofline.PER_OP, unbound))
            values = costs.efficiency.effective(chip.values())
            s = dim_size("S")
            for n in lengths:
                got = total.evaluate(point({**values, s: n}))
                if got is None:
                    raise UsageError("a decode step stays symbolic: bind every size", fix="e.g. --sizes B=32")
                steps.append((n, float(got)))
            notes.append(
                (
                    "decode",
                    f"{len(steps)} steps at S = {lengths[0]:,} .. {lengths[-1]:,}, each its own sum of per-op "
                    "rooflines; the plans are the same at both ends (chosen once, priced at each S)",
                )
            )
        else:
            for n in lengths:
                r = model_step(
                    analyze(dec_model.with_sizes(S=n), "infer"),
                    chip,
                    overlap,
                    mfu,
                    say_plans=False,
                    **options,
                )
                steps.append((n, float(r.seconds or 0.0)))
            notes.append(("decode", f"{len(steps)} steps, each planned and priced at its own S"))
    else:
        notes.append(("decode", "one token generated: it is the prefill's, there is no decode step"))
    notes.append(
        (
            "tokens",
            "tokens per second count generated tokens over the request's whole time (TTFT and decode); the cost "
            "is per million generated tokens, the prompt's time paid but its tokens not counted",
        )
    )
    memory = model_memory(hi, chip)
    if memory.fits is False:
        notes.append(
            (
                "memory",
                f"the model and its cache at S = {prefill + generate - 1:,} do not fit in {chip.name}'s HBM: "
                "the times above assume they did",
            )
        )
    return ServeReport(
        prefill,
        generate,
        int(given["B"]),
        devices,
        pre_report,
        first,
        last,
        steps,
        price_per_chip_hour,
        memory,
        notes,
    )
