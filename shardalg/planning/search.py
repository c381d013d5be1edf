"""Shortest move sequences in a layout space: one resumable search per origin state, and the k best.

**The search** (:class:`Search`) is Dijkstra on (weight, steps), compared in that order, where a move's
weight is its rank (bytes) or a given ``weight`` (e.g. its seconds on a chip). Every move takes one step,
so costs strictly grow along a path and the cheapest sequences are simple. A state keeps *labels*: a label
is a (weight, steps) pair linking it to the origin, with every neighbouring label that links it so (ties).
A state's labels are kept only while they are not dominated: a label reached at no lower weight and no
fewer steps than one before it is dropped (it cannot start a sequence that an earlier one does not match
or beat), and so is a pending entry that another pending entry dominates; so a state holds at most one label
per step count, and nothing copies paths: a sequence is read back through the labels. Without a step bound
the search is exact: the first label of a state is the cheapest (weight, then steps) of all sequences, of any
length; with a bound ``max_steps`` it is the first label within the bound (a state's labels come in
increasing weight and decreasing steps). Entries that tie on (weight, steps) are settled in the order of
their states and moves, so the labels, and the sequences read from them, do not depend on when a query ran.

A search runs *forward* from a start (the labels are costs from it; the resharding searches of one operand,
to every compute layout, share it) or *backward* to a target (the labels are costs to it; the finishing
searches of one einsum, from every product, share it). A backward search needs the predecessors of each
state, which the layout space knows within its closed states (:meth:`Space.close`). ``max_labels`` bounds the
labels one search may settle; a query that hits it says so (``complete`` False, with ``why``).

**The k best** (:func:`k_best`) are Yen's k shortest simple paths: each next path deviates from an earlier
one at some state (its *spur*), found by a search that avoids the earlier paths' next moves there and the
states before the spur. Exact, and each spur search is bounded like the main one.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

from .space import SLICE, Edge, Move, Space, State

__all__ = [
    "Routes",
    "Search",
    "search_from",
    "search_to",
    "routes",
    "k_best",
    "toward",
    "MAX_LABELS",
    "MAX_TIES",
]

MAX_LABELS = 2_000_000  # labels one search may settle before it stops (and says so)
_BOUNDS_KEPT = 64  # sorted_below's answers one search keeps (each a list of states) before it starts again
MAX_TIES = 64  # sequences of different ops listed for one resharding before the list says it is cut

# (state before, move, state after) -> the move's weight in a weighted search
Weight = Callable[[State, Move, State], float]
Entry = tuple[float, int, State, State, tuple[object, ...], int, "_Label | None", "Move | None"]


class _Label:
    """One way of linking a state to the origin: weight, steps, and each neighbouring label that links it
    so, with the move between them (the previous label forward, the next one backward)."""

    __slots__ = ("weight", "steps", "links")

    def __init__(self, weight: float, steps: int, links: list[tuple[_Label, Move]]):
        self.weight, self.steps, self.links = weight, steps, links


@dataclass(frozen=True)
class Routes:
    """The cheapest move sequences to a goal (one per sequence of ops, up to a cap), or none.

    ``complete`` is False when a budget cut the answer: the search stopped at ``max_labels`` before it
    settled the goal, or there were more sequences than the cap; ``why`` names the limit and how to lift it."""

    paths: tuple[tuple[Move, ...], ...]
    weight: float | None = None
    complete: bool = True
    why: str = ""


class Search:
    """A Dijkstra search on (weight, steps) from or to one state, resumed by each query (module docstring)."""

    def __init__(
        self,
        space: Space,
        origin: State,
        weight: Weight | None = None,
        *,
        backward: bool = False,
        banned_states: frozenset[State] = frozenset(),
        banned_moves: frozenset[tuple[State, Move]] = frozenset(),
        toward: State | None = None,
        max_labels: int = MAX_LABELS,
    ):
        self.space, self.origin, self.weight, self.backward = space, origin, weight, backward
        self.banned_states, self.banned_moves, self.toward = banned_states, banned_moves, toward
        self.max_labels = max_labels
        self.labels: dict[State, list[_Label]] = {}
        self.settled = 0
        self._pushed = 0
        self._pending: dict[State, list[tuple[float, int]]] = {}  # keys pushed per state, undominated
        self._heap: list[Entry] = [(0, 0, origin, (), (), 0, None, None)]
        self._plain = weight is None and toward is None and not banned_states and not banned_moves
        self._below: dict[float, list[tuple[float, int, State]]] = {}  # sorted_below's answers, by bound
        self._firsts: dict[int, tuple[_Label, tuple[Move, ...]]] = {}  # first's answers, by label

    @property
    def stopped(self) -> bool:
        """Whether the budget ran out (the search may have missed sequences)."""
        return self.settled >= self.max_labels and bool(self._heap)

    def settle(self, state: State, max_steps: int | None = None, below: float | None = None) -> _Label | None:
        """The state's cheapest label within ``max_steps`` (None when it is not linked to the origin, when
        it weighs ``below`` or more, or when the budget ran out first: see :attr:`stopped`). Every tie of
        that label is recorded."""
        found = self._best(state, max_steps)
        while found is None:
            if not self._heap or self.settled >= self.max_labels:
                return None
            if below is not None and self._heap[0][0] >= below:
                return None
            if self._pop() == state:
                found = self._best(state, max_steps)
        if below is not None and found.weight >= below:
            return None
        self._drain(found.weight, found.steps)
        return found

    def settle_below(self, bound: float) -> dict[State, _Label]:
        """Settle every label lighter than ``bound``; each such state's cheapest label."""
        while self._heap and self._heap[0][0] < bound and self.settled < self.max_labels:
            self._pop()
        return {state: labs[0] for state, labs in self.labels.items() if labs[0].weight < bound}

    def sorted_below(self, bound: float) -> list[tuple[float, int, State]]:
        """(weight, steps, state) of every state lighter than ``bound`` (its cheapest label), lightest first;
        kept per bound (the labels below a bound, once settled, never change: weights only grow)."""
        got = self._below.get(bound)
        if got is None:
            if len(self._below) >= _BOUNDS_KEPT:
                self._below.clear()
            got = self._below[bound] = sorted(
                (lab.weight, lab.steps, state) for state, lab in self.settle_below(bound).items()
            )
        return got

    def first(self, label: _Label) -> tuple[Move, ...]:
        """The first of :meth:`paths` of a settled label, kept per label (a label's links are complete once
        it is settled: ties are drained with it)."""
        got = self._firsts.get(id(label))
        if got is None or got[0] is not label:
            got = self._firsts[id(label)] = (label, self.paths(label, 0)[0])
        return got[1]

    def _best(self, state: State, max_steps: int | None) -> _Label | None:
        for lab in self.labels.get(state, ()):
            if max_steps is None or lab.steps <= max_steps:
                return lab
        return None

    def _drain(self, weight: float, steps: int) -> None:
        """Settle every entry with the same key, so the ties of a settled label are all recorded."""
        while self._heap and (self._heap[0][0], self._heap[0][1]) <= (weight, steps):
            self._pop()

    def _pop(self) -> State | None:
        """Settle the next entry; the state it gave a new label, if any."""
        weight, steps, state, _, _, _, link, move = heapq.heappop(self._heap)
        labs = self.labels.get(state)
        if labs is not None:
            last = labs[-1]  # the fewest steps so far, and no more weight than this entry
            if last.steps <= steps:
                if last.steps == steps and last.weight == weight and link is not None:
                    last.links.append((link, move))  # type: ignore[arg-type]
                return None
        else:
            labs = self.labels[state] = []
        lab = _Label(weight, steps, [] if link is None else [(link, move)])  # type: ignore[list-item]
        labs.append(lab)
        self.settled += 1
        self._expand(state, lab)
        return state

    def _expand(self, state: State, lab: _Label) -> None:
        """Push every move from (forward) or into (backward) ``state`` that nothing dominates."""
        steps, base = lab.steps + 1, lab.weight
        labels, pending, heap = self.labels, self._pending, self._heap
        edges: tuple[Edge, ...] | list[Edge]
        edges = self.space.predecessors(state) if self.backward else self.space.neighbors(state)
        for move, other, rank, key in edges:
            if not self._plain and not self._allowed(state, move, other):
                continue
            got = labels.get(other)
            if got is not None and got[-1].steps <= steps:
                continue  # an earlier label is no heavier and takes no more steps
            if self.weight is not None:
                rank = self.weight(other, move, state) if self.backward else self.weight(state, move, other)  # type: ignore[assignment]
            w = base + rank
            keys = pending.get(other)
            if keys is None:
                pending[other] = [(w, steps)]
            elif _dominated(keys, w, steps):
                continue  # an entry no heavier and no longer is already waiting
            self._pushed += 1
            heapq.heappush(heap, (w, steps, other, state, key, self._pushed, lab, move))

    def _allowed(self, state: State, move: Move, other: State) -> bool:
        """Whether the search may take ``move`` between ``state`` and the newly reached ``other``."""
        if other in self.banned_states or (
            self.banned_moves and ((other if self.backward else state), move) in self.banned_moves
        ):
            return False
        return self.toward is None or move[0] != SLICE or toward(move, self.toward)

    def paths(
        self, label: _Label, cap: int, keep: Callable[[Move], bool] | None = None
    ) -> list[tuple[Move, ...]]:
        """The move sequences between the origin and a settled label (in the order they are applied), one per
        sequence of ops (ties that apply the same ops in the same order differ only in which axes they name:
        another decomposition of one permutation into swaps, or where a spare axis is sliced: the least by
        :func:`_order`), in a fixed order, at most ``cap + 1``. With ``keep``, only sequences whose every move
        it keeps."""
        return list(_reps(label, {}, keep, self.backward).values())[: cap + 1]


