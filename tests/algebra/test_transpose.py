"""The local view: transposes of explicit collectives on sharding types (DESIGN.md section 4's table)."""

from __future__ import annotations

from math import prod

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.transpose import (
    COTANGENT,
    TRANSPOSES,
    Cast,
    Kind,
    LocalStep,
    _set,
    cotangent,
    placement,
    transpose,
)
from shardalg.errors import IllegalCollective, UsageError
from shardalg.notation.plan import Step
from shardalg.notation.syntax import Arrow, Collective, Dim, Op, Tensor
from shardalg.numeric.execute import VirtualMesh, apply_step, shard

MESH = Mesh(X=4, Y=2)


def T(dims: str, unreduced: str = "", invariant: str = "", name: str = "A") -> Tensor:
    """``T("B_X D_Y", "Z")``: a tensor from a compact spec (dim_axes separated by blanks)."""
    out = []
    for part in dims.split():
        label, _, axes = part.partition("_")
        out.append(Dim(label, tuple(axes)))
    return Tensor(name, tuple(out), tuple(unreduced), tuple(invariant))


def one(step, mesh=MESH) -> LocalStep:
    (s,) = transpose(step, mesh)
    return s


# ---- the table ---------------------------------------------------------------------------------------


def test_cotangent_swaps_r_and_u_and_keeps_s_and_i():
    assert COTANGENT == {Kind.S: Kind.S, Kind.R: Kind.U, Kind.U: Kind.R, Kind.I: Kind.I}
    mesh = Mesh(X=2, Y=2, Z=2, W=2)
    t = T("B_X D", unreduced="Y", invariant="Z")
    c = cotangent(t, mesh)
    assert [placement(c, a)[0] for a in "XYZW"] == [Kind.S, Kind.R, Kind.I, Kind.U]
    assert cotangent(c, mesh) == t


@pytest.mark.parametrize("key", sorted(TRANSPOSES, key=repr))
def test_table_is_an_involution(key):
    op, k_in, k_out = key
    back = TRANSPOSES[key]
    assert TRANSPOSES[(back, COTANGENT[k_out], COTANGENT[k_in])] == op


# ---- each line of DESIGN.md section 4 -----------------------------------------------------------------


def test_allgather_transposes_to_reduce_scatter():
    s = one(Step(Op.ALL_GATHER, (T("D_X F", name="W"),), T("D F", name="W"), ("X",)))
    assert (s.op, s.axes, s.dim) == (Op.REDUCE_SCATTER, ("X",), "D")
    assert s.input == T("D F", unreduced="XY", name="W")  # Y is replicated in forward: unreduced here
    assert s.output == T("D_X F", unreduced="Y", name="W")


def test_reduce_scatter_transposes_to_allgather():
    s = one(Step(Op.REDUCE_SCATTER, (T("I K", "X"),), T("I K_X"), ("X",), "K"))
    assert (s.op, s.axes, s.input, s.output) == (Op.ALL_GATHER, ("X",), T("I K_X", "Y"), T("I K", "Y"))


def test_allreduce_to_replicated_transposes_to_allreduce():
    s = one(Step(Op.ALL_REDUCE, (T("I K", "X"),), T("I K"), ("X",)))
    assert (s.op, s.input, s.output) == (Op.ALL_REDUCE, T("I K", "XY"), T("I K", "Y"))
    assert s.communicates


def test_allreduce_to_invariant_has_no_communication_backward():
    s = one(Step(Op.ALL_REDUCE, (T("I K", "X"),), T("I K", invariant="X"), ("X",)))
    assert s.op is Cast.PVARY and not s.communicates
    assert (s.input, s.output) == (T("I K", "Y", "X"), T("I K", "Y"))


def test_invariant_used_as_replicated_costs_an_allreduce_to_invariant():
    s = one(LocalStep(Cast.PVARY, T("D F", invariant="X"), T("D F"), ("X",)))
    assert (s.op, s.input, s.output) == (Op.ALL_REDUCE, T("D F", "XY"), T("D F", "Y", "X"))


def test_allgather_to_invariant_transposes_to_a_local_slice():
    s = one(Step(Op.ALL_GATHER, (T("D_X F"),), T("D F", invariant="X"), ("X",)))
    assert (s.op, s.dim, s.communicates) == (Op.SLICE, "D", False)
    assert (s.input, s.output) == (T("D F", "Y", "X"), T("D_X F", "Y"))


def test_slice_transposes_to_a_zero_pad_into_unreduced():
    s = one(Step(Op.SLICE, (T("B D"),), T("B_X D"), ("X",), "B"))
    assert (s.op, s.dim, s.communicates) == (Cast.PAD, "B", False)
    assert (s.input, s.output) == (T("B_X D", "Y"), T("B D", "XY"))


