"""What a candidate of the search pays that a better one does not: its step by phase and the collectives its
plans run, read off the plans the search priced, and the difference of two candidates' collectives (against
the fastest candidate above it with its parameters laid out alike, else the winner: :func:`against`).

A row of the ranked table says why a candidate lost. Its step is a sum over parts (the repeated layer, the
part outside it) and phases (forward, backward): under ``steady`` each phase takes max(its compute, its busiest
lane), so a step can be longer than its compute while its communication, summed over the step, is shorter (a
backward whose gradient reductions outlast its compute). :class:`Breakdown` holds each phase's times (the
binding term of each, and the step they sum to) and every collective with its bytes and seconds;
:func:`paid` is the collectives a candidate runs that another does not (a multiset difference: the same
operation over the same axes on the same tensor of the same bytes in the same phase cancels), each said
hidden under its phase's compute or exposed.

Each candidate's plans are made again here (its sharded program analysed whole under the search's settings):
the search keeps no plans, only prices. The search calls :func:`attach` for the rows it prints; the test
``tests/search/test_paid.py`` checks a breakdown's phases sum to the candidate's priced step.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from shardalg.costs.schedule import OverlapPolicy, lanes_of
from shardalg.costs.terms import point
from shardalg.models.analysis import analyze
from shardalg.models.program import model_program
from shardalg.models.step import _cost_model, _part_cost, _part_plans
from shardalg.models.trainstate import TrainState
from shardalg.models.zerostep import pass_analysis, step_parts
from shardalg.notation.plan import Op

from .price import Entry, Settings, size_text, time_text

__all__ = [
    "Move",
    "PhaseTime",
    "Breakdown",
    "breakdown",
    "paid",
    "paid_text",
    "against",
    "beyond_text",
    "pays_json",
    "attach",
]


@dataclass(frozen=True)
class Move:
    """One collective of a candidate's step: its part (``layer``, run ``count`` times a step, or ``outside``),
    phase, operation, axes, the tensor it moves, the bytes per device of the larger of its operand and result,
    its seconds (one run of the part), and whether it hides under its phase's compute (``hidden``: under
    ``steady``, its lane's collectives of the phase take no longer than the phase's compute; under ``serial``
    never; None under ``schedule``, whose critical path is not split by phase)."""

    part: str
    count: float
    phase: str
    op: Op
    axes: tuple[str, ...]
    tensor: str
    bytes: float
    seconds: float
    hidden: bool | None

    @property
    def key(self) -> tuple:
        """What cancels against another candidate's collective: the same move of the same bytes."""
        return (self.part, self.phase, self.op, self.axes, self.tensor, f"{self.bytes:.9g}")

    @property
    def name(self) -> str:
        """``AllGather_X``."""
        op = "AllReduce" if self.op.function else self.op.value  # a function's statistics are all-reduced
        return f"{op}_{''.join(self.axes)}"

    def to_json(self) -> dict[str, Any]:
        return {
            "part": self.part,
            "count": self.count,
            "phase": self.phase,
            "op": self.name.split("_")[0],
            "axes": list(self.axes),
            "tensor": self.tensor,
            "bytes_per_device": self.bytes,
            "seconds": self.seconds,
            "hidden": self.hidden,
        }


@dataclass(frozen=True)
class PhaseTime:
    """One phase of one part: its compute, its busiest lane (a mesh axis, ``chip`` for a function's local
    work) and that lane's seconds, and its time as the step counts it (one run of the part)."""

    part: str
    count: float
    phase: str
    compute: float
    lane: str | None
    comms: float
    total: float

    @property
    def bound(self) -> str:
        """``compute`` or ``comms X``: what the phase's time is."""
        return f"comms {self.lane}" if self.lane is not None and self.comms > self.compute else "compute"


