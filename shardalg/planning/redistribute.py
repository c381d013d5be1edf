"""Redistribute: the sequences of rules that move a tensor from one sharding to another (DTensor's job).

A bounded best-first search over layouts (Dijkstra on (bytes communicated, steps), then the moves' text):
each layout's moves are every application the rule table allows (:data:`shardalg.algebra.rules.RULES`, ``moves``),
layouts with indivisible known dims are skipped, and each layout may be settled up to ``limit`` times so
the ``limit`` best simple paths come out in order (a k-shortest-paths search).

    >>> redistribute(parse_tensor("A[I_X, J]"), parse_tensor("A[I, J_X]"), Mesh(X=4))[0]  # AllToAll_{X,J}

No rule makes a value unreduced (the global value of ``A{U_X}`` is the sum of its partials; a replicated
value would have to be zeroed on all but one replica), so such a target is a NoPlan with that reason.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from functools import lru_cache
from math import prod
from typing import Any

from shardalg.algebra.layout import Layout, tensor_with, validate
from shardalg.algebra.mesh import Mesh, as_mesh
from shardalg.algebra.rules import RULES
from shardalg.algebra.traffic import (
    DEFAULT_DTYPE,
    RANK_AXIS,
    RANK_DIM,
    TRAFFIC,
    Bytes,
    Sizes,
    Volume,
    move_bytes,
    rank_table,
    step_rank,
)
from shardalg.errors import NoPlan, ShapeMismatch, UsageError
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Op, Tensor

__all__ = [
    "redistribute", "best_sequences", "search", "plan_bytes", "default_key", "step_reason", "with_spare_axes",
]  # fmt: skip

Move = tuple[Op, tuple[str, ...], int | None]
State = tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]  # (axes per dim, unreduced)

MAX_POPS = 20000


def _fmt(axes: tuple[str, ...]) -> str:
    return "".join(axes) if all(len(a) == 1 for a in axes) else "{" + ",".join(axes) + "}"


def _state(lay: Layout) -> State:
    return lay.dims, lay.unreduced


def _divisible(proto: Tensor, dims: tuple[tuple[str, ...], ...], mesh: Mesh, sizes: Sizes) -> bool:
    return sizes.check_divisible(proto, mesh, dims)


class _Space:
    """The layouts of one tensor (its dims, sizes and dtype) on one mesh, with each layout's moves and
    their ranks computed once (planner and redistribute revisit the same layouts constantly).

    A rank is :meth:`Bytes.rank` scaled to an exact integer: unknown dims count 4096 and unknown axes 4
    (as in ``Bytes.rank``), and multiplying by 8 x the product of all axis sizes clears every denominator
    (a group size divides that product; 8 x bytes per element x the op's factor is whole)."""

    def __init__(self, proto: Tensor, mesh: Mesh, sizes: Sizes):
        self.proto, self.mesh, self.sizes = proto, mesh, sizes
        self._next: dict[State, tuple[tuple[Move, State, int], ...]] = {}
        self.axis = {a.name: a.size or RANK_AXIS for a in mesh}
        self.devices = prod(self.axis.values())
        self.dims = prod(sizes.of(d.label, d.size) or RANK_DIM for d in proto.dims)
        dtype = (proto.dtype or DEFAULT_DTYPE).bytes
        self.unit = {op: int(8 * dtype * factor) for op, (_, factor) in TRAFFIC.items()}

    def _rank(self, op: Op, axes: tuple[str, ...], before: Layout, after: Layout) -> int:
        volume = TRAFFIC[op][0]
        if volume is Volume.NONE:
            return 0
        dims = after.dims if volume is Volume.OUTPUT_GROUP else before.dims
        skip = axes if volume is Volume.INPUT_GROUP else ()
        group = prod(self.axis[a] for d in dims for a in d if a not in skip)
        return self.devices // group * self.dims * self.unit[op]

    def neighbors(self, state: State) -> tuple[tuple[Move, State, int], ...]:
        got = self._next.get(state)
        if got is not None:
            return got
        lay = Layout(state[0], state[1], ())
        out = []
        for op, r in RULES.items():
            for axes, dim in r.moves(lay, self.mesh):
                nxt = r.effect(lay, axes, dim)
                if not self.sizes.check_divisible(self.proto, self.mesh, nxt.dims):
                    continue
                out.append(((op, axes, dim), _state(nxt), self._rank(op, axes, lay, nxt)))
        got = self._next[state] = tuple(out)
        return got

    def cost(self, start: State, moves: tuple[Move, ...]) -> Bytes:
        """The exact bytes of a move sequence from ``start``."""
        total, lay = Bytes(), Layout(start[0], start[1], ())
        for op, axes, dim in moves:
            nxt = RULES[op].effect(lay, axes, dim)
            total = total + move_bytes(op, axes, self.proto, lay.dims, nxt.dims, self.mesh, self.sizes)
            lay = nxt
        return total


@lru_cache(maxsize=512)
def _space(proto: Tensor, mesh: Mesh, sizes: Sizes) -> _Space:
    return _Space(proto, mesh, sizes)


def _proto(t: Tensor) -> Tensor:
    """The tensor's dims and dtype without sharding or name: the key of its layout space."""
    return tensor_with(t, Layout(tuple(() for _ in t.dims), (), ())).replace(name=None)  # type: ignore[return-value]


def search(
    src: Tensor,
    goal: State,
    mesh: Mesh,
    sizes: Sizes,
    limit: int,
    max_steps: int | None = None,
    ties_only: bool = False,
    weigh: Callable[[Step], float] | None = None,
) -> list[tuple[Bytes, tuple[Move, ...]]]:
    """The ``limit`` best move sequences from ``src``'s layout to ``goal``, best first; with ``ties_only``,
    only those as good as the best (same bytes, same number of steps). Edges weigh their bytes (as integer
    ranks), or ``weigh(step)`` when given (e.g. the step's seconds on a chip: :func:`cost.step_seconds`)."""
    if max_steps is None:
        max_steps = len(mesh) + 3
    space = _space(_proto(src), mesh, sizes)
    start_state = _state(Layout.of(src))
    # heap entries: (rank, steps, push order, state, moves, states on the path)
    proto = _proto(src)
    edge_weight: dict[tuple[State, Move], float] = {}

    def weight(state: State, move: Move, ns: State, rank: int) -> float:
        if weigh is None:
            return rank
        got = edge_weight.get((state, move))
        if got is None:
            op, axes, _ = move
            before = tensor_with(proto, Layout(state[0], state[1], ()))
            after = tensor_with(proto, Layout(ns[0], ns[1], ()))
            got = edge_weight[(state, move)] = weigh(Step(op, (before,), after, axes))  # type: ignore[arg-type]
        return got

    heap: list[tuple[float, int, int, State, tuple[Move, ...], frozenset[State]]] = [
        (0, 0, 0, start_state, (), frozenset((start_state,)))
    ]
    pushed = 0
    settled: dict[State, int] = {}
    found: list[tuple[Move, ...]] = []
    best: tuple[float, int] | None = None
    pops = 0
    while heap and len(found) < limit and pops < MAX_POPS:
        rank, nsteps, _, state, moves, path = heapq.heappop(heap)
        pops += 1
        if ties_only and best is not None and (rank, nsteps) > best:
            break
        if settled.get(state, 0) >= limit:
            continue
        settled[state] = settled.get(state, 0) + 1
        if state == goal:
            found.append(moves)
            best = best or (rank, nsteps)
            continue
        if nsteps >= max_steps:
            continue
        for move, ns, move_rank in space.neighbors(state):
            if ns in path or (move[0] is Op.SLICE and weigh is None and not _toward(move, goal)):
                continue
            pushed += 1
            step_weight = weight(state, move, ns, move_rank)
            heapq.heappush(heap, (rank + step_weight, nsteps + 1, pushed, ns, moves + (move,), path | {ns}))
    return [(space.cost(start_state, moves), moves) for moves in found]


def _toward(move: Move, goal: State) -> bool:
    """A free slice is only worth taking onto a dim the goal shards over those axes (slices cost nothing,
    so without this the search would wander through every sliced layout). Ranked by bytes this loses
    nothing; ranked by seconds it would (slicing onto a spare axis first can make a later AllToAll or
    gather faster), so the seconds-weighted search takes every slice."""
    _, axes, dim = move
    assert dim is not None
    return all(a in goal[0][dim] for a in axes)


def step_reason(op: Op, axes: tuple[str, ...], before: Tensor, after: Tensor, dim: str | None) -> str:
    """A one-line reason for a resharding step, in terms of the dims it touches."""
    name = before.name or "the tensor"
    if op is Op.ALL_GATHER:
        dims = [d.label for d, e in zip(before.dims, after.dims, strict=True) if d.axes != e.axes]
        return f"AllGather: {_fmt(axes)} no longer shard{'s' if len(axes) == 1 else ''} {', '.join(dims)} of {name}"
    if op is Op.REDUCE_SCATTER:
        return f"ReduceScatter: sum {name}'s partials over {_fmt(axes)} and keep {dim} sharded over them"
    if op is Op.ALL_REDUCE:
        return f"AllReduce: sum {name}'s partials over {_fmt(axes)}"
    if op is Op.ALL_TO_ALL:
        src = next(d.label for d in before.dims if axes[0] in d.axes)
        return f"AllToAll: move {_fmt(axes)} of {name} from {src} to {dim}"
    if op is Op.SLICE:
        return f"Slice: keep this device's block of {dim} over {_fmt(axes)} (free)"
    if op is Op.PERMUTE:
        return f"Permute: swap {axes[0]} and {axes[1]} in {name}; whole shards move point to point"
    return op.value


def build_steps(src: Tensor, dst: Tensor, moves: tuple[Move, ...]) -> tuple[Step, ...]:
    """The Steps of ``moves`` from ``src``; the last output is ``dst`` itself (invariant marks included)."""
    steps: list[Step] = []
    cur = src
    lay = Layout.of(src)
    for i, (op, axes, dim) in enumerate(moves):
        nxt = RULES[op].effect(lay, axes, dim)
        used = set(a for d in nxt.dims for a in d) | set(nxt.unreduced)
        nxt = Layout(nxt.dims, nxt.unreduced, tuple(a for a in src.invariant if a not in used))
        out = dst if i == len(moves) - 1 else tensor_with(cur, nxt)
        label = cur.dims[dim].label if dim is not None else None
        steps.append(Step(op, (cur,), out, axes, label, reason=step_reason(op, axes, cur, out, label)))
        cur, lay = out, nxt
    return tuple(steps)


def _check_pair(src: Tensor, dst: Tensor, mesh: Mesh, sizes: Sizes) -> None:
    validate(src, mesh)
    validate(dst, mesh)
    if src.dim_names != dst.dim_names:
        raise ShapeMismatch(
            f"a resharding keeps the dims: {src} has {', '.join(src.dim_names)} but {dst} has {', '.join(dst.dim_names)}",
            span=dst.span,
            fix=f"write the target with the dims {', '.join(src.dim_names)}",
        )
    if src.name is not None and dst.name is not None and src.name != dst.name:
        raise ShapeMismatch(
            f"a resharding keeps the tensor: {src} -> {dst} renames {src.name} to {dst.name}",
            span=dst.span,
            fix=f"name the target {src.name}",
        )
    sizes.require_divisible(src, mesh)
    sizes.require_divisible(dst, mesh)
    new_u = [a for a in dst.unreduced if a not in src.unreduced]
    if new_u:
        a = new_u[0]
        raise NoPlan(
            f"no rule makes {src} unreduced over {a}: the global value of {dst} is the sum of the partials over {a}, "
            f"so all but one replica would have to be zeroed, and no collective does that",
            span=dst.span,
            fix=f"drop {{U_{a}}} from the target, or produce the value unreduced from a product (case 3)",
        )


def _changed(src: Tensor, dst: Tensor) -> int:
    """How many axes sit elsewhere in ``dst`` than in ``src`` (another dim, position, or unreduced):
    a bound on the steps a sensible resharding takes (one more allows a permute or a detour)."""

    def where(t: Tensor) -> dict[str, tuple[int, int]]:
        out = {a: (i, k) for i, d in enumerate(t.dims) for k, a in enumerate(d.axes)}
        out.update({a: (-1, 0) for a in t.unreduced})
        return out

    ws, wd = where(src), where(dst)
    return sum(1 for a in set(ws) | set(wd) if ws.get(a) != wd.get(a))


@lru_cache(maxsize=4096)
def best_sequences(
    src: Tensor, dst: Tensor, mesh: Mesh, sizes: Sizes, limit: int = 4
) -> tuple[tuple[Bytes, tuple[Step, ...]], ...]:
    """The cheapest sequences (least bytes, then fewest steps; every tie, at most ``limit``) from ``src``
    to ``dst``; empty when unreachable. Memoized: the planner asks for the same pairs again and again."""
    goal = _state(Layout.of(dst))
    found = search(src, goal, mesh, sizes, limit, max_steps=_changed(src, dst) + 1, ties_only=True)
    return tuple((cost, build_steps(src, dst, moves)) for cost, moves in found)


def plan_bytes(plan: Plan, mesh: Mesh, sizes: Sizes) -> Bytes:
    """Bytes communicated by a plan: the sum over its steps."""
    total = Bytes()
    for s in plan.steps:
        if s.op is Op.EINSUM:
            continue
        before, after = s.inputs[0], s.output
        dims_before, dims_after = tuple(d.axes for d in before.dims), tuple(d.axes for d in after.dims)
        total = total + move_bytes(s.op, s.axes, before, dims_before, dims_after, mesh, sizes)
    return total


def default_key(mesh: Mesh, sizes: Sizes) -> Callable[[Plan], Any]:
    """Rank plans by bytes communicated, then number of steps, then their steps (a deterministic order)."""

    table = rank_table(mesh)

    def key(plan: Plan) -> Any:
        ranked = sum(step_rank(s.op, s.axes, s.inputs[0], s.output, mesh, sizes, table) for s in plan.steps)
        return (ranked, len(plan.steps), _plan_text_key(plan))

    return key


def _plan_text_key(plan: Plan) -> tuple[Any, ...]:
    def t(x: Tensor) -> tuple[Any, ...]:
        return (x.name or "", tuple((d.label, d.axes) for d in x.dims), x.unreduced, x.invariant)

    return tuple(
        (s.op.value, s.axes, s.dim or "", tuple(t(i) for i in s.inputs), t(s.output)) for s in plan.steps
    ) + (t(plan.output),)


def redistribute(
    src: Tensor,
    dst: Tensor,
    mesh: Mesh | Mapping[str, int] | str,
    sizes: Mapping[str, int] | None = None,
    *,
    limit: int = 6,
    key: Callable[[Plan], Any] | None = None,
    weigh: Callable[[Step], float] | None = None,
) -> list[Plan]:
    """The ``limit`` best sequences of rules from ``src`` to ``dst`` (same tensor, two shardings), each a
    Plan; cheapest (bytes, then steps) first, or ordered by ``key``. NoPlan when the target is unreachable.

    With ``weigh`` (a step's additive weight, such as its seconds on a chip: :func:`shardalg.costs.ranking.
    redistribute`) the search itself weighs each step by it, and without a ``key`` the plans come lightest
    first: ranked by seconds, a multi-axis gather beats a single-axis one that moves the same bytes, so the
    cheapest sequence never costs more than a path through any other sharding."""
    m = as_mesh(mesh)
    if m is None:
        raise UsageError("redistribute needs a mesh, e.g. X=4,Y=2")
    if not isinstance(src, Tensor) or not isinstance(dst, Tensor):
        raise UsageError("redistribute takes two tensors: the same tensor in two shardings")
    sz = Sizes(sizes)
    _check_pair(src, dst, m, sz)
    if dst.name is None and src.name is not None:
        dst = dst.replace(name=src.name)  # type: ignore[assignment]
    if weigh is not None and key is None:
        key = _weighed_key(weigh)
    found = search(src, _state(Layout.of(dst)), m, sz, limit, weigh=weigh)
    if not found:
        raise NoPlan(f"no sequence of at most {len(m) + 3} rules moves {src} to {dst}", span=dst.span)
    # detours (more than one step beyond the shortest of the cheapest) are not worth listing
    # (ranked by seconds, the fastest path sets the bar: it may be longer than the fewest-bytes one)
    shortest = len(found[0][1]) if weigh is not None else min(len(moves) for _, moves in found)
    plans = [Plan((src,), build_steps(src, dst, moves), dst, note="redistribute") for _, moves in found
             if len(moves) <= shortest + 1]  # fmt: skip
    seen = {p.steps for p in plans}
    for p in list(plans):
        variant = with_spare_axes(p, m, sz)
        if variant is not None and variant.steps not in seen:
            seen.add(variant.steps)
            plans.append(variant)
    plans.sort(key=key or default_key(m, sz))
    return plans


def _weighed_key(weigh: Callable[[Step], float]) -> Callable[[Plan], Any]:
    def key(plan: Plan) -> Any:
        return (sum(weigh(s) for s in plan.steps if s.op is not Op.EINSUM), len(plan.steps), _plan_text_key(plan))

    return key


def with_spare_axes(p: Plan, mesh: Mesh, sizes: Sizes) -> Plan | None:
    """The plan with each single-dim AllGather preceded by a free slice onto the spare replicated axes,
    so the gather runs over more axes (more links, same bytes: the book's question 2); None when no
    gather has a spare axis."""
    steps: list[Step] = []
    changed = False
    for s in p.steps:
        if s.op is Op.ALL_GATHER:
            t = s.inputs[0]
            holders = [d for d in t.dims if any(a in d.axes for a in s.axes)]
            spare = Layout.of(t).free(mesh)
            if len(holders) == 1 and spare:
                d = holders[0]
                lay = Layout.of(t.with_axes(d.label, d.axes + spare))
                sliced = tensor_with(
                    t, Layout(lay.dims, t.unreduced, tuple(a for a in t.invariant if a not in spare))
                )
                if sizes.check_divisible(sliced, mesh, lay.dims):
                    why = f"Slice: shard {d.label} over the spare {_fmt(spare)} first (free), so the gather uses more links"
                    steps.append(Step(Op.SLICE, (t,), sliced, spare, d.label, reason=why))
                    gather_why = (s.reason or "AllGather") + f" (over {_fmt(s.axes + spare)})"
                    steps.append(Step(Op.ALL_GATHER, (sliced,), s.output, s.axes + spare, reason=gather_why))
                    changed = True
                    continue
        steps.append(s)
    if not changed:
        return None
    return Plan(p.inputs, tuple(steps), p.output, p.cases, note=p.note + "; spare axes sliced first")
