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

    >>> s = build(durations, lanes, dependencies(steps), OverlapPolicy.SCHEDULE)     # doctest: +SKIP
    >>> s.total                                                          # a Max/Add tree of step costs

The symbolic start and end of each step are light terms (:mod:`shardalg.costs.terms`): ``start`` is the
maximum of the ends of the steps it waits for (those not already implied by another), ``end`` is ``start``
plus its duration. :func:`seconds` is the same recurrence on floats, for ranking.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from shardalg.algebra.factors import parent_of
from shardalg.cache import Kind, memoized
from shardalg.notation.plan import Step, producers_of
from shardalg.notation.syntax import Op
from shardalg.planning.overlap import OverlapPolicy

from .terms import ZERO, Term, add, maximum, point

__all__ = [
    "OverlapPolicy",
    "COMPUTE",
    "lanes_of",
    "dependencies",
    "Slot",
    "Schedule",
    "build",
    "total",
    "seconds",
]

COMPUTE = "compute"  # the name of the compute lane (a mesh axis lane is the axis's name)
_COMPUTE_KEY = ""  # internal key of the compute lane: no axis name is empty


def lanes_of(step: Step) -> tuple[str, ...]:
    """The resources a step holds: its axes (a collective), the compute (an einsum), none (a slice); a function
    holds the chip (its HBM time) and the axes its statistics are all-reduced over."""
    if step.op is Op.EINSUM:
        return (_COMPUTE_KEY,)
    axes = step.axes
    if any(":" in a for a in axes):  # sub-axes run on their parent's links: one lane per parent
        axes = tuple(dict.fromkeys(parent_of(a) for a in axes))
    if step.op.function:  # a function's local work, and its statistics' collective, if any
        return (_COMPUTE_KEY, *axes)
    return axes if step.communicates else ()


def dependencies(steps: Sequence[Step], given: Sequence[object] = ()) -> tuple[tuple[int, ...], ...]:
    """For each step, the earlier steps that produced its inputs (:func:`shardalg.notation.plan.producers_of`;
    a plan's own are ``plan.producers``, made once per plan)."""
    return producers_of(steps, given)


@memoized(Kind.PIECE)
def _waits_of(
    lanes: tuple[tuple[str, ...], ...], deps: tuple[tuple[int, ...], ...]
) -> tuple[tuple[tuple[int, ...], ...], bool]:
    """:func:`_waits` and whether they form a chain, memoized by the plan's shape (its steps' lanes and
    producers: many plans share one shape)."""
    waits = _waits(lanes, deps)
    return tuple(waits), _is_chain(waits)


def _waits(lanes: Sequence[tuple[str, ...]], deps: Sequence[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """For each step, the steps it waits for directly: its producers and the previous step on each of its
    lanes, without those another of them already waits for (transitively)."""
    last: dict[str, int] = {}
    before: list[int] = []  # bit set of the steps that happen before step i
    out: list[tuple[int, ...]] = []
    for i, own in enumerate(lanes):
        preds = list(deps[i])
        for lane in own:
            p = last.get(lane)
            if p is not None and p not in preds:
                preds.append(p)
            last[lane] = i
        if len(preds) <= 1:
            direct = tuple(preds)
            mask = before[preds[0]] | 1 << preds[0] if preds else 0
        else:
            implied = 0
            for p in preds:
                implied |= before[p]
            direct = tuple(sorted([p for p in preds if not implied >> p & 1]))
            mask = implied
            for p in direct:
                mask |= 1 << p
        before.append(mask)
        out.append(direct)
    return out


def _is_chain(waits: Sequence[tuple[int, ...]]) -> bool:
    """Whether each step waits directly for the one before it and for nothing else."""
    if waits and waits[0]:
        return False
    for i in range(1, len(waits)):
        if waits[i] != (i - 1,):
            return False
    return True


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

    policy: OverlapPolicy
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


def build(
    durations: Sequence[Term],
    lanes: Sequence[tuple[str, ...]],
    deps: Sequence[tuple[int, ...]],
    policy: OverlapPolicy,
) -> Schedule:
    """The schedule of steps with these durations, lanes and producers under ``policy``."""
    slots: list[Slot] = []
    policy = OverlapPolicy.of(policy)
    total = _walk(durations, lanes, deps, policy, slots)
    return Schedule(policy, tuple(slots), total)


def total(
    durations: Sequence[Term],
    lanes: Sequence[tuple[str, ...]],
    deps: Sequence[tuple[int, ...]],
    policy: OverlapPolicy,
) -> Term:
    """The time of :func:`build`'s schedule, without its slots."""
    return _walk(durations, lanes, deps, OverlapPolicy.of(policy), None)


def _walk(
    durations: Sequence[Term],
    lanes: Sequence[tuple[str, ...]],
    deps: Sequence[tuple[int, ...]],
    policy: OverlapPolicy,
    slots: list[Slot] | None,
) -> Term:
    if policy is OverlapPolicy.SERIAL:
        clock: Term = ZERO
        for i, d in enumerate(durations):
            end = add(clock, d)
            if slots is not None:
                slots.append(Slot(i, lanes[i], clock, end))
            clock = end
        return clock
    if policy is OverlapPolicy.STEADY:
        clocks: dict[str, Term] = {}
        for i, d in enumerate(durations):
            if not lanes[i] and slots is not None:
                slots.append(Slot(i, (), ZERO, d))
            for lane in lanes[i]:
                start = clocks.get(lane, ZERO)
                clocks[lane] = end = add(start, d)
                if slots is not None:
                    slots.append(Slot(i, (lane,), start, end))
        return maximum(*clocks.values())
    waits, chain = _waits_of(tuple(lanes), tuple(deps))
    if slots is None and chain:
        return add(*durations)  # a chain (each step waits for the one before): the sum, in one pass
    ends: list[Term] = []
    waited = 0
    for i, direct in enumerate(waits):
        if not direct:
            start: Term = ZERO
        elif len(direct) == 1:
            start = ends[direct[0]]
        else:
            start = maximum(*(ends[p] for p in direct))
        for p in direct:
            waited |= 1 << p
        end = add(start, durations[i])
        ends.append(end)
        if slots is not None:
            slots.append(Slot(i, lanes[i], start, end))
    return maximum(*(e for i, e in enumerate(ends) if not waited >> i & 1))


def seconds(
    durations: Sequence[float],
    lanes: Sequence[tuple[str, ...]],
    deps: Sequence[tuple[int, ...]],
    policy: OverlapPolicy,
) -> float:
    """The time of :func:`build`'s schedule on numbers: the fast path a ranking takes."""
    policy = OverlapPolicy.of(policy)
    if policy is OverlapPolicy.SERIAL:
        return float(sum(durations))
    if policy is OverlapPolicy.STEADY:
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