@dataclass(frozen=True)
class Breakdown:
    """A candidate's step by part and phase, and its collectives."""

    phases: tuple[PhaseTime, ...]
    moves: tuple[Move, ...]
    serial: bool = False  # overlap ``serial``: a phase is its compute plus every collective
    sums: bool = True  # its phases sum to the step (training under ``steady`` or ``serial``)

    def off_text(self, e: Entry) -> str:
        """Where the phases should sum to ``e``'s priced step and do not (a price assembled from statements
        off its whole program's): ``; its whole program's plans take 304 us (its statements' sum: 339 us)``."""
        if (
            not self.sums
            or e.seconds is None
            or abs(self.seconds - e.seconds) <= 1e-9 * max(e.seconds, 1e-30)
        ):
            return ""
        return (
            f"; its whole program's plans take {time_text(self.seconds)} (its statements' sum: "
            f"{time_text(e.seconds)})"
        )

    @property
    def seconds(self) -> float:
        return sum(p.count * p.total for p in self.phases)

    def bound_text(self, e: Entry) -> str | None:
        """Why ``e``'s training step takes its time, phase by phase, the figure its step: ``compute-bound:
        3.59 ms (HBM 2.81 ms not counted in training, comms 750 us)`` when every phase is bound alike, else the
        phases bound by an axis, per step: ``comms Y-bound layer forward (1.53 s, compute 1.33 s), compute-bound
        otherwise: 5.25 s (compute 5.05 s, ...)``.
        None where the phases do not sum to its step (inference's per-op rooflines, ``schedule``)."""
        if e.seconds is None or e.hbm_counted or abs(self.seconds - e.seconds) > 1e-9 * max(e.seconds, 1e-30):
            return None
        if self.serial:  # every collective added to the compute
            hbm = f"HBM {time_text(e.hbm) if e.hbm else '0'} not counted in training"
            return (
                f"compute {time_text(e.compute)} + comms {time_text(e.comms) if e.comms else '0'} in series: "
                f"{time_text(e.seconds)} ({hbm})"
            )
        shown = [p for p in self.phases if p.total > 0]
        bounds = list(dict.fromkeys(p.bound for p in shown))
        rest = {"compute": e.compute, "HBM": e.hbm, "comms": e.comms}
        if len(bounds) == 1:
            lead = f"{bounds[0]}-bound"
            rest.pop(bounds[0].split()[0])
        else:
            one = len({p.part for p in shown}) == 1
            waits = [p for p in shown if p.bound != "compute"]
            lead = ", ".join(
                f"{p.bound}-bound {p.phase if one else f'{p.part} {p.phase}'} ({time_text(p.count * p.total)}, "
                f"compute {time_text(p.count * p.compute)})"
                for p in waits
            )
            lead += ", compute-bound otherwise" if len(waits) < len(shown) else ""
        others = ", ".join(
            f"{k} {time_text(v) if v else '0'}{' not counted in training' if k == 'HBM' else ''}"
            for k, v in rest.items()
        )
        return f"{lead}: {time_text(e.seconds)} ({others})"


def _size(model: Any, step: Any) -> float:
    """Bytes per device of the larger of a collective's operand and result."""
    return float(max(model.bytes_of(step.inputs[0]), model.bytes_of(step.output)))


def _lane(lane: str) -> str:
    return lane or "chip"


def breakdown(program: Any, settings: Settings, keep: bool) -> Breakdown:
    """The step of ``program`` (a candidate's sharded program) under the search's ``settings`` by part and
    phase, with each collective of its plans (training; inference: its parts, one phase each)."""
    st = settings
    model = model_program(program, st.mesh, st.sizes)
    a = analyze(model, st.mode, st.remat, keep_gathered=keep)
    state = st.state if st.mode == "train" else TrainState()
    a, _ = pass_analysis(a, state, strict=False)
    costs = _cost_model(a, st.chip, st.policy)
    at = point(costs.efficiency.effective(st.chip.values()))
    phases: list[PhaseTime] = []
    moves: list[Move] = []
    for _, name, count, plans in step_parts(a, state, _part_plans, state.micro):
        cost = _part_cost(name, plans, a, costs)
        if cost is None:
            continue
        for ph in cost.phases:
            lanes: dict[str, float] = {}
            rows = []
            renamed = {
                sc.step.inputs[0].name or "": sc.step.output.name or ""
                for sc in ph.cost.steps
                if sc.step.op is Op.RENAME
            }
            for sc in ph.cost.steps:
                if sc.step.op is Op.EINSUM:
                    continue
                c = float(sc.comms.evaluate(at) or 0.0)
                for lane in lanes_of(sc.step):
                    lanes[lane] = lanes.get(lane, 0.0) + c
                if sc.step.communicates and sc.step.axes:
                    rows.append((sc.step, 0.0 if sc.step.op.function else _size(model, sc.step), c))
            compute = float(ph.cost.light("compute").evaluate(at) or 0.0)
            total = float(ph.cost.light("total").evaluate(at) or 0.0)
            lane = max(lanes, key=lambda k: (lanes[k], k)) if lanes else None
            phases.append(
                PhaseTime(
                    name,
                    float(count),
                    ph.name,
                    compute,
                    None if lane is None else _lane(lane),
                    lanes.get(lane, 0.0) if lane is not None else 0.0,
                    total,
                )
            )
            for step, size, c in rows:
                lane_s = max(lanes.get(x, 0.0) for x in lanes_of(step))
                hidden = (
                    None
                    if st.policy is OverlapPolicy.SCHEDULE or st.mode != "train"
                    else st.policy is OverlapPolicy.STEADY and lane_s <= compute
                )
                tensor = step.inputs[0].name or "?"
                if step.op.function:
                    tensor = f"{tensor}'s {step.op.value} statistics"
                elif step.op is Op.ALL_GATHER:  # a gathered value named as the statement writes it: K, not Kp
                    tensor = renamed.get(step.output.name or "", tensor)
                moves.append(
                    Move(name, float(count), ph.name, step.op, tuple(step.axes), tensor, size, c, hidden)
                )
    sums = st.mode == "train" and st.policy is not OverlapPolicy.SCHEDULE
    return Breakdown(tuple(phases), tuple(moves), st.policy is OverlapPolicy.SERIAL, sums)


