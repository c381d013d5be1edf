"""Derivations: conditions, optima and thresholds that come out of plans and the cost model.

    >>> d = compare(plan_b, plan_a, solve_for="D")          # doctest: +SKIP
    >>> d.result
    D > 2*B

Each function returns a :class:`Derivation`: the steps it took (the costs, the inequality, each
simplification, the isolated symbol), the result, and printers (aligned LaTeX, text, JSON). Nothing here
knows any particular answer: a relation ``T_a < T_b`` between positive costs is solved by splitting maxima
(``x < max(p, q)`` is ``x < p ∨ x < q``), dividing through (``T_a/T_b < 1``) and isolating the chosen symbol
in the monomial that remains (``g·x^k < 1`` gives ``x < g^(-1/k)`` for k > 0, ``x > g^(-1/k)`` for k < 0);
what is not a monomial goes to sympy's ``solve_univariate_inequality`` over a positive real stand-in
(:mod:`shardalg.costs.solve`). Monomials are solved on light terms; sympy expressions are made when the
derivation is printed.

The book's derivations are layer-level: costs a derivation makes are taken under the overlap policy
``steady`` (each mesh axis's communication and the compute overlap across layers) unless ``overlap=`` says
otherwise; a PlanCost passed in keeps its own policy unless ``overlap=`` is given. The title (and the JSON's
``overlap``) names the policy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import sympy
from sympy import Expr

from shardalg.algebra.mesh import Mesh, as_mesh
from shardalg.algebra.symbols import as_expr, dim_size, latex_names, quantity, symbol
from shardalg.errors import UsageError
from shardalg.notation.plan import Plan
from shardalg.notation.printing.display import html_escape, html_table, pretty_text, short
from shardalg.notation.printing.symbology import latex_escape_text
from shardalg.notation.syntax import Op, Tensor

from .costmodel import CostModel
from .fromsympy import from_sympy
from .plancost import PlanCost, costed
from .schedule import OverlapPolicy
from .solve import Lazy, Steps, positive_root, realize, simplify, solve_less, stationary
from .solve import substitute as substituted
from .stepcost import Options, _formula
from .terms import Max, Term, mono

__all__ = [
    "Derivation",
    "compare",
    "compute_bound",
    "optimum",
    "critical",
    "solve_less",
    "REGIMES",
    "DERIVATION_OVERLAP",
]

DERIVATION_OVERLAP = OverlapPolicy.STEADY  # the book's derivations are layer-level


@dataclass
class Derivation:
    """The record of a derivation: titled steps (label, sympy expression or relation) and the result."""

    title: str
    steps: Steps = field(default_factory=Steps)
    result: sympy.Basic | None = None
    values: Mapping[sympy.Symbol, float] = field(default_factory=dict)
    overlap: OverlapPolicy | None = None
    notes: tuple[
        str, ...
    ] = ()  # what was done that the input did not spell out (a plan chosen for a statement)

    def add(self, label: str, expr: object) -> object:
        return self.steps.add(label, expr)

    @property
    def value(self) -> float | None:
        """The result as a number with the chip's values, when it is an expression that becomes one."""
        if self.result is None or isinstance(self.result, sympy.logic.boolalg.Boolean):
            return None
        got = from_sympy(self.result).evaluate(self.values)
        return None if got is None else float(got)

    def latex(self) -> str:
        """The steps as an aligned LaTeX block; the first row names the overlap policy, if any."""
        names = latex_names(*(e for _, e in self.steps))
        rows = [rf"\text{{overlap}} &\quad \text{{{self.overlap}}}"] if self.overlap else []
        rows += [
            rf"{_latex_label(label)} &\quad {sympy.latex(e, symbol_names=names)}" for label, e in self.steps
        ]
        return "\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}"

    def _repr_latex_(self) -> str:
        return f"$${self.latex()}$$"

    def __repr__(self) -> str:
        """``<Derivation when is plan a faster than plan b? ...: D > 2*B (6 steps)>``."""
        return short("Derivation", f"{self.title}: {sympy.sstr(self.result)} ({len(self.steps)} steps)")

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        pretty_text(self, p, cycle)

    def _repr_html_(self) -> str:
        """The steps as a table (label, expression), titled, with the notes under it."""
        rows = [["overlap", str(self.overlap)]] if self.overlap else []
        rows += [[label, sympy.sstr(e)] for label, e in self.steps]
        notes = "".join(f"<p>note: {html_escape(n)}</p>" for n in self.notes)
        return html_table(["step", "expression"], rows, self.title, code=(1,)) + notes

    def __str__(self) -> str:
        steps = list(self.steps)
        width = max((len(label) for label, _ in steps), default=0)
        lines = [self.title] + [f"  {label:<{width}}  {sympy.sstr(e)}" for label, e in steps]
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        names = latex_names(self.result, *(e for _, e in self.steps))
        return {
            "title": self.title,
            "overlap": None if self.overlap is None else self.overlap.value,
            "result": sympy.sstr(self.result),
            "srepr": sympy.srepr(self.result),
            "latex": sympy.latex(self.result, symbol_names=names),
            "value": self.value,
            "notes": list(self.notes),
            "steps": [
                {"label": label, "expr": sympy.sstr(e), "latex": sympy.latex(e, symbol_names=names)}
                for label, e in self.steps
            ],
        }

    def to_json_text(self) -> str:
        import json  # the JSON output only: a command without --json starts without it

        return json.dumps(self.to_json(), indent=2)


