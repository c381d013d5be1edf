"""Redistribute: the sequences of rules that move a tensor from one sharding to another (DTensor's job).

The searches run over canonical layouts (:mod:`.space`: each state's moves are every application the rule
table allows) with :mod:`.search`: the planner's :func:`best_sequences` asks the shared search from the
source for every cheapest sequence (bytes, then steps; exact, of any length), and :func:`redistribute`
lists Yen's ``limit`` best simple sequences of at most ``len(mesh) + 3`` rules (or more, when the cheapest
needs more); :class:`Reshardings` answers it for one source and many targets from one search.

    >>> redistribute(parse_tensor("A[I_X, J]"), parse_tensor("A[I, J_X]"), Mesh(X=4))[0]  # AllToAll_{X,J}

No rule makes a value unreduced (the global value of ``A{U_X}`` is the sum of its partials; a replicated
value would have to be zeroed on all but one replica): only a Permute renames an unreduced axis into
another of the same size. A target beyond that is a NoPlan with the reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from shardalg.algebra.layout import Layout, tensor_with, validate
from shardalg.algebra.mesh import Mesh, a_mesh
from shardalg.algebra.traffic import Sizes
from shardalg.cache import Kind, memoized
from shardalg.errors import NoPlan, ShapeMismatch, UsageError
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Op, Tensor

from .order import default_key, plan_bytes, sort_plans, weighed_key
from .planset import DEFAULT_LIMITS, Limits, Plans
from .respan import respanned, written_tensors
from .search import Search, k_best, routes, search_from, search_to, toward
from .space import SLICE, Move, State, searching, space_of, state_of
from .steps import build_steps, step_reason, with_spare_axes

__all__ = [
    "redistribute",
    "cheapest_resharding",
    "Reshardings",
    "best_sequences",
    "Sequences",
    "plan_bytes",
    "default_key",
    "step_reason",
    "with_spare_axes",
    "build_steps",
    "finishing_sequences",
    "close",
    "unreduced_reachable",
    "axes_reachable",
    "edge_weight",
]


@dataclass(frozen=True)
class Sequences:
    """The cheapest sequences between two shardings (each its steps), every tie; ``complete`` False (with
    ``why``) when a limit cut them. Their bytes are :func:`plan_bytes` of a plan of them, when wanted."""

    found: tuple[tuple[Step, ...], ...]
    complete: bool = True
    why: str = ""


def _proto(t: Tensor) -> Tensor:
    """The tensor's dims and dtype without sharding or name (its exact bytes need the dims' names)."""
    return tensor_with(t, Layout(tuple(() for _ in t.dims), (), ())).replace(name=None)  # type: ignore[return-value]


def _shared_search(src: Tensor, mesh: Mesh, sizes: Sizes, limits: Limits) -> Search:
    return search_from(space_of(src, mesh, sizes), state_of(src), limits.max_labels)


@memoized(Kind.PIECE)
def best_sequences(
    src: Tensor, dst: Tensor, mesh: Mesh, sizes: Sizes, limits: Limits = DEFAULT_LIMITS
) -> Sequences:
    """The cheapest *direct* sequences from ``src`` to ``dst`` (least bytes, then fewest steps; one per
    sequence of ops, at most ``limits.max_ties``): those that slice only onto ``dst``'s own placements, as the
    book's do. When a detour is strictly cheaper (slicing an axis onto a dim where ``dst`` does not have it
    can shrink a later collective: ``Slice_{Y,I}`` then ``ReduceScatter_X`` and ``AllGather_{XY}`` beat
    ``AllReduce_X``), the cheapest detour comes first. None when unreachable. Memoized; the search behind it
    runs forward from ``src`` and is shared by every target of ``src``'s layout (and every tensor of its
    shape): the planner's way to prepare an operand for each compute layout."""
    if not unreduced_reachable(src, dst, mesh):
        return Sequences(())
    psrc, pdst, lift = _project(src, dst, mesh, sizes)
    goal, start = state_of(pdst), state_of(psrc)
    space = space_of(psrc, mesh, sizes)
    exact = search_from(space, start, limits.max_labels)
    return _sequences(
        src,
        dst,
        lift,
        limits,
        exact,
        start,
        goal,
        lambda: Search(space, start, toward=goal, max_labels=limits.max_labels),
    )


