"""The virtual mesh: devices as coordinates, the groups a collective acts on, and a dense array cut into
per-device numpy buffers by a sharding (``shard``) and put back together (``unshard``).

Devices are the coordinates of the mesh in axis order (``itertools.product`` over the sizes, the last
axis fastest); a dim sharded over ``(X, Y)`` puts block ``c_X·|Y| + c_Y`` on device ``c``. The data
movement of each op (:mod:`.movement`) and the runner (:mod:`.execute`) build on this module.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from math import prod

import numpy as np

from shardalg import limits
from shardalg.algebra.mesh import Mesh, a_mesh
from shardalg.errors import AxisUsedTwice, IndivisibleDim, ShapeMismatch, ShardalgError, UsageError
from shardalg.notation.printing import text
from shardalg.notation.syntax import Tensor

from .kernels import allocate, freeze

__all__ = [
    "Coord",
    "Buffers",
    "VirtualMesh",
    "ExecutionError",
    "shard",
    "unshard",
    "default_sizes",
    "local_shape",
    "dim_extent",
    "as_virtual",
    "check_tensor",
    "random_normal",
]

Coord = tuple[int, ...]
Buffers = dict[Coord, np.ndarray]


class ExecutionError(ShardalgError):
    """Buffers contradict their layout: replicas that disagree, a missing device, a step with no input."""

    rule = "execution"


class VirtualMesh:
    """The devices of a numeric mesh and the groups a collective over some axes acts on."""

    def __init__(self, mesh: Mesh) -> None:
        m = a_mesh(mesh, "the executor")  # the public functions (run_plan, simulate) read text
        if not m.is_numeric:
            raise UsageError("the executor needs a mesh with numeric axis sizes, e.g. X=4,Y=2")
        limits.require("devices", m.devices, f"the mesh {', '.join(f'{a.name}={a.size}' for a in m)}")
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


def as_virtual(mesh: VirtualMesh | Mesh) -> VirtualMesh:
    return mesh if isinstance(mesh, VirtualMesh) else VirtualMesh(mesh)


def check_tensor(t: Tensor, vm: VirtualMesh) -> None:
    """Known axes, each used once (a tensor on ``A[I_X, J_X]`` has no consistent blocks)."""
    seen: set[str] = set()
    for a in t.used_axes:
        vm.size([a])  # UnknownAxis
        if a in seen:
            raise AxisUsedTwice(f"mesh axis {a} is used twice in {text(t)}", span=t.span)
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
    vm = as_virtual(mesh)
    out = []
    for d in t.dims:
        n, g = dim_extent(d.label, d.size, sizes), vm.size(d.axes)
        if n % g:
            raise IndivisibleDim(f"dim {d.label} = {n} of {text(t)} does not split into {g} blocks")
        out.append(n // g)
    return tuple(out)


def default_sizes(tensors: Sequence[Tensor], mesh: VirtualMesh | Mesh) -> dict[str, int]:
    """A small size per named dim, divisible by every axis that shards it anywhere in ``tensors``: the
    product of those axes' sizes, times 3 for a dim never sharded, 2 below 8 blocks, 1 from 8 up."""
    vm = as_virtual(mesh)
    axes: dict[str, set[str]] = {}
    for t in tensors:
        for d in t.dims:
            if d.name is not None:
                axes.setdefault(d.name, set()).update(d.axes)
    out = {}
    for name, used in axes.items():
        g = prod(vm.mesh[a].size for a in used)  # a sub-axis too (Y:(1)2 of Y=4: 2)
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
    """Cut a dense array into per-device buffers by ``tensor``'s sharding. Along the unreduced axes each
    block is split into |group| random parts that add up to it. Each distinct block (or part) is copied
    once; the devices that replicate it (replicated and invariant axes) share that read-only copy."""
    vm, arr = as_virtual(mesh), np.asarray(global_array)
    check_tensor(tensor, vm)
    if arr.ndim != len(tensor.dims):
        raise ShapeMismatch(f"{text(tensor)} has {len(tensor.dims)} dims, the array {arr.ndim}")
    for d, n in zip(tensor.dims, arr.shape, strict=True):
        if d.size is not None and d.size != n:
            raise ShapeMismatch(f"dim {d.label} of {text(tensor)} has size {d.size}, the array {n}")
    loc = local_shape(tensor, vm, {d.label: n for d, n in zip(tensor.dims, arr.shape, strict=True)})
    rng = rng if rng is not None else np.random.default_rng(0)
    parts_of: dict[tuple[int, ...], list[np.ndarray]] = {}
    n_parts = vm.size(tensor.unreduced)
    out: Buffers = {}
    for c in vm.coords:
        key = _block_key(tensor, vm, c)
        if key not in parts_of:
            block = arr[_global_slices(key, loc)]
            if n_parts == 1:
                parts = [freeze(_copy(block))]
            else:  # n-1 random parts, and the block minus their sum
                parts = [freeze(random_normal(block.shape, rng)) for _ in range(n_parts - 1)]
                last = _copy(block, np.result_type(block, np.float64))
                for p in parts:
                    np.subtract(last, p, out=last)
                parts.append(freeze(last))
            parts_of[key] = parts
        out[c] = parts_of[key][vm.rank(c, tensor.unreduced) if n_parts > 1 else 0]
    return out


def _copy(a: np.ndarray, dtype: np.dtype | None = None) -> np.ndarray:
    o = allocate(a.shape, a.dtype if dtype is None else dtype)
    np.copyto(o, a)
    return o


def random_normal(shape: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    """Standard normal numbers in a buffer from ``allocate``."""
    out = allocate(shape, np.float64)
    rng.standard_normal(out=out)
    return out


def unshard(buffers: Mapping[Coord, np.ndarray], tensor: Tensor, mesh: VirtualMesh | Mesh) -> np.ndarray:
    """Reassemble the dense value: one copy of each block (replicas must agree), summed over the
    unreduced axes. Disagreeing replicas raise ExecutionError: that is how a wrong collective shows."""
    vm = as_virtual(mesh)
    check_tensor(tensor, vm)
    if set(buffers) != set(vm.coords):
        raise ExecutionError(f"the buffers of {text(tensor)} do not cover the {len(vm.coords)} devices")
    rank = len(tensor.dims)
    first = buffers[vm.coords[0]]
    loc = first.shape[:rank]
    if len(loc) != rank or any(b.shape != first.shape for b in buffers.values()):
        raise ExecutionError(f"the devices of {text(tensor)} hold blocks of different shapes")
    scale = max(1.0, max(float(np.max(np.abs(b), initial=0.0)) for b in buffers.values()))
    reps: dict[tuple[tuple[int, ...], int], Coord] = {}
    for c in vm.coords:
        k = (_block_key(tensor, vm, c), vm.rank(c, tensor.unreduced))
        if k not in reps:
            reps[k] = c
        elif buffers[c] is not buffers[reps[k]] and not np.allclose(
            buffers[c], buffers[reps[k]], rtol=1e-9, atol=1e-12 * scale
        ):
            raise ExecutionError(
                f"devices {reps[k]} and {c} should hold the same block of {text(tensor)} but do not"
            )
    shape = tuple(s * vm.size(d.axes) for s, d in zip(loc, tensor.dims, strict=True)) + first.shape[rank:]
    total = allocate(shape, first.dtype, zero=True)
    for (key, _), c in reps.items():
        total[_global_slices(key, loc)] += buffers[c]
    return total