def _latex_text(label: str) -> str:
    return latex_escape_text(label)


def _latex_label(label: str) -> str:
    """A step label in LaTeX: a time such as ``T_a`` as math, anything else as text."""
    head, _, sub = label.partition("_")
    if head == "T" and sub.isalnum():
        return f"T_{{{sub}}}"
    return rf"\text{{{_latex_text(label)}}}"


def _symbol(x: sympy.Symbol | str | None) -> sympy.Symbol | None:
    if x is None or isinstance(x, sympy.Symbol):
        return x
    if isinstance(x, str) and x.isidentifier():
        return symbol(x)
    raise UsageError(f"solve for a dim or axis name (an identifier, like D), not {x!r}")


def _solved_for(
    name: sympy.Symbol | str | None, free: frozenset, plans: Iterable[PlanCost]
) -> sympy.Symbol | None:
    """The symbol a condition is solved for: the one named, which must occur in it, else the first dim of the
    plans' inputs that does."""
    x = _symbol(name)
    if x is None:
        return _first_dim(free, plans)
    if x not in free:
        have = ", ".join(sorted(str(s) for s in free)) or "none"
        raise UsageError(f"cannot solve for {x}: it does not occur in the condition (its symbols: {have})")
    return x


def _first_dim(free: frozenset, plans: Iterable[PlanCost]) -> sympy.Symbol | None:
    for pc in plans:
        for s in pc.steps:
            for t in s.step.inputs:
                for dim in t.dims if isinstance(t, Tensor) else ():
                    if dim.name is not None and dim_size(dim.name) in free:
                        return dim_size(dim.name)
    return None


def _as_substitution(mapping: Mapping | None) -> dict:
    return {k: realize(v) for k, v in mapping.items()} if mapping else {}


def _eq(a: object, b: object) -> Lazy:
    return Lazy(lambda: sympy.Eq(realize(a), realize(b), evaluate=False))


