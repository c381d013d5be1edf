"""Collectives as explicit linear operators on the stacked per-device buffers, and their transposes.

The stacked vector of a tensor on a mesh: the devices in mesh order (``VirtualMesh.coords``: the
coordinates in axis order, the last axis fastest), each device's buffer flattened in C order (the last
dim fastest), concatenated. A dim sharded over ``X`` puts block ``c_X`` on device ``c``, so on a mesh of
one axis the stacked vector of ``A[I_X]`` *is* the global vector. Every device's copy of a replicated
value is its own coordinates: a cotangent may differ per device, which is why the transpose of an
AllGather is a ReduceScatter of unreduced values.

:func:`operator_matrix` pushes the identity through the executor (the same code path as
:func:`shardalg.numeric.execute.run_plan`, one trailing column per basis vector). :func:`transpose_step` is the
local-view transpose of DESIGN.md section 4 as a plan Step; on stacked buffers an invariant axis is
replicated, so the transposes here are the ``R``/``U`` lines of the table::

    AllGather_A (S -> R)         <->  ReduceScatter_A (U -> S)
    AllReduce_A (U -> R)         <->  AllReduce_A (U -> R)
    AllToAll_{A, d' -> d}        <->  AllToAll_{A, d -> d'}
    Permute_{X,Y}                <->  Permute_{X,Y} (the inverse permutation of devices)
    Shift_{X,k}                  <->  Shift_{X,-k} (the inverse cyclic permutation along X)
    Slice_{A,d} (R -> S)         <->  zero-pad (S -> U): a Slice step whose axes leave d into {U_A}

Only the axes the op names change kind (R and U swap on them); the other axes keep their marks, which
does not change the matrix (an op moves data along its own axes only).

:func:`kron_forms` is the seed's exact statement: with ``u`` the all-ones p-vector,
broadcast = u ⊗ I_n, reduce = uᵀ ⊗ I_n, AllGather = broadcast ⊗ I_p, ReduceScatter = reduce ⊗ I_p,
each compared, as sympy matrices, with the operator the executor builds for ``A[I_X]``, |X| = p, I = p·n.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np
import sympy

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.registry import Layer
from shardalg.errors import UsageError
from shardalg.notation.plan import Step
from shardalg.notation.syntax import Dim, Op, Tensor

from .execute import Buffers, VirtualMesh, apply_step, default_sizes, is_zero_pad, local_shape

__all__ = [
    "stack",
    "unstack",
    "stacked_size",
    "operator_matrix",
    "transpose_step",
    "dot_test",
    "transpose_matches",
    "KronForms",
    "kron_forms",
]

MeshLike = VirtualMesh | Mesh | Mapping[str, int] | str


def _vm(mesh: MeshLike) -> VirtualMesh:
    return mesh if isinstance(mesh, VirtualMesh) else VirtualMesh(mesh)


def stacked_size(t: Tensor, mesh: MeshLike, sizes: Mapping[str, int]) -> int:
    vm = _vm(mesh)
    return len(vm.coords) * int(np.prod(local_shape(t, vm, sizes)))


def stack(buffers: Mapping[tuple[int, ...], np.ndarray], mesh: MeshLike, rank: int) -> np.ndarray:
    """The stacked vector (or, with trailing columns, matrix) of per-device buffers of a rank-``rank`` tensor."""
    vm = _vm(mesh)
    first = buffers[vm.coords[0]]
    return np.concatenate([buffers[c].reshape((-1, *first.shape[rank:])) for c in vm.coords])


def unstack(vector: np.ndarray, t: Tensor, mesh: MeshLike, sizes: Mapping[str, int]) -> Buffers:
    """Per-device buffers of ``t`` from its stacked vector (extra trailing axes are kept)."""
    vm = _vm(mesh)
    loc = local_shape(t, vm, sizes)
    k = int(np.prod(loc))
    if vector.shape[0] != k * len(vm.coords):
        raise UsageError(f"a stacked vector of {t.name or 'the tensor'} has {k * len(vm.coords)} entries")
    return {c: vector[i * k : (i + 1) * k].reshape(loc + vector.shape[1:]) for i, c in enumerate(vm.coords)}


def _sizes(step: Step, vm: VirtualMesh, sizes: Mapping[str, int] | None) -> dict[str, int]:
    out = default_sizes((*step.inputs, step.output), vm)
    out.update(sizes or {})
    return out


def _collective(step: Step) -> Tensor:
    if step.op is Op.EINSUM:
        raise UsageError("an einsum is bilinear, not a linear operator of one stacked vector")
    return step.inputs[0]


def operator_matrix(
    step: Step, mesh: MeshLike, sizes: Mapping[str, int] | None = None, exact: bool = False
) -> np.ndarray | sympy.Matrix:
    """The matrix of a collective step on stacked buffers: rows index the output's stacked vector,
    columns the input's. Integer entries (each is a count of summed copies); ``exact`` gives a sympy
    Matrix."""
    vm = _vm(mesh)
    t = _collective(step)
    sz = _sizes(step, vm, sizes)
    n = stacked_size(t, vm, sz)
    out, _ = apply_step(step, [unstack(np.eye(n, dtype=np.int64), t, vm, sz)], vm, sz)
    m = stack(out, vm, len(step.output.dims))
    return sympy.Matrix(m.tolist()) if exact else m


# ---------------------------------------------------------------- transposes


def _marked(t: Tensor, axes: tuple[str, ...], unreduced: bool) -> Tensor:
    """``t`` with ``axes`` made unreduced (or no longer unreduced); an invariant mark on them is dropped."""
    keep = tuple(a for a in t.unreduced if a not in axes)
    inv = tuple(a for a in t.invariant if a not in axes)
    return replace(t, unreduced=keep + axes if unreduced else keep, invariant=inv)


def _holder(t: Tensor, axes: tuple[str, ...]) -> Dim | None:
    for d in t.dims:
        if set(axes) & set(d.axes):
            return d
    return None


# op -> the step whose matrix on stacked buffers is the transpose of the op's (written apart from the
# algebra's transposes, which the dot-product test checks against these)
TRANSPOSE_OF: Layer[Callable[[Step], Step]] = Layer(
    "the numeric transposes (shardalg.numeric.operators)",
    fix="register the op's transpose on stacked buffers: @TRANSPOSE_OF.register(op)",
)


@TRANSPOSE_OF.register(Op.ALL_GATHER)
def _t_all_gather(s: Step) -> Step:
    (t,) = s.inputs
    axes = tuple(a for a in t.sharded_axes if a in s.axes)  # as they shard the input: one ReduceScatter
    dims = {d.label for d in t.dims if set(d.axes) & set(axes)}
    dim = next(iter(dims)) if len(dims) == 1 else None
    return Step(
        Op.REDUCE_SCATTER,
        (_marked(s.output, axes, True),),
        t,
        axes,
        dim,
        reason=f"transpose of AllGather_{''.join(axes)}: sum the cotangents, keep the gathered block",
    )


@TRANSPOSE_OF.register(Op.REDUCE_SCATTER)
def _t_reduce_scatter(s: Step) -> Step:
    (t,) = s.inputs
    return Step(
        Op.ALL_GATHER,
        (s.output,),
        _marked(t, s.axes, False),
        s.axes,
        reason=f"transpose of ReduceScatter_{''.join(s.axes)}: gather the cotangent's blocks",
    )


@TRANSPOSE_OF.register(Op.ALL_REDUCE)
def _t_all_reduce(s: Step) -> Step:
    (t,) = s.inputs
    return Step(
        Op.ALL_REDUCE,
        (_marked(s.output, s.axes, True),),
        _marked(t, s.axes, False),
        s.axes,
        reason=f"transpose of AllReduce_{''.join(s.axes)}: the group sum is symmetric",
    )


@TRANSPOSE_OF.register(Op.ALL_TO_ALL)
def _t_all_to_all(s: Step) -> Step:
    (t,) = s.inputs
    src = _holder(t, s.axes)
    if src is None:
        raise UsageError(f"AllToAll_{''.join(s.axes)}: no dim of the input holds its axes")
    held = tuple(a for a in src.axes if a in s.axes)
    return Step(
        Op.ALL_TO_ALL,
        (s.output,),
        t,
        held,
        src.label,
        reason=f"transpose of AllToAll_{{{''.join(s.axes)},{s.dim}}}: the exchange reversed",
    )


@TRANSPOSE_OF.register(Op.PERMUTE)
def _t_permute(s: Step) -> Step:
    return Step(
        Op.PERMUTE,
        (s.output,),
        s.inputs[0],
        s.axes[::-1] if len(s.axes) > 2 else s.axes,  # a cycle's inverse; a swap is its own
        reason=f"transpose of Permute_{{{','.join(s.axes)}}}: the inverse permutation",
    )


@TRANSPOSE_OF.register(Op.SHIFT)
def _t_shift(s: Step) -> Step:
    (t,) = s.inputs
    assert s.offset is not None
    (axis,) = s.axes
    # the cotangent's kind on the axis: S stays; R and U swap (the layout is the same on both sides)
    swap = axis not in t.sharded_axes
    back_in = _marked(s.output, s.axes, axis not in s.output.unreduced) if swap else s.output
    back_out = _marked(t, s.axes, axis not in t.unreduced) if swap else t
    return Step(
        Op.SHIFT,
        (back_in,),
        back_out,
        s.axes,
        reason=f"transpose of Shift_{{{axis},{s.offset:+d}}}: the inverse shift",
        offset=-s.offset,
    )


@TRANSPOSE_OF.register(Op.SEND)
def _t_send(s: Step) -> Step:
    (t,) = s.inputs
    assert s.offset is not None
    (axis,) = s.axes
    return Step(
        Op.SEND,
        (s.output,),
        t,
        s.axes,
        reason=f"transpose of Send_{{{axis},{s.offset:+d}}}: the cotangent is sent back",
        offset=-s.offset,
    )


@TRANSPOSE_OF.register(Op.SLICE)
def _t_slice(s: Step) -> Step:
    (t,) = s.inputs
    if is_zero_pad(s):  # the transpose of a zero-pad is the Slice it came from
        d = _holder(t, s.axes)
        return Step(
            Op.SLICE,
            (_marked(s.output, s.axes, False),),
            t,
            s.axes,
            d.label if d else s.dim,
            reason=f"transpose of a zero-pad over {''.join(s.axes)}: keep the own block",
        )
    return Step(
        Op.SLICE,
        (s.output,),
        _marked(t, s.axes, True),
        s.axes,
        s.dim,
        reason=f"transpose of Slice_{''.join(s.axes)}: zero-pad the block into {{U}} (no communication)",
    )


def transpose_step(step: Step) -> Step:
    """The step whose matrix on stacked buffers is the transpose of ``step``'s: from the cotangent of the
    output (R and U swapped on the op's axes) to the cotangent of the input."""
    _collective(step)
    return TRANSPOSE_OF.lookup(step.op)(step)


def dot_test(
    step: Step, mesh: MeshLike, sizes: Mapping[str, int] | None = None, rng: np.random.Generator | None = None
) -> float:
    """|<Op x, y> - <x, Opᵀ y>| relative to the sizes of both sides, with Op and Opᵀ run by the executor
    on random stacked vectors x, y (Opᵀ is :func:`transpose_step`). Round-off only: ~1e-16."""
    vm = _vm(mesh)
    rng = rng if rng is not None else np.random.default_rng(0)
    sz = _sizes(step, vm, sizes)
    back = transpose_step(step)
    t_in, t_out = step.inputs[0], step.output
    x = rng.standard_normal(stacked_size(t_in, vm, sz))
    y = rng.standard_normal(stacked_size(t_out, vm, sz))
    ox, _ = apply_step(step, [unstack(x, t_in, vm, sz)], vm, sz)
    oty, _ = apply_step(back, [unstack(y, back.inputs[0], vm, sz)], vm, sz)
    ox_v, oty_v = stack(ox, vm, len(t_out.dims)), stack(oty, vm, len(t_in.dims))
    lhs, rhs = float(ox_v @ y), float(x @ oty_v)
    scale = float(np.linalg.norm(ox_v) * np.linalg.norm(y) + np.linalg.norm(x) * np.linalg.norm(oty_v))
    return abs(lhs - rhs) / scale if scale else abs(lhs - rhs)


def transpose_matches(step: Step, mesh: MeshLike, sizes: Mapping[str, int] | None = None) -> bool:
    """Whether the matrix of ``transpose_step(step)`` is exactly the transpose of ``step``'s matrix."""
    fwd = operator_matrix(step, mesh, sizes)
    back = operator_matrix(transpose_step(step), mesh, sizes)
    return fwd.shape[::-1] == back.shape and bool(np.array_equal(back, fwd.T))


# ---------------------------------------------------------------- the seed's Kronecker statement


@dataclass(frozen=True)
class KronForms:
    """The Kronecker forms for ``p`` devices and shards of ``n`` elements, and the executor's operators.

    Ordering: device-major stacked vectors (see the module docstring); ``A[I_X]`` with I = p·n, so the
    AllGather input is the global vector and its output is p copies of it.
    """

    p: int
    n: int
    u: sympy.Matrix
    broadcast: sympy.Matrix  # u ⊗ I_n : R^n -> R^{pn}
    reduce: sympy.Matrix  # uᵀ ⊗ I_n : R^{pn} -> R^n
    all_gather: sympy.Matrix  # broadcast ⊗ I_p : R^{pn} -> R^{p²n}
    reduce_scatter: sympy.Matrix  # reduce ⊗ I_p : R^{p²n} -> R^{pn}
    all_gather_op: sympy.Matrix  # the executor's AllGather_X: A[I_X] -> A[I]
    reduce_scatter_op: sympy.Matrix  # the executor's ReduceScatter_{X,I}: A[I]{U_X} -> A[I_X]
    all_reduce_op: sympy.Matrix  # the executor's AllReduce_X: A[I]{U_X} -> A[I]

    def checks(self) -> dict[str, bool]:
        """Each identity of the statement, checked exactly."""
        return {
            "reduce = broadcastᵀ": self.reduce == self.broadcast.T,
            "AllGather = broadcast ⊗ I_p": self.all_gather_op == self.all_gather,
            "ReduceScatter = reduce ⊗ I_p": self.reduce_scatter_op == self.reduce_scatter,
            "ReduceScatter = AllGatherᵀ": self.reduce_scatter_op == self.all_gather_op.T,
            "AllReduce = AllGather · ReduceScatter": self.all_reduce_op
            == self.all_gather_op * self.reduce_scatter_op,
            "AllReduce = AllReduceᵀ": self.all_reduce_op == self.all_reduce_op.T,
        }

    @property
    def holds(self) -> bool:
        return all(self.checks().values())


def kron_forms(p: int, n: int) -> KronForms:
    """The seed's statement for ``p`` devices and shards of ``n`` elements, with the executor's matrices."""
    if p < 1 or n < 1:
        raise UsageError("kron_forms needs p >= 1 devices and n >= 1 elements per shard")
    mesh, sizes = Mesh(X=p), {"I": p * n}
    sharded = Tensor("A", (Dim("I", ("X",)),))
    full = Tensor("A", (Dim("I"),))
    partial = Tensor("A", (Dim("I"),), unreduced=("X",))
    u = sympy.ones(p, 1)
    broadcast = sympy.Matrix(sympy.kronecker_product(u, sympy.eye(n)))
    reduce = sympy.Matrix(sympy.kronecker_product(u.T, sympy.eye(n)))

    def op(step: Step) -> sympy.Matrix:
        return operator_matrix(step, mesh, sizes, exact=True)  # type: ignore[return-value]

    return KronForms(
        p,
        n,
        u,
        broadcast,
        reduce,
        sympy.Matrix(sympy.kronecker_product(broadcast, sympy.eye(p))),
        sympy.Matrix(sympy.kronecker_product(reduce, sympy.eye(p))),
        op(Step(Op.ALL_GATHER, (sharded,), full, ("X",))),
        op(Step(Op.REDUCE_SCATTER, (partial,), sharded, ("X",), "I")),
        op(Step(Op.ALL_REDUCE, (partial,), full, ("X",))),
    )
