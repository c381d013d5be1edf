"""The numeric executor: a virtual mesh of numpy buffers on which every plan step is real data movement.

Devices are the coordinates of the mesh in axis order (``itertools.product`` over the sizes, the last
axis fastest); a dim sharded over ``(X, Y)`` puts block ``c_X·|Y| + c_Y`` on device ``c``. This module
holds the mesh, ``shard`` / ``unshard`` and the runner; the data movement of each op lives in
:mod:`shardalg.movement` (the table ``MOVES``), written from first principles as point-to-point receives
between device buffers (an AllGather really concatenates the blocks of its group, a ReduceScatter really
sums and keeps the owned block); nothing ever reassembles the global array and re-cuts it. ``run_plan``
then checks the reassembled output of a plan against the dense einsum of the dense inputs, and counts the
bytes each device received::

    >>> from shardalg.syntax import Dim, Op, Tensor
    >>> A = Tensor("A", (Dim("I"), Dim("J", ("X",))))
    >>> step = Step(Op.ALL_GATHER, (A,), Tensor("A", (Dim("I"), Dim("J"))), axes=("X",))
    >>> run_plan(Plan((A,), (step,), step.output), {"X": 4}).ok
    True

Invariant marks (``{I_X}``) place data like replication; the executor ignores them. Buffers may carry
extra trailing axes after the tensor's dims (every collective passes them through): ``operators`` uses
one trailing axis to push all basis vectors through an op at once.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import prod

import numpy as np

from .errors import AxisUsedTwice, IndivisibleDim, ShapeMismatch, ShardalgError, UsageError
from .mesh import Mesh, as_mesh
from .movement import MOVES, Buffers, Coord, Net, einsum_rule, is_zero_pad, step_error
from .plan import Plan, Step
from .syntax import Op, Tensor

__all__ = [
    "VirtualMesh",
    "ExecutionError",
    "ExecResult",
    "shard",
    "unshard",
    "apply_step",
    "run_plan",
    "simulate",
    "default_sizes",
    "local_shape",
    "dim_extent",
    "is_zero_pad",
]


class ExecutionError(ShardalgError):
    """Buffers contradict their layout: replicas that disagree, a missing device, a step with no input."""

    rule = "execution"


class VirtualMesh:
    """The devices of a numeric mesh and the groups a collective over some axes acts on."""

    def __init__(self, mesh: Mesh | Mapping[str, int] | str) -> None:
        m = as_mesh(mesh)
        if m is None or not m.is_numeric:
            raise UsageError("the executor needs a mesh with numeric axis sizes, e.g. X=4,Y=2")
        self.mesh: Mesh = m
        self.names: tuple[str, ...] = m.names
        self.shape: tuple[int, ...] = m.shape
        self._pos = {n: i for i, n in enumerate(self.names)}
        self.coords: tuple[Coord, ...] = tuple(itertools.product(*(range(s) for s in self.shape)))

    def _index(self, axis: str) -> int:
        if axis not in self._pos:
            self.mesh[axis]  # raises UnknownAxis with the mesh's axes
        return self._pos[axis]

    def size(self, axes: Sequence[str]) -> int:
        return prod(self.shape[self._index(a)] for a in axes)

    def rank(self, c: Coord, axes: Sequence[str]) -> int:
        """Mixed-radix index of device ``c`` over ``axes``, the first axis major."""
        r = 0
        for a in axes:
            i = self._index(a)
            r = r * self.shape[i] + c[i]
        return r

    def group(self, c: Coord, axes: Sequence[str]) -> list[Coord]:
        """The devices that differ from ``c`` only in the coordinates of ``axes``, in rank order over them."""
        idx = [self._index(a) for a in axes]
        members = []
        for vals in itertools.product(*(range(self.shape[i]) for i in idx)):
            g = list(c)
            for i, v in zip(idx, vals, strict=True):
                g[i] = v
            members.append(tuple(g))
        return members

    def __repr__(self) -> str:
        return f"VirtualMesh({self.mesh!r}, devices={len(self.coords)})"


def _vm(mesh: VirtualMesh | Mesh | Mapping[str, int] | str) -> VirtualMesh:
    return mesh if isinstance(mesh, VirtualMesh) else VirtualMesh(mesh)


def _show(t: Tensor) -> str:
    from .printing import text

    return text(t)


def _check_tensor(t: Tensor, vm: VirtualMesh) -> None:
    """Known axes, each used once (a tensor on ``A[I_X, J_X]`` has no consistent blocks)."""
    seen: set[str] = set()
    for a in t.used_axes:
        vm.size([a])  # UnknownAxis
        if a in seen:
            raise AxisUsedTwice(f"mesh axis {a} is used twice in {_show(t)}", span=t.span)
        seen.add(a)


# ---------------------------------------------------------------- sizes and blocks


def dim_extent(dim_label: str, literal: int | None, sizes: Mapping[str, int]) -> int:
    if literal is not None:
        return literal
    n = sizes.get(dim_label)
    if n is None:
        raise UsageError(f"no size for dim {dim_label}: pass sizes={{'{dim_label}': ...}}")
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise UsageError(f"dim {dim_label} needs a positive integer size, not {n!r}")
    return int(n)


def local_shape(t: Tensor, mesh: VirtualMesh | Mesh, sizes: Mapping[str, int]) -> tuple[int, ...]:
    """Each device's block shape; an IndivisibleDim error when a dim does not split evenly."""
    vm = _vm(mesh)
    out = []
    for d in t.dims:
        n, g = dim_extent(d.label, d.size, sizes), vm.size(d.axes)
        if n % g:
            raise IndivisibleDim(f"dim {d.label} = {n} of {_show(t)} does not split into {g} blocks")
        out.append(n // g)
    return tuple(out)


def default_sizes(tensors: Sequence[Tensor], mesh: VirtualMesh | Mesh) -> dict[str, int]:
    """A small size per named dim, divisible by every axis that shards it anywhere in ``tensors``: the
    product of those axes' sizes, times 3 for a dim never sharded, 2 below 8 blocks, 1 from 8 up."""
    vm = _vm(mesh)
    axes: dict[str, set[str]] = {}
    for t in tensors:
        for d in t.dims:
            if d.name is not None:
                axes.setdefault(d.name, set()).update(d.axes)
    out = {}
    for name, used in axes.items():
        g = vm.size(sorted(used))
        out[name] = g * (3 if g == 1 else 2 if g < 8 else 1)
    return out


def _block_key(t: Tensor, vm: VirtualMesh, c: Coord) -> tuple[int, ...]:
    return tuple(vm.rank(c, d.axes) for d in t.dims)


def _global_slices(key: Sequence[int], loc: Sequence[int]) -> tuple[slice, ...]:
    return tuple(slice(b * s, (b + 1) * s) for b, s in zip(key, loc, strict=True))


# ---------------------------------------------------------------- shard / unshard


def shard(
    global_array: np.ndarray, tensor: Tensor, mesh: VirtualMesh | Mesh, rng: np.random.Generator | None = None
) -> Buffers:
    """Cut a dense array into per-device buffers by ``tensor``'s sharding. Replicated and invariant axes get
    copies; along the unreduced axes each block is split into |group| random parts that add up to it."""
    vm, arr = _vm(mesh), np.asarray(global_array)
    _check_tensor(tensor, vm)
    if arr.ndim != len(tensor.dims):
        raise ShapeMismatch(f"{_show(tensor)} has {len(tensor.dims)} dims, the array {arr.ndim}")
    for d, n in zip(tensor.dims, arr.shape, strict=True):
        if d.size is not None and d.size != n:
            raise ShapeMismatch(f"dim {d.label} of {_show(tensor)} has size {d.size}, the array {n}")
    loc = local_shape(tensor, vm, {d.label: n for d, n in zip(tensor.dims, arr.shape, strict=True)})
    rng = rng if rng is not None else np.random.default_rng(0)
    parts_of: dict[tuple[int, ...], list[np.ndarray]] = {}
    n_parts = vm.size(tensor.unreduced)
    out: Buffers = {}
    for c in vm.coords:
        key = _block_key(tensor, vm, c)
        block = arr[_global_slices(key, loc)]
        if n_parts == 1:
            out[c] = block.copy()
            continue
        if key not in parts_of:
            noise = rng.standard_normal((n_parts - 1, *block.shape))
            parts_of[key] = [*noise, block - noise.sum(axis=0)]
        out[c] = parts_of[key][vm.rank(c, tensor.unreduced)].copy()
    return out


def unshard(buffers: Mapping[Coord, np.ndarray], tensor: Tensor, mesh: VirtualMesh | Mesh) -> np.ndarray:
    """Reassemble the dense value: one copy of each block (replicas must agree), summed over the
    unreduced axes. Disagreeing replicas raise ExecutionError: that is how a wrong collective shows."""
    vm = _vm(mesh)
    _check_tensor(tensor, vm)
    if set(buffers) != set(vm.coords):
        raise ExecutionError(f"the buffers of {_show(tensor)} do not cover the {len(vm.coords)} devices")
    rank = len(tensor.dims)
    first = buffers[vm.coords[0]]
    loc = first.shape[:rank]
    if len(loc) != rank or any(b.shape != first.shape for b in buffers.values()):
        raise ExecutionError(f"the devices of {_show(tensor)} hold blocks of different shapes")
    scale = max(1.0, max(float(np.max(np.abs(b), initial=0.0)) for b in buffers.values()))
    reps: dict[tuple[tuple[int, ...], int], Coord] = {}
    for c in vm.coords:
        k = (_block_key(tensor, vm, c), vm.rank(c, tensor.unreduced))
        if k not in reps:
            reps[k] = c
        elif not np.allclose(buffers[c], buffers[reps[k]], rtol=1e-9, atol=1e-12 * scale):
            raise ExecutionError(
                f"devices {reps[k]} and {c} should hold the same block of {_show(tensor)} but do not"
            )
    shape = tuple(s * vm.size(d.axes) for s, d in zip(loc, tensor.dims, strict=True)) + first.shape[rank:]
    total = np.zeros(shape, dtype=first.dtype)
    for (key, _), c in reps.items():
        total[_global_slices(key, loc)] += buffers[c]
    return total


# ---------------------------------------------------------------- one step, a whole plan


def _step_text(step: Step) -> str:
    from .printing import text

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
    vm = _vm(mesh)
    arity = 2 if step.op is Op.EINSUM else 1
    if len(step.inputs) != arity or len(inputs) != arity:
        raise UsageError(f"{step.op.value} takes {arity} input(s)")
    for t in step.inputs:
        _check_tensor(t, vm)
    vm.size(step.output.used_axes)  # the output's legality follows from matching the derived layout
    vm.size(step.axes)
    if step.op is not Op.EINSUM and (not step.axes or len(set(step.axes)) != len(step.axes)):
        raise step_error(step, "a collective names each of its mesh axes once, and at least one")
    bufs = [dict(b) for b in inputs]
    for t, b in zip(step.inputs, bufs, strict=True):
        loc = local_shape(t, vm, sizes)
        if set(b) != set(vm.coords) or any(x.shape[: len(loc)] != loc for x in b.values()):
            raise ExecutionError(f"the buffers given for {_show(t)} are not its {loc} blocks on every device")
    if step.op is not Op.EINSUM:
        (t,) = step.inputs
        if t.dim_names != step.output.dim_names:
            raise step_error(
                step, f"a collective keeps the dims; {_show(step.output)} has others", "shape-mismatch"
            )
    if step.op not in MOVES:
        raise UsageError(f"the executor has no rule for {step.op.value}")
    net = Net()
    out, layout = MOVES[step.op](vm, net, step, *bufs)
    want = (tuple(d.axes for d in step.output.dims), frozenset(step.output.unreduced))
    if layout != want:
        got = Tensor(
            step.output.name,
            tuple(d.with_axes(a) for d, a in zip(step.output.dims, layout[0], strict=True)),
            unreduced=tuple(layout[1]),
        )
        raise step_error(step, f"it produces {_show(got)}, not {_show(step.output)}", rule="shape-mismatch")
    loc = local_shape(step.output, vm, sizes)
    if any(b.shape[: len(loc)] != loc for b in out.values()):  # a guard on the executor itself
        raise ExecutionError(f"{_step_text(step)} produced blocks that are not {loc}")
    return out, net.elements


def _dense(step: Step, values: Sequence[np.ndarray]) -> np.ndarray:
    """The global meaning of a step: collectives are the identity, an einsum is the dense einsum."""
    if step.op is not Op.EINSUM:
        return values[0]
    spec, _ = einsum_rule(step)
    return np.einsum(spec, *values)


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


def run_plan(
    plan: Plan,
    mesh: VirtualMesh | Mesh | Mapping[str, int] | str,
    sizes: Mapping[str, int] | None = None,
    rng: np.random.Generator | None = None,
    inputs: Mapping[Tensor | str, np.ndarray] | None = None,
) -> ExecResult:
    """Run ``plan`` on random (or given) dense inputs, cut by their shardings, and compare the output
    with the dense computation. A step whose input no earlier step produced is an ExecutionError."""
    vm = _vm(mesh)
    rng = rng if rng is not None else np.random.default_rng(0)
    every = [*plan.inputs, *(t for s in plan.steps for t in (*s.inputs, s.output)), plan.output]
    given: dict[Tensor, np.ndarray] = {}
    for t in plan.inputs:
        arr = (inputs or {}).get(t, (inputs or {}).get(t.name or ""))
        if arr is not None:
            try:
                given[t] = np.asarray(arr, dtype=float)
            except (TypeError, ValueError):
                raise UsageError(f"the input for {_show(t)} is not an array of numbers") from None
    dims = default_sizes(every, vm)
    for t, arr in given.items():  # sizes: explicit, else the given arrays', else small defaults
        dims.update((d.label, n) for d, n in zip(t.dims, arr.shape, strict=False) if d.name is not None)
    dims.update(sizes or {})
    dense: dict[Tensor, np.ndarray] = {}
    bufs: dict[Tensor, Buffers] = {}
    for t in plan.inputs:
        shape = tuple(dim_extent(d.label, d.size, dims) for d in t.dims)
        dense[t] = given[t] if t in given else rng.standard_normal(shape)
        if dense[t].shape != shape:
            raise ShapeMismatch(f"the input for {_show(t)} has shape {dense[t].shape}, not {shape}")
        bufs[t] = shard(dense[t], t, vm, rng)
    sent = []
    for n, step in enumerate(plan.steps, 1):
        missing = [t for t in step.inputs if t not in bufs]
        if missing:
            raise ExecutionError(
                f"step {n} ({_step_text(step)}) uses {_show(missing[0])}, which is neither "
                "a plan input nor the output of an earlier step"
            )
        bufs[step.output], elements = apply_step(step, [bufs[t] for t in step.inputs], vm, dims)
        dense[step.output] = _dense(step, [dense[t] for t in step.inputs])
        sent.append(_bytes(elements, step.inputs[0]))
    if plan.output not in bufs:
        raise ExecutionError(f"no step produces the plan's output {_show(plan.output)}")
    expected = dense[plan.output]
    output, problem = None, None
    try:
        output = unshard(bufs[plan.output], plan.output, vm)
    except ExecutionError as err:
        problem = err.message
    err_ = float("inf")
    if output is not None and output.shape == expected.shape:
        err_ = float(np.max(np.abs(output - expected), initial=0.0)) / max(
            1.0, float(np.max(np.abs(expected)))
        )
    return ExecResult(
        plan, problem is None and err_ <= 1e-9, err_, output, expected, tuple(sent), len(vm.coords), problem
    )


def simulate(
    expr_or_plan: object,
    mesh: VirtualMesh | Mesh | Mapping[str, int] | str,
    sizes: Mapping[str, int] | None = None,
    seed: int = 0,
) -> list[ExecResult]:
    """Run a plan, a list of plans, or every plan the planner finds for an expression (text or AST)."""
    if isinstance(expr_or_plan, Plan):
        todo = [expr_or_plan]
    elif isinstance(expr_or_plan, Sequence) and not isinstance(expr_or_plan, str):
        todo = list(expr_or_plan)
    else:
        from .planner import plans  # the planner is imported only when asked for

        todo = list(plans(expr_or_plan, mesh=_vm(mesh).mesh, sizes=sizes))
    return [run_plan(p, mesh, sizes, np.random.default_rng(seed)) for p in todo]
