"""One legality: ``check``, ``plan``, ``simulate``, ``shape``, ``backward`` and ``cost`` agree on what is legal,
and a refusal from any of them is the legality's own error, with its span, its caret and its fix (issue 13:
check said legal where plan said ShapeMismatch or IndivisibleDim, or simulate "dim 4 appears twice"; plan
lost the caret and the fix that check shows)."""

from __future__ import annotations

import pytest

from shardalg.algebra.legality import check, notes
from shardalg.algebra.shape import shape
from shardalg.cli import main
from shardalg.costs.plancost import cost
from shardalg.errors import IllegalSharding, IndivisibleDim, ShapeMismatch, UnknownAxis
from shardalg.numeric.execute import simulate
from shardalg.planning.backward import backward
from shardalg.planning.planner import plans

# (statement, mesh, sizes, the error class every stage raises)
ILLEGAL = [
    ("A[I, J] · B[J, K] -> C[I]", "X=2", None, ShapeMismatch),
    ("AllToAll_{Y,I}(A[J_Y, K, I])", "X=2,Y=2", {"I": 1, "J": 2, "K": 1}, IndivisibleDim),
    ("A[4, 4] · B[4, K]", "X=2", None, ShapeMismatch),
    ("A[I_X, I] -> A[I, I_X]", "X=2", None, ShapeMismatch),
    ("A[I_Q, J] · B[J, K] -> C[I, K]", "X=4", None, UnknownAxis),
    ("C[I, D] -> B[I, D]", "X=4,Y=2", None, ShapeMismatch),
    ("A[I, J]{U_X} ·_LOCAL B[J, K]{U_X} -> C[I, K]", "X=2", None, IllegalSharding),
    ("A[I, J_X] ·_LOCAL B[J, K] -> C[I, K]", "X=2", None, IllegalSharding),
]  # fmt: skip

# statements the planner plans: check says legal (notes what the plans fix), and the plans run right
LEGAL = [
    ("A[4, 4]", "X=2", None),
    ("A[I_X, J] · B[J, K_X] -> C[I_X, K]", "X=4", None),
    ("A[I, J]{U_X} · B[J, K]{U_X} -> C[I, K]", "X=2", None),
    ("P[B_X, D] · Q[B_Y, D, F] -> R[B, F]", "X=2,Y=2", None),
    ("AllToAll_{Y,I}(A[J_Y, K, I])", "X=2,Y=2", {"I": 2, "J": 2, "K": 1}),
]  # fmt: skip


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
    (note,) = notes("A[I_X, J] · B[J, K_X] -> C[I_X, K]", "X=4")
    assert note.rule == "case-4"
    assert note.note().startswith("note [case-4]: case 4: the result dims I and K are both sharded over X;")
    assert [v.rule for v in check("A[I_X, J] ·_LOCAL B[J, K_X] -> C[I_X, K]", "X=4")] == ["case-4"]
    bw = backward("A[I_X, J] · B[J, K_X] -> C[I_X, K]", "X=8")
    assert ("AllGather", ("X",)) in bw.collectives


def test_plan_keeps_the_span_and_the_fix_that_check_shows(capsys):
    argv = ["A[I_Q, J] · B[J, K] -> C[I, K]", "--mesh", "X=4"]
    assert main(["check", *argv]) == 1
    checked = capsys.readouterr().err
    assert main(["plan", *argv]) == 1
    planned = capsys.readouterr().err
    assert planned == checked == (
        "UnknownAxis [unknown-axis]: mesh axis Q is not in the mesh (X)\n"
        "  A[I_Q, J] · B[J, K] -> C[I, K]\n"
        "    ^^^\n"
        "  fix: use an axis of the mesh (X), or add Q to it\n"
    )
