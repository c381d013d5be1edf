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

Under an ``overlap`` policy (:class:`~.planset.Overlap`) a plan's time is not the sum of its steps':

- ``schedule``: the two operands are prepared at once (their chains share no input), so a pair of compute
  layouts weighs ``max(cost(A -> L), cost(B -> R)) + the product's time``, a lower bound of every plan through
  it (equal when the two chains use no mesh axis in common); each candidate, lightest bound first, is built
  and timed by ``overlap.time`` until the next bound is no lighter than the best time found; the two chains
  are laid out in the order that finishes first (every interleaving of short chains: each axis runs its steps
  in plan order). Each chain is exact (its steps depend one on the next, so they add up); not searched: a
  chain slower alone that waits less on the other's axes.
- ``steady``: a plan's time is the largest of its resources' sums, so the searches keep every undominated
  vector of seconds per resource (:mod:`.pareto`), and every combination of an operand's, the other's, the
  product's and a finish's vectors below the best time is weighed: exact.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Callable, Iterator
from itertools import combinations

from shardalg import cache
from shardalg.algebra.einsum import local_output_or_none
from shardalg.algebra.layout import Layout, tensor_with
from shardalg.cache import Kind, Memo, memo, memoized
from shardalg.notation.plan import Plan, Step, chained_plan
from shardalg.notation.syntax import Op, Tensor

from .einsum_query import EinsumQuery
from .overlap import OverlapPolicy
from .pareto import Label, ParetoSearch, Vector, edge_vector
from .planset import Overlap
from .reasons import finished
from .redistribute import axes_reachable, edge_weight
from .search import Search, search_from, search_to
from .space import Move, State, space_of, state_of
from .steps import chain_steps, laid, local_product

__all__ = ["cheapest_plan"]

Weigh = Callable[[Step], float]
# weight, steps, the two compute layouts and the product's layout
Pair = tuple[float, int, State, State, State]

# the optima by bytes found so far (and the cuts met), by einsum, mesh, sizes, limits and bound
_OPTIMA: OrderedDict[tuple[object, ...], tuple[Plan | None, tuple[str, ...]]] = memo(
    f"{__name__}._OPTIMA", Kind.ANSWER, OrderedDict()
)


# the product's unsharded tensor by the operands' shapes (names, dims, literal sizes, dtypes), the einsum and
# the product's name: a piece many shardings of one einsum share
_PROTOS: Memo = memo(f"{__name__}._PROTOS", Kind.PIECE)


def cheapest_plan(
    query: EinsumQuery, bound: float, weigh: Weigh | None = None, overlap: Overlap | None = None
) -> tuple[Plan | None, tuple[str, ...]]:
    """The cheapest plan (by ``weigh``, else bytes; then steps; by ``overlap``'s time when given, see the
    module docstring) of the query's einsum to its requested result, when it costs less than ``bound`` (bytes as
    a rank, as :class:`~.order.BytesKey` counts); none below a bound of 0 (no search is made). With it, the notes
    of the limits that cut the searches (the planner's cuts)."""
    if query.local or query.target is None or bound <= 0:
        return None, ()  # no plan is lighter than nothing: every weight (bytes, seconds) is at least 0
    if weigh is not None:
        optimum = _Optimum(query, weigh, overlap)
        return optimum.plan(bound), tuple(optimum.cuts)
    key = (
        query.left,
        query.right,
        query.target,
        query.contract,
        query.mesh,
        query.sizes,
        query.limits,
        bound,
    )
    if key not in _OPTIMA:
        optimum = _Optimum(query, None)
        _OPTIMA[key] = (optimum.plan(bound), tuple(optimum.cuts))
        if len(_OPTIMA) > cache.SIZE:
            _OPTIMA.popitem(last=False)
    _OPTIMA.move_to_end(key)
    return _OPTIMA[key]


