"""Pipeline parallelism: one mesh axis as the stages of a model, its microbatches, the bubble of the
schedule, the stage boundaries as sends, and the memory of each stage.

    >>> r = pipeline_price(PROGRAM, "P=4,X=8", "B=256,D=4096,F=16384,L=32", "tpu-v5p", axis="P",
    ...                    microbatches=8)                                   # doctest: +SKIP
    >>> r.bubble, r.seconds, [s.total for s in r.stages]                     # doctest: +SKIP

The program is one stage's sharding: its tensors are sharded over the other axes, never over the pipeline
axis ``P`` (of ``p`` slices), and each stage's statements are planned among its own devices, on the mesh
without ``P`` (:func:`.stages.stage_analysis`: the other stages hold other layers; only the sends cross it).
The ``layers`` repeated layers are split evenly, ``layers/p`` a stage; of the part outside the repeated
layer, the embedding is on stage 0 and the head on the last stage (:mod:`.stages`). With ``m``
microbatches a schedule runs ``m + p − 1`` ticks of forward and as many of backward (GPipe and 1F1B alike);
the bubble, the idle fraction of each stage, is ``(p − 1)/(m + p − 1)`` (:data:`SCHEDULES`, as data).

A tick is one microbatch through one stage: the stage's step time (:func:`.step.model_step` of its
``layers/p`` layers, and at the ends the part outside that runs there, on the whole batch) over ``m`` (the
costs are taken linear in the batch: the latency terms, which are not, are counted ``m`` times over, as a
microbatch pays each), plus the stage boundary: ``Send_{P,+1}`` of the microbatch's layer input forward and
``Send_{P,-1}`` of its cotangent backward, each priced by the
:class:`~shardalg.costs.costmodel.CostModel` through the Send's record (:mod:`shardalg.algebra.ops.send`) and
counted serially with the compute (no overlap: stated in the notes).

The step with stage ticks ``t_s``: the slowest stage runs ``m`` ticks and every other stage's tick is paid
once in the fill and the drain, ``Σ t_s + (m − 1)·max t_s`` (a flow shop of ``m`` equal jobs; exact for GPipe,
and for 1F1B when the slowest stage is the last, where the head is). With equal stages it is
``(m + p − 1)·t``. The part outside the repeated layer runs at the ends (:mod:`.stages`), each piece priced
apart: the head on the last stage (it reads the last layer's output), whose tick is then the longest, and an
embedding's lookup, when the program writes one as a product before the layer, on stage 0.

Memory per stage: the parameters, gradients and optimizer state of its ``layers/p`` layers (and of the part
outside that it holds: the embedding on stage 0, the head's norm gain and unembedding on the last stage), and
the saved activations of each microbatch in flight (the logits on the last stage): GPipe keeps all ``m``, 1F1B
keeps ``min(p − s, m)`` on stage ``s`` (a microbatch's activations are the whole batch's over ``m``).

:func:`pipeline_price` is the price of one configuration (axis, microbatches, schedule); a search over the
pipeline degree and the microbatch count calls it per candidate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from math import ceil
from typing import Any

from shardalg.costs.chipspec import as_chip_text
from shardalg.costs.costmodel import CostModel
from shardalg.costs.hardware import Chip
from shardalg.costs.plancost import costed
from shardalg.errors import UsageError

from .analysis import Analysis, Remat, analyze
from .memory import MemoryReport, memory_with
from .program import model_program
from .quantities import dim_value
from .stages import End, outside_ends, row_owners, stage_analysis, stage_ends
from .step import step_seconds
from .trainstate import TrainState

__all__ = ["Schedule", "SCHEDULES", "StageMemory", "PipelineReport", "pipeline_price", "model_pipeline"]


@dataclass(frozen=True)
class Schedule:
    """A pipeline schedule as data: its bubble fraction and the microbatches stage ``s`` holds in flight,
    each a function of (stages p, microbatches m[, stage s])."""

    name: str
    description: str
    bubble: Callable[[int, int], Fraction]
    in_flight: Callable[[int, int, int], int]


def _fill_drain(p: int, m: int) -> Fraction:
    return Fraction(p - 1, m + p - 1)  # p − 1 idle ticks of m + p − 1


SCHEDULES: dict[str, Schedule] = {
    "1f1b": Schedule(
        "1f1b",
        "one forward, one backward after p − s warm-up forwards (PipeDream-flush)",
        _fill_drain,
        lambda p, m, s: min(p - s, m),
    ),
    "gpipe": Schedule(
        "gpipe", "every microbatch's forward, then every backward (GPipe)", _fill_drain, lambda p, m, s: m
    ),
}
DEFAULT_SCHEDULE = "1f1b"


@dataclass(frozen=True)
class StageMemory:
    """One stage's bytes per device: its parameters' part (params, grads, optimizer, transient) and the
    activations of the microbatches it holds in flight."""

    stage: int
    in_flight: int
    weights: float
    activations: float

    @property
    def total(self) -> float:
        return self.weights + self.activations

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "in_flight": self.in_flight,
            "weights": self.weights,
            "activations": self.activations,
            "total": self.total,
        }


@dataclass(frozen=True)
class PipelineReport:
    """A pipeline configuration's step time and memory per stage, in seconds and bytes on the chip."""

    axis: str
    stages: int
    microbatches: int
    schedule: Schedule
    layers_per_stage: int
    stage_seconds: float  # the last stage's compute and collectives on the whole batch (its layers, the head)
    send_seconds: float  # one microbatch's Send forward and its cotangent's back
    outside_seconds: (
        float  # of stage_seconds, the head's: the part outside the repeated layer the last stage runs
    )
    send_statement: str
    memory: tuple[StageMemory, ...]
    hbm: float | None
    notes: list[tuple[str, str]] = field(default_factory=list)
    first_seconds: float = 0.0  # the embedding side's: the part outside the repeated layer stage 0 runs

    @property
    def bubble(self) -> Fraction:
        return self.schedule.bubble(self.stages, self.microbatches)

    @property
    def ticks(self) -> int:
        return self.microbatches + self.stages - 1

    @property
    def stage_ticks(self) -> tuple[float, ...]:
        """Each stage's tick: its layers (stage 0 with the embedding side, the last with the head) over m, and
        the sends."""
        m = self.microbatches
        ticks = [(self.stage_seconds - self.outside_seconds) / m + self.send_seconds] * self.stages
        ticks[0] += self.first_seconds / m
        ticks[-1] += self.outside_seconds / m
        return tuple(ticks)

    @property
    def tick_seconds(self) -> float:
        """The slowest stage's tick (the last, with the head, unless the embedding side weighs more)."""
        return max(self.stage_ticks)

    @property
    def seconds(self) -> float:
        """The slowest stage's m ticks and each other stage's tick once (fill and drain)."""
        return (self.microbatches - 1) * self.tick_seconds + sum(self.stage_ticks)

    @property
    def bubble_seconds(self) -> float:
        """The fill and drain: the step less the slowest stage's m ticks."""
        return sum(self.stage_ticks) - self.tick_seconds

    @property
    def fits(self) -> bool | None:
        return None if self.hbm is None else max(s.total for s in self.memory) <= self.hbm

    def to_json(self) -> dict[str, Any]:
        return {
            "axis": self.axis,
            "stages": self.stages,
            "microbatches": self.microbatches,
            "pipeline_schedule": self.schedule.name,
            "layers_per_stage": self.layers_per_stage,
            "bubble": str(self.bubble),
            "bubble_fraction": float(self.bubble),
            "ticks": self.ticks,
            "stage_seconds": self.stage_seconds,
            "outside_seconds": self.outside_seconds,
            "first_seconds": self.first_seconds,
            "stage_ticks": list(self.stage_ticks),
            "send": self.send_statement,
            "send_seconds": self.send_seconds,
            "tick_seconds": self.tick_seconds,
            "bubble_seconds": self.bubble_seconds,
            "seconds": self.seconds,
            "memory_per_stage": [s.to_json() for s in self.memory],
            "hbm": self.hbm,
            "fits": self.fits,
            "notes": [{"key": k, "text": v} for k, v in self.notes],
        }

    def lines(self) -> list[str]:
        """The pipeline's lines of the text output."""
        p, m = self.stages, self.microbatches
        out = [
            f"{'pipeline':<12} {self.axis}: {p} stages of {self.layers_per_stage} layers, {m} microbatches, "
            f"schedule {self.schedule.name} ({self.schedule.description}); the lines above are the model "
            "without it, every layer on each device",
            f"{'bubble':<12} (p - 1)/(m + p - 1) = {self.bubble} = {float(self.bubble):.1%}"
            + (" of equal stages" if self.outside_seconds or self.first_seconds else "")
            + f": {self.bubble_seconds:.4g} s idle of {self.seconds:.4g} s",
            f"{'stage send':<12} {self.send_statement} and its cotangent back: {self.send_seconds:.4g} s a microbatch",
        ]
        if self.first_seconds:  # both ends weigh: stage 0 the embedding side, the last stage the head
            layers, ticks = self.stage_seconds - self.outside_seconds, self.stage_ticks
            slowest = max(range(p), key=lambda s: (ticks[s], s))  # the last of equal ticks
            out += [
                f"{'outside':<12} the part outside the repeated layer at the ends: the embedding side on stage 0, "
                f"{self.first_seconds:.4g} s, the head on the last stage, {self.outside_seconds:.4g} s (a stage's "
                f"layers {layers:.4g} s)",
                f"{'step':<12} {m} ticks of stage {slowest} x {self.tick_seconds:.4g} s + the other stages' ticks "
                f"once (stage 0's {ticks[0]:.4g} s, the last's {ticks[-1]:.4g} s, the others' "
                f"{ticks[1] if p > 2 else 0:.4g} s) = {m * self.tick_seconds:.4g} s + {self.bubble_seconds:.4g} s "
                f"= {self.seconds:.4g} s",
            ]
        elif not self.outside_seconds:
            out.append(
                f"{'step':<12} {self.ticks} ticks x ({self.stage_seconds:.4g} s / {m} + {self.send_seconds:.4g} s) "
                f"= {self.seconds:.4g} s"
            )
        else:
            light = self.stage_ticks[0]
            out += [
                f"{'outside':<12} the part outside the repeated layer on the last stage: {self.outside_seconds:.4g} s "
                f"of its {self.stage_seconds:.4g} s (its layers {self.stage_seconds - self.outside_seconds:.4g} s)",
                f"{'step':<12} {m} ticks of that stage x ({self.stage_seconds:.4g} s / {m} + "
                f"{self.send_seconds:.4g} s) + {p - 1} of the others x "
                f"({self.stage_seconds - self.outside_seconds:.4g} s / {m} + {self.send_seconds:.4g} s) = "
                f"{m * self.tick_seconds:.4g} s + {(p - 1) * light:.4g} s = {self.seconds:.4g} s",
            ]
        for s in self.memory:
            out.append(
                f"{'stage ' + str(s.stage):<12} {s.total / 1e9:.4g} GB: weights {s.weights / 1e9:.4g} GB, "
                f"activations {s.activations / 1e9:.4g} GB ({s.in_flight} microbatch"
                f"{'' if s.in_flight == 1 else 'es'} in flight)"
            )
        if self.hbm is not None:
            worst = max(s.total for s in self.memory)
            out.append(
                f"{'fits':<12} {'yes' if self.fits else 'no'} ({worst / 1e9:.4g} of {self.hbm / 1e9:.4g} GB)"
            )
        return out


