"""Turning move sequences into Steps: the tensors each step reads and writes, and a one-line reason.

A search (:mod:`.search`) finds moves between canonical states; a plan needs Steps between named tensors,
each with the reason a reader sees. :func:`build_steps` does that, :func:`step_reason` words a resharding
step, and :func:`with_spare_axes` makes the variant of a plan that slices onto spare axes before a gather.
:func:`chain_steps` (a memoized :func:`build_steps`, passed on by identity with :func:`rewired`) and
:func:`local_product` keep the pieces that the plans of one einsum, its optimum and its other targets share.
"""

from __future__ import annotations

from shardalg.algebra.einsum import Spec, local_output_or_none
from shardalg.algebra.layout import Layout, subscript, tensor_with
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.ops import RECORDS, RULES
from shardalg.algebra.traffic import Sizes
from shardalg.cache import Kind, memoized
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Op, Tensor

from .space import Move

__all__ = [
    "build_steps",
    "chain_steps",
    "laid",
    "local_product",
    "placed",
    "rewired",
    "step_reason",
    "with_spare_axes",
]


def step_reason(op: Op, axes: tuple[str, ...], before: Tensor, after: Tensor, dim: str | None) -> str:
    """A one-line reason for a resharding step, in terms of the dims it touches (the op's record words it)."""
    return RECORDS[op].reason(axes, before, after, dim)


def build_steps(src: Tensor, dst: Tensor, moves: tuple[Move, ...]) -> tuple[Step, ...]:
    """The Steps of ``moves`` from ``src``; the last output is ``dst`` itself (invariant marks included)."""
    steps: list[Step] = []
    cur = src
    lay = Layout.of(src)
    for i, (name, axes, dim) in enumerate(moves):
        op = Op(name)
        nxt = RULES[op].effect(lay, axes, dim)
        used = set(a for d in nxt.dims for a in d) | set(nxt.unreduced)
        nxt = Layout(nxt.dims, nxt.unreduced, tuple(a for a in src.invariant if a not in used))
        out = dst if i == len(moves) - 1 else tensor_with(cur, nxt)
        label = cur.dims[dim].label if dim is not None else None
        steps.append(Step(op, (cur,), out, axes, label, reason=step_reason(op, axes, cur, out, label)))
        cur, lay = out, nxt
    return tuple(steps)


@memoized(Kind.PIECE)
def _chain(src: Tensor, dst: Tensor, moves: tuple[Move, ...]) -> tuple[Step, ...]:
    return build_steps(src, dst, moves)


def chain_steps(src: Tensor, dst: Tensor, moves: tuple[Move, ...]) -> tuple[Step, ...]:
    """:func:`build_steps`, memoized by equal tensors and moves (one operand's resharding, which queries on
    the same operand share), reading ``src`` itself and writing ``dst`` itself."""
    if not moves:
        return ()
    return rewired(_chain(src, dst, moves), src, dst)


@memoized(Kind.PIECE)
def local_product(left: Tensor, right: Tensor, spec: Spec, mesh: Mesh, name: str | None) -> Tensor | None:
    """:func:`shardalg.algebra.einsum.local_output_or_none`, memoized by equal tensors: the local product of two
    compute layouts (the plans of one einsum for other targets, and its optimum, multiply the same pairs)."""
    return local_output_or_none(left, right, spec, mesh, name)


def source_spans(t: Tensor) -> tuple[object, ...]:
    """Where ``t`` and its dims were written: part of the key of a memo that hands back a tensor made from
    ``t`` (spans take no part in ``==``, so without them an equal tensor of another text would come back,
    carrying that text's positions)."""
    return (t.span, *(d.span for d in t.dims))


def placed(
    t: Tensor, places: tuple[tuple[str, str], ...], orders: tuple[tuple[str, ...], ...], axes: tuple[str, ...]
) -> Tensor:
    """``t`` with each mesh axis of ``axes`` placed as ``places`` says: ``("S", dim)`` shards that dim,
    ``("U", "")`` leaves partial sums, ``("R", "")`` replicates. A dim keeps the axes it had that stay on it;
    axes new to a dim go minor-most, in the order of the dim's entry in ``orders`` (the other operand's or
    the result's axes of that dim), then in mesh order. Memoized by equal tensors written at the same places
    (one operand in one compute layout: the candidates of an einsum, and of its other targets, place the same
    operands)."""
    return _placed(t, source_spans(t), places, orders, axes)


@memoized(Kind.PIECE)
def _placed(
    t: Tensor,
    spans: tuple[object, ...],
    places: tuple[tuple[str, str], ...],
    orders: tuple[tuple[str, ...], ...],
    axes: tuple[str, ...],
) -> Tensor:
    dims = []
    for d, order in zip(t.dims, orders, strict=True):
        here = ("S", d.label)
        kept = tuple([a for a in d.axes if places[axes.index(a)] == here])
        new = [a for a, pl in zip(axes, places, strict=True) if pl == here and a not in kept]
        if new:
            new.sort(key=lambda a: (order.index(a) if a in order else len(order), axes.index(a)))
        dims.append(kept + tuple(new))
    unreduced = tuple(sorted([a for a, pl in zip(axes, places, strict=True) if pl == ("U", "")]))
    invariant = tuple([a for a in t.invariant if places[axes.index(a)] == ("R", "")])
    return tensor_with(t, Layout(tuple(dims), unreduced, invariant))


