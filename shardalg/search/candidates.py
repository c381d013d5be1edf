"""Candidates for the strategy map: a named cost (a sympy expression), and what turns it into normal form.

A :class:`Candidate` is what a caller hands over: the cost under whichever overlap policy it chose (the
engine takes the expression it is given), optional labelled parts (``compute``, ``comms X``) that name the
terms, constraints such as ``memory <= cap``, substitutions that tie or fix variables (``X -> N`` for DP on
every device, ``Y -> N/X``), and a variable to minimize over (the FSDP+TP split). :func:`price` turns it into
:class:`Priced` entries, each a normal-form cost with its constraints; a minimization of a sum gives one
entry per way its minimum is reached (x at its stationary point, at each bound).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import sympy
from sympy import Expr

from shardalg.algebra.symbols import as_expr
from shardalg.errors import UsageError

from .logspace import Cost, Mono, Term, mono_of, normal_form, substitute, symbols_of, to_expr
from .minimize import Minimize, Minimum, minimize_cost, minimize_phases

__all__ = ["Candidate", "Priced", "Constraint", "price", "eliminate"]


def _pairs(x: Mapping | Sequence | None) -> tuple:
    if x is None:
        return ()
    items = x.items() if isinstance(x, Mapping) else x
    return tuple((k, as_expr(v)) for k, v in items)


@dataclass(frozen=True, init=False)
class Candidate:
    """A strategy to place on the map.

    ``cost``: a sympy expression of positive symbols built by products of powers, ``+`` and ``Max``;
    ``parts``: ``{"compute": pc.compute, "comms": pc.comms}`` names the terms in the output;
    ``constraints``: relations ``lhs <= rhs`` (or ``<``, ``>=``, ``>``) such as memory per device <= cap;
    ``substitute``: ``{X: N}`` applied to cost and constraints; ``minimize``: ``Minimize(X, 1, N)`` or a tuple
    ``(X, 1, N)``, the cost taken at its minimum over X (constraints must not depend on X).
    """

    name: str
    cost: Expr
    parts: tuple[tuple[str, Expr], ...]
    constraints: tuple[sympy.Basic, ...]
    substitute: tuple[tuple[sympy.Symbol, Expr], ...]
    minimize: Minimize | None

    def __init__(
        self,
        name: str,
        cost: Expr,
        *,
        parts: Mapping[str, Expr] | Sequence | None = None,
        constraints: Sequence[sympy.Basic] = (),
        substitute: Mapping | None = None,
        minimize: Minimize | tuple | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise UsageError(f"a candidate needs a name, not {name!r}")
        if isinstance(minimize, tuple):
            minimize = Minimize(*minimize)
        if minimize is not None and not isinstance(minimize, Minimize):
            raise UsageError(f"minimize is a Minimize(x, lower, upper) or a tuple, not {minimize!r}")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "cost", as_expr(cost))
        object.__setattr__(self, "parts", _pairs(parts))
        object.__setattr__(self, "constraints", tuple(constraints))
        object.__setattr__(self, "substitute", _pairs(substitute))
        object.__setattr__(self, "minimize", minimize)


@dataclass(frozen=True)
class Constraint:
    """``lhs <= rhs`` (``strict``: ``<``) in normal form, and how it was written."""

    lhs: Cost
    rhs: Cost
    text: str
    strict: bool = False


@dataclass(frozen=True)
class Priced:
    """One entry of the map: a candidate (or one way its minimum is reached) as a normal-form cost."""

    name: str
    parent: str
    cost: Cost
    constraints: tuple[Constraint, ...] = ()
    setting: tuple[tuple[sympy.Symbol, Expr], ...] = ()
    minimum: Minimum | None = field(default=None, compare=False)

    @property
    def expr(self) -> Expr:
        return to_expr(self.cost)

    @property
    def bracket(self) -> int:
        """The largest number of terms in one sum of the cost (1: a maximum of monomials, exact cells)."""
        return max(len(piece) for piece in self.cost)

    def terms(self) -> tuple[Term, ...]:
        """The distinct monomials of the cost, in order (a term in two sums is listed once)."""
        out: list[Term] = []
        for piece in self.cost:
            out += [t for t in piece if all(t.mono != o.mono for o in out)]
        return tuple(out)


def eliminate(tie: sympy.Eq, symbol: sympy.Symbol) -> dict[sympy.Symbol, Expr]:
    """A tie between monomials (``Eq(X*Y, N)``) solved for ``symbol``: ``{Y: N/X}``."""
    if not isinstance(tie, sympy.Eq):
        raise UsageError(f"a tie is an equation like Eq(X*Y, N), not {tie!r}")
    ratio = mono_of(tie.lhs / tie.rhs)
    if ratio is None or ratio.degree(symbol) == 0:
        raise UsageError(
            f"cannot solve {tie} for {symbol}: both sides must be monomials and involve {symbol}"
        )
    k = ratio.degree(symbol)
    return {symbol: (ratio.without(symbol) ** (-1 / k)).expr()}


def _relation(r: sympy.Basic, subs: Mapping) -> Constraint:
    if r is sympy.true or r is sympy.false:
        raise UsageError(
            f"a constraint evaluated to {r} before it reached the map",
            rule="parameters",
            fix="write it unevaluated: sympy.Le(memory, cap, evaluate=False)",
        )
    if isinstance(r, sympy.LessThan | sympy.StrictLessThan):
        lhs, rhs = r.lhs, r.rhs
    elif isinstance(r, sympy.GreaterThan | sympy.StrictGreaterThan):
        lhs, rhs = r.rhs, r.lhs
    else:
        raise UsageError(f"a constraint is an inequality such as memory <= cap, not {r!r}", rule="parameters")
    strict = isinstance(r, sympy.StrictLessThan | sympy.StrictGreaterThan)
    left, right = substitute(normal_form(lhs), subs), substitute(normal_form(rhs), subs)
    text = f"{sympy.sstr(to_expr(left))} {'<' if strict else '<='} {sympy.sstr(to_expr(right))}"
    return Constraint(left, right, text, strict)


def _by_phase(c: Candidate, subs: Mapping[sympy.Symbol, Expr]) -> Minimum | None:
    """The minimum of a cost written as a sum of phases (``Max(...) + Max(...)``), phase by phase, when that is
    exact (:func:`.minimize.minimize_phases`)."""
    if c.minimize is None or not isinstance(c.cost, sympy.Add):
        return None
    try:
        phases = [substitute(normal_form(a, c.parts), subs) for a in c.cost.args]
    except UsageError:
        return None
    return minimize_phases(phases, c.minimize)


def price(
    c: Candidate, common: Mapping[sympy.Symbol, Expr] | None = None
) -> tuple[tuple[Priced, ...], list[str]]:
    """The entries for one candidate, and notes on what was done to its cost (substitutions, brackets)."""
    subs = dict(common or {})
    subs.update(dict(c.substitute))
    notes: list[str] = []
    cost = substitute(normal_form(c.cost, c.parts), subs)
    constraints = tuple(_relation(r, subs) for r in c.constraints)
    if c.minimize is None:
        return (Priced(c.name, c.name, cost, constraints),), notes
    x = c.minimize.over
    if x not in symbols_of(cost):
        raise UsageError(
            f"{c.name}: the cost does not depend on {x}, so there is nothing to minimize", rule="parameters"
        )
    for k in constraints:
        if x in symbols_of(k.lhs) | symbols_of(k.rhs):
            raise UsageError(
                f"{c.name}: the constraint {k.text} depends on {x}, which is minimized over; "
                "a constrained optimum over a split is the numeric search's job",
                rule="parameters",
            )
    m = _by_phase(c, subs) or minimize_cost(cost, c.minimize)
    if m.bracket > 1:
        notes.append(
            f"{c.name}: the minimum over {x} of a sum has no closed form; each sum is bracketed by "
            f"its largest term, so costs are within a factor {m.bracket}"
        )
    out = []
    for o in m.options:
        valid = tuple(
            Constraint(((Term(a),),), ((Term(b),),), f"{a} <= {b}") for a, b in o.valid if isinstance(a, Mono)
        )
        name = f"{c.name} ({o.name})" if len(m.options) > 1 else c.name
        out.append(Priced(name, c.name, o.cost, constraints + valid, o.setting, m))
    if len(out) > 1:
        notes.append(
            f"{c.name}: minimized over {x}, its cost is the least of {len(out)} options "
            f"({', '.join(o.name for o in m.options)}); each is placed on the map"
        )
    return tuple(out), notes
