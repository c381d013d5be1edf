"""A plan as DTensor code: ``distribute_tensor`` with the plan's placements, each collective a ``redistribute``.

    >>> print(export_torch(plan, Mesh(X=4, Y=2), dtensor=True))

The generated module has ``make_mesh()`` (``init_device_mesh`` with the mesh's axis names), ``distribute(*xs,
mesh)`` (global tensors to DTensors with the inputs' ``Shard``/``Replicate``/``Partial`` placements) and
``forward(*dtensors)``, which runs the plan's steps:

| shardalg | DTensor |
|---|---|
| a collective, Slice, Permute | ``x.redistribute(mesh, placements of the result)`` |
| Slice to unreduced (S -> U) | the block zero-padded in place, ``DTensor.from_local(..., [.., Partial(), ..])`` |
| local einsum | ``torch.einsum`` on ``to_local()`` blocks, ``DTensor.from_local`` with the result's placements |
| a function, ``+``, a derivative | the rank form's lines (:mod:`.torch_functions`) on the ``to_local()`` blocks, the same |

Each step's placements are the plan's (``A[I_X, J]{U_Y}`` on ``(X, Y)`` is ``[Shard(0), Partial()]``), so the
redistributions are the plan's and not ones DTensor's sharding propagation would choose. A tensor whose
dim is sharded over axes out of mesh order has no placements (DTensor cuts mesh dim 0 major): the export
then raises a UsageError naming it.

Imports: the export package's siblings (emit, flow, specs, helpers) and the layers below.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.registry import Layer
from shardalg.errors import UsageError
from shardalg.notation.plan import Step
from shardalg.notation.syntax import Op, Tensor

from .emit import Body, einsum_subscripts, generated_by, is_zero_pad, removed_suffixes, start
from .flow import Flow, gradient_note, node_text
from .specs import placements_source
from .torch_functions import function_lines
from .torch_helpers import helpers_source, mesh_source

__all__ = ["export_dtensor"]


class _Body(Body):
    def __init__(self, flow: Flow, mesh: Mesh) -> None:
        super().__init__(flow, mesh)
        self.used: set[str] = set()

    def placements(self, t: Tensor) -> str:
        try:
            return placements_source(t, self.mesh)
        except UsageError as err:
            raise UsageError(f"no DTensor form for {node_text(t)}: {err.message}", fix=err.fix) from None


# op -> its emitter: the lines of the generated function that run one step (one method per op)
EMITTERS: Layer[Callable[[_Body, Step], None]] = Layer(
    "the DTensor exporter (shardalg.export.torch_dtensor)",
    fix="register the op's emitter: @EMITTERS.register(op)",
)


@EMITTERS.register(Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALL_REDUCE, Op.ALL_TO_ALL, Op.PERMUTE)
def _redistribute(b: _Body, s: Step) -> None:
    (t,) = s.inputs
    b.lines.append(f"{b.var(s.output)} = {b.var(t)}.redistribute(mesh, {b.placements(s.output)})")


@EMITTERS.register(Op.SLICE)
def _slice(b: _Body, s: Step) -> None:
    if not is_zero_pad(s):
        _redistribute(b, s)
        return
    (t,) = s.inputs
    ((d, moved),) = removed_suffixes(t, s.output).items()
    n = b.mesh.group_size(moved)
    b.used.add("_zero_pad")
    local = f"_zero_pad({b.var(t)}.to_local(), mesh, {tuple(moved)!r}, dim={d}, n={n})"
    b.lines.append(
        f"{b.var(s.output)} = DTensor.from_local({local}, mesh, {b.placements(s.output)}, run_check=False)"
    )


@EMITTERS.register(Op.RENAME)
def _rename(b: _Body, s: Step) -> None:
    """The same DTensor: its dim keeps its place (and its placements), only the notation's name changes."""
    (t,) = s.inputs
    b.lines.append(f"{b.var(s.output)} = {b.var(t)}")


@EMITTERS.register(Op.EINSUM)
def _einsum(b: _Body, s: Step) -> None:
    left, right = s.inputs
    spec = einsum_subscripts(left, right, s.output)
    local = f"torch.einsum({spec!r}, {b.var(left)}.to_local(), {b.var(right)}.to_local())"
    b.lines.append(
        f"{b.var(s.output)} = DTensor.from_local({local}, mesh, {b.placements(s.output)}, run_check=False)"
    )


