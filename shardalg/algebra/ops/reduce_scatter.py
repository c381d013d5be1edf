"""ReduceScatter: U -> S(d), the axes appended minor-most to d: its rule (precondition, effect, moves),
transpose, bytes and printed form, in one record.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

from shardalg.notation.syntax import Op, Tensor

from ..layout import Axes, Layout
from ..mesh import Mesh
from ..traffic import Volume
from .record import CollectiveRecord, DimMap, Kind, Transpose
from .shared import not_unreduced, ordered_subsets, subscript


def rs_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
    not_unreduced(t, axes, "ReduceScatter")


def rs_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    assert dim is not None
    dims = tuple(d + axes if i == dim else d for i, d in enumerate(lay.dims))
    return Layout(dims, tuple(a for a in lay.unreduced if a not in axes), lay.invariant)


def rs_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
    for axes in ordered_subsets(lay.unreduced):
        for i in range(len(lay.dims)):
            yield axes, i


def rs_explain(axes: Axes, before: Tensor, after: Tensor, dim: str | None) -> str:
    name = before.name or "the tensor"
    return f"ReduceScatter: sum {name}'s partials over {subscript(axes)} and keep {dim} sharded over them"


RECORD = CollectiveRecord(
    op=Op.REDUCE_SCATTER,
    doc="""ReduceScatter_{A,d}: [.., d, ..]{U_A} -> [.., d_A, ..]   U -> S(d) on A (appended minor-most)
    C[K]{U_X} on X=2:  x=0: [p0 p1]     x=1: [q0 q1]      (partials: C = p + q, two blocks each)
                   ->  x=0: [p0+q0]     x=1: [p1+q1]      each device sums and keeps its own block
    backward: AllGather_A of the cotangent (S(d) -> R)""",
    transpose=Transpose(Op.ALL_GATHER, DimMap.NONE, "R <- S(d)", "the cotangent's blocks gathered"),
    volume=Volume.INPUT_GROUP,
    factor=Fraction(1),
    group_view=False,
    kinds=(Kind.U, Kind.S),
    as_transpose="the gradient arrives unreduced and is scattered back to the gathered shards",
    example="ReduceScatter_{X,J}(A[I, J]{U_X}) -> A[I, J_X]",
    explain=rs_explain,
    precondition=rs_pre,
    effect=rs_effect,
    moves=rs_moves,
)