def test_alltoall_moves_back():
    s = one(Step(Op.ALL_TO_ALL, (T("I J_X"),), T("I_X J"), ("X",), "I"))
    assert (s.op, s.dim, s.input, s.output) == (Op.ALL_TO_ALL, "J", T("I_X J", "Y"), T("I J_X", "Y"))


def test_permute_transposes_to_the_inverse_permutation():
    mesh = Mesh(X=2, Y=3)
    s = one(Step(Op.PERMUTE, (T("I_XY J"),), T("I_YX J"), ("X", "Y")), mesh)
    assert (s.op, s.input, s.output) == (Op.PERMUTE, T("I_YX J"), T("I_XY J"))


def test_shift_transposes_to_the_inverse_shift():
    mesh = Mesh(X=4, Y=2)
    s = one(LocalStep(Op.SHIFT, T("I_X J"), T("I_X J"), ("X",), offset=3), mesh)
    # the cotangent is unreduced over the replicated Y; the shift moves it back along X
    assert (s.op, s.input, s.output, s.offset) == (Op.SHIFT, T("I_X J", "Y"), T("I_X J", "Y"), -3)
    assert str(s) == "Shift_{X,-3}(A[I_X, J]{U_Y}) -> A[I_X, J]{U_Y}"


def test_multi_dim_allgather_transposes_to_one_reduce_scatter_per_dim():
    fwd = Step(Op.ALL_GATHER, (T("B_X D_Y"),), T("B D"), ("X", "Y"))
    back = transpose(fwd, MESH)
    assert [(s.op, s.axes, s.dim) for s in back] == [
        (Op.REDUCE_SCATTER, ("Y",), "D"),
        (Op.REDUCE_SCATTER, ("X",), "B"),
    ]
    assert back[0].input == T("B D", "XY") and back[-1].output == T("B_X D_Y")
    assert back[0].output == back[1].input
    assert (
        transpose(back, MESH) == (fwd_local := transpose(transpose(fwd, MESH), MESH)) and len(fwd_local) == 1
    )


def test_multi_axis_one_dim_reduce_scatter():
    s = one(Step(Op.ALL_GATHER, (T("I_XY J"),), T("I J"), ("X", "Y")))
    assert (s.op, s.axes, s.dim, s.input, s.output) == (
        Op.REDUCE_SCATTER,
        ("X", "Y"),
        "I",
        T("I J", "XY"),
        T("I_XY J"),
    )


def test_a_sequence_transposes_in_reverse_order():
    gather = Step(Op.ALL_GATHER, (T("D_X F"),), T("D F"), ("X",))
    slice_y = Step(Op.SLICE, (T("D F"),), T("D_Y F"), ("Y",), "D")
    back = transpose([gather, slice_y], MESH)
    assert [s.op for s in back] == [Cast.PAD, Op.REDUCE_SCATTER]
    assert back[0].input == T("D_Y F", "X") and back[-1].output == T("D_X F", "Y")


def test_statement_form_is_accepted():
    stmt = Arrow(Collective(Op.ALL_GATHER, ("X",), T("D_X F", name="W")), T("D F", name="W"))
    assert one(stmt).op is Op.REDUCE_SCATTER


def test_a_step_that_does_not_do_what_its_op_says_is_an_error():
    with pytest.raises(IllegalCollective, match="not what AllGather does"):
        transpose(Step(Op.ALL_GATHER, (T("D F", "X"),), T("D F"), ("X",)), MESH)
    with pytest.raises(UsageError):
        transpose(Step(Op.EINSUM, (T("I J"), T("J K")), T("I K")), MESH)
    with pytest.raises(UsageError):
        transpose(42, MESH)  # type: ignore[arg-type]


# ---- transpose of transpose is the identity, on random legal steps of every rule -----------------------

AXES = "XYZ"


