"""The numeric executor: every op as data movement between device buffers, checked on numbers.

The seed 003 runs the book's four cases on 8 devices with numpy and compares each with one device; the
same cases are here, with their bytes. Every op is also checked against small hand-computed buffers, and
a property runs random ops on random shardings: shard, run, reassemble == the dense value (collectives
are the identity on global values).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.registry import RECORDS
from shardalg.algebra.traffic import Sizes, rank_table, step_bytes, step_rank
from shardalg.costs.costmodel import CostModel
from shardalg.costs.stepcost import Options
from shardalg.costs.steps import seconds_of
from shardalg.errors import IllegalSharding, ShardalgError, UsageError
from shardalg.notation.parse import parse_tensor
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Dim, Op, Tensor
from shardalg.numeric.execute import (
    ExecutionError,
    VirtualMesh,
    apply_step,
    default_sizes,
    run_plan,
    shard,
    simulate,
    unshard,
)
from tests.shared.layouts import random_steps, sharded
from tests.shared.plans import P, S

T = parse_tensor


# ---------------------------------------------------------------- seed 003: the four cases on 8 devices

EIGHT = Mesh(X=8)
SEED_SIZES = {"I": 512 // 32, "J": 8192 // 32, "K": 28672 // 32}  # seed 003 demo 2: each dim / 32


def _ag_bytes(local: int, g: int) -> int:
    return g * (g - 1) * local * 2  # every device receives g-1 blocks; bf16


CASES = {
    "case 1": (P("A[I_X, J] · B[J, K] -> C[I_X, K]"), 0),
    "case 2": (
        P("AllGather_X(A[I, J_X]) -> A[I, J]", "A[I, J] · B[J, K] -> C[I, K]"),
        _ag_bytes(16 * 256 // 8, 8),
    ),
    "case 3, AllReduce": (
        P("A[I, J_X] · B[J_X, K] -> C[I, K]{U_X}", "AllReduce_X(C[I, K]{U_X}) -> C[I, K]"),
        2 * _ag_bytes(16 * 896 // 8, 8),
    ),
    "case 3, ReduceScatter": (
        P("A[I, J_X] · B[J_X, K] -> C[I, K]{U_X}", "ReduceScatter_{X,K}(C[I, K]{U_X}) -> C[I, K_X]"),
        _ag_bytes(16 * 896 // 8, 8),
    ),
    "case 4, gather B": (
        P("AllGather_X(B[J, K_X]) -> B[J, K]", "A[I_X, J] · B[J, K] -> C[I_X, K]"),
        _ag_bytes(256 * 896 // 8, 8),
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_seed_four_cases_on_eight_devices(name: str) -> None:
    plan, total = CASES[name]
    r = run_plan(plan, EIGHT, SEED_SIZES, np.random.default_rng(0))
    assert r.ok, str(r)
    assert r.max_error < 1e-12
    assert r.expected.shape == (16, 896)
    np.testing.assert_allclose(r.output, r.expected, rtol=1e-10, atol=1e-10)
    assert r.total_bytes == total
    assert r.devices == 8


def test_seed_case3_allreduce_moves_seven_times_case2() -> None:
    """Seed 003: C is 3.5x A and an all-reduce is two all-gathers, so case 3 communicates 7x case 2."""
    b2 = run_plan(CASES["case 2"][0], EIGHT, SEED_SIZES).total_bytes
    b3 = run_plan(CASES["case 3, AllReduce"][0], EIGHT, SEED_SIZES).total_bytes
    rs = run_plan(CASES["case 3, ReduceScatter"][0], EIGHT, SEED_SIZES).total_bytes
    assert b3 / b2 == 7
    assert b3 == 2 * rs  # AllReduce = ReduceScatter + AllGather


def test_case4_local_product_is_refused() -> None:
    with pytest.raises(IllegalSharding) as e:
        run_plan(P("A[I_X, J] · B[J, K_X] -> C[I_X, K_X]"), EIGHT, SEED_SIZES)
    assert e.value.rule == "case-4"


def test_contraction_sharded_on_one_side_is_not_local() -> None:
    with pytest.raises(IllegalSharding) as e:
        run_plan(P("A[I, J_X] · B[J, K] -> C[I, K]{U_X}"), EIGHT, SEED_SIZES)
    assert e.value.rule == "einsum-not-local"
    assert "gather or slice one side first" in e.value.message


def test_two_unreduced_operands_are_refused() -> None:
    with pytest.raises(IllegalSharding) as e:
        run_plan(P("A[I, J]{U_X} · B[J, K]{U_X} -> C[I, K]{U_X}"), EIGHT, SEED_SIZES)
    assert e.value.rule == "unreduced-product"


def test_unreduced_operand_times_replicated_stays_unreduced() -> None:
    r = run_plan(P("A[I, J]{U_X} · B[J, K] -> C[I, K]{U_X}", "AllReduce_X(C[I, K]{U_X}) -> C[I, K]"), EIGHT)
    assert r.ok, str(r)


def test_seed_004_column_and_row_partition() -> None:
    """Seed 004: x[W1|W2] = [xW1|xW2] needs nothing; x1W1 + x2W2 is a sum (AllReduce)."""
    m = Mesh(X=2)
    col = run_plan(P("x[B, D] · W[D, F_X] -> y[B, F_X]"), m)
    row = run_plan(P("x[B, D_X] · W[D_X, F] -> y[B, F]{U_X}", "AllReduce_X(y[B, F]{U_X}) -> y[B, F]"), m)
    assert col.ok and col.total_bytes == 0
    assert row.ok and row.total_bytes > 0


def test_given_inputs_by_name_give_the_exact_product() -> None:
    """Seed 004's column partition with its own numbers: x[W1|W2] = [xW1|xW2]."""
    x = np.array([[1.0, 2.0]])
    w = np.array([[1.0, 0.0, 2.0, 1.0], [0.0, 1.0, 1.0, 3.0]])
    r = run_plan(P("x[B, D] · W[D, F_X] -> y[B, F_X]"), Mesh(X=2), inputs={"x": x, "W": w})
    assert np.array_equal(r.output, [[1.0, 2.0, 4.0, 7.0]]) and r.ok


