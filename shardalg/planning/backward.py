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
fused later.

Operands. The cotangent operand is the gradient accumulated so far; the primal operand is the value as the
forward keeps it: the version the einsum read, except that a copy made by an AllGather is not kept (FSDP
frees gathered weights), so the planner gathers it again.

This is not "transpose each forward collective" (that is :func:`shardalg.algebra.transpose.transpose`, the local
view): case 3's forward AllReduce has no backward communication, and case 1's free forward needs
AllReduces in the backward.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from itertools import combinations
from typing import Any

from shardalg.algebra.mesh import Mesh, as_mesh
from shardalg.errors import ShardalgError, UsageError
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Arrow, Collective, Op, Product, Program, Statement, Tensor

from .forward import Einsum, analyze, grad_name

__all__ = ["backward", "BackwardProgram", "GradStep"]


# ---- the backward program -----------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class GradStep:
    """One gradient einsum of the backward: ``dC · B -> dA`` (``of`` = A), with the plan chosen for it."""

    of: str
    einsum: int
    side: str  # "left" or "right": which operand of the forward einsum
    statement: Arrow
    plan: Plan
    accumulate: bool
    reason: str

    def __repr__(self) -> str:
        from shardalg.notation.printing import unicode
        from shardalg.notation.printing.display import short

        return short("GradStep", f"d{self.of}: {unicode(self.statement)}")


