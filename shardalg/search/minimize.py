"""The minimum of a cost over one variable (an axis split X with Y = N/X), in closed form.

For a maximum of monomials the minimum over ``x`` in ``[lo, hi]`` is again a maximum of monomials. In log
space it is the linear program ``min t s.t. t >= a_k·log x + b_k``, and by LP duality its value is the largest
value at the vertices of the dual: each term that does not depend on x, each pair of terms with opposite
slopes where they cross (``x* = (m_j/m_i)^(1/(a_i - a_j))``: the book's X_opt), each rising term at ``lo`` and
each falling one at ``hi``. So ``min_x max(...) = Max(those values)`` exactly, and each value remembers the
x that reaches it.

For a sum ``Q + u·x^p + v·x^-q`` (one rising and one falling term) the minimum is where the derivative
vanishes, ``x* = (q·v/(p·u))^(1/(p+q))``, with value ``Q + (1 + p/q)·u(x*)``, valid while ``lo <= x* <= hi``;
outside, x sits at the bound it passed (the sum is convex in log x). The result is three options (x*, lo,
hi), each valid where it is the minimum, so together they are exact. Any other
sum has no closed form: it is bracketed by the minimum of its largest term (``max <= sum <= k·max``) and
says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import sympy
from sympy import Expr

from shardalg.algebra.symbols import as_expr
from shardalg.costs.derive import Derivation
from shardalg.errors import UsageError

from .logspace import Cost, Mono, Term, mono_of, normal_form, to_expr
from .logspace import substitute as subs_nf

__all__ = ["Minimize", "Option", "Minimum", "minimize", "minimize_cost", "minimize_phases"]

ONE = sympy.Integer(1)


@dataclass(frozen=True)
class Minimize:
    """Minimize over ``over`` in ``[lower, upper]`` (bounds are monomials; ``upper=None``: no bound)."""

    over: sympy.Symbol
    lower: Expr | None = ONE
    upper: Expr | None = None

    def bound(self, which: str) -> Mono | None:
        v = self.lower if which == "lower" else self.upper
        if v is None:
            return None
        m = mono_of(as_expr(v))
        if m is None:
            raise UsageError(
                f"the {which} bound {sympy.sstr(v)} of {self.over} must be a monomial", rule="parameters"
            )
        return m


@dataclass(frozen=True)
class Option:
    """One way the minimum is reached: its cost, the value x takes (empty: per term, see each term's
    setting), and the conditions (pairs ``a <= b`` of monomials) under which it is valid."""

    cost: Cost
    setting: tuple[tuple[sympy.Symbol, Expr], ...] = ()
    valid: tuple[tuple[Mono, Mono], ...] = ()
    name: str = ""


@dataclass(frozen=True)
class Minimum:
    """``min over x`` of a cost: the options (one for a maximum of monomials), the stationary points
    (``optima``: which terms balance, and x there), the bracket factor (1: exact), the derivation."""

    x: sympy.Symbol
    kind: str
    options: tuple[Option, ...]
    optima: tuple[tuple[str, Expr], ...]
    bracket: int = 1
    derivation: Derivation = field(default_factory=lambda: Derivation("minimize"))
    lower: Expr | None = None
    upper: Expr | None = None

    @property
    def expr(self) -> Expr:
        """The minimum as one expression (a Max; for several options, their Min)."""
        return sympy.Min(*(to_expr(o.cost) for o in self.options))

    @property
    def optimum(self) -> Expr:
        """The one stationary point (X_opt); a UsageError when there is none or several."""
        if len(self.optima) != 1:
            raise UsageError(f"the cost has {len(self.optima)} stationary points in {self.x}, not one")
        return self.optima[0][1]

    def interior(self) -> tuple[sympy.Basic, ...]:
        """Where each stationary point lies inside the bounds: ``lo <= x*`` and ``x* <= hi``."""
        out = []
        for _, star in self.optima:
            if self.lower is not None:
                out.append(sympy.LessThan(self.lower, star, evaluate=False))
            if self.upper is not None:
                out.append(sympy.LessThan(star, self.upper, evaluate=False))
        return tuple(out)


def _setting(x: sympy.Symbol, m: Mono) -> tuple[tuple[sympy.Symbol, Expr], ...]:
    return ((x, m.expr()),)


def _at(t: Term, x: sympy.Symbol, m: Mono, where: str) -> Term:
    return Term(t.mono.subs({x: m}), f"{t.name} at {x} = {where}", t.setting + _setting(x, m))


def _cross(ti: Term, tj: Term, x: sympy.Symbol) -> tuple[Mono, Term]:
    """Where a rising term ti meets a falling term tj, and the value there."""
    a_i, a_j = ti.mono.degree(x), tj.mono.degree(x)
    star = (tj.mono / ti.mono).without(x) ** (1 / (a_i - a_j))
    return star, Term(ti.mono.subs({x: star}), f"{ti.name} = {tj.name}", ti.setting + _setting(x, star))


def _max_of_monomials(terms: Sequence[Term], m: Minimize, d: Derivation) -> tuple[Option, tuple]:
    x, lo, hi = m.over, m.bound("lower"), m.bound("upper")
    flat = [t for t in terms if t.mono.degree(x) == 0]
    rising = [t for t in terms if t.mono.degree(x) > 0]
    falling = [t for t in terms if t.mono.degree(x) < 0]
    d.add(
        f"exponent of {x} in each term",
        sympy.Tuple(*(sympy.Tuple(t.expr(), t.mono.degree(x)) for t in terms)),
    )
    out, optima = list(flat), []
    for ti in rising:
        for tj in falling:
            star, value = _cross(ti, tj, x)
            d.add(f"{ti.name} and {tj.name} cross", sympy.Eq(ti.expr(), tj.expr(), evaluate=False))
            d.add(f"{x} optimal", sympy.Eq(sympy.Symbol(f"{x.name}_opt", positive=True), star.expr()))
            optima.append((value.label, star.expr()))
            out.append(value)
    if lo is not None:
        out += [_at(t, x, lo, sympy.sstr(lo.expr())) for t in rising]
    if hi is not None:
        out += [_at(t, x, hi, sympy.sstr(hi.expr())) for t in falling]
    if not out:
        raise UsageError(f"the cost falls without bound as {x} grows: give an upper bound", rule="parameters")
    kept: list[Term] = []
    for t in out:
        if all(t.mono != k.mono for k in kept):
            kept.append(t)
    valid = ((lo, hi),) if lo is not None and hi is not None and (hi / lo).exps else ()
    return Option(tuple((t,) for t in kept), (), valid, ""), tuple(optima)


def _sum(piece: Sequence[Term], m: Minimize, d: Derivation) -> tuple[tuple[Option, ...], tuple]:
    x, lo, hi = m.over, m.bound("lower"), m.bound("upper")
    flat = tuple(t for t in piece if t.mono.degree(x) == 0)
    (u,), (v,) = [t for t in piece if t.mono.degree(x) > 0], [t for t in piece if t.mono.degree(x) < 0]
    p, q = u.mono.degree(x), -v.mono.degree(x)
    d.add("rising and falling terms", sympy.Tuple(u.expr(), v.expr()))
    d.add("stationary point", sympy.Eq(p * u.expr(), q * v.expr(), evaluate=False))
    star = ((v.mono / u.mono).without(x) * Mono(sympy.Rational(q) / p)) ** (1 / (p + q))
    d.add(f"{x} optimal", sympy.Eq(sympy.Symbol(f"{x.name}_opt", positive=True), star.expr()))
    value = Term(
        u.mono.subs({x: star}) * Mono(1 + sympy.Rational(p) / q),
        f"{u.name} + {v.name}",
        u.setting + _setting(x, star),
    )
    d.add(f"{u.name} + {v.name} at the optimum", value.expr())
    valid = tuple(pair for pair in ((lo, star), (star, hi)) if pair[0] is not None and pair[1] is not None)
    options = [Option((flat + (value,),), _setting(x, star), valid, f"{x} = {x}_opt")]
    # the sum is convex in log x: below lo the least is at lo, above hi at hi, so the options partition the
    # parameter space (each valid where it is the minimum) and never need comparing with each other
    for b, where, side in ((lo, "lower", (star, lo)), (hi, "upper", (hi, star))):
        if b is not None:
            at = tuple(Term(t.mono.subs({x: b}), t.label, t.setting) for t in piece)
            options.append(Option((at,), _setting(x, b), (side,), f"{x} = {sympy.sstr(b.expr())}"))
            d.add(f"at the {where} bound (where {x}_opt is beyond it)", sympy.Add(*(t.expr() for t in at)))
    return tuple(options), ((value.label, star.expr()),)


def _plus(a: Cost, b: Cost) -> Cost:
    """``a + b`` in normal form: each sum of ``a`` plus each of ``b``, like terms added (labels joined)."""
    out: list[tuple[Term, ...]] = []
    for pa in a:
        for pb in b:
            acc: dict = {}
            for t in (*pa, *pb):
                old = acc.get(t.mono.exps)
                if old is None:
                    acc[t.mono.exps] = t
                else:
                    label = old.label if old.label == t.label else f"{old.name} + {t.name}"
                    acc[t.mono.exps] = Term(
                        Mono(old.mono.coef + t.mono.coef, t.mono.exps), label, old.setting
                    )
            piece = tuple(acc.values())
            if piece not in out:
                out.append(piece)
    return tuple(out)


def minimize_phases(phases: Sequence[Cost], m: Minimize) -> Minimum | None:
    """The minimum over ``m.over`` of a sum of phases, each a maximum of monomials (a step under ``steady``:
    each phase's collectives overlap its own compute), when every phase that depends on x has one rising and
    one falling term that cross at the same x*: each phase is then least at x* clamped to the bounds (a
    maximum of a rising and a falling term is least where they cross, the flat terms do not move), so the sum
    is least there and its minimum is the sum of the phases' minima, exactly. None otherwise."""
    x = m.over
    if len(phases) < 2 or any(len(piece) != 1 for phase in phases for piece in phase):
        return None
    d = Derivation(f"minimize over {x}, phase by phase" + (f" in [{m.lower}, {m.upper}]" if m.upper else ""))
    stars: list[Mono] = []
    minima: list[Option] = []
    optima: tuple = ()
    for k, phase in enumerate(phases, 1):
        terms = [piece[0] for piece in phase]
        rising = [t for t in terms if t.mono.degree(x) > 0]
        falling = [t for t in terms if t.mono.degree(x) < 0]
        if not rising and not falling:
            minima.append(Option(phase))
            continue
        if len(rising) != 1 or len(falling) != 1:
            return None
        stars.append(_cross(rising[0], falling[0], x)[0])
        d.add(f"phase {k}", to_expr(phase))
        option, optima = _max_of_monomials(terms, m, d)
        minima.append(option)
    if not stars or any(s != stars[0] for s in stars[1:]):
        return None
    total = minima[0].cost
    for o in minima[1:]:
        total = _plus(total, o.cost)
    d.result = d.add("minimum: the sum of the phases' minima, all at the same x", to_expr(total))
    valid = next((o.valid for o in minima if o.valid), ())
    return Minimum(x, "phases", (Option(total, (), valid, ""),), optima, 1, d, m.lower, m.upper)


def minimize_cost(cost: Cost, m: Minimize) -> Minimum:
    """The minimum of a normal-form cost over ``m.over`` (see the module's docstring)."""
    x = m.over
    d = Derivation(f"minimize over {x}" + (f" in [{m.lower}, {m.upper}]" if m.upper is not None else ""))
    d.add("cost", to_expr(cost))
    if all(len(piece) == 1 for piece in cost):
        option, optima = _max_of_monomials([piece[0] for piece in cost], m, d)
        d.result = d.add("minimum", to_expr(option.cost))
        return Minimum(x, "max", (option,), optima, 1, d, m.lower, m.upper)
    if len(cost) == 1:
        rising = sum(1 for t in cost[0] if t.mono.degree(x) > 0)
        falling = sum(1 for t in cost[0] if t.mono.degree(x) < 0)
        if rising == 1 and falling == 1:
            options, optima = _sum(cost[0], m, d)
            d.result = d.add("minimum", sympy.Min(*(to_expr(o.cost) for o in options)))
            return Minimum(x, "sum", options, optima, 1, d, m.lower, m.upper)
        if rising == 0 or falling == 0:
            b = m.bound("lower") if falling == 0 else m.bound("upper")
            if b is None:
                raise UsageError(
                    f"the cost is monotone in {x} and unbounded on that side: give the bound",
                    rule="parameters",
                )
            at = tuple(Term(t.mono.subs({x: b}), t.label, t.setting) for t in cost[0])
            d.result = d.add(f"monotone in {x}: at {b.expr()}", sympy.Add(*(t.expr() for t in at)))
            only = Option((at,), _setting(x, b), (), f"{x} = {sympy.sstr(b.expr())}")
            return Minimum(x, "sum", (only,), (), 1, d, m.lower, m.upper)
    k = max(len(piece) for piece in cost)
    d.add(
        f"no closed form: each sum bracketed by its largest term (max <= sum <= {k} max)",
        to_expr(tuple((t,) for piece in cost for t in piece)),
    )
    option, optima = _max_of_monomials([t for piece in cost for t in piece], m, d)
    d.result = d.add(f"minimum, within a factor {k}", to_expr(option.cost))
    return Minimum(x, "bracket", (option,), optima, k, d, m.lower, m.upper)


def minimize(
    cost: Expr,
    over: sympy.Symbol,
    lower: Expr | None = ONE,
    upper: Expr | None = None,
    *,
    parts: Sequence[tuple[str, Expr]] | Mapping[str, Expr] = (),
    substitute: Mapping[sympy.Symbol, Expr] | None = None,
) -> Minimum:
    """``min over`` of ``cost`` for ``lower <= over <= upper``, in closed form (see the module docstring).
    ``parts`` name the terms (``{"compute": pc.compute}``); ``substitute`` (``{Y: N/X}``) is applied to the
    normal form, term by term (substituting into a sympy Max first would make sympy compare its arguments
    again, slowly, and not always rightly).

        >>> minimize(Max(F*X/N, B/X), X, 1, N).optimum      # doctest: +SKIP
        sqrt(B*N/F)
    """
    if not isinstance(over, sympy.Symbol):
        raise UsageError(f"minimize over a symbol, not {over!r}", rule="parameters")
    named = tuple(parts.items()) if isinstance(parts, Mapping) else tuple(parts)
    return minimize_cost(
        subs_nf(normal_form(cost, named), dict(substitute or {})), Minimize(over, lower, upper)
    )