def test_batched_einsum_with_batch_dim_sharded() -> None:
    m = Mesh(X=2, Y=2)
    plan = P(
        "Q[B_X, S, D_Y] · K[B_X, T, D_Y] -> A[B_X, S, T]{U_Y}",
        "AllReduce_Y(A[B_X, S, T]{U_Y}) -> A[B_X, S, T]",
    )
    assert run_plan(plan, m).ok
    with pytest.raises(IllegalSharding) as e:
        run_plan(P("Q[B_X, S, D] · K[B, T, D] -> A[B_X, S, T]"), m)
    assert e.value.rule == "batch-dim-mismatch"


# ---------------------------------------------------------------- each op on hand-computed buffers


def _buffers(mesh: Mesh, t: Tensor, arr: np.ndarray) -> dict:
    return shard(arr, t, mesh)


def test_all_gather_concatenates_in_order() -> None:
    m = Mesh(X=4)
    a = np.arange(8.0)
    out, received = apply_step(S("AllGather_X(A[I_X]) -> A[I]"), [_buffers(m, T("A[I_X]"), a)], m, {"I": 8})
    for c in VirtualMesh(m).coords:
        np.testing.assert_array_equal(out[c], a)
    assert received == 4 * 3 * 2


def test_all_gather_xy_spans_two_dims() -> None:
    """``AllGather_XY([B_X, D_Y]) -> [B, D]``: one group of |X||Y| devices, blocks placed on both dims."""
    m = Mesh(X=2, Y=3)
    a = np.arange(4 * 6.0).reshape(4, 6)
    st_ = S("AllGather_XY(A[B_X, D_Y]) -> A[B, D]")
    out, received = apply_step(st_, [_buffers(m, T("A[B_X, D_Y]"), a)], m, {"B": 4, "D": 6})
    assert all(np.array_equal(b, a) for b in out.values())
    assert received == 6 * 5 * 4  # 6 devices, 5 blocks of 2x2 each


