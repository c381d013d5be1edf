"""A plan's schedule shown: a text Gantt chart (``shardalg cost --schedule``) and its JSON.

    >>> print(cost(program, "X=2,Y=4", sizes, hw="tpu-v5e").gantt())          # doctest: +SKIP
    schedule (overlap schedule): 7.085 us
      X            0.000     1.000 us  |#####                           |  AllGather_X(A[I_X, J_Y]) -> A[I, J_Y]
      compute      1.000     1.085 us  |     #                          |  A[I, J_Y] *_J B[J_Y, K] -> C[I, K]{U_Y}
      Y            1.085     7.085 us  |     ###########################|  AllReduce_Y(C[I, K]{U_Y}) -> C[I, K]

Without the numbers (a size or the chip left out) each row gives its start and end as formulas.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import sympy

from shardalg.notation.printing import text

from .schedule import Schedule, Slot
from .steps import StepCost

__all__ = ["Scheduled", "gantt", "schedule_json"]

US = 1e6


class Scheduled(Protocol):
    """What the chart reads of a plan's cost (:class:`shardalg.costs.plancost.PlanCost` is one): its steps, its
    schedule, the chip's numbers and the total seconds (None without the numbers)."""

    @property
    def steps(self) -> Sequence[StepCost]: ...
    @property
    def schedule(self) -> Schedule: ...
    @property
    def values(self) -> Mapping[sympy.Symbol, float]: ...
    @property
    def seconds(self) -> float | None: ...


def _statement(pc: Scheduled, index: int) -> str:
    return text(pc.steps[index].step.statement())


def _lane(slot: Slot) -> str:
    return ",".join(slot.lane_names) or "-"


def gantt(pc: Scheduled, width: int = 32) -> str:
    """One row per slot: lane, start, end and a bar of ``width`` characters, then the step."""
    s = pc.schedule
    numbers = s.numbers(pc.values)
    seconds = pc.seconds
    lanes = [_lane(slot) for slot in s.slots]
    pad = max((len(x) for x in lanes), default=1)
    if numbers is None or seconds is None:
        lines = [f"schedule (overlap {s.policy}): {s.total}"]
        for slot, lane in zip(s.slots, lanes, strict=True):
            lines.append(f"  {lane:<{pad}}  {_statement(pc, slot.index)}")
            lines.append(f"  {'':<{pad}}    start {slot.start}")
            lines.append(f"  {'':<{pad}}    end   {slot.end}")
        return "\n".join(lines)
    span = max([seconds, *(b for _, b in numbers)]) or 1.0
    lines = [f"schedule (overlap {s.policy}): {seconds * US:.4g} us"]
    for slot, lane, (a, b) in zip(s.slots, lanes, numbers, strict=True):
        lo, hi = round(a / span * width), round(b / span * width)
        hi = max(hi, lo + 1) if b > a else hi
        bar = " " * lo + "#" * (hi - lo) + " " * (width - hi)
        lines.append(
            f"  {lane:<{pad}}  {a * US:9.3f} {b * US:9.3f} us  |{bar}|  {_statement(pc, slot.index)}"
        )
    return "\n".join(lines)


def schedule_json(pc: Scheduled) -> dict[str, object]:
    """``{"overlap", "seconds", "slots": [{"step", "statement", "lanes", "start", "end", "start_seconds",
    "end_seconds"}]}``: the indices are positions in ``steps``."""
    s = pc.schedule
    numbers = s.numbers(pc.values)
    slots = []
    for n, slot in enumerate(s.slots):
        a, b = numbers[n] if numbers is not None else (None, None)
        slots.append(
            {
                "step": slot.index,
                "statement": _statement(pc, slot.index),
                "lanes": list(slot.lane_names),
                "start": str(slot.start),
                "end": str(slot.end),
                "start_seconds": a,
                "end_seconds": b,
            }
        )
    return {"overlap": s.policy.value, "formula": str(s.total), "seconds": pc.seconds, "slots": slots}
