"""The cost models on symbols: one identity per test, sizes as sympy symbols (DESIGN.md section 5)."""

from __future__ import annotations

import pytest
import sympy

from shardalg.algebra.mesh import Axis, Mesh
from shardalg.algebra.symbols import axis_size, dim_size, links, quantity
from shardalg.costs.plancost import cost, plan_cost, plan_of
from shardalg.costs.stepcost import FORMULAS
from shardalg.errors import UnknownAxis, UsageError
from shardalg.notation.parse import parse
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Dim, Op, Tensor

B, D, F, E = (dim_size(n) for n in "BDFE")
X, Y, Z = (axis_size(n) for n in "XYZ")
W, T, C, W_HBM, W_DCN = (quantity(n) for n in ("W_ici", "T_min", "C", "W_hbm", "W_dcn"))
ALPHA, BETA = quantity("alpha"), quantity("beta")


def comms(text: str, mesh, model=None, **kw) -> sympy.Expr:
    return cost(text, mesh, model=model, **kw).comms


def eq(a, b) -> bool:
    return sympy.simplify(a - b) == 0


# ---- ici ------------------------------------------------------------------------------------------------
def test_allgather_on_a_ring_is_v_over_w_with_a_latency_floor():
    assert comms("AllGather_X(bf16[B_X, D])", Mesh(X=None)) == sympy.Max(T * X / 2, 2 * B * D / W)


def test_allgather_time_does_not_depend_on_the_axis_size_when_bandwidth_bound():
    t = comms("AllGather_X(bf16[B_X, D])", Mesh(X=None), latency=False)
    assert X not in t.free_symbols


def test_allgather_on_a_line_uses_one_way_links():
    t = comms("AllGather_X(bf16[B_X, D])", Mesh([Axis("X", None, wraps=False)]), latency=False)
    assert eq(t, (X - 1) * (2 * B * D / X) / (W / 2))


def test_v_counts_other_axes_at_local_size():
    t = comms("AllGather_X(bf16[B_X, D_Y])", Mesh(X=None, Y=None), latency=False)
    assert eq(t, 2 * B * D / (Y * W))


def test_several_axes_multiply_bandwidth_and_add_hops():
    t = comms("AllGather_XY(bf16[B_X, D_Y])", Mesh(X=None, Y=None))
    assert t.func is sympy.Max
    assert {sympy.expand(a) for a in t.args} == {sympy.expand(T * (X + Y) / 2), B * D / W}


def test_links_multiply_bandwidth():
    t = comms("AllGather_X(bf16[B_X, D])", Mesh(X=None), latency=False, symbolic_links=True)
    assert eq(t, 2 * B * D / (W * links("X")))
    t3 = comms("AllGather_X(bf16[B_X, D])", Mesh([Axis("X", None, links=3)]), latency=False)
    assert eq(t3, 2 * B * D / (3 * W))


def test_allreduce_is_twice_allgather():
    ar = comms("AllReduce_X(bf16[B, D]{U_X})", Mesh(X=None))
    ag = comms("AllGather_X(bf16[B_X, D])", Mesh(X=None))
    assert eq(ar, 2 * ag)


def test_reduce_scatter_costs_like_allgather():
    rs = comms("ReduceScatter_{X,B}(bf16[B, D]{U_X})", Mesh(X=None))
    ag = comms("AllGather_X(bf16[B_X, D])", Mesh(X=None))
    assert eq(rs, ag)


def test_alltoall_is_a_quarter_of_allgather_on_one_ring():
    a2a = comms("AllToAll_{X,D}(bf16[B_X, D])", Mesh(X=None), latency=False)
    ag = comms("AllGather_X(bf16[B_X, D])", Mesh(X=None), latency=False)
    assert eq(a2a, ag / 4)


def test_alltoall_over_two_axes_uses_the_longest():
    t = comms("AllToAll_{XY,D}(bf16[B_XY, D])", Mesh(X=8, Y=2), latency=False)
    assert eq(t, 2 * B * D * 8 / (4 * 16 * W))  # V·max(X, Y)/(4·N·W_ici)


def test_permute_moves_one_shard_over_the_longest_path():
    t = comms("Permute_{X,Y}(bf16[B_X, D]) -> bf16[B_Y, D]", Mesh(X=4, Y=4), latency=False)
    shard = 2 * B * D / 4
    assert eq(t, (2 + 2) * shard / (W / 2))


def test_slice_and_einsum_communicate_nothing():
    assert comms("Slice_{Y,B}(bf16[B_X, D]) -> bf16[B_XY, D]", Mesh(X=None, Y=None)) == 0
    assert comms("A[I_X, J] · B[J, K] -> C[I_X, K]", Mesh(X=None)) == 0


def test_axis_of_size_one_costs_nothing():
    assert comms("AllGather_X(bf16[B_X, D])", Mesh(X=1)) == 0


# ---- alpha-beta -----------------------------------------------------------------------------------------
def test_alpha_beta_ring_allgather():
    t = comms("AllGather_X(bf16[B_X])", Mesh(X=None), model="alpha-beta")
    assert eq(t, (X - 1) * ALPHA + (X - 1) / X * 2 * B / BETA)


def test_alpha_beta_recursive_doubling_allreduce():
    t = comms("AllReduce_X(bf16[B]{U_X})", Mesh(X=8), model="alpha-beta-rd")
    assert eq(t, 3 * (ALPHA + 2 * B / BETA))


