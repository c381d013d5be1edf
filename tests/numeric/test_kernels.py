"""The executor's arithmetic: the local product as one batched matmul equals numpy's einsum on every kind
of dim (batch, contracted, free, summed in one operand only), in any order; ``execute_plan`` moves data
only and ``run_plan`` is it plus the check; buffers are read-only and replicas share them, while each
device's receives are still counted."""

from __future__ import annotations

import string

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardalg.algebra.mesh import Mesh
from shardalg.numeric.execute import (
    VirtualMesh,
    apply_step,
    dense_result,
    execute_plan,
    place_inputs,
    run_plan,
    shard,
    unshard,
)
from shardalg.numeric.kernels import contract
from tests.shared.plans import P, S, T


@st.composite
def two_operand_specs(draw: st.DrawFn) -> tuple[str, dict[str, int]]:
    """A spec ``ab,bc->ac`` with letters distinct within each operand and the result; every letter of the
    result is an operand's. Some letters are summed in one operand only."""
    letters = list(string.ascii_lowercase[:7])
    roles = {
        x: draw(st.sampled_from(["batch", "contracted", "left", "right", "left-sum", "right-sum", "off"]))
        for x in letters
    }
    left = [x for x in letters if roles[x] in ("batch", "contracted", "left", "left-sum")]
    right = [x for x in letters if roles[x] in ("batch", "contracted", "right", "right-sum")]
    out = [x for x in letters if roles[x] in ("batch", "left", "right")]
    left, right, out = (draw(st.permutations(s)) for s in (left, right, out))
    sizes = {x: draw(st.integers(1, 4)) for x in letters}
    return f"{''.join(left)},{''.join(right)}->{''.join(out)}", sizes


@given(two_operand_specs(), st.integers(0, 2**16))
def test_contract_is_numpys_einsum(case: tuple[str, dict[str, int]], seed: int) -> None:
    spec, sizes = case
    rng = np.random.default_rng(seed)
    (la, lb) = spec.split("->")[0].split(",")
    a = rng.standard_normal([sizes[x] for x in la])
    b = rng.standard_normal([sizes[x] for x in lb])
    got = contract(spec, a, b)
    want = np.einsum(spec, a, b)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_contract_keeps_integers_exact() -> None:
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    b = np.arange(12, dtype=np.int64).reshape(3, 4)
    got = contract("ij,jk->ki", a, b)
    assert got.dtype == np.int64 and np.array_equal(got, (a @ b).T)


def test_execute_plan_moves_data_and_run_plan_checks_it() -> None:
    """The same bytes and the same output blocks; the check (dense product, unshard) is run_plan's only."""
    plan = P("A[I, J_X] · B[J_X, K] -> C[I, K]{U_X}", "ReduceScatter_{X,K}(C[I, K]{U_X}) -> C[I, K_X]")
    mesh, sizes = Mesh(X=4), {"I": 4, "J": 8, "K": 8}
    placed = place_inputs(plan, mesh, sizes, np.random.default_rng(5))
    run = execute_plan(plan, mesh, placed.buffers, placed.sizes)
    checked = run_plan(plan, mesh, sizes, np.random.default_rng(5))
    assert checked.ok and run.bytes_sent == checked.bytes_sent
    np.testing.assert_allclose(unshard(run.buffers[plan.output], plan.output, mesh), checked.output)
    np.testing.assert_allclose(dense_result(plan, placed.dense, mesh), checked.expected)


def test_buffers_are_read_only_and_replicas_share_them() -> None:
    """After AllGather_X on X=4, Y=2 the four members of a group hold one array (and the other group its
    own); no one can write into it. Each member is still counted as receiving three blocks."""
    m = Mesh(X=4, Y=2)
    a = np.arange(8.0 * 2).reshape(8, 2)
    bufs = shard(a, T("A[I_X, J_Y]"), m)
    out, received = apply_step(S("AllGather_X(A[I_X, J_Y]) -> A[I, J_Y]"), [bufs], m, {"I": 8, "J": 2})
    vm = VirtualMesh(m)
    for y in range(2):
        group = [out[c] for c in vm.coords if c[1] == y]
        assert all(b is group[0] for b in group)
        np.testing.assert_array_equal(group[0], a[:, y : y + 1])
    assert out[(0, 0)] is not out[(0, 1)]
    assert received == 8 * 3 * 2  # 8 devices, 3 blocks of 2x1 each
    with pytest.raises(ValueError, match="read-only"):
        out[(0, 0)][0, 0] = 1.0


def test_replicated_inputs_share_one_block_and_one_product() -> None:
    m = Mesh(X=2, Y=2)
    bufs = shard(np.ones((4, 4)), T("B[J, K_Y]"), m)
    assert bufs[(0, 0)] is bufs[(1, 0)] and bufs[(0, 0)] is not bufs[(0, 1)]
    plan = P("A[I, J] · B[J, K_Y] -> C[I, K_Y]")
    placed = place_inputs(plan, m, {"I": 2, "J": 4, "K": 4})
    out = execute_plan(plan, m, placed.buffers, placed.sizes).buffers[plan.output]
    assert out[(0, 0)] is out[(1, 0)] and out[(0, 1)] is out[(1, 1)]
