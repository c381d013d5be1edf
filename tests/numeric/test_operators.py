"""Collectives as linear operators on stacked buffers: transposes, the dot-product test, the Kronecker forms.

Every matrix here comes from pushing the identity through the executor, so a transpose that holds is a
statement about the executor's data movement, not about a formula typed twice.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy
from hypothesis import given

from shardalg.algebra.mesh import Mesh
from shardalg.errors import UsageError
from shardalg.notation.plan import Step
from shardalg.notation.syntax import Op
from shardalg.numeric.execute import is_zero_pad
from shardalg.numeric.operators import (
    dot_test,
    kron_forms,
    operator_matrix,
    stacked_size,
    transpose_matches,
    transpose_step,
)
from tests.shared.layouts import random_steps
from tests.shared.plans import S

# ---------------------------------------------------------------- the seed's exact statement


@pytest.mark.parametrize("p", [1, 2, 3, 4])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_kron_forms_hold_exactly(p: int, n: int) -> None:
    k = kron_forms(p, n)
    assert all(isinstance(m, sympy.Matrix) for m in (k.broadcast, k.all_gather_op, k.reduce_scatter_op))
    assert k.all_gather_op.shape == (p * p * n, p * n)
    assert k.reduce_scatter_op.shape == (p * n, p * p * n)
    assert k.checks() == dict.fromkeys(k.checks(), True)
    assert k.holds


def test_kron_seed_example_n1_p2() -> None:
    """Seed 000: broadcast(7) = (7, 7), reduce(8, 9) = 17."""
    k = kron_forms(2, 1)
    assert list(k.broadcast * sympy.Matrix([7])) == [7, 7]
    assert list(k.reduce * sympy.Matrix([8, 9])) == [17]


def test_kron_form_would_fail_for_a_wrong_operator() -> None:
    """The identities are not vacuous: AllGather is not broadcast ⊗ I_p with the factors swapped when p > 1
    and n > 1 (I_p ⊗ broadcast orders the stacked vector differently)."""
    k = kron_forms(2, 2)
    assert k.all_gather_op != sympy.kronecker_product(sympy.eye(2), k.broadcast)


# ---------------------------------------------------------------- single ops, by hand

MESH = Mesh(X=2, Y=3, Z=2)
TRANSPOSES = [  # forward, its transpose as the executor runs it
    ("AllGather_X(A[I_X, J]) -> A[I, J]", "ReduceScatter_{X,I}(A[I, J]{U_X}) -> A[I_X, J]"),
    ("AllGather_XY(A[B_X, D_Y]) -> A[B, D]", "ReduceScatter_XY(A[B, D]{U_X, U_Y}) -> A[B_X, D_Y]"),
    ("AllGather_Y(A[I_XY]) -> A[I_X]", "ReduceScatter_{Y,I}(A[I_X]{U_Y}) -> A[I_XY]"),
    ("ReduceScatter_{YX,K}(C[I, K]{U_X, U_Y}) -> C[I, K_YX]", "AllGather_YX(C[I, K_YX]) -> C[I, K]"),
    ("AllReduce_X(C[I, K]{U_X}) -> C[I, K]", "AllReduce_X(C[I, K]{U_X}) -> C[I, K]"),
    ("AllToAll_{YX,J}(A[I_XY, J]) -> A[I, J_YX]", "AllToAll_{XY,I}(A[I, J_YX]) -> A[I_XY, J]"),
    ("Permute_{X,Z}(A[I_XY, J_Z]) -> A[I_ZY, J_X]", "Permute_{X,Z}(A[I_ZY, J_X]) -> A[I_XY, J_Z]"),
    ("Slice_{Z,B}(A[B_X, D]) -> A[B_XZ, D]", "Slice_{Z,B}(A[B_XZ, D]) -> A[B_X, D]{U_Z}"),
    ("Shift_{Y,+1}(A[I_XY, J]) -> A[I_XY, J]", "Shift_{Y,-1}(A[I_XY, J]) -> A[I_XY, J]"),
    ("Shift_{Y,+2}(A[I_X, J]) -> A[I_X, J]", "Shift_{Y,-2}(A[I_X, J]{U_Y}) -> A[I_X, J]{U_Y}"),
]


@pytest.mark.parametrize(("fwd", "back"), TRANSPOSES)
def test_transpose_step_by_hand(fwd: str, back: str) -> None:
    s, b = S(fwd), S(back)
    t = transpose_step(s)
    assert (t.op, t.inputs, t.output, t.axes, t.offset) == (b.op, b.inputs, b.output, b.axes, b.offset)
    assert transpose_matches(s, MESH)
    assert transpose_step(t) == s
    assert dot_test(s, MESH) < 1e-13


def test_zero_pad_is_free_and_keeps_the_value() -> None:
    pad = S("Slice_{Z,B}(A[B_XZ, D]) -> A[B_X, D]{U_Z}")
    assert is_zero_pad(pad)
    m = operator_matrix(pad, MESH)
    assert set(np.unique(m)) <= {0, 1} and (m.sum(axis=1) <= 1).all()  # an embedding: no sums, no moves


@pytest.mark.parametrize(
    "text",
    [
        "AllToAll_{YX,J}(A[I_XY, J]) -> A[I, J_YX]",
        "Permute_{X,Z}(A[I_XY, J_Z]) -> A[I_ZY, J_X]",
        "Shift_{Y,+1}(A[I_XY, J]) -> A[I_XY, J]",
    ],
)
def test_all_to_all_and_permute_are_permutations(text: str) -> None:
    m = operator_matrix(S(text), MESH)
    assert m.shape[0] == m.shape[1]
    assert (m.sum(axis=0) == 1).all() and (m.sum(axis=1) == 1).all()
    assert np.array_equal(m @ m.T, np.eye(m.shape[0], dtype=m.dtype))  # transpose = inverse


def test_all_gather_column_sums_are_the_group_size() -> None:
    m = operator_matrix(S("AllGather_XY(A[B_X, D_Y]) -> A[B, D]"), MESH)
    assert (m.sum(axis=0) == 6).all()  # every input entry lands on the 6 devices of its group


def test_invariant_marks_do_not_change_the_stacked_operator() -> None:
    """On stacked buffers {I_X} places data like R: AllGather S -> I has AllGather S -> R's matrix, and
    its transpose is the same ReduceScatter (the I lines of DESIGN's table live on the invariant subspace)."""
    to_i = S("AllGather_X(W[D_X, F]) -> W[D, F]{I_X}")
    to_r = S("AllGather_X(W[D_X, F]) -> W[D, F]")
    assert np.array_equal(operator_matrix(to_i, MESH), operator_matrix(to_r, MESH))
    assert transpose_step(to_i) == transpose_step(to_r)
    assert transpose_matches(to_i, MESH)


def test_exact_matrix_and_non_collectives() -> None:
    m = operator_matrix(S("AllReduce_X(C[K]{U_X}) -> C[K]"), Mesh(X=2), {"K": 1}, exact=True)
    assert m == sympy.Matrix([[1, 1], [1, 1]])
    with pytest.raises(UsageError):
        operator_matrix(S("A[I, J] · B[J, K] -> C[I, K]"), Mesh(X=2))


# ---------------------------------------------------------------- every op on random shardings

MAX_ENTRIES = 2_000_000  # dense matrices above this are skipped (the dot-product test still runs)


@given(random_steps())
def test_dot_product_and_exact_transpose_on_random_steps(case: tuple) -> None:
    mesh, step, sizes = case
    if not step.axes:
        return
    rng = np.random.default_rng(0)
    assert dot_test(step, mesh, sizes, rng) < 1e-12
    back = transpose_step(step)
    assert transpose_step(back) == step  # transpose of transpose is the step itself
    n_in = stacked_size(step.inputs[0], mesh, sizes)
    n_out = stacked_size(step.output, mesh, sizes)
    if n_in * n_out <= MAX_ENTRIES:
        fwd = operator_matrix(step, mesh, sizes)
        assert np.array_equal(operator_matrix(back, mesh, sizes), fwd.T)


# ---------------------------------------------------------------- agreement with rules.py and transpose.py


def _their_steps(step: Step, mesh: Mesh) -> list[Step]:
    """transpose.py's local transpose of ``step`` as executor Steps (its pad cast is our zero-pad)."""
    from shardalg.algebra.transpose import Cast, LocalStep, transpose

    fwd = LocalStep(
        Cast.PAD if is_zero_pad(step) else step.op,
        step.inputs[0],
        step.output,
        step.axes,
        step.dim,
        offset=step.offset,
    )
    out = []
    for ls in transpose(fwd, mesh):
        op = Op.SLICE if ls.op is Cast.PAD else ls.op
        assert isinstance(op, Op), ls
        out.append(Step(op, (ls.input,), ls.output, ls.axes, ls.dim, offset=ls.offset))
    return out


@given(random_steps())
def test_transpose_py_agrees_on_numbers(case: tuple) -> None:
    """The backward engineer's type-level transposes, run by the executor, are the matrix transpose."""
    mesh, step, sizes = case
    if not step.axes:
        return
    n_in = stacked_size(step.inputs[0], mesh, sizes)
    n_out = stacked_size(step.output, mesh, sizes)
    if n_in * n_out > MAX_ENTRIES:
        return
    product = np.eye(n_out, dtype=np.int64)
    for s in _their_steps(step, mesh):
        product = operator_matrix(s, mesh, sizes) @ product
    assert np.array_equal(product, operator_matrix(step, mesh, sizes).T)


@pytest.mark.parametrize(("fwd", "back"), TRANSPOSES)
def test_rules_py_names_the_same_transpose(fwd: str, back: str) -> None:
    from shardalg.algebra.ops import RULES

    s = S(fwd)
    mine = transpose_step(s)
    named = RULES[s.op].transpose.op
    assert named == (None if is_zero_pad(mine) else mine.op)


# ---------------------------------------------------------------- the ring shift and its inverse


@pytest.mark.parametrize("k", [1, -1, 2, 3, -5])
@pytest.mark.parametrize("t", ["A[I_Y, J]", "A[I_XY, J]", "A[I, J]", "A[I, J]{U_Y}", "A[I_X, J_Y]"])
def test_the_transpose_of_a_shift_by_k_is_a_shift_by_minus_k(t: str, k: int) -> None:
    """JAX's ppermute pair: <Shift_{Y,k} x, y> = <x, Shift_{Y,-k} y> on random stacked buffers, and the
    matrices are exact transposes (the shift's is a permutation matrix, so its transpose is its inverse)."""
    step = S(f"Shift_{{Y,{k:+d}}}({t}) -> {t}")
    back = transpose_step(step)
    assert back.op is Op.SHIFT and back.offset == -k and back.axes == ("Y",)
    assert dot_test(step, MESH, rng=np.random.default_rng(k % 7)) < 1e-13
    assert transpose_matches(step, MESH)
    m = operator_matrix(step, MESH)
    assert np.array_equal(m @ operator_matrix(back, MESH), np.eye(m.shape[0], dtype=m.dtype))


def test_a_wrong_transpose_fails_the_dot_product_test() -> None:
    """Not vacuous: a shift by +k is not its own transpose when it moves blocks (|Y| = 3)."""
    step = S("Shift_{Y,+1}(A[I_Y, J]) -> A[I_Y, J]")
    wrong = Step(Op.SHIFT, step.inputs, step.output, step.axes, offset=1)
    assert not np.array_equal(operator_matrix(wrong, MESH), operator_matrix(step, MESH).T)


# ---------------------------------------------------------------- a Permute over a cycle of names

CYCLES = [  # Permute_{X,Y,Z}: X to Y, Y to Z, Z to X (one collective-permute, as XLA runs K_{X,Y:(1)2} -> K_Y)
    ("Permute_{X,Y,Z}(A[I_XY, J]) -> A[I_YZ, J]", Mesh(X=2, Y=2, Z=2)),
    ("Permute_{X,Y,Z}(C[I_Y, K]{U_X}) -> C[I_Z, K]{U_Y}", Mesh(X=2, Y=2, Z=2)),
    ("Permute_{X,Y,Z}(A[I_XY, J]) -> A[I_YZ, J]", Mesh(X=2, Y=3, Z=2)),  # |X||Y| = |Y||Z|: shape kept
]


@pytest.mark.parametrize(("text", "mesh"), CYCLES)
def test_a_cycle_permute_runs_transposes_to_the_reversed_cycle_and_is_a_permutation(
    text: str, mesh: Mesh
) -> None:
    s = S(text)
    t = transpose_step(s)
    assert t.axes == s.axes[::-1] and t.inputs == (s.output,) and t.output == s.inputs[0]
    assert transpose_matches(s, mesh) and dot_test(s, mesh) < 1e-13
    m = operator_matrix(s, mesh)
    assert (m.sum(axis=0) == 1).all() and (m.sum(axis=1) == 1).all()
    assert np.array_equal(m @ m.T, np.eye(m.shape[0], dtype=m.dtype))


def test_a_cycle_over_sub_axes_runs_equal_to_dense() -> None:
    """XLA's permute of the audit's sub-axis resharding, K_{X,Y:(1)2} -> K_Y on X=2, Y=4, then its gather."""
    from shardalg.numeric.execute import run_plan
    from tests.shared.plans import P

    plan = P(
        "Permute_{X,Y:(1)2,Y:(2)2}(B[J, K_{X,Y:(1)2}]) -> B[J, K_Y]", "AllGather_Y(B[J, K_Y]) -> B[J, K]"
    )
    r = run_plan(plan, Mesh(X=2, Y=4), rng=np.random.default_rng(5))
    assert r.ok, str(r)


def test_a_cycle_that_changes_the_local_shape_is_refused() -> None:
    from shardalg.algebra.legality import check

    bad = check("Permute_{X,Y,Z}(A[I_X, J]) -> A[I_Y, J]", Mesh(X=2, Y=3, Z=2))
    assert bad and "local shape" in str(bad)
    assert check("Permute_{X,Y,X}(A[I_X, J]) -> A[I_Y, J]", Mesh(X=2, Y=2))
    assert not check("Permute_{X,Y,Z}(A[I_XY, J]) -> A[I_YZ, J]", Mesh(X=2, Y=3, Z=2))


def test_transpose_py_moves_an_all_to_alls_axes_back_in_the_order_they_held() -> None:
    """``AllToAll_{YX,J}`` takes X and Y off ``I_XY`` and lays them on J as ``J_YX``; its transpose lays them
    back on I as ``I_XY``, so over ``XY``: it was ``AllToAll_{YX,I}``, which makes ``I_YX`` (a run of the
    property with 300 random examples found it)."""
    mesh, sizes = Mesh(X=2, Y=2), {"I": 4, "J": 4}
    step = S("AllToAll_{YX,J}(A[I_XY, J]) -> A[I, J_YX]")
    (back,) = _their_steps(step, mesh)
    assert back.axes == ("X", "Y") and back.dim == "I" and str(back.output) == "A[I_XY, J]"
    assert np.array_equal(operator_matrix(back, mesh, sizes), operator_matrix(step, mesh, sizes).T)


@pytest.mark.parametrize(
    "text",
    [
        "Permute_{X,Y}(A[I]) -> A[I]",
        "Permute_{X,Y}(A[I]{U_XY}) -> A[I]{U_XY}",
        "Permute_{X,Y}(A[I_X]{U_Y}) -> A[I_Y]{U_X}",
        "Permute_{X,Y}(A[I]{U_X}) -> A[I]{U_Y}",
    ],
)
def test_a_permute_and_its_transpose_are_inverse_permutations_on_the_stacked_buffers(text: str) -> None:
    """A partial's place is its rank over the unreduced axes in mesh order: ``Permute_{X,Y}`` of a replicated
    ``A[I]`` moves nothing, and neither does its transpose on the cotangent ``A[I]{U_XY}`` (it swapped the
    partials of X and Y: the property with 300 random examples found it)."""
    mesh, sizes = Mesh(X=2, Y=2), {"I": 4}
    step = S(text)
    fwd = operator_matrix(step, mesh, sizes)
    product = np.eye(fwd.shape[0], dtype=np.int64)
    for s in _their_steps(step, mesh):
        product = operator_matrix(s, mesh, sizes) @ product
    assert np.array_equal(product, fwd.T)
    assert np.array_equal(product @ fwd, np.eye(fwd.shape[0], dtype=np.int64))
    if step.inputs[0].unreduced == step.output.unreduced and not any(d.axes for d in step.output.dims):
        assert np.array_equal(fwd, np.eye(fwd.shape[0], dtype=np.int64))  # the same set: nothing moves