# ---- compare -------------------------------------------------------------------------------------
# regime -> (time of plan a, time of plan b, what the regime assumes, the policy it forces or None)
Regime = tuple[Callable[[PlanCost], Term], Callable[[PlanCost], Term], str, OverlapPolicy | None]
REGIMES: dict[str, Regime] = {
    "comms": (lambda c: c.light("comms"), lambda c: c.light("comms"), "both plans communication-bound", None),
    "compute": (
        lambda c: c.light("total"),
        lambda c: c.light("compute"),
        "plan b compute-bound (its time is its compute)",
        None,
    ),
    "total": (lambda c: c.light("total"), lambda c: c.light("total"), "each plan at its total time", None),
    "overlap": (
        lambda c: c.light("total"),
        lambda c: c.light("total"),
        "each plan takes max(compute, comms)",
        OverlapPolicy.STEADY,
    ),
    OverlapPolicy.SERIAL.value: (  # the regime named for the policy it forces
        lambda c: c.light("total"),
        lambda c: c.light("total"),
        "compute and comms add up",
        OverlapPolicy.SERIAL,
    ),
}


def _costs(
    x, mesh, sizes, costs: CostModel, overlap: object, forced: OverlapPolicy | None = None
) -> PlanCost:
    """The plan's cost under the policy asked for: ``overlap`` (or the regime's), else a PlanCost's own,
    else the book's ``steady``."""
    if forced is not None:
        policy = None if overlap is None else OverlapPolicy.of(overlap)
        if policy is not None and policy is not forced:
            raise UsageError(f"this regime compares under overlap {forced}, not {policy}")
        overlap = forced
    if isinstance(x, PlanCost):
        return x if overlap is None else x.under(overlap)
    return costed(x, mesh, sizes, costs.under(OverlapPolicy.of(overlap, DERIVATION_OVERLAP)))


def compare(
    plan_a: Plan | PlanCost | str,
    plan_b: Plan | PlanCost | str,
    solve_for=None,
    regime: str = "comms",
    *,
    mesh=None,
    sizes=None,
    hw=None,
    model=None,
    latency: bool = False,
    overlap: object = None,
    substitute: Mapping | None = None,
    **options,
) -> Derivation:
    """The condition under which plan a is faster than plan b in ``regime``, solved for ``solve_for``.

    Regimes: ``comms`` (both communication-bound: compare comms), ``compute`` (b compute-bound, a at its
    total time: the book's large-batch case), ``total`` (both at their total time); ``overlap`` and
    ``serial`` are ``total`` under those policies. ``overlap`` is the policy the costs are taken under
    (default: a PlanCost's own, else ``steady``, the book's layer-level view). ``latency=False`` (default) drops the T_min / alpha
    terms: the bandwidth-bound regime of the book. ``substitute`` replaces symbols (to a fixed point) before
    solving. Other options go to :func:`shardalg.costs.plancost.plan_cost`. Equal costs give ``False``
    (neither plan is faster) with a step that says so.
    """
    if regime not in REGIMES:
        raise UsageError(f"unknown regime {regime!r}; known: {', '.join(REGIMES)}")
    time_a, time_b, assumption, forced = REGIMES[regime]
    costs = CostModel.of(hw, model, latency=latency, **options)
    m = as_mesh(mesh)
    ca = _costs(plan_a, m, sizes, costs, overlap, forced)
    cb = _costs(plan_b, m, sizes, costs, ca.overlap)
    policy = ca.overlap
    notes = (*(f"plan a: {n}" for n in ca.notes), *(f"plan b: {n}" for n in cb.notes))
    d = Derivation(
        f"when is plan a faster than plan b? ({assumption}; overlap {policy})",
        values=ca.values,
        overlap=policy,
        notes=notes,
    )
    mapping = _as_substitution(substitute)
    ta, tb = substitute_terms(time_a(ca), mapping), substitute_terms(time_b(cb), mapping)
    d.add("T_a", ta)
    d.add("T_b", tb)
    d.add("a faster", Lazy(lambda: sympy.StrictLessThan(realize(ta), realize(tb), evaluate=False)))
    if ta == tb:
        d.result = d.add("neither is faster: equal costs", sympy.false)
        return d
    x = _solved_for(solve_for, _symbols(ta) | _symbols(tb), (ca, cb))
    d.result = d.add("result", solve_less(ta, tb, x, d.steps))
    return d


