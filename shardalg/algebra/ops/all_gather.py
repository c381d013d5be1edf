"""AllGather: S(d) -> R on the named axes: its rule (precondition, effect, moves), transpose, bytes and
printed form, in one record.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from itertools import product

from shardalg.errors import IllegalCollective
from shardalg.notation.syntax import Op, Tensor

from ..layout import Axes, Layout
from ..mesh import Mesh
from ..traffic import Volume
from .record import CollectiveRecord, DimMap, Kind, Transpose
from .shared import minor_most, sharded_over, subscript


def ag_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
    lay = Layout.of(t)
    for a in axes:
        if lay.holder(a) is None:
            if a in t.unreduced:
                fix = f"sum the partials: AllReduce_{a}, or ReduceScatter_{{{a},d}}"
            else:
                fix = (
                    f"gather an axis that shards it: AllGather_{subscript(t.sharded_axes)}"
                    if t.sharded_axes
                    else "nothing to gather"
                )
            raise IllegalCollective(
                f"{a} does not shard {t.name or 'the tensor'}; {sharded_over(t)}", fix=fix
            )
    minor_most(t, axes, "AllGather")


def ag_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    return Layout(tuple(tuple(a for a in d if a not in axes) for d in lay.dims), lay.unreduced, lay.invariant)


def ag_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
    # per dim: take nothing or a minor-most suffix; any non-empty combination across dims.
    choices = [[()] + [axes[k:] for k in range(len(axes))] for axes in lay.dims]
    for pick in product(*choices):
        axes = tuple(a for part in pick for a in part)
        if axes:
            yield axes, None


def ag_explain(axes: Axes, before: Tensor, after: Tensor, dim: str | None) -> str:
    dims = [d.label for d, e in zip(before.dims, after.dims, strict=True) if d.axes != e.axes]
    name = before.name or "the tensor"
    verb = "shards" if len(axes) == 1 else "shard"
    return f"AllGather: {subscript(axes)} no longer {verb} {', '.join(dims)} of {name}"


RECORD = CollectiveRecord(
    op=Op.ALL_GATHER,
    doc="""AllGather_A: [.., d_{..A}, ..] -> [.., d, ..]        S(d) -> R on A (A minor-most in d)
    A[I_X] on X=2:   x=0: [a0]      x=1: [a1]
                 ->  x=0: [a0 a1]   x=1: [a0 a1]      every device concatenates all blocks, in order
    backward: ReduceScatter_{A,d} of the cotangent (U -> S(d))""",
    transpose=Transpose(
        Op.REDUCE_SCATTER, DimMap.SAME, "S(d) <- U", "the sum over devices, scattered back to d"
    ),
    volume=Volume.OUTPUT_GROUP,
    factor=Fraction(1),
    group_view=True,
    kinds=(Kind.S, Kind.R),
    fuses=True,
    as_transpose="the sharded gradient is gathered (AllGather and ReduceScatter are each other's transpose)",
    may_be_invariant=True,
    example="AllGather_X(A[I_X, J]) -> A[I, J]",
    explain=ag_explain,
    precondition=ag_pre,
    effect=ag_effect,
    moves=ag_moves,
)