def paid(mine: Breakdown, theirs: Breakdown) -> tuple[Move, ...]:
    """The collectives of ``mine`` that ``theirs`` does not run (a multiset difference by :attr:`Move.key`),
    in the order ``mine`` runs them."""
    left = Counter(m.key for m in theirs.moves)
    out = []
    for m in mine.moves:
        if left[m.key]:
            left[m.key] -= 1
        else:
            out.append(m)
    return tuple(out)


def paid_text(moves: tuple[Move, ...]) -> str:
    """``AllGather_X of K, V: 2 x 4.19 MB, 1.5 ms per layer (forward, hidden under compute)``; collectives of
    one operation, axes, part, phase and exposure are said together."""
    groups: dict[tuple, list[Move]] = {}
    for m in moves:
        groups.setdefault((m.part, m.phase, m.name, m.hidden), []).append(m)
    out = []
    for (part, phase, name, hidden), ms in groups.items():
        by_size: dict[str, list[str]] = {}
        for m in ms:
            by_size.setdefault(size_text(m.bytes) if m.bytes else "", []).append(m.tensor)
        if len(by_size) == 1:
            ((size, names),) = by_size.items()
            said = _names(names) + (f": {_times(len(names), size)}" if size else "")
        else:
            said = ", ".join(
                f"{_names(n)} ({_times(len(n), s)})" if s else _names(n) for s, n in by_size.items()
            )
            said += ":"
        count = ms[0].count
        per = f" a layer, x{count:g} a step" if part == "layer" and count != 1 else ""
        where = {True: ", hidden under compute", False: ", exposed", None: ""}[hidden]
        said += "," if not said.endswith(":") else ""
        out.append(f"{name} of {said} {time_text(sum(m.seconds for m in ms))}{per} ({phase}{where})")
    return "; ".join(out)


def _names(names: list[str]) -> str:
    """``dHn x2, dHa x3``: each tensor once, with how many times it moves where more than once."""
    n = Counter(names)
    return ", ".join(f"{t} x{n[t]}" if n[t] > 1 else t for t in dict.fromkeys(names))


def _times(n: int, size: str) -> str:
    return f"{n} x {size}" if n > 1 else size


def against(ranked: list[Entry], e: Entry) -> Entry | None:
    """What ``e`` (a candidate of a search's ``ranked``, fastest first) is set against: the fastest candidate
    ranked above it with the parameters laid out alike (SP's whole parameters against DP's: what splitting
    the sequence rather than the batch costs), else the winner; None for the winner and a candidate over the
    cap."""
    if not ranked or e is ranked[0] or not e.fits:
        return None
    for x in ranked:
        if x is e:
            break
        if x.assignment.params_text == e.assignment.params_text:
            return x
    return ranked[0]


def beyond_text(moves: tuple[Move, ...], ref: Entry | None, winner: Entry | None) -> str:
    """``; beyond the winner's collectives: ...`` or ``; beyond the collectives of DP: params -; activations
    B=X (the fastest with these parameters): ...``; empty when it pays nothing more."""
    if not moves or ref is None:
        return ""
    whose = (
        "the winner's collectives"
        if ref is winner
        else f"the collectives of {ref.strategy}: {ref.assignment} (the fastest with these parameters)"
    )
    return f"; beyond {whose}: {paid_text(moves)}"


def pays_json(moves: tuple[Move, ...], ref: Entry | None) -> dict[str, Any]:
    """JSON's ``pays`` (the collectives) and ``pays_against`` (the candidate they are set against)."""
    return {
        "pays": [m.to_json() for m in moves],
        "pays_against": None
        if ref is None
        else {
            "strategy": ref.strategy,
            "params": ref.assignment.params_text,
            "activations": ref.assignment.activations_text,
        },
    }


def attach(entries: list[Entry], settings: Settings) -> None:
    """Each entry's :class:`Breakdown` (``entry.detail``), for the rows a result prints."""
    for e in entries:
        if e.seconds is not None and e.detail is None:
            e.detail = breakdown(e.program, settings, bool(e.keep is not None and e.keep.kept))
