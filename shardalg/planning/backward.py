"""The global view of the backward pass: derive the backward program of a forward program.

A program denotes dense einsums on global values; every collective is the identity on the global value, so
it contributes only a layout (DESIGN.md section 4). The backward of ``A · B -> C`` is the two gradient
einsums ``dC · B -> dA`` and ``A · dC -> dB``, in reverse order of the forward, each **planned by the
planner** from the cotangent's sharding to the gradient's target sharding::

    >>> bw = backward("In[B_X, D] * W[D, F] -> Out[B_X, F]", Mesh(X=4), sizes={"B": 4096, "D": 512, "F": 512})
    >>> bw.collectives      # DP: the weight gradient is all-reduced
    (('AllReduce', ('X',)),)

Targets. A gradient ends in its primal's own sharding (as XLA does): the sharding the value had when it was
made (a program input before any collective, an einsum's output), with its unreduced axes reduced (the
gradient of a partial sum is the gradient of the sum) and its invariant axes kept. So a weight gathered in
forward (FSDP) gets its gradient reduce-scattered back to its shards. With ``defer_reductions`` a gradient
may stay unreduced where its primal is replicated (not invariant), so a reduction can be deferred and
fused later; so may a renamed value's, read by one product: the rename back reduces it (:mod:`.fngrads`).

Operands. The cotangent operand is the gradient accumulated so far; the primal operand is the value as the
forward keeps it. A product whose operands do not meet as written (case 4: ``A[I_X, J] · B[J, K_X]``) is
planned as ``plan`` plans it (``AllGather_X(B)`` first), so its einsum reads a gathered copy. A copy made
by an AllGather (a statement, or a step of the forward's plan) is not kept by default (FSDP frees gathered
weights), so the planner gathers it again from the version the program wrote; with ``keep_gathered`` the
backward reads the forward's copy instead (the book's TP row: 4BD of traffic instead of 6BD), and the
memory that costs, the bytes per device of each kept copy, is part of the result.

Joint choice. The two gradients of a product share the cotangent: they are planned together
(:mod:`.gradients`), so a version of ``dC`` one plan gathers (``AllGather_XY(dC)``) can serve the other.

This is not "transpose each forward collective" (that is :func:`shardalg.algebra.transpose.transpose`, the local
view): case 3's forward AllReduce has no backward communication, and case 1's free forward needs
AllReduces in the backward.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from itertools import combinations, product

from shardalg.algebra.context import chosen_mesh, merged_sizes, say_replaced, tensors_of
from shardalg.algebra.legality import check
from shardalg.algebra.mesh import Mesh, as_mesh
from shardalg.algebra.traffic import DEFAULT_DTYPE, Bytes, Sizes, local_elements
from shardalg.errors import NoPlan, UsageError
from shardalg.notation.parse import parse
from shardalg.notation.plan import Plan, Step
from shardalg.notation.printing import text
from shardalg.notation.syntax import Apply, Arrow, Collective, Op, Product, Program, Statement, Tensor

from .accumulate import added, part_name, unfinished, without_tail
from .attention import core_of
from .attention_backward import is_ring, named_apart, ring_backward
from .backward_program import BackwardProgram, GatheredCopy, GradStep
from .fngrads import call_gradients, passes_partial_sums
from .forward import Call, Einsum, Forward, analyze, grad_name
from .gradients import Chosen, Gradient, candidates, choose, fewer
from .held import Held
from .planner import plan, plans
from .redistribute import plan_bytes
from .reuse import reuse

__all__ = ["backward", "core_backwards", "BackwardProgram", "GradStep", "GatheredCopy"]


def _target(t: Tensor, name: str, mesh: Mesh) -> Tensor:
    """The gradient's default target: the primal's sharding with its partial sums reduced, invariants kept."""
    return replace(t, name=name, unreduced=(), span=None)


def _deferrable(t: Tensor, mesh: Mesh) -> tuple[str, ...]:
    """Axes on which the primal is replicated and not invariant: the gradient may stay unreduced there. Not an
    axis of size 1: partial sums over one device are the sum, and each such axis would double the targets (a
    two-product layer on ``X=1,Y=2,Z=1,S0=1`` took 26 s of CPU to plan with them)."""
    used = set(t.used_axes)
    return tuple(a for a in mesh.names if a not in used and mesh[a].size != 1)


def _strip_invariant(t: Tensor) -> Tensor:
    return replace(t, invariant=()) if t.invariant else t


def _summed(have: Tensor, part: Tensor) -> Tensor:
    """``have`` as its sum with ``part`` is laid out: partial sums over an axis are added to partial sums only
    (a part whole there would be added once per device), so an axis only one of them is unreduced over is
    reduced first."""
    return replace(have, unreduced=tuple(a for a in have.unreduced if a in part.unreduced))


def _with_invariant(p: Plan, invariant: tuple[str, ...]) -> Plan:
    """Mark the plan's final output invariant on ``invariant`` (the planner places I like R)."""
    if not invariant or not p.steps:
        return p
    out = replace(p.output, invariant=invariant)
    last = replace(p.steps[-1], output=out)
    return replace(p, steps=(*p.steps[:-1], last), output=out)


