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
    try:
        made = RECORDS[step.op].apply(step.inputs, step.dim, vm.mesh, step.axes)
    except ShardalgError as err:  # the rule's refusal, as the executor's error on this step
        raise step_error(step, err.message) from None
    layout = (tuple(d.axes for d in made.dims), frozenset(made.unreduced))
    out = {}
    for c in vm.coords:
        data, logits = bufs[0][c], bufs[1][c]
        if step.op is Op.DISPATCH:
            share = share_of(step, logits.shape[0], logits.shape[1])
            out[c] = freeze(dispatch_block(data, logits, step.offset or 0, share))
        else:
            out[c] = freeze(combine_block(data, logits, step.offset or 0))
    return out, layout


def _route_dense(step: Step, values: Sequence[np.ndarray], vm: VirtualMesh) -> np.ndarray:
    """The routing of whole arrays, group by group (the token blocks of the axes that shard the tokens)."""
    data, logits = values
    g = step.inputs[1]
    groups = vm.size(g.axes_of(g.dims[0].label)) if g.axes_of(g.dims[0].label) else 1
    k = step.offset or 0
    token_blocks = np.split(logits, groups, axis=0)
    if step.op is Op.DISPATCH:
        data_blocks = np.split(data, groups, axis=0)
        share = share_of(step, token_blocks[0].shape[0], logits.shape[1])
        parts = [dispatch_block(h, lg, k, share) for h, lg in zip(data_blocks, token_blocks, strict=True)]
        return np.concatenate(parts, axis=1)
    slot_blocks = np.split(data, groups, axis=1)
    parts = [combine_block(y, lg, k) for y, lg in zip(slot_blocks, token_blocks, strict=True)]
    return np.concatenate(parts, axis=0)


for _op in (Op.DISPATCH, Op.COMBINE):
    MOVES.register(_op)(_route)
    DENSE.register(_op)(_route_dense)