def _number(x: Any, what: str) -> float:
    if getattr(x, "free_symbols", None):
        raise UsageError(f"a pipeline's {what} needs every size bound (it has {x})", fix="bind them: --sizes")
    return float(x)


def _check_axis(a: Analysis, axis: str) -> int:
    mesh = a.model.mesh
    if axis not in mesh.names:
        raise UsageError(
            f"the pipeline axis {axis} is not an axis of the mesh ({', '.join(mesh.names)})",
            fix=f"name one of {', '.join(mesh.names)}, e.g. --pipeline {mesh.names[0]}",
        )
    size = mesh[axis].size
    if size is None:
        raise UsageError(f"the pipeline axis {axis} needs a size", fix=f"--mesh {axis}=4,...")
    for v in a.model.values.values():
        t = v.tensor
        if axis in t.sharded_axes or axis in t.unreduced:
            raise UsageError(
                f"{v.name} is sharded over the pipeline axis {axis} ({t}); the pipeline axis holds the stages, "
                "and each stage's tensors are sharded over the other axes",
                fix=f"drop {axis} from the program's subscripts, or pipeline over another axis",
            )
    return int(size)


def model_pipeline(
    analysis: Analysis,
    chip: Chip | str,
    axis: str,
    microbatches: int,
    schedule: str | None = None,
    policy: object = None,
    state: TrainState | None = None,
) -> PipelineReport:
    """The price of one pipeline configuration of an analysed training program (see the module); ``state``
    the memory's choices (optimizer, grads, precision, ZeRO, offload, host link, logits; its microbatches are
    not the pipeline's, which are ``microbatches``)."""
    a = analysis
    if a.mode != "train":
        raise UsageError("a pipeline is priced for training (forward and backward ticks)", fix="--mode train")
    sched_name = schedule or DEFAULT_SCHEDULE
    if sched_name not in SCHEDULES:
        raise UsageError(
            f"the pipeline schedule is one of {', '.join(SCHEDULES)}, not {sched_name!r}",
            fix="e.g. --pipeline-schedule 1f1b",
        )
    sched = SCHEDULES[sched_name]
    if isinstance(microbatches, bool) or not isinstance(microbatches, int) or microbatches < 1:
        raise UsageError(
            f"the microbatch count is a positive integer, not {microbatches!r}", fix="--microbatches 8"
        )
    p, m = _check_axis(a, axis), microbatches
    notes: list[tuple[str, str]] = list(a.notes)
    if schedule is None:
        notes.append(("pipeline schedule", f"{sched.name} (default: {sched.description})"))
    layers = a.model.layers
    if getattr(layers, "free_symbols", None) or int(layers) % p:
        raise UsageError(
            f"{layers} layers do not split evenly into {p} stages of the pipeline axis {axis}",
            fix="a layer count that the pipeline axis divides",
        )
    per_stage = int(layers) // p
    chip_ = as_chip_text(chip)
    if chip_ is None:
        raise UsageError("a pipeline's step in seconds needs a chip", fix="--hw tpu-v5p")

    # the last stage's step on the whole batch: layers/p repeated layers and the head; the embedding side on
    # stage 0 (model_step's parts in seconds without their formulas, the part outside priced at each end)
    # planned among one stage's devices, on the mesh without the pipeline axis (.stages: the other stages hold
    # other layers, and the lookup's table is on stage 0 alone)
    stage, ends, own = 0.0, dict.fromkeys(End, 0.0), stage_analysis(a, axis)
    for part in step_seconds(own, chip_, policy, by_end=True):
        if part.end is None:
            stage += part.total * per_stage
        else:
            ends[part.end] += part.total * part.count
    stage += ends[End.LAST]

    # the stage boundary: the layer input of one microbatch, sent forward; its cotangent sent back
    send, send_text = _send_seconds(a, chip_, axis, p, m, notes)
    notes.append(
        (
            "pipeline",
            f"a tick is the stage's step over {m} microbatches (costs taken linear in the batch) plus the sends, "
            "counted serially with the compute; the part outside the repeated layer is on the ends: the "
            "embedding on stage 0 (and an embedding lookup's time), the head on the last stage; the step is "
            "the last stage's m ticks and each other stage's tick once (fill and drain); each stage's "
            f"statements planned among its own devices, on the mesh without {axis}, which only the sends cross",
        )
    )

    # the pipeline's own microbatches, not the state's
    mem = memory_with(own, chip_, state if state is not None else TrainState(), microbatches=None)
    stages = _stage_memory(mem, sched, p, m, per_stage)
    return PipelineReport(
        axis,
        p,
        m,
        sched,
        per_stage,
        stage,
        send,
        ends[End.LAST],
        send_text,
        stages,
        mem.hbm,
        notes,
        ends[End.FIRST],
    )


