"""The order of plans: bytes communicated, then steps, then the steps themselves (a fixed order).

``default_key(mesh, sizes)`` is the planner's ranking when no other is given. It is a :class:`BytesKey`: a
callable (plan -> sortable key) like any ``key``, which :func:`sort_plans` also knows how to apply in two
passes (bytes and steps first, the steps' text only among plans that tie), since building the text key of
every plan costs more than the rest of the sort.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.traffic import Bytes, Sizes, move_bytes, rank_table, step_rank
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Op, Tensor

__all__ = [
    "plan_bytes",
    "bytes_are_numbers",
    "sized",
    "default_key",
    "BytesKey",
    "HeadKey",
    "weighed_key",
    "sort_plans",
    "plan_text_key",
]


def plan_bytes(plan: Plan, mesh: Mesh, sizes: Sizes) -> Bytes:
    """Bytes communicated by a plan: the sum over its steps."""
    total = Bytes()
    for s in plan.steps:
        if s.op is Op.EINSUM:
            continue
        before, after = s.inputs[0], s.output
        dims_before, dims_after = tuple(d.axes for d in before.dims), tuple(d.axes for d in after.dims)
        moved = move_bytes(
            s.op, s.axes, before, dims_before, dims_after, mesh, sizes, s.offset, unreduced=before.unreduced
        )
        total = total + moved
    return total


def sized(tensors: Iterable[Tensor], mesh: Mesh, known: Mapping[str, int]) -> bool:
    """Whether every mesh axis and every dim of ``tensors`` has a size (written, or in ``known``)."""
    return mesh.is_numeric and all(d.size is not None or d.label in known for t in tensors for d in t.dims)


def bytes_are_numbers(
    plans: Iterable[Plan], mesh: Mesh, sizes: Sizes, written: tuple[Tensor, ...] = ()
) -> bool:
    """Whether every plan's bytes are numbers: every mesh axis has a size, and so does every dim of the
    tensors its steps move. Then :func:`.symbolic.choose` has nothing to decide (the numeric ranking does),
    and no plan's bytes need be priced as a polynomial to find that out. ``written``: the statement's tensors,
    whose dims are every dim a plan of it moves; when each has a size, the plans are not walked."""
    if written and sized(written, mesh, sizes.known):
        return True
    moved = (s.inputs[0] for plan in plans for s in plan.steps if s.op is not Op.EINSUM)
    return sized(moved, mesh, sizes.known)


class BytesKey:
    """Rank plans by bytes communicated (as exact integers), then number of steps, then their steps."""

    def __init__(self, mesh: Mesh, sizes: Sizes):
        self.mesh, self.sizes, self.table = mesh, sizes, rank_table(mesh)

    def head(self, plan: Plan) -> tuple[int, int]:
        ranked = sum([self._rank(s) for s in plan.steps])
        return ranked, len(plan.steps)

    def _rank(self, s: Step) -> int:
        return step_rank(s.op, s.axes, s.inputs[0], s.output, self.mesh, self.sizes, self.table, s.offset)

    def __call__(self, plan: Plan) -> Any:
        return (*self.head(plan), plan_text_key(plan))


def default_key(mesh: Mesh, sizes: Sizes) -> BytesKey:
    """Rank plans by bytes communicated, then number of steps, then their steps (a deterministic order)."""
    return BytesKey(mesh, sizes)


def weighed_key(weigh: Callable[[Step], float]) -> Callable[[Plan], Any]:
    """Rank plans by the sum of ``weigh`` over their communicating steps, then steps, then their steps."""

    def key(plan: Plan) -> Any:
        return (
            sum(weigh(s) for s in plan.steps if s.op is not Op.EINSUM),
            len(plan.steps),
            plan_text_key(plan),
        )

    return key


def plan_text_key(plan: Plan) -> tuple[Any, ...]:
    """The steps as plain tuples: a total order among plans that tie on everything else. A tensor is named by
    its place among the plan's inputs and output (its name only when it is none of them), so the order does
    not depend on what the tensors are called: the plans of a statement renamed are its plans renamed."""
    memo: dict[int, tuple[Any, ...]] = {}
    places: dict[str, int] = {}
    for i, x in enumerate((*plan.inputs, plan.output)):
        if x.name:
            places.setdefault(x.name, i)

    def t(x: Tensor) -> tuple[Any, ...]:
        got = memo.get(id(x))
        if got is None:
            name = x.name or ""
            got = memo[id(x)] = (
                (places[name], "") if name in places else (len(places), name),
                tuple((d.label, d.axes) for d in x.dims),
                x.unreduced,
                x.invariant,
            )
        return got

    return tuple(
        (s.op.value, s.axes, s.dim or "", tuple(t(i) for i in s.inputs), t(s.output)) for s in plan.steps
    ) + (t(plan.output),)


class HeadKey:
    """A ranking in two parts, so :func:`sort_plans` can sort in two passes: ``head(plan)`` (cheap) and the
    plan's text key, which only breaks ties; calling it gives the whole key, ``(*head, text)``."""

    def __init__(self, head: Callable[[Plan], tuple[Any, ...]]):
        self.head = head

    def __call__(self, plan: Plan) -> Any:
        return (*self.head(plan), plan_text_key(plan))


def sort_plans(plans: list[Plan], key: Callable[[Plan], Any], heads: list[Any] | None = None) -> None:
    """Sort in place by ``key``; a :class:`BytesKey` or a :class:`HeadKey` sorts by its head first and breaks
    ties by text. ``heads``: each plan's ``key.head``, in the plans' order, when the caller has them (the
    einsum planner's, :attr:`~.einsum_plans.EinsumPlanner.heads`)."""
    if not isinstance(key, BytesKey | HeadKey):
        plans.sort(key=key)
        return
    if heads is None:
        heads = [key.head(p) for p in plans]
    order = sorted(range(len(plans)), key=heads.__getitem__)  # stable: equal heads keep their order
    plans[:] = [plans[k] for k in order]
    heads = [heads[k] for k in order]
    i = 0
    while i < len(plans):
        j = i + 1
        while j < len(plans) and heads[j] == heads[i]:
            j += 1
        if j - i > 1:
            plans[i:j] = sorted(plans[i:j], key=plan_text_key)
        i = j