def test_gather_minor_axis_of_a_two_axis_dim() -> None:
    m = Mesh(X=2, Y=2)
    a = np.arange(8.0)
    out, _ = apply_step(S("AllGather_Y(A[I_XY]) -> A[I_X]"), [_buffers(m, T("A[I_XY]"), a)], m, {"I": 8})
    assert np.array_equal(out[(0, 1)], a[:4]) and np.array_equal(out[(1, 0)], a[4:])


def test_gather_of_the_major_axis_is_refused_with_a_reason() -> None:
    m = Mesh(X=2, Y=2)
    with pytest.raises(IllegalSharding) as e:
        apply_step(
            S("AllGather_X(A[I_XY]) -> A[I_Y]"), [_buffers(m, T("A[I_XY]"), np.arange(8.0))], m, {"I": 8}
        )
    assert "minor-most" in e.value.message and "Permute" in e.value.message


def test_gather_over_an_axis_that_does_not_shard() -> None:
    m = Mesh(X=2, Y=2)
    with pytest.raises(IllegalSharding) as e:
        apply_step(
            S("AllGather_Y(A[I_X, J]) -> A[I_X, J]"),
            [_buffers(m, T("A[I_X, J]"), np.ones((4, 2)))],
            m,
            {"I": 4, "J": 2},
        )
    assert "Y does not shard A" in e.value.message


def test_reduce_scatter_sums_and_keeps_the_owned_block() -> None:
    m = Mesh(X=2)
    parts = {(0,): np.array([1.0, 2.0, 3.0, 4.0]), (1,): np.array([10.0, 20.0, 30.0, 40.0])}
    out, received = apply_step(S("ReduceScatter_{X,K}(C[K]{U_X}) -> C[K_X]"), [parts], m, {"K": 4})
    assert np.array_equal(out[(0,)], [11.0, 22.0]) and np.array_equal(out[(1,)], [33.0, 44.0])
    assert received == 2 * 2


def test_all_reduce_is_reduce_scatter_then_all_gather() -> None:
    m = Mesh(X=4)
    parts = {(i,): np.full(8, float(i + 1)) for i in range(4)}
    out, received = apply_step(S("AllReduce_X(C[K]{U_X}) -> C[K]"), [parts], m, {"K": 8})
    assert all(np.array_equal(b, np.full(8, 10.0)) for b in out.values())
    assert received == 4 * 2 * 3 * 2  # each device: 3 chunks in, 3 chunks back, of 2 elements


def test_all_to_all_matches_the_rule_picture() -> None:
    """rules.py: A[I_X, J] on X=2: x=0 [a00 a01], x=1 [a10 a11] -> x=0 [a00; a10], x=1 [a01; a11]."""
    m = Mesh(X=2)
    a = np.arange(16.0).reshape(4, 4)
    out, received = apply_step(
        S("AllToAll_{X,J}(A[I_X, J]) -> A[I, J_X]"), [_buffers(m, T("A[I_X, J]"), a)], m, {"I": 4, "J": 4}
    )
    assert np.array_equal(out[(0,)], a[:, :2]) and np.array_equal(out[(1,)], a[:, 2:])
    assert received == 2 * 4  # each device keeps one 2x2 piece and receives the other


def test_slice_keeps_the_own_block_for_free() -> None:
    m = Mesh(X=2, Z=2)
    a = np.arange(8.0).reshape(4, 2)
    out, received = apply_step(
        S("Slice_{Z,B}(A[B_X, D]) -> A[B_XZ, D]"), [_buffers(m, T("A[B_X, D]"), a)], m, {"B": 4, "D": 2}
    )
    assert received == 0
    assert np.array_equal(out[(1, 0)], a[2:3]) and np.array_equal(out[(0, 1)], a[1:2])


def test_permute_fetches_from_the_swapped_device() -> None:
    """rules.py's picture: A[I_X] on X=2, Y=2 -> A[I_Y]: device (x, y) fetches from (y, x)."""
    m = Mesh(X=2, Y=2)
    bufs = _buffers(m, T("A[I_X]"), np.arange(4.0))
    out, received = apply_step(S("Permute_{X,Y}(A[I_X]) -> A[I_Y]"), [bufs], m, {"I": 4})
    for x in range(2):
        for y in range(2):
            assert np.array_equal(out[(x, y)], bufs[(y, x)])
    assert received == 2 * 2  # (0,1) and (1,0) swap one 2-element shard each