def _reps(
    lab: _Label,
    memo: dict[int, dict[tuple[str, ...], tuple[Move, ...]]],
    keep: Callable[[Move], bool] | None,
    backward: bool,
) -> dict[tuple[str, ...], tuple[Move, ...]]:
    """The sequences through ``lab``'s links, one per sequence of ops (:meth:`Search.paths`). A module
    function, not a closure that calls itself: such a closure is a reference cycle, left for the garbage
    collector with everything it reaches."""
    got = memo.get(id(lab))
    if got is not None:
        return got
    got: dict[tuple[str, ...], tuple[Move, ...]] = {} if lab.links else {(): ()}
    for link, move in lab.links:
        if keep is not None and not keep(move):
            continue
        for ops, moves in _reps(link, memo, keep, backward).items():
            if backward:
                key, seq = (move[0],) + ops, (move,) + moves
            else:
                key, seq = ops + (move[0],), moves + (move,)
            had = got.get(key)
            if had is None or _order(seq) < _order(had):
                got[key] = seq
    memo[id(lab)] = got
    return got


def _order(moves: tuple[Move, ...]) -> tuple[tuple[tuple[str, ...], int], ...]:
    """A sequence's place among those of the same ops: by the axes each move names, then the dim it moves
    them onto, the later dim first (``ReduceScatter_{X,K}`` of ``C[I, K]{U_X}``, not ``_{X,I}``).
    A rule on the moves, not the order the search met them in: the projected search
    (:func:`.redistribute._project`, which keeps the last untouched dims of each size, in their order) picks
    the sequence the search over every dim picks."""
    return tuple([(axes, 1 if dim is None else -dim) for _, axes, dim in moves])


