"""The attention core as the book writes it, planned as one problem: a program-level rewrite over its three
statements.

    Q[B, T, H, E] · K[B, S, H, E] -> Sc[B, H, T, S]
    softmax_S(Sc[B, H, T, S]) -> P[B, H, T, S]            (softmax_{S,causal}: keys after each query masked)
    P[B, H, T, S] · V[B, S, H, E] -> O[B, T, H, E]

:func:`core_of` recognises the pattern (a product, a softmax of its result over a dim of the second operand,
a product of that with a third tensor). :func:`attention_plans` lists its plans, each a plan of the whole core
(inputs Q, K, V; output O):

- **as written**: each statement's own default plan, one after the other (not with ``flash``: the statements'
  own products would write the scores to HBM);
- **gather K and V**: AllGather K and V over the axes that shard S (context parallelism's all-gather form),
  then the three statements on whole keys, or with ``flash`` one fused ``attend`` step (scores never in HBM);
- **ring**: when the query dim T and the key dim S are sharded over the same one axis X (context
  parallelism), each device keeps its queries and passes its K and V blocks round X: ``attend_{S,k}`` takes
  its queries against the block it holds and rescales the softmax statistics online, and ``Shift_{X,+1}``
  moves K and V on, |X| − 1 times each; a shift runs on X's links while the block before it computes.

``causal`` (from the softmax) halves the FLOPs of the products and blocks, the mask balanced across devices
(a zigzag layout of the sequence; the plans' note says so). The planner passes its statement planner in
(``plan_one``), so this module does not import it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from shardalg.algebra.layout import Layout, subscript, tensor_with
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.registry import RECORDS
from shardalg.algebra.traffic import Sizes
from shardalg.errors import ShardalgError
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Apply, Arrow, Op, Product, Program, Statement, Tensor

from .order import sort_plans
from .planset import Plans

__all__ = ["Core", "core_of", "attention_plans", "CAUSAL_NOTE"]

CAUSAL_NOTE = (
    "causal: the products' FLOPs halved, the mask balanced over the devices (a zigzag layout of the "
    "sequence; a contiguous one leaves the last device every block)"
)


@dataclass(frozen=True)
class Core:
    """The attention core of a program: its tensors as written, and its dims' roles."""

    q: Tensor
    k: Tensor
    v: Tensor
    scores: Tensor
    probs: Tensor
    out: Tensor
    query: str  # T
    key: str  # S
    head: str  # E
    flags: tuple[str, ...]
    statements: tuple[Statement, ...]

    @property
    def causal(self) -> bool:
        return "causal" in self.flags

    @property
    def flash(self) -> bool:
        return "flash" in self.flags

    def describe(self, mesh: Mesh) -> str:
        """One line: what the core is, and how its sequence dims are sharded."""
        how = [
            f"{d} over {subscript(t.axes_of(d))}"
            for t, d in ((self.q, self.query), (self.k, self.key))
            if t.axes_of(d)
        ]
        flags = f" ({', '.join(self.flags)})" if self.flags else ""
        return (
            f"attention core{flags}: {self.q.name}·{self.k.name} over {self.head}, softmax over {self.key}, "
            f"{self.probs.name}·{self.v.name}; " + ("; ".join(how) if how else "sequence dims whole")
        )


def _product(stmt: Statement) -> tuple[Tensor, Tensor, Tensor] | None:
    if isinstance(stmt, Arrow) and isinstance(stmt.expr, Product) and not stmt.expr.local:
        left, right = stmt.expr.left, stmt.expr.right
        if isinstance(left, Tensor) and isinstance(right, Tensor):
            return left, right, stmt.result
    return None