def _reason(e: Einsum, side: str, of: str, accumulate: bool) -> str:
    c = e.roots[2]
    other = e.roots[1] if side == "left" else e.roots[0]
    formula = f"d{of} = d{c}·{other}ᵀ" if side == "left" else f"d{of} = {other}ᵀ·d{c}"
    text = f"gradient of statement {e.index + 1} ({e.roots[0]}·{e.roots[1]} -> {c}): {formula}"
    return text + (f", added to d{of} (the value is read more than once)" if accumulate else "")


class _Backward:
    """The state of a derivation: the gradient of each global value so far, the steps already run."""

    def __init__(self, fw: Forward, mesh: Mesh, sizes: dict[str, int], defer: bool, keep: bool):
        self.fw, self.mesh, self.sizes, self.defer, self.keep = fw, mesh, sizes, defer, keep
        self.grad: dict[str, Tensor] = {}
        self.steps: list[GradStep] = []
        self.made: set[Step] = set()
        self.copies: dict[Tensor, GatheredCopy] = {}
        self.borrowed: set[str] = set()  # values whose gradient is another value's cotangent, passed on
        # cotangents passed on to a gradient that has a part already, added when it is complete (:meth:`flush`)
        self.pending: dict[str, list[tuple[int, Tensor, str]]] = {}
        self.lent: dict[str, tuple[int, str]] = {}  # a borrowed gradient's statement and reason

    # ---- a function's gradients (:mod:`.fngrads`) write through these
    def fresh_target(self, rx: str) -> tuple[Tensor, tuple[str, ...]]:
        """The gradient's own target (the primal's sharding, partial sums reduced) and its invariant axes."""
        base = _target(self.fw.origin[rx], grad_name(rx), self.mesh)
        return _strip_invariant(base), base.invariant

    def borrow(self, rx: str, t: Tensor) -> None:
        self.grad[rx] = t
        self.borrowed.add(rx)

    def emit(
        self,
        index: int,
        rx: str,
        statement: Arrow,
        reason: str,
        accumulate: bool = False,
        final: bool = False,
    ) -> Tensor:
        """Plan one statement of a function's gradient and run it; ``final``: its output is ``rx``'s gradient."""
        p = self.plan_held(statement)
        expr = statement.expr
        if accumulate:  # planned into a name of its own, then added
            p = self.add_to(rx, p)
            statement = Arrow(expr, replace(statement.result, name=part_name(statement.result.name or "")))
        if final:
            p = _with_invariant(p, self.fresh_target(rx)[1])
        made = {*self.grad.values(), *(g.plan.output for g in self.steps)}  # cotangents, not forward values
        operands = expr.operands if isinstance(expr, Apply) else ()
        reads = tuple(t for t in operands if isinstance(t, Tensor) and t not in made)
        if reads:  # what the forward keeps for this gradient
            reason += f"; reads {', '.join(text(t) for t in reads)} from the forward"
        stmt = Arrow(expr, statement.result if accumulate else p.output)
        self.steps.append(
            GradStep(
                rx,
                index,
                "operand",
                stmt,
                reuse(_annotate(p, reason), self.made, *self.held_by(index)),
                accumulate,
                reason,
                reads,
            )
        )
        if final:
            self.grad[rx] = p.output
            self.borrowed.discard(rx)
        return p.output

    def plan_held(self, statement: Arrow) -> Plan:
        """The plan of ``statement`` (:func:`.planner.plan`: under :func:`.symbolic.strict`, as for a product's
        gradients, :class:`.symbolic.NeedsSizes` when which plan is the cheapest depends on sizes not given),
        reading what the backward still holds. A cotangent's partial sums that an earlier step reduced are gone
        in every layout (a reduction leaves only its output: :mod:`.held`), so an operand that reads them reads a
        layout still held instead (``V0 - In``: ``dV2{U_X}`` reduced into ``dV0``'s sharding, then read again
        for ``dIn``), the one whose plan moves fewer bytes at every size (else the first held)."""
        expr = statement.expr
        operands = expr.operands if isinstance(expr, Apply) else (expr,)
        options: list[tuple[Tensor, ...]] = []
        held: Held | None = None
        for t in operands:
            if isinstance(t, Tensor) and t.unreduced:
                held = held or self.held()
                if t.name in held and held.find(t.name or "", t) is None:
                    options.append(tuple(h for h in held.layouts(t.name or "") if h.dim_names == t.dim_names))
                    continue
            options.append((t,))
        if all(len(o) == 1 and o[0] is t for o, t in zip(options, operands, strict=True)):
            return plan(statement, self.mesh, self.sizes)
        best: tuple[Plan, Bytes] | None = None
        for picked in product(*options):
            read = replace(expr, operands=picked) if isinstance(expr, Apply) else picked[0]
            p = plan(Arrow(read, statement.result), self.mesh, self.sizes)
            cost = plan_bytes(p, self.mesh, Sizes(self.sizes))
            if best is None or fewer(cost, best[1]):
                best = (p, cost)
        assert best is not None
        return best[0]

    def held(self) -> Held:
        """What each name holds after the steps so far, as :mod:`.held` reads a program (verify reads the
        derived backward so)."""
        return self.held_by(None)[0]

    def held_by(self, index: int | None) -> tuple[Held, set[Tensor]]:
        """:meth:`held`, and the tensors the gradients of forward statement ``index`` made."""
        held, ours = Held(), set()
        for g in self.steps:
            for s in g.plan.steps:
                held.ran(s)
                if g.einsum == index:
                    ours.add(s.output)
        return held, ours

    def contribute(self, index: int, rx: str, expr: Apply, reason: str) -> None:
        """``expr``'s value added to ``rx``'s gradient (or made its gradient, the first time)."""
        base, _ = self.fresh_target(rx)
        if rx in self.grad and rx not in self.borrowed:
            g = _strip_invariant(self.grad[rx])
            why = reason + f", added to d{rx}"
            try:
                self.emit(index, rx, Arrow(expr, g), why, accumulate=True, final=True)
            except NoPlan:  # a derivative is never partial sums: made whole, added to the gradient reduced
                if not g.unreduced:
                    raise
                self.emit(index, rx, Arrow(expr, replace(g, unreduced=())), why, accumulate=True, final=True)
            return
        had = self.grad.get(rx)  # a cotangent passed on, borrowed as the gradient so far
        self.emit(index, rx, Arrow(expr, base), reason, final=True)
        if had is not None:  # added once the gradient is complete, as a product's contribution does (record)
            at, why = self.lent.pop(rx, (index, reason))
            self.pass_on(at, rx, had, why)

    def pass_on(self, index: int, rx: str, dy: Tensor, reason: str) -> None:
        """The cotangent ``dy`` passed on unchanged: borrowed as ``rx``'s gradient (resharded into its sharding
        first when it is not in it); added to a gradient ``rx`` already has once that gradient is complete
        (:meth:`flush`): its products' parts, partial sums, are then added before they are finished, and
        finished once (Q's, K's and V's input gradients beside a residual's cotangent: one AllReduce)."""
        base, _ = self.fresh_target(rx)
        if rx not in self.grad:  # a resharding keeps the value (and its name): still the cotangent, borrowed
            moved = dy
            if dy.layout() != base.layout():
                moved = self.emit(index, rx, Arrow(dy, replace(base, name=dy.name)), reason)
            self.borrow(rx, moved)
            self.lent[rx] = (index, reason)
            return
        self.pending.setdefault(rx, []).append((index, dy, reason))

    def flush(self, rx: str) -> None:
        """Add the cotangents passed on to ``rx`` and held back (:meth:`pass_on`): before a step reads its
        gradient, or at the end."""
        for index, dy, reason in self.pending.pop(rx, []):
            self.add_passed(index, rx, dy, reason)

    def add_passed(self, index: int, rx: str, dy: Tensor, reason: str) -> None:
        """``dy``, a cotangent passed on unchanged, added to the gradient ``rx`` has."""
        base, _ = self.fresh_target(rx)
        have = self.grad[rx]
        target = _strip_invariant(have) if rx not in self.borrowed else base
        # a residual's cotangent, whole, beside a deferred dW{U_X}: dW is reduced first
        target = replace(_summed(target, dy), name=grad_name(rx))
        self.emit(
            index, rx, Arrow(Apply(Op.ADD, (have, dy)), target), reason + f", added to d{rx}", final=True
        )

    def primal(self, e: Einsum, i: int) -> Tensor:
        """Operand ``i`` of ``e`` as the backward reads it: the forward's gathered copy when kept, else the
        version the program wrote before any AllGather."""
        written = (e.left, e.right)[i]
        source = self.fw.stored(written)
        copy = e.kept[i]
        if copy is None or copy == source:
            return source
        if copy not in self.copies:
            width = (copy.dtype or DEFAULT_DTYPE).bytes
            size = local_elements(copy, self.mesh, Sizes(self.sizes)).scale(width)
            self.copies[copy] = GatheredCopy(copy, source, size, self.keep)
        return copy if self.keep else source

    def gradient(self, e: Einsum, side: str) -> tuple[str, Gradient, tuple[str, ...]]:
        """What to plan for the gradient of one operand: its global value, the problem, invariant axes."""
        rx = e.roots[0] if side == "left" else e.roots[1]
        primal = self.primal(e, 1 if side == "left" else 0)
        if rx in self.grad and rx not in self.borrowed:  # added to the gradient so far
            have = _strip_invariant(self.grad[rx])
            u = unfinished(self.steps, grad_name(rx), self.grad[rx])
            targets = (have,) if u is None else u.targets(have)
            return rx, Gradient(side, primal, targets), self.grad[rx].invariant
        base = _target(self.fw.origin[rx], grad_name(rx), self.mesh)
        invariant = base.invariant
        base = _strip_invariant(base)
        partial = self.defer or passes_partial_sums(self.fw, rx)  # the rename back reduces a renamed K
        free = _deferrable(self.fw.origin[rx], self.mesh) if partial else ()
        targets = tuple(
            replace(base, unreduced=sub) for k in range(len(free), -1, -1) for sub in combinations(free, k)
        )
        return rx, Gradient(side, primal, targets), invariant

    def add_to(self, rx: str, p: Plan) -> Plan:
        """``p``, a contribution to ``rx``'s gradient, planned into a name of its own and added to the
        gradient so far (:mod:`.accumulate`): in its unfinished layout when ``p`` ends there, the finish then
        moved after the addition."""
        name, have = grad_name(rx), self.grad[rx]
        u = unfinished(self.steps, name, have)
        if u is not None and p.output.layout() == u.bare.layout():
            self.steps[u.index] = without_tail(self.steps[u.index], u)
            return added(p, u.at, name, self.mesh, self.sizes, u.tail)
        summed = _summed(have, p.output)  # where ``p`` is whole, the gradient so far is reduced first
        result = summed if summed.unreduced != have.unreduced else None
        return added(p, have, name, self.mesh, self.sizes, result=result)

    def record(
        self,
        e: Einsum,
        rx: str,
        chosen: Chosen,
        invariant: tuple[str, ...],
        dc: Tensor,
        keep: frozenset[Tensor] = frozenset(),
    ) -> None:
        """One gradient of ``e`` recorded with its chosen plan; ``keep``: the versions of the cotangent its plan
        makes that the other gradient's reads (made even where the plan's own einsum does not need them)."""
        g = chosen.gradient
        borrowed = rx in self.borrowed
        accumulate = rx in self.grad and not borrowed
        cot = chosen.shared if chosen.shared is not None else dc
        reason = _reason(e, g.side, rx, accumulate)
        p = chosen.plan
        stmt = Arrow(g.product(cot), p.output)
        if accumulate:
            p = self.add_to(rx, p)
            stmt = Arrow(g.product(cot), replace(stmt.result, name=part_name(stmt.result.name or "")))
        p = _with_invariant(p, invariant)
        had = self.grad.get(rx)
        self.grad[rx] = p.output
        self.borrowed.discard(rx)
        if chosen.shared is not None:
            reason += f"; reads {chosen.shared}, made for the other gradient of this product"
        reads = (g.primal,)
        self.steps.append(
            GradStep(
                rx,
                e.index,
                g.side,
                stmt,
                reuse(_annotate(p, reason), self.made, *self.held_by(e.index), keep),
                accumulate,
                reason,
                reads,
            )
        )
        if borrowed and had is not None:  # the gradient so far was a cotangent passed on: add it
            index, why = self.lent.pop(rx, (e.index, reason))  # as the statement that passed it on says
            self.pass_on(index, rx, had, why)

    def product(self, e: Einsum) -> None:
        """The two gradients of one forward einsum, planned together (one after the other when both
        operands are the same value: the second adds to the first)."""
        dc = self.grad[e.roots[2]]
        if e.roots[0] == e.roots[1]:
            for side in ("left", "right"):
                rx, g, inv = self.gradient(e, side)
                plan = candidates(g, dc, self.mesh, self.sizes)[0]
                self.record(e, rx, Chosen(g, plan), inv, dc)
            return
        (rl, gl, il), (rr, gr, ir) = self.gradient(e, "left"), self.gradient(e, "right")
        pair = _reads_first(choose(gl, gr, dc, self.mesh, self.sizes, self.made), dc)
        shared = frozenset(c.shared for c in pair if c.shared is not None)
        for chosen in pair:
            rx, inv = (rl, il) if chosen.gradient is gl else (rr, ir)
            self.record(e, rx, chosen, inv, dc, shared)


