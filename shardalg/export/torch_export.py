"""A plan as ``torch.distributed`` code on a ``DeviceMesh``, or (``dtensor=True``) as DTensor redistributions.

    >>> print(export_torch(plan, Mesh(X=4, Y=2)))
    >>> print(export_torch(plan, Mesh(X=4, Y=2), dtensor=True))

Ranks are mesh coordinates row-major (the last axis fastest), as in JAX and in shardalg's executor. The
generated module builds its mesh with ``init_device_mesh("cpu", MESH_SHAPE, mesh_dim_names=MESH_AXES)``
(``make_mesh()``, called on every rank) and takes its process groups from it (``mesh.get_group("X")``); only
the helpers its steps use are written out. ``forward(*blocks, mesh)`` runs the steps on this rank's blocks:

| shardalg | torch.distributed |
|---|---|
| AllGather_A on dim d | ``all_gather_single``, blocks concatenated on d |
| ReduceScatter_{A,d} | ``reduce_scatter_single`` of the blocks of d |
| AllReduce_A | ``all_reduce`` |
| AllToAll_{A,d} | ``all_to_all_single`` of the blocks of d, received blocks concatenated on the source dim |
| Slice / its transpose | ``narrow`` at this rank's index / zeros with the block written in place |
| Permute | ``batch_isend_irecv``: one shard to one peer |
| local einsum | ``torch.einsum`` |
| a function, a derivative | ``torch`` on the blocks, statistics all-reduced (:mod:`.torch_functions`) |

A group over several axes is the group of their flattened mesh, whose rank order is the mesh order of the
axes; an op over axes in another order (``I_YX`` gathered over Y, X) passes the block order explicitly.

The DTensor form (:mod:`.torch_dtensor`) takes and returns ``DTensor``s with the plan's placements and runs
each collective as ``DTensor.redistribute`` to the next placements.
"""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Callable, Mapping, Sequence

from shardalg.algebra.mesh import Mesh, as_mesh
from shardalg.algebra.registry import Layer
from shardalg.errors import ShardalgError, UsageError
from shardalg.notation.plan import Step
from shardalg.notation.syntax import Op, Tensor

from .emit import (
    Body,
    appended_suffixes,
    einsum_subscripts,
    generated_by,
    is_zero_pad,
    removed_suffixes,
    start,
)
from .flow import Flow, gradient_note, node_text, step_text
from .permute import permute_sources
from .specs import placements_source
from .torch_dtensor import export_dtensor
from .torch_functions import function_lines
from .torch_helpers import helpers_source, mesh_source

__all__ = ["export_torch"]


def _order(axes: Sequence[str], mesh: Mesh) -> tuple[tuple[str, ...], list[int] | None]:
    """The group (axes in mesh order) and, when ``axes`` are in another order, position -> group rank."""
    group = tuple(a for a in mesh.names if a in axes)
    if tuple(axes) == group:
        return group, None
    order = []
    for coords in itertools.product(*(range(mesh.size(a)) for a in axes)):
        at = dict(zip(axes, coords, strict=True))
        r = 0
        for a in group:
            r = r * mesh.size(a) + at[a]
        order.append(r)
    return group, order


class _Body(Body):
    """The emitter state, and the helpers the code calls."""

    def __init__(self, flow: Flow, mesh: Mesh) -> None:
        super().__init__(flow, mesh)
        self.used: set[str] = set()

    def call(self, helper: str, args: str) -> str:
        self.used.add(helper)
        return f"{helper}({args})"

    def group(self, axes: Sequence[str]) -> tuple[str, str]:
        """(the group's source: ``mesh.get_group('X')`` or ``_group(mesh, ('X', 'Y'))``; ``, order=[...]`` or '')."""
        group, order = _order(axes, self.mesh)
        src = f"mesh.get_group({group[0]!r})" if len(group) == 1 else self.call("_group", f"mesh, {group!r}")
        return src, "" if order is None else f", order={order!r}"


# op -> its emitter: the lines of the generated function that run one step (one method per op)
EMITTERS: Layer[Callable[[_Body, Step], None]] = Layer(
    "the torch.distributed exporter (shardalg.export.torch_export)",
    fix="register the op's emitter: @EMITTERS.register(op)",
)


@EMITTERS.register(Op.ALL_GATHER)
def _all_gather(b: _Body, s: Step) -> None:
    (t,) = s.inputs
    cur, y = b.var(t), b.var(s.output)
    for d, removed in removed_suffixes(t, s.output).items():
        g, order = b.group(removed)
        b.lines.append(f"{y} = {b.call('_all_gather', f'{cur}, {g}, dim={d}{order}')}")
        cur = y


@EMITTERS.register(Op.REDUCE_SCATTER)
def _reduce_scatter(b: _Body, s: Step) -> None:
    (t,) = s.inputs
    ((d, added),) = appended_suffixes(t, s.output).items()
    g, order = b.group(added)
    b.lines.append(f"{b.var(s.output)} = {b.call('_reduce_scatter', f'{b.var(t)}, {g}, dim={d}{order}')}")


@EMITTERS.register(Op.ALL_REDUCE)
def _all_reduce(b: _Body, s: Step) -> None:
    (t,) = s.inputs
    g, _ = b.group(tuple(a for a in b.mesh.names if a in s.axes))
    b.lines.append(f"{b.var(s.output)} = {b.call('_all_reduce', f'{b.var(t)}, {g}')}")


