"""Every op of a plan as data movement between device buffers: one function an op, registered on ``MOVES``.

Each function takes the virtual mesh, the network that counts received elements, the step and the input
buffers (one per operand, keyed by device coordinate), and returns the output buffers together with the
layout the op *derives* from its input, ``(axes per dim, unreduced axes)``. The runner in
:mod:`shardalg.numeric.execute` checks that layout against the step's claimed output. Collectives are written from
first principles as point-to-point receives (``Net.recv``); nothing reassembles the global array. Buffers
may carry extra trailing axes after the tensor's dims; every op passes them through.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod

import numpy as np

from shardalg.algebra.registry import RECORDS, Layer
from shardalg.errors import IndivisibleDim
from shardalg.notation.plan import Step
from shardalg.notation.printing import text
from shardalg.notation.syntax import Op, Tensor

from .devices import Buffers, Coord, VirtualMesh
from .kernels import allocate, contiguous, contract, freeze, readonly_view
from .steprules import Layout, einsum_rule, step_error

__all__ = [
    "MOVES",
    "Buffers",
    "Coord",
    "Layout",
    "Move",
    "Net",
    "einsum_rule",
    "is_zero_pad",
    "step_error",
    "shift_dense",
    "send_dense",
]

Move = Callable[..., tuple[Buffers, Layout]]  # (vm, net, step, *input buffers) -> (buffers, derived layout)

# op -> its data movement. Collectives are the identity on global values and change only the layout, but a
# Shift, which rolls the blocks along the dim its axis shards; the local product is the dense einsum of each
# device's blocks.
MOVES: Layer[Move] = Layer(
    "the numpy executor (shardalg.numeric)", fix="register the op's data movement: @MOVES.register(op)"
)

Dense = Callable[[Step, Sequence[np.ndarray], VirtualMesh], np.ndarray]  # (step, input values, vm) -> value
# op -> the global value a step of it makes, for an op that is not the identity on global values (its record's
# ``identity_on_values``): the dense computation a plan's result is checked against
DENSE: Layer[Dense] = Layer(
    "the dense computation (shardalg.numeric)", fix="register the op's global meaning: @DENSE.register(op)"
)


def dense_step(step: Step, values: Sequence[np.ndarray], vm: VirtualMesh) -> np.ndarray:
    """The global meaning of a step: a collective is the identity, a Shift rolls the blocks along the dim its
    axis shards, an einsum is the dense einsum."""
    if RECORDS[step.op].identity_on_values:
        return values[0]
    return DENSE.lookup(step.op)(step, values, vm)


# ---------------------------------------------------------------- blocks, receives, errors


def _piece(rank: int, pos: int, j: int, parts: int, extent: int) -> tuple[slice, ...]:
    """Index of piece ``j`` of ``parts`` along local dim ``pos`` (of ``extent``) in a rank-``rank`` buffer."""
    if extent % parts:
        raise IndivisibleDim(f"a local block of {extent} does not split into {parts} pieces")
    s = extent // parts
    return tuple(slice(j * s, (j + 1) * s) if i == pos else slice(None) for i in range(rank))


class Net:
    """Point-to-point receives; counts the elements a device gets from another device.

    A receive hands over the sender's (read-only) buffer or a view of it; the op writes what it keeps into
    buffers it allocates. Devices whose results are built from the same received buffers in the same
    places (the members of a gather group, the replicas of a product) share one result: each still
    receives, and is counted, on its own."""

    def __init__(self) -> None:
        self.elements = 0

    def recv(self, dst: Coord, src: Coord, data: np.ndarray, lead: int) -> np.ndarray:
        if dst != src:
            self.elements += prod(data.shape[:lead])
        return data


def _dim_pos(step: Step, t: Tensor, name: str | None) -> int:
    if name is None:
        raise step_error(step, f"{step.op.value} needs a target dim")
    for i, d in enumerate(t.dims):
        if d.label == name:
            return i
    raise step_error(step, f"{text(t)} has no dim {name}", rule="shape-mismatch")


def _minor_suffix(step: Step, t: Tensor, axes: Sequence[str]) -> dict[int, tuple[str, ...]]:
    """For each dim holding some of ``axes``: those axes, which must be its minor-most ones."""
    found: dict[int, tuple[str, ...]] = {}
    for i, d in enumerate(t.dims):
        mine = tuple(a for a in d.axes if a in axes)
        if mine and d.axes[len(d.axes) - len(mine) :] != mine:
            raise step_error(
                step,
                f"{', '.join(mine)} must be the minor-most axes of dim {d.label} "
                f"(it is sharded over {''.join(d.axes)}); move them with a Permute first",
            )
        if mine:
            found[i] = mine
    missing = [a for a in axes if not any(a in m for m in found.values())]
    if missing:
        raise step_error(step, f"{', '.join(missing)} does not shard {text(t)}")
    return found


# ---------------------------------------------------------------- the collectives


@MOVES.register(Op.ALL_GATHER)  # [I_X] -> [I]
def _all_gather(vm: VirtualMesh, net: Net, step: Step, bufs: Buffers) -> tuple[Buffers, Layout]:
    """``AllGather_X: [I_X] -> [I]``: each device concatenates the blocks of its group along the dims the
    axes leave. The members of a group receive the same blocks into the same places: they share the
    concatenation."""
    (t,) = step.inputs
    found = _minor_suffix(step, t, step.axes)
    rank, out = len(t.dims), {}
    built: dict[tuple[int, ...], np.ndarray] = {}
    for c in vm.coords:
        members = vm.group(c, step.axes)
        got = [net.recv(c, g, bufs[g], rank) for g in members]
        key = tuple(id(b) for b in got)
        if key in built:
            out[c] = built[key]
            continue
        shape = list(got[0].shape)
        for i, mine in found.items():
            shape[i] *= vm.size(mine)
        o = allocate(shape, np.result_type(*got))
        for g, b in zip(members, got, strict=True):
            at = tuple(
                slice(vm.rank(g, found[i]) * s, (vm.rank(g, found[i]) + 1) * s) if i in found else slice(None)
                for i, s in enumerate(b.shape[:rank])
            )
            o[at] = b
        out[c] = built[key] = freeze(o)
    dims = tuple(d.axes[: len(d.axes) - len(found.get(i, ()))] for i, d in enumerate(t.dims))
    return out, (dims, frozenset(t.unreduced))


def _sum_into(o: np.ndarray, parts: Sequence[np.ndarray]) -> np.ndarray:
    """``o = parts[0] + parts[1] + ...``, in that order, in place."""
    np.copyto(o, parts[0])
    for p in parts[1:]:
        np.add(o, p, out=o)
    return o


def _need_unreduced(step: Step, t: Tensor) -> None:
    bad = [a for a in step.axes if a not in t.unreduced]
    if bad:
        raise step_error(
            step, f"{', '.join(bad)} is not unreduced in {text(t)}; only a {{U_..}} value is summed"
        )


@MOVES.register(Op.REDUCE_SCATTER)  # [I]{U_X} -> [I_X]
def _reduce_scatter(vm: VirtualMesh, net: Net, step: Step, bufs: Buffers) -> tuple[Buffers, Layout]:
    """``ReduceScatter_{X,I}: [I]{U_X} -> [I_X]``: each device sums its group's partials of the block it
    comes to own."""
    (t,) = step.inputs
    _need_unreduced(step, t)
    if step.dim is not None:
        added = {_dim_pos(step, t, step.dim): tuple(step.axes)}
    else:  # a multi-dim ReduceScatter (the transpose of AllGather_XY([B_X, D_Y])): placement from the output
        added = {}
        for i, (d, e) in enumerate(zip(t.dims, step.output.dims, strict=False)):
            tail = e.axes[len(d.axes) :]
            if e.axes[: len(d.axes)] == d.axes and tail and set(tail) <= set(step.axes):
                added[i] = tail
        if sorted(a for tail in added.values() for a in tail) != sorted(step.axes):
            raise step_error(step, "without a target dim the output must append each axis to one dim")
    rank, out = len(t.dims), {}
    for c in vm.coords:
        src = bufs[c]
        at = tuple(
            _piece(rank, i, vm.rank(c, added[i]), vm.size(added[i]), src.shape[i])[i]
            if i in added
            else slice(None)
            for i in range(rank)
        )
        got = [net.recv(c, g, bufs[g][at], rank) for g in vm.group(c, step.axes)]
        out[c] = freeze(_sum_into(allocate(got[0].shape, np.result_type(*got)), got))
    dims = tuple(d.axes + added.get(i, ()) for i, d in enumerate(t.dims))
    return out, (dims, frozenset(t.unreduced) - set(step.axes))


@MOVES.register(Op.ALL_REDUCE)  # [I]{U_X} -> [I]
def _all_reduce(vm: VirtualMesh, net: Net, step: Step, bufs: Buffers) -> tuple[Buffers, Layout]:
    """``AllReduce_X: [I]{U_X} -> [I]``. Ring-style: each member reduces one chunk of the flattened buffer,
    then every member gathers the reduced chunks (ReduceScatter + AllGather, 2·(G-1)/G of the buffer per
    device). The members gather the same chunks: they share the reduced buffer."""
    (t,) = step.inputs
    _need_unreduced(step, t)
    rank, out = len(t.dims), {}
    for c in vm.coords:
        if vm.rank(c, step.axes) != 0:
            continue
        members = vm.group(c, step.axes)
        shape = bufs[c].shape
        flat = {g: contiguous(bufs[g]).reshape((-1, *bufs[g].shape[rank:])) for g in members}
        o = allocate(shape, np.result_type(*flat.values()))
        reduced = o.reshape((-1, *shape[rank:]))
        n, parts = reduced.shape[0], len(members)
        edges = [n * k // parts for k in range(parts + 1)]
        for k, owner in enumerate(members):
            chunk = slice(edges[k], edges[k + 1])
            _sum_into(reduced[chunk], [net.recv(owner, g, flat[g][chunk], 1) for g in members])
        freeze(o)
        for g in members:
            for k, owner in enumerate(members):
                net.recv(g, owner, reduced[edges[k] : edges[k + 1]], 1)
            out[g] = o
    return out, (tuple(d.axes for d in t.dims), frozenset(t.unreduced) - set(step.axes))


@MOVES.register(Op.ALL_TO_ALL)  # [I_X, J] -> [I, J_X]
def _all_to_all(vm: VirtualMesh, net: Net, step: Step, bufs: Buffers) -> tuple[Buffers, Layout]:
    """``AllToAll_{X,J}: [I_X, J] -> [I, J_X]``: the axes move from one dim to another; each device sends
    every group member the piece of its block that member will own."""
    (t,) = step.inputs
    to = _dim_pos(step, t, step.dim)
    found = _minor_suffix(step, t, step.axes)
    if len(found) != 1 or to in found:
        raise step_error(step, f"the axes must all shard one dim other than {step.dim}")
    ((frm, held),) = found.items()  # held: the axes in d' order; they land on d in the step's order
    moved = tuple(step.axes)
    rank, parts, out = len(t.dims), vm.size(moved), {}
    for c in vm.coords:
        src = bufs[c]
        shape = list(src.shape)
        shape[frm] *= parts
        shape[to] //= parts
        o = allocate(shape, src.dtype)
        mine = _piece(rank, to, vm.rank(c, moved), parts, src.shape[to])
        for g in vm.group(c, moved):
            o[_piece(rank, frm, vm.rank(g, held), parts, shape[frm])] = net.recv(c, g, bufs[g][mine], rank)
        out[c] = freeze(o)
    dims = list(d.axes for d in t.dims)
    dims[frm] = dims[frm][: len(dims[frm]) - len(held)]
    dims[to] = dims[to] + moved
    return out, (tuple(dims), frozenset(t.unreduced))


def is_zero_pad(step: Step) -> bool:
    """A Slice step read backwards (the transpose of Slice, S -> U): its axes leave a dim and become
    unreduced; each device writes its block in place and zeros elsewhere."""
    op = step.op.value
    return op == "ZeroPad" or (
        op == "Slice"
        and bool(step.axes)
        and set(step.axes) <= set(step.output.unreduced)
        and not set(step.axes) & set(step.inputs[0].unreduced)
    )


@MOVES.register(Op.SLICE)  # [I] -> [I_X]; read backwards ([I_X] -> [I]{U_X}) a zero-pad
def _slice(vm: VirtualMesh, net: Net, step: Step, bufs: Buffers) -> tuple[Buffers, Layout]:
    """``Slice_{X,I}: [I] -> [I_X]``: each device keeps its piece of the dim (the axes must be replicated);
    nothing is received.
    A zero-pad (see :func:`is_zero_pad`) is the same op read backwards."""
    if is_zero_pad(step):
        return _zero_pad(vm, step, bufs)
    (t,) = step.inputs
    busy = [a for a in step.axes if a in t.sharded_axes or a in t.unreduced]
    if busy:
        raise step_error(
            step, f"{', '.join(busy)} is already used by {text(t)}; only a replicated axis is sliced"
        )
    at, rank, parts = _dim_pos(step, t, step.dim), len(t.dims), vm.size(step.axes)
    views: dict[tuple[int, int], np.ndarray] = {}  # (buffer, piece) -> its view; replicas share it
    out = {}
    for c, b in bufs.items():
        j = vm.rank(c, step.axes)
        if (id(b), j) not in views:
            views[id(b), j] = readonly_view(b[_piece(rank, at, j, parts, b.shape[at])])
        out[c] = views[id(b), j]
    dims = tuple(d.axes + tuple(step.axes) if i == at else d.axes for i, d in enumerate(t.dims))
    return out, (dims, frozenset(t.unreduced))


def _zero_pad(vm: VirtualMesh, step: Step, bufs: Buffers) -> tuple[Buffers, Layout]:
    """``[I_X] -> [I]{U_X}``: each device writes its block in place in a zero buffer of the whole dim."""
    (t,) = step.inputs
    found = _minor_suffix(step, t, step.axes)
    if len(found) != 1:
        raise step_error(step, "a zero-pad takes its axes off one dim")
    ((at, moved),) = found.items()
    rank, parts, out = len(t.dims), vm.size(moved), {}
    for c, b in bufs.items():
        shape = list(b.shape)
        shape[at] *= parts
        o = allocate(shape, b.dtype, zero=True)
        o[_piece(rank, at, vm.rank(c, moved), parts, shape[at])] = b
        out[c] = freeze(o)
    dims = tuple(d.axes[: len(d.axes) - len(moved)] if i == at else d.axes for i, d in enumerate(t.dims))
    return out, (dims, frozenset(t.unreduced) | set(moved))


@MOVES.register(Op.PERMUTE)  # [I_X, J_Y] -> [I_Y, J_X]
def _permute(vm: VirtualMesh, net: Net, step: Step, bufs: Buffers) -> tuple[Buffers, Layout]:
    """``Permute_{X,Y}: [I_X, J_Y] -> [I_Y, J_X]``. Swap the roles of two axes (or rename several in a cycle,
    ``Permute_{X,Y,Z}``: X to Y, Y to Z, Z to X). Devices that hold the same block (and the same partial)
    under the old layout are matched, in device order, with the devices that need it under the new one: a
    bijection, so every device receives at most one shard. A partial's place is its rank over the unreduced
    axes taken in mesh order, so ``Permute_{X,Y}(A[I]{U_XY})`` moves nothing, as ``Permute_{X,Y}(A[I])``
    does not, which it is the transpose of."""
    (t,) = step.inputs
    if len(step.axes) < 2 or len(set(step.axes)) != len(step.axes):
        raise step_error(step, "Permute renames two or more distinct axes")
    axes = step.axes
    swap = {a: axes[(i + 1) % len(axes)] for i, a in enumerate(axes)}
    dims = tuple(tuple(swap.get(a, a) for a in d.axes) for d in t.dims)
    unred = tuple(swap.get(a, a) for a in t.unreduced)
    if [vm.size(d.axes) for d in t.dims] != [vm.size(e) for e in dims] or vm.size(t.unreduced) != vm.size(
        unred
    ):
        shown = " and ".join(f"|{a}| = {vm.size([a])}" for a in axes)
        raise step_error(step, f"{shown}: the local shape would change")
    # a partial's place is its rank over the unreduced axes in mesh order (a sum has no order): a Permute
    # that keeps the set of unreduced axes moves no partial, and a transpose's matching is the inverse of
    # its forward's, which matched the devices holding one block in device order
    in_mesh = vm.names.index
    summed, resummed = sorted(t.unreduced, key=in_mesh), sorted(unred, key=in_mesh)
    old: dict[tuple, list[Coord]] = {}
    new: dict[tuple, list[Coord]] = {}
    for c in vm.coords:
        old.setdefault((tuple(vm.rank(c, d.axes) for d in t.dims), vm.rank(c, summed)), []).append(c)
        new.setdefault((tuple(vm.rank(c, e) for e in dims), vm.rank(c, resummed)), []).append(c)
    rank, out = len(t.dims), {}
    for key, dsts in new.items():
        for src, dst in zip(old[key], dsts, strict=True):
            out[dst] = readonly_view(net.recv(dst, src, bufs[src], rank))
    return out, (dims, frozenset(unred))


@MOVES.register(Op.SHIFT)  # [I_X] -> [I_X], device x's block now on x + k
def _shift(vm: VirtualMesh, net: Net, step: Step, bufs: Buffers) -> tuple[Buffers, Layout]:
    """``Shift_{X,k}: [I_X] -> [I_X]``: device x sends its whole buffer to device x + k (mod |X|) along X, the
    other coordinates unchanged (JAX's ``ppermute`` with a cyclic permutation); the layout is the same."""
    return _along(vm, net, step, bufs, wrap=True)


@DENSE.register(Op.SHIFT)
def _shift_dense(step: Step, values: Sequence[np.ndarray], vm: VirtualMesh) -> np.ndarray:
    axis, offset = _axis_offset(step)
    return shift_dense(values[0], step.inputs[0], axis, offset, vm)


@MOVES.register(Op.SEND)  # [S_X] -> [S_X], slice x's block now on x + k; the first k slices get zeros
def _send(vm: VirtualMesh, net: Net, step: Step, bufs: Buffers) -> tuple[Buffers, Layout]:
    """``Send_{X,k}: [S_X] -> [S_X]``: device x sends its whole buffer to device x + k along X where that
    device exists, the other coordinates unchanged (JAX's ``ppermute`` with the pairs that exist); a device
    nobody sends to holds zeros. The layout is the same."""
    return _along(vm, net, step, bufs, wrap=False)


@DENSE.register(Op.SEND)
def _send_dense(step: Step, values: Sequence[np.ndarray], vm: VirtualMesh) -> np.ndarray:
    axis, offset = _axis_offset(step)
    return send_dense(values[0], step.inputs[0], axis, offset, vm)


def _axis_offset(step: Step) -> tuple[str, int]:
    """The one axis and the offset of a Shift or a Send step."""
    if len(step.axes) != 1 or step.offset is None:
        name, how = step.op.value, "around" if step.op is Op.SHIFT else "along"
        raise step_error(step, f"a {name} moves blocks {how} one axis by an offset: {name}_{{X,+1}}")
    return step.axes[0], step.offset


def _along(vm: VirtualMesh, net: Net, step: Step, bufs: Buffers, wrap: bool) -> tuple[Buffers, Layout]:
    """Each device receives the whole buffer of the device ``offset`` before it along the axis (mod its size
    with ``wrap``; without, a device with none before it holds zeros); the layout is the same."""
    axis, offset = _axis_offset(step)
    (t,) = step.inputs
    at, n, rank, out = vm.names.index(axis), vm.size(step.axes), len(t.dims), {}
    for c in vm.coords:
        k = (c[at] - offset) % n if wrap else c[at] - offset
        src = c[:at] + (k,) + c[at + 1 :]
        out[c] = net.recv(c, src, bufs[src], rank).copy() if 0 <= k < n else np.zeros_like(bufs[c])
    return out, (tuple(d.axes for d in t.dims), frozenset(t.unreduced))


def send_dense(arr: np.ndarray, t: Tensor, axis: str, offset: int, vm: VirtualMesh) -> np.ndarray:
    """The global value after ``Send_{axis,offset}`` of ``t`` (dense ``arr``): the blocks of the dim the axis
    shards move ``offset`` places in the axis's digit of the block index, with zeros where nothing arrives
    (a shift with no wrap-around: the roll of :func:`shift_dense` with the wrapped blocks zeroed)."""
    moved = _rolled(arr, t, axis, offset, vm, wrap=False)
    if moved is None:
        raise IndivisibleDim(f"Send_{{{axis},{offset:+d}}} needs {axis} to shard a dim of the tensor")
    return moved


@DENSE.register(Op.EINSUM)
def _einsum_dense(step: Step, values: Sequence[np.ndarray], vm: VirtualMesh) -> np.ndarray:
    spec, _ = einsum_rule(step)
    return contract(spec, *values)


def shift_dense(arr: np.ndarray, t: Tensor, axis: str, offset: int, vm: VirtualMesh) -> np.ndarray:
    """The global value after ``Shift_{axis,offset}`` of ``t`` (dense ``arr``): where the axis shards a dim,
    its blocks along that dim are rolled by ``offset`` in the axis's digit of the block index (major axes
    first, as :mod:`.devices` numbers blocks); where it replicates or leaves partial sums, the value is the
    same (the copies, or the partials of one sum, only change devices)."""
    moved = _rolled(arr, t, axis, offset, vm, wrap=True)
    return arr if moved is None else moved


def _rolled(
    arr: np.ndarray, t: Tensor, axis: str, offset: int, vm: VirtualMesh, wrap: bool
) -> np.ndarray | None:
    """``arr`` with the blocks of the dim ``axis`` shards rolled by ``offset`` in the axis's digit of the block
    index (without ``wrap``, the blocks that wrapped round zeroed); None when the axis shards no dim."""
    for i, d in enumerate(t.dims):
        if axis in d.axes:
            sizes = [vm.size([a]) for a in d.axes]
            extent = arr.shape[i]
            if extent % vm.size(d.axes):
                raise IndivisibleDim(f"dim {d.label} of {extent} does not split over {''.join(d.axes)}")
            split = arr.reshape(
                arr.shape[:i] + tuple(sizes) + (extent // vm.size(d.axes),) + arr.shape[i + 1 :]
            )
            at = i + d.axes.index(axis)
            rolled = np.roll(split, offset, axis=at)
            n = split.shape[at]
            wrapped = () if wrap else range(min(offset, n)) if offset >= 0 else range(max(n + offset, 0), n)
            index = [slice(None)] * rolled.ndim
            for j in wrapped:
                index[at] = slice(j, j + 1)
                rolled[tuple(index)] = 0
            return rolled.reshape(arr.shape)
    return None


# ---------------------------------------------------------------- local einsum


@MOVES.register(Op.EINSUM)  # the dense einsum of each device's blocks
def _einsum(vm: VirtualMesh, net: Net, step: Step, lb: Buffers, rb: Buffers) -> tuple[Buffers, Layout]:
    """``A[..] · B[..] -> C[..]``: each device multiplies its own blocks; nothing is received. Devices that
    hold the same two buffers (replicas) share one product."""
    spec, layout = einsum_rule(step)
    made: dict[tuple[int, int], np.ndarray] = {}
    out = {}
    for c in vm.coords:
        key = (id(lb[c]), id(rb[c]))
        if key not in made:
            made[key] = freeze(contract(spec, lb[c], rb[c]))
        out[c] = made[key]
    return out, layout