def _reads_first(pair: tuple[Chosen, Chosen], dc: Tensor) -> tuple[Chosen, Chosen]:
    """The two gradients' plans in the order they can run: a plan that reads the cotangent's partial sums
    runs before the other one reduces them (a reduction leaves only its output: :mod:`.held`), where it reads
    nothing the other makes."""
    first, second = pair

    def partial(t: Tensor) -> bool:  # the cotangent, or a version of it, still partial sums
        return t.name == dc.name and bool(t.unreduced)

    reduces = any(
        s.op in (Op.ALL_REDUCE, Op.REDUCE_SCATTER) and partial(s.inputs[0]) for s in first.plan.steps
    )
    reads = any(partial(t) for s in second.plan.steps for t in s.inputs)
    return (second, first) if reduces and reads and second.shared is None else pair


def _legal(program: Program, mesh: Mesh, sizes: dict[str, int]) -> None:
    """The legality rules, except case 4: a product whose result dims share an axis is planned as ``plan``
    plans it (an operand gathered first), and its forward plan's collectives are part of the forward."""
    found = [v for v in check(program, mesh, sizes) if v.rule != "case-4"]
    if found:
        raise found[0].to_error()


def _names_apart(program: Program) -> None:
    """A UsageError when a value is named as another value's gradient (``A`` and ``dA``, or ``dA'``, a part
    of it): the backward writes the gradient of ``A`` into ``dA``, and a gradient step that reads the forward's
    ``dA`` after that would read the gradient instead."""
    written = [t for t in tensors_of(program) if t.name]
    names: dict[str | None, Tensor] = {}
    for t in written:
        names.setdefault(t.name, t)  # where each name is first written
    for t in written:
        for clash in (grad_name(t.name or ""), part_name(grad_name(t.name or ""))):
            if clash in names:
                raise UsageError(
                    f"the program names a value {clash}, which is the name the backward gives the gradient "
                    f"of {t.name}",
                    span=names[clash].span,
                    source=program.source,
                    fix=f"rename {clash}: in the backward, d followed by a value's name is that value's gradient",
                )


