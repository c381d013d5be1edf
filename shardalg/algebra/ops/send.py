"""Send: a point-to-point send from each slice of one mesh axis to the slice ``k`` further along it, with no
wrap-around (JAX's ppermute with the pairs ``(i, i + k)`` that exist; a pipeline's stage boundary): its rule
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
from .shared import show


def send_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
    if len(axes) != 1:
        raise IllegalCollective(
            f"Send moves blocks along one axis, not {len(axes)} axes ({', '.join(axes)})",
            fix=f"send along one axis: Send_{{{axes[0]},+1}}; a send along several is one Send per axis",
        )
    (axis,) = axes
    if not any(axis in d.axes for d in t.dims):
        raise IllegalCollective(
            f"Send_{{{axis},k}} moves the block of each slice of {axis} to another; {show(t)} is not sharded "
            f"over {axis}, so the slices that receive nothing would hold zeros where their copy was",
            fix=f"shard the stage dim over {axis} (e.g. H[S_{axis}, B, D]), or use Shift_{{{axis},+1}} for a ring",
        )


def send_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    return lay  # the layout is the same; which slice holds which block is what moves


def send_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
    # never a planner's move: it drops the last k blocks and puts zeros in the first k (not the identity)
    return iter(())


RECORD = CollectiveRecord(
    op=Op.SEND,
    doc="""Send_{A,k}: [.., d_{..A..}, ..] -> [.., d_{..A..}, ..]   layout unchanged; slice a of A sends its block to a + k
    H[S_X] on X=4, k=+1:  x=0: h0  x=1: h1  x=2: h2  x=3: h3
                      ->  x=0: 0   x=1: h0  x=2: h1  x=3: h2      a pipeline's stage boundary (JAX's ppermute, no wrap)
    one axis, which must shard a dim; the blocks move k places along it, the last k are dropped and the
    first k slices receive zeros; |k| hops, one block a device over the busiest link. backward: Send_{A,-k}""",
    transpose=Transpose(
        Op.SEND,
        DimMap.NONE,
        "the send back",
        "Send_{A,-k}: the cotangent goes back",
    ),
    volume=Volume.INPUT_LOCAL,  # each device sends one block, |k| hops
    factor=Fraction(1),
    group_view=False,
    identity_on_values=False,
    as_transpose="the cotangent is sent back to the slice the block came from",
    precondition=send_pre,
    effect=send_effect,
    moves=send_moves,
)
