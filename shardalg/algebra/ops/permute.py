"""Permute: swap two axis names (or rename several in a cycle) everywhere (whole shards move point to point): its rule (precondition, effect,
moves), transpose, bytes and printed form, in one record.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from itertools import combinations

from shardalg.errors import IllegalCollective
from shardalg.notation.syntax import Op, Tensor

from ..layout import Axes, Layout
from ..mesh import Mesh
from ..traffic import Volume
from .record import CollectiveRecord, DimMap, Transpose
from .shared import show, swap


def permute_problem(lay: Layout, axes: Axes, mesh: Mesh) -> str | None:
    """Why Permute over ``axes`` cannot move ``lay`` (None when it can): it moves whole shards, so every
    device's local shape must stay, and partial sums cannot be re-split over an axis of another size."""
    sizes = [mesh[a].size for a in axes]
    if sizes[0] is not None and all(n == sizes[0] for n in sizes):
        return None
    after = swap(lay, axes)
    shown = " and ".join(f"|{a}| = {n or a}" for a, n in zip(axes, sizes, strict=True))

    def same(before: Axes, now: Axes) -> bool:  # the same number of blocks (by name when a size is unknown)
        known = [mesh[a].size for a in (*before, *now)]
        if all(n is not None for n in known):
            return mesh.known_group(tuple(before)) == mesh.known_group(tuple(now))
        return sorted(before) == sorted(now)

    for before_axes, after_axes in zip(lay.dims, after.dims, strict=True):
        if not same(before_axes, after_axes):
            return f"{shown} differ, so the local shape would change"
    if not same(lay.unreduced, after.unreduced):
        was, now = ", ".join(lay.unreduced), ", ".join(after.unreduced)
        return f"partial sums over {was} cannot become partial sums over {now} of another size"
    return None


def permute_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
    if len(axes) < 2 or len(set(axes)) != len(axes):
        raise IllegalCollective(
            f"Permute swaps two mesh axes (or renames several distinct ones in a cycle), not {len(axes)} "
            f"({', '.join(axes)})",
            fix="write Permute_{X,Y} (a swap) or Permute_{X,Y,Z} (X to Y, Y to Z, Z to X)",
        )
    why = permute_problem(Layout.of(t), axes, mesh)
    if why is not None:
        raise IllegalCollective(
            f"Permute_{{{','.join(axes)}}} cannot re-lay {show(t)}: {why}",
            fix=f"AllGather then Slice, or AllToAll, to move the sharding between {' and '.join(axes)}",
        )


def permute_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    """The cyclic renaming of the axes (two: a swap); anything else (its precondition's to refuse) leaves the
    layout as it is, so the value of an illegal Permute can still be read while its error is reported."""
    return swap(lay, axes) if len(axes) >= 2 and len(set(axes)) == len(axes) else lay


def permute_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
    # a swap moves data when either axis shards a dim, or exactly one of them holds partial sums
    sharding, unreduced = {a for d in lay.dims for a in d}, set(lay.unreduced)
    for x, y in combinations(mesh.names, 2):
        if x not in sharding and y not in sharding and (x in unreduced) == (y in unreduced):
            continue
        if permute_problem(lay, (x, y), mesh) is None:
            yield (x, y), None


def permute_idle(lay: Layout, axes: Axes, offset: int | None, mesh: Mesh) -> bool:
    """Whether the permutation leaves every device's block where it was: the layouts before and after agree
    once the axes of size 1 are dropped (``Permute_{X,Y}`` of ``I_XY`` on ``|X| = 1``: both index block ``y``;
    or of a tensor neither axis shards nor holds partial sums over). A Permute named by fewer than two axes
    (``Permute_X``: the sub-axes of X reordered, as a plan on the refined mesh prints it) is no swap: it moves."""
    named = set(axes)
    if len(axes) < 2 or len(named) != len(axes):
        return False
    if 1 not in [mesh[a].size for a in axes]:  # the renaming alone: idle when it changes no name
        if any(named.intersection(d) for d in lay.dims):
            return False
        return not named & set(lay.unreduced) or named <= set(lay.unreduced)
    return _without_ones(lay, mesh) == _without_ones(swap(lay, axes), mesh)


def _without_ones(lay: Layout, mesh: Mesh) -> tuple[tuple[Axes, ...], frozenset[str]]:
    def keep(a: str) -> bool:
        return mesh[a].size != 1

    return tuple(tuple(filter(keep, d)) for d in lay.dims), frozenset(filter(keep, lay.unreduced))


def permute_explain(axes: Axes, before: Tensor, after: Tensor, dim: str | None) -> str:
    what = "block of partial sums" if set(axes) & set(before.unreduced) else "shard"
    name = before.name or "the tensor"
    # true on every mesh: where an axis of size 1 makes the renaming change no block, the device holding
    # a device's new block is that device, and nothing moves (traffic.moves_nothing)
    how = f"each device takes its new {what} whole from the device holding it"
    if len(axes) > 2:
        cycle = ", ".join(f"{a} to {axes[(i + 1) % len(axes)]}" for i, a in enumerate(axes))
        return f"Permute: rename {cycle} in {name}; {how}"
    return f"Permute: swap {axes[0]} and {axes[1]} in {name}; {how}"


RECORD = CollectiveRecord(
    op=Op.PERMUTE,
    doc="""Permute_{X,Y}: A[I_X, J] -> A[I_Y, J], I_XY -> I_YX   swap the names X and Y; shards move point to point
    A[I_X] on X=2, Y=2:  (x,y)=(0,0): a0  (0,1): a0  (1,0): a1  (1,1): a1
                     ->  (x,y)=(0,0): a0  (0,1): a1  (1,0): a0  (1,1): a1   device (x,y) fetches from (y,x)
    Permute_{X,Y,Z} renames X to Y, Y to Z, Z to X (one collective-permute; XLA's K_{X,Y:(1)2} -> K_Y)
    legal when no device's local shape changes; backward: the inverse cycle, Permute_{Z,Y,X} (a swap is its
    own inverse)""",
    transpose=Transpose(Op.PERMUTE, DimMap.NONE, "the inverse permutation", "the cycle reversed", True),
    volume=Volume.INPUT_LOCAL,
    factor=Fraction(1),
    group_view=False,
    as_transpose="the shards move back (the inverse permutation)",
    explain=permute_explain,
    precondition=permute_pre,
    effect=permute_effect,
    moves=permute_moves,
    idle=permute_idle,
)
