"""Derivations: conditions, optima and thresholds that come out of plans and the cost model.

    >>> d = compare(plan_b, plan_a, solve_for="D")          # doctest: +SKIP
    >>> d.result
    D > 2*B

Each function returns a :class:`Derivation`: the steps it took (the costs, the inequality, each
simplification, the isolated symbol), the result, and printers (aligned LaTeX, text, JSON). Nothing here
knows any particular answer: a relation ``T_a < T_b`` between positive costs is solved by dividing through
(``T_a/T_b < 1``), splitting maxima (``x < max(p, q)`` is ``x < p ∨ x < q``), and isolating the chosen symbol
in the monomial that remains (``g·x^k < 1`` gives ``x < g^(-1/k)`` for k > 0, ``x > g^(-1/k)`` for k < 0);
what is not a monomial goes to sympy's ``solve_univariate_inequality`` over a positive real stand-in.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import sympy
from sympy import Expr, Max

from shardalg.algebra.symbols import as_expr, dim_size, latex_names, quantity
from shardalg.errors import UsageError
from shardalg.notation.plan import Plan
from shardalg.notation.syntax import Op, Tensor

from .plancost import PlanCost, cost
from .stepcost import Options, _formula

__all__ = ["Derivation", "compare", "compute_bound", "optimum", "critical", "solve_less", "REGIMES"]


@dataclass
class Derivation:
    """The record of a derivation: titled steps (label, sympy expression or relation) and the result."""

    title: str
    steps: list[tuple[str, sympy.Basic]] = field(default_factory=list)
    result: sympy.Basic | None = None
    values: Mapping[sympy.Symbol, float] = field(default_factory=dict)

    def add(self, label: str, expr: sympy.Basic) -> sympy.Basic:
        self.steps.append((label, expr))
        return expr

    @property
    def value(self) -> float | None:
        """The result as a number with the chip's values, when it is an expression that becomes one."""
        if self.result is None or isinstance(self.result, sympy.logic.boolalg.Boolean):
            return None
        v = as_expr(self.result).subs(self.values)
        return float(v) if not v.free_symbols else None

    def latex(self) -> str:
        names = latex_names()
        rows = [rf"{_latex_label(label)} &\quad {sympy.latex(e, symbol_names=names)}"
                for label, e in self.steps]  # fmt: skip
        return "\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}"

    def _repr_latex_(self) -> str:
        return f"$${self.latex()}$$"

    def __repr__(self) -> str:
        """``<Derivation when is plan a faster than plan b? ...: D > 2*B (6 steps)>``."""
        from shardalg.notation.printing.display import short

        return short("Derivation", f"{self.title}: {sympy.sstr(self.result)} ({len(self.steps)} steps)")

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        from shardalg.notation.printing.display import pretty_text

        pretty_text(self, p, cycle)

    def __str__(self) -> str:
        width = max((len(label) for label, _ in self.steps), default=0)
        lines = [self.title] + [f"  {label:<{width}}  {sympy.sstr(e)}" for label, e in self.steps]
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        names = latex_names()
        return {
            "title": self.title,
            "result": sympy.sstr(self.result),
            "srepr": sympy.srepr(self.result),
            "latex": sympy.latex(self.result, symbol_names=names),
            "value": self.value,
            "steps": [{"label": label, "expr": sympy.sstr(e), "latex": sympy.latex(e, symbol_names=names)}
                      for label, e in self.steps],  # fmt: skip
        }

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2)


def _latex_text(label: str) -> str:
    from shardalg.notation.printing.symbology import latex_escape_text

    return latex_escape_text(label)


def _latex_label(label: str) -> str:
    """A step label in LaTeX: a time such as ``T_a`` as math, anything else as text."""
    head, _, sub = label.partition("_")
    if head == "T" and sub.isalnum():
        return f"T_{{{sub}}}"
    return rf"\text{{{_latex_text(label)}}}"


# ---- solving T_a < T_b for one symbol ----------------------------------------------------------------
def _simplify(e: Expr) -> Expr:
    return sympy.factor(sympy.powsimp(sympy.cancel(as_expr(e))))


def _substitute(e: Expr, mapping: Mapping) -> Expr:
    """``e.subs(mapping)``. When every key is a symbol that no value mentions, the substitutions are
    independent and one ``xreplace`` pass gives the same tree: ``subs`` would apply them one after the other,
    re-evaluating (a Max compares its arguments) the half-substituted expression after each."""
    keys = set(mapping)
    if all(isinstance(k, sympy.Symbol) for k in keys) and all(
        isinstance(v, sympy.Basic) and not (v.free_symbols & keys) for v in mapping.values()
    ):
        return e.xreplace(dict(mapping))
    return e.subs(mapping)


