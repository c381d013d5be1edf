"""A gradient's contributions added (DESIGN.md section 4).

A value read by several statements gets one contribution to its gradient from each, and the backward adds
them. A contribution after the first is planned into a name of its own, ``dW'``, and added to the gradient so
far by an addition step, ``dW[D_X, F] + dW'[D_X, F] -> dW[D_X, F]``: the backward as a program then says what
it adds, and where. (Written as a second product into ``dW``, the addition was read as made before the
contribution's own reduction, in another sharding than the gradient so far: ``verify`` refused it, and an
exported backward returned the last contribution alone.)

Partial sums are added before they are reduced. Where the gradient so far was finished by collectives after
its last product or addition (``ReduceScatter_{X,D}(dW[D, F]{U_X}) -> dW[D_X, F]``), the next contribution
may end in that unfinished layout instead (``dW[D, F]{U_X}``, a target the planner is given beside the
finished one, :meth:`Unfinished.targets`): then the finish moves after the addition and runs once for both.
Every collective is linear in each device's buffer, so finishing the sum is the sum of the finished parts.
So Megatron's backward all-reduces the sum of Q's, K's and V's input gradients once, not each of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from shardalg.algebra.mesh import Mesh
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Apply, Arrow, Op, Tensor

from .backward_program import GradStep
from .planner import first_plan

__all__ = ["Unfinished", "added", "part_name", "unfinished", "whole_name"]


def part_name(name: str) -> str:
    """The name a contribution to gradient ``name`` is planned into before it is added: ``dW'``."""
    return f"{name}'"


def whole_name(name: str | None) -> str:
    """The gradient a part is of (:func:`part_name`'s inverse): ``dW'`` is a part of ``dW``."""
    return (name or "").rstrip("'")


@dataclass(frozen=True)
class Unfinished:
    """The gradient so far as its last addition or product left it (``at``), before the collectives that
    finished it (``tail``), which ``steps[index]``'s plan ends with."""

    index: int
    at: Tensor
    tail: tuple[Step, ...]

    @property
    def bare(self) -> Tensor:
        """The unfinished gradient as a target: its invariant axes left to the finish."""
        return replace(self.at, invariant=())

    def targets(self, finished: Tensor) -> tuple[Tensor, ...]:
        """A contribution's targets: the finished layout, and the unfinished one where it differs."""
        return (finished,) if self.bare.layout() == finished.layout() else (finished, self.bare)


def unfinished(steps: Sequence[GradStep], name: str, have: Tensor) -> Unfinished | None:
    """Where the gradient ``name`` (held as ``have``) was last finished by collectives on itself, when nothing
    has read it since: the plan that wrote ``have`` ends with them (None: it ends with its product or an
    addition, or a later step reads the gradient)."""
    for k in range(len(steps) - 1, -1, -1):
        plan = steps[k].plan
        if plan.output == have:
            break
        if any(t.name == name for s in plan.steps for t in s.inputs):
            return None  # read since it was made: it is finished
    else:
        return None
    tail: list[Step] = []
    for s in reversed(plan.steps):
        if s.op is Op.EINSUM or s.op.function or s.op is Op.ADD or not s.inputs:
            break
        if s.inputs[0].name != name or s.output.name != name:
            break
        tail.insert(0, s)
    if not tail:
        return None
    return Unfinished(k, tail[0].inputs[0], tuple(tail))


def without_tail(g: GradStep, u: Unfinished) -> GradStep:
    """``g`` (the step ``u`` names) ending where its tail starts, its statement's result too: its finish runs
    after the next addition."""
    plan, result = g.plan, replace(u.at, name=g.statement.result.name)
    return replace(
        g,
        plan=replace(plan, steps=plan.steps[: -len(u.tail)], output=u.at),
        statement=replace(g.statement, result=result),
    )


def added(
    p: Plan,
    have: Tensor,
    name: str,
    mesh: Mesh,
    sizes: Mapping[str, int],
    tail: tuple[Step, ...] = (),
    result: Tensor | None = None,
) -> Plan:
    """``p`` (a contribution to the gradient ``name``, ending in ``have``'s layout) planned into
    :func:`part_name` and added to ``have``, then finished by ``tail`` (the gradient's finish, moved after
    the addition); ``result``: the sum's layout when it is not ``have``'s (``have``'s partial sums reduced
    first, where the contribution is whole)."""
    part = part_name(name)

    def renamed(t: Tensor) -> Tensor:
        return replace(t, name=part) if t.name == name else t

    steps = [replace(s, inputs=tuple(map(renamed, s.inputs)), output=renamed(s.output)) for s in p.steps]
    total = replace(have, span=None)
    out = total if result is None else replace(result, name=name, span=None)
    add = first_plan(Arrow(Apply(Op.ADD, (total, renamed(p.output))), out), mesh, dict(sizes))
    why = f"{name}'s contributions added" + (f" before {name} is finished once" if tail else "")
    steps += [replace(s, reason=why) if s.op is Op.ADD else s for s in add.steps]  # a reduction says its own
    steps += tail
    inputs = tuple(dict.fromkeys((*p.inputs, total)))
    return replace(p, inputs=inputs, steps=tuple(steps), output=steps[-1].output)
