"""The numeric executor: a virtual mesh of numpy buffers on which every plan step is real data movement.

Devices are the coordinates of the mesh in axis order (``itertools.product`` over the sizes, the last
axis fastest); a dim sharded over ``(X, Y)`` puts block ``c_X·|Y| + c_Y`` on device ``c``. This module
holds the mesh, ``shard`` / ``unshard`` and the runner; the data movement of each op lives in
:mod:`shardalg.numeric.movement` (each op's method registered on ``MOVES``), written from first principles as point-to-point receives
between device buffers (an AllGather really concatenates the blocks of its group, a ReduceScatter really
sums and keeps the owned block); nothing ever reassembles the global array and re-cuts it.

Three parts, so that the data movement can be timed alone: ``place_inputs`` makes (or takes) the dense
inputs and cuts them into device buffers, ``execute_plan`` runs the steps on the buffers (only data
movement and local products) and counts the bytes each device received, and ``run_plan`` does both and
then checks the reassembled output against the dense einsum of the dense inputs::

    >>> from shardalg.notation.syntax import Dim, Op, Tensor
    >>> A = Tensor("A", (Dim("I"), Dim("J", ("X",))))
    >>> step = Step(Op.ALL_GATHER, (A,), Tensor("A", (Dim("I"), Dim("J"))), axes=("X",))
    >>> run_plan(Plan((A,), (step,), step.output), {"X": 4}).ok
    True

Invariant marks (``{I_X}``) place data like replication; the executor ignores them. Buffers may carry
extra trailing axes after the tensor's dims (every collective passes them through): ``operators`` uses
one trailing axis to push all basis vectors through an op at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import prod

import numpy as np

from shardalg import limits
from shardalg.algebra.factors import is_subaxis
from shardalg.algebra.mesh import Mesh, as_mesh
from shardalg.algebra.registry import RECORDS
from shardalg.algebra.subaxes import axes_in, mesh_is_fine, names_subaxes, refine
from shardalg.errors import ShapeMismatch, UsageError
from shardalg.notation.plan import Plan, Step
from shardalg.notation.printing import text
from shardalg.notation.printing.display import pretty_text, short
from shardalg.notation.syntax import Tensor
from shardalg.planning.planner import plans

from . import attention as _attention  # noqa: F401  (registers attention's steps: causal softmax, attend)
from . import functions as _functions  # noqa: F401  (registers the functions' data movement)
from . import routing as _routing  # noqa: F401  (registers a MoE routing's steps: dispatch, combine)
from .devices import (
    Buffers,
    Coord,
    ExecutionError,
    VirtualMesh,
    as_virtual,
    check_tensor,
    default_sizes,
    dim_extent,
    local_shape,
    random_normal,
    shard,
    unshard,
)
from .movement import MOVES, Net, dense_step, is_zero_pad, shift_dense, step_error

__all__ = [
    "VirtualMesh",
    "ExecutionError",
    "ExecResult",
    "Placed",
    "Execution",
    "place_inputs",
    "execute_plan",
    "shard",
    "unshard",
    "apply_step",
    "run_plan",
    "simulate",
    "default_sizes",
    "local_shape",
    "dim_extent",
    "is_zero_pad",
    "shift_dense",
]


# ---------------------------------------------------------------- one step, a whole plan


def _step_text(step: Step) -> str:
    return text(step.statement())


def apply_step(
    step: Step,
    inputs: Sequence[Mapping[Coord, np.ndarray]],
    mesh: VirtualMesh | Mesh,
    sizes: Mapping[str, int],
) -> tuple[Buffers, int]:
    """Run one step on its inputs' buffers. Returns the output buffers and the number of elements the
    devices received from other devices. The op's effect is derived from the input layout and the op,
    then checked against ``step.output``: a step that claims another layout is an error."""
    move = MOVES.lookup(step.op)  # an op the executor has no data movement for is refused first, by name
    vm = as_virtual(mesh)
    rec = RECORDS[step.op]
    arity = rec.operands
    if not rec.takes(len(step.inputs)) or len(inputs) != len(step.inputs):
        raise UsageError(f"{step.op.value} takes {arity} input(s)")
    for t in step.inputs:
        check_tensor(t, vm)
    vm.size(step.output.used_axes)  # the output's legality follows from matching the derived layout
    vm.size(step.axes)
    collective = arity == 1 and not step.op.function
    if collective and (not step.axes or len(set(step.axes)) != len(step.axes)):
        raise step_error(step, "a collective names each of its mesh axes once, and at least one")
    bufs = [dict(b) for b in inputs]
    for t, b in zip(step.inputs, bufs, strict=True):
        loc = local_shape(t, vm, sizes)
        if set(b) != set(vm.coords) or any(x.shape[: len(loc)] != loc for x in b.values()):
            raise ExecutionError(f"the buffers given for {text(t)} are not its {loc} blocks on every device")
    if collective:
        (t,) = step.inputs
        if t.dim_names != step.output.dim_names:
            raise step_error(
                step, f"a collective keeps the dims; {text(step.output)} has others", "shape-mismatch"
            )
    net = Net()
    out, layout = move(vm, net, step, *bufs)
    want = (tuple(d.axes for d in step.output.dims), frozenset(step.output.unreduced))
    if layout != want:
        got = Tensor(
            step.output.name,
            tuple(d.with_axes(a) for d, a in zip(step.output.dims, layout[0], strict=True)),
            unreduced=tuple(layout[1]),
        )
        raise step_error(step, f"it produces {text(got)}, not {text(step.output)}", rule="shape-mismatch")
    loc = local_shape(step.output, vm, sizes)
    if any(b.shape[: len(loc)] != loc for b in out.values()):  # a guard on the executor itself
        raise ExecutionError(f"{_step_text(step)} produced blocks that are not {loc}")
    return out, net.elements


def _bytes(elements: int, t: Tensor) -> int | float:
    b = elements * (t.dtype.bytes if t.dtype is not None else 2)
    return int(b) if b == int(b) else float(b)


@dataclass(frozen=True)
class ExecResult:
    """The outcome of running a plan: the reassembled output against the dense one, and the bytes the
    devices received from each other per step (summed over devices)."""

    plan: Plan
    ok: bool
    max_error: float
    output: np.ndarray | None = field(repr=False)
    expected: np.ndarray = field(repr=False)
    bytes_sent: tuple[int | float, ...] = ()
    devices: int = 1
    problem: str | None = None

    @property
    def total_bytes(self) -> int | float:
        return sum(self.bytes_sent)

    def __repr__(self) -> str:
        head = "ok" if self.ok else "WRONG"
        what = self.plan.note or self.plan.problem()
        return short(
            "ExecResult", f"{head}: max relative error {self.max_error:.1e} on {self.devices} devices; {what}"
        )

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        pretty_text(self, p, cycle)

    def __str__(self) -> str:
        head = "ok" if self.ok else "WRONG"
        lines = [
            f"{head}: max relative error {self.max_error:.1e} on {self.devices} devices; "
            f"{self.total_bytes} bytes received in all"
        ]
        for n, (step, b) in enumerate(zip(self.plan.steps, self.bytes_sent, strict=True), 1):
            lines.append(f"  {n}. {_step_text(step)}  [{b} bytes]")
        if self.problem:
            lines.append(f"  problem: {self.problem}")
        return "\n".join(lines)


@dataclass(frozen=True)
class Placed:
    """A plan's inputs: the sizes of every dim, the dense inputs and their device buffers."""

    sizes: dict[str, int]
    dense: dict[Tensor, np.ndarray]
    buffers: dict[Tensor, Buffers]