def core_of(program: Program) -> Core | None:
    """The attention core the program is, or None: three statements, ``Q · K -> Sc``, ``softmax_S(Sc) -> P``
    and ``P · V -> O``, with S a dim of K (not of Q), E the one dim Q and K contract, and O of Q's dims."""
    if len(program.statements) != 3:
        return None
    first, second, third = program.statements
    qk, pv = _product(first), _product(third)
    if qk is None or pv is None or not isinstance(second, Arrow):
        return None
    sm = second.expr
    if not isinstance(sm, Apply) or sm.op is not Op.SOFTMAX or not isinstance(sm.operands[0], Tensor):
        return None
    q, k, scores = qk
    p, v, out = pv
    key = sm.dim
    if sm.operands[0].name != scores.name or p.name != second.result.name or key is None:
        return None
    contracted = [d for d in q.dim_names if d in k.dim_names and d not in scores.dim_names]
    own = [d for d in q.dim_names if d not in k.dim_names]
    if len(contracted) != 1 or len(own) != 1 or key in q.dim_names or key not in k.dim_names:
        return None
    head = contracted[0]
    if q.dim_names[-1] != head or k.dim_names[-1] != head or v.dim_names[-1] != head:
        return None
    if set(out.dim_names) != set(q.dim_names) or key not in v.dim_names:
        return None
    return Core(q, k, v, scores, second.result, out, own[0], key, head, sm.flags, program.statements)


PlanOne = Callable[[Statement], Plans]


def _flagged(steps: tuple[Step, ...], core: Core) -> tuple[Step, ...]:
    """The products of the scores and of P·V marked causal (their FLOPs halved), when the core is."""
    if not core.causal:
        return steps
    out = []
    for s in steps:
        if (
            s.op is Op.EINSUM
            and core.key in {d for t in s.inputs for d in t.dim_names}
            and core.head in {d for t in s.inputs for d in t.dim_names}
        ):
            s = replace(s, flags=("causal",), reason=f"{s.reason}; causal: the masked half skipped")
        out.append(s)
    return tuple(out)


def _chain(statements: list[Statement], plan_one: PlanOne) -> tuple[Step, ...] | None:
    steps: list[Step] = []
    for stmt in statements:
        try:
            got = plan_one(stmt)
        except ShardalgError:
            return None
        if not got:
            return None
        steps.extend(got[0].steps)
    return tuple(steps)


def _written(core: Core, plan_one: PlanOne) -> Plan | None:
    if (
        core.flash
    ):  # fused: the statements' separate products would write the scores the flag keeps out of HBM
        return None
    steps = _chain(list(core.statements), plan_one)
    if steps is None:
        return None
    return Plan(
        (core.q, core.k, core.v), _flagged(steps, core), steps[-1].output, note="each statement as written"
    )


def _whole(t: Tensor, dim: str) -> Tensor:
    return tensor_with(t, Layout(tuple(() if d.label == dim else d.axes for d in t.dims), t.unreduced, ()))


def _gathered(core: Core, mesh: Mesh, plan_one: PlanOne) -> Plan | None:
    axes = core.k.axes_of(core.key)
    if not axes:
        return None
    gather = RECORDS[Op.ALL_GATHER]
    lead: tuple[Step, ...] = ()
    for t in (core.k, core.v):  # AllGather over the axes of S: the gather form of context parallelism
        try:
            whole = gather.apply(t, axes, None, mesh)
        except ShardalgError:
            return None
        lead += (Step(Op.ALL_GATHER, (t,), whole, axes, reason=gather.reason(axes, t, whole, None)),)
    k, v = lead[0].output, lead[1].output
    what = f"AllGather_{subscript(axes)} of {core.k.name} and {core.v.name}"
    if core.flash:
        try:
            step = _attend(core, mesh, core.q, k, v, None, 0, core.out.name)
        except ShardalgError:
            return None
        finish = _finish(step.output, core, plan_one)
        if finish is None:
            return None
        steps = lead + (step,) + finish
        return Plan(
            (core.q, core.k, core.v), steps, steps[-1].output, note=f"{what}; flash: fused, scores not in HBM"
        )
    sc = _whole(core.scores, core.key)
    pr = _whole(core.probs, core.key)
    rest = [
        Arrow(Product(core.q, k), sc),
        Arrow(Apply(Op.SOFTMAX, (sc,), core.key, flags=core.flags), pr),
        Arrow(Product(pr, v), core.out),
    ]
    body = _chain(rest, plan_one)
    if body is None:
        return None
    steps = lead + _flagged(body, core)
    return Plan((core.q, core.k, core.v), steps, steps[-1].output, note=what)


