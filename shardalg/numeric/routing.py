"""The data movement and global meaning of a MoE layer's routing (``dispatch``, ``combine``: records in
:mod:`shardalg.algebra.ops.route`), registered on ``MOVES`` and ``DENSE``.

On each device a routing step routes its own tokens (dispatch: into its share C/|A| of each expert's slots,
A the axes that shard the tokens; combine: back from that share, gated): no data moves. The global meaning
routes the whole array group by group, the groups the token blocks of those axes in rank order, so that
device a's share is slots [a·C/|A|, (a+1)·C/|A|) of every expert, as the layout ``C_A`` says."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from shardalg.algebra.ops.route import capacity, combine_block, dispatch_block
from shardalg.algebra.registry import RECORDS
from shardalg.errors import ShardalgError
from shardalg.notation.plan import Step
from shardalg.notation.syntax import Op

from .devices import Buffers, VirtualMesh
from .kernels import freeze
from .movement import DENSE, MOVES, Net
from .steprules import Layout, step_error

__all__ = ["share_of"]


def share_of(step: Step, tokens: int, experts: int) -> int:
    """A group's slots an expert, cf·k·(its tokens)/E: a whole number, or the step's error."""
    share = capacity(Fraction(tokens), experts, step.offset, step.factor)
    if share.denominator != 1:
        raise step_error(
            step, f"a group of {tokens} tokens has cf·k·{tokens}/{experts} = {share} slots an expert"
        )
    return int(share)


def _route(vm: VirtualMesh, net: Net, step: Step, *bufs: Buffers) -> tuple[Buffers, Layout]:
    rec = RECORDS[step.op]
    try:
        made = rec.apply(step.inputs, step.dim, vm.mesh, step.axes)
    except ShardalgError as err:  # the rule's refusal, as the executor's error on this step
        raise step_error(step, err.message) from None
    layout = (tuple(d.axes for d in made.dims), frozenset(made.unreduced))
    n = len(step.inputs[1].dims) - 1  # the token dims
    k = step.offset or 0
    out = {}
    for c in vm.coords:
        data, logits = bufs[0][c], bufs[1][c]
        rows = logits.reshape(-1, logits.shape[-1])  # the device's tokens, row-major
        if step.op is Op.DISPATCH:
            share = share_of(step, rows.shape[0], rows.shape[1])
            out[c] = freeze(dispatch_block(data.reshape(rows.shape[0], *data.shape[n:]), rows, k, share))
        else:
            out[c] = freeze(combine_block(data, rows, k).reshape(*logits.shape[:-1], *data.shape[2:]))
    return out, layout


def _groups(arr: np.ndarray, counts: Sequence[int]) -> np.ndarray:
    """``arr``'s leading token dims cut into blocks, ``counts[i]`` blocks along dim i, as [groups, tokens of a
    group (row-major), ..], the groups in rank order (the first dim's axes major)."""
    n = len(counts)
    split = [x for i, g in enumerate(counts) for x in (g, arr.shape[i] // g)]
    cut = arr.reshape(*split, *arr.shape[n:])
    order = [2 * i for i in range(n)] + [2 * i + 1 for i in range(n)] + list(range(2 * n, cut.ndim))
    moved = cut.transpose(order)
    return moved.reshape(int(np.prod(counts)), -1, *arr.shape[n:])


def _ungroup(arr: np.ndarray, shape: Sequence[int], counts: Sequence[int]) -> np.ndarray:
    """The inverse of :func:`_groups`: [groups, tokens of a group, ..] back to the token dims ``shape``."""
    n = len(counts)
    cut = arr.reshape(*counts, *(s // g for s, g in zip(shape, counts, strict=True)), *arr.shape[2:])
    order = [x for i in range(n) for x in (i, n + i)] + list(range(2 * n, cut.ndim))
    return cut.transpose(order).reshape(*shape, *arr.shape[2:])


def _route_dense(step: Step, values: Sequence[np.ndarray], vm: VirtualMesh) -> np.ndarray:
    """The routing of whole arrays, group by group (the token blocks of the axes that shard the tokens)."""
    data, logits = values
    g = step.inputs[1]
    tokens = g.dims[:-1]
    counts = [vm.size(d.axes) if d.axes else 1 for d in tokens]
    groups = int(np.prod(counts))
    k = step.offset or 0
    by_group = _groups(logits, counts)
    if step.op is Op.DISPATCH:
        share = share_of(step, by_group.shape[1], logits.shape[-1])
        parts = [
            dispatch_block(h, lg, k, share) for h, lg in zip(_groups(data, counts), by_group, strict=True)
        ]
        return np.concatenate(parts, axis=1)
    slot_blocks = np.split(data, groups, axis=1)
    parts = [combine_block(y, lg, k) for y, lg in zip(slot_blocks, by_group, strict=True)]
    return _ungroup(np.stack(parts), logits.shape[:-1], counts)


for _op in (Op.DISPATCH, Op.COMBINE):
    MOVES.register(_op)(_route)
    DENSE.register(_op)(_route_dense)
