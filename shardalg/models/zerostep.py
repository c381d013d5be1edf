"""The plans of a training step under a ZeRO stage and gradient accumulation: which collectives run once per
microbatch and which once per step.

    >>> from shardalg.models.program import model_program
    >>> from shardalg.models.analysis import analyze
    >>> a = analyze(model_program("params W\\nIn[B_X, D] * W[D, F] -> Out[B_X, F]", mesh="X=4"))
    >>> [(name, [s.op.value for p in plans for s in p.steps if s.op.communicates]) for _, name, _, plans in
    ...  step_parts(a, TrainState(zero=1), lambda a, once: [])]                  # doctest: +SKIP

A parameter ZeRO shards (one replicated over data axes, :mod:`.zero`) has its gradient reduction (the
backward's AllReduce over the data axes) replaced by the plan to the gradient sharded over them (a
ReduceScatter), and its parameters gathered back (an AllGather) by the planner from the sharded layout. When
each runs is :data:`WHEN` (data): with ``N`` microbatches the step is ``N`` passes of one microbatch, and the
collectives that run once per step join the last pass. Stage 0 accumulates the gradients of parameters the
program replicates over the data axes and reduces them once (DDP's ``no_sync``); what the program shards (FSDP)
is gathered and reduced each pass, as its plans say.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import sympy
from sympy import Expr, Integer

from shardalg.algebra.symbols import dim_size
from shardalg.errors import UsageError
from shardalg.notation.plan import Plan
from shardalg.notation.syntax import Arrow, Tensor
from shardalg.planning.planner import plan

from .analysis import Analysis, analyze
from .lookup import LookupGradient, lookup_table, rechosen
from .program import ModelProgram, Value, resized
from .trainstate import TrainState
from .zero import Zero, check_zero, computed_with, shard_axes

__all__ = ["step_parts", "pass_analysis", "WHEN", "microbatch", "check_zero_divides"]

# stage -> collective -> "microbatch" (each pass) or "step" (once, with the last pass)
#   reduce: the gradient reduction of a parameter ZeRO shards (stage 0: the program's AllReduce)
#   gather: gathering the parameters from their shards (stage 3: before the forward and again before the
#           backward; stages 1 and 2: the updated parameters, once)
WHEN: dict[int, dict[str, tuple[str, int]]] = {
    0: {"reduce": ("step", 1)},
    1: {"reduce": ("step", 1), "gather": ("step", 1)},
    2: {"reduce": ("microbatch", 1), "gather": ("step", 1)},
    3: {"reduce": ("microbatch", 1), "gather": ("microbatch", 2)},
}


def _batch_dim(model: ModelProgram) -> str:
    if not model.roles.tokens:
        raise UsageError(
            "--microbatches splits the batch, the first 'tokens' dim, and the program declares none",
            fix="declare the dims that count tokens, e.g. tokens B, T",
        )
    return model.roles.tokens[0]


def microbatch(a: Analysis, n: int, notes: list[tuple[str, str]]) -> tuple[Analysis, dict]:
    """The analysis of one microbatch (the batch dim divided by ``n``) and the substitution that makes a
    formula of the whole batch one of a microbatch (when the batch is symbolic)."""
    if n == 1:
        return a, {}
    m = a.model
    b = _batch_dim(m)
    mode = a.mode if a.mode_chosen else None
    if b in m.sizes:
        size = m.sizes[b]
        if size % n:
            raise UsageError(
                f"--microbatches {n} splits {b} = {size} into equal microbatches, and {n} does not divide it",
                fix=f"pick a divisor of {size}",
            )
        notes.append(("microbatches", f"{n} of {b} = {size // n} each"))
        # resized: a routing's capacity is derived again from the microbatch's tokens (fewer tokens, fewer slots)
        one = analyze(resized(m, {b: size // n}), mode, a.remat, a.keep_gathered)
        notes += [
            (k, f"each microbatch: {v}") for k, v in one.notes if k == "capacity" and (k, v) not in a.notes
        ]
        return one, {}
    notes.append(("microbatches", f"{n} of {b}/{n} each"))
    return a, {dim_size(b): dim_size(b) / n}


def pass_analysis(
    a: Analysis, state: TrainState, strict: bool = True
) -> tuple[Analysis, list[tuple[str, str]]]:
    """The analysis of one pass of a training step (one microbatch; ``a`` itself with one) and the notes
    of the state's choices for a step: its ZeRO stage (stated when it is the default) and microbatches.
    ``strict`` False (a search's candidates): a program without data axes is priced without ZeRO."""
    if a.mode != "train":
        given = [f"--{k} {v}" for k, v in (("zero", state.zero), ("microbatches", state.microbatches)) if v]
        return a, [("inference", f"{', '.join(given)} ignored (a training choice)")] if given else []
    notes = [] if state.stage.chosen else [("zero", "0 (default: as the program writes the parameters)")]
    notes += check_zero(a.model, state.stage, require_axes=strict)
    found = lookup_table(a.model)
    if state.stage.stage == 3 and found is not None and shard_axes(a.model, found[0]):
        notes.append(
            (
                "zero",
                f"3 gathers {found[0].name}, read by the lookup the program does not write, before the forward "
                "and again before the backward as every parameter (as FSDP unshards the embedding's weight; "
                "the lookup's gradient itself reads no table)",
            )
        )
    one, per_micro = microbatch(a, state.micro, notes)
    if state.micro > 1:
        notes.append(
            (
                "passes",
                f"{state.micro} a step; the last one, '(last)', also runs the collectives of the step "
                "(the accumulated gradients' reduction, the parameters' gather: see --zero)",
            )
        )
    if per_micro:
        b = _batch_dim(a.model)
        raise UsageError(
            f"--microbatches times each pass on the planned microbatch, and {b} is symbolic",
            fix=f"bind it: --sizes {b}=...",
        )
    return one, notes


def check_zero_divides(model: ModelProgram, zero: Zero) -> None:
    """Refuse (:class:`UsageError`, as pricing the step does) a program in which ``zero`` shards a parameter
    over the data axes and no unsharded dim of it divides by them: its gradient's reduction (stages 1 to 3)
    and its gather (stage 3) are planned onto such a dim (a gradient is laid out as its parameter)."""
    if zero.stage == 0:
        return
    for v in model.params:
        axes = shard_axes(model, v)
        if axes:
            _sharded_dim(model, v.tensor, axes)


def _sharded_dim(m: ModelProgram, t: Tensor, axes: tuple[str, ...]) -> int:
    """The first dim of ``t`` free of axes that ``axes`` divide (any free dim while its size is symbolic)."""
    ways = sympy.Mul(*(m.mesh.size_expr(a) for a in axes))
    free = [k for k, d in enumerate(t.dims) if not d.axes]
    for k in free:
        size = m.sizes.get(t.dims[k].label, t.dims[k].size)
        if size is None or ways.free_symbols or size % int(ways) == 0:
            return k
    raise UsageError(
        f"ZeRO shards {t.name} over {', '.join(axes)} ({ways} ways), and no unsharded dim of it divides by {ways}",
        fix="shard over fewer data axes, or pick sizes that divide",
    )


def _shard(t: Tensor, k: int, axes: tuple[str, ...]) -> Tensor:
    return replace(t, dims=tuple(d.with_axes(axes) if j == k else d for j, d in enumerate(t.dims)), span=None)


def _gather(a: Analysis, v: Value, axes: tuple[str, ...]) -> Plan:
    """The plan that gathers ``v`` whole over ``axes`` from its ZeRO shards."""
    m = a.model
    whole = replace(v.tensor, span=None)
    return plan(Arrow(_shard(whole, _sharded_dim(m, whole, axes), axes), whole), m.mesh, m.sizes)


def _split_reduction(a: Analysis, v: Value, p: Plan, zero: bool) -> tuple[Plan, Plan | None]:
    """A gradient plan cut at its reduction over the data axes: (the steps before, the reduction). Under
    ZeRO the reduction is planned to the gradient sharded over the data axes; stage 0 keeps the plan's."""
    m = a.model
    axes = shard_axes(m, v)
    for k, s in enumerate(p.steps):
        if s.op.communicates and set(s.inputs[0].unreduced) & set(axes):
            head = replace(p, steps=p.steps[:k])
            if not zero:
                return head, replace(p, steps=p.steps[k:])
            src, out = s.inputs[0], p.steps[-1].output
            target = _shard(out, _sharded_dim(m, out, axes), axes)
            return head, plan(Arrow(src, target), m.mesh, m.sizes)
    return p, None


def _lookup(a: Analysis, g: LookupGradient, state: TrainState, zeroed: bool) -> LookupGradient:
    """The lookup's gradient (:mod:`.lookup`) chosen again for the step: reduced to the table's ZeRO shard
    (stages 1 to 3, a table ZeRO shards) when :data:`WHEN` says, once a step or each pass; or its tokens'
    cotangent gathered in each of the step's passes, and the block kept (free). ``g`` as it is when ZeRO does not
    shard the table (``zeroed`` False): its reduction then runs in each pass, as the gather would."""
    m, stage, passes = a.model, state.stage.stage, state.micro
    if not zeroed:
        return g
    when, _ = _when(stage, "reduce")
    target = g.plan.output
    if stage > 0:
        axes = shard_axes(m, g.table)
        target = _shard(target, _sharded_dim(m, target, axes), axes)
    return rechosen(m, g, target, gathers=passes, reductions=passes if when == "microbatch" else 1)


def _when(stage: int, what: str) -> tuple[str, int]:
    return WHEN[stage].get(what, ("never", 0))


def _plans(a: Analysis, state: TrainState, once: bool) -> tuple[list[list[Plan]], list[Plan]]:
    """(plans of each pass by phase, plans once per step) of one part of the model: the forward; the
    backward (the recomputed forward and the gradients), as :func:`shardalg.models.step` orders them; the
    reductions and gathers placed by :data:`WHEN` (a gather before the forward in the forward's phase, before
    the backward and a reduction in the backward's; those once per step run with the last pass's backward)."""
    m, stage = a.model, state.stage.stage
    zeroed = {v.name: v for v in m.params if v.once == once and shard_axes(m, v)}
    by_index = {s.index: s for s in m.statements}
    forward = [p for i, p in a.forward_plans.items() if by_index[i].once == once]
    backward = [a.forward_plans[i] for i in a.recomputed if by_index[i].once == once]
    per_step: list[Plan] = []
    grads = a.backward.grads if a.backward else []
    # each gradient's plan as the step prices it (:attr:`Analysis.grad_plans`: a causal core's einsums halved)
    made = [
        (m.value_named(g.of), p, stage > 0)
        for g, (info, p) in zip(grads, a.grad_plans, strict=True)
        if info.once == once
    ]
    # and outside the layer the embedding lookup's gradient, reduced as any weight's (:mod:`.lookup`), or
    # gathered: each pass then gathers its tokens' cotangent and keeps its block, with nothing left to reduce
    for g in a.lookup_grads if once else []:
        g = _lookup(a, g, state, g.table.name in zeroed)
        if g.gathered:
            backward.append(g.plan)
        else:
            made.append((g.table, g.plan, False))  # planned to the ZeRO shard already
    for v, p, replan in made:
        if v is None or v.name not in zeroed:
            backward.append(p)
            continue
        head, reduction = _split_reduction(a, v, p, replan)
        backward.append(head)
        if reduction is not None:
            when, _ = _when(stage, "reduce")
            (backward if when == "microbatch" else per_step).append(reduction)
    backward += [p for info, p in a.routing_transposes if info.once == once]  # a MoE routing's, transposed
    when, times = _when(stage, "gather")
    # ZeRO-3 gathers a parameter before the statements that compute with it (a product, a function: a norm's
    # gain), and the unwritten lookup's table before the lookup (as FSDP all-gathers an embedding's weight
    # before its forward, and again before its backward): :func:`.zero.computed_with`, as memory holds them
    read = computed_with(m) if stage == 3 else set(zeroed)
    for v in (v for v in zeroed.values() if v.name in read):
        gathers = [_gather(a, v, shard_axes(m, v)) for _ in range(times)]
        if when == "microbatch":  # before the forward, and again before the backward
            forward.append(gathers[0])
            backward.extend(gathers[1:])
        else:
            per_step.extend(gathers)
    return [forward, backward], per_step


def step_parts(
    a: Analysis,
    state: TrainState,
    base: Callable[[Analysis, bool], list[list[Plan]]],
    microbatches: int = 1,
) -> Iterator[tuple[bool, str, Expr, list[list[Plan]]]]:
    """(whether the part runs once outside the repeated layer, part name, times per step, plans by phase:
    the forward's, the backward's) of a training step of ``microbatches`` passes under the state's
    ZeRO stage; ``base(a, once)`` is the plans of a part as written (used as is for stage 0 in one pass)."""
    m = a.model
    check_zero(m, state.stage, require_axes=False)
    for once, name, count in ((False, "layer", m.layers), (True, "outside", Integer(1))):
        if state.stage.stage == 0 and microbatches == 1 or a.mode != "train":
            yield once, name, count, base(a, once)
            continue
        (forward, backward), per_step = _plans(a, state, once)
        if microbatches > 1:
            yield once, name, count * (microbatches - 1), [forward, backward]
            yield once, f"{name} (last)", count, [forward, backward + per_step]
        else:
            yield once, name, count, [forward, backward + per_step]