def _dominated(keys: list[tuple[float, int]], w: float, steps: int) -> bool:
    """Whether a pushed key dominates (w, steps) (no heavier, no longer, not equal); if not, (w, steps)
    joins the keys and drops those it dominates."""
    for kw, ks in keys:
        if kw <= w and ks <= steps and (kw != w or ks != steps):
            return True
    if len(keys) == 1:
        kw, ks = keys[0]
        if w <= kw and steps <= ks:
            keys[0] = (w, steps)
        else:
            keys.append((w, steps))
        return False
    keys[:] = [(kw, ks) for kw, ks in keys if not (w <= kw and steps <= ks)] + [(w, steps)]
    return False


def toward(move: Move, goal: State) -> bool:
    """Whether a move slices only onto a dim that the goal shards over those axes (a *direct* slice)."""
    _, axes, dim = move
    return dim is not None and all(a in goal[0][dim] for a in axes)


def search_from(space: Space, start: State, max_labels: int = MAX_LABELS) -> Search:
    """The shared bytes-ranked forward search from ``start`` in ``space`` (made on first use; one per
    budget, so an answer never depends on the queries before it)."""
    found = space.searches.get(("from", start, max_labels))
    if found is None:
        found = space.searches[("from", start, max_labels)] = Search(space, start, max_labels=max_labels)
    assert isinstance(found, Search)
    return found


