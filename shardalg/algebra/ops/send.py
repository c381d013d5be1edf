"""Send: a point-to-point send from each slice of one mesh axis to the slice ``k`` further along it, with no
wrap-around (JAX's ppermute with the pairs ``(i, i + k)`` that exist; a pipeline's stage boundary): its rule
(precondition, effect, moves), transpose, bytes and printed form, in one record.
"""

from __future__ import annotations

from dataclasses import replace

from shardalg.errors import IllegalCollective
from shardalg.notation.syntax import Op, Tensor

from ..layout import Axes, Layout
from ..mesh import Mesh
from . import shift
from .record import DimMap, Transpose
from .shared import show


def send_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
    shift.one_axis(Op.SEND, axes, "along one axis")
    (axis,) = axes
    if not any(axis in d.axes for d in t.dims):
        raise IllegalCollective(
            f"Send_{{{axis},k}} moves the block of each slice of {axis} to another; {show(t)} is not sharded "
            f"over {axis}, so the slices that receive nothing would hold zeros where their copy was",
            fix=f"shard the stage dim over {axis} (e.g. H[S_{axis}, B, D]), or use Shift_{{{axis},+1}} for a ring",
        )


def send_idle(lay: Layout, axes: Axes, offset: int | None, mesh: Mesh) -> bool:
    """Whether no block reaches another slice: an offset of 0, or one as long as the axis (every block is
    dropped; each slice receives zeros)."""
    n = mesh.known_group(axes)
    return offset == 0 or offset is not None and n is not None and abs(offset) >= n


# A Send is a Shift that does not wrap round: the same layout (effect), bytes (each device sends one block,
# |k| hops) and never a planner's move (it drops the last k blocks and puts zeros in the first k).
RECORD = replace(
    shift.RECORD,
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
    as_transpose="the cotangent is sent back to the slice the block came from",
    precondition=send_pre,
    idle=send_idle,
)
