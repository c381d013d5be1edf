"""The gradients of a function statement of the forward (issue 26 item 4), in the notation, each planned by the
planner as the gradient einsums are.

For ``f(X) -> Y`` with cotangent ``dY`` (the gradient of Y so far, in Y's sharding with its partial sums
reduced: a ``{U_X}`` result's cotangent is replicated):

- a nonlinear function or a reduction writes its derivative, ``f'(X, dY) -> dX`` (:mod:`shardalg.algebra.ops
  .derivatives`), which reads the forward's ``X`` (softmax's reads its result ``P``): elementwise in the layout
  the two meet in; over a sharded dim the derivative's step all-reduces its statistics as the forward's does
  (or the planner gathers the dim, whichever is cheaper);
- a scale writes ``scale_c(dY) -> dX``; a rename writes the rename back, ``rename_{S,T}(dY) -> dX``;
- ``+`` and ``-`` pass the cotangent on (``scale_{-1}`` of it to the right of a ``-``), and ``⊙`` multiplies it
  by the other operand; an operand broadcast over a dim gets the sum over that dim (``sum_D``; over a sharded D
  a partial sum the planner reduces into the gradient's sharding).

A cotangent passed on unchanged in the gradient's own sharding is not copied: the gradient *is* that tensor
(``borrowed``); a second contribution to a borrowed gradient is written as ``+`` of the two.

A value a rename (or a scale) made, read by one product, may keep its gradient a sum of partials
(:func:`passes_partial_sums`): the cotangent of a replicated value is unreduced (the transpose rule,
``R <-> U``), and the function's gradient, linear in it, carries the partial sums to its own plan, which
reduces them into the operand's sharding. Where the forward gathered the operand (sequence parallelism's
``rename_{T,S}(Kp[B, T_X]) -> K[B, S]``) that is a ``ReduceScatter``, the transpose of the gather, where the
gradient einsum would have all-reduced and sliced.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Protocol

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.ops.derivatives import DERIVATIVE
from shardalg.algebra.ops.function import Kind
from shardalg.algebra.registry import RECORDS
from shardalg.errors import IllegalOperand, UsageError
from shardalg.notation.op import ROUTES
from shardalg.notation.printing import unicode
from shardalg.notation.syntax import Apply, Arrow, Expr, Op, Tensor

from .forward import Call, Einsum, Forward, grad_name


class _Backward(Protocol):
    """What the gradients of a function need of the backward's state (:class:`.backward._Backward`)."""

    fw: Forward
    grad: dict[str, Tensor]
    mesh: Mesh
    sizes: dict[str, int]

    def emit(self, index: int, rx: str, statement: Arrow, reason: str) -> Tensor: ...

    def contribute(self, index: int, rx: str, expr: Apply, reason: str) -> None: ...

    def pass_on(self, index: int, rx: str, dy: Tensor, reason: str) -> None: ...


__all__ = ["call_gradients", "passes_partial_sums"]

# the functions whose gradient is the same function of the cotangent alone, in its layout (``_first``)
_SELF_TRANSPOSED = (Kind.RENAME, Kind.ELEMENTWISE)


def passes_partial_sums(fw: Forward, r: str) -> bool:
    """Whether the gradient of global value ``r`` may stay unreduced on the axes ``r`` is replicated over: a
    function of one operand, linear and keeping the layout (a rename, a scale), made ``r``, so its gradient
    (the rename back, the scale) is linear in the cotangent alone and is planned from partial sums as well as
    from their sum; and one product reads ``r``, once, so its gradient einsum is the gradient's one part and
    is planned to either target, the cheaper chosen (a second part would have to meet the first's layout,
    which a product without a contracted dim cannot leave unreduced). The reduction happens once, in the
    function's gradient's plan, where it is cheapest."""
    makers = [n for n in fw.nodes if isinstance(n, Call) and n.roots[-1] == r]
    readers = [n for n in fw.nodes if r in n.roots[:-1]]
    if (
        not makers
        or len(readers) != 1
        or not isinstance(readers[0], Einsum)
        or readers[0].roots[0] == readers[0].roots[1]
    ):
        return False
    rec = RECORDS[makers[0].apply.op]
    return bool(getattr(rec, "linear", False)) and rec.operands == 1 and rec.shape in _SELF_TRANSPOSED