@dataclass(frozen=True)
class Execution:
    """What ``execute_plan`` leaves: the buffers of every tensor the plan made (and its inputs'), and the
    bytes the devices received from each other in each step (summed over devices)."""

    buffers: dict[Tensor, Buffers]
    bytes_sent: tuple[int | float, ...]


def _require_room(tensors: Sequence[Tensor], vm: VirtualMesh, dims: Mapping[str, int]) -> None:
    """Refuse up front (the elements limit) a plan one of whose values would take too many elements on all
    the devices together: its global elements times the copies the mesh keeps (replicas and partial sums)."""
    for t in dict.fromkeys(tensors):
        extents = [dim_extent(d.label, d.size, dims) for d in t.dims]
        sharding = vm.size([a for d in t.dims for a in d.axes])
        held = prod(extents) * len(vm.coords) // max(1, sharding)
        limits.require("elements", held, f"{text(t)} on {len(vm.coords)} devices")


def _seeded(seed: object) -> np.random.Generator:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise UsageError(f"a seed is a non-negative integer, not {seed!r}")
    return np.random.default_rng(seed)


def place_inputs(
    plan: Plan,
    mesh: VirtualMesh | Mesh | Mapping[str, int] | str,
    sizes: Mapping[str, int] | None = None,
    rng: np.random.Generator | None = None,
    inputs: Mapping[Tensor | str, np.ndarray] | None = None,
) -> Placed:
    """Random (or given) dense inputs of ``plan`` and their buffers, cut by their shardings. Sizes:
    ``sizes``, else the given arrays', else small defaults that every sharding of the plan divides."""
    vm = as_virtual(mesh)
    rng = rng if rng is not None else np.random.default_rng(0)
    every = [*plan.inputs, *(t for s in plan.steps for t in (*s.inputs, s.output)), plan.output]
    given: dict[Tensor, np.ndarray] = {}
    for t in plan.inputs:
        arr = (inputs or {}).get(t, (inputs or {}).get(t.name or ""))
        if arr is not None:
            try:
                given[t] = np.asarray(arr, dtype=float)
            except (TypeError, ValueError):
                raise UsageError(f"the input for {text(t)} is not an array of numbers") from None
    dims = default_sizes(every, vm)
    for t, arr in given.items():
        dims.update((d.label, n) for d, n in zip(t.dims, arr.shape, strict=False) if d.name is not None)
    dims.update(sizes or {})
    _require_room(every, vm, dims)
    dense: dict[Tensor, np.ndarray] = {}
    bufs: dict[Tensor, Buffers] = {}
    for t in plan.inputs:
        shape = tuple(dim_extent(d.label, d.size, dims) for d in t.dims)
        dense[t] = given[t] if t in given else random_normal(shape, rng)
        if dense[t].shape != shape:
            raise ShapeMismatch(f"the input for {text(t)} has shape {dense[t].shape}, not {shape}")
        bufs[t] = shard(dense[t], t, vm, rng)
    return Placed(dims, dense, bufs)