def test_permute_xy_to_yx_with_different_sizes() -> None:
    m = Mesh(X=2, Y=3)
    a = np.arange(12.0)
    st_ = S("Permute_{X,Y}(A[I_XY]) -> A[I_YX]")
    out, _ = apply_step(st_, [_buffers(m, T("A[I_XY]"), a)], m, {"I": 12})
    assert np.array_equal(unshard(out, T("A[I_YX]"), m), a)
    with pytest.raises(IllegalSharding, match="local shape"):
        apply_step(S("Permute_{X,Y}(A[I_X]) -> A[I_Y]"), [_buffers(m, T("A[I_X]"), a)], m, {"I": 12})


MULTI_AXIS = [
    "AllToAll_{YX,J}(A[I_XY, J]) -> A[I, J_YX]",
    "AllToAll_{XY,J}(A[I_XY, J]) -> A[I, J_XY]",
    "AllToAll_{Y,I}(A[I_Z, J_XY]) -> A[I_ZY, J_X]",
    "ReduceScatter_{YX,K}(C[I, K]{U_X, U_Y}) -> C[I, K_YX]",
    "ReduceScatter_{X,K}(C[I_Z, K_Y]{U_X}) -> C[I_Z, K_YX]",
    "AllReduce_XY(C[I_Z, K]{U_X, U_Y}) -> C[I_Z, K]",
    "AllGather_YZ(A[B_XY, D_Z]) -> A[B_X, D]",
    "Slice_{ZY,B}(A[B_X, D]) -> A[B_XZY, D]",
    "Permute_{X,Z}(A[I_XY, J_Z]) -> A[I_ZY, J_X]",
    "Permute_{X,Z}(C[I_Y, K]{U_X}) -> C[I_Y, K]{U_Z}",
]


@pytest.mark.parametrize("text", MULTI_AXIS)
def test_multi_axis_steps_on_a_three_axis_mesh(text: str) -> None:
    """X=2, Y=3, Z=2 tells axis orders apart: a block put at the rank of the wrong order is caught."""
    r = run_plan(P(text), Mesh(X=2, Y=3, Z=2), rng=np.random.default_rng(3))
    assert r.ok, str(r)


def test_multi_axis_permute_of_unequal_axes_is_refused() -> None:
    with pytest.raises(IllegalSharding, match="local shape"):
        run_plan(P("Permute_{X,Y}(A[I_X, J_Y]) -> A[I_Y, J_X]"), Mesh(X=2, Y=3))


def test_a_step_that_claims_the_wrong_result_is_refused() -> None:
    m = Mesh(X=2)
    with pytest.raises(IllegalSharding) as e:
        run_plan(P("A[I, J_X] · B[J_X, K] -> C[I, K]"), m)
    assert "C[I, K]{U_X}" in e.value.message


def test_a_step_whose_input_was_never_made_names_the_step() -> None:
    plan = Plan((T("A[I_X]"),), (S("AllGather_X(B[I_X]) -> B[I]"),), T("B[I]"))
    with pytest.raises(ExecutionError, match="step 1"):
        run_plan(plan, Mesh(X=2))


# ---------------------------------------------------------------- shard / unshard


def test_unreduced_parts_are_random_and_add_up() -> None:
    m = Mesh(X=4, Y=2)
    a = np.arange(8.0).reshape(2, 4)
    t = T("C[I, K_Y]{U_X}")
    bufs = shard(a, t, m, np.random.default_rng(1))
    assert not np.allclose(bufs[(0, 0)], bufs[(1, 0)])  # partial sums differ
    total = sum(bufs[(x, 1)] for x in range(4))
    np.testing.assert_allclose(total, a[:, 2:])
    np.testing.assert_allclose(unshard(bufs, t, m), a)


def test_a_partial_value_read_as_replicated_is_caught() -> None:
    """Reading C{U_X} as C[I, K]: the replicas disagree (the gradient-scaled-by-|X| bug, on numbers)."""
    m = Mesh(X=2)
    bufs = shard(np.ones((2, 2)), T("C[I, K]{U_X}"), m)
    with pytest.raises(ExecutionError, match="should hold the same block"):
        unshard(bufs, T("C[I, K]"), m)


