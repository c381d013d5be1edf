"""Costs in log space: monomials, and every cost as a maximum of sums of monomials.

Every cost this engine writes is built from positive symbols by products of powers, ``+`` and ``Max``
(``Max(2*B*D*F/(C*X*Y), 4*D*F/(W_ici*M_X*Y))``). A monomial ``c·x^a·y^b`` is a linear function in log space
(``log c + a·log x + b·log y``), so comparing two monomials is a half-space there. ``+`` distributes over
``Max`` (``max(a, b) + c = max(a + c, b + c)``) and so does a product with a positive factor, so any such cost
has a normal form ``Max(P_1, ..., P_m)`` with each ``P`` a sum of monomials (a posynomial): that is what the
region engine works on. Shapes with no such form (``Min``, ``1/(a + b)``, ``sqrt(a + b)``, a symbol not
declared positive) are refused with the reason, never approximated silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import sympy
from sympy import Expr, Max, Rational

from shardalg.algebra.symbols import as_expr
from shardalg.cache import Kind, memoized
from shardalg.errors import UsageError

__all__ = [
    "Mono",
    "Term",
    "Cost",
    "normal_form",
    "label_terms",
    "substitute",
    "to_expr",
    "mono_of",
    "MAX_PIECES",
]

MAX_PIECES = 4096  # a normal form with more maxima than this is refused (bounded work)

Exps = tuple[tuple[sympy.Symbol, Rational], ...]


@memoized(Kind.PIECE)
def _key(s: sympy.Symbol) -> tuple[str, str]:
    """A total order on symbols that does not depend on hashing: name, then assumptions."""
    return (s.name, str(sorted(s.assumptions0.items())))


def _positive_number(e: Expr) -> bool:
    if e.is_positive is True:
        return True
    if e.is_positive is False:
        return False
    return bool(sympy.N(e, 30) > 0)


def _at_least(a: Expr, b: Expr) -> bool:
    d = a - b
    return d == 0 or _positive_number(d)


@dataclass(frozen=True)
class Mono:
    """``coef · Π s^e``: a positive number times powers of positive symbols (exponents rational)."""

    coef: Expr
    exps: Exps = ()

    @staticmethod
    def make(coef: Expr, exps: Mapping[sympy.Symbol, Rational]) -> Mono:
        kept = sorted(((s, Rational(e)) for s, e in exps.items() if e != 0), key=lambda p: _key(p[0]))
        return Mono(coef, tuple(kept))

    @property
    def powers(self) -> dict[sympy.Symbol, Rational]:
        return dict(self.exps)

    def expr(self) -> Expr:
        return self.coef * sympy.Mul(*(s**e for s, e in self.exps))

    def __mul__(self, other: Mono) -> Mono:
        p = self.powers
        for s, e in other.exps:
            p[s] = p.get(s, 0) + e
        return Mono.make(self.coef * other.coef, p)

    def __truediv__(self, other: Mono) -> Mono:
        return self * other**-1

    def __pow__(self, k: Rational | int) -> Mono:
        k = Rational(k)
        coef = sympy.powsimp(sympy.Pow(self.coef, k), force=True)
        return Mono.make(coef, {s: e * k for s, e in self.exps})

    def degree(self, x: sympy.Symbol) -> Rational:
        return self.powers.get(x, Rational(0))

    def without(self, x: sympy.Symbol) -> Mono:
        return Mono.make(self.coef, {s: e for s, e in self.exps if s != x})

    def subs(self, mapping: Mapping[sympy.Symbol, Mono]) -> Mono:
        out = Mono(self.coef)
        for s, e in self.exps:
            out = out * (mapping[s] ** e if s in mapping else Mono.make(1, {s: e}))
        return out

    def __str__(self) -> str:
        return sympy.sstr(self.expr())


@dataclass(frozen=True)
class Term:
    """One monomial of a cost, with what it is (``label``: ``compute``, ``comms X``) and the choices made to
    reach it (``setting``: ``((X, sqrt(B*N/F)),)`` after a minimization over X)."""

    mono: Mono
    label: str = ""
    setting: tuple[tuple[sympy.Symbol, Expr], ...] = field(default=())

    @property
    def name(self) -> str:
        return self.label or str(self.mono)

    def expr(self) -> Expr:
        return self.mono.expr()


# A cost in normal form: a maximum (outer tuple) of sums (inner tuples) of terms.
Cost = tuple[tuple[Term, ...], ...]


# ---- sympy -> normal form -------------------------------------------------------------------------------
def _refuse(what: str, expr: Expr, why: str) -> UsageError:
    return UsageError(
        f"{what} {sympy.sstr(expr)} has no monomial form: {why}",
        rule="no-monomial-form",
        fix="write the cost with positive symbols, products of powers, + and Max",
    )


def _merge(terms: Iterable[Mono]) -> tuple[Mono, ...]:
    """A sum with like monomials added (deterministic order: first appearance)."""
    acc: dict[Exps, Expr] = {}
    for m in terms:
        acc[m.exps] = acc.get(m.exps, sympy.Integer(0)) + m.coef
    return tuple(Mono(c, e) for e, c in acc.items())


def _product(a: tuple[Mono, ...], b: tuple[Mono, ...]) -> tuple[Mono, ...]:
    return _merge(x * y for x in a for y in b)


def _prune(pieces: list[tuple[Mono, ...]]) -> list[tuple[Mono, ...]]:
    """Drop a sum that another sum bounds term by term (0, duplicates, the smaller of ``2a`` and ``3a``)."""

    def below(p: tuple[Mono, ...], q: tuple[Mono, ...]) -> bool:
        qd = {m.exps: m.coef for m in q}
        return all(m.exps in qd and _at_least(qd[m.exps], m.coef) for m in p)

    kept: list[tuple[Mono, ...]] = []
    for i, p in enumerate(pieces):
        dominated = any(below(p, q) and (not below(q, p) or j < i) for j, q in enumerate(pieces) if j != i)
        if not dominated:
            kept.append(p)
    return kept


def _nf(e: Expr) -> list[tuple[Mono, ...]]:
    if e.is_number:
        if e == 0:
            return [()]
        if not _positive_number(e):
            raise _refuse("the number", e, "log space needs positive coefficients")
        return [(Mono(e),)]
    if isinstance(e, sympy.Symbol):
        if e.is_positive is not True:
            raise _refuse(
                "the symbol", e, f"{e} is not declared positive (make it in shardalg.algebra.symbols)"
            )
        return [(Mono.make(1, {e: 1}),)]
    if isinstance(e, sympy.Mul):
        out: list[tuple[Mono, ...]] = [(Mono(sympy.Integer(1)),)]
        for a in e.args:
            out = _bounded([_product(p, q) for p in out for q in _nf(a)], e)
        return _prune(out)
    if isinstance(e, sympy.Add):
        out = [()]
        for a in e.args:
            out = _bounded([_merge(p + q) for p in out for q in _nf(a)], e)
        return _prune(out)
    if isinstance(e, Max):
        return _prune(_bounded([p for a in e.args for p in _nf(a)], e))
    if isinstance(e, sympy.Pow):
        return _pow(e)
    if isinstance(e, sympy.Min):
        raise _refuse(
            "the minimum", e, "a Min is a union of regions, not a maximum; split it into candidates"
        )
    raise _refuse("the expression", e, f"{type(e).__name__} is not a product, a power, a sum or a Max")


def _pow(e: sympy.Pow) -> list[tuple[Mono, ...]]:
    base, k = e.args
    if not k.is_Rational:
        raise _refuse("the power", e, "the exponent must be a rational number")
    pieces = _nf(base)
    if all(len(p) == 1 for p in pieces) and (len(pieces) == 1 or k > 0):
        return _prune([(p[0] ** k,) for p in pieces])  # max(a, b)^k = max(a^k, b^k) for k > 0
    if k.is_Integer and k > 0:
        out = [(Mono(sympy.Integer(1)),)]
        for _ in range(int(k)):
            out = _bounded([_product(p, q) for p in out for q in pieces], e)
        return _prune(out)
    why = "a negative power of a sum or a maximum is a minimum" if k < 0 else "a fractional power of a sum"
    raise _refuse("the power", e, why)


def _bounded(pieces: list[tuple[Mono, ...]], e: Expr) -> list[tuple[Mono, ...]]:
    if len(pieces) > MAX_PIECES:
        raise UsageError(
            f"the normal form of {sympy.sstr(e)} has more than {MAX_PIECES} maxima",
            rule="search-limit",
            fix="simplify the cost or split it into candidates",
        )
    return pieces


def mono_of(e: Expr) -> Mono | None:
    """``e`` as one monomial, or None when it is not one."""
    try:
        pieces = _nf(as_expr(e))
    except UsageError:
        return None
    if len(pieces) == 1 and len(pieces[0]) == 1:
        return pieces[0][0]
    return None


def normal_form(expr: Expr, parts: Sequence[tuple[str, Expr]] = ()) -> Cost:
    """``expr`` as a maximum of sums of labelled monomials. ``parts`` name sub-expressions (``("compute",
    pc.compute)``): a monomial is labelled by the first part that has a monomial with the same powers."""
    if not isinstance(expr, sympy.Basic):
        raise UsageError(f"a cost is a sympy expression, not {type(expr).__name__}")
    try:
        pieces = [p for p in _nf(expr) if p] or None
    except UsageError as e:
        whole = sympy.sstr(expr)
        if f" {whole} has" in e.message:
            raise
        raise UsageError(f"{e.message} (in {whole})", rule=e.rule, fix=e.fix) from None
    if pieces is None:
        raise UsageError(f"the cost {sympy.sstr(expr)} is zero: nothing to compare", rule="no-monomial-form")
    return label_terms(tuple(tuple(Term(m) for m in p) for p in pieces), parts)


def label_terms(cost: Cost, parts: Sequence[tuple[str, Expr]]) -> Cost:
    """Each unlabelled term labelled by the first of ``parts`` that contains its powers."""
    if not parts:
        return cost
    powers = [(name, {m.exps for p in _nf(e) for m in p}) for name, e in parts]

    def label(t: Term) -> Term:
        if t.label:
            return t
        for name, exps in powers:
            if t.mono.exps in exps:
                return Term(t.mono, name, t.setting)
        return t

    return tuple(tuple(label(t) for t in piece) for piece in cost)


# ---- operations on normal forms ------------------------------------------------------------------------
def substitute(cost: Cost, mapping: Mapping[sympy.Symbol, Expr]) -> Cost:
    """Each monomial with ``mapping`` applied; every value must be a monomial (``Y -> N/X``, ``X -> N``).
    Like terms of a sum are added afterwards (labels joined), duplicate maxima dropped."""
    if not mapping:
        return cost
    monos: dict[sympy.Symbol, Mono] = {}
    for s, v in mapping.items():
        m = mono_of(v)
        if m is None:
            raise UsageError(
                f"substitute {s} -> {sympy.sstr(v)}: the value must be a monomial of positive symbols",
                rule="no-monomial-form",
                fix="tie variables by products, e.g. Y -> N/X",
            )
        monos[s] = m
    out: list[tuple[Term, ...]] = []
    for piece in cost:
        acc: dict[Exps, Term] = {}
        for t in piece:
            m = t.mono.subs(monos)
            if m.exps in acc:
                old = acc[m.exps]
                label = (
                    old.label if old.label == t.label else " + ".join(x for x in (old.label, t.label) if x)
                )
                acc[m.exps] = Term(Mono(old.mono.coef + m.coef, m.exps), label, old.setting)
            else:
                acc[m.exps] = Term(m, t.label, t.setting)
        piece2 = tuple(acc.values())
        if piece2 not in out:
            out.append(piece2)
    return _prune_terms(out)


def _prune_terms(pieces: list[tuple[Term, ...]]) -> Cost:
    monos = [tuple(t.mono for t in p) for p in pieces]
    kept = _prune(list(monos))
    return tuple(pieces[monos.index(k)] for k in kept)


def to_expr(cost: Cost) -> Expr:
    """The normal form back as a sympy expression (``Max`` of sums). Not evaluated: sympy's Max would compare
    every pair of arguments again (most of the time of a map), and the normal form has no redundant ones."""
    args = [sympy.Add(*(t.expr() for t in piece)) for piece in cost]
    return args[0] if len(args) == 1 else Max(*args, evaluate=False)


def symbols_of(cost: Cost) -> set[sympy.Symbol]:
    return {s for piece in cost for t in piece for s, _ in t.mono.exps}
