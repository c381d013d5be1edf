"""Permute steps on devices: which device sends each device its shard.

A Permute swaps the roles of two mesh axes. Devices that hold the same block (and the same partial) before
are matched with the devices that need it after, as the executor (:mod:`shardalg.numeric.execute`) matches them;
the JAX backend writes the matching as one ``ppermute``, the torch backend as a table of source ranks.
Device coordinates and ranks over axes come from the executor's :class:`~shardalg.numeric.execute.VirtualMesh`.
"""

from __future__ import annotations

from shardalg.algebra.mesh import Mesh
from shardalg.errors import UsageError
from shardalg.notation.syntax import Tensor
from shardalg.numeric.execute import VirtualMesh

from .flow import node_text

__all__ = ["permute_sources", "permute_pairs"]


def permute_sources(before: Tensor, after: Tensor, mesh: Mesh) -> dict[tuple[int, ...], tuple[int, ...]]:
    """For a Permute step: the device each device receives its shard from. Devices that hold the same
    block (and the same partial) before are matched, in device order, with the devices that need it
    after (the executor's matching): a bijection."""
    swap = _swap_of(before, after)
    new_dims = [tuple(swap.get(a, a) for a in d.axes) for d in before.dims]
    new_unred = tuple(swap.get(a, a) for a in before.unreduced)
    if [d.axes for d in after.dims] != new_dims or sorted(new_unred) != list(after.unreduced):
        raise UsageError(f"{node_text(before)} -> {node_text(after)} is not a swap of two axes")
    vm = VirtualMesh(mesh)
    old: dict[tuple, list[tuple[int, ...]]] = {}
    new: dict[tuple, list[tuple[int, ...]]] = {}
    for c in vm.coords:
        old.setdefault(
            (tuple(vm.rank(c, d.axes) for d in before.dims), vm.rank(c, before.unreduced)), []
        ).append(c)
        new.setdefault((tuple(vm.rank(c, e) for e in new_dims), vm.rank(c, new_unred)), []).append(c)
    sizes_old = [mesh.group_size(d.axes) for d in before.dims]
    sizes_new = [mesh.group_size(e) for e in new_dims]
    if sizes_old != sizes_new or set(old) != set(new):
        raise UsageError(f"{node_text(before)} -> {node_text(after)} changes the local shape: not a permute")
    keys_old = {c: k for k, cs in old.items() for c in cs}
    keys_new = {c: k for k, cs in new.items() for c in cs}
    x, y = (mesh.names.index(a) for a in sorted(swap)[:2]) if swap else (0, 0)
    if swap and mesh.shape[x] == mesh.shape[y]:  # the plain swap of the two coordinates, when it works
        swapped = {
            c: tuple(c[y] if i == x else c[x] if i == y else v for i, v in enumerate(c)) for c in keys_new
        }
        if all(keys_old[swapped[c]] == keys_new[c] for c in keys_new):
            return swapped
    out: dict[tuple[int, ...], tuple[int, ...]] = {}
    for key, dsts in new.items():
        for src, dst in zip(old[key], dsts, strict=True):
            out[dst] = src
    return out


def _swap_of(before: Tensor, after: Tensor) -> dict[str, str]:
    """The two axes a permute swaps, read off the layouts."""
    pairs = {
        (a, b)
        for d0, d1 in zip(before.dims, after.dims, strict=True)
        for a, b in zip(d0.axes, d1.axes, strict=False)
        if a != b
    }
    pairs |= {(a, b) for a, b in zip(before.unreduced, after.unreduced, strict=False) if a != b}
    names = {x for p in pairs for x in p}
    if len(names) != 2 and pairs:
        raise UsageError(f"{node_text(before)} -> {node_text(after)} is not a swap of two axes")
    if not pairs:
        return {}
    x, y = sorted(names)
    return {x: y, y: x}


def permute_pairs(before: Tensor, after: Tensor, mesh: Mesh) -> tuple[tuple[str, ...], list[tuple[int, int]]]:
    """The permute as one ``ppermute`` over the axes whose coordinates change: (axes in mesh order,
    [(source index, destination index)] over those axes). A UsageError when the matching moves data
    differently in different slices of the other axes."""
    sources = permute_sources(before, after, mesh)
    changed = sorted({i for dst, src in sources.items() for i in range(len(dst)) if dst[i] != src[i]})
    axes = tuple(mesh.names[i] for i in changed) or (mesh.names[0],)
    vm = VirtualMesh(mesh)
    pairs: dict[int, int] = {}
    for dst, src in sources.items():
        d_lin, s_lin = vm.rank(dst, axes), vm.rank(src, axes)
        if pairs.setdefault(d_lin, s_lin) != s_lin:
            raise UsageError(
                f"{node_text(before)} -> {node_text(after)}: the shards move differently on different devices"
            )
    return axes, sorted((s, d) for d, s in pairs.items())