@dataclass(frozen=True)
class BackwardProgram:
    """The derived backward of a forward program: the planned gradient einsums in order.

    ``seeds`` are the cotangents of the forward's outputs; ``gradients`` maps each global value to its
    final gradient tensor; ``steps`` and ``collectives`` list what the backward runs, in order.
    """

    forward: Program
    mesh: Mesh
    sizes: tuple[tuple[str, int], ...]
    seeds: tuple[Tensor, ...]
    grads: tuple[GradStep, ...]
    gradients: tuple[tuple[str, Tensor], ...]
    forward_plans: tuple[Plan, ...]
    defer_reductions: bool = False

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(s for g in self.grads for s in g.plan.steps)

    @property
    def collectives(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The communicating steps in order, as (op name, axes): ``(("AllReduce", ("X",)),)``."""
        return tuple((s.op.value, s.axes) for s in self.steps if s.communicates)

    @property
    def forward_collectives(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The same for the forward, each einsum planned by the planner as written."""
        return tuple((s.op.value, s.axes) for p in self.forward_plans for s in p.steps if s.communicates)

    def gradient(self, name: str) -> Tensor:
        for n, t in self.gradients:
            if n == name:
                return t
        raise UsageError(f"no gradient of {name}; the program's values are {', '.join(n for n, _ in self.gradients)}")

    def plan(self) -> Plan:
        """The whole backward as one straight-line plan (for printing and the executor)."""
        inputs: dict[Tensor, None] = dict.fromkeys(self.seeds)
        made: set[Tensor] = set()
        for s in self.steps:
            for t in s.inputs:
                if t not in made:
                    inputs.setdefault(t)
            made.add(s.output)
        last = self.grads[-1].plan.output
        return Plan(tuple(inputs), self.steps, last, note="backward")

    def program(self) -> Program:
        """The backward in the notation: the statements of the chosen plans."""
        return Program(tuple(s.statement() for s in self.steps), self.forward.mesh, self.sizes)

    def __str__(self) -> str:
        from shardalg.notation.printing import text

        return text(self.plan())

    def unicode(self) -> str:
        from shardalg.notation.printing import unicode

        return unicode(self.plan())

    def latex(self) -> str:
        from shardalg.notation.printing import latex

        return latex(self.plan())

    def _repr_latex_(self) -> str:
        return f"$${self.latex()}$$"

    def __repr__(self) -> str:
        from shardalg.notation.printing import unicode
        from shardalg.notation.printing.display import short

        moves = ", ".join(f"{op}_{''.join(axes)}" for op, axes in self.collectives) or "no collectives"
        forward = "; ".join(unicode(s) for s in self.forward.statements)
        return short("BackwardProgram", f"{len(self.steps)} steps, {moves}; of {forward}")

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        from shardalg.notation.printing.display import pretty_text

        pretty_text(self, p, cycle)

    def to_json(self) -> dict[str, Any]:
        from shardalg.notation.printing import text, to_json

        return {
            "kind": "backward",
            "defer_reductions": self.defer_reductions,
            "seeds": [text(t) for t in self.seeds],
            "gradients": {n: text(t) for n, t in self.gradients},
            "collectives": [{"op": op, "axes": list(axes)} for op, axes in self.collectives],
            "forward_collectives": [{"op": op, "axes": list(axes)} for op, axes in self.forward_collectives],
            "grads": [
                {
                    "of": g.of,
                    "einsum": g.einsum,
                    "statement": text(g.statement),
                    "accumulate": g.accumulate,
                    "reason": g.reason,
                    "steps": [to_json(s) for s in g.plan.steps],
                }
                for g in self.grads
            ],
        }


def _target(t: Tensor, name: str, mesh: Mesh) -> Tensor:
    """The gradient's default target: the primal's sharding with its partial sums reduced, invariants kept."""
    return replace(t, name=name, unreduced=(), span=None)


def _deferrable(t: Tensor, mesh: Mesh) -> tuple[str, ...]:
    """Axes on which the primal is replicated and not invariant: the gradient may stay unreduced there."""
    used = set(t.used_axes)
    return tuple(a for a in mesh.names if a not in used)


def _strip_invariant(t: Tensor) -> Tensor:
    return replace(t, invariant=()) if t.invariant else t


def _choose(stmt: Arrow, targets: list[Tensor], mesh: Mesh, sizes: dict[str, int]) -> Plan:
    """The cheapest plan of ``stmt`` to any of ``targets`` (bytes, then steps, then a fixed order)."""
    from shardalg.algebra.traffic import Sizes

    from .planner import plan, plans
    from .redistribute import default_key

    if len(targets) == 1:
        return plan(replace(stmt, result=targets[0]), mesh, sizes)
    found: list[Plan] = []
    last_error: ShardalgError | None = None
    for t in targets:
        try:
            found.extend(plans(replace(stmt, result=t), mesh, sizes))
        except ShardalgError as err:  # an unreachable target is one candidate fewer
            last_error = err
    if not found:
        assert last_error is not None
        raise last_error
    key = default_key(mesh, Sizes(sizes))
    return min(found, key=key)


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
    return text + (f", added to d{of} (the value is used twice)" if accumulate else "")


def backward(
    program: Program | Statement | str,
    mesh: Mesh | Mapping[str, int] | str | None = None,
    sizes: Mapping[str, int] | str | None = None,
    defer_reductions: bool = False,
) -> BackwardProgram:
    """The backward program of ``program`` (text, a statement or a Program): each einsum's two gradient
    einsums, in reverse order, planned from the cotangent's sharding to the gradient's target sharding."""
    from shardalg.algebra.legality import as_sizes, check_or_raise

    from .planner import plan as plan_one

    if isinstance(program, str):
        from shardalg.notation.parse import parse

        program = parse(program)
    if not isinstance(program, Program):
        if not isinstance(program, (Arrow, Product, Collective, Tensor)):
            raise UsageError(f"backward takes a program, a statement or notation text, not {program!r}")
        program = Program((program,))
    m = as_mesh(mesh)
    if m is None and program.mesh is not None:
        m = Mesh(dict(program.mesh.axes))
    if m is None:
        raise UsageError("backward needs a mesh, e.g. mesh=Mesh(X=4) or --mesh X=4")
    bound = dict(program.sizes)
    bound.update(as_sizes(sizes))
    check_or_raise(program, m, bound)
    fw = analyze(program, m, bound)

    # cotangents so far: global value -> its gradient tensor
    grad: dict[str, Tensor] = {}
    seeds = []
    for r in fw.outputs:
        seed = _target(fw.latest[r], grad_name(r), m)
        grad[r] = seed
        seeds.append(seed)

    steps: list[GradStep] = []
    made: set[Step] = set()
    for e in reversed(fw.einsums):
        rc = e.roots[2]
        if rc not in grad:
            continue  # the value feeds nothing that has a gradient
        dc = grad[rc]
        for side in ("left", "right"):
            x, other = (e.left, e.right) if side == "left" else (e.right, e.left)
            rx = e.roots[0] if side == "left" else e.roots[1]
            o = fw.stored(other)
            product = Product(dc, o) if side == "left" else Product(o, dc)
            accumulate = rx in grad
            if accumulate:
                targets = [_strip_invariant(grad[rx])]
                invariant = grad[rx].invariant
            else:
                base = _target(fw.origin[rx], grad_name(rx), m)
                invariant = base.invariant
                base = _strip_invariant(base)
                free = _deferrable(fw.origin[rx], m) if defer_reductions else ()
                targets = [
                    replace(base, unreduced=sub) for k in range(len(free), -1, -1) for sub in combinations(free, k)
                ]
            stmt = Arrow(product, targets[0])
            p = _with_invariant(_choose(stmt, targets, m, bound), invariant)
            stmt = Arrow(product, p.output)
            grad[rx] = p.output
            reason = _reason(e, side, rx, accumulate)
            steps.append(GradStep(rx, e.index, side, stmt, _reuse(_annotate(p, reason), made), accumulate, reason))

    forward_plans = tuple(plan_one(e.statement, m, bound) for e in fw.einsums)
    order = [*fw.inputs, *(e.roots[2] for e in fw.einsums)]
    gradients = tuple((r, grad[r]) for r in order if r in grad)
    return BackwardProgram(
        program, m, tuple(sorted(bound.items())), tuple(seeds), tuple(steps), gradients, forward_plans,
        defer_reductions,
    )  # fmt: skip


def _annotate(p: Plan, reason: str) -> Plan:
    """Prefix the einsum step's reason with which gradient it computes."""
    steps = tuple(
        replace(s, reason=f"{reason}; {s.reason}" if s.reason else reason) if s.op is Op.EINSUM else s
        for s in p.steps
    )
    return replace(p, steps=steps)


def _reuse(p: Plan, made: set[Step]) -> Plan:
    """Drop collectives an earlier gradient einsum already ran (the same op on the same value: a gathered
    ``dOut`` serves both gradients of a product); their outputs become inputs of the plan. Only steps before
    a plan's einsum are shared: they read primals and complete cotangents, so equal tensors are equal values
    (a finishing step reads one contribution of a gradient that may be summed with others)."""
    kept, reused = [], []
    prep = True  # only steps before the einsum: they read inputs; those after it finish this contribution
    for s in p.steps:
        prep = prep and s.op is not Op.EINSUM
        if prep and s in made:
            reused.append(s.output)
            continue
        kept.append(s)
        if prep:
            made.add(s)
    if not reused:
        return p
    return replace(p, inputs=tuple(dict.fromkeys((*p.inputs, *reused))), steps=tuple(kept))