def execute_plan(
    plan: Plan,
    mesh: VirtualMesh | Mesh | Mapping[str, int] | str,
    buffers: Mapping[Tensor, Buffers],
    sizes: Mapping[str, int],
) -> Execution:
    """Run the steps of ``plan`` on the devices' buffers of its inputs: data movement and local products
    only (no dense reference, no check). A step whose input no earlier step produced is an ExecutionError."""
    vm = as_virtual(mesh)
    bufs = dict(buffers)
    sent = []
    for n, step in enumerate(plan.steps, 1):
        missing = [t for t in step.inputs if t not in bufs]
        if missing:
            raise ExecutionError(
                f"step {n} ({_step_text(step)}) uses {text(missing[0])}, which is neither "
                "a plan input nor the output of an earlier step"
            )
        bufs[step.output], elements = apply_step(step, [bufs[t] for t in step.inputs], vm, sizes)
        sent.append(_bytes(elements, step.inputs[0]))
    if plan.output not in bufs:
        raise ExecutionError(f"no step produces the plan's output {text(plan.output)}")
    return Execution(bufs, tuple(sent))


def dense_result(
    plan: Plan, dense_inputs: Mapping[Tensor, np.ndarray], mesh: VirtualMesh | Mesh | Mapping[str, int] | str
) -> np.ndarray:
    """The plan's output computed on whole arrays: collectives are the identity, a product the einsum, a
    Shift rolls blocks (so it needs the mesh)."""
    vm = as_virtual(mesh)
    dense = dict(dense_inputs)
    for step in plan.steps:
        if all(t in dense for t in step.inputs):
            dense[step.output] = dense_step(step, [dense[t] for t in step.inputs], vm)
    return dense[plan.output]