@memoized(Kind.PIECE)
def finishing_sequences(
    src: Tensor, dst: Tensor, mesh: Mesh, sizes: Sizes, limits: Limits = DEFAULT_LIMITS
) -> Sequences:
    """:func:`best_sequences`, searched backward from ``dst``: one search serves every source, so the
    planner's finishes (every product to the one requested result) share it. Close the sources first
    (:func:`close`) when there are several, or the search is made anew as the closed set grows."""
    if not unreduced_reachable(src, dst, mesh):
        return Sequences(())
    psrc, pdst, lift = _project(src, dst, mesh, sizes)
    goal, start = state_of(pdst), state_of(psrc)
    space = space_of(psrc, mesh, sizes)
    exact = search_to(space, goal, [start], max_labels=limits.max_labels)
    return _sequences(
        src,
        dst,
        lift,
        limits,
        exact,
        start,
        goal,
        lambda: search_to(space, goal, [start], direct=True, max_labels=limits.max_labels),
    )


def close(proto: Tensor, sources: list[Tensor], mesh: Mesh, sizes: Sizes) -> None:
    """Close the layout space of ``proto``'s shape over ``sources`` (see :meth:`Space.close`)."""
    space_of(proto, mesh, sizes).close([state_of(t) for t in sources])


def _project(src: Tensor, dst: Tensor, mesh: Mesh, sizes: Sizes) -> tuple[Tensor, Tensor, tuple[int, ...]]:
    """``src`` and ``dst`` without the untouched dims a search never needs, and the original index of each
    dim kept.

    A dim that no axis shards in ``src`` nor in ``dst`` is *untouched*; two untouched dims of one known size
    (or both unknown) are interchangeable: a move's bytes depend only on the axes, and divisibility only on
    the size, so swapping the two maps every sequence onto one of the same cost. At any moment at most one
    dim per mesh axis holds an axis, so a sequence that parks axes on untouched dims can park them on the
    last ``len(mesh)`` of each size instead: the others are dropped, and the search runs over the rest (on
    a product with 24 untouched dims, 3 on a 3-axis mesh instead of 24; issue 31, ``python -m bench wide``).
    The last, because among sequences that tie the search names the later dim (:func:`.search._order`): the
    one it names is kept. The moves found are lifted back with the index map (:func:`_lift`)."""
    kept: dict[int | None, int] = {}
    keep: list[int] = []
    for i, (a, b) in reversed(list(enumerate(zip(src.dims, dst.dims, strict=True)))):
        if a.axes or b.axes:
            keep.append(i)
            continue
        size = sizes.of(a.label, a.size)
        kept[size] = kept.get(size, 0) + 1
        if kept[size] <= len(mesh):
            keep.append(i)
    keep.reverse()
    if len(keep) == len(src.dims):
        return src, dst, tuple(keep)
    return _without(src, keep), _without(dst, keep), tuple(keep)


def _without(t: Tensor, keep: list[int]) -> Tensor:
    return t.replace(dims=tuple(t.dims[i] for i in keep))


def _lift(moves: tuple[Move, ...], keep: tuple[int, ...]) -> tuple[Move, ...]:
    """Moves over a projected tensor's dims (:func:`_project`) as moves over the original's."""
    return tuple((op, axes, None if dim is None else keep[dim]) for op, axes, dim in moves)


def _sequences(
    src: Tensor,
    dst: Tensor,
    keep: tuple[int, ...],
    limits: Limits,
    exact: Search,
    start: State,
    goal: State,
    direct_search: Callable[[], Search],
) -> Sequences:
    """The direct cheapest sequences (and the cheapest detour when it beats them) from a search that
    links ``start`` and ``goal`` exactly (states of the projected tensors, :func:`_project`; ``keep`` lifts
    their moves back to ``src``'s dims); ``direct_search`` makes the search that slices only toward
    ``goal``, needed only when every cheapest sequence is a detour."""
    far = start if exact.backward else goal
    found = routes(exact, far, max_ties=limits.max_ties, keep=lambda m: _direct(m, goal), what=str(src))
    cuts = [found.why]
    paths = list(found.paths)
    if not paths and found.weight is not None:  # every cheapest sequence is a detour
        best = exact.settle(far)
        assert best is not None  # found.weight is its weight
        paths = exact.paths(best, 0)[:1]
        found = routes(direct_search(), far, max_ties=limits.max_ties, what=str(src))
        paths += found.paths
        cuts.append(found.why)
    seqs = tuple(build_steps(src, dst, _lift(moves, keep)) for moves in paths)
    cut = "; ".join(c for c in cuts if c)
    return Sequences(seqs, not cut, cut)