def _first(state: _Backward, c: Call, i: int, dy: Tensor) -> Expr:
    """Operand ``i``'s share of the gradient before any sum over a dim it was broadcast along (``dy`` itself
    when the cotangent passes on unchanged)."""
    a, operand = c.apply, c.operands[i]
    if a.op in ROUTES:
        raise UsageError(
            f"the backward of {a.op.value} (a MoE routing) is not derived: its transpose is "
            f"{'combine' if a.op is Op.DISPATCH else 'dispatch'} of the cotangent, with the gates' gradient "
            "through the router, which the backward does not write yet",
            fix="price the forward alone (step --mode infer)",
        )
    if a.op in DERIVATIVE:
        primal = c.out if a.op is Op.SOFTMAX else state.fw.stored(operand)
        return Apply(DERIVATIVE[a.op], (primal, dy), a.dim)
    if a.op is Op.SCALE:
        return Apply(Op.SCALE, (dy,), factor=a.factor)
    if a.op is Op.RENAME:  # the rename back: the cotangent's dim called by the operand's name
        return Apply(Op.RENAME, (dy,), a.to, flags=(a.dim,))
    if a.op is Op.SUBTRACT and i == 1:
        return Apply(Op.SCALE, (dy,), factor=Fraction(-1))
    if a.op is Op.MULTIPLY:
        other = state.fw.stored(c.operands[1 - i])
        return Apply(Op.MULTIPLY, (dy, other) if i == 0 else (other, dy))
    return dy


def _natural(expr: Apply, name: str, dy: Tensor) -> Tensor:
    """The result of ``expr`` in the layout its operands give it, named. Where they do not meet (the product
    rule's ``dV .* In`` with ``In`` as the forward stored it, in another sharding than the cotangent ``dy``,
    which the forward's plan resharded), the cotangent's layout: the planner reshards the other operand into
    it, as the forward's plan did."""
    try:
        got = RECORDS[expr.op].result(expr.operands, expr.dim, expr.flags)
    except IllegalOperand:
        if expr.op is not Op.MULTIPLY:
            raise
        return Tensor(name, dy.dims, dy.unreduced, (), dy.dtype)
    return Tensor(name, got.dims, got.unreduced, (), got.dtype)


def call_gradients(state: _Backward, c: Call) -> None:
    """Every operand's gradient of one function statement, in operand order; with the cotangent still partial
    sums (reductions deferred), an operand broadcast over a dim first: its gradient reads the partial sums
    (``N .* dH{U_Y}``, summed over B, then reduced once), which the other's plan may reduce (``AllReduce_Y`` of
    ``dH`` for ``dH .* G``), and a reduction leaves only its output (:mod:`.held`)."""
    dy = state.grad[c.roots[-1]]
    note = RECORDS[c.apply.op].transpose.note.replace("{dim}", c.apply.dim or "")  # the dim this one is along
    renamed = c.apply.to
    broadcast = {
        i: [d for d in dy.dim_names if d not in c.operands[i].dim_names and d != renamed]
        for i in range(len(c.roots) - 1)
    }
    order = sorted(broadcast, key=lambda i: not broadcast[i]) if dy.unreduced else list(broadcast)
    for i in order:
        rx = c.roots[i]
        reason = f"gradient of statement {c.index + 1} ({unicode(c.statement)}) for {rx}: {note}"
        first = _first(state, c, i, dy)
        summed = _largest_first(dy, broadcast[i], state)
        chain: list[Apply] = [first] if isinstance(first, Apply) else []
        value: Tensor = dy
        for d in summed:
            if chain:  # the value so far, named, then summed over d
                value = state.emit(
                    c.index, rx, Arrow(chain[-1], _natural(chain[-1], _temp(rx, chain), dy)), reason
                )
            chain.append(Apply(Op.SUM, (value,), d))
        if chain:
            state.contribute(c.index, rx, chain[-1], reason)
        else:
            state.pass_on(c.index, rx, dy, reason)


def _largest_first(dy: Tensor, summed: list[str], state: _Backward) -> list[str]:
    """The broadcast dims to sum over, the one with the most elements on each device first (then in ``dy``'s
    order), so each sum's intermediate is the smallest the one-dim sums allow: a reduction over several dims
    is one pass over the cotangent (as a fused kernel reads it once), and summing a sharded dim first would
    leave an intermediate as large as the whole of the other dims (``sum_B`` of ``dy[B_X, T, D]`` is ``T*D``
    per device, ``sum_T`` of it ``B*D/X``), making one sharding's gradient dearer than another's for nothing.
    In ``dy``'s order where a size is not known."""
    if len(summed) < 2:
        return summed
    local: dict[str, float] = {}
    for d in dy.dims:
        if d.name in summed:
            n = d.size if d.size is not None else state.sizes.get(d.name)
            if not isinstance(n, int) or any(state.mesh[a].size is None for a in d.axes):
                return summed
            for a in d.axes:
                n //= state.mesh.size(a)
            local[d.name] = n
    return sorted(summed, key=lambda d: -local[d])


def _temp(rx: str, chain: list[Apply]) -> str:
    """An intermediate's name: the gradient's, primed once per statement before it."""
    return grad_name(rx) + "'" * len(chain)