class _Optimum:
    """One optimum query: the searches under one measure, the pairs, and the plan through the best."""

    def __init__(self, query: EinsumQuery, weigh: Weigh | None, overlap: Overlap | None = None):
        self.p, self.weigh = query, weigh
        self.overlap = overlap if weigh is not None else None
        self.cuts: list[str] = []
        self.mesh, self.sizes = query.mesh, query.sizes

    def _forward(self, t: Tensor) -> Search:
        space, start = space_of(t, self.mesh, self.sizes), state_of(t)
        if self.weigh is None:
            return search_from(space, start, self.p.limits.max_labels)
        return Search(space, start, edge_weight(t, self.weigh), max_labels=self.p.limits.max_labels)

    def plan(self, bound: float) -> Plan | None:
        target = self.p.target
        assert target is not None
        if self.overlap is not None and self.overlap.policy is OverlapPolicy.STEADY:
            return self._steadiest(bound)
        left, right = self._forward(self.p.left), self._forward(self.p.right)
        pairs = self._pairs(left.sorted_below(bound), right.sorted_below(bound), bound)
        self._cut(left, right)
        if not pairs:
            return None
        back = self._backward([q[4] for q in pairs])
        try:
            if self.overlap is not None:
                return self._fastest(pairs, left, right, back, bound)
            return self._best(pairs, left, right, back, bound)
        finally:
            self._cut(back)

    def _cut(self, *searches: Search | ParetoSearch) -> None:
        """Say so (the planner's cuts) when a budget stopped a search this optimum relies on."""
        for search in searches:
            if search.stopped:
                self.cuts.append(
                    f"the search for the cheapest plan over every compute layout stopped after "
                    f"{search.max_labels:,} labels (the planning limit max_labels); pass "
                    "limits=Limits(max_labels=...), or --max-labels, to search further"
                )
                return

    def _best(
        self, pairs: list[Pair], left: Search, right: Search, back: Search, bound: float
    ) -> Plan | None:
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
        return self._built(best[2], left, right, back, best[3])

    def _fastest(
        self, pairs: list[Pair], left: Search, right: Search, back: Search, bound: float
    ) -> Plan | None:
        """The plan fastest by ``overlap.time`` (schedule): pairs lightest bound first, each built and timed,
        until the next bound (its weight plus its cheapest finish) is no lighter than the best time found."""
        assert self.overlap is not None
        timed = self.overlap.time
        best: tuple[float, int, Plan] | None = None
        for pair in pairs:
            weight, steps, *_ = pair
            limit = bound if best is None else best[0]
            if weight >= limit:
                break  # the pairs come lightest first
            end = back.settle(pair[4], below=limit - weight)
            if end is None or weight + end.weight >= limit:
                continue
            plan = self._built(pair, left, right, back, end)
            t = timed(plan)
            if t is not None and (best is None or (t, len(plan.steps)) < best[:2]):
                best = (t, len(plan.steps), plan)
        return None if best is None or best[0] >= bound else best[2]

    def _steadiest(self, bound: float) -> Plan | None:
        """The plan fastest under ``steady`` (module docstring): undominated vectors per state, pairs by the
        larger of their operands' least largest entries, every combination below the best time weighed."""
        assert self.overlap is not None and self.weigh is not None and self.p.target is not None
        names = self.mesh.names
        size = len(names) + 1  # each mesh axis, then the compute
        slot = {a: i for i, a in enumerate(names)}
        limit = self.p.limits.max_labels

        def searcher(t: Tensor, origin: State, backward: bool) -> ParetoSearch:
            assert self.overlap is not None and self.weigh is not None
            weight = edge_vector(t, self.weigh, self.overlap.lanes, slot, size)
            space = space_of(t, self.mesh, self.sizes)
            return ParetoSearch(space, origin, weight, size, backward=backward, bound=bound, max_labels=limit)

        left, right = (searcher(t, state_of(t), False) for t in (self.p.left, self.p.right))
        self._cut(left, right)
        lists = [
            sorted(
                (min(max(lab.vector) for lab in labs), min(lab.steps for lab in labs), state)
                for state, labs in search.labels.items()
                if labs
            )
            for search in (left, right)
        ]
        pairs = self._pairs(lists[0], lists[1], bound)
        if not pairs:
            return None
        proto = self._proto()
        space_of(proto, self.mesh, self.sizes).close([q[4] for q in pairs])
        back = searcher(proto, state_of(self.p.target), True)
        self._cut(back)
        best: tuple[float, int, Pair, Label, Label, Label] | None = None
        for pair in pairs:
            cap = bound if best is None else best[0]
            if pair[0] >= cap:
                break  # the pairs come lightest first
            ends = back.labels.get(pair[4])
            if not ends:
                continue
            m = [0.0] * size
            m[-1] = self._mul_time(pair[2], pair[3])
            for a in left.labels[pair[2]]:
                for b in right.labels[pair[3]]:
                    ab = [x + y + z for x, y, z in zip(a.vector, b.vector, m, strict=True)]
                    if max(ab) >= cap:
                        continue
                    for f in ends:
                        t = max(_plus(ab, f.vector))
                        n = a.steps + b.steps + f.steps + 1
                        if t < cap or (best is not None and t == best[0] and n < best[1]):
                            best = (t, n, pair, a, b, f)
                            cap = t
        if best is None or best[0] >= bound:
            return None
        _, _, pair, a, b, f = best
        return self._build(pair[2], pair[3], a.moves(False), b.moves(False), f.moves(True))

    def _backward(self, outs: list[State]) -> Search:
        target = self.p.target
        assert target is not None
        space = space_of(self._proto(), self.mesh, self.sizes)
        if self.weigh is None:
            return search_to(space, state_of(target), outs, max_labels=self.p.limits.max_labels)
        space.close(outs)
        return Search(
            space,
            state_of(target),
            edge_weight(self._proto(), self.weigh),
            backward=True,
            max_labels=self.p.limits.max_labels,
        )

    def _proto(self) -> Tensor:
        """The product's tensor without sharding (its shape and dtype: the space it is resharded in)."""
        p = self.p
        key = (_shape(p.left), _shape(p.right), p.spec, p.name)
        out = _PROTOS.get(key)
        if out is None:
            bare = [tensor_with(t, Layout(tuple([() for _ in t.dims]), (), ())) for t in (p.left, p.right)]
            out = local_output_or_none(bare[0], bare[1], p.spec, self.mesh, p.name)
            assert out is not None
            _PROTOS.keep(key, out)
        return out

    def _pairs(
        self, lefts: list[tuple[float, int, State]], rights: list[tuple[float, int, State]], bound: float
    ) -> list[Pair]:
        """Every compute layout pair lighter than ``bound`` whose local product is legal and can reach the
        result's partial sums, lightest first (``lefts`` and ``rights``: (weight, steps, state), lightest first).

        Shared dims must hold the same axes; beyond them, an axis either operand uses (a dim of its own or
        partial sums) must not be used by the other: that is :func:`local_output_or_none`'s legality on
        states (each state is a legal layout alone), and the product's state follows as it types it."""
        p = self.p
        spec = p.spec
        shared = spec.contracted + spec.batch
        li = tuple([p.left.dim_names.index(d) for d in shared])
        ri = tuple([p.right.dim_names.index(d) for d in shared])
        summed = [p.left.dim_names.index(d) for d in spec.contracted]
        where = [
            (0, p.left.dim_names.index(n)) if n in spec.left else (1, p.right.dim_names.index(n))
            for n in spec.out
        ]

        join = max if self.overlap is not None else operator.add
        want = self.p.target.unreduced if self.p.target is not None else ()

        by_shared: dict[tuple[tuple[str, ...], ...], list[tuple[float, int, State, frozenset[str]]]] = {}
        for rw, rs, r in rights:
            key, theirs = _side(r, ri)
            by_shared.setdefault(key, []).append((rw, rs, r, theirs))
        mul_weight = self._mul_weight if self.weigh is not None else None
        out: list[Pair] = []
        for lw, ls, lstate in lefts:
            ldims = lstate[0]
            key, mine = _side(lstate, li)
            for rw, rs, rstate, theirs in by_shared.get(key, ()):
                joined = join(lw, rw)
                if joined >= bound:
                    break
                if not mine.isdisjoint(theirs):
                    continue
                sides = (ldims, rstate[0])
                dims = tuple([sides[side][i] for side, i in where])
                used = set().union(*dims)
                unreduced = set(lstate[1]).union(rstate[1], *[ldims[i] for i in summed])
                product: State = (dims, tuple(sorted(unreduced - used)))
                if want and not axes_reachable(product[1], want, self.mesh):
                    continue
                w = joined + mul_weight(lstate, rstate) if mul_weight is not None else joined
                out.append((w, ls + rs + 1, lstate, rstate, product))
        out.sort()  # by weight, steps, then the states (a pair's product follows from its two states)
        return out

    def _mul_weight(self, lstate: State, rstate: State) -> float:
        """The local product's weight in a pair's bound: its time alone under ``overlap`` (schedule: it adds
        up after both chains; steady: 0, it overlaps them), else ``weigh``'s."""
        if self.weigh is None:
            return 0
        if self.overlap is not None:
            return self._mul_time(lstate, rstate) if self.overlap.policy is OverlapPolicy.SCHEDULE else 0.0
        return self.weigh(self._mul(lstate, rstate))

    def _mul_time(self, lstate: State, rstate: State) -> float:
        assert self.overlap is not None
        mul = self._mul(lstate, rstate)
        t = self.overlap.time(Plan(mul.inputs, (mul,), mul.output))
        return t if t is not None else 0.0

    def _mul(self, lstate: State, rstate: State) -> Step:
        """The local product of two compute layouts, as the planner writes it."""
        p = self.p
        lt, rt = _tensor(p.left, lstate), _tensor(p.right, rstate)
        product = local_product(lt, rt, p.spec, self.mesh, p.name)
        assert product is not None
        return p.product_step(lt, rt, product)

    def _built(self, pair: Pair, left: Search, right: Search, back: Search, end: object) -> Plan:
        """The plan through one compute layout pair, with the sequences the searches found."""
        lmoves, rmoves = (
            _first(search, search.settle(state)) for search, state in ((left, pair[2]), (right, pair[3]))
        )
        return self._build(pair[2], pair[3], lmoves, rmoves, _first(back, end))

    def _build(
        self,
        lstate: State,
        rstate: State,
        lmoves: tuple[Move, ...],
        rmoves: tuple[Move, ...],
        fmoves: tuple[Move, ...],
    ) -> Plan:
        """The plan through one compute layout pair with these move sequences before and after the product.
        Under ``schedule`` the two preparations are laid out in the order that finishes first (each mesh axis
        runs its steps in plan order, so the order decides who waits): every interleaving of the two chains
        when they are short, else one chain, then the other."""
        mul = self._mul(lstate, rstate)
        lt, rt = mul.inputs
        target = self.p.target
        assert target is not None
        chains = [
            chain_steps(src, dst, moves)
            for src, moves, dst in ((self.p.left, lmoves, lt), (self.p.right, rmoves, rt))
        ]
        finish: list[Step] = []
        if fmoves:
            finish = list(
                finished(chain_steps(mul.output, target, fmoves), mul.output, target, self.p.brought)
            )
        steps = [*chains[0], *chains[1], mul, *finish]
        overlap = self.overlap
        if overlap is not None and overlap.policy is OverlapPolicy.SCHEDULE and chains[0] and chains[1]:

            def time(order: list[Step]) -> float:
                t = overlap.time(self._plan([*order, mul, *finish], ""))
                return float("inf") if t is None else t

            steps = [*min(_interleavings(chains[0], chains[1]), key=time), mul, *finish]  # ties: left first
            return self._plan(steps, self._note(steps))
        return chained_plan(
            (self.p.left, self.p.right),
            chains[0],
            chains[1],
            mul,
            tuple(finish),
            self.p.cases,
            self._note(steps),
        )

    def _plan(self, steps: list[Step], note: str) -> Plan:
        return Plan((self.p.left, self.p.right), tuple(steps), steps[-1].output, self.p.cases, note=note)

    def _note(self, steps: list[Step]) -> str:
        parts = [f"{s.op.value}({s.inputs[0].name})" for s in steps if s.op is not Op.EINSUM]
        measure = "" if self.weigh is None else " by the given weights"
        if self.overlap is not None:
            measure = f" by time under {self.overlap.policy}"
        return (", ".join(parts) or "no communication") + f"; the cheapest over every compute layout{measure}"