def test_alpha_beta_over_dcn_uses_w_dcn():
    t = comms("AllGather_X(bf16[B_X])", Mesh(X=None), model="alpha-beta", dcn_axes=("X",), latency=False)
    assert eq(t, (X - 1) / X * 2 * B / W_DCN)


# ---- compute, memory, plans -----------------------------------------------------------------------------
def test_einsum_flops_use_local_sizes():
    pc = cost("A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]", Mesh(X=None, Y=None))
    i, j, k = (dim_size(n) for n in "IJK")
    assert eq(pc.flops, 2 * i * j * k / (X * Y))
    assert eq(pc.compute, pc.flops / C)


def test_case_3_flops_divide_the_contraction():
    pc = cost("A[I, J_X] ·_LOCAL B[J_X, K] -> C[I, K]{U_X}", Mesh(X=None))
    i, j, k = (dim_size(n) for n in "IJK")
    assert eq(pc.flops, 2 * i * j * k / X)


def test_hbm_traffic_counts_operands_and_result_or_only_named_tensors():
    text = "A[I, J] · B[J, K] -> C[I, K]"
    i, j, k = (dim_size(n) for n in "IJK")
    assert eq(cost(text, Mesh(X=2)).memory, 2 * (i * j + j * k + i * k) / W_HBM)
    assert eq(cost(text, Mesh(X=2), hbm=("B",)).memory, 2 * j * k / W_HBM)


PROGRAM = """
AllGather_X(W[D_X, F]) -> W[D, F]
In[B_Y, D] · W[D, F] -> Out[B_Y, F]
AllGather_Y(Out[B_Y, F]) -> Out[B, F]
"""


def test_steady_runs_collectives_on_disjoint_axes_concurrently():
    pc = cost(PROGRAM, Mesh(X=None, Y=None), latency=False, overlap="steady")
    gather_w, gather_out = 2 * D * F / W, 2 * B * F / W
    assert pc.comms == sympy.Max(gather_w, gather_out)
    assert pc.total == sympy.Max(pc.compute, gather_w, gather_out)


def test_serial_adds_everything():
    pc = cost(PROGRAM, Mesh(X=None, Y=None), latency=False, overlap=False)
    assert eq(pc.comms, 2 * D * F / W + 2 * B * F / W)
    assert eq(pc.total, pc.compute + pc.comms)


def test_seconds_need_a_chip_and_all_sizes():
    assert cost(PROGRAM, Mesh(X=4, Y=2)).seconds is None
    assert cost(PROGRAM, Mesh(X=4, Y=2), hw="tpu-v5e").seconds is None  # B, D, F unbound
    s = cost(PROGRAM, Mesh(X=4, Y=2), {"B": 256, "D": 1024, "F": 4096}, hw="tpu-v5e").seconds
    assert s is not None and s > 0


def test_plan_cost_of_a_hand_built_plan_matches_the_notation():
    a = Tensor("A", (Dim("I", ("X",)), Dim("J")))
    a2 = Tensor("A", (Dim("I"), Dim("J")))
    by_hand = plan_cost(Plan((a,), (Step(Op.ALL_GATHER, (a,), a2, axes=("X",)),), a2), Mesh(X=None))
    assert by_hand.comms == cost("AllGather_X(A[I_X, J]) -> A[I, J]", Mesh(X=None)).comms


def test_plan_of_nested_expressions_makes_one_step_each():
    plan = plan_of(parse("AllGather_X(A[I, J_X]) · B[J, K] -> C[I, K]"), Mesh.parse("X=4"))
    assert [s.op for s in plan.steps] == [Op.ALL_GATHER, Op.EINSUM]
    assert plan.steps[1].inputs[0] == plan.steps[0].output
    assert plan.output.name == "C"


def test_to_json_has_formula_latex_seconds_and_steps():
    data = cost(
        "AllGather_Y(bf16[E_Y, F])", Mesh.parse("X=8,Y=4"), {"E": 2048, "F": 8192}, hw="tpu-v5e"
    ).to_json()
    assert data["formula"] == "Max(3*T_min, 50331648/W_ici)"
    assert "W_{\\text{ici}}" in data["latex"] and data["seconds"] == pytest.approx(559.24e-6, rel=1e-4)
    assert data["steps"][0]["op"] == "AllGather" and data["steps"][0]["bytes"] == "33554432"


def test_every_model_prices_every_communicating_op():
    for model, table in FORMULAS.items():
        assert {Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALL_REDUCE, Op.ALL_TO_ALL, Op.PERMUTE} <= set(table), (
            model
        )


# ---- errors ---------------------------------------------------------------------------------------------
def test_errors_are_shardalg_errors():
    with pytest.raises(UsageError):
        cost("AllGather_X(A[I_X, J])")  # no mesh
    with pytest.raises(UsageError):
        cost("AllGather_X(A[I_X, J])", Mesh.parse("X=4"), model="smoke-signals")
    with pytest.raises(UsageError):
        cost("A[I_X, J] -> A[I, J_X]", Mesh.parse("X=4"))  # a resharding request: plan it first
    with pytest.raises(UnknownAxis):
        cost("AllGather_X(A[I_X, J])", Mesh.parse("X=4"), dcn_axes=("P",))
    with pytest.raises(UsageError):
        cost(42, Mesh.parse("X=4"))  # type: ignore[arg-type]
