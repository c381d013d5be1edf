"""One legality: ``check``, ``plan``, ``simulate``, ``shape``, ``backward`` and ``cost`` agree on what is legal
(check legal iff plan finds a plan: random einsums, partial sums too, and collectives on up to three axes),
and a refusal from any of them is the legality's own error, with its span, its caret and its fix (issue 13:
check said legal where plan said ShapeMismatch or IndivisibleDim, or simulate "dim 4 appears twice"; plan
lost the caret and the fix that check shows)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from shardalg import cost, plans
from shardalg.algebra.legality import check, notes
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.shape import shape
from shardalg.cli import main
from shardalg.errors import (
    IllegalSharding,
    IndivisibleDim,
    ShapeMismatch,
    ShardalgError,
    UnknownAxis,
    UnreachableUnreduced,
)
from shardalg.notation.syntax import Arrow, Collective, Op, Product, Tensor
from shardalg.numeric.execute import simulate
from shardalg.planning.backward import backward

from ..shared.layouts import sharded
from .test_planner import einsums
from .test_unreduced import unreduced_reshardings

# (statement, mesh, sizes, the error class every stage raises)
ILLEGAL = [
    ("A[I, J] · B[J, K] -> C[I]", "X=2", None, ShapeMismatch),
    ("AllToAll_{Y,I}(A[J_Y, K, I])", "X=2,Y=2", {"I": 1, "J": 2, "K": 1}, IndivisibleDim),
    ("A[4, 4] · B[4, K]", "X=2", None, ShapeMismatch),
    ("A[I_X, I] -> A[I, I_X]", "X=2", None, ShapeMismatch),
    ("A[I_Q, J] · B[J, K] -> C[I, K]", "X=4", None, UnknownAxis),
    # found by the long fuzz: check called these legal, plan said NoPlan (no rule makes partial sums)
    ("A[J, B] -> A[J, B]{U_Z}", "Z=4", None, UnreachableUnreduced),
    ("int32[F] -> A: int4[F]{U_Z}", "X=1,Y=1,Z=2", None, UnreachableUnreduced),
    ("C[I, D] -> B[I, D]", "X=4,Y=2", None, ShapeMismatch),
    ("A[I, J]{U_X} ·_LOCAL B[J, K]{U_X} -> C[I, K]", "X=2", None, IllegalSharding),
    ("A[I, J_X] ·_LOCAL B[J, K] -> C[I, K]", "X=2", None, IllegalSharding),
    # fuzzing (issue 13): an explicit contraction of a dim only the right operand has, with an unreduced result,
    # raised KeyError in the unreduced-result rule
    ("A[D_Y] ·_F B[J, F] -> C[D, J]{U_X}", "X=4,Y=2", None, ShapeMismatch),
    ("A[F_X, K] ·_{I,J} B[F, J_X]{U_Z} -> W[D]{U_Z}", "X=4,Z=2", None, ShapeMismatch),
    # fuzzing (issue 25): a local product leaves partial sums over X only (its contraction's); check called
    # these legal, plan said NoPlan. Y=4 would be legal: a Permute renames X into Y.
    ("A[I, J_X] ·_LOCAL B[J_X, K] -> C[I, K]{U_J}", "X=4,J=2", None, UnreachableUnreduced),
    ("A[I, J_X] ·_LOCAL B[J_X, K] -> C[I, K]{U_Y}", "X=4,Y=2", None, UnreachableUnreduced),
    # random examples (stop 50): L is kept by the written result, so the local product gives C[L_X, I],
    # reduced; the rule took L as contracted too (C[I]{U_X}) and called it legal, plan said NoPlan
    ("A[K, L_X, I] ·_LOCAL B[L_X, K] -> C[L, I]{U_X}", "X=2", None, UnreachableUnreduced),
]

# statements the planner plans: check says legal (notes what the plans fix), and the plans run right
LEGAL = [
    ("A[4, 4]", "X=2", None),
    ("A[I_X, J] · B[J, K_X] -> C[I_X, K]", "X=4", None),
    ("A[I, J]{U_X} · B[J, K]{U_X} -> C[I, K]", "X=2", None),
    ("P[B_X, D] · Q[B_Y, D, F] -> R[B, F]", "X=2,Y=2", None),
    ("AllToAll_{Y,I}(A[J_Y, K, I])", "X=2,Y=2", {"I": 2, "J": 2, "K": 1}),
    ("A[I, J_X] ·_LOCAL B[J_X, K] -> C[I, K]{U_Y}", "X=2,Y=2", None),
    ("A[K, L_X, I] ·_LOCAL B[L_X, K] -> C[I]{U_X}", "X=2", None),
]


@pytest.mark.parametrize(("source", "mesh", "sizes", "error"), ILLEGAL, ids=[i[0] for i in ILLEGAL])
def test_every_stage_refuses_an_illegal_statement_with_the_same_error(source, mesh, sizes, error):
    found = check(source, mesh, sizes)
    assert found and issubclass(found[0].error, error)
    said = str(found[0])
    assert "^" in said  # a caret under the offending part
    for stage in (plans, simulate, cost):
        with pytest.raises(error) as info:
            stage(source, mesh, sizes)
        assert str(info.value) == said, stage.__name__
    if "·" in source:
        with pytest.raises(error) as info:
            backward(source, mesh, sizes)
        assert str(info.value) == said


@pytest.mark.parametrize(("source", "mesh", "sizes"), LEGAL, ids=[i[0] for i in LEGAL])
def test_a_legal_statement_is_planned_and_its_plans_are_right(source, mesh, sizes):
    assert check(source, mesh, sizes) == []
    assert plans(source, mesh, sizes)
    assert all(r.ok for r in simulate(source, mesh, sizes))


def test_a_lone_tensor_may_repeat_a_dim_and_every_stage_says_so():
    assert check("A[4, 4]", "X=2") == []
    assert shape("A[4_X, 4]", "X=2").local_shape == (2, 4)
    assert [r.ok for r in simulate("A[4, 4]", "X=2")] == [True]


def test_case_4_is_a_note_on_a_request_and_an_error_as_a_local_product():
    (note,) = notes("A[I_X, J] · B[J, K_X] -> C[I_X, K]", Mesh.parse("X=4"))
    assert note.rule == "case-4"
    assert note.note().startswith("note: case 4: the result dims I and K are both sharded over X;")
    assert [v.rule for v in check("A[I_X, J] ·_LOCAL B[J, K_X] -> C[I_X, K]", "X=4")] == ["case-4"]
    bw = backward("A[I_X, J] · B[J, K_X] -> C[I_X, K]", "X=8")
    assert ("AllGather", ("X",)) in bw.collectives


def test_plan_keeps_the_span_and_the_fix_that_check_shows(capsys):
    argv = ["A[I_Q, J] · B[J, K] -> C[I, K]", "--mesh", "X=4"]
    assert main(["check", *argv]) == 1
    checked = capsys.readouterr().err
    assert main(["plan", *argv]) == 1
    planned = capsys.readouterr().err
    assert (
        planned
        == checked
        == (
            "error: mesh axis Q is not in the mesh (X) [unknown-axis]\n"
            "  A[I_Q, J] · B[J, K] -> C[I, K]\n"
            "    ^^^\n"
            "  fix: use an axis of the mesh (X), or add Q to it\n"
        )
    )


OPS = [Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALL_REDUCE, Op.ALL_TO_ALL, Op.SLICE, Op.PERMUTE]


def _agree(stmt: object, mesh: Mesh, sizes: dict[str, int] | None = None) -> None:
    found_rules = [v.rule for v in check(stmt, mesh, sizes)]  # type: ignore[arg-type]
    try:
        found = plans(stmt, mesh=mesh, sizes=sizes)
    except ShardalgError as err:
        assert found_rules, (
            f"{stmt} on {mesh}: check says legal, plan says {type(err).__name__}: {err.message}"
        )
        return
    assert found and found.complete
    assert not found_rules, f"{stmt} on {mesh}: planned, yet check says {found_rules}"


@given(einsums())
def test_check_legal_iff_an_einsum_is_planned(case: tuple[Mesh, Tensor, Tensor, Tensor | None]) -> None:
    mesh, a, b, c = case
    _agree(Arrow(Product(a, b), c) if c is not None else Product(a, b), mesh)


@given(einsums(), st.data())
def test_check_legal_iff_a_local_product_is_planned(
    case: tuple[Mesh, Tensor, Tensor, Tensor | None], data: st.DataObject
) -> None:
    mesh, a, b, c = case
    assume(c is not None)
    assert c is not None
    unreduced = data.draw(st.lists(st.sampled_from(list(mesh.names)), max_size=2, unique=True))
    free = {ax for d in c.dims for ax in d.axes}
    out = replace(c, unreduced=tuple(x for x in unreduced if x not in free))
    _agree(Arrow(Product(a, b, local=True), out), mesh)


@st.composite
def collectives(draw: st.DrawFn) -> tuple[Mesh, Collective, dict[str, int]]:
    mesh, t = draw(sharded())
    axes = tuple(draw(st.lists(st.sampled_from(list(mesh.names)), min_size=1, max_size=2, unique=True)))
    dim = draw(st.sampled_from([None, *t.dim_names]))
    sizes = {d: draw(st.integers(1, 8)) for d in t.dim_names if not d.isdigit()}
    return mesh, Collective(draw(st.sampled_from(OPS)), axes, t, dim), sizes


@given(collectives())
def test_check_legal_iff_a_collective_is_planned(case: tuple[Mesh, Collective, dict[str, int]]) -> None:
    mesh, c, sizes = case
    _agree(c, mesh, sizes)


def test_the_examiners_reproducers() -> None:
    assert [v.rule for v in check("A[I] · B[K] -> C[I, K]{U_X}", "X=2")] == ["unreduced-result"]
    assert [v.rule for v in check("A[I, J] · B[J, K] -> C[I, K]{U_X}", "X=4")] == []
    assert [v.rule for v in check("AllToAll_{Y,I}(A[J_Y, K, I])", "X=2,Y=2", "I=1,J=2,K=1")] == [
        "indivisible-dim"
    ]
    assert [v.rule for v in check("A[L]{U_X} · B[K]{U_Y} -> C[L, K]{U_XZ}", "X=3,Y=2,Z=3")] == [
        "unreduced-result"
    ]
    assert [v.rule for v in check("A[L]{U_X} · B[K]{U_Y} -> C[L, K]{U_XZ}", "X=3,Y=2,Z=2")] == []


@given(unreduced_reshardings())
def test_check_legal_iff_a_resharding_is_planned(case: tuple[Mesh, Tensor, Tensor]) -> None:
    """Reshardings with partial sums on either side (the long fuzz found replicated -> unreduced, legal to
    check and refused by plan)."""
    mesh, a, b = case
    _agree(Arrow(a, b), mesh, {d: 8 for d in a.dim_names})