def _split(lhs: Expr, rhs: Expr) -> sympy.Basic:
    """``lhs < rhs`` with maxima on either side split into a combination of max-free relations."""
    if isinstance(rhs, Max):
        return sympy.Or(*(_split(lhs, a) for a in rhs.args), evaluate=False)
    if isinstance(lhs, Max):
        return sympy.And(*(_split(a, rhs) for a in lhs.args), evaluate=False)
    return sympy.StrictLessThan(lhs, rhs, evaluate=False)


def _isolate(ratio: Expr, x: sympy.Symbol) -> sympy.Basic | None:
    """``ratio < 1`` solved for ``x`` when ratio = g·x^k; None when it is not such a monomial."""
    g, h = ratio.as_independent(x, as_Add=False)
    base, k = h.as_base_exp()
    if base != x or not k.is_number or k == 0:
        return None
    bound = _simplify(sympy.powsimp((1 / g) ** (1 / k), force=True))
    return sympy.StrictLessThan(x, bound) if k > 0 else sympy.StrictGreaterThan(x, bound)


def solve_less(lhs: Expr, rhs: Expr, x: sympy.Symbol | None, d: Derivation) -> sympy.Basic:
    """The condition ``lhs < rhs`` (positive costs) solved for ``x``, recording the steps in ``d``."""
    split = _split(as_expr(lhs), as_expr(rhs))
    if not isinstance(split, sympy.StrictLessThan):
        d.add("split the maxima", split)
    return _solve_tree(split, x, d)


def _solve_tree(node: sympy.Basic, x: sympy.Symbol | None, d: Derivation) -> sympy.Basic:
    if isinstance(node, sympy.And | sympy.Or):
        return node.func(*(_solve_tree(a, x, d) for a in node.args))
    ratio = _simplify(node.lhs / node.rhs)
    d.add("divide by the right side", sympy.StrictLessThan(ratio, 1, evaluate=False))
    if not ratio.free_symbols:
        return sympy.true if bool(ratio < 1) else sympy.false
    target = x if x is not None and x in ratio.free_symbols else None
    if target is None and len(ratio.free_symbols) == 1:
        (target,) = ratio.free_symbols
    if target is None:
        return sympy.StrictLessThan(ratio, 1)
    solved = _isolate(ratio, target)
    if solved is None:
        real = sympy.Dummy(target.name, positive=True)
        try:
            found = sympy.solve_univariate_inequality(ratio.subs(target, real) < 1, real, relational=True)
        except (NotImplementedError, ValueError, TypeError):
            d.add(f"no closed form in {target}", sympy.StrictLessThan(ratio, 1))
            return sympy.StrictLessThan(ratio, 1)
        solved = sympy.simplify(found.subs(real, target))
    d.add(f"solve for {target}", solved)
    return solved


def _symbol(x: sympy.Symbol | str | None) -> sympy.Symbol | None:
    if x is None or isinstance(x, sympy.Symbol):
        return x
    if isinstance(x, str) and x.isidentifier():
        return dim_size(x) if x not in _QUANTITIES else quantity(x)
    raise UsageError(f"solve for a dim or axis name (an identifier, like D), not {x!r}")


_QUANTITIES = ("W_ici", "W_dcn", "W_hbm", "T_min", "C", "alpha", "beta", "N", "V")


def _first_dim(expr: sympy.Basic, plans: Iterable[PlanCost]) -> sympy.Symbol | None:
    free = expr.free_symbols
    for pc in plans:
        for s in pc.steps:
            for t in s.step.inputs:
                for dim in t.dims if isinstance(t, Tensor) else ():
                    if dim.name is not None and dim_size(dim.name) in free:
                        return dim_size(dim.name)
    return None


# ---- compare -------------------------------------------------------------------------------------
def _overlapped(c: PlanCost) -> Expr:
    return Max(c.compute, c.comms)


# regime -> (time of plan a, time of plan b, what the regime assumes)
REGIMES: dict[str, tuple[Callable[[PlanCost], Expr], Callable[[PlanCost], Expr], str]] = {
    "comms": (lambda c: c.comms, lambda c: c.comms, "both plans communication-bound"),
    "compute": (_overlapped, lambda c: c.compute, "plan b compute-bound (its time is its compute)"),
    "overlap": (_overlapped, _overlapped, "each plan takes max(compute, comms)"),
    "serial": (lambda c: c.compute + c.comms, lambda c: c.compute + c.comms, "compute and comms add up"),
}


def _costs(x, opts: dict) -> PlanCost:
    if isinstance(x, PlanCost):
        return x
    return cost(x, **opts)