# a memory report's part as a stage holds it: the weights' three parts together (held whatever is in flight)
_STAGE_KIND = {"params": "weights", "grads": "weights", "optimizer": "weights"}


def _stage_memory(
    mem: MemoryReport, sched: Schedule, p: int, m: int, per_stage: int
) -> tuple[StageMemory, ...]:
    """Each stage's bytes: its ``per_stage`` repeated layers' rows of the memory report, and the rows outside
    the layer at the ends that hold them (:mod:`.stages`: the embedding side on stage 0, the head on the last).
    A microbatch's activations are the batch's over ``m``, times the microbatches the stage holds in flight; a
    weight's kept gathered copy is held once; the transient is the larger of a layer's gathered weights and
    those of the part outside the stage holds (the logits held while the head runs: one microbatch's)."""
    model = mem.analysis.model
    ends = outside_ends(model)
    micro = mem.micro[0] if mem.micro is not None else mem.analysis
    owners = row_owners(micro)
    sums: dict[tuple[str, End | None], float] = {}
    for part, name, b, _count in mem.rows:
        owner = owners.get(name, name)
        value = model.value_named(owner)
        kind = _STAGE_KIND.get(part, part)
        if kind == "activations" and value is not None and value.is_param:
            kind = "copies"  # a weight's gathered copy the backward keeps: held once, not a microbatch's
        bytes_ = _number(b, "memory")
        if kind == "transient" and (value is None or not value.is_param):
            bytes_ /= m  # the head's logits, held while it runs on one microbatch
        for end in ends.get(owner, (None,)):
            sums[kind, end] = sums.get((kind, end), 0.0) + bytes_

    def at(kind: str, held: frozenset[End]) -> float:
        return sum(sums.get((kind, e), 0.0) for e in held)

    out = []
    for s in range(p):
        flight, held = sched.in_flight(p, m, s), stage_ends(s, p)
        layer = {k: sums.get((k, None), 0.0) * per_stage for k in ("weights", "activations", "copies")}
        transient = max(sums.get(("transient", None), 0.0), at("transient", held))
        w = layer["weights"] + at("weights", held) + transient
        act = (
            (layer["activations"] + at("activations", held)) * flight / m
            + layer["copies"]
            + at("copies", held)
        )
        out.append(StageMemory(s, flight, w, act))
    return tuple(out)