@st.composite
def local_steps(draw, max_axis: int = 4) -> tuple[LocalStep, Mesh]:
    n_axes = draw(st.integers(1, 3))
    names = AXES[:n_axes]
    mesh = Mesh({a: draw(st.integers(1, max_axis)) for a in names})
    n_dims = draw(st.integers(1, 3))
    labels = "MNO"[:n_dims]
    # a placement per axis: a dim, U, I or R
    where = {a: draw(st.sampled_from([*labels, "U", "I", "R"])) for a in names}
    t = Tensor(
        "A",
        tuple(Dim(lb, tuple(a for a in names if where[a] == lb)) for lb in labels),
        tuple(a for a in names if where[a] == "U"),
        tuple(a for a in names if where[a] == "I"),
    )
    options = []
    minor = {lb: t.axes_of(lb)[-draw(st.integers(1, 3)) :] for lb in labels if t.axes_of(lb)}
    for lb, axes in minor.items():
        kind = draw(st.sampled_from([Kind.R, Kind.I]))
        options.append((Op.ALL_GATHER, axes, None, [(axes, kind, None)]))
        options.append((Cast.PAD, axes, lb, [(axes, Kind.U, None)]))
        for other in labels:
            if other != lb:
                options.append((Op.ALL_TO_ALL, axes, other, [(axes, Kind.S, other)]))
    if len(minor) > 1:  # a multi-dim AllGather, axes in dim order
        axes = tuple(a for lb in labels if lb in minor for a in minor[lb])
        options.append((Op.ALL_GATHER, axes, None, [((a,), Kind.R, None) for a in axes]))
    if t.unreduced:
        axes = tuple(draw(st.permutations(t.unreduced)))[: draw(st.integers(1, len(t.unreduced)))]
        axes = tuple(a for a in mesh.names if a in axes)  # canonical: mesh order
        options.append((Op.REDUCE_SCATTER, axes, labels[-1], [(axes, Kind.S, labels[-1])]))
        options.append(
            (Op.ALL_REDUCE, axes, None, [((a,), draw(st.sampled_from([Kind.R, Kind.I])), None) for a in axes])
        )
    free = tuple(a for a in names if where[a] in ("R", "I"))
    if free:
        options.append((Op.SLICE, free[:1], labels[0], [(free[:1], Kind.S, labels[0])]))
    if t.invariant:
        options.append((Cast.PVARY, t.invariant, None, [(t.invariant, Kind.R, None)]))
    if len(names) >= 2 and mesh[names[0]].size == mesh[names[1]].size:  # a swap that keeps local shapes
        a, b = names[0], names[1]
        swap = {a: b, b: a}
        sw = Tensor(
            "A",
            tuple(d.with_axes(tuple(swap.get(x, x) for x in d.axes)) for d in t.dims),
            tuple(swap.get(x, x) for x in t.unreduced),
            tuple(swap.get(x, x) for x in t.invariant),
        )
        options.append((Op.PERMUTE, (a, b), None, sw))
    offset = None
    if names:  # a ring shift: the layout stays
        options.append((Op.SHIFT, names[:1], None, t))
        offset = draw(st.sampled_from([1, -1, 2]))
    op, axes, dim, effect = draw(st.sampled_from(options))
    if isinstance(effect, Tensor):
        out = effect
    else:
        out = t
        for ax, kind, d in effect:
            out = _set(out, ax, kind, d)
    return LocalStep(
        op,
        t,
        out,
        axes,
        dim if op in (Op.REDUCE_SCATTER, Op.ALL_TO_ALL, Op.SLICE, Cast.PAD) else None,
        offset=offset if op is Op.SHIFT else None,
    ), mesh


@given(local_steps())
def test_transpose_of_transpose_is_the_identity(case):
    step, mesh = case
    back = transpose(step, mesh)
    assert back[0].input == cotangent(step.output, mesh)
    assert back[-1].output == cotangent(step.input, mesh)
    for a, b in zip(back, back[1:], strict=False):
        assert a.output == b.input
    assert transpose(back, mesh) == (step,)


# ---- the dot-product test: <F x, g> = <x, F^T g> on the stacked per-device buffers -------------------


def _run(steps, bufs, vm, sizes):
    for s in steps:
        if s.op is not Cast.PVARY:  # pvary moves no data
            bufs, _ = apply_step(s.step(), [bufs], vm, sizes)
    return bufs


def _pair(x, g, t: Tensor, vm: VirtualMesh) -> float:
    """The pairing of a value of type ``t`` with a cotangent of type cot(t): the sum over devices, with an
    invariant axis counted once (its copies are one value)."""
    return sum(float(np.vdot(x[c], g[c])) for c in vm.coords) / vm.size(t.invariant)


@given(local_steps(max_axis=3), st.integers(0, 2**32 - 1))
def test_dot_product_transpose_is_the_adjoint(case, seed):
    step, mesh = case
    vm, rng = VirtualMesh(mesh), np.random.default_rng(seed)
    n = prod(mesh.shape)
    sizes = {d.label: n for d in step.input.dims}
    shape = tuple(n for _ in step.input.dims)
    x = shard(rng.standard_normal(shape), step.input, vm, rng)
    g = shard(rng.standard_normal(shape), cotangent(step.output, mesh), vm, rng)
    fx = _run([step], x, vm, sizes)
    ftg = _run(transpose(step, mesh), g, vm, sizes)
    lhs, rhs = _pair(fx, g, step.output, vm), _pair(x, ftg, step.input, vm)
    assert abs(lhs - rhs) <= 1e-9 * max(1.0, abs(lhs))
