"""The layout space of one tensor shape on one mesh: every sharding as a canonical state, and its moves.

A *state* is a sharding without names: the axes of each dim as an ordered tuple (major first) and the sorted
unreduced axes (invariant marks do not change where data lives, so they are not part of it). A *move* is one
rule application ``(op name, axes, dim index)`` (``Move``); the moves a state allows, and where each leads,
come from the rule table (:data:`shardalg.algebra.ops.RULES`, each rule's ``moves`` and ``effect``), so a
new collective is searched as soon as it is a rule. Moves to a layout whose known dims do not divide by their
axes are left out.

A space depends only on what the search sees, so it is shared (:func:`space_of`) by every tensor of that
shape: the dims' known sizes (literal or bound; None when symbolic), the dtype and the mesh. ``A[I, J]``
and ``B[J, K]`` with unknown sizes search one space; each state's moves are computed once per mesh
(:func:`layout_moves`) and ranked once while the space is kept. The :data:`MAX_SPACES` most recently used
spaces are kept: a long-running process plans many shapes, and keeping every space grew the heap without
bound (a fuzz run's trivial print stage took 3.4 s of CPU, most likely a full garbage collection over it).
A space dropped is made anew when asked for again, so answers do not depend on it.

Each move carries its *rank*: the bytes it communicates as an exact integer (:meth:`Space.rank`), the
search's default edge weight.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from math import prod
from typing import Any, TypeVar

from shardalg.algebra.layout import Layout
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.ops import RECORDS, RULES
from shardalg.algebra.traffic import DEFAULT_DTYPE, SEARCH_AXIS, SEARCH_DIM, Sizes, Volume, moves_nothing
from shardalg.cache import Kind, memo, memoized
from shardalg.notation.syntax import DType, Op, Tensor

__all__ = [
    "Move",
    "State",
    "Space",
    "space_of",
    "state_of",
    "MAX_SPACES",
    "SLICE",
    "SEARCH_LOCK",
    "searching",
]

# The spaces and the searches they keep are shared by every query of the process, and a query grows them (it
# closes states, resumes a search): two threads doing so at once corrupted each other's searches (8 threads
# planning the same statements found other plans than a serial run). One query searches at a time: the
# planner's entry points (``searching``) hold this lock, re-entrant, so a query that plans inside another
# (a backward pass, a program) holds it once more.
SEARCH_LOCK = threading.RLock()
_F = TypeVar("_F", bound=Callable[..., Any])


def searching(fn: _F) -> _F:
    """``fn`` run holding :data:`SEARCH_LOCK` (an entry point of the planner)."""

    @functools.wraps(fn)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with SEARCH_LOCK:
            return fn(*args, **kwargs)

    return locked  # type: ignore[return-value]


# (the op's name, axes, target dim index or None). The op is named by its value (``"AllGather"``), not held as
# the Op: an enum member is an object the garbage collector tracks, and so would be every tuple holding a
# move (edges, predecessors, paths). With strings the collector stops tracking those tuples, and a large
# search's full collections take a fraction of the time.
Move = tuple[str, tuple[str, ...], int | None]
SLICE: str = Op.SLICE.value  # the name a move gives Slice
State = tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]  # (axes per dim, unreduced)
Edge = tuple[Move, State, int, tuple[int, tuple[str, ...], int]]  # (move, other state, rank, sort key)


@memoized(Kind.PIECE)
def layout_moves(
    state: State, mesh: Mesh
) -> tuple[tuple[Move, State, tuple[int, tuple[str, ...], int]], ...]:
    """Every move the rules allow from a layout on ``mesh``, with the layout it leads to and its sort key (the
    rule's place in the table, the axes, the dim index), whatever the tensor's sizes: shared by the spaces
    of every tensor of one rank (a query's operands and result), each of which then keeps the moves whose
    result its sizes divide, and ranks them by its own bytes."""
    lay = Layout(state[0], state[1], ())
    out = []
    for i, (op, r) in enumerate(RULES.items()):
        for axes, dim in r.moves(lay, mesh):
            nxt = r.effect(lay, axes, dim)
            out.append(
                ((op.value, axes, dim), (nxt.dims, nxt.unreduced), (i, axes, -1 if dim is None else dim))
            )
    return tuple(out)


MAX_SPACES = 64  # spaces kept (the most recently used): one query uses a few, one per shape it reshards
# the spaces kept, by (known dim sizes, dtype, mesh), least recently used first; cleared by clear_caches
_SPACES: dict[tuple[tuple[int | None, ...], DType, Mesh], Space] = {}


def state_of(t: Tensor) -> State:
    """The canonical state of a tensor's sharding."""
    return tuple(d.axes for d in t.dims), t.unreduced


def space_of(t: Tensor, mesh: Mesh, sizes: Sizes) -> Space:
    """The (shared) layout space of ``t``'s shape on ``mesh``."""
    key = (tuple(sizes.of(d.label, d.size) for d in t.dims), t.dtype or DEFAULT_DTYPE, mesh)
    found = _SPACES.pop(key, None)
    if found is None:
        found = Space(*key)
        while len(_SPACES) >= MAX_SPACES:
            _SPACES.pop(next(iter(_SPACES))).searches.clear()
    _SPACES[key] = found  # most recently used last
    return found


def _forget_spaces() -> None:
    """Forget every space (and the searches they hold): the next query searches anew. A search refers to
    its space, so a forgotten space's searches are dropped first: the two would otherwise be a reference
    cycle, freed only by the garbage collector (a full collection, after a fresh search: about half of its
    time)."""
    for space in _SPACES.values():
        space.searches.clear()
    _SPACES.clear()


memo(f"{__name__}._SPACES", Kind.PIECE, _SPACES, _forget_spaces)


class Space:
    """The layouts of one shape on one mesh, with each layout's moves and their ranks computed once.

    A rank is the move's bytes (:mod:`shardalg.algebra.traffic`) scaled to an exact integer: unknown dims
    count 4096 and unknown axes 4 in the search's order of exploration (a common factor of one layout space
    for a dim; the plans found are chosen among by :mod:`.symbolic`, never by it), and multiplying by 8 x the product of all
    axis sizes clears every denominator (a group size divides that product; 8 x bytes per element x the
    op's factor is whole). Searches from a state are kept here (``searches``), so every query from that
    state, for any target, resumes one search."""

    def __init__(self, sizes: tuple[int | None, ...], dtype: DType, mesh: Mesh):
        self.sizes, self.dtype, self.mesh = sizes, dtype, mesh
        self.axis = {a.name: a.size or SEARCH_AXIS for a in mesh}
        self.devices = prod(self.axis.values())
        self.elements = prod(n or SEARCH_DIM for n in sizes)
        self.unit = {op: int(8 * dtype.bytes * r.factor) for op, r in RECORDS.items()}
        self.searches: dict[object, object] = {}
        self._next: dict[State, tuple[Edge, ...]] = {}
        self._group = {a.name: a.size for a in mesh}
        self.closed: set[State] = set()  # states whose every successor is known (see close)
        self._prev: dict[State, list[Edge]] = {}
        self._divisible: dict[tuple[tuple[str, ...], ...], bool] = {}
        self._ranks: dict[tuple[object, ...], int] = {}

    def rank(self, op: str, axes: tuple[str, ...], before: State, after: State) -> int:
        """The move's bytes as an exact integer (see the class docstring); ``op`` is the op's name."""
        memo = (op, axes, before[0], after[0])
        got = self._ranks.get(memo)
        if got is None:
            got = self._ranks[memo] = self._rank(op, axes, before, after)
        return got

    def _rank(self, name: str, axes: tuple[str, ...], before: State, after: State) -> int:
        op = Op(name)
        volume = RECORDS[op].volume
        if volume is Volume.NONE or moves_nothing(op, axes, before[0], before[1], self.mesh):
            return 0  # no data moves (as step_bytes says)
        dims = after[0] if volume is Volume.OUTPUT_GROUP else before[0]
        skip = axes if volume is Volume.INPUT_GROUP else ()
        group = prod(self.axis[a] for d in dims for a in d if a not in skip)
        return self.devices // group * self.elements * self.unit[op]

    def divisible(self, dims: tuple[tuple[str, ...], ...]) -> bool:
        """Whether every known dim divides by the sizes of the axes that shard it (memoized per layout)."""
        got = self._divisible.get(dims)
        if got is None:
            got = self._divisible[dims] = self._divides(dims)
        return got

    def _divides(self, dims: tuple[tuple[str, ...], ...]) -> bool:
        for n, axes in zip(self.sizes, dims, strict=True):
            if n is None or not axes:
                continue
            sizes = [self._group[a] for a in axes]
            if None not in sizes and n % prod(s for s in sizes if s is not None):
                return False
        return True

    def neighbors(self, state: State) -> tuple[Edge, ...]:
        """Every move the rules allow from ``state``, in the rule table's order, with its result, its rank and
        a sort key (the rule's place in the table, the axes, the dim index)."""
        got = self._next.get(state)
        if got is None:
            got = self._next[state] = tuple(self._moves(state))
        return got

    def _moves(self, state: State) -> Iterator[Edge]:
        for move, after, key in layout_moves(state, self.mesh):
            if self.divisible(after[0]):
                yield move, after, self.rank(move[0], move[1], state, after), key

    def close(self, starts: list[State]) -> bool:
        """Make ``starts`` and everything they reach *closed*: each state's moves computed and recorded as
        the predecessors of where they lead, so :meth:`predecessors` is complete within that set (a search
        backward from a target needs it). Whether the closed set grew."""
        todo = [s for s in starts if s not in self.closed]
        grew = bool(todo)
        if grew:  # a backward search made before knew fewer predecessors: it is made anew when asked for
            for key in [k for k in self.searches if isinstance(k, tuple) and k[0] == "to"]:
                del self.searches[key]
        self.closed.update(todo)
        while todo:
            state = todo.pop()
            for move, nxt, rank, key in self.neighbors(state):
                self._prev.setdefault(nxt, []).append((move, state, rank, key))
                if nxt not in self.closed:
                    self.closed.add(nxt)
                    todo.append(nxt)
        return grew

    def predecessors(self, state: State) -> list[Edge]:
        """The moves into ``state`` from closed states, each as (move, the state it starts from, rank, key),
        in the order the states were closed (which depends on earlier queries: a reader whose answer depends
        on the order sorts them)."""
        return self._prev.get(state, [])

    def walk(self, start: State, moves: tuple[Move, ...]) -> list[State]:
        """The states a move sequence passes through, ``start`` first."""
        out = [start]
        for op, axes, dim in moves:
            lay = RULES[Op(op)].effect(Layout(out[-1][0], out[-1][1], ()), axes, dim)
            out.append((lay.dims, lay.unreduced))
        return out
