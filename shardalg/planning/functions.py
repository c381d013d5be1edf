"""Plans for a function of the notation (issue 26): elementwise, a reduction over a named dim, softmax, a norm.

A plan reshards each operand into a *compute layout* (redistribute's cheapest sequence), applies the function on
every device's blocks (one step; over a sharded dim a composite's or a max's step all-reduces its per-row
statistics over the dim's axes), then reshards the result to the requested one. The compute layouts tried:
each operand as it is; with its partial sums reduced (a nonlinearity needs them whole); with the dim the
function works along gathered (the other way to meet a sharded dim: no statistics to reduce, more bytes to
move); one operand's layout for the other (operands meet in one layout, as einsum operands do); and the
requested result's layout (computing where the result lives: an elementwise function of a partial sum
reduce-scattered first works on a shard). Each compute layout is tried once (the ways above often name the same
one); legal plans are deduplicated and ranked by the planner's key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any

from shardalg.algebra.layout import Layout, subscript, tensor_with
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.ops.function import FunctionRecord, Kind
from shardalg.algebra.ops.route import RouteRecord
from shardalg.algebra.registry import RECORDS
from shardalg.algebra.traffic import Sizes
from shardalg.errors import IllegalOperand, NoPlan, ShardalgError, UsageError
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Apply, Dim, Tensor

from .order import sort_plans
from .planset import Limits, Plans
from .redistribute import redistribute

__all__ = ["function_plans", "free_plan", "reason"]


def _project(t: Tensor, ref: Tensor, keep_partial: bool) -> Tensor:
    """``t`` laid out as ``ref`` on the dims they share; its other dims keep their axes where ``ref`` does not
    use them; its partial sums kept (when ``keep_partial``) where ``ref`` has them too."""
    used = {a for d in ref.dims for a in d.axes} | set(ref.unreduced)
    dims = []
    for d in t.dims:
        if d.label in ref.dim_names:
            dims.append(ref.axes_of(d.label))
        else:
            dims.append(tuple(a for a in d.axes if a not in used))
    partial = tuple(a for a in t.unreduced if keep_partial and a in ref.unreduced)
    return tensor_with(t, Layout(tuple(dims), partial, ()))


def _whole(t: Tensor, dim: str | None) -> Tensor:
    """``t`` with no partial sums, and ``dim`` (if any) unsharded."""
    dims = tuple(() if d.label == dim else d.axes for d in t.dims)
    return tensor_with(t, Layout(dims, (), ()))


def _renamed_back(result: Tensor, to: str, dim: str | None) -> Tensor:
    """A rename's requested result with its new dim called by the operand's name again."""
    dims = tuple(Dim(dim, d.axes) if d.label == to else d for d in result.dims)
    return tensor_with(Tensor(result.name, dims, (), (), result.dtype), Layout.of(result))


def _candidates(
    rec: FunctionRecord, body: Apply, ops: tuple[Tensor, ...], result: Tensor | None
) -> Iterator[tuple[Tensor, ...]]:
    dim = body.dim
    if isinstance(rec, RouteRecord):  # routed as the tokens are written: their sharding is the groups
        yield from rec.compute_layouts(ops)
        return
    if len(ops) == 1:
        (t,) = ops
        yield (t,)
        yield (_whole(t, None),)
        if dim is not None:
            yield (_whole(t, dim),)
        if result is not None and body.to is not None:  # a rename: the dim already as its new name wants it
            yield (_project(t, _renamed_back(result, body.to, dim), True),)
        if result is not None:
            for keep in (True, False):
                yield (_project(t, result, keep),)
                if dim is not None:
                    yield (_whole(_project(t, result, keep), dim),)
        return
    left, right = ops
    refs = [left, right, _whole(left, None), _whole(right, None)]
    if dim is not None:  # a derivative over a dim: also with the dim gathered (no statistics to reduce)
        refs.append(_whole(left, dim))
    if result is not None:
        refs.append(result)
    for ref in refs:
        for keep in (True, False):
            yield (_project(left, ref, keep), _project(right, ref, keep))


def reason(
    rec: FunctionRecord,
    inputs: tuple[Tensor, ...],
    dim: str | None,
    axes: tuple[str, ...],
    to: str | None = None,
) -> str:
    """The one-line reason of a function's step (``to``: a rename's new name for ``dim``)."""
    fn = rec.op.value
    if rec.shape == Kind.ROUTE:
        return _route_reason(rec, inputs, dim)
    if rec.shape == Kind.RENAME:
        where = f"{dim}_{subscript(inputs[0].axes_of(dim))}" if dim and inputs[0].axes_of(dim) else dim
        return f"rename: {where} called {to}, each device's block unchanged, nothing moved"
    if rec.shape == Kind.ELEMENTWISE and rec.derivative_of is not None:
        return (
            f"{fn}: the cotangent times {rec.derivative_of}'s derivative, elementwise on each device's block"
        )
    if rec.shape == Kind.ELEMENTWISE:
        partial = sorted({a for t in inputs for a in t.unreduced})
        extra = (
            f"; linear, so the partial sums over {subscript(tuple(partial))} stay partial" if partial else ""
        )
        return f"{fn}: elementwise on each device's block{extra}"
    t = inputs[0]
    sharded = t.axes_of(dim) if dim is not None else ()
    if rec.shape == Kind.DERIVATIVE and not rec.statistics:
        where = f"{dim}_{subscript(sharded)}" if sharded else dim
        return (
            f"{fn} over {where}: the cotangent broadcast along {dim} on each device's block, no communication"
        )
    if not sharded:
        return f"{fn} over {dim}: {dim} is whole on each device, no communication"
    if not rec.statistics:
        return (
            f"{fn} over {dim}_{subscript(sharded)}: each device reduces its block; the result is a partial sum "
            f"over {subscript(sharded)}"
        )
    stats = " and ".join(rec.statistics)
    return (
        f"{fn} over {dim}_{subscript(sharded)}: each device takes the per-row {stats} of its block, "
        f"AllReduce_{subscript(axes)} of them (fp32, {len(rec.statistics)} per row), then finishes its block"
    )


def function_plans(
    body: Apply,
    result: Tensor | None,
    mesh: Mesh,
    sizes: Sizes,
    key: Callable[[Plan], Any],
    weigh: Callable[[Step], float] | None,
    limits: Limits,
) -> Plans:
    """Every plan found for ``body`` (its operands tensors) to ``result`` (None: the natural result), ranked."""
    if not all(isinstance(x, Tensor) for x in body.operands):
        raise UsageError(
            f"plan takes {body.op.value} of tensors; write nested operations as separate statements"
        )
    rec: FunctionRecord = RECORDS[body.op]
    ops: tuple[Tensor, ...] = body.operands  # type: ignore[assignment]
    name = result.name if result is not None else None
    found: dict[tuple, Plan] = {}
    refused: list[str] = []

    def leg(src: Tensor, dst: Tensor) -> tuple[Step, ...] | None:
        if src.layout() == dst.layout():
            return ()
        try:
            got = redistribute(src, dst, mesh, sizes.known, limit=1, key=key, weigh=weigh, limits=limits)
        except ShardalgError:
            return None
        return got[0].steps if got else None

    for cand in dict.fromkeys(_candidates(rec, body, ops, result)):  # each compute layout once (many repeat)
        made = _computed(rec, body, cand, name, mesh, sizes)
        if isinstance(made, str):
            refused.append(made)
            continue
        if made is None:
            continue
        legs = [leg(src, dst) for src, dst in zip(ops, cand, strict=True)]
        if any(steps is None for steps in legs):
            continue
        step, out = made
        finish: tuple[Step, ...] = ()
        final = out
        if result is not None and out.layout() != result.layout():
            got = leg(out, tensor_with(out, Layout.of(result)))
            if got is None:
                continue
            finish = got
            final = finish[-1].output if finish else out
        steps = tuple(s for steps in legs for s in steps or ()) + (step,) + finish
        plan = Plan(ops, steps, final, note=_note(steps, step))
        found.setdefault(tuple(s.signature for s in steps), plan)
    if not found:
        why = refused[0] if refused else "no compute layout reaches the requested result"
        raise NoPlan(f"no plan for {body}: {why}")
    plans = list(found.values())
    sort_plans(plans, key)
    return Plans(plans)


def _computed(
    rec: FunctionRecord, body: Apply, cand: tuple[Tensor, ...], name: str | None, mesh: Mesh, sizes: Sizes
) -> tuple[Step, Tensor] | str | None:
    """The function's step on the compute layout ``cand`` and its output; the refusal's message when the
    operands cannot meet there; None when a known dim does not divide."""
    try:
        axes = rec.stats_axes(cand[0], body.dim) if rec.shape != Kind.ELEMENTWISE else ()
        out = rec.apply(cand, body.dim, mesh, axes, name, body.flags)
        if isinstance(rec, RouteRecord):
            rec.check_sizes(cand, body.dim, body.offset or 0, body.factor or Fraction(0), sizes.known)
    except IllegalOperand as err:
        return err.message
    if sizes.known or any(d.size is not None for t in cand for d in t.dims):
        try:
            sizes.require_divisible(out, mesh)
            for t in cand:
                sizes.require_divisible(t, mesh)
        except ShardalgError:
            return None
    step = Step(
        body.op,
        cand,
        out,
        axes,
        body.dim,
        offset=body.offset if body.op.takes_offset else None,
        factor=body.factor,
        reason=reason(rec, cand, body.dim, axes, body.to) + _flags_said(body.flags),
        flags=body.flags,
    )
    return step, out


def free_plan(body: Apply, result: Tensor | None, mesh: Mesh, sizes: Sizes) -> Plan | None:
    """The plan of ``body`` that communicates nothing, in one step on its operands as they are, when they are
    one of its compute layouts and the step's result is ``result`` as requested. By bytes, then steps, no
    plan ranks before it: every plan takes the function's step, and any other compute layout needs at least
    one more to reach; so it is the first of :func:`function_plans` under the default ranking, found without
    planning the other compute layouts. None otherwise (then plan them all)."""
    if not all(isinstance(x, Tensor) for x in body.operands):
        return None
    rec: FunctionRecord = RECORDS[body.op]
    ops: tuple[Tensor, ...] = body.operands  # type: ignore[assignment]
    try:
        if ops not in _candidates(rec, body, ops, result):
            return None
        made = _computed(rec, body, ops, result.name if result is not None else None, mesh, sizes)
    except ShardalgError:
        return None  # planned in full, to fail as it does there
    if not isinstance(made, tuple):
        return None
    step, out = made
    if step.communicates or (result is not None and out.layout() != result.layout()):
        return None
    return Plan(ops, (step,), out, note=_note((step,), step))


def _route_reason(rec: FunctionRecord, inputs: tuple[Tensor, ...], dim: str | None) -> str:
    """A routing step's reason: where each device's tokens go, and that it moves nothing."""
    r = rec.roles(inputs, dim)  # type: ignore[attr-defined]
    where = (
        f"its share {r.capacity}/{subscript(r.groups)} of each expert's slots"
        if r.groups
        else f"each expert's {r.capacity} slots"
    )
    if rec.op.value == "dispatch":
        return (
            f"dispatch: each device sends its tokens to their top-k experts, into {where}; no communication"
        )
    return f"combine: each device gathers its tokens' kept slots from {where}, gated; no communication"


def _flags_said(flags: tuple[str, ...]) -> str:
    """What a softmax's flags add to its step's reason (a rename's flag is a dim's name: nothing to add)."""
    said = {
        "causal": "the keys after each query masked (the query dim is the one before the softmax's)",
        "flash": "fused with its products (flash): the scores are not written to HBM",
    }
    return "".join(f"; {said[f]}" for f in flags if f in said)


def _note(steps: tuple[Step, ...], step: Step) -> str:
    moved = [s for s in steps if s.communicates]
    if not moved:
        return "no communication"
    return "; ".join(
        (
            f"{s.op.value} statistics over {subscript(s.axes)}"
            if s is step
            else f"{s.op.value}_{subscript(s.axes)}"
        )
        for s in moved
    )
