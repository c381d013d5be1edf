"""The data movement and global meaning of the notation's functions (elementwise, reductions, softmax, norms),
registered on ``MOVES`` and ``DENSE`` (:mod:`shardalg.numeric.movement`).

On each device a function's step applies the record's ``dense`` function to the device's own blocks (binary
operands aligned by dim name and broadcast over the dims one lacks); a sum or mean over a sharded dim leaves
each device's share of the total (a partial sum); over a sharded dim with statistics (a max, softmax, a
norm) the devices of each group along the dim's axes send each other their per-row statistics, the group
combines them (the record's ``grouped``), and each device finishes its own block."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from shardalg.algebra.ops.function import FunctionRecord, Kind
from shardalg.algebra.registry import RECORDS
from shardalg.errors import ShardalgError
from shardalg.notation.plan import Step
from shardalg.notation.syntax import Op, Tensor

from .devices import Buffers, VirtualMesh
from .kernels import freeze
from .movement import DENSE, MOVES, Net
from .steprules import Layout, step_error

__all__ = ["align", "FUNCTIONS"]

FUNCTIONS = tuple(op for op in Op if op.function)


def align(arr: np.ndarray, t: Tensor, out: Tensor) -> np.ndarray:
    """``arr`` (laid out as ``t``'s dims) in ``out``'s dim order, with a length-1 axis for each dim it lacks."""
    labels = t.dim_names
    present = [labels.index(d) for d in out.dim_names if d in labels]
    moved = np.transpose(arr, present)
    shape = [arr.shape[labels.index(d)] if d in labels else 1 for d in out.dim_names]
    return moved.reshape(shape)


def _evaluate(
    rec: FunctionRecord, step: Step, blocks: Sequence[np.ndarray], scale: float | None = None
) -> np.ndarray:
    if rec.shape == Kind.ELEMENTWISE:
        aligned = [align(b, t, step.output) for b, t in zip(blocks, step.inputs, strict=True)]
        return np.asarray(rec.dense(aligned, None, step.factor))
    axis = step.inputs[0].dim_names.index(step.dim)
    if rec.shape == Kind.DERIVATIVE:  # the cotangent aligned to the operand's dims
        return np.asarray(rec.dense([blocks[0], align(blocks[1], step.inputs[1], step.output)], axis, None))
    if scale is not None:  # a partial sum or mean: the sum of this block, scaled by 1 / |D| for a mean
        return np.asarray(blocks[0].sum(axis=axis) * scale)
    return np.asarray(rec.dense(blocks, axis, step.factor))


def _function(vm: VirtualMesh, net: Net, step: Step, *bufs: Buffers) -> tuple[Buffers, Layout]:
    rec: FunctionRecord = RECORDS[step.op]
    try:
        made = rec.apply(step.inputs, step.dim, vm.mesh, step.axes, flags=step.flags)
    except ShardalgError as err:  # the rule's refusal, as the executor's error on this step
        raise step_error(step, err.message) from None
    if made.dim_names != step.output.dim_names:
        raise step_error(step, f"it gives dims {', '.join(made.dim_names)}", "shape-mismatch")
    layout = (tuple(d.axes for d in made.dims), frozenset(made.unreduced))
    t = step.inputs[0]
    out: dict = {}
    derivative = rec.shape == Kind.DERIVATIVE
    group = step.axes or (t.axes_of(step.dim) if derivative else ())
    # statistics all-reduced over the dim's axes (a derivative: its blocks along it), group by group
    if group:
        axis = t.dim_names.index(step.dim)
        for c in vm.coords:
            if vm.rank(c, group) != 0:
                continue
            members = vm.group(c, group)
            if derivative:  # each device's (operand block, cotangent block aligned to the operand's dims)
                blocks = [(bufs[0][g], align(bufs[1][g], step.inputs[1], step.output)) for g in members]
            else:
                blocks = [bufs[0][g] for g in members]
            first = bufs[0][members[0]]
            n = first.shape[axis] * len(members)
            rows = first.size // max(1, first.shape[axis])
            for g in members if step.axes else ():  # each member receives every other member's statistics
                for h in members:
                    net.recv(g, h, np.empty((rows * len(rec.statistics), 1)), 1)
            results = rec.grouped(blocks, axis, n) if rec.grouped is not None else None
            if results is None:
                raise step_error(step, f"{rec.op.value} has no evaluation over a sharded dim")
            for g, r in zip(members, results, strict=True):
                out[g] = freeze(np.asarray(r))
        return out, layout
    scale = None
    if rec.shape == Kind.REDUCTION and t.axes_of(step.dim):  # a partial sum (or mean) over a sharded dim
        axis = t.dim_names.index(step.dim)
        n = bufs[0][vm.coords[0]].shape[axis] * vm.size(t.axes_of(step.dim))
        scale = 1.0 / n if step.op is Op.MEAN else 1.0
    made_for: dict[tuple[int, ...], np.ndarray] = {}
    for c in vm.coords:
        key = tuple(id(b[c]) for b in bufs)
        if key not in made_for:
            made_for[key] = freeze(_evaluate(rec, step, [b[c] for b in bufs], scale))
        out[c] = made_for[key]
    return out, layout


def _dense(step: Step, values: Sequence[np.ndarray], vm: VirtualMesh) -> np.ndarray:
    """The function on whole arrays."""
    return _evaluate(RECORDS[step.op], step, values)


for _op in FUNCTIONS:
    MOVES.register(_op)(_function)
    DENSE.register(_op)(_dense)