def test_literal_sizes_and_indivisible_dims() -> None:
    m = Mesh(X=4)
    t = Tensor(None, (Dim(None, ("X",), size=8), Dim(None, size=3)))
    a = np.arange(24.0).reshape(8, 3)
    assert np.array_equal(unshard(shard(a, t, m), t, m), a)
    with pytest.raises(ShardalgError) as e:
        shard(np.ones((6, 3)), T("A[I_X, J]"), m)
    assert e.value.rule == "indivisible-dim"


def test_symbolic_mesh_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        VirtualMesh(Mesh(X=None))


def test_default_sizes_divide_every_sharding() -> None:
    m = Mesh(X=2, Y=4)
    sizes = default_sizes([T("A[I_X, J]"), T("A[I_Y, J_X]")], m)
    assert sizes == {"I": 8, "J": 4}


def test_simulate_runs_a_plan_and_prints() -> None:
    (r,) = simulate(CASES["case 2"][0], Mesh(X=2))
    assert r.ok
    text = str(r)
    assert text.startswith("ok: max relative error") and "AllGather" in text


def test_dtype_sets_the_bytes() -> None:
    plan = P("AllGather_X(fp32[I_X]) -> fp32[I]")
    assert run_plan(plan, Mesh(X=2), {"I": 4}).bytes_sent == (2 * 2 * 4,)


# ---------------------------------------------------------------- random ops on random shardings


@given(random_steps(), st.integers(0, 2**16))
def test_every_op_is_the_identity_on_the_global_value(case: tuple, seed: int) -> None:
    mesh, step, sizes = case
    if not step.axes:
        return  # no legal op on this tensor (all axes used and nothing to gather)
    r = run_plan(Plan(step.inputs, (step,), step.output), mesh, sizes, np.random.default_rng(seed))
    assert r.ok, str(r)
    if step.op is Op.SLICE:
        assert r.total_bytes == 0
    # the bytes model says nothing moves exactly when no device receives a byte (a group of one device, a
    # Permute that relabels an axis of size 1), and the cost model charges such a step no time
    modelled = step_bytes(step.op, step.axes, step.inputs[0], step.output, mesh, Sizes(sizes), step.offset)
    assert (modelled.number == 0) == (r.total_bytes == 0), (str(step.statement()), modelled, r.total_bytes)
    if r.total_bytes == 0:
        assert seconds_of(step, Options.of(CostModel.of("tpu-v5e"), mesh, sizes)) == 0.0
    # the ranking measure is the bytes where the searches rank unknown sizes, times 8 and the devices: with the
    # sizes known and with none (the bytes a polynomial, each dim at SEARCH_DIM)
    table = rank_table(mesh)
    for known in (Sizes(sizes), Sizes()):
        args = (step.op, step.axes, step.inputs[0], step.output, mesh, known)
        assert step_bytes(*args, step.offset).rank(table) == step_rank(*args, table, step.offset)


@given(sharded(), st.integers(0, 2**16))
def test_shard_then_unshard_is_the_identity(case: tuple, seed: int) -> None:
    mesh, t = case
    rng = np.random.default_rng(seed)
    shape = tuple(mesh.group_size(d.axes) * 2 for d in t.dims)
    a = rng.standard_normal(shape)
    bufs = shard(a, t, mesh, rng)
    assert len(bufs) == mesh.devices
    np.testing.assert_allclose(unshard(bufs, t, mesh), a, atol=1e-12)


# ---------------------------------------------------------------- every plan the planner returns

