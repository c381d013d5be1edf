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

from .redistribute import axes_reachable, edge_weight
from .search import Search, search_from, search_to
from .space import Move, State, space_of, state_of
from .steps import build_steps

if TYPE_CHECKING:
    from .einsum_plans import EinsumPlanner

__all__ = ["cheapest_plan", "clear_optima"]

Weigh = Callable[[Step], float]
# weight, steps, the two compute layouts and the product's layout
Pair = tuple[float, int, State, State, State]

# the optima by bytes found so far (and the cuts met), by einsum, mesh, sizes, limits and bound
_OPTIMA: OrderedDict[tuple[object, ...], tuple[Plan | None, tuple[str, ...]]] = OrderedDict()
_KEEP = 4096


def clear_optima() -> None:
    _OPTIMA.clear()


def cheapest_plan(planner: EinsumPlanner, bound: float, weigh: Weigh | None = None) -> Plan | None:
    """The cheapest plan (by ``weigh``, else bytes; then steps) of the planner's einsum to its requested
    result, when it costs less than ``bound`` (bytes as a rank, as :class:`~.order.BytesKey` counts)."""
    if planner.local or planner.target is None:
        return None
    if weigh is not None:
        query = _Optimum(planner, weigh)
        found = query.plan(bound)
        planner.cuts.extend(query.cuts)
        return found
    key = (planner.left, planner.right, planner.target, planner.contract, planner.mesh, planner.sizes,
           planner.limits, bound)  # fmt: skip
    if key not in _OPTIMA:
        query = _Optimum(planner, None)
        _OPTIMA[key] = (query.plan(bound), tuple(query.cuts))
        if len(_OPTIMA) > _KEEP:
            _OPTIMA.popitem(last=False)
    _OPTIMA.move_to_end(key)
    found, cuts = _OPTIMA[key]
    planner.cuts.extend(cuts)
    return found


