"""Slice: R (or I) -> S(d), free: its rule (precondition, effect, moves), transpose, bytes and printed form,
in one record.
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
from .shared import ordered_subsets, subscript, where


def slice_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
    lay = Layout.of(t)
    for a in axes:
        if a in t.unreduced:
            raise IllegalCollective(
                f"Slice_{a} keeps one block of a replicated value, but {t.name or 'the tensor'} is unreduced "
                f"over {a}: each device holds only a partial sum",
                fix=f"ReduceScatter_{{{a},d}} sums and keeps one block",
            )
        if lay.holder(a) is not None:
            raise IllegalCollective(
                f"Slice_{a} needs {t.name or 'the tensor'} replicated over {a}, but {where(t, a)}",
                fix=f"AllToAll_{{{a},d}} moves a sharding to another dim",
            )


def slice_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    assert dim is not None
    dims = tuple(d + axes if i == dim else d for i, d in enumerate(lay.dims))
    return Layout(dims, lay.unreduced, tuple(a for a in lay.invariant if a not in axes))


def slice_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
    for axes in ordered_subsets(lay.free(mesh)):
        for i in range(len(lay.dims)):
            yield axes, i


def slice_explain(axes: Axes, before: Tensor, after: Tensor, dim: str | None) -> str:
    return f"Slice: keep this device's block of {dim} over {subscript(axes)} (free)"


RECORD = CollectiveRecord(
    op=Op.SLICE,
    doc="""Slice_{A,d}: [.., d, ..] -> [.., d_A, ..]        R (or I) -> S(d) on A, no communication
    A[I] on X=2:   x=0: [a0 a1]   x=1: [a0 a1]
               ->  x=0: [a0]      x=1: [a1]           each device drops what it does not own
    backward: zero-pad to unreduced (S(d) -> U), no communication""",
    transpose=Transpose(
        None, DimMap.SAME, "U <- S(d)", "zero-pad the block: a partial value, no communication"
    ),
    volume=Volume.NONE,
    factor=Fraction(0),
    group_view=False,
    kinds=(Kind.R, Kind.S),
    as_transpose="each device keeps its block of the invariant gradient (no communication)",
    example="Slice_{X,J}(A[I, J]) -> A[I, J_X]",
    explain=slice_explain,
    precondition=slice_pre,
    effect=slice_effect,
    moves=slice_moves,
)