SEED_MATMULS = [
    ("A[I_X, J] · B[J, K] -> C[I_X, K]", "X=8"),
    ("A[I, J_X] · B[J, K] -> C[I, K]", "X=8"),
    ("A[I, J_X] · B[J_X, K] -> C[I, K]", "X=8"),
    ("A[I, J_X] · B[J_X, K] -> C[I, K_X]", "X=8"),
    ("A[I_X, J] · B[J, K_X] -> C[I_X, K]", "X=8"),
    ("A[I, J_X] · B[J_Y, K] -> C[I, K]", "X=2,Y=2"),
    ("A[I, J_X] · B[J_X, K]", "X=4"),
    ("In[B_X, D] · W[D, F] -> Out[B_X, F]", "X=4,Y=2"),
    ("In[B_X, D] · W[D_X, F] -> Out[B_X, F]", "X=4"),
    ("In[B_X, D_Y] · W[D_Y, F] -> Out[B_X, F]", "X=2,Y=2"),
    ("In[B, D_Y] · W[D, F_Y] -> Out[B, F_Y]", "X=2,Y=2"),
    ("Q[B_X, S, D_Y] · K[B_X, T, D_Y] -> A[B_X, S, T]", "X=2,Y=2"),
    ("A[I_X, J] -> A[I, J_X]", "X=4"),
    ("A[I_XY, J] -> A[I_YX, J]", "X=2,Y=4"),
    ("C[I, K]{U_X} -> C[I, K_X]", "X=4"),
]


@pytest.mark.parametrize(("expr", "mesh"), SEED_MATMULS)
def test_every_plan_of_the_planner_passes_the_executor(expr: str, mesh: str) -> None:
    results = simulate(expr, mesh, seed=1)
    assert results
    for r in results:
        assert r.ok, str(r)


# ---------------------------------------------------------------- bad input: our error, never another


@st.composite
def any_tensor(draw: st.DrawFn, name: str, names: tuple[str, ...]) -> Tensor:
    """Any tensor over axes X, Y, Z, W (W is never in the mesh): axes may repeat, dims may be missing."""
    axes = st.lists(st.sampled_from("XYZXYZXYZW"), max_size=2, unique=True).map(tuple)
    dims = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3))
    return Tensor(name, tuple(Dim(d, draw(axes)) for d in dims), draw(axes), draw(axes))


@given(
    st.lists(st.integers(1, 3), min_size=3, max_size=3),
    st.sampled_from(list(Op)),
    st.lists(st.sampled_from("XYZXYZW"), max_size=3).map(tuple),
    st.one_of(st.none(), st.sampled_from("IJKL")),
    st.data(),
)
def test_random_illegal_steps_raise_our_error(
    sizes: list, op: Op, axes: tuple, dim: str | None, data
) -> None:
    mesh = Mesh(dict(zip("XYZ", sizes, strict=False)))
    left = data.draw(any_tensor("A", ("I", "J", "K")))
    right = data.draw(any_tensor("B", ("J", "K", "L")))
    out = data.draw(any_tensor("C" if op is Op.EINSUM else "A", ("I", "J", "K", "L")))
    inputs = (left, right) if op is Op.EINSUM or RECORDS[op].operands == 2 else (left,)
    try:
        step = Step(op, inputs, out, axes, dim, offset=1 if op.takes_offset else None)  # a Shift or Send: +1
    except ValueError:  # a step the plan type refuses to make (a scale without its factor)
        return
    try:
        r = run_plan(Plan(inputs, (step,), out), mesh)
    except ShardalgError:
        return
    assert r.ok, str(r)


def test_a_plan_naming_a_subaxis_as_large_as_its_axis_is_refused_not_recursed() -> None:
    """AllGather_{Y:(1)4} on Y=4 (Y itself, :mod:`shardalg.algebra.subaxes`): an UnknownAxis that says to
    write Y; the runner recursed (RecursionError) when the mesh refined by nothing."""
    a = T("A[I_{Y:(1)4}, J]")
    step = Step(Op.ALL_GATHER, (a,), T("A[I, J]"), axes=("Y:(1)4",))
    with pytest.raises(IllegalSharding, match="write Y"):
        run_plan(Plan((a,), (step,), step.output), Mesh(X=2, Y=4), {"I": 8, "J": 8})


def test_a_plan_naming_an_axis_that_is_no_factor_is_refused_not_recursed() -> None:
    """An axis name with a colon that spells no factor (built in Python, not parsed) refines nothing."""
    a = T("A[I, J]").with_axes("I", ("Y:x",))
    step = Step(Op.ALL_GATHER, (a,), T("A[I, J]"), axes=("Y:x",))
    with pytest.raises(IllegalSharding, match="Y:x"):
        run_plan(Plan((a,), (step,), step.output), Mesh(X=2, Y=4), {"I": 8, "J": 8})