MAX_INTERLEAVED = 8  # steps of two chains whose every interleaving is timed (at most 70 orders)


def _interleavings(a: tuple[Step, ...], b: tuple[Step, ...]) -> Iterator[list[Step]]:
    """Every merge of two chains keeping each chain's order (one chain, then the other, when they are long)."""
    if len(a) + len(b) > MAX_INTERLEAVED:
        yield [*a, *b]
        yield [*b, *a]
        return
    for picks in combinations(range(len(a) + len(b)), len(a)):
        chosen, ia, ib, out = set(picks), iter(a), iter(b), []
        for i in range(len(a) + len(b)):
            out.append(next(ia) if i in chosen else next(ib))
        yield out


@memoized(Kind.PIECE)
def _side(state: State, shared: tuple[int, ...]) -> tuple[tuple[tuple[str, ...], ...], frozenset[str]]:
    """A compute layout as a pair sees it: the axes of its shared dims (at indices ``shared``), and every
    other axis it uses (its other dims' and its partial sums'). Memoized: a table of states."""
    axes = set(state[1])
    for i, d in enumerate(state[0]):
        if d and i not in shared:
            axes.update(d)
    return tuple([state[0][i] for i in shared]), frozenset(axes)


def _plus(a: list[float], b: Vector) -> list[float]:
    return [x + y for x, y in zip(a, b, strict=True)]


def _first(search: Search, label: object) -> tuple[Move, ...]:
    assert label is not None
    return search.first(label)  # type: ignore[arg-type]


def _shape(t: Tensor) -> tuple[object, ...]:
    return t.name, t.dim_names, tuple([d.size for d in t.dims]), t.dtype


def _tensor(t: Tensor, state: State) -> Tensor:
    """``t`` laid out as ``state`` (``t`` itself when that is its own layout: a plan reads its inputs by
    identity)."""
    if t.layout() == (state[0], state[1], ()):
        return t
    return laid(t, state[0], state[1])