def _cost_options(mesh, sizes, hw, model, latency, **kw) -> dict:
    return {"mesh": mesh, "sizes": sizes, "hw": hw, "model": model, "latency": latency, **kw}


def compare(plan_a: Plan | PlanCost | str, plan_b: Plan | PlanCost | str, solve_for=None, regime: str = "comms",
            *, mesh=None, sizes=None, hw=None, model=None, latency: bool = False,
            substitute: Mapping | None = None, **options) -> Derivation:  # fmt: skip
    """The condition under which plan a is faster than plan b in ``regime``, solved for ``solve_for``.

    Regimes: ``comms`` (both communication-bound: compare comms), ``compute`` (b compute-bound, a at
    max(compute, comms): the book's large-batch case), ``overlap`` (both at max(compute, comms)),
    ``serial`` (compute + comms). ``latency=False`` (default) drops the T_min / alpha terms: the
    bandwidth-bound regime of the book. Other options go to :func:`shardalg.costs.stepcost.plan_cost`.
    """
    if regime not in REGIMES:
        raise UsageError(f"unknown regime {regime!r}; known: {', '.join(REGIMES)}")
    opts = _cost_options(mesh, sizes, hw, model, latency, **options)
    ca, cb = _costs(plan_a, opts), _costs(plan_b, opts)
    time_a, time_b, assumption = REGIMES[regime]
    d = Derivation(f"when is plan a faster than plan b? ({assumption})", values=ca.values)
    ta, tb = time_a(ca), time_b(cb)
    if substitute:
        ta, tb = _substitute(ta, substitute), _substitute(tb, substitute)
    d.add("T_a", ta)
    d.add("T_b", tb)
    d.add("a faster", sympy.StrictLessThan(ta, tb, evaluate=False))
    x = _symbol(solve_for) or _first_dim(sympy.Tuple(ta, tb), (ca, cb))
    d.result = d.add("result", solve_less(ta, tb, x, d))
    return d


def compute_bound(plan: Plan | PlanCost | str, solve_for=None, *, bound: str = "compute", mesh=None, sizes=None,
                  hw=None, model=None, latency: bool = False, substitute: Mapping | None = None,
                  **options) -> Derivation:  # fmt: skip
    """The condition for ``bound`` (``compute``, or ``memory`` for HBM time) to dominate the plan's
    communication: ``comms < bound``, solved for ``solve_for`` (default: the first dim of the plan's
    inputs that the condition involves)."""
    if bound not in ("compute", "memory"):
        raise UsageError(f"bound is 'compute' or 'memory', not {bound!r}")
    pc = _costs(plan, _cost_options(mesh, sizes, hw, model, latency, **options))
    d = Derivation(f"when does {bound} dominate communication?", values=pc.values)
    comms, work = pc.comms, pc.term(bound)
    if substitute:
        d.add("substitute", sympy.Tuple(*(sympy.Eq(k, v) for k, v in substitute.items())))
        comms, work = _substitute(comms, substitute), _substitute(work, substitute)
    d.add("T_comms", comms)
    d.add(f"T_{bound}", work)
    d.add(f"{bound}-bound", sympy.StrictGreaterThan(work, comms, evaluate=False))
    x = _symbol(solve_for) or _first_dim(sympy.Tuple(comms, work), (pc,))
    d.result = d.add("result", solve_less(comms, work, x, d))
    return d


# ---- optimum -------------------------------------------------------------------------------------
def _positive_root(eq: sympy.Eq, x: sympy.Symbol) -> Expr:
    """The positive solution of ``eq`` for ``x``: by isolation when lhs/rhs is a monomial g·x^k (then
    x = g^(-1/k)), else by sympy's solve over a positive real stand-in."""
    if eq.rhs != 0:
        ratio = _simplify(eq.lhs / eq.rhs)
        g, h = ratio.as_independent(x, as_Add=False)
        base, k = h.as_base_exp()
        if base == x and k.is_number and k != 0:
            return _simplify(sympy.powsimp((1 / g) ** (1 / k), force=True))
    real = sympy.Dummy(x.name, positive=True)
    roots = [r for r in sympy.solve(eq.subs(x, real), real) if r.is_positive is not False]
    if len(roots) != 1:
        raise UsageError(f"expected one positive solution for {x}, found {len(roots)}: {roots}")
    return _simplify(roots[0].subs(real, x))


