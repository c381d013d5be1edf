"""AllToAll: S(d') -> S(d), the axes moved from d' to the minor end of d: its rule (precondition, effect,
moves), transpose, bytes and printed form, in one record.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

from shardalg.errors import IllegalCollective
from shardalg.notation.syntax import Op, Tensor

from ..layout import Axes, Layout
from ..mesh import Mesh
from ..traffic import Volume
from .record import CollectiveRecord, DimMap, Kind, Transpose
from .shared import minor_most, sharded_over, show, subscript


def a2a_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
    lay = Layout.of(t)
    assert dim is not None
    holders = {lay.holder(a) for a in axes}
    if None in holders:
        a = next(a for a in axes if lay.holder(a) is None)
        raise IllegalCollective(
            f"AllToAll_{{{subscript(axes)},{t.dims[dim].label}}} moves a sharding to {t.dims[dim].label}, "
            f"but {a} does not shard {t.name or 'the tensor'}; {sharded_over(t)}",
            fix=f"Slice_{{{a},{t.dims[dim].label}}} shards a replicated axis for free"
            if a not in t.unreduced
            else f"ReduceScatter_{{{a},{t.dims[dim].label}}} sums the partials onto {t.dims[dim].label}",
        )
    if len(holders) > 1:
        raise IllegalCollective(
            f"AllToAll_{subscript(axes)} moves axes of one dim, but they shard several dims of {show(t)}"
        )
    if dim in holders:
        raise IllegalCollective(
            f"AllToAll_{{{subscript(axes)},{t.dims[dim].label}}} moves a sharding to another dim, "
            f"but {subscript(axes)} already shards {t.dims[dim].label}",
        )
    minor_most(t, axes, "AllToAll")


def a2a_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    assert dim is not None
    dims = tuple(
        d + axes if i == dim else tuple(a for a in d if a not in axes) for i, d in enumerate(lay.dims)
    )
    return Layout(dims, lay.unreduced, lay.invariant)


def a2a_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
    for src, axes in enumerate(lay.dims):
        for k in range(len(axes)):
            for dst in range(len(lay.dims)):
                if dst != src:
                    yield axes[k:], dst


def a2a_explain(axes: Axes, before: Tensor, after: Tensor, dim: str | None) -> str:
    src = next(d.label for d in before.dims if axes[0] in d.axes)
    return f"AllToAll: move {subscript(axes)} of {before.name or 'the tensor'} from {src} to {dim}"


RECORD = CollectiveRecord(
    op=Op.ALL_TO_ALL,
    doc="""AllToAll_{A,d}: [d'_{..A}, d] -> [d', d_A]       S(d') -> S(d) on A
    A[I_X, J] on X=2:  x=0: [a00 a01]          x=1: [a10 a11]      (a_ij: block i of I, j of J)
                   ->  x=0: [a00; a10]         x=1: [a01; a11]     each device sends block j to device j
    backward: AllToAll_{A,d'} (the move reversed)""",
    transpose=Transpose(Op.ALL_TO_ALL, DimMap.SWAP, "S(d') <- S(d)", "the same exchange, dims reversed"),
    volume=Volume.INPUT_GROUP,
    factor=Fraction(1, 4),
    group_view=True,
    kinds=(Kind.S, Kind.S),
    as_transpose="the shards move back to the dim they came from",
    example="AllToAll_{X,J}(A[I_X, J]) -> A[I, J_X]",
    explain=a2a_explain,
    precondition=a2a_pre,
    effect=a2a_effect,
    moves=a2a_moves,
)
