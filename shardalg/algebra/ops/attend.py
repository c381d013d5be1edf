"""A block of attention, its softmax statistics rescaled online: ``attend_{S,k}(Q, K, V[, O]) -> O``, the step of
ring attention (and flash attention's inner loop), as one record.

    attend_{S,k}: Q[B, T_A, H, E] · K[B, S_A, H, E] · V[B, S_A, H, E] (· O[B, T_A, H, E]) -> O[B, T_A, H, E]
    on A=4, k=1 (K and V passed once round the ring by Shift_{A,+1}):
        device a: queries of block a against the keys and values of block a − 1 (mod 4)
    each device takes its queries against the one K, V block it holds: scores Q·Kᵀ (E contracted), their
    row max and sum (fp32), P·V; with a fourth operand (the state so far) it rescales the state's rows and
    this block's to their common max and adds them. The state O is the attention over the blocks seen so
    far (normalized), carrying its rows' log-sum-exp (fp32, one a row) on the device: it never moves.

The operands' last dim is the head dim E (contracted in the scores, kept in O); the key dim is the ``S`` of
the subscript, the query dim the one dim of Q that K lacks. The query and key dims are sharded over the same
axes (or the key dim is whole: every device holds every key), the other dims alike in all operands, E whole, none unreduced. ``k`` says which keys a
device holds (the block k devices back round the ring): with ``causal`` the keys after each query are
masked (query t sees keys s <= t + |S| − |T|), so a device knows its keys' positions. FLOPs: the two
products of the block, 4·|B||T||H||E||S| over the devices' blocks (halved with ``causal``: the masked
blocks are skipped, as a balanced (zigzag) layout lets every device skip half).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shardalg.errors import IllegalOperand
from shardalg.notation.syntax import Op, Tensor

from ..layout import Axes, subscript, validate
from ..mesh import Mesh
from .function import FunctionRecord, Kind, function_record

__all__ = ["RECORD", "GRAD_RECORD", "AttendRecord", "AttendGradRecord", "roles", "gradient_of"]


def roles(operands: Sequence[Tensor], dim: str) -> tuple[str, str]:
    """(the query dim, the head dim) of ``attend_S``'s operands, or IllegalOperand naming what is wrong."""
    q, k = operands[0], operands[1]
    if dim not in k.dim_names or dim in q.dim_names:
        raise IllegalOperand(
            f"attend_{dim} works along the key dim {dim}: K ({k}) has it and Q ({q}) does not", span=q.span
        )
    own = [d for d in q.dim_names if d not in k.dim_names]
    if len(own) != 1:
        raise IllegalOperand(f"Q ({q}) has {len(own)} dims K lacks; it has one, the query dim", span=q.span)
    head = q.dims[-1].label
    if k.dims[-1].label != head or operands[2].dims[-1].label != head:
        raise IllegalOperand(f"Q, K and V end in the same head dim, {head}", span=k.span)
    return own[0], head


@dataclass(frozen=True, kw_only=True)
class AttendRecord(FunctionRecord):
    """The block of attention's record: three operands (the state starts), or four (the state goes on); its
    step, as every function's (:meth:`FunctionRecord.apply`), all-reduces nothing (it has no statistics)."""

    def takes(self, n: int) -> bool:
        return n in (3, 4)

    def result(self, operands: Sequence[Tensor], dim: str | None, flags: tuple[str, ...] = ()) -> Tensor:
        if len(operands) not in (3, 4):
            raise IllegalOperand(f"attend takes Q, K, V and the state so far (optional), not {len(operands)}")
        if dim is None:
            raise IllegalOperand("attend names its key dim: attend_{S,0}(Q, K, V)")
        q, k, v = operands[:3]
        query, head = roles(operands, dim)
        if k.dim_names != v.dim_names or k.layout()[:2] != v.layout()[:2]:
            raise IllegalOperand(f"K ({k}) and V ({v}) have the same dims, laid out alike", span=v.span)
        for t in operands:
            if t.unreduced:
                raise IllegalOperand(
                    f"{t} is unreduced: attention is not linear in it",
                    fix=f"AllReduce_{subscript(tuple(t.unreduced))}({t}) first",
                    span=t.span,
                )
        if k.axes_of(dim) and q.axes_of(query) != k.axes_of(dim):
            raise IllegalOperand(
                f"a device pairs its block of queries with its block of keys: {query} and {dim} are sharded "
                f"over the same axes (or {dim} is whole), not {subscript(q.axes_of(query)) or 'none'} and "
                f"{subscript(k.axes_of(dim))}",
                fix="gather the keys and values (AllGather), or shard both the same way",
                span=k.span,
            )
        if q.axes_of(head) or k.axes_of(head):
            raise IllegalOperand(
                f"the head dim {head} is contracted in the scores: keep it whole", span=q.span
            )
        for d in q.dim_names:
            if d in k.dim_names and d != head and q.axes_of(d) != k.axes_of(d):
                raise IllegalOperand(f"Q and K shard {d} differently", span=k.span)
        if len(operands) == 4 and operands[3].layout()[:2] != q.layout()[:2]:
            raise IllegalOperand(f"the state {operands[3]} is laid out as Q ({q})", span=operands[3].span)
        if len(operands) == 4 and operands[3].dim_names != q.dim_names:
            raise IllegalOperand(f"the state {operands[3]} has Q's dims ({q})", span=operands[3].span)
        return Tensor(None, q.dims, (), (), q.dtype)