def optimum(cost_expr: Expr | PlanCost, over, subject_to: sympy.Eq | None = None, *, term: str = "comms",
            values: Mapping | None = None) -> Derivation:  # fmt: skip
    """The minimizer of ``cost_expr`` over ``over``, after eliminating another symbol with ``subject_to``
    (``Eq(X*Y, N)``). A PlanCost contributes its ``term`` (default comms). The minimum of a max of an
    increasing and a decreasing term is where they cross; otherwise where the derivative vanishes."""
    x = _symbol(over)
    if x is None:
        raise UsageError("optimum needs the symbol to optimize over")
    expr = cost_expr.term(term) if isinstance(cost_expr, PlanCost) else as_expr(cost_expr)
    d = Derivation(f"minimize over {x}", values=dict(values or {}))
    d.add("cost", expr)
    if subject_to is not None:
        d.add("subject to", subject_to)
        others = [s for s in sorted(subject_to.free_symbols - {x}, key=str) if s in expr.free_symbols]
        if not others:
            raise UsageError(f"the constraint {subject_to} names no symbol of the cost besides {x}")
        y = others[0]
        y_of_x = _positive_root(subject_to, y)
        d.add(f"eliminate {y}", sympy.Eq(y, y_of_x))
        expr = _simplify_max(expr, {y: y_of_x})
        d.add("cost", expr)
    if isinstance(expr, Max) and len(expr.args) == 2:
        f, g = expr.args
        # unevaluated: Eq would compare f and g (sympy's is_eq) only to return the same Eq when undecided,
        # and _positive_root needs an equation (a decided one, True or False, has no sides)
        cross = d.add("the terms cross", sympy.Eq(f, g, evaluate=False))
        best = _positive_root(cross, x)
    else:
        slope = sympy.diff(expr, x)
        d.add("stationary point", sympy.Eq(slope, 0))
        best = _positive_root(sympy.Eq(slope, 0), x)
    d.add(f"{x} optimal", sympy.Eq(sympy.Symbol(f"{x.name}_opt", positive=True), best))
    d.result = best
    return d


def _simplify_max(e: Expr, substitute: Mapping | None = None) -> Expr:
    """``e`` (after ``substitute``) simplified, a maximum argument by argument. The substitution goes into
    each argument: substituting into the whole maximum would compare its arguments once more (each Max
    compares them, and these comparisons are most of the cost) before they are simplified."""
    if isinstance(e, Max):
        args = (_substitute(a, substitute) for a in e.args) if substitute else e.args
        return Max(*(_simplify(a) for a in args))
    return _simplify(_substitute(e, substitute) if substitute else e)


# ---- critical sizes ------------------------------------------------------------------------------
def critical(op: Op = Op.ALL_GATHER, axes: Iterable[str] = ("X",), mesh=None, hw=None, model: str = "ici",
             per: str = "shard") -> Derivation:  # fmt: skip
    """The buffer size at which ``op`` over ``axes`` turns from latency-bound to bandwidth-bound: solve
    latency term = bandwidth term for V (the array's bytes); ``per="shard"`` divides by the group size
    (the buffer each device sends per hop). Symbolic axis sizes by default (``Mesh(X=None)``)."""
    from shardalg.algebra.mesh import Mesh, as_mesh

    axes = tuple(axes)
    m = as_mesh(mesh) or Mesh({a: None for a in axes})
    opts = Options.make(m, None, hw, model)
    v = quantity("V")
    parts = _collective_parts(op, axes, opts, v)
    if len(parts) != 1:
        raise UsageError(f"{op.value} in the {opts.model} model has {len(parts)} phases; ask for one of them")
    ((lat, bw),) = parts
    d = Derivation(f"latency/bandwidth crossover of {op.value}_{''.join(axes)}",
                   values=opts.chip.values() if opts.chip else {})  # fmt: skip
    d.add("latency term", lat)
    d.add("bandwidth term", bw)
    d.add("crossover", sympy.Eq(lat, bw))
    v_star = _positive_root(sympy.Eq(lat, bw), v)
    d.add("array bytes", sympy.Eq(v, v_star))
    if per == "shard":
        n = sympy.Mul(*(as_expr(m.size_expr(a)) for a in axes))
        shard = _simplify(v_star / n)
        d.add("bytes per shard", sympy.Eq(sympy.Symbol("V_shard", positive=True), shard))
        d.result = shard
    elif per == "array":
        d.result = v_star
    else:
        raise UsageError(f"per is 'shard' or 'array', not {per!r}")
    if d.value is not None:
        d.add("with the chip's numbers", sympy.Float(d.value, 6))
    return d


def _collective_parts(op: Op, axes: tuple[str, ...], opts: Options, v: Expr):
    group = tuple(link for link in (opts.link(a) for a in axes) if link.size != 1)
    return _formula(opts.model, op, v, group).parts