def _attend(
    core: Core, mesh: Mesh, q: Tensor, k: Tensor, v: Tensor, state: Tensor | None, k_: int, name: str | None
) -> Step:
    """A block of attention: ``attend_{S,k_}(Q, K, V[, state]) -> O``, checked by its record's rule."""
    operands = (q, k, v) if state is None else (q, k, v, state)
    out = RECORDS[Op.ATTEND].apply(operands, core.key, mesh, (), name)
    flags = tuple(f for f in core.flags if f == "causal")
    return Step(
        Op.ATTEND,
        operands,
        out,
        (),
        core.key,
        offset=k_,
        flags=flags,
        reason=_attend_reason(core, mesh, k, k_, state),
    )


def _attend_reason(core: Core, mesh: Mesh, k: Tensor, k_: int, state: Tensor | None) -> str:
    axes = k.axes_of(core.key)
    if not axes:
        return (
            f"fused (flash): each device's queries against every key, scores and their row max and sum kept "
            f"on chip{'; causal: the masked half skipped' if core.causal else ''}"
        )
    size = mesh.known_group(tuple(axes))
    n = str(size) if size is not None else "|" + subscript(axes) + "|"
    which = (
        "its own K, V block" if k_ == 0 else f"the K, V block from {k_} device{'s' if k_ > 1 else ''} back"
    )
    merge = (
        "starts the state O (normalized, with its rows' log-sum-exp in fp32)"
        if state is None
        else "rescales O's rows and the block's to their common max and adds them (online softmax)"
    )
    return f"ring block {k_ + 1} of {n}: each device's queries against {which}; {merge}"


def _finish(out: Tensor, core: Core, plan_one: PlanOne) -> tuple[Step, ...] | None:
    if out.layout()[:2] == core.out.layout()[:2]:
        return ()
    return _chain([Arrow(out, core.out)], plan_one)


def _ring(core: Core, mesh: Mesh, sizes: Sizes, plan_one: PlanOne) -> Plan | None:
    axes = core.k.axes_of(core.key)
    if len(axes) != 1 or core.q.axes_of(core.query) != axes:
        return None
    (x,) = axes
    n = mesh[x].size
    if n is None:
        return None  # the ring's steps are one per device: a symbolic axis has no count
    try:
        for t in (core.q, core.k, core.v):
            sizes.require_divisible(t, mesh)
        state = _attend(core, mesh, core.q, core.k, core.v, None, 0, core.out.name)
    except ShardalgError:
        return None
    steps: list[Step] = [state]
    k, v = core.k, core.v
    for i in range(1, n):
        moved = []
        for t in (k, v):
            nxt = replace(t, span=None)  # the same layout: a new value (the blocks moved)
            why = f"pass the {t.name} block on round {x} (ppermute x -> x+1), while block {i} computes"
            moved.append(Step(Op.SHIFT, (t,), nxt, (x,), offset=1, reason=why))
        steps.extend(moved)
        k, v = moved[0].output, moved[1].output
        state = _attend(core, mesh, core.q, k, v, state.output, i, core.out.name)
        steps.append(state)
    finish = _finish(state.output, core, plan_one)
    if finish is None:
        return None
    steps.extend(finish)
    note = (
        f"ring: {core.k.name} and {core.v.name} passed round {x} by {2 * (n - 1)} Shift_{{{x},+1}}, "
        "softmax statistics rescaled online; a shift waits only for the one before it, so it can run while a "
        "block computes"
    )
    return Plan((core.q, core.k, core.v), tuple(steps), steps[-1].output, note=note)


def attention_plans(
    core: Core, mesh: Mesh, sizes: Sizes, plan_one: PlanOne, key: Callable[[Plan], object]
) -> Plans:
    """The plans of the attention core, ranked by ``key``: as written, K and V gathered, the ring."""
    found: dict[tuple, Plan] = {}
    for make in (
        _written(core, plan_one),
        _gathered(core, mesh, plan_one),
        _ring(core, mesh, sizes, plan_one),
    ):
        if make is not None:
            note = f"{make.note}; {CAUSAL_NOTE}" if core.causal else make.note
            made = Plan(make.inputs, make.steps, make.output, (core.describe(mesh),), note)
            found.setdefault(tuple(s.signature for s in make.steps), made)
    plans = list(found.values())
    sort_plans(plans, key)
    axes = core.k.axes_of(core.key)
    note = ""
    if len(axes) == 1 and core.q.axes_of(core.query) == axes and mesh[axes[0]].size is None:
        note = f"the ring is not listed: it has one block per device of {axes[0]}, whose size is symbolic"
    return Plans(plans, True, note)