def laid(t: Tensor, dims: tuple[tuple[str, ...], ...], unreduced: tuple[str, ...]) -> Tensor:
    """``t`` sharded as ``dims`` and unreduced over ``unreduced``, with no invariant axes (a search state's
    tensor); memoized by equal tensors written at the same places (the optimum of an einsum, and of its other
    targets, lays out the same states)."""
    return _laid(t, source_spans(t), dims, unreduced)


@memoized(Kind.PIECE)
def _laid(
    t: Tensor, spans: tuple[object, ...], dims: tuple[tuple[str, ...], ...], unreduced: tuple[str, ...]
) -> Tensor:
    return tensor_with(t, Layout(dims, unreduced, ()))


def rewired(steps: tuple[Step, ...], src: Tensor, dst: Tensor) -> tuple[Step, ...]:
    """The sequence reading ``src`` itself and writing ``dst`` itself. A memoized sequence holds the equal
    tensors of the call that made it; rewired, a plan passes its values on by identity (the schedule then
    finds each step's producer without comparing tensors)."""
    if not steps or (steps[0].inputs[0] is src and steps[-1].output is dst):
        return steps
    out = list(steps)
    out[0] = _io(out[0], (src,), out[0].output)
    out[-1] = _io(out[-1], out[-1].inputs, dst)  # of a one-step sequence, the step just rewired
    return tuple(out)


def _io(step: Step, inputs: tuple[Tensor, ...], output: Tensor) -> Step:
    """``step`` reading and writing these objects, equal to its own (the searches are memoized by equal
    tensors; a test checks every plan's values chain)."""
    return Step(
        step.op, inputs, output, step.axes, step.dim, step.contract, step.local, step.reason, step.offset
    )


def with_spare_axes(p: Plan, mesh: Mesh, sizes: Sizes) -> Plan | None:
    """The plan with each single-dim AllGather preceded by a free slice onto the spare replicated axes,
    so the gather runs over more axes (more links, same bytes: the book's question 2); None when no
    gather has a spare axis. Each gather's answer is memoized by the gather step's value (plans share
    steps, and so do the queries on one einsum, see :mod:`.reasons`), rewired to read and write its own."""
    steps: list[Step] = []
    changed = False
    for s in p.steps:
        if s.op is not Op.ALL_GATHER:
            spared = None
        else:
            spared = _spared(s, s.reason, mesh, sizes)  # a step's == leaves its reason out
            if spared is not None:
                spared = rewired(spared, s.inputs[0], s.output)  # type: ignore[assignment]
        if spared is None:
            steps.append(s)
        else:
            steps.extend(spared)
            changed = True
    if not changed:
        return None
    return Plan(p.inputs, tuple(steps), p.output, p.cases, note=p.note + "; spare axes sliced first")


@memoized(Kind.PIECE)
def _spared(s: Step, reason: str, mesh: Mesh, sizes: Sizes) -> tuple[Step, Step] | None:
    """A gather off one dim as a free slice onto the spare axes, then the gather over more axes (or None)."""
    t = s.inputs[0]
    found = _spare_slice(t, s.axes, mesh, sizes)
    if found is None:
        return None
    sliced, spare, label, why = found
    gather_why = (reason or "AllGather") + f" (over {subscript(s.axes + spare)})"
    return (
        Step(Op.SLICE, (t,), sliced, spare, label, reason=why),
        Step(Op.ALL_GATHER, (sliced,), s.output, s.axes + spare, reason=gather_why),
    )


@memoized(Kind.PIECE)
def _spare_slice(
    t: Tensor, axes: tuple[str, ...], mesh: Mesh, sizes: Sizes
) -> tuple[Tensor, tuple[str, ...], str, str] | None:
    """Before gathering ``axes`` of ``t`` off one dim: ``t`` sliced onto the spare axes, the spare axes, the
    dim and the slice's reason (or None: no spare axis, not one dim, or the slice does not divide). Memoized
    by equal tensors (the plans of one einsum, and its other targets, gather the same operands)."""
    used = set(t.unreduced).union(*[d.axes for d in t.dims])
    spare = tuple([a for a in mesh.names if a not in used])
    if not spare:
        return None
    gathered = set(axes)
    holders = [i for i, d in enumerate(t.dims) if not gathered.isdisjoint(d.axes)]
    if len(holders) != 1:
        return None
    i = holders[0]
    d = t.dims[i]
    dims = tuple([e.axes + spare if k == i else e.axes for k, e in enumerate(t.dims)])
    sliced = tensor_with(t, Layout(dims, t.unreduced, tuple([a for a in t.invariant if a not in spare])))
    if not sizes.check_divisible(sliced, mesh, dims):
        return None
    why = f"Slice: shard {d.label} over the spare {subscript(spare)} first (free), so the gather uses more links"
    return sliced, spare, d.label, why
