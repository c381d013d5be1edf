"""Shift: a cyclic permutation of the devices along one axis (JAX's ppermute with i -> i + k): its rule
(precondition, effect, moves), transpose, bytes and printed form, in one record.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

from shardalg.errors import IllegalCollective
from shardalg.notation.syntax import Op, Tensor

from ..layout import Axes, Layout
from ..mesh import Mesh
from ..traffic import Volume
from .record import CollectiveRecord, DimMap, Transpose


def one_axis(op: Op, axes: Axes, how: str) -> None:
    """A Shift or a Send moves blocks along one axis (``how``: around a ring, or along the axis)."""
    if len(axes) != 1:
        name, verb = op.value, op.value.lower()
        raise IllegalCollective(
            f"{name} moves blocks {how}, not {len(axes)} axes ({', '.join(axes)})",
            fix=f"{verb} along one axis: {name}_{{{axes[0]},+1}}; a {verb} along several is one {name} per axis",
        )


def shift_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
    one_axis(Op.SHIFT, axes, "around one ring")


def shift_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    return lay  # the layout is the same; which device holds which block is what moves


def shift_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
    # never a planner's move: where the axis shards a dim, a shift changes the global value (rolls the blocks)
    return iter(())


def shift_idle(lay: Layout, axes: Axes, offset: int | None, mesh: Mesh) -> bool:
    """Whether the shift brings every block back where it was: by a whole number of turns of its ring."""
    n = mesh.known_group(axes)
    return offset is not None and n is not None and offset % n == 0


RECORD = CollectiveRecord(
    op=Op.SHIFT,
    doc="""Shift_{A,k}: [..] -> [..]   layout unchanged; device a sends its block to a + k (mod |A|) along A
    A[I_X] on X=4, k=+1:  x=0: a0  x=1: a1  x=2: a2  x=3: a3
                      ->  x=0: a3  x=1: a0  x=2: a1  x=3: a2      the book's send around a ring (JAX's ppermute)
    one axis; k moves |k| hops (mod |A|) on a ring, more on a line; where A shards a dim the global value is
    rolled by k blocks along it (the one op that is not the identity on global values, so no plan uses it);
    where A replicates, or leaves partial sums, the value is unchanged. backward: Shift_{A,-k}""",
    transpose=Transpose(
        Op.SHIFT,
        DimMap.NONE,
        "the inverse shift",
        "Shift_{A,-k}: a cyclic permutation's transpose is its inverse",
    ),
    volume=Volume.INPUT_LOCAL,  # each device receives one shard, however many hops it came
    factor=Fraction(1),
    group_view=False,
    identity_on_values=False,
    as_transpose="the blocks move back around the ring (the inverse shift)",
    precondition=shift_pre,
    effect=shift_effect,
    moves=shift_moves,
    idle=shift_idle,
)
