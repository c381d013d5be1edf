"""Whole plans: a plan's cost as totals over its steps, a program in the notation as a plan, and the
per-step seconds that rank plans on a chip.

    >>> from shardalg import Mesh
    >>> cost("AllGather_X(A[I_X, J])", Mesh(X=4), sizes="I=1024,J=512").total
    Max(2*T_min, 1048576/W_ici)

Each step's cost comes from :mod:`shardalg.costs.stepcost` (the communication models, an einsum's compute and
HBM traffic); here they add up. ``comms`` runs collectives on disjoint mesh axes concurrently (with
``overlap``), ``total`` is max(compute, comms) or their sum, and a chip's numbers turn it into seconds.
Every name here is also importable from :mod:`shardalg.costs.stepcost`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

import sympy
from sympy import Expr, Integer, Max

from shardalg.algebra.context import context_for, product_dims, value_of
from shardalg.algebra.legality import check_or_raise
from shardalg.errors import UsageError
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Arrow, Collective, Node, Op, Product, Program, Tensor

from .stepcost import Options, StepCost, numeric, step_cost

__all__ = ["PlanCost", "plan_cost", "plan_of", "cost", "step_seconds"]


@dataclass(frozen=True)
class PlanCost:
    """A plan's cost: per-step breakdown and totals (symbolic seconds).

    ``comms``: with ``overlap``, collectives on disjoint mesh axes use disjoint links and run concurrently,
    so it is the max over mesh axes of the time of the collectives using that axis; without, the sum.
    ``total`` is max(compute, comms) with ``overlap`` and compute + comms without. ``memory`` (HBM time)
    is reported separately. ``values`` maps symbols to the chip's numbers; ``seconds`` is ``total`` then.
    """

    steps: tuple[StepCost, ...]
    overlap: bool
    values: Mapping[sympy.Symbol, float]
    model: str

    @cached_property
    def comms(self) -> Expr:
        if not self.overlap:
            return sympy.Add(*(s.comms for s in self.steps))
        per_axis: dict[str, Expr] = {}
        for s in self.steps:
            for a in s.step.axes if s.step.communicates else ():
                per_axis[a] = per_axis.get(a, Integer(0)) + s.comms
        return Max(*per_axis.values()) if per_axis else Integer(0)

    @cached_property
    def comms_serial(self) -> Expr:
        return sympy.Add(*(s.comms for s in self.steps))

    @cached_property
    def flops(self) -> Expr:
        return sympy.Add(*(s.flops for s in self.steps))

    @cached_property
    def compute(self) -> Expr:
        return sympy.Add(*(s.compute for s in self.steps))

    @cached_property
    def memory(self) -> Expr:
        return sympy.Add(*(s.memory for s in self.steps))

    @cached_property
    def total(self) -> Expr:
        return Max(self.compute, self.comms) if self.overlap else self.compute + self.comms

    def term(self, name: str) -> Expr:
        """One of ``comms``, ``compute``, ``memory``, ``total`` by name (the derivations' regimes)."""
        if name not in ("comms", "compute", "memory", "total"):
            raise UsageError(f"a plan cost has comms, compute, memory and total, not {name!r}")
        return getattr(self, name)

    def evaluate(self, expr: Expr) -> float | None:
        return numeric(expr, self.values)

    @property
    def seconds(self) -> float | None:
        return self.evaluate(self.total)

    def latex(self) -> str:
        from shardalg.algebra.symbols import latex_names

        return sympy.latex(self.total, symbol_names=latex_names())

    def _repr_latex_(self) -> str:
        return f"${self.latex()}$"

    def __repr__(self) -> str:
        """``<PlanCost Max(...) = 46.6 us; 2 steps, model ici>``: the total, its seconds on a chip, one line."""
        from shardalg.notation.printing.display import short

        at = f" = {self.seconds * 1e6:.3g} us" if self.seconds is not None else ""
        return short("PlanCost", f"{self.total}{at}; {len(self.steps)} steps, model {self.model}")

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        from shardalg.notation.printing.display import pretty_text

        pretty_text(self, p, cycle)

    def _repr_html_(self) -> str:
        """The cost breakdown as a table: each step's bytes, communication and compute time, then the totals
        (with seconds on a chip when every size is bound)."""
        from shardalg.notation.printing import unicode
        from shardalg.notation.printing.display import html_table

        def num(expr: Expr) -> str:
            v = self.evaluate(expr)
            return str(expr) if v is None else f"{expr}  ({v:.3g})" if expr.free_symbols else f"{v:.3g}"

        rows = [[unicode(s.step.statement()), str(s.bytes), num(s.comms), num(s.compute)] for s in self.steps]
        rows.append(["total" + (" (overlapped)" if self.overlap else " (serial)"), "", num(self.comms),
                     num(self.compute)])  # fmt: skip
        at = f"{self.seconds * 1e6:.3g} us" if self.seconds is not None else "symbolic"
        caption = f"cost by step, model {self.model}: {self.total} = {at}"
        return html_table(["step", "bytes", "communication (s)", "compute (s)"], rows, caption, code=(0,))

    def __str__(self) -> str:
        """Each step with its comms and compute terms, then the total and (on a chip) the seconds."""
        from shardalg.notation.printing import text

        lines = [f"{text(s.step.statement())}\n    comms {s.comms}   compute {s.compute}" for s in self.steps]
        lines.append(f"total: {self.total}")
        if self.seconds is not None:
            lines.append(f"seconds: {self.seconds:.6g}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"model": self.model, "overlap": self.overlap, "formula": str(self.total),
                                  "latex": self.latex(), "seconds": self.seconds}  # fmt: skip
        for key in ("comms", "compute", "memory"):
            out[key] = {"formula": str(getattr(self, key)), "seconds": self.evaluate(getattr(self, key))}
        out["steps"] = [s.to_json(self.values) for s in self.steps]
        return out


def plan_cost(plan: Plan, mesh, sizes=None, hw=None, model=None, overlap: bool = True, *,
              latency: bool = True, symbolic_links: bool = False, dcn_axes: Iterable[str] = (),
              hbm: Iterable[str] | None = None) -> PlanCost:  # fmt: skip
    """The symbolic cost of every step of ``plan`` and its totals.

    ``hw``: a Chip or preset name, whose numbers give ``seconds`` and whose wraparound rule and default model
    apply; ``model``: ``"ici"``, ``"alpha-beta"`` or ``"alpha-beta-rd"``; ``latency=False`` keeps only
    bandwidth terms (the bandwidth-bound regime of the book's derivations); ``symbolic_links`` writes each
    axis's link count as the symbol M_X; ``dcn_axes`` run over DCN; ``hbm`` restricts HBM traffic to the
    named tensors (e.g. the weights, in the book's decode accounting), default every einsum operand and result.
    """
    opts = Options.make(mesh, sizes, hw, model, symbolic_links=symbolic_links, dcn_axes=tuple(dcn_axes),
                        latency=latency, hbm=None if hbm is None else tuple(hbm))  # fmt: skip
    steps = tuple(step_cost(s, opts) for s in plan.steps)
    values = opts.chip.values() if opts.chip is not None else {}
    return PlanCost(steps, overlap, values, opts.model)


# ---- programs in the notation as plans --------------------------------------------------------------
def plan_of(node: Node, mesh=None, sizes=None) -> Plan:
    """The explicit plan a program (or one statement) spells out: one step per collective and product,
    inner expressions first. Checks legality first; a bare resharding request (``A[I_X] -> A[I_Y]``)
    has no steps of its own and is a UsageError (plan it with the planner)."""
    check_or_raise(node, mesh, sizes)
    ctx = context_for(node, mesh, sizes)
    statements = node.statements if isinstance(node, Program) else (node,)
    steps: list[Step] = []
    produced: set[Tensor] = set()
    leaves: list[Tensor] = []

    def emit(expr: Node, result: Tensor | None) -> Tensor:
        if isinstance(expr, Tensor):
            if expr not in produced and expr not in leaves:
                leaves.append(expr)
            return expr
        if isinstance(expr, Collective):
            arg = emit(expr.arg, None)
            out = result or value_of(Collective(expr.op, expr.axes, arg, expr.dim), ctx)
            steps.append(Step(expr.op, (arg,), out, expr.axes, expr.dim))
        elif isinstance(expr, Product):
            left, right = emit(expr.left, None), emit(expr.right, None)
            out = result or value_of(Product(left, right, expr.contract, expr.local), ctx, result)
            contracted, _ = product_dims(left, right, expr.contract, result)
            steps.append(Step(Op.EINSUM, (left, right), out, contract=contracted, local=expr.local))
        else:
            raise UsageError(f"cannot cost a {type(expr).__name__}")
        produced.add(out)
        return out

    for s in statements:
        if isinstance(s, Arrow) and isinstance(s.expr, Tensor):
            raise UsageError("a resharding request has no steps to cost: plan it first (shardalg plan)")
        if isinstance(s, Tensor):
            continue
        expr, result = (s.expr, s.result) if isinstance(s, Arrow) else (s, None)
        emit(expr, result)
    if not steps:
        raise UsageError("nothing to cost: write a collective or a product, e.g. AllGather_X(A[I_X, J])")
    return Plan(tuple(leaves), tuple(steps), steps[-1].output)


def cost(x: Plan | Node | str, mesh=None, sizes=None, hw=None, model=None, overlap: bool = True,
         **options) -> PlanCost:  # fmt: skip
    """The cost of a plan, a program, a statement or notation text (``"AllGather_X(bf16[B_X, D_Y])"``).
    The mesh and sizes may come from the program's ``mesh`` line and ``where`` clause."""
    if isinstance(x, str):
        from shardalg.notation.parse import parse

        x = parse(x)
    if isinstance(x, Plan):
        return plan_cost(x, mesh, sizes, hw, model, overlap, **options)
    if not isinstance(x, Node):
        raise UsageError(f"cost takes a plan, a program or notation text, not {type(x).__name__}")
    ctx = context_for(x, mesh, sizes)
    if ctx.mesh is None:
        raise UsageError("a cost needs a mesh: pass mesh='X=4,Y=2' or write 'mesh X=4, Y=2'")
    return plan_cost(plan_of(x, ctx.mesh, ctx.sizes), ctx.mesh, ctx.sizes, hw, model, overlap, **options)


def step_seconds(mesh, sizes=None, hw=None, model=None, *, latency: bool = True) -> Callable[[Step], float]:
    """A function giving one communication step's seconds on ``hw``: the edge weight of a cost-ranked
    redistribute search (steps add up: serial time). Memoized per step; a symbol left unbound is an error."""
    opts = Options.make(mesh, sizes, hw, model, latency=latency)
    if opts.chip is None:
        raise UsageError("ranking by seconds needs a chip: pass hw='tpu-v5e' (CLI: --hw tpu-v5e)")
    values = opts.chip.values()
    memo: dict[Step, float] = {}

    def seconds(step: Step) -> float:
        got = memo.get(step)
        if got is None:
            value = numeric(step_cost(step, opts).comms, values)
            if value is None:
                raise UsageError(f"ranking by seconds needs every size bound: {step.statement()} is symbolic")
            got = memo[step] = value
        return got

    return seconds
