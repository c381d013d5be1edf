"""Time is a schedule: a plan's steps on the resources they use, under an overlap policy (DESIGN.md section 5).

A plan is a DAG: a step reads tensors that earlier steps (or the plan's inputs) produced. Each mesh axis's
links are one resource and the chip's compute another; a collective over ``X`` and ``Y`` holds both axes,
a local einsum holds the compute, a slice holds nothing. The policy says what may overlap:

``schedule`` (a single plan's default)
    a step starts when its inputs exist and its resources are free (each resource runs its steps in plan
    order); the time is the critical path. A gather, then the product, then an AllReduce add up; two
    independent gathers on different axes overlap.
``steady`` (the book's layer-level view)
    communication on each axis and compute overlap across layers: max(compute, max over axes of that axis's
    communication). A derivation of the book names this policy.
``serial``
    everything adds up.

    >>> s = build(durations, lanes, dependencies(steps), "schedule")     # doctest: +SKIP
    >>> s.total                                                          # a Max/Add tree of step costs

The symbolic start and end of each step are light terms (:mod:`shardalg.costs.terms`): ``start`` is the
maximum of the ends of the steps it waits for (those not already implied by another), ``end`` is ``start``
plus its duration. :func:`seconds` is the same recurrence on floats, for ranking.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from shardalg.errors import UsageError
from shardalg.notation.plan import Step
from shardalg.notation.syntax import Op

from .terms import ZERO, Term, add, maximum, point

__all__ = ["POLICIES", "COMPUTE", "as_policy", "lanes_of", "dependencies", "Slot", "Schedule", "build",
           "seconds", "DEFAULT"]  # fmt: skip

POLICIES: tuple[str, ...] = ("schedule", "steady", "serial")
DEFAULT = "schedule"
COMPUTE = "compute"  # the name of the compute lane (a mesh axis lane is the axis's name)
_COMPUTE_KEY = ""  # internal key of the compute lane: no axis name is empty


def as_policy(overlap: object, default: str = DEFAULT) -> str:
    """The policy ``overlap`` names: one of :data:`POLICIES`; True and False are the old spellings of
    ``steady`` and ``serial``; None is ``default``."""
    if overlap is None:
        return default
    if overlap is True:
        return "steady"
    if overlap is False:
        return "serial"
    if isinstance(overlap, str) and overlap in POLICIES:
        return overlap
    raise UsageError(f"overlap is one of {', '.join(POLICIES)}, not {overlap!r}")


def lanes_of(step: Step) -> tuple[str, ...]:
    """The resources a step holds: its axes (a collective), the compute (an einsum), none (a slice)."""
    if step.op is Op.EINSUM:
        return (_COMPUTE_KEY,)
    return step.axes if step.communicates else ()


def dependencies(steps: Sequence[Step]) -> tuple[tuple[int, ...], ...]:
    """For each step, the earlier steps that produced its inputs (the latest producer of each value)."""
    made: dict[object, int] = {}
    out = []
    for i, s in enumerate(steps):
        out.append(tuple(sorted({made[t] for t in s.inputs if t in made})))
        made[s.output] = i
    return tuple(out)


def _waits(lanes: Sequence[tuple[str, ...]], deps: Sequence[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """For each step, the steps it waits for directly: its producers and the previous step on each of its
    lanes, without those another of them already waits for (transitively)."""
    last: dict[str, int] = {}
    before: list[int] = []  # bit set of the steps that happen before step i
    out: list[tuple[int, ...]] = []
    for i, own in enumerate(lanes):
        preds = set(deps[i])
        for lane in own:
            if lane in last:
                preds.add(last[lane])
            last[lane] = i
        implied = 0
        for p in preds:
            implied |= before[p]
        direct = tuple(sorted(p for p in preds if not implied >> p & 1))
        mask = implied
        for p in direct:
            mask |= 1 << p
        before.append(mask)
        out.append(direct)
    return out


@dataclass(frozen=True)
class Slot:
    """Step ``index`` on ``lanes`` from ``start`` to ``end`` (light terms). Under ``steady`` a step on
    several axes has one slot per axis."""

    index: int
    lanes: tuple[str, ...]
    start: Term
    end: Term

    @property
    def lane_names(self) -> tuple[str, ...]:
        return tuple(COMPUTE if lane == _COMPUTE_KEY else lane for lane in self.lanes)


@dataclass(frozen=True)
class Schedule:
    """The slots of a plan's steps under ``policy`` and the time, ``total``."""

    policy: str
    slots: tuple[Slot, ...]
    total: Term

    def numbers(self, values: Mapping) -> list[tuple[float, float]] | None:
        """(start, end) in seconds of each slot at ``values``; None while a symbol is unbound."""
        at = point(values)
        out = []
        for s in self.slots:
            a, b = s.start.evaluate(at), s.end.evaluate(at)
            if a is None or b is None:
                return None
            out.append((float(a), float(b)))
        return out


def build(durations: Sequence[Term], lanes: Sequence[tuple[str, ...]], deps: Sequence[tuple[int, ...]],
          policy: str) -> Schedule:  # fmt: skip
    """The schedule of steps with these durations, lanes and producers under ``policy``."""
    if policy == "serial":
        slots, clock = [], ZERO
        for i, d in enumerate(durations):
            end = add(clock, d)
            slots.append(Slot(i, lanes[i], clock, end))
            clock = end
        return Schedule(policy, tuple(slots), clock)
    if policy == "steady":
        slots, clocks = [], {}
        for i, d in enumerate(durations):
            for lane in lanes[i] or ((),):
                start = clocks.get(lane, ZERO) if lane != () else ZERO
                end = add(start, d)
                if lane != ():
                    clocks[lane] = end
                slots.append(Slot(i, (lane,) if lane != () else (), start, end))
        return Schedule(policy, tuple(slots), maximum(*clocks.values()))
    if policy != "schedule":
        raise UsageError(f"overlap is one of {', '.join(POLICIES)}, not {policy!r}")
    ends: list[Term] = []
    slots = []
    waited: set[int] = set()
    for i, direct in enumerate(_waits(lanes, deps)):
        start = maximum(*(ends[p] for p in direct)) if direct else ZERO
        waited.update(direct)
        ends.append(add(start, durations[i]))
        slots.append(Slot(i, lanes[i], start, ends[-1]))
    total = maximum(*(e for i, e in enumerate(ends) if i not in waited))
    return Schedule(policy, tuple(slots), total)


def seconds(durations: Sequence[float], lanes: Sequence[tuple[str, ...]], deps: Sequence[tuple[int, ...]],
            policy: str) -> float:  # fmt: skip
    """The time of :func:`build`'s schedule on numbers: the fast path a ranking takes."""
    if policy == "serial":
        return float(sum(durations))
    if policy == "steady":
        clocks: dict[str, float] = {}
        for i, d in enumerate(durations):
            for lane in lanes[i]:
                clocks[lane] = clocks.get(lane, 0.0) + d
        return max(clocks.values(), default=0.0)
    ends: list[float] = []
    free: dict[str, float] = {}
    made = 0.0
    for i, d in enumerate(durations):
        start = max((ends[p] for p in deps[i]), default=0.0)
        for lane in lanes[i]:
            start = max(start, free.get(lane, 0.0))
        end = start + d
        for lane in lanes[i]:
            free[lane] = end
        ends.append(end)
        made = max(made, end)
    return made
