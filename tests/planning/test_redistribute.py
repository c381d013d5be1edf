"""Redistribute: sequences of rules between two shardings of a tensor, cheapest first, each checked on
numbers by the executor; unreachable targets are a NoPlan that says why."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.traffic import Sizes
from shardalg.errors import NoPlan, ShapeMismatch
from shardalg.notation.parse import parse_tensor
from shardalg.notation.plan import Plan
from shardalg.notation.syntax import Dim, Tensor
from shardalg.numeric.execute import run_plan
from shardalg.planning.planner import plans
from shardalg.planning.redistribute import plan_bytes, redistribute
from shardalg.planning.symbolic import beaten_everywhere
from tests.shared.layouts import laid_out, sharded

T = parse_tensor


def ops(p: Plan) -> list[str]:
    return [f"{s.op.value}_{''.join(s.axes)}" + (f",{s.dim}" if s.dim else "") for s in p.steps]


CASES = [
    ("A[I_X, J]", "A[I, J_X]", "X=4", ["AllToAll_X,J"]),
    ("A[I_X, J]", "A[I_Y, J]", "X=2,Y=2", ["Permute_XY"]),
    ("A[I_XY, J]", "A[I, J]", "X=4,Y=2", ["AllGather_XY"]),
    ("A[I_XY, J]", "A[I_YX, J]", "X=4,Y=2", ["Permute_XY"]),
    ("A[I, J]{U_X}", "A[I_X, J]", "X=4", ["ReduceScatter_X,I"]),
    ("A[I, J]{U_X}", "A[I, J]", "X=4", ["AllReduce_X"]),
    ("A[I, J]", "A[I_XY, J]", "X=4,Y=2", ["Slice_XY,I"]),
    ("A[I_X, J]{U_Y}", "A[I, J_Y]", "X=2,Y=2", ["ReduceScatter_Y,J", "AllGather_X"]),
    ("A[I_X, J]", "A[I_X, J]", "X=2", []),
]


@pytest.mark.parametrize("src, dst, mesh, first", CASES)
def test_cheapest_first(src: str, dst: str, mesh: str, first: list[str]) -> None:
    found = redistribute(T(src), T(dst), Mesh.parse(mesh))
    assert ops(found[0]) == first
    assert all(p.output == T(dst) for p in found)
    m = Mesh.parse(mesh)
    costs = [
        plan_bytes(p, m, Sizes()) for p in found
    ]  # I and J unknown: no later plan is fewer at every size
    assert not any(beaten_everywhere(a, b) for i, a in enumerate(costs) for b in costs[i + 1 :])
    assert all(run_plan(p, mesh).ok for p in found)


def test_alternatives_are_listed() -> None:
    found = [ops(p) for p in redistribute(T("A[I_X, J]"), T("A[I, J_X]"), Mesh.parse("X=4"))]
    assert ["AllGather_X", "Slice_X,J"] in found
    # gathering the major axis of I_XY takes a permutation first (or gathering both)
    found = [ops(p) for p in redistribute(T("A[I_XY, J]"), T("A[I_Y, J]"), Mesh.parse("X=2,Y=2"))]
    assert ["Permute_XY", "AllGather_X"] in found


def test_seed_question_2_spare_axis() -> None:
    # [B_X, D_Y] -> [B, D_Y] on a 4x4x4 cube: AllGather_X, or slice onto the idle Z first and gather over XZ
    found = redistribute(T("A[B_X, D_Y]"), T("A[B, D_Y]"), Mesh.parse("X=4,Y=4,Z=4"), {"B": 1024, "D": 4096})
    assert ops(found[0]) == ["AllGather_X"]
    assert ["Slice_Z,B", "AllGather_XZ"] in [ops(p) for p in found]
    m = Mesh(X=4, Y=4, Z=4)
    assert plan_bytes(found[0], m, Sizes({"B": 1024, "D": 4096})).number == 2 * 1024 * 4096 // 4  # 2BD/Y


def test_making_a_value_unreduced_is_no_plan_with_the_reason() -> None:
    with pytest.raises(NoPlan) as info:
        redistribute(T("A[I, J]"), T("A[I, J]{U_X}"), Mesh.parse("X=2"))
    assert info.value.message == (
        "no rule makes A[I, J] unreduced over X: the global value of A[I, J]{U_X} is the sum of the partials "
        "over X, so all but one replica would have to be zeroed, and no collective does that"
    )
    assert (
        info.value.fix == "drop {U_X} from the target, or produce the value unreduced from a product (case 3)"
    )


def test_not_the_same_tensor() -> None:
    with pytest.raises(ShapeMismatch):
        redistribute(T("A[I, J]"), T("A[I, K]"), Mesh.parse("X=2"))
    with pytest.raises(ShapeMismatch):
        redistribute(T("A[I, J]"), T("B[I, J]"), Mesh.parse("X=2"))


def test_planner_accepts_a_resharding_request() -> None:
    p = plans("A[I_X, J] -> A[I, J_X]", mesh=Mesh.parse("X=4"))
    assert ops(p[0]) == ["AllToAll_X,J"]


AXES = ("X", "Y", "Z")


@st.composite
def pairs(draw: st.DrawFn) -> tuple[Mesh, Tensor, Tensor]:
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    mesh = Mesh({a: s for a, s in zip(AXES, sizes, strict=False)})
    labels = ("I", "J", "K")[: draw(st.integers(1, 3))]

    def layout(unreduced: tuple[str, ...] | None) -> Tensor:
        dims: list[list[str]] = [[] for _ in labels]
        u = []
        for a in mesh.names:
            kinds = ["R", "S", "U"] if unreduced is None or a in unreduced else ["R", "S"]
            kind = draw(st.sampled_from(kinds))
            if kind == "U":
                u.append(a)
            elif kind == "S":
                dims[draw(st.integers(0, len(labels) - 1))].append(a)
        for d in dims:
            d[:] = draw(st.permutations(d))
        return Tensor("A", tuple(Dim(n, tuple(x)) for n, x in zip(labels, dims, strict=True)), tuple(u))

    src = layout(None)
    dst = layout(src.unreduced)
    return mesh, src, dst


@given(pairs())
def test_every_sequence_checks_out(case: tuple[Mesh, Tensor, Tensor]) -> None:
    mesh, src, dst = case
    found = redistribute(src, dst, mesh, limit=3)
    assert found
    for p in found:
        assert p.output == dst
        res = run_plan(p, mesh, rng=np.random.default_rng(0))
        assert res.ok, f"{src} -> {dst}\n{p}\n{res}"


def _outcome(run) -> object:
    """A query's plans (their steps and outputs), or the error it raised (its type and message)."""
    try:
        return [(p.steps, p.output) for p in run()]
    except (NoPlan, ShapeMismatch) as e:
        return type(e).__name__, str(e)


@given(sharded(), st.data())
def test_one_search_answers_each_target_as_a_query_of_its_own(drawn, data) -> None:
    """The reshardings of one source share one search of its space (resumed for each target): every target's
    plans are those redistribute finds for it alone, by bytes and by seconds on a chip, the best and the
    next ones (Yen's spurs), and a target it cannot reach is the same error."""
    from shardalg.costs.ranking import redistribute as by_seconds
    from shardalg.costs.ranking import reshardings

    mesh, src = drawn
    targets = data.draw(st.lists(laid_out(mesh, len(src.dims)), min_size=2, max_size=5))
    sizes = {"I": 1728, "J": 3456, "K": 6912}  # every product of three axes of sizes 1-4 divides them
    for hw in (None, "tpu-v5e", "tpu-v4p"):  # v4: a 2-axis is a line, a 4-axis a ring
        shared = reshardings(src, mesh, sizes, hw=hw)
        for t, limit in itertools.product(targets, (1, 3)):
            alone = _outcome(lambda: by_seconds(src, t, mesh, sizes, limit=limit, hw=hw))  # noqa: B023
            assert _outcome(lambda: shared.to(t, limit=limit)) == alone  # noqa: B023