def run_plan(
    plan: Plan,
    mesh: VirtualMesh | Mesh | Mapping[str, int] | str,
    sizes: Mapping[str, int] | None = None,
    rng: np.random.Generator | None = None,
    inputs: Mapping[Tensor | str, np.ndarray] | None = None,
) -> ExecResult:
    """Run ``plan`` on random (or given) dense inputs, cut by their shardings (``place_inputs``, then
    ``execute_plan``), and compare the output with the dense computation."""
    vm = mesh if isinstance(mesh, VirtualMesh) else VirtualMesh(as_mesh(mesh))
    if names_subaxes(plan) and not mesh_is_fine(vm.mesh, plan):
        # run on the mesh refined into the factors the plan names: a sub-axis's devices are those that
        # differ only in its digit of the parent's coordinate (major factor first, as Shardy numbers them)
        for a in dict.fromkeys(axes_in(plan)):
            vm.mesh[a]  # noqa: B018 -- an UnknownAxis that says why (Y:(1)4 of Y=4 is Y: write Y)
        r = refine(vm.mesh, [a for a in axes_in(plan) if is_subaxis(a)])
        if r.trivial:  # a guard on the runner itself: refining by nothing would run this again, forever
            raise ExecutionError("the plan's sub-axes refine no axis of the mesh")
        given = (
            None
            if inputs is None
            else {r.expand(k) if isinstance(k, Tensor) else k: v for k, v in inputs.items()}
        )
        return run_plan(r.expand(plan), r.fine, sizes, rng, given)
    placed = place_inputs(plan, vm, sizes, rng, inputs)
    run = execute_plan(plan, vm, placed.buffers, placed.sizes)
    expected = dense_result(plan, placed.dense, vm)
    output, problem = None, None
    try:
        output = unshard(run.buffers[plan.output], plan.output, vm)
    except ExecutionError as err:
        problem = err.message
    err_ = float("inf")
    if output is not None and output.shape == expected.shape:
        err_ = float(np.max(np.abs(output - expected), initial=0.0)) / max(
            1.0, float(np.max(np.abs(expected)))
        )
    ok = problem is None and err_ <= 1e-9
    return ExecResult(plan, ok, err_, output, expected, run.bytes_sent, len(vm.coords), problem)


def simulate(
    expr_or_plan: object,
    mesh: VirtualMesh | Mesh | Mapping[str, int] | str,
    sizes: Mapping[str, int] | None = None,
    seed: int = 0,
) -> list[ExecResult]:
    """Run a plan, a list of plans, or every plan the planner finds for an expression (text or AST)."""
    vm = mesh if isinstance(mesh, VirtualMesh) else VirtualMesh(as_mesh(mesh))
    if isinstance(expr_or_plan, Plan):
        todo = [expr_or_plan]
    elif isinstance(expr_or_plan, Sequence) and not isinstance(expr_or_plan, str):
        todo = list(expr_or_plan)
    else:
        todo = list(plans(expr_or_plan, mesh=vm.mesh, sizes=sizes))
    rngs = [_seeded(seed) for _ in todo]
    return [run_plan(p, vm, sizes, rng) for p, rng in zip(todo, rngs, strict=True)]