def backward(
    program: Program | Statement | str,
    mesh: Mesh | Mapping[str, int] | str | None = None,
    sizes: Mapping[str, int] | str | None = None,
    defer_reductions: bool = False,
    keep_gathered: bool = False,
    *,
    checked: bool = False,
) -> BackwardProgram:
    """The backward program of ``program`` (text, a statement or a Program): each einsum's two gradient
    einsums, in reverse order, planned together from the cotangent's sharding to the gradients' target
    shardings. ``keep_gathered`` reads the forward's gathered copies instead of gathering again.
    ``checked``: ``program`` passed every legality rule already, case 4 too (a model's program, checked
    when it was read): neither it nor its statements are checked again."""
    if isinstance(program, str):
        program = parse(program)
    if not isinstance(program, Program):
        if not isinstance(program, (Arrow, Product, Collective, Tensor)):
            raise UsageError(f"backward takes a program, a statement or notation text, not {program!r}")
        program = Program((program,))
    m, mesh_said = chosen_mesh(program.mesh, as_mesh(mesh))
    if m is None:
        raise UsageError("backward needs a mesh, e.g. mesh=Mesh(X=4) or --mesh X=4")
    bound, sizes_said = merged_sizes(program.sizes, sizes)
    say_replaced(mesh_said + sizes_said)
    if not checked:
        _legal(program, m, bound)
    core = core_of(program) if len(program.statements) == 3 else None
    if core is not None and not defer_reductions and not keep_gathered:
        forward = plans(Program(program.statements), m, bound)
        if forward and is_ring(forward[0]):  # the forward the planner picks is the ring: its own backward
            return _ring_program(program, m, bound, core, forward[0])
    return _derived(program, m, bound, defer_reductions, keep_gathered, checked)


