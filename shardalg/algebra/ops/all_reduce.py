"""AllReduce: U -> R: its rule (precondition, effect, moves), transpose, bytes and printed form, in one
record.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from itertools import combinations

from shardalg.notation.syntax import Op, Tensor

from ..layout import Axes, Layout
from ..mesh import Mesh
from ..traffic import Volume
from .record import CollectiveRecord, DimMap, Kind, Transpose
from .shared import not_unreduced, subscript


def ar_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
    not_unreduced(t, axes, "AllReduce")


def ar_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    return Layout(lay.dims, tuple(a for a in lay.unreduced if a not in axes), lay.invariant)


def ar_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
    for k in range(1, len(lay.unreduced) + 1):
        for axes in combinations(lay.unreduced, k):
            yield axes, None


def ar_explain(axes: Axes, before: Tensor, after: Tensor, dim: str | None) -> str:
    return f"AllReduce: sum {before.name or 'the tensor'}'s partials over {subscript(axes)}"


RECORD = CollectiveRecord(
    op=Op.ALL_REDUCE,
    doc="""AllReduce_A: [..]{U_A} -> [..]                   U -> R on A  (= ReduceScatter + AllGather)
    C{U_X} on X=2:  x=0: [c0]      x=1: [c1]
                ->  x=0: [c0+c1]   x=1: [c0+c1]         every device holds the sum
    backward: AllReduce_A (cotangent unreduced); nothing when the result is invariant (I -> R)""",
    transpose=Transpose(
        Op.ALL_REDUCE, DimMap.NONE, "R <- U", "psum of a partial cotangent; none for an invariant one"
    ),
    volume=Volume.INPUT_GROUP,
    factor=Fraction(2),
    group_view=False,
    kinds=(Kind.U, Kind.R),
    fuses=True,
    as_transpose="the gradient arrives unreduced (partial sums on every device) and is all-reduced",
    may_be_invariant=True,
    example="AllReduce_X(A[I, J]{U_X}) -> A[I, J]",
    explain=ar_explain,
    precondition=ar_pre,
    effect=ar_effect,
    moves=ar_moves,
)