@EMITTERS.register(Op.ALL_TO_ALL)
def _all_to_all(b: _Body, s: Step) -> None:
    (t,) = s.inputs
    gone = removed_suffixes(t, s.output)
    added = appended_suffixes(t, s.output)
    if len(gone) != 1 or len(added) != 1:
        raise UsageError(f"{step_text(s)}: an AllToAll moves axes from one dim to one other dim")
    ((src, moved),) = gone.items()
    ((dst, _),) = added.items()
    g, order = b.group(moved)
    args = f"{b.var(t)}, {g}, split_dim={dst}, concat_dim={src}{order}"
    b.lines.append(f"{b.var(s.output)} = {b.call('_all_to_all', args)}")


@EMITTERS.register(Op.SLICE)
def _slice(b: _Body, s: Step) -> None:
    (t,) = s.inputs
    if is_zero_pad(s):
        ((d, moved),) = removed_suffixes(t, s.output).items()
        n = b.mesh.group_size(moved)
        b.lines.append(
            f"{b.var(s.output)} = {b.call('_zero_pad', f'{b.var(t)}, mesh, {tuple(moved)!r}, dim={d}, n={n}')}"
        )
        return
    ((d, added),) = appended_suffixes(t, s.output).items()
    n = b.mesh.group_size(added)
    b.lines.append(
        f"{b.var(s.output)} = {b.call('_slice', f'{b.var(t)}, mesh, {tuple(added)!r}, dim={d}, n={n}')}"
    )


@EMITTERS.register(Op.PERMUTE)
def _permute(b: _Body, s: Step) -> None:
    (t,) = s.inputs
    coords = list(itertools.product(*(range(n) for n in b.mesh.shape)))
    rank = {c: r for r, c in enumerate(coords)}
    sources = permute_sources(t, s.output, b.mesh)
    table = [rank[sources[c]] for c in coords]
    b.lines.append(f"{b.var(s.output)} = {b.call('_permute', f'{b.var(t)}, {table!r}')}")


@EMITTERS.register(Op.SHIFT)
def _shift(b: _Body, s: Step) -> None:
    """``Shift_{X,k}``: rank c receives from the rank whose X coordinate is c_X - k (the _permute helper)."""
    (t,) = s.inputs
    (axis,) = s.axes
    at, n = b.mesh.names.index(axis), b.mesh.shape[b.mesh.names.index(axis)]
    assert s.offset is not None and n is not None
    coords = list(itertools.product(*(range(m) for m in b.mesh.shape)))
    rank = {c: r for r, c in enumerate(coords)}
    table = [rank[c[:at] + ((c[at] - s.offset) % n,) + c[at + 1 :]] for c in coords]
    call = b.call("_permute", f"{b.var(t)}, {table!r}")
    b.lines.append(f"{b.var(s.output)} = {call}  # Shift_{{{axis},{s.offset:+d}}}")


@EMITTERS.register(Op.EINSUM)
def _einsum(b: _Body, s: Step) -> None:
    left, right = s.inputs
    spec = einsum_subscripts(left, right, s.output)
    b.lines.append(f"{b.var(s.output)} = torch.einsum({spec!r}, {b.var(left)}, {b.var(right)})")


@EMITTERS.register(
    *(op for op in Op if op.function and op not in (Op.ATTEND, Op.ATTEND_D, Op.DISPATCH, Op.COMBINE))
)
def _function(b: _Body, s: Step) -> None:
    """A function of the notation or a derivative (:mod:`.torch_functions`); not a block of attention."""
    function_lines(b, s)


def _placements_note(t: Tensor, mesh: Mesh) -> str:
    try:
        return placements_source(t, mesh)
    except ShardalgError:
        return "(no DTensor spelling: a dim's axes are not in mesh order)"


def export_torch(
    plan_or_program: object,
    mesh: Mesh | str,
    *,
    sizes: Mapping[str, int] | None = None,
    name: str = "forward",
    dtensor: bool = False,
) -> str:
    """Python source of a module whose ``name(*blocks, mesh)`` runs the plan on this rank's blocks; with
    ``dtensor=True``, whose ``name(*dtensors)`` runs it on DTensors (see :mod:`.torch_dtensor`)."""
    if dtensor:
        return export_dtensor(plan_or_program, as_mesh(mesh), sizes=sizes, name=name)
    m, flow = start(plan_or_program, as_mesh(mesh), sizes)
    body = _Body(flow, m)
    body.emit_steps(EMITTERS)
    body.lines.append("return " + ", ".join(body.var(t) for t in flow.outputs))
    args = ", ".join(body.var(t) for t in flow.inputs)
    shapes = "\n".join(
        f"        {body.var(t)}: {node_text(t)}, DTensor placements {_placements_note(t, m)}"
        for t in flow.inputs
    )
    outs = "\n".join(  # a backward's outputs also say which input each is the gradient of
        f"        {body.var(t)}: {node_text(t)}, DTensor placements {_placements_note(t, m)}"
        + (f"; {g}" if (g := gradient_note(flow, t)) else "")
        for t in flow.outputs
    )
    return f'''"""{generated_by(flow, m)} ({m.devices} ranks, row-major: the last axis fastest).

On every rank, after dist.init_process_group(world_size={m.devices}):
    mesh = make_mesh()
    outputs = {name}({args}{", " if args else ""}mesh)
with each argument this rank's block (an unreduced value: this rank's partial sum).
"""

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

{mesh_source(m)}{helpers_source(body.used)}

def {name}({args}{", " if args else ""}mesh):
    """The plan on this rank's blocks.

    inputs:
{shapes}
    returns:
{outs}
    """
{textwrap.indent(chr(10).join(body.lines), "    ")}
'''