def core_backwards(
    program: Program | str,
    mesh: Mesh | Mapping[str, int] | str,
    sizes: Mapping[str, int] | str | None = None,
) -> list[tuple[Plan, BackwardProgram]]:
    """Each plan of an attention core's forward (ranked as ``plan`` ranks them) with its backward: the ring's
    derived from it (:mod:`.attention_backward`); K and V gathered (or as written), the statements'
    gradients, whose collectives are the gathers' transposes (``ReduceScatter`` of dK and dV) and the gathers
    again (the gathered copies are not kept)."""
    if isinstance(program, str):
        program = parse(program)
    m = as_mesh(mesh)
    if m is None:
        raise UsageError("core_backwards needs a mesh, e.g. Mesh(X=4)")
    bound, said = merged_sizes(program.sizes, sizes)
    say_replaced(said + chosen_mesh(program.mesh, m)[1])
    _legal(program, m, bound)
    core = core_of(program) if len(program.statements) == 3 else None
    if core is None:
        raise UsageError(
            "core_backwards takes an attention core: Q · K -> Sc; softmax_S(Sc) -> P; P · V -> O"
        )
    out = []
    for fp in plans(Program(program.statements), m, bound):
        if is_ring(fp):
            out.append((fp, _ring_program(program, m, bound, core, fp)))
        elif not core.flash:  # flash's fused block keeps no P for the statements' gradients
            out.append((fp, _derived(program, m, bound, False, False)))
    return out