def substitute_terms(t: Term | Expr, mapping: Mapping) -> Term | Expr:
    return substituted(t, mapping) if mapping else t


def _symbols(t: Term | Expr) -> frozenset:
    return t.symbols() if isinstance(t, Term) else frozenset(t.free_symbols)


def compute_bound(
    plan: Plan | PlanCost | str,
    solve_for=None,
    *,
    bound: str = "compute",
    mesh=None,
    sizes=None,
    hw=None,
    model=None,
    latency: bool = False,
    overlap: object = None,
    substitute: Mapping | None = None,
    **options,
) -> Derivation:
    """The condition for ``bound`` (``compute``, or ``memory`` for HBM time) to dominate the plan's
    communication: ``comms < bound``, solved for ``solve_for`` (default: the first dim of the plan's
    inputs that the condition involves); comms under ``overlap`` (default: a PlanCost's own, else ``steady``)."""
    if bound not in ("compute", "memory"):
        raise UsageError(f"bound is 'compute' or 'memory', not {bound!r}")
    pc = _costs(plan, as_mesh(mesh), sizes, CostModel.of(hw, model, latency=latency, **options), overlap)
    policy = pc.overlap
    d = Derivation(
        f"when does {bound} dominate communication? (overlap {policy})",
        values=pc.values,
        overlap=policy,
        notes=tuple(pc.notes),
    )
    comms, work = pc.light("comms"), pc.light(bound)
    mapping = _as_substitution(substitute)
    if mapping:
        d.add(
            "substitute",
            Lazy(lambda: sympy.Tuple(*(sympy.Eq(k, v, evaluate=False) for k, v in mapping.items()))),
        )
        comms, work = substituted(comms, mapping), substituted(work, mapping)
    d.add("T_comms", comms)
    d.add(f"T_{bound}", work)
    d.add(
        f"{bound}-bound", Lazy(lambda: sympy.StrictGreaterThan(realize(work), realize(comms), evaluate=False))
    )
    if isinstance(comms, Term) and comms.is_zero:
        d.result = d.add("no communication: always", sympy.true)
        return d
    x = _solved_for(solve_for, _symbols(comms) | _symbols(work), (pc,))
    d.result = d.add("result", solve_less(comms, work, x, d.steps))
    return d


# ---- optimum -------------------------------------------------------------------------------------
def optimum(
    cost_expr: Expr | PlanCost,
    over,
    subject_to: sympy.Eq | None = None,
    *,
    term: str = "comms",
    values: Mapping | None = None,
    overlap: object = None,
) -> Derivation:
    """The minimizer of ``cost_expr`` over ``over``, after eliminating another symbol with ``subject_to``
    (``Eq(X*Y, N)``). A PlanCost contributes its ``term`` (default comms) under ``overlap`` (default
    its own policy). The minimum of a max of an increasing and a decreasing term is where they cross; otherwise
    where the derivative vanishes."""
    x = _symbol(over)
    if x is None:
        raise UsageError("optimum needs the symbol to optimize over")
    notes: tuple[str, ...] = ()
    if isinstance(cost_expr, PlanCost):
        pc = _costs(cost_expr, None, None, CostModel(), overlap)
        policy, notes = pc.overlap, tuple(pc.notes)
        expr: Term | Expr = pc.light(term)
        title = f"minimize over {x} (overlap {policy})"
    else:
        policy, expr, title = None, from_sympy(as_expr(cost_expr)), f"minimize over {x}"
    d = Derivation(title, values=dict(values or {}), overlap=policy, notes=notes)
    d.add("cost", expr)
    if subject_to is not None:
        if not isinstance(subject_to, sympy.Eq):
            raise UsageError(f"subject_to is an equation such as Eq(X*Y, N), not {subject_to!r}")
        d.add("subject to", subject_to)
        others = [s for s in sorted(subject_to.free_symbols - {x}, key=str) if s in _symbols(expr)]
        if not others:
            raise UsageError(f"the constraint {subject_to} names no symbol of the cost besides {x}")
        y = others[0]
        y_of_x = positive_root(subject_to.lhs, subject_to.rhs, y)
        d.add(f"eliminate {y}", _eq(y, y_of_x))
        expr = substituted(expr, {y: realize(y_of_x)})
        d.add("cost", expr)
    if x not in _symbols(expr):
        raise UsageError(
            f"the {term if isinstance(cost_expr, PlanCost) else 'cost'} does not depend on {x}: "
            f"nothing to optimize ({realize(expr)})"
        )
    best = _minimizer(expr, x, d)
    d.add(f"{x} optimal", _eq(sympy.Symbol(f"{x.name}_opt", positive=True), best))
    d.result = realize(best)
    return d


