"""Send_{X,k}: a point-to-point send from each slice of X to the slice k further along it, no wrap-around (a
pipeline's stage boundary). Its data movement against its dense meaning, its transpose (the send back) by the
dot-product test on the executor's own matrices, its three printed forms, its cost and its refusals."""

from __future__ import annotations

import numpy as np
import pytest
import sympy

import shardalg
from shardalg.algebra.mesh import Mesh
from shardalg.errors import IllegalCollective
from shardalg.notation.syntax import Op
from shardalg.numeric.execute import run_plan
from shardalg.numeric.operators import dot_test, operator_matrix, transpose_matches, transpose_step
from tests.shared.plans import S

MESH = Mesh(X=2, Y=3, Z=2)


@pytest.mark.parametrize("k", [1, -1, 2, -2, 3])
@pytest.mark.parametrize("t", ["A[I_Y, J]", "A[I_XY, J]", "A[I_YZ, J]", "A[I_X, J_Y]", "A[I_Y, J]{U_X}"])
def test_the_transpose_of_a_send_is_the_send_back(t: str, k: int) -> None:
    """<Send_{Y,k} x, y> = <x, Send_{Y,-k} y> on random stacked buffers, and the matrices are exact
    transposes; a send drops blocks, so (unlike a shift) its matrix is not invertible."""
    step = S(f"Send_{{Y,{k:+d}}}({t}) -> {t}")
    back = transpose_step(step)
    assert back.op is Op.SEND and back.offset == -k and back.axes == ("Y",)
    assert dot_test(step, MESH, rng=np.random.default_rng(k % 7)) < 1e-13
    assert transpose_matches(step, MESH)
    m = operator_matrix(step, MESH)
    assert np.array_equal(m.T, operator_matrix(back, MESH))
    assert np.linalg.matrix_rank(m) < m.shape[0]  # the last |k| blocks are dropped (|k| < 3) or all are


def test_a_send_is_not_its_own_transpose() -> None:
    """Not vacuous: Send_{Y,+1}'s matrix differs from its transpose (the send back is another operator)."""
    step = S("Send_{Y,+1}(A[I_Y, J]) -> A[I_Y, J]")
    m = operator_matrix(step, MESH)
    assert not np.array_equal(m, m.T)


@pytest.mark.parametrize("k", [1, 2, -1])
def test_a_send_plan_equals_its_dense_meaning(k: int) -> None:
    """The executor's result equals the dense value: the stage dim's blocks move k places, zeros where
    nothing arrives (checked against numpy by hand, not only against the executor's own dense function)."""
    q = f"Send_{{P,{k:+d}}}(H[S_P, B, D]) -> H[S_P, B, D]"
    sizes = {"S": 8, "B": 2, "D": 3}
    (plan,) = shardalg.plans(q, mesh="P=4", sizes=sizes)
    x = np.random.default_rng(5).standard_normal((8, 2, 3))
    run = run_plan(plan, "P=4", sizes, inputs={"H": x})
    assert run.ok and run.max_error == 0.0
    blocks, want = x.reshape(4, 2, 2, 3), np.zeros((4, 2, 2, 3))
    for s in range(4):
        if 0 <= s + k < 4:
            want[s + k] = blocks[s]
    assert np.array_equal(run.output, want.reshape(8, 2, 3))
    assert run.total_bytes > 0 and [r.ok for r in shardalg.simulate(q, mesh="P=4", sizes=sizes)] == [True]


def test_the_three_printed_forms_read_back() -> None:
    q = "Send_{P,+1}(H[S_P, B, D]) -> H[S_P, B, D]"
    e = shardalg.parse(q)
    assert str(e) == q
    assert shardalg.unicode(e) == "Send_{P,+1}(H[S_P, B, D]) → H[S_P, B, D]"
    latex = shardalg.to_latex(e)
    assert latex == r"\textbf{Send}_{P,+1}(H[S_P, B, D]) \rightarrow H[S_P, B, D]"
    assert shardalg.parse(latex) == e == shardalg.parse(shardalg.unicode(e))


def test_a_send_over_ici_is_one_hop_and_over_dcn_one_message() -> None:
    """Send_{P,+1} of a local block of S bytes: one hop, max(T_min, S/(W_ici/2)) on ICI (the busiest link
    carries one block, one way: half the book's two-way W_ici); S/W_dcn when P runs over the data-center network."""
    q = "Send_{P,+1}(H[S_P, B, D]) -> H[S_P, B, D]"
    sizes = {"S": 8, "B": 2, "D": 4096}
    block = 2 * 2 * 4096 * 2  # S/|P| x B x D in bf16
    ici = shardalg.cost(q, mesh="P=4", sizes=sizes)
    assert ici.total == sympy.Max(
        sympy.Symbol("T_min", positive=True), 2 * block / sympy.Symbol("W_ici", positive=True)
    )
    dcn = shardalg.cost(q, mesh="P=4", sizes=sizes, dcn_axes=("P",))
    assert dcn.total == block / sympy.Symbol("W_dcn", positive=True)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            "Send_{P,+1}(H[S, B, D]) -> H[S, B, D]",
            "Send_{P,k} moves the block of each slice of P to another; H[S, B, D] is not sharded over P",
        ),
        ("Send_{PQ,+1}(H[S_P, B, D]) -> H[S_P, B, D]", "Send moves blocks along one axis, not 2 axes"),
    ],
)
def test_a_send_is_refused_where_it_has_no_meaning(query: str, message: str) -> None:
    with pytest.raises(
        IllegalCollective,
        match=message.replace("[", r"\[").replace("]", r"\]").replace("{", r"\{").replace("}", r"\}"),
    ):
        shardalg.plans(query, mesh="P=4,Q=2", sizes={"S": 8, "B": 2, "D": 4})


def test_json_round_trip_keeps_the_offset() -> None:
    e = shardalg.parse("Send_{P,-1}(H[S_P, D]) -> H[S_P, D]")
    assert shardalg.from_json(shardalg.to_json(e)) == e


def test_the_jax_exporter_writes_a_ppermute_without_wrap_and_torch_refuses_by_name() -> None:
    from shardalg.errors import UsageError
    from shardalg.export.torch_export import export_torch

    q = "Send_{P,+1}(H[S_P, D]) -> H[S_P, D]"
    (plan,) = shardalg.plans(q, mesh="P=4", sizes={"S": 8, "D": 2})
    code = shardalg.export_jax(plan, "P=4", sizes={"S": 8, "D": 2})
    assert "jax.lax.ppermute(" in code and "perm=[(0, 1), (1, 2), (2, 3)])  # Send_{P,+1}" in code
    with pytest.raises(UsageError, match="has no method for Send"):
        export_torch(plan, "P=4", sizes={"S": 8, "D": 2})