def _direct(move: Move, goal: State) -> bool:
    return move[0] != SLICE or toward(move, goal)


def unreduced_reachable(src: Tensor, dst: Tensor, mesh: Mesh) -> bool:
    """Whether ``dst``'s unreduced axes can come from ``src``'s: reductions only remove unreduced axes and
    a Permute renames one into another of the same known size, so each size may only lose axes."""
    return axes_reachable(src.unreduced, dst.unreduced, mesh)


def axes_reachable(src: tuple[str, ...], dst: tuple[str, ...], mesh: Mesh) -> bool:
    """:func:`unreduced_reachable` on the unreduced axes alone."""
    if all(a in src for a in dst):
        return True
    if any(mesh[a].size is None and a not in src for a in dst):
        return False
    have = Counter(mesh[a].size for a in src if mesh[a].size is not None)
    want = Counter(mesh[a].size for a in dst if mesh[a].size is not None)
    return all(have[s] >= n for s, n in want.items())


def _unreduced_problem(src: Tensor, dst: Tensor, mesh: Mesh) -> NoPlan:
    """The NoPlan for a target unreduced over an axis that no sequence can produce, with the true reason."""
    extra = [a for a in dst.unreduced if a not in src.unreduced]
    unknown = [a for a in extra if mesh[a].size is None]
    if unknown:
        a = unknown[0]
        why = f"|{a}| is unknown, so no Permute can rename an unreduced axis into {a}"
    else:
        have = Counter(mesh[b].size for b in src.unreduced)
        want = Counter(mesh[b].size for b in dst.unreduced)
        a = next(b for b in extra if want[mesh[b].size] > have[mesh[b].size])
        size = mesh[a].size
        why = (
            ""
            if not src.unreduced
            else (
                f"a Permute renames an unreduced axis only into one of the same size, and {src} is unreduced over "
                f"{have[size]} axis{'es' if have[size] != 1 else ''} of size {size} where {dst} needs {want[size]}"
            )
        )
    return NoPlan(
        f"no rule makes {src} unreduced over {a}: the global value of {dst} is the sum of the partials over {a}, "
        f"so all but one replica would have to be zeroed, and no collective does that"
        + (f"; {why}" if why else ""),
        span=dst.span,
        fix=f"drop {{U_{a}}} from the target, or produce the value unreduced from a product (case 3)",
    )


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
    if not unreduced_reachable(src, dst, mesh):
        raise _unreduced_problem(src, dst, mesh)