RECORD = function_record(
    Op.ATTEND,
    __doc__.split("\n\n")[1].strip(),  # the signature and the picture above
    arity=3,
    shape=Kind.COMPOSITE,
    dense=lambda xs, axis, c: xs[0],  # never read: the executor's movement of a block (numeric.attention)
    statistics=(),
    vector_flops=5,
    transpose_note=(
        "a chain of blocks is attention over the union of their keys: its backward is one attend' per block "
        "(dq, dk, dv), each from the forward's final O and its rows' log-sum-exp"
    ),
    kind=AttendRecord,
)


def gradient_of(flags: Sequence[str]) -> str:
    """Which gradient a block's backward writes: ``dq``, ``dk`` or ``dv``."""
    return next((f for f in flags if f in ("dq", "dk", "dv")), "dq")


@dataclass(frozen=True, kw_only=True)
class AttendGradRecord(FunctionRecord):
    """A block of attention's backward: ``attend'_{S,dq|dk|dv,k}(Q, K, V, O, dO)``, flash attention's
    backward on one block. From the forward's final ``O`` and its rows' log-sum-exp L (kept beside O on the
    device) it remakes the block's probabilities ``P = exp(Q·Kᵀ − L)``, and with ``D = sum_E(dO ⊙ O)``:
    ``dV = Pᵀ·dO``, ``dS = P ⊙ (dO·Vᵀ − D)``, ``dQ = dS·K``, ``dK = dSᵀ·Q``. The subscript's flag says which
    of the three it writes (``dq``: Q's layout; ``dk``, ``dv``: the block's, K's). FLOPs: its products, 2
    (dv: the scores and Pᵀ·dO) or 3 (dq, dk: the scores, dO·Vᵀ and one more), each the size of one of the
    forward block's two; a fused kernel that writes all three shares the first two (5 in all, not 8)."""

    def takes(self, n: int) -> bool:
        return n == 5

    def apply(
        self,
        operands: Sequence[Tensor],
        dim: str | None,
        mesh: Mesh,
        axes: Axes = (),
        name: str | None = None,
        flags: Sequence[str] = ("dq",),
    ) -> Tensor:
        for t in operands:
            validate(t, mesh)
        if tuple(axes):
            raise IllegalOperand("a block of attention's backward reduces nothing across devices: no axes")
        out = self.grad_result(operands, dim, gradient_of(flags))
        return Tensor(name, out.dims, out.unreduced, (), out.dtype)

    def result(self, operands: Sequence[Tensor], dim: str | None, flags: tuple[str, ...] = ()) -> Tensor:
        return self.grad_result(operands, dim, gradient_of(flags))

    def grad_result(self, operands: Sequence[Tensor], dim: str | None, which: str) -> Tensor:
        if len(operands) != 5:
            raise IllegalOperand(f"attend' takes Q, K, V, O and dO, not {len(operands)} operands")
        q, k = operands[0], operands[1]
        RECORD.result(operands[:3], dim)  # Q, K and V meet as a forward block's do
        for t in operands[3:]:
            if t.dim_names != q.dim_names or t.layout()[:2] != q.layout()[:2]:
                raise IllegalOperand(f"{t} has Q's dims and layout ({q})", span=t.span)
        like = q if which == "dq" else k
        query, _ = roles(operands, dim)  # type: ignore[arg-type]
        # whole keys (every device holds every key): each device's share of dK, dV is a partial sum
        partial = q.axes_of(query) if which != "dq" and not k.axes_of(dim) else ()  # type: ignore[arg-type]
        return Tensor(None, like.dims, tuple(partial), (), like.dtype)


GRAD_RECORD = function_record(
    Op.ATTEND_D,
    "attend': [Q, K, V, O, dO] -> [dQ | dK | dV]   one block's flash backward from O's row statistics",
    arity=5,
    shape=Kind.COMPOSITE,
    dense=lambda xs, axis, c: xs[0],  # never read: the executor's movement of a block (numeric.attention)
    statistics=(),
    vector_flops=5,
    transpose_note="a derivative: the backward of the backward is not derived (first-order only)",
    kind=AttendGradRecord,
)
