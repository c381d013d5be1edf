"""The per-resource search (:mod:`shardalg.planning.pareto`) against every short move sequence: each sequence's
vector of seconds per resource is matched or beaten, on every resource at once, by a vector the search kept
at the state it ends in; the kept vectors of a state never beat one another."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.traffic import Sizes
from shardalg.notation.plan import Step
from shardalg.notation.syntax import Dim, Tensor
from shardalg.planning.pareto import ParetoSearch, Vector, edge_vector
from shardalg.planning.space import space_of, state_of

SIZES = Sizes({"I": 16, "J": 16})


def _weigh(step: Step) -> float:
    """A step's seconds, made up: more axes cost more, a gather most (any positive weights will do)."""
    return 0.0 if not step.communicates else 1.0 + len(step.axes) + (step.op.value == "AllGather")


def _lanes(step: Step) -> tuple[str, ...]:
    return step.axes if step.communicates else ()


@st.composite
def tensors(draw: st.DrawFn) -> tuple[Mesh, Tensor]:
    mesh = Mesh({a: draw(st.sampled_from([2, 4])) for a in "XYZ"[: draw(st.integers(1, 3))]})
    dims: dict[str, list[str]] = {"I": [], "J": []}
    unreduced = []
    for a in mesh.names:
        where = draw(st.sampled_from(["I", "J", "R", "U"]))
        if where in dims:
            dims[where].append(a)
        elif where == "U":
            unreduced.append(a)
    return mesh, Tensor("A", tuple(Dim(d, tuple(axes)) for d, axes in dims.items()), tuple(unreduced))


def _add(a: Vector, b: Vector) -> Vector:
    return tuple(x + y for x, y in zip(a, b, strict=True))


@settings(max_examples=40, deadline=None)
@given(tensors(), st.sampled_from([float("inf"), 6.0]))
def test_every_short_sequence_is_matched_on_every_resource(case: tuple[Mesh, Tensor], bound: float) -> None:
    mesh, t = case
    slot = {a: i for i, a in enumerate(mesh.names)}
    size = len(mesh) + 1
    weight = edge_vector(t, _weigh, _lanes, slot, size)
    space = space_of(t, mesh, SIZES)
    search = ParetoSearch(space, state_of(t), weight, size, bound=bound, max_labels=1_000_000)
    assert not search.stopped
    for state, labels in search.labels.items():  # undominated among themselves
        for i, a in enumerate(labels):
            for j, b in enumerate(labels):
                assert i == j or not all(x <= y for x, y in zip(a.vector, b.vector, strict=True))
        for lab in labels:  # each label's moves lead to its state and add up to its vector
            walked = space.walk(state_of(t), lab.moves(False))
            assert walked[-1] == state
            total: Vector = (0.0,) * size
            for before, move, after in zip(walked, lab.moves(False), walked[1:], strict=False):
                total = _add(total, weight(before, move, after))
            assert total == lab.vector
    todo = [(state_of(t), (0.0,) * size, 0)]
    while todo:  # every sequence of up to three moves
        state, v, depth = todo.pop()
        if max(v) < bound:
            kept = search.labels.get(state, [])
            assert any(all(x <= y for x, y in zip(k.vector, v, strict=True)) for k in kept), (state, v)
        if depth < 3:
            for move, after, _rank, _key in space.neighbors(state):
                todo.append((after, _add(v, weight(state, move, after)), depth + 1))


def test_the_budget_stops_the_search_and_says_so() -> None:
    mesh = Mesh(X=2, Y=2)
    t = Tensor("A", (Dim("I", ("X",)), Dim("J", ("Y",))))
    weight = edge_vector(t, _weigh, _lanes, {"X": 0, "Y": 1}, 3)
    search = ParetoSearch(space_of(t, mesh, SIZES), state_of(t), weight, 3, max_labels=3)
    assert search.stopped and search.settled == 3
