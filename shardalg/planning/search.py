"""Shortest move sequences in a layout space: one resumable search per start state, and the k best.

**The search** (:class:`Search`) is Dijkstra on (weight, steps), compared in that order, where a move's
weight is its rank (bytes) or a given ``weight`` (e.g. its seconds on a chip). Every move takes one step,
so costs strictly grow along a path and the cheapest sequences are simple. A state keeps *labels*: a label
is a (weight, steps) pair reached from the start, with every predecessor label that reaches it exactly
(ties). A state's labels are kept only while they are not dominated: a label reached at no lower weight
and no fewer steps than one before it is dropped (it cannot start a sequence that an earlier one does not
match or beat), so a state holds at most one label per step count, and nothing copies paths: a sequence is
read back through the predecessors. Without a step bound the search is exact: the first label of the goal
is the cheapest (weight, then steps) of all sequences, of any length; with a bound ``max_steps`` it is the
first label within the bound, because the labels of a state come in increasing weight and decreasing steps.

The search does not depend on the goal: it is kept per start state (in the layout space), and each query
resumes it until the goal is settled, so the resharding searches of one einsum (every compute layout of an
operand, from its one start) share a search, and so do later queries from the same start. ``max_labels``
bounds the labels one search may settle; a query that hits it says so (``complete`` False, with ``why``).

**The k best** (:func:`k_best`) are Yen's k shortest simple paths: each next path deviates from an earlier
one at some state (its *spur*), found by a search that avoids the earlier paths' next moves there and the
states before the spur. Exact, and each spur search is bounded like the main one.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

from shardalg.notation.syntax import Op

from .space import Move, Space, State

__all__ = ["Routes", "Search", "search_from", "routes", "k_best", "toward", "MAX_LABELS", "MAX_TIES"]

MAX_LABELS = 2_000_000  # labels one search may settle before it stops (and says so)
MAX_TIES = 64  # equally cheap sequences listed for one resharding before the list says it is cut

# (state before, move, state after) -> the move's weight in a weighted search
Weight = Callable[[State, Move, State], float]


class _Label:
    """One way of reaching a state: its weight and steps, and each predecessor label that reaches it so."""

    __slots__ = ("weight", "steps", "preds")

    def __init__(self, weight: float, steps: int, preds: list[tuple[State, _Label, Move]]):
        self.weight, self.steps, self.preds = weight, steps, preds


@dataclass(frozen=True)
class Routes:
    """The cheapest move sequences to a goal (every tie, up to a cap), or none.

    ``complete`` is False when a budget cut the answer: the search stopped at ``max_labels`` before it
    settled the goal, or there were more ties than the cap; ``why`` names the limit and how to lift it."""

    paths: tuple[tuple[Move, ...], ...]
    weight: float | None = None
    complete: bool = True
    why: str = ""


class Search:
    """A Dijkstra search on (weight, steps) from one state, resumed by each query (module docstring)."""

    def __init__(
        self,
        space: Space,
        start: State,
        weight: Weight | None = None,
        *,
        banned_states: frozenset[State] = frozenset(),
        banned_moves: frozenset[tuple[State, Move]] = frozenset(),
        toward: State | None = None,
        max_labels: int = MAX_LABELS,
    ):
        self.space, self.start, self.weight, self.toward = space, start, weight, toward
        self.banned_states, self.banned_moves = banned_states, banned_moves
        self.max_labels = max_labels
        self.labels: dict[State, list[_Label]] = {}
        self.settled = 0
        self._pushed = 0
        self._heap: list[tuple[float, int, int, State, State | None, _Label | None, Move | None]] = [
            (0, 0, 0, start, None, None, None)
        ]

    @property
    def stopped(self) -> bool:
        """Whether the budget ran out (the search may have missed sequences)."""
        return self.settled >= self.max_labels and bool(self._heap)

    def settle(self, goal: State, max_steps: int | None = None) -> _Label | None:
        """The goal's cheapest label within ``max_steps`` (None when unreachable, or when the budget ran
        out first: see :attr:`stopped`). Every tie of that label is recorded when it returns."""
        while True:
            found = self._best(goal, max_steps)
            if found is not None:
                self._drain(found.weight, found.steps)
                return found
            if not self._heap or self.settled >= self.max_labels:
                return None
            self._pop()

    def _best(self, goal: State, max_steps: int | None) -> _Label | None:
        for lab in self.labels.get(goal, ()):
            if max_steps is None or lab.steps <= max_steps:
                return lab
        return None

    def _drain(self, weight: float, steps: int) -> None:
        """Settle every entry with the same key, so the ties of a settled label are all recorded."""
        while self._heap and (self._heap[0][0], self._heap[0][1]) <= (weight, steps):
            self._pop()

    def _pop(self) -> None:
        weight, steps, _, state, pred_state, pred, move = heapq.heappop(self._heap)
        labs = self.labels.get(state)
        if labs is not None:
            last = labs[-1]  # the fewest steps so far, and no more weight than this entry
            if last.steps <= steps:
                if last.steps == steps and last.weight == weight and pred is not None:
                    last.preds.append((pred_state, pred, move))  # type: ignore[arg-type]
                return
        else:
            labs = self.labels[state] = []
        lab = _Label(weight, steps, [] if pred is None else [(pred_state, pred, move)])  # type: ignore[list-item]
        labs.append(lab)
        self.settled += 1
        self._expand(state, lab)

    def _expand(self, state: State, lab: _Label) -> None:
        steps = lab.steps + 1
        labels, heap = self.labels, self._heap
        for move, nxt, rank in self.space.neighbors(state):
            if nxt in self.banned_states or (self.banned_moves and (state, move) in self.banned_moves):
                continue
            if self.toward is not None and move[0] is Op.SLICE and not toward(move, self.toward):
                continue
            got = labels.get(nxt)
            if got is not None and got[-1].steps <= steps:
                continue  # an earlier label is no heavier and takes no more steps
            w = lab.weight + (rank if self.weight is None else self.weight(state, move, nxt))
            self._pushed += 1
            heapq.heappush(heap, (w, steps, self._pushed, nxt, state, lab, move))

    def paths(self, goal: _Label, cap: int, keep: Callable[[Move], bool] | None = None) -> list[tuple[Move, ...]]:
        """The sequences that reach ``goal`` (a settled label), one per sequence of ops (ties that apply the
        same ops in the same order differ only in which axes they name: another decomposition of one
        permutation into swaps, or where a spare axis is sliced), in a fixed order, at most ``cap + 1``.
        With ``keep``, only sequences whose every move it keeps."""
        memo: dict[int, dict[tuple[Op, ...], tuple[Move, ...]]] = {}

        def reps(lab: _Label) -> dict[tuple[Op, ...], tuple[Move, ...]]:
            got = memo.get(id(lab))
            if got is not None:
                return got
            got = {} if lab.preds else {(): ()}
            for _, pred, move in lab.preds:
                if keep is not None and not keep(move):
                    continue
                for ops, moves in reps(pred).items():
                    got.setdefault(ops + (move[0],), moves + (move,))
            memo[id(lab)] = got
            return got

        return list(reps(goal).values())[: cap + 1]


def toward(move: Move, goal: State) -> bool:
    """Whether a move slices only onto a dim that the goal shards over those axes (a *direct* slice)."""
    _, axes, dim = move
    return dim is not None and all(a in goal[0][dim] for a in axes)


def search_from(space: Space, start: State) -> Search:
    """The shared bytes-ranked search from ``start`` in ``space`` (made on first use)."""
    found = space.searches.get(start)
    if found is None:
        found = space.searches[start] = Search(space, start)
    assert isinstance(found, Search)
    return found


def _cut(search: Search, what: str) -> str:
    return (f"the layout search from {what} stopped after {search.max_labels:,} labels (the planning limit "
            "max_labels); pass limits=Limits(max_labels=...) to search further")  # fmt: skip


def routes(
    search: Search,
    goal: State,
    *,
    max_steps: int | None = None,
    max_ties: int = MAX_TIES,
    keep: Callable[[Move], bool] | None = None,
    what: str = "it",
) -> Routes:
    """The cheapest sequences from the search's start to ``goal``: every tie, at most ``max_ties``; with
    ``keep``, only the cheapest ones whose every move it keeps (none, with the weight set, when each of the
    cheapest takes another move)."""
    lab = search.settle(goal, max_steps)
    if lab is None:
        if search.stopped:
            return Routes((), None, False, _cut(search, what))
        return Routes(())
    paths = search.paths(lab, max_ties, keep)
    if len(paths) > max_ties:
        why = (f"more than {max_ties} equally cheap sequences of different ops reach {what}'s target (the planning limit "
               "max_ties); pass limits=Limits(max_ties=...) to list more")  # fmt: skip
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
) -> Routes:
    """Yen's ``k`` shortest simple sequences from ``start`` to ``goal`` of at most ``max_steps`` moves,
    cheapest (weight, then steps) first; ties keep the order the searches find them in."""
    first = Search(space, start, weight, max_labels=max_labels)
    lab = first.settle(goal, max_steps)
    if lab is None:
        return Routes((), None, not first.stopped, _cut(first, "the source") if first.stopped else "")
    best: list[tuple[tuple[float, int], tuple[Move, ...]]] = [((lab.weight, lab.steps), first.paths(lab, 0)[0])]
    candidates: list[tuple[float, int, int, tuple[Move, ...]]] = []
    seen = {best[0][1]}
    complete = True
    while len(best) < k:
        _, prev = best[-1]
        states = space.walk(start, prev)
        for i in range(len(prev)):
            root = prev[:i]
            banned = frozenset((states[i], p[i]) for _, p in best if len(p) > i and p[:i] == root)
            spur = Search(space, states[i], weight, banned_states=frozenset(states[:i]), banned_moves=banned,
                          max_labels=max_labels)  # fmt: skip
            got = spur.settle(goal, max_steps - i)
            complete = complete and not spur.stopped
            if got is None:
                continue
            path = root + spur.paths(got, 0)[0]
            if path in seen:
                continue
            seen.add(path)
            cost = _cost(space, start, path, weight)
            heapq.heappush(candidates, (cost, len(path), len(seen), path))
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
