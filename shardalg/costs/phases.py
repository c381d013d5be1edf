"""What overlaps what in a training step: its phases, each priced on its own, and their sum.

A training step is a forward and a backward (the backward with the forward it recomputes, and the gradients'
reductions), then the optimizer update. Under ``steady`` a collective hides behind the compute of its own
phase only: the forward's gathers behind the forward's compute, the gradients' reductions behind the
backward's compute (a reduction starts when the backward makes its gradient and ends before the update, so it
never meets the forward's compute). The step is the sum over phases of max(that phase's compute, each mesh
axis's collectives of that phase). ``serial`` adds everything (the phases change nothing); ``schedule`` times
the whole step's steps as their dependencies allow (the gradients depend on the backward's products, which
depend on the forward's: the phases follow by construction).

    >>> step = phased(whole, (Phase("forward", fwd), Phase("backward", bwd)))   # doctest: +SKIP
    >>> step.total                                                            # doctest: +SKIP
    Max(4*B*D*F/(C*X), ...) + Max(8*B*D*F/(C*X), 8*D*F/(M_X*W_ici))

:func:`phased` is the one place this rule lives; the models layer's step, the search's pricing and the strategy
map read it (through the :class:`~shardalg.costs.costmodel.CostModel`'s policy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shardalg.notation.plan import Plan
from shardalg.planning.overlap import OverlapPolicy

from .costmodel import CostModel
from .plancost import PlanCost, joined, priced
from .terms import Term, add
from .totals import CostTotals

__all__ = ["Phase", "PhasedCost", "phased", "priced_by_phase", "PHASES"]

PHASES = ("forward", "backward")  # the phases of a training step, in order


@dataclass(frozen=True)
class Phase:
    """One phase of a step (``forward``, ``backward``) and the cost of its plans as one plan."""

    name: str
    cost: PlanCost


class PhasedCost(CostTotals):
    """A step's cost from its phases. ``whole`` is every step of the step as one plan (its compute, HBM and
    FLOPs are the same whatever overlaps; under ``schedule`` and ``serial`` its total is the step's);
    under ``steady`` ``total`` is the sum over phases of each phase's steady total, and ``comms`` the sum of
    each phase's communication (the max over its axes)."""

    def __init__(self, whole: PlanCost, phases: Sequence[Phase]):
        self.whole = whole
        self.phases = tuple(p for p in phases if p.cost.steps)
        self.costs = whole.costs
        self.overlap = whole.overlap
        self.steps = whole.steps

    @property
    def per_phase(self) -> bool:
        """Whether the phases are timed apart (``steady``, with more than one phase)."""
        return self.overlap is OverlapPolicy.STEADY and len(self.phases) > 1

    def light(self, name: str) -> Term:
        """``comms``, ``compute``, ``memory``, ``total`` or ``flops`` as a light term."""
        if name in ("comms", "total") and self.per_phase:
            return add(*(p.cost.light(name) for p in self.phases))
        return self.whole.light(name)

    def evaluate(self, expr: object) -> float | None:
        return self.whole.evaluate(expr)

    def phase_of(self, index: int) -> str:
        """The phase the ``index``-th step of ``whole`` belongs to (phases list their steps in order)."""
        at = 0
        for p in self.phases:
            at += len(p.cost.steps)
            if index < at:
                return p.name
        raise IndexError(index)


def phased(whole: PlanCost, phases: Sequence[Phase]) -> PhasedCost:
    """The step's cost from its phases under ``whole``'s cost model (see the module's docstring). The
    phases' steps, in order, are ``whole``'s."""
    got = PhasedCost(whole, phases)
    if sum(len(p.cost.steps) for p in got.phases) != len(whole.steps):
        raise ValueError("the phases' steps must be the whole step's, in order")
    return got


def _as_plan(plans: Sequence[Plan], note: str) -> Plan | None:
    steps = tuple(s for p in plans for s in p.steps)
    return Plan((), steps, steps[-1].output, note=note) if steps else None


def priced_by_phase(
    name: str, phases: Sequence[tuple[str, Sequence[Plan]]], mesh, sizes, costs: CostModel
) -> PhasedCost | None:
    """The step ``name`` whose phases run ``phases`` (each a phase's name and its plans, in order) on
    ``mesh`` with ``sizes`` under ``costs``: each phase's plans priced once, as one plan, and the whole step
    joined from them (:func:`~shardalg.costs.plancost.joined`: every step priced once, the whole's schedule
    over all of them); None when no phase has a step."""
    named = [(n, _as_plan(plans, f"{name} {n}")) for n, plans in phases]
    parts = [Phase(n, priced(plan, mesh, sizes, costs)) for n, plan in named if plan is not None]
    whole = _as_plan([plan for _, plan in named if plan is not None], name)
    if whole is None:
        return None
    return phased(joined(whole, [p.cost for p in parts]), parts)