class _Optimum:
    """One optimum query: the searches under one measure, the pairs, and the plan through the best."""

    def __init__(self, planner: EinsumPlanner, weigh: Weigh | None):
        self.p, self.weigh = planner, weigh
        self.cuts: list[str] = []
        self.mesh, self.sizes = planner.mesh, planner.sizes

    def _forward(self, t: Tensor) -> Search:
        space, start = space_of(t, self.mesh, self.sizes), state_of(t)
        if self.weigh is None:
            return search_from(space, start, self.p.limits.max_labels)
        return Search(space, start, edge_weight(t, self.weigh), max_labels=self.p.limits.max_labels)

    def plan(self, bound: float) -> Plan | None:
        target = self.p.target
        assert target is not None
        left, right = self._forward(self.p.left), self._forward(self.p.right)
        want = target.unreduced
        pairs = [q for q in self._pairs(left, right, bound) if axes_reachable(q[4][1], want, self.mesh)]
        self._cut(left, right)
        if not pairs:
            return None
        back = self._backward([q[4] for q in pairs])
        try:
            return self._best(pairs, left, right, back, bound)
        finally:
            self._cut(back)

    def _cut(self, *searches: Search) -> None:
        """Say so (the planner's cuts) when a budget stopped a search this optimum relies on."""
        for search in searches:
            if search.stopped:
                self.cuts.append(
                    f"the search for the cheapest plan over every compute layout stopped after "
                    f"{search.max_labels:,} labels (the planning limit max_labels); pass "
                    "limits=Limits(max_labels=...), or --max-labels, to search further"
                )
                return

    def _best(self, pairs: list[Pair], left: Search, right: Search, back: Search, bound: float) -> Plan | None:
        best: tuple[float, int, Pair, object] | None = None
        for pair in pairs:
            weight, steps, *_ = pair
            limit = bound if best is None else best[0]
            if weight >= limit:
                break  # the pairs come lightest first
            end = back.settle(pair[4], below=limit - weight + (0 if self.weigh else 1))
            if end is not None and (best is None or (weight + end.weight, steps + end.steps) < best[:2]):
                best = (weight + end.weight, steps + end.steps, pair, end)
        if best is None or best[0] >= bound:
            return None
        return self._build(best[2], left, right, back, best[3])

    def _backward(self, outs: list[State]) -> Search:
        target = self.p.target
        assert target is not None
        space = space_of(self._proto(), self.mesh, self.sizes)
        if self.weigh is None:
            return search_to(space, state_of(target), outs, max_labels=self.p.limits.max_labels)
        space.close(outs)
        return Search(space, state_of(target), edge_weight(self._proto(), self.weigh), backward=True,
                      max_labels=self.p.limits.max_labels)  # fmt: skip

    def _proto(self) -> Tensor:
        """The product's tensor without sharding (its shape and dtype: the space it is resharded in)."""
        p = self.p
        bare = [tensor_with(t, Layout(tuple(() for _ in t.dims), (), ())) for t in (p.left, p.right)]
        out = local_output_or_none(bare[0], bare[1], p.spec, self.mesh, p.name)
        assert out is not None
        return out

    def _pairs(self, left: Search, right: Search, bound: float) -> list[Pair]:
        """Every compute layout pair lighter than ``bound`` whose local product is legal, lightest first.

        Shared dims must hold the same axes; beyond them, an axis either operand uses (a dim of its own or
        partial sums) must not be used by the other: that is :func:`local_output_or_none`'s legality on
        states (each state is a legal layout alone), and the product's state follows as it types it."""
        p = self.p
        spec = p.spec
        shared = spec.contracted + spec.batch
        li = [p.left.dim_names.index(d) for d in shared]
        ri = [p.right.dim_names.index(d) for d in shared]
        summed = [p.left.dim_names.index(d) for d in spec.contracted]
        where = [(0, p.left.dim_names.index(n)) if n in spec.left else (1, p.right.dim_names.index(n))
                 for n in spec.out]  # fmt: skip

        def own(state: State, idx: list[int]) -> frozenset[str]:
            return frozenset(a for i, d in enumerate(state[0]) if i not in idx for a in d) | frozenset(state[1])

        by_shared: dict[tuple[tuple[str, ...], ...], list[tuple[float, int, State, frozenset[str]]]] = {}
        for rw, rs, r in _settled(right, bound):
            by_shared.setdefault(tuple(r[0][i] for i in ri), []).append((rw, rs, r, own(r, ri)))
        out: list[Pair] = []
        for lw, ls, lstate in _settled(left, bound):
            mine = None
            for rw, rs, rstate, theirs in by_shared.get(tuple(lstate[0][i] for i in li), ()):
                if lw + rw >= bound:
                    break
                mine = own(lstate, li) if mine is None else mine
                if mine & theirs:
                    continue
                dims = tuple((lstate, rstate)[side][0][i] for side, i in where)
                used = {a for d in dims for a in d}
                unreduced = set(lstate[1]) | set(rstate[1]) | {a for i in summed for a in lstate[0][i]}
                product: State = (dims, tuple(sorted(unreduced - used)))
                w = lw + rw + (self.weigh(self._mul(lstate, rstate)) if self.weigh is not None else 0)
                out.append((w, ls + rs + 1, lstate, rstate, product))
        out.sort(key=lambda q: (q[0], q[1], q[2], q[3]))
        return out

    def _mul(self, lstate: State, rstate: State) -> Step:
        """The local product of two compute layouts, as the planner writes it."""
        p = self.p
        lt, rt = _tensor(p.left, lstate), _tensor(p.right, rstate)
        product = local_output_or_none(lt, rt, p.spec, self.mesh, p.name)
        assert product is not None
        local = bool(set(product.unreduced) - set(lt.unreduced) - set(rt.unreduced))
        contract = p.spec.contracted if p.contract is not None else ()
        why = p.einsum_reason(lt, rt, product)
        return Step(Op.EINSUM, (lt, rt), product, contract=contract, local=local, reason=why)

    def _build(self, pair: Pair, left: Search, right: Search, back: Search, end: object) -> Plan:
        """The plan through one compute layout pair, with the sequences the searches found."""
        _, _, lstate, rstate, _ = pair
        mul = self._mul(lstate, rstate)
        lt, rt = mul.inputs
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