def _send_seconds(
    a: Analysis, chip: Chip, axis: str, p: int, m: int, notes: list[tuple[str, str]]
) -> tuple[float, str]:
    """One microbatch's Send of the layer input to the next stage and of its cotangent back, in seconds."""
    model = a.model
    if not model.layer_inputs:
        raise UsageError(
            "the program's repeated layer reads no input from outside it: no stage boundary to send"
        )
    boundary = model.values[model.layer_inputs[0]].tensor
    _check_microbatches(model, boundary, m, notes)
    local = _number(model.bytes_of(boundary), "send") / m
    elements = ceil(local / 2)  # in bf16, as the Send's tensor is written
    if elements * 2 != local:
        notes.append(("stage send", f"{local:.6g} bytes a microbatch rounded up to {elements * 2} (bf16)"))
    sizes = {"S": p, "E": elements}
    total = 0.0
    text = ""
    for k in (+1, -1):
        text_k = f"Send_{{{axis},{k:+d}}}(H[S_{axis}, E]) -> H[S_{axis}, E]"
        cost = costed(text_k, model.mesh, sizes, CostModel.of(chip))
        total += _number(cost.seconds if cost.seconds is not None else cost.total, "send")
        text = text or f"Send_{{{axis},+1}} of {boundary.name} ({local:.6g} bytes)"
    return total, text