class _Blocks:
    """A function step as the rank form writes it (:func:`.torch_functions.function_lines`): each operand is
    its DTensor's local block (``_x0``, ``_x1``), the result a local tensor ``_y`` that the emitter wraps with
    the result's placements. Names that start with ``_`` are no tensor's variable (see ``flow._identifier``)."""

    OUT = "<result>"  # the result's name in the step the forms read: never an operand's (dX + dX' -> dX)

    def __init__(self, b: _Body, operands: Mapping[Tensor, str]) -> None:
        self.lines, self.mesh, self._b, self._operands = b.lines, b.mesh, b, operands

    def var(self, t: Tensor) -> str:
        return "_y" if t.name == self.OUT else self._operands[t]

    def call(self, helper: str, args: str) -> str:
        self._b.used.add(helper)
        return f"{helper}({args})"

    def group(self, axes: Sequence[str]) -> tuple[str, str]:
        group = tuple(a for a in self.mesh.names if a in axes)
        src = f"mesh.get_group({group[0]!r})" if len(group) == 1 else self.call("_group", f"mesh, {group!r}")
        return src, ""


@EMITTERS.register(
    *(
        op
        for op in Op
        if op.function and op not in (Op.RENAME, Op.ATTEND, Op.ATTEND_D, Op.DISPATCH, Op.COMBINE)
    )
)
def _function(b: _Body, s: Step) -> None:
    """A function of the notation, ``+`` or a derivative: the rank form's lines on the local blocks (over a
    sharded dim its statistics all-reduced over the dim's axes), the result with the plan's placements
    (``Partial`` for a sum over a sharded dim)."""
    operands = {t: f"_x{k}" for k, t in enumerate(dict.fromkeys(s.inputs))}
    for t, local in operands.items():
        b.lines.append(f"{local} = {b.var(t)}.to_local()")
    function_lines(_Blocks(b, operands), replace(s, output=replace(s.output, name=_Blocks.OUT)))
    b.lines.append(
        f"{b.var(s.output)} = DTensor.from_local(_y, mesh, {b.placements(s.output)}, run_check=False)"
    )


def export_dtensor(
    plan_or_program: object,
    mesh: Mesh,
    *,
    sizes: Mapping[str, int] | None = None,
    name: str = "forward",
) -> str:
    """Python source of a module whose ``name(*dtensors)`` runs the plan with DTensor redistributions."""
    m, flow = start(plan_or_program, mesh, sizes)
    body = _Body(flow, m)
    body.emit_steps(EMITTERS)
    body.lines.append("return " + ", ".join(body.var(t) for t in flow.outputs))
    args = ", ".join(body.var(t) for t in flow.inputs)
    ins = [body.placements(t) for t in flow.inputs]
    partial = any("Partial()" in p for p in ins)
    if partial:
        body.used.add("_distribute")
    spread = "_distribute" if partial else "distribute_tensor"
    doc_in = "\n".join(
        f"        {body.var(t)}: {node_text(t)}, placements {p}"
        for t, p in zip(flow.inputs, ins, strict=True)
    )
    doc_out = "\n".join(  # a backward's outputs also say which input each is the gradient of
        f"        {body.var(t)}: {node_text(t)}, placements {body.placements(t)}"
        + (f"; {g}" if (g := gradient_note(flow, t)) else "")
        for t in flow.outputs
    )
    first = body.var(flow.inputs[0])
    # the functions' statistics all-reduced on the local blocks (the helpers call torch.distributed)
    dist = "import torch.distributed as dist\n" if body.used & {"_all_reduce", "_all_reduce_max"} else ""
    return f'''"""{generated_by(flow, m)} ({m.devices} ranks, row-major: the last axis fastest), as DTensors.

On every rank, after dist.init_process_group(world_size={m.devices}):
    mesh = make_mesh()
    outputs = {name}(*distribute({args}, mesh=mesh))
with each argument the global tensor (the same on every rank); outputs are DTensors (.full_tensor()).
"""

import torch
{dist}from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

{mesh_source(m)}

IN_PLACEMENTS = ({", ".join(ins)}{"," if len(ins) == 1 else ""})
{helpers_source(body.used)}

def distribute({args}, mesh):
    """The global tensors as DTensors with the plan's input placements."""
    return tuple({spread}(x, mesh, p) for x, p in zip(({args}{"," if len(ins) == 1 else ""}), IN_PLACEMENTS))


def {name}({args}):
    """The plan on DTensors: each collective a redistribute to the placements the plan gives its result.

    inputs:
{doc_in}
    returns:
{doc_out}
    """
    mesh = {first}.device_mesh
{textwrap.indent(chr(10).join(body.lines), "    ")}
'''