def _derived(
    program: Program,
    m: Mesh,
    bound: dict[str, int],
    defer_reductions: bool,
    keep_gathered: bool,
    checked: bool = False,
) -> BackwardProgram:
    """The statements' gradients, in reverse order, each planned (the global view); ``checked``: the program
    passed every legality rule already."""
    fw = analyze(program, m, bound, checked)
    _names_apart(program)

    state = _Backward(fw, m, bound, defer_reductions, keep_gathered)
    seeds = []
    for r in fw.outputs:
        seed = _target(fw.latest[r], grad_name(r), m)
        state.grad[r] = seed
        seeds.append(seed)
    for node in reversed(fw.nodes):
        if node.roots[-1] not in state.grad:  # the value feeds nothing that has a gradient
            continue
        state.flush(node.roots[-1])  # its gradient is complete: this node's gradients read it
        if isinstance(node, Call):
            call_gradients(state, node)
        else:
            state.product(node)

    for r in [*fw.inputs, *state.pending]:
        state.flush(r)
    order = [*fw.inputs, *(e.roots[-1] for e in fw.nodes)]
    gradients = tuple((r, state.grad[r]) for r in order if r in state.grad)
    return BackwardProgram(
        program,
        m,
        tuple(sorted(bound.items())),
        tuple(seeds),
        tuple(state.steps),
        gradients,
        tuple(fw.plans),
        defer_reductions,
        keep_gathered,
        tuple(state.copies.values()),
        inputs=tuple(fw.inputs),
    )


