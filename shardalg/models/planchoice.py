"""Where a model's plan choice costs time: each forward product whose plan (the planner's first, by bytes
communicated) is slower on the chip than another of its plans, said with both times.

A model program plans each statement by the fewest bytes communicated (:attr:`shardalg.models.analysis.Analysis.
forward_plans`), a measure that knows no chip. Bytes are not seconds: a plan that gathers both operands of a
Megatron row-parallel product (``AllGather_X(A)``, ``AllGather_X(W_o)``) moves fewer bytes than the
``AllReduce_X`` of its result, and computes the whole product on every device. So a step says, for each forward
product, when the plan it runs is slower than the fastest of that statement's plans by ``shardalg plan --hw``'s
measure (the plan alone on the chip under the step's overlap policy: :class:`shardalg.costs.ranking.BySeconds`).
That measure is the plan alone: in a step its collectives may hide behind other statements' compute, so the
step may lose less than the difference.

    >>> from shardalg.models.program import model_program
    >>> from shardalg.models.analysis import analyze
    >>> from shardalg.costs.costmodel import CostModel
    >>> a = analyze(model_program("A[B, T, K_X] * W[K_X, D] -> O[B, T, D]", "X=8",
    ...                           "B=32,T=2048,K=5120,D=5120"), "infer")
    >>> [(str(s.chosen.steps[0].op.value), str(s.fastest.steps[-1].op.value))
    ...  for s in slower_plans(a, CostModel.of("h100", overlap="steady"))]
    [('AllGather', 'AllReduce')]
"""

from __future__ import annotations

from dataclasses import dataclass

from shardalg.algebra.traffic import Sizes
from shardalg.costs.costmodel import CostModel
from shardalg.costs.ranking import BySeconds
from shardalg.costs.stepcost import Options
from shardalg.costs.steps import fast_seconds
from shardalg.notation.plan import Plan
from shardalg.notation.printing.display import seconds_text
from shardalg.notation.syntax import plain_product
from shardalg.planning.planner import Problem, plans
from shardalg.planning.symbolic import summary

from .analysis import Analysis

__all__ = ["SlowerPlan", "slower_plans", "plans_note"]

# a plan counts as slower when it takes this much more than the fastest (relative): float sums of equal plans
# differ in their last bits, and a tie is no choice to report
MARGIN = 1e-9


@dataclass(frozen=True)
class SlowerPlan:
    """A forward product whose plan is slower than its fastest: the statement, the plan it runs and the
    fastest, each with its seconds (the plan alone)."""

    statement: object
    chosen: Plan
    chosen_seconds: float
    fastest: Plan
    fastest_seconds: float


def slower_plans(a: Analysis, costs: CostModel) -> list[SlowerPlan]:
    """Each forward product of ``a`` (two tensors multiplied, planned by the planner) whose plan is slower
    under ``costs`` than another plan of that statement, in program order; none where a size is unbound (no
    seconds to compare)."""
    m = a.model
    sizes = Sizes(m.sizes)
    opts = Options.of(costs, m.mesh, sizes.known)
    seconds = fast_seconds(opts, costs.overlap)
    rank = BySeconds(costs)
    out = []
    for info in m.statements:
        s = info.statement
        if not plain_product(s):
            continue
        chosen = a.forward_plans[info.index]
        t = seconds(chosen)
        if t is None:
            continue
        fastest = plans(Problem(s, m.mesh, sizes, None, checked=True), rank=rank)[0]
        best = seconds(fastest)
        if best is not None and t > best * (1 + MARGIN):
            out.append(SlowerPlan(s, chosen, t, fastest, best))
    return out


def plans_note(slower: list[SlowerPlan], chip: str, policy: object) -> tuple[str, str] | None:
    """The note of :func:`slower_plans`' findings (None: every product runs its fastest plan)."""
    if not slower:
        return None
    each = "; ".join(
        f"{x.statement} runs {summary(x.chosen)} ({seconds_text(x.chosen_seconds)}), "
        f"{summary(x.fastest)} takes {seconds_text(x.fastest_seconds)}"
        for x in slower
    )
    n = len(slower)
    return (
        "plans",
        f"{n} forward product{'s' if n > 1 else ''} run{'' if n > 1 else 's'} the fewest-bytes plan, slower on "
        f"{chip} than another (each plan alone under overlap {policy}, shardalg plan --hw's measure; in the step "
        f"its collectives may hide behind other compute): {each}",
    )
