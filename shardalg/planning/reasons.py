"""Why each step of a planned einsum is there: the one-line reasons of its preparing steps, its local product
and its finishing steps, and each plan's note.

The planner (:mod:`.einsum_plans`) and the optimum (:mod:`.optimum`) give their steps these reasons. The steps
with their reasons are pieces that the queries on one einsum share, so each is kept once made:

- a preparing sequence with the reasons of the axes it moves (:func:`prepared`), by the sequence, the reasons
  and the two tensors it links;
- a local product (:func:`product_step`), by its operands and result;
- a finishing sequence (:func:`finished`), by the sequence, the product, the requested result and the axes the
  operands brought in unreduced.

Each is keyed by the values it reads, the steps' reasons among them (a step's ``==`` leaves its reason out),
in a registered piece of the cache layer (:mod:`shardalg.cache`). A plan passes its values on by identity (the
schedule finds each step's producer without comparing tensors), so an answer made for equal objects is
handed out rewired to read and write the caller's own.
"""

from __future__ import annotations

from shardalg.algebra.einsum import Spec
from shardalg.algebra.layout import subscript
from shardalg.cache import Kind, Memo, memo
from shardalg.notation.plan import Step
from shardalg.notation.syntax import Op, Tensor

from .steps import _io, rewired

__all__ = [
    "einsum_reason",
    "finish_reason",
    "finished",
    "note",
    "prepared",
    "product_step",
    "reasoned",
    "with_reason",
]

# the steps with their reasons, by what they read
_PIECES: Memo = memo(f"{__name__}._PIECES", Kind.PIECE)


def with_reason(step: Step, why: str) -> Step:
    return Step(
        step.op, step.inputs, step.output, step.axes, step.dim, step.contract, step.local, why, step.offset
    )


def reasoned(step: Step, reasons: tuple[str, ...]) -> Step:
    """A preparing step's reason: why the axes it moves had to move (a Permute: which dims it re-lays)."""
    if step.op is Op.PERMUTE:
        before, after = step.inputs[0], step.output
        moved = [
            f"{d.label}_{subscript(d.axes)} -> {e.label}_{subscript(e.axes)}"
            for d, e in zip(before.dims, after.dims, strict=True)
            if d.axes != e.axes
        ]
        if not moved:
            return step  # it renames unreduced axes only: its own reason says so
        x, y = step.axes
        return with_reason(
            step,
            f"Permute into place: {', '.join(moved)} of {before.name}, each device taking its new shard whole "
            "from the device holding it "
            f"(swapping {x} and {y} keeps every device's local shape), instead of gathering and slicing",
        )
    why = "; ".join(dict.fromkeys(r for r in reasons if r))
    return with_reason(step, f"{step.op.value}: {why}") if why else step


def prepared(
    steps: tuple[Step, ...], whys: tuple[tuple[str, ...], ...], src: Tensor, dst: Tensor
) -> tuple[Step, ...]:
    """A preparing sequence from ``src`` to ``dst`` with ``whys`` (the reasons of each step's axes)."""
    key = (
        "prep",
        steps,
        tuple([s.reason for s in steps]),
        whys,
        src,
        dst,
    )  # a step's reason is not in its ==
    got = _PIECES.get(key)
    if got is None:
        got = _PIECES.keep(key, rewired(tuple(map(reasoned, steps, whys)), src, dst))
    return rewired(got, src, dst)


def einsum_reason(spec: Spec, left: Tensor, right: Tensor, out: Tensor) -> str:
    """The local product's reason: its case, and the partial sums it leaves or passes through."""
    summed = [(d, left.axes_of(d)) for d in spec.contracted if left.axes_of(d)]
    if summed:
        dims = ", ".join(d for d, _ in summed)
        axes = tuple(a for _, ax in summed for a in ax)
        return (
            f"case 3: both operands shard {dims} over {subscript(axes)}, so the local product is "
            f"{out.name}{{{', '.join('U_' + a for a in axes)}}}"
        )
    passed = [a for a in out.unreduced]
    tail = f"; partial sums over {subscript(passed)} pass through" if passed else ""
    if spec.contracted:
        return f"case 1: no contracted dim is sharded, so the local product needs no communication{tail}"
    return f"no contracted dim: a local product of the shards{tail}"


def product_step(spec: Spec, contract: tuple[str, ...], left: Tensor, right: Tensor, out: Tensor) -> Step:
    """The local product ``left · right -> out`` as a step (``contract``: the dims written under the dot)."""

    def make() -> Step:
        local = bool(set(out.unreduced) - set(left.unreduced) - set(right.unreduced))
        why = einsum_reason(spec, left, right, out)
        return Step(Op.EINSUM, (left, right), out, contract=contract, local=local, reason=why)

    key = ("mul", spec, contract, left, right, out)
    got = _PIECES.get(key)
    if got is None:
        got = _PIECES.keep(key, make())
    if got.inputs[0] is left and got.inputs[1] is right and got.output is out:
        return got  # type: ignore[no-any-return]
    return _io(got, (left, right), out)


def finish_reason(step: Step, out: Tensor, brought: frozenset[str], target: str) -> Step:
    """A finishing step's reason: a reduction of partial sums the operands ``brought`` in says so, a case-3
    reduction names the partial products, anything else the requested result (``target``, as text)."""
    ax = subscript(step.axes)
    if step.op in (Op.ALL_REDUCE, Op.REDUCE_SCATTER) and set(step.axes) <= brought:
        why = f"{step.op.value}: sum the partial sums over {ax} that the operands brought in"
        if step.dim is not None:
            why += f", leaving {step.dim} sharded over {ax}"
    elif step.op is Op.ALL_REDUCE:
        why = f"case 3 finish: AllReduce_{ax} sums the partial products of {out.name} over {ax}"
    elif step.op is Op.REDUCE_SCATTER:
        why = (
            f"case 3 finish: ReduceScatter_{{{','.join(step.axes)},{step.dim}}} sums the partials and leaves "
            f"{step.dim} sharded over {ax}"
        )
    else:
        why = f"{step.reason}, to reach the requested {target}"
    return with_reason(step, why)


def finished(
    steps: tuple[Step, ...], out: Tensor, target: Tensor, brought: frozenset[str]
) -> tuple[Step, ...]:
    """A finishing sequence from the product ``out`` to the requested ``target``, each step with its reason."""
    key = ("finish", steps, tuple([s.reason for s in steps]), out, target, brought)
    got = _PIECES.get(key)
    if got is None:
        made = tuple([finish_reason(s, out, brought, str(target)) for s in steps])
        got = _PIECES.keep(key, rewired(made, out, target))
    return rewired(got, out, target)


def note(steps: tuple[Step, ...], extra: str) -> str:
    """A plan's note: its communication in order (and ``extra``)."""
    parts = [f"{s.op.value}_{subscript(s.axes)}({s.inputs[0].name})" for s in steps if s.op is not Op.EINSUM]
    text = ", ".join(parts) if parts else "no communication"
    return f"{text}; {extra}" if extra else text