def _minimizer(expr: Term | Expr, x: sympy.Symbol, d: Derivation) -> Term | Expr:
    if isinstance(expr, Max) and len(expr.args) == 2:
        f, g = expr.args
        d.add("the terms cross", _eq(f, g))
        return positive_root(f, g, x)
    if isinstance(expr, Term):
        parts = stationary(expr, x)
        if parts is not None:
            up, down = parts
            d.add("stationary point", Lazy(lambda: sympy.Eq(sympy.diff(realize(expr), x), 0)))
            return positive_root(up, down, x)
    e = realize(expr)
    if isinstance(e, sympy.Max) and len(e.args) == 2:
        f, g = e.args
        d.add("the terms cross", sympy.Eq(f, g, evaluate=False))
        return positive_root(f, g, x)
    slope = sympy.diff(e, x)
    d.add("stationary point", sympy.Eq(slope, 0, evaluate=False))
    return positive_root(slope, sympy.Integer(0), x)


# ---- critical sizes ------------------------------------------------------------------------------
def critical(
    op: Op = Op.ALL_GATHER,
    axes: Iterable[str] = ("X",),
    mesh=None,
    hw=None,
    model: str = "ici",
    per: str = "shard",
) -> Derivation:
    """The buffer size at which ``op`` over ``axes`` turns from latency-bound to bandwidth-bound: solve
    latency term = bandwidth term for V (the array's bytes); ``per="shard"`` divides by the group size
    (the buffer each device sends per hop). Symbolic axis sizes by default (``Mesh(X=None)``)."""
    axes = tuple(axes)
    if per not in ("shard", "array"):
        raise UsageError(f"per is 'shard' or 'array', not {per!r}")
    m = as_mesh(mesh) or Mesh({a: None for a in axes})
    opts = Options.of(CostModel.of(hw, model), m)
    v = quantity("V")
    parts = _collective_parts(op, axes, opts, mono(v))
    if len(parts) != 1:
        raise UsageError(
            f"{op.value} in the {opts.costs.model} model has {len(parts)} phases; ask for one of them"
        )
    ((lat, bw),) = parts
    d = Derivation(
        f"latency/bandwidth crossover of {op.value}_{''.join(axes)}",
        values=opts.costs.chip.values() if opts.costs.chip else {},
    )
    d.add("latency term", lat)
    d.add("bandwidth term", bw)
    d.add("crossover", _eq(lat, bw))
    v_star = positive_root(lat, bw, v)
    d.add("array bytes", _eq(v, v_star))
    if per == "shard":
        n = from_sympy(sympy.Mul(*(m.size_expr(a) for a in axes)))
        shard = v_star / n if isinstance(v_star, Term) else simplify(v_star / n.sympy())
        d.add("bytes per shard", _eq(sympy.Symbol("V_shard", positive=True), shard))
        d.result = realize(shard)
    else:
        d.result = realize(v_star)
    if d.value is not None:
        d.add("with the chip's numbers", sympy.Float(d.value, 6))
    return d


def _collective_parts(op: Op, axes: tuple[str, ...], opts: Options, v: Term):
    group = tuple(link for link in (opts.link(a) for a in axes) if link.number != 1)
    return _formula(opts.costs.model, op, v, group).parts