@searching
def redistribute(
    src: Tensor,
    dst: Tensor,
    mesh: Mesh,
    sizes: Mapping[str, int] | None = None,
    *,
    limit: int = 6,
    key: Callable[[Plan], Any] | None = None,
    weigh: Callable[[Step], float] | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Plans:
    """The ``limit`` best sequences of rules from ``src`` to ``dst`` (same tensor, two shardings), each a
    Plan; cheapest (bytes, then steps) first, or ordered by ``key``. NoPlan when the target is unreachable.

    With ``weigh`` (a step's additive weight, such as its seconds on a chip: :func:`shardalg.costs.ranking.
    redistribute`) the search itself weighs each step by it, and without a ``key`` the plans come lightest
    first: ranked by seconds, a multi-axis gather beats a single-axis one that moves the same bytes, so the
    cheapest sequence never costs more than a path through any other sharding."""
    return Reshardings(src, mesh, sizes, weigh=weigh, limits=limits).to(dst, limit=limit, key=key)


def cheapest_resharding(
    have: Tensor, want: Tensor, mesh: Mesh, sizes: Mapping[str, int] | None = None
) -> Plan:
    """The cheapest resharding of ``have`` into ``want``'s sharding (``want`` read as ``have``'s value, whatever
    its name): the fix a program's checks suggest (check_program, verify). NoPlan, naming both, when no
    sequence of collectives does it."""
    try:
        return redistribute(have, want.replace(name=have.name), mesh, sizes, limit=1)[0]
    except NoPlan as err:
        raise NoPlan(f"no collective turns {have} into {want}: {err.message}") from None


class Reshardings:
    """The reshardings of one source to any number of targets (:func:`redistribute` to each), sharing one
    search of the source's layout space: a weighted search from ``src`` runs once and is resumed for each
    target, as the unweighted one is shared by every query. A state's first label within a bound does not
    depend on which target asked for it first (:mod:`.search`), so each answer is the one
    :func:`redistribute` gives that target alone (a test checks them against each other); a source priced
    to many targets (the resharding edges of a per-statement search) searches its space once, not once per
    target."""

    def __init__(
        self,
        src: Tensor,
        mesh: Mesh,
        sizes: Mapping[str, int] | None = None,
        *,
        weigh: Callable[[Step], float] | None = None,
        limits: Limits = DEFAULT_LIMITS,
    ):
        self.mesh = a_mesh(mesh, "redistribute (shardalg.redistribute takes text)")
        if not isinstance(src, Tensor):
            raise UsageError("redistribute takes two tensors: the same tensor in two shardings")
        self.src, self.sizes, self.weigh, self.limits = src, Sizes(sizes), weigh, limits
        self._weight = edge_weight(src, weigh) if weigh is not None else None
        self._first: Search | None = None  # the weighted search from src, made at the first target

    def _weighted(self) -> Search:
        """The weighted search from the source, made at the first target and resumed for the others."""
        if self._first is None:
            self._first = Search(
                space_of(self.src, self.mesh, self.sizes),
                state_of(self.src),
                self._weight,
                max_labels=self.limits.max_labels,
            )
        return self._first

    @searching
    def to(self, dst: Tensor, *, limit: int = 6, key: Callable[[Plan], Any] | None = None) -> Plans:
        """:func:`redistribute` from the source to ``dst``."""
        src, m, sz, limits = self.src, self.mesh, self.sizes, self.limits
        if not isinstance(dst, Tensor):
            raise UsageError("redistribute takes two tensors: the same tensor in two shardings")
        _check_pair(src, dst, m, sz)
        if dst.name is None and src.name is not None:
            dst = dst.replace(name=src.name)  # type: ignore[assignment]
        if self.weigh is not None and key is None:
            key = weighed_key(self.weigh)
        shared = _shared_search(src, m, sz, limits)
        best = routes(shared, state_of(dst), max_ties=1, what=str(src))
        if not best.paths:
            if not best.complete:
                return Plans((), False, best.why)
            raise NoPlan(f"no sequence of rules moves {src} to {dst}", span=dst.span)
        max_steps = max(len(m) + 3, len(best.paths[0]) + 1)
        first = shared if self._weight is None else self._weighted()
        found = k_best(
            first.space,
            state_of(src),
            state_of(dst),
            limit,
            max_steps,
            self._weight,
            limits.max_labels,
            first,
        )
        # detours (more than one step beyond the shortest of the cheapest) are not worth listing
        # (ranked by seconds, the fastest path sets the bar: it may be longer than the fewest-bytes one)
        shortest = len(found.paths[0]) if self._weight is not None else min(len(p) for p in found.paths)
        plans = [
            Plan((src,), build_steps(src, dst, moves), dst, note="redistribute")
            for moves in found.paths
            if len(moves) <= shortest + 1
        ]
        seen = {p.steps for p in plans}
        for p in list(plans):
            variant = with_spare_axes(p, m, sz)
            if variant is not None and variant.steps not in seen:
                seen.add(variant.steps)
                plans.append(variant)
        sort_plans(plans, key or default_key(m, sz))
        return Plans.of(respanned(plans, written_tensors(src, dst)), [found.why])


W = TypeVar("W")


def edge_weight(src: Tensor, weigh: Callable[[Step], W]) -> Callable[[State, Move, State], W]:
    """``weigh`` (a Step's weight: seconds, or seconds per resource) as the edge weight of a search in
    ``src``'s space, memoized per edge."""
    proto = _proto(src)
    memo: dict[tuple[State, Move], W] = {}

    def weight(before: State, move: Move, after: State) -> W:
        got = memo.get((before, move))
        if got is None:
            op, axes, _ = move
            t0 = tensor_with(proto, Layout(before[0], before[1], ()))
            t1 = tensor_with(proto, Layout(after[0], after[1], ()))
            got = memo[(before, move)] = weigh(Step(Op(op), (t0,), t1, axes))
        return got

    return weight