def _annotate(p: Plan, reason: str) -> Plan:
    """Prefix the einsum step's reason with which gradient it computes."""
    steps = tuple(
        replace(s, reason=f"{reason}; {s.reason}" if s.reason else reason)
        if s.op is Op.EINSUM or s.op.function
        else s
        for s in p.steps
    )
    return replace(p, steps=steps)


def _ring_program(program: Program, mesh: Mesh, sizes: dict[str, int], core, ring: Plan) -> BackwardProgram:
    """The backward of an attention core whose forward is the ring (:mod:`.attention_backward`): one
    gradient a part of the derived plan (dQ's steps, then dK's, then dV's, as the ring makes them)."""
    _names_apart(program)
    bw = ring_backward(ring, core, mesh)
    primals = (core.q, core.k, core.v)
    ends = [max(i for i, s in enumerate(bw.steps) if s.output.name == grad_name(t.name)) for t in primals]
    grads, start = [], 0
    for t, end in zip(primals, ends, strict=True):
        part, made = bw.steps[start : end + 1], {s.output for s in bw.steps[:start]}
        inputs = tuple(dict.fromkeys([*bw.inputs, *(x for s in part for x in s.inputs if x in made)]))
        last = part[-1].statement()
        assert isinstance(last, Arrow)
        plan = Plan(inputs, part, part[-1].output, note=bw.note)
        grads.append(GradStep(t.name, 0, "core", last, plan, False, bw.note, bw.inputs[:4]))
        start = end + 1
    gradients = tuple((t.name, bw.steps[e].output) for t, e in zip(primals, ends, strict=True))
    note = f"backward of the forward's ring plan: {bw.note}"
    return BackwardProgram(
        program,
        mesh,
        tuple(sorted(sizes.items())),
        (bw.inputs[4],),
        tuple(grads),
        gradients,
        (ring,),
        note=note,
        runs_first=(named_apart(ring),),
        inputs=tuple(t.name for t in primals),
    )