def _check_microbatches(model: Any, boundary: Any, m: int, notes: list[tuple[str, str]]) -> None:
    """Each chip's share of the first ``tokens`` dim of the layer input must split into ``m`` microbatches."""
    batch = next((d for d in boundary.dims if model.roles.tokens and d.label == model.roles.tokens[0]), None)
    if batch is None:
        notes.append(
            (
                "microbatches",
                f"{m} not checked against the batch (declare 'tokens B, ...' to check that each chip's "
                "batch splits into them)",
            )
        )
        return
    size = dim_value(batch, model.sizes)
    group = model.mesh.group_size(tuple(batch.axes))
    if getattr(size, "free_symbols", None) or group is None:
        return
    local = int(size) // group
    if local % m:
        raise UsageError(
            f"{m} microbatches do not split the {local} of {batch.label} each chip holds of {boundary.name}",
            fix=f"a microbatch count that divides {local}",
        )


def pipeline_price(
    program: Any,
    mesh: Any = None,
    sizes: Mapping[str, int] | str | None = None,
    hw: Chip | str | None = None,
    axis: str = "P",
    microbatches: int = 1,
    schedule: str | None = None,
    remat: str | Iterable[str] | Remat | None = None,
    overlap: object = None,
    state: TrainState | None = None,
) -> PipelineReport:
    """The price of a pipeline configuration: ``program`` (one stage's sharding, never over ``axis``) on
    ``mesh``, ``axis`` as the stages, ``microbatches`` and a schedule (``1f1b`` or ``gpipe``), the memory
    with ``state``'s choices (optimizer, precision, ZeRO...). The function a search over the pipeline degree and
    the microbatch count calls per candidate."""
    a = analyze(model_program(program, mesh, sizes), "train", remat)
    return model_pipeline(a, hw if hw is not None else "", axis, microbatches, schedule, overlap, state)
