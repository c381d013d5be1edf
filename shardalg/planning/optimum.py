"""The cheapest plan of an einsum over every compute layout, not only the enumerated ones.

The planner's compute layouts come from per-axis options (:mod:`.einsum_options`): the moves the book and
XLA make, each with its reason. Cheaper plans can hide elsewhere: an operand permuted so that its partial
sums sit on the axis the result wants, a dim's axes laid in the result's order before the product, an axis
moved onto a dim that is gathered after the product. So the planner also asks for the exact optimum:

    min over compute layouts L of A and R of B whose local product P is legal of
        cost(A -> L) + cost(B -> R) + cost(the product) + cost(P -> result)

with the costs from searches (:mod:`.search`: forward from each operand, backward from the result). The
measure is bytes (the searches are the shared ones, and the answer is memoized), or a ``weigh`` function
(a step's additive weight, such as its seconds on a chip; the searches are this query's own). Only pairs
lighter than the best plan listed so far are looked at (the searches settle just the layouts below that
bound), and only those whose shared dims hold the same axes in the same order; the local product itself is
typed by :func:`shardalg.algebra.einsum.local_output_or_none`. The optimum joins the plans when it is
strictly cheaper than all of them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from shardalg.algebra.einsum import local_output_or_none
from shardalg.algebra.layout import Layout, tensor_with
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Op, Tensor

from .redistribute import close, edge_weight, unreduced_reachable
from .search import Search, search_from, search_to
from .space import Move, State, space_of, state_of
from .steps import build_steps

if TYPE_CHECKING:
    from .einsum_plans import EinsumPlanner

__all__ = ["cheapest_plan", "clear_optima"]

Weigh = Callable[[Step], float]
# weight, steps, the two compute layouts, their tensors and the product step
Pair = tuple[float, int, State, State, Tensor, Tensor, Step]

# the optima by bytes found so far, by einsum, mesh, sizes, limits and bound (a search result)
_OPTIMA: OrderedDict[tuple[object, ...], Plan | None] = OrderedDict()
_KEEP = 4096


def clear_optima() -> None:
    _OPTIMA.clear()


def cheapest_plan(planner: EinsumPlanner, bound: float, weigh: Weigh | None = None) -> Plan | None:
    """The cheapest plan (by ``weigh``, else bytes; then steps) of the planner's einsum to its requested
    result, when it costs less than ``bound`` (bytes as a rank, as :class:`~.order.BytesKey` counts)."""
    if planner.local or planner.target is None:
        return None
    if weigh is not None:
        return _Optimum(planner, weigh).plan(bound)
    key = (planner.left, planner.right, planner.target, planner.contract, planner.mesh, planner.sizes,
           planner.limits, bound)  # fmt: skip
    if key not in _OPTIMA:
        _OPTIMA[key] = _Optimum(planner, None).plan(bound)
        if len(_OPTIMA) > _KEEP:
            _OPTIMA.popitem(last=False)
    _OPTIMA.move_to_end(key)
    return _OPTIMA[key]


class _Optimum:
    """One optimum query: the searches under one measure, the pairs, and the plan through the best."""

    def __init__(self, planner: EinsumPlanner, weigh: Weigh | None):
        self.p, self.weigh = planner, weigh
        self.mesh, self.sizes = planner.mesh, planner.sizes

    def _forward(self, t: Tensor) -> Search:
        space, start = space_of(t, self.mesh, self.sizes), state_of(t)
        if self.weigh is None:
            return search_from(space, start)
        return Search(space, start, edge_weight(t, self.weigh), max_labels=self.p.limits.max_labels)

    def _backward(self, outs: list[Tensor]) -> Search:
        target = self.p.target
        assert target is not None
        space = space_of(outs[0], self.mesh, self.sizes)
        close(outs[0], outs, self.mesh, self.sizes)
        if self.weigh is None:
            return search_to(space, state_of(target), [])
        return Search(space, state_of(target), edge_weight(outs[0], self.weigh), backward=True,
                      max_labels=self.p.limits.max_labels)  # fmt: skip

    def plan(self, bound: float) -> Plan | None:
        target = self.p.target
        assert target is not None
        left, right = self._forward(self.p.left), self._forward(self.p.right)
        pairs = [q for q in self._pairs(left, right, bound) if unreduced_reachable(q[6].output, target, self.mesh)]
        if not pairs:
            return None
        back = self._backward([q[6].output for q in pairs])
        best: tuple[float, int, Pair, object] | None = None
        for pair in pairs:
            weight, steps, *_, mul = pair
            limit = bound if best is None else best[0]
            end = back.settle(state_of(mul.output), below=limit - weight + (0 if self.weigh else 1))
            if end is not None and (best is None or (weight + end.weight, steps + end.steps) < best[:2]):
                best = (weight + end.weight, steps + end.steps, pair, end)
        if best is None or best[0] >= bound:
            return None
        return self._build(best[2], left, right, back, best[3])

    def _pairs(self, left: Search, right: Search, bound: float) -> list[Pair]:
        """Every compute layout pair lighter than ``bound`` whose local product is legal, lightest first."""
        p = self.p
        shared = p.spec.contracted + p.spec.batch
        li = [p.left.dim_names.index(d) for d in shared]
        ri = [p.right.dim_names.index(d) for d in shared]
        by_shared: dict[tuple[tuple[str, ...], ...], list[tuple[float, int, State]]] = {}
        for r in _settled(right, bound):
            by_shared.setdefault(tuple(r[2][0][i] for i in ri), []).append(r)
        out: list[Pair] = []
        for lw, ls, lstate in _settled(left, bound):
            for rw, rs, rstate in by_shared.get(tuple(lstate[0][i] for i in li), ()):
                if lw + rw >= bound:
                    break
                lt, rt = _tensor(p.left, lstate), _tensor(p.right, rstate)
                product = local_output_or_none(lt, rt, p.spec, self.mesh, p.name)
                if product is None:
                    continue
                local = bool(set(product.unreduced) - set(lt.unreduced) - set(rt.unreduced))
                contract = p.spec.contracted if p.contract is not None else ()
                why = p.einsum_reason(lt, rt, product)
                mul = Step(Op.EINSUM, (lt, rt), product, contract=contract, local=local, reason=why)
                w = lw + rw + (self.weigh(mul) if self.weigh is not None else 0)
                out.append((w, ls + rs + 1, lstate, rstate, lt, rt, mul))
        out.sort(key=lambda q: (q[0], q[1], q[2], q[3]))
        return out

    def _build(self, pair: Pair, left: Search, right: Search, back: Search, end: object) -> Plan:
        """The plan through one compute layout pair, with the sequences the searches found."""
        _, _, lstate, rstate, lt, rt, mul = pair
        target = self.p.target
        assert target is not None
        steps: list[Step] = []
        for search, src, state, dst in ((left, self.p.left, lstate, lt), (right, self.p.right, rstate, rt)):
            moves = _first(search, search.settle(state))
            if moves:
                steps += build_steps(src, dst, moves)
        steps.append(mul)
        moves = _first(back, end)
        if moves:
            steps += [self.p.finish_reason(s, mul.output) for s in build_steps(mul.output, target, moves)]
        parts = [f"{s.op.value}({s.inputs[0].name})" for s in steps if s.op is not Op.EINSUM]
        measure = "" if self.weigh is None else " by the given weights"
        note = (", ".join(parts) or "no communication") + f"; the cheapest over every compute layout{measure}"
        return Plan((self.p.left, self.p.right), tuple(steps), steps[-1].output, self.p.cases, note=note)


def _first(search: Search, label: object) -> tuple[Move, ...]:
    assert label is not None
    return search.paths(label, 0)[0]  # type: ignore[arg-type]


def _settled(search: Search, bound: float) -> list[tuple[float, int, State]]:
    return sorted((lab.weight, lab.steps, state) for state, lab in search.settle_below(bound).items())


def _tensor(t: Tensor, state: State) -> Tensor:
    return tensor_with(t, Layout(state[0], state[1], ()))

