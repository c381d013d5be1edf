"""Permute: swap two axis names everywhere (whole shards move point to point): its rule (precondition, effect,
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
    """Why Permute_{x,y} cannot move ``lay`` (None when it can): it moves whole shards, so every device's
    local shape must stay, and partial sums cannot be re-split over an axis of another size."""
    x, y = axes
    sx, sy = mesh[x].size, mesh[y].size
    if sx is not None and sx == sy:
        return None
    after = swap(lay, axes)
    for before_axes, after_axes in zip(lay.dims, after.dims, strict=True):
        if sorted(before_axes) != sorted(after_axes):
            return f"|{x}| = {sx or x} and |{y}| = {sy or y} differ, so the local shape would change"
    if (x in lay.unreduced) != (y in lay.unreduced):
        return f"partial sums over {x} cannot become partial sums over {y} of another size"
    return None


def permute_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
    if len(axes) != 2:
        raise IllegalCollective(
            f"Permute swaps two mesh axes, not {len(axes)} ({', '.join(axes)})", fix="write Permute_{X,Y}"
        )
    why = permute_problem(Layout.of(t), axes, mesh)
    if why is not None:
        raise IllegalCollective(
            f"Permute_{{{axes[0]},{axes[1]}}} cannot re-lay {show(t)}: {why}",
            fix=f"AllGather then Slice, or AllToAll, to move the sharding between {axes[0]} and {axes[1]}",
        )


def permute_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    """The swap of two axes; anything else (its precondition's to refuse) leaves the layout as it is, so the
    value of an illegal Permute can still be read while its error is reported."""
    return swap(lay, axes) if len(axes) == 2 else lay


def permute_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
    # a swap moves data when either axis shards a dim, or exactly one of them holds partial sums
    sharding, unreduced = {a for d in lay.dims for a in d}, set(lay.unreduced)
    for x, y in combinations(mesh.names, 2):
        if x not in sharding and y not in sharding and (x in unreduced) == (y in unreduced):
            continue
        if permute_problem(lay, (x, y), mesh) is None:
            yield (x, y), None


def permute_explain(axes: Axes, before: Tensor, after: Tensor, dim: str | None) -> str:
    what = "blocks of partial sums" if set(axes) & set(before.unreduced) else "shards"
    name = before.name or "the tensor"
    return f"Permute: swap {axes[0]} and {axes[1]} in {name}; whole {what} move point to point"


RECORD = CollectiveRecord(
    op=Op.PERMUTE,
    doc="""Permute_{X,Y}: A[I_X, J] -> A[I_Y, J], I_XY -> I_YX   swap the names X and Y; shards move point to point
    A[I_X] on X=2, Y=2:  (x,y)=(0,0): a0  (0,1): a0  (1,0): a1  (1,1): a1
                     ->  (x,y)=(0,0): a0  (0,1): a1  (1,0): a0  (1,1): a1   device (x,y) fetches from (y,x)
    legal when no device's local shape changes; backward: Permute_{X,Y} (the swap is its own inverse)""",
    transpose=Transpose(Op.PERMUTE, DimMap.NONE, "the inverse permutation", "a swap is self-inverse"),
    volume=Volume.INPUT_LOCAL,
    factor=Fraction(1),
    group_view=False,
    as_transpose="the shards move back (the inverse permutation)",
    explain=permute_explain,
    precondition=permute_pre,
    effect=permute_effect,
    moves=permute_moves,
)
