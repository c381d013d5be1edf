"""Move sequences weighed per resource: the Pareto-optimal cost vectors of a layout space, for the ``steady``
overlap policy.

Under ``steady`` a plan's time is the largest, over its resources (each mesh axis's links, and the compute),
of the time its steps spend on that resource. That is not a sum of step weights, so one cheapest sequence per
state is not enough: a sequence that is slower in total may leave the axis the rest of the plan needs free.
A :class:`ParetoSearch` keeps, per state, every cost *vector* (seconds per resource) that no other vector
reaching it beats on every resource: Martins' label-setting search, entries taken in increasing order of their
vector's sum (a vector can only be dominated by one of a smaller sum, so a settled vector stays
undominated). Vectors whose largest entry reaches ``bound`` are dropped: adding steps never lowers it, so no
plan through them beats the bound. A search runs forward from an operand (vectors from it) or backward to a
result (vectors to it, over the predecessors of a closed space). ``max_labels`` bounds the vectors settled;
``stopped`` says when it was hit.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator

from shardalg.notation.plan import Step
from shardalg.notation.syntax import Tensor

from .redistribute import edge_weight
from .space import Edge, Move, Space, State

__all__ = ["ParetoSearch", "Vector", "edge_vector", "dominated"]

Vector = tuple[float, ...]
# (state before, move, state after) -> the move's seconds per resource
VectorWeight = Callable[[State, Move, State], Vector]


class Label:
    """One undominated way of linking a state to the origin: its vector, steps, and the label and move it
    came through (the previous label forward, the next one backward)."""

    __slots__ = ("vector", "steps", "link", "move")

    def __init__(self, vector: Vector, steps: int, link: Label | None, move: Move | None):
        self.vector, self.steps, self.link, self.move = vector, steps, link, move

    def moves(self, backward: bool) -> tuple[Move, ...]:
        """The moves from the origin to this label's state (forward), or from its state to the origin."""
        out: list[Move] = []
        label: Label | None = self
        while label is not None and label.move is not None:
            out.append(label.move)
            label = label.link
        return tuple(out) if backward else tuple(reversed(out))


def dominated(v: Vector, labels: list[Label]) -> bool:
    """Whether some label's vector is at most ``v`` on every resource."""
    return any(all(a <= b for a, b in zip(lab.vector, v, strict=True)) for lab in labels)


class ParetoSearch:
    """Every undominated cost vector of the states reachable from (or reaching) ``origin`` below ``bound``."""

    def __init__(
        self,
        space: Space,
        origin: State,
        weight: VectorWeight,
        size: int,
        *,
        backward: bool = False,
        bound: float = float("inf"),
        max_labels: int,
    ) -> None:
        self.space, self.origin, self.weight, self.backward = space, origin, weight, backward
        self.bound, self.max_labels = bound, max_labels
        self.labels: dict[State, list[Label]] = {}
        self.settled = 0
        self.stopped = False
        self._run(size)

    def _edges(self, state: State) -> Iterator[tuple[Move, State, Vector]]:
        if self.backward:  # in one order, whatever earlier queries closed: the heap breaks ties by push order
            for move, before, _rank, _key in sorted(self.space.predecessors(state), key=_by_origin):
                yield move, before, self.weight(before, move, state)
        else:
            for move, after, _rank, _key in self.space.neighbors(state):
                yield move, after, self.weight(state, move, after)

    def _run(self, size: int) -> None:
        zero: Vector = (0.0,) * size
        heap: list[tuple[float, int, int, Vector, State, Label | None, Move | None]] = [
            (0.0, 0, 0, zero, self.origin, None, None)
        ]
        pushed = 0
        while heap:
            _, steps, _, vector, state, link, move = heapq.heappop(heap)
            here = self.labels.setdefault(state, [])
            if dominated(vector, here):
                continue
            if self.settled >= self.max_labels:
                self.stopped = True
                return
            label = Label(vector, steps, link, move)
            here.append(label)
            self.settled += 1
            for m, nxt, w in self._edges(state):
                v = tuple(a + b for a, b in zip(vector, w, strict=True))
                if max(v) >= self.bound:
                    continue
                there = self.labels.get(nxt)
                if there and dominated(v, there):
                    continue
                pushed += 1
                heapq.heappush(heap, (sum(v), steps + 1, pushed, v, nxt, label, m))


def _by_origin(edge: Edge) -> tuple[State, tuple[object, ...]]:
    return edge[1], edge[3]


def edge_vector(
    src: Tensor,
    weigh: Callable[[Step], float],
    lanes: Callable[[Step], tuple[str, ...]],
    slot: dict[str, int],
    size: int,
) -> VectorWeight:
    """A move's seconds (``weigh``) on each resource it holds (``lanes``), as a vector of ``size`` entries: a
    mesh axis at its ``slot``, anything else (the compute) last; in ``src``'s space, memoized per edge."""

    def vector(step: Step) -> Vector:
        seconds = weigh(step)
        held = {slot.get(lane, size - 1) for lane in lanes(step)}
        return tuple(seconds if i in held else 0.0 for i in range(size))

    return edge_weight(src, vector)