def search_to(
    space: Space, target: State, sources: list[State], direct: bool = False, max_labels: int = MAX_LABELS
) -> Search:
    """The shared bytes-ranked backward search to ``target`` (``direct``: slicing only onto the target's
    own placements), after closing ``sources``; a search made before the closed set grew is made anew."""
    space.close(sources)  # drops the backward searches made before, when the closed set grows
    key = ("to", target, direct, max_labels)
    found = space.searches.get(key)
    if found is None:
        found = space.searches[key] = Search(
            space, target, backward=True, toward=target if direct else None, max_labels=max_labels
        )
    assert isinstance(found, Search)
    return found


def _cut(search: Search, what: str) -> str:
    return (
        f"the layout search from {what} stopped after {search.max_labels:,} labels (the planning limit "
        "max_labels); pass limits=Limits(max_labels=...), or --max-labels, to search further"
    )


def routes(
    search: Search,
    state: State,
    *,
    max_steps: int | None = None,
    max_ties: int = MAX_TIES,
    keep: Callable[[Move], bool] | None = None,
    what: str = "it",
) -> Routes:
    """The cheapest sequences between the search's origin and ``state`` (one per sequence of ops, at most
    ``max_ties``); with ``keep``, only the cheapest ones whose every move it keeps (none, with the weight
    set, when each of the cheapest takes another move)."""
    lab = search.settle(state, max_steps)
    if lab is None:
        if search.stopped:
            return Routes((), None, False, _cut(search, what))
        return Routes(())
    paths = search.paths(lab, max_ties, keep)
    if len(paths) > max_ties:
        why = (
            f"more than {max_ties} equally cheap sequences of different ops link {what} and its target (the "
            "planning limit max_ties); pass limits=Limits(max_ties=...) to list more"
        )
        return Routes(tuple(paths[:max_ties]), lab.weight, False, why)
    return Routes(tuple(paths), lab.weight)


def k_best(
    space: Space,
    start: State,
    goal: State,
    k: int,
    max_steps: int,
    weight: Weight | None = None,
    max_labels: int = MAX_LABELS,
    first: Search | None = None,
) -> Routes:
    """Yen's ``k`` shortest simple sequences from ``start`` to ``goal`` of at most ``max_steps`` moves,
    cheapest (weight, then steps) first; ties keep the order the searches find them in. ``first``: a search
    from ``start`` with this ``weight`` already under way (the one an unweighted query shares with every
    other target of its source: a state's first label within a bound does not depend on when it is asked)."""
    if first is None:
        first = Search(space, start, weight, max_labels=max_labels)
    lab = first.settle(goal, max_steps)
    if lab is None:
        return Routes((), None, not first.stopped, _cut(first, "the source") if first.stopped else "")
    best: list[tuple[tuple[float, int], tuple[Move, ...]]] = [
        ((lab.weight, lab.steps), first.paths(lab, 0)[0])
    ]
    candidates: list[tuple[float, int, int, tuple[Move, ...]]] = []
    seen = {best[0][1]}
    complete = True
    while len(best) < k:
        _, prev = best[-1]
        states = space.walk(start, prev)
        for i in range(len(prev)):
            root = prev[:i]
            banned = frozenset((states[i], p[i]) for _, p in best if len(p) > i and p[:i] == root)
            spur = Search(
                space,
                states[i],
                weight,
                banned_states=frozenset(states[:i]),
                banned_moves=banned,
                max_labels=max_labels,
            )
            got = spur.settle(goal, max_steps - i)
            complete = complete and not spur.stopped
            if got is None:
                continue
            path = root + spur.paths(got, 0)[0]
            if path in seen:
                continue
            seen.add(path)
            heapq.heappush(candidates, (_cost(space, start, path, weight), len(path), len(seen), path))
        if not candidates:
            break
        cost, steps, _, path = heapq.heappop(candidates)
        best.append(((cost, steps), path))
    why = "" if complete else _cut(first, "the source")
    return Routes(tuple(p for _, p in best), best[0][0][0], complete, why)


def _cost(space: Space, start: State, path: tuple[Move, ...], weight: Weight | None) -> float:
    states = space.walk(start, path)
    total: float = 0
    for (op, axes, dim), before, after in zip(path, states, states[1:], strict=False):
        if weight is None:
            total += space.rank(op, axes, before, after)
        else:
            total += weight(before, (op, axes, dim), after)
    return total
