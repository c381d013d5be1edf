"""Light cost terms: monomials of positive symbols, their sums and their maxima, evaluated without sympy.

Every cost of the models here is a product of powers of positive symbols with a rational coefficient (a
*monomial*: ``2*B*D/W_ici``, ``T_min*X/2``), combined by ``+`` and ``max``. This module keeps such trees
in a light form of its own, so that building a plan's cost and evaluating it at a point never touches sympy's
evaluation (sympy's ``Max`` compares its arguments each time one is built); a sympy expression is made on
demand, once per node, when a user asks for a formula or a derivation.

    >>> from shardalg.algebra.symbols import dim_size, quantity
    >>> B, W = mono(dim_size("B")), mono(quantity("W_ici"))
    >>> t = maximum(2 * B / W, 3 * mono(quantity("T_min")))
    >>> t.evaluate({dim_size("B"): 1e6, quantity("W_ici"): 1e11, quantity("T_min"): 1e-6})
    2e-05
    >>> t.sympy()
    Max(3*T_min, 2*B/W_ici)

The API: :class:`Mono` (``coeff``, ``powers``), :class:`Sum` and :class:`Max` (``args``); build them with
:func:`mono`, :func:`const`, :func:`add`, :func:`maximum`, ``*``, ``/``, ``**`` and ``+``; read them with
:meth:`Term.evaluate` (floats or numpy arrays; None while a symbol is unbound), :meth:`Term.sympy`,
:meth:`Term.monomials` (a posynomial's terms), :meth:`Term.symbols`, :meth:`Term.subs`. An atom
(:mod:`shardalg.costs.atoms`) is a positive symbol or a positive expression kept whole;
:func:`shardalg.costs.fromsympy.from_sympy` reads a sympy expression back.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from functools import reduce

import sympy

from shardalg.cache import Kind, memoized

from . import atoms as at
from .atoms import Atom, Number, Point, atom, atom_id, point
from .sympymax import formula, unevaluated_max

__all__ = [
    "Term",
    "Mono",
    "Sum",
    "Max",
    "mono",
    "const",
    "add",
    "maximum",
    "point",
    "Point",
    "atom_id",
    "atom",
    "ZERO",
    "ONE",
    "Number",
]


class Term:
    """A node of a cost tree. Immutable; equal trees are equal and hash alike."""

    __slots__ = ("_hash", "_sympy", "_floaty")

    def evaluate(self, values: Mapping[sympy.Symbol, object]) -> float | None:
        """The value at ``values`` (symbol -> float or numpy array, or a :func:`point`); None while a
        symbol is unbound."""
        try:
            return self._eval(point(values), {})
        except at.Unbound:
            return None

    def _eval(self, values: Mapping, memo: dict) -> object:
        raise NotImplementedError

    def sympy(self, evaluate: bool = True) -> sympy.Expr:
        """The sympy expression (a maximum evaluated, i.e. simplified, unless ``evaluate=False``)."""
        if not evaluate:
            return self._to_sympy(False)
        got = self._sympy
        if (
            got is None
        ):  # equal trees share one formula (sympymax.formula); 1.0 and 1 are equal coefficients here
            made = self._to_sympy
            got = self._sympy = made(True) if self._floaty else formula(self, made)
        return got

    def _to_sympy(self, evaluate: bool) -> sympy.Expr:
        raise NotImplementedError

    def symbols(self) -> frozenset[sympy.Symbol]:
        """The sympy symbols the term depends on."""
        raise NotImplementedError

    def monomials(self) -> tuple[Mono, ...] | None:
        """The monomials of a posynomial (a sum of monomials); None when the term has a maximum."""
        return None

    def subs(self, mapping: Mapping[sympy.Symbol, Term]) -> Term:
        """Each symbol of ``mapping`` replaced by its term (at once, not one after another)."""
        raise NotImplementedError

    @property
    def is_zero(self) -> bool:
        return False

    # arithmetic: + and * of positive terms; / and ** where the result stays a term
    def __add__(self, other: object) -> Term:
        return add(self, _coerce(other))

    __radd__ = __add__

    def __mul__(self, other: object) -> Term:
        return _mul(self, other if isinstance(other, Term) else _coerce(other))

    __rmul__ = __mul__

    def __truediv__(self, other: object) -> Term:
        return _mul(self, _inverse(_coerce(other)))

    def __rtruediv__(self, other: object) -> Term:
        return _mul(_coerce(other), _inverse(self))

    def __pow__(self, e: object) -> Term:
        return _power(self, e)

    def __str__(self) -> str:
        return str(self.sympy())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.sympy()})"

    def _sympy_(self) -> sympy.Expr:  # sympy's protocol: sympify(term) gives the expression
        return self.sympy()


class Mono(Term):
    """``coeff * prod(atom ** exponent)``; ``powers`` holds (atom id, exponent) pairs sorted by id, no zero
    exponent (:meth:`factors` gives the atoms themselves, in a deterministic order)."""

    __slots__ = ("coeff", "powers", "_fpowers")

    def __init__(self, coeff: Number, powers: tuple[tuple[Atom, Number], ...] = ()):
        self.coeff = coeff
        self.powers = powers
        self._hash = None
        self._sympy = None
        self._fpowers = None
        self._floaty = type(coeff) is float or any(type(k) is float for _, k in powers)

    def __eq__(self, other: object) -> bool:
        return self is other or (
            type(other) is Mono and self.coeff == other.coeff and self.powers == other.powers
        )

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash((Mono, self.coeff, self.powers))
        return h

    @property
    def is_zero(self) -> bool:
        return self.coeff == 0

    def _eval(self, values: Mapping, memo: dict) -> object:
        fp = self._fpowers
        if fp is None:  # the coefficient and exponents as the numbers evaluating multiplies by, made once
            c = self.coeff
            fp = self._fpowers = (
                c if type(c) is not Fraction else float(c),
                tuple((a, k if type(k) is int else float(k)) for a, k in self.powers),
            )
        v, powers = fp
        for a, k in powers:
            x = values.get(a)
            if x is None:
                x = at.atom_value(at._ATOMS[a], values)
            v = v * x**k if k > 0 else v / x**-k
        return v

    def _to_sympy(self, evaluate: bool) -> sympy.Expr:
        c = self.coeff
        head = (
            sympy.Float(c)
            if isinstance(c, float)
            else sympy.Rational(c.numerator, c.denominator)
            if type(c) is Fraction
            else sympy.Integer(c)
        )
        factors = [a if k == 1 else sympy.Pow(a, at.sym_number(k)) for a, k in self.factors()]
        return sympy.Mul(head, *factors)

    def factors(self) -> list[tuple[Atom, Number]]:
        """(atom, exponent) pairs, integers first, then symbols by name."""
        return sorted(((at._ATOMS[a], k) for a, k in self.powers), key=lambda p: at.akey(p[0]))

    def symbols(self) -> frozenset[sympy.Symbol]:
        out: set[sympy.Symbol] = set()
        for i, _ in self.powers:
            a = at._ATOMS[i]
            if isinstance(a, sympy.Symbol):
                out.add(a)
            else:
                out |= a.free_symbols
        return frozenset(out)

    def monomials(self) -> tuple[Mono, ...]:
        return () if self.coeff == 0 else (self,)

    def exponent(self, a: Atom) -> Number:
        """The exponent of atom ``a`` (0 when absent)."""
        i = at._IDS.get(a)
        for b, k in self.powers:
            if b == i:
                return k
        return 0

    def subs(self, mapping: Mapping[sympy.Symbol, Term]) -> Term:
        ids = {atom_id(k): _coerce(v) for k, v in mapping.items()}
        if not any(a in ids for a, _ in self.powers):
            return self
        out: Term = Mono(self.coeff, tuple((a, k) for a, k in self.powers if a not in ids))
        for a, k in self.powers:
            if a in ids:
                out = _mul(out, _power(ids[a], k))
        return out


class _Nary(Term):
    """A node with two or more arguments."""

    __slots__ = ("args",)

    def __init__(self, args: tuple[Term, ...]):
        self.args = args
        self._hash = None
        self._sympy = None
        self._floaty = True in [a._floaty for a in args]

    def __eq__(self, other: object) -> bool:
        return self is other or (type(other) is type(self) and self.args == other.args)  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash((type(self).__name__, self.args))
        return h

    def symbols(self) -> frozenset[sympy.Symbol]:
        return frozenset().union(*(a.symbols() for a in self.args))


class Sum(_Nary):
    """A sum of two or more terms (monomials with equal powers combined)."""

    __slots__ = ()

    def _eval(self, values: Mapping, memo: dict) -> object:
        got = memo.get(id(self))
        if got is None:
            got = memo[id(self)] = sum([a._eval(values, memo) for a in self.args])
        return got

    def _to_sympy(self, evaluate: bool) -> sympy.Expr:
        return sympy.Add(*(a.sympy() if evaluate else a.sympy(False) for a in self.args))

    def monomials(self) -> tuple[Mono, ...] | None:
        out: list[Mono] = []
        for a in self.args:
            m = a.monomials()
            if m is None:
                return None
            out.extend(m)
        return tuple(out)

    def subs(self, mapping: Mapping[sympy.Symbol, Term]) -> Term:
        return add(*(a.subs(mapping) for a in self.args))


class Max(_Nary):
    """The maximum of two or more terms (none structurally below another)."""

    __slots__ = ()

    def _eval(self, values: Mapping, memo: dict) -> object:
        got = memo.get(id(self))
        if got is None:
            vals = [a._eval(values, memo) for a in self.args]
            try:
                got = max(vals)
            except ValueError:  # numpy arrays: element-wise
                import numpy as np

                got = reduce(np.maximum, vals)
            memo[id(self)] = got
        return got

    def _to_sympy(self, evaluate: bool) -> sympy.Expr:
        if not evaluate:
            return sympy.Max(*(a.sympy(False) for a in self.args), evaluate=False)
        return unevaluated_max([a.sympy() for a in self.args])

    def subs(self, mapping: Mapping[sympy.Symbol, Term]) -> Term:
        return maximum(*(a.subs(mapping) for a in self.args))


ZERO = Mono(0)
ONE = Mono(1)


# ---- construction ------------------------------------------------------------------------------------
def const(c: Number) -> Mono:
    """A number as a term."""
    return ZERO if c == 0 else Mono(at.num(c) if type(c) is Fraction else c)


def mono(atom: Atom, exponent: Number = 1, coeff: Number = 1) -> Term:
    """``coeff * atom ** exponent``; an integer atom folds into the coefficient."""
    if isinstance(atom, sympy.Integer):
        return const(coeff) * _power(const(int(atom)), exponent)
    if isinstance(atom, sympy.Rational):
        return const(coeff) * _power(const(Fraction(atom.p, atom.q)), exponent)
    if isinstance(atom, sympy.Float):
        return const(coeff) * _power(const(float(atom)), exponent)
    return Mono(coeff, ((atom_id(atom), exponent),)) if exponent != 0 else const(coeff)


@memoized(Kind.TABLE)
def _sympy_atom(x: sympy.Expr) -> Term:  # numbers and symbols as terms
    return mono(x)


def _coerce(x: object) -> Term:
    if isinstance(x, Term):
        return x
    if isinstance(x, int | Fraction | float) and not isinstance(x, bool):
        return const(x)
    if isinstance(x, sympy.Basic):
        if x.is_Number or x.is_Symbol:
            return _sympy_atom(x)
        return Mono(1, ((atom_id(x), 1),))
    raise TypeError(f"not a cost term: {x!r}")


def add(*terms: Term) -> Term:
    """The sum: nested sums flattened, monomials with equal powers combined, zeros dropped."""
    if len(terms) == 2:  # the common case: skip the general loop when one side is zero
        a, b = terms
        if a.is_zero:
            return b
        if b.is_zero:
            return a
        if type(a) is Mono and type(b) is Mono and a.powers != b.powers:
            return Sum((a, b))
    elif len(terms) == 1:
        return terms[0]
    monos: dict[tuple, list[Mono]] = {}  # by powers, in order of first appearance
    others: list[Term] = []
    for t in terms:
        for u in t.args if type(t) is Sum else (t,):
            if type(u) is not Mono:
                others.append(u)
            elif u.coeff != 0:
                monos.setdefault(u.powers, []).append(u)
    args: list[Term] = []
    for p, same in monos.items():
        if len(same) == 1 and at.num(same[0].coeff) is same[0].coeff:
            args.append(same[0])  # alone with its powers: the term itself
        elif (c := sum([u.coeff for u in same])) != 0:
            args.append(Mono(at.num(c), p))
    args.extend(others)
    if not args:
        return ZERO
    return args[0] if len(args) == 1 else Sum(tuple(args))


def maximum(*terms: Term) -> Term:
    """The maximum: nested maxima flattened, zeros dropped (every term is >= 0), duplicates and arguments
    structurally below another (``a <= a + b``, ``2*x <= 3*x``) removed."""
    if len(terms) == 1 and type(terms[0]) is not Max:
        return terms[0]
    if len(terms) == 2 and type(terms[0]) is Mono and type(terms[1]) is Mono:
        a, b = terms
        if a.is_zero or b.is_zero:
            return b if a.is_zero else a
        if a.powers == b.powers:
            return a if a.coeff >= b.coeff else b
        return Max((a, b))
    flat: list[Term] = []
    for t in terms:
        for u in t.args if type(t) is Max else (t,):
            if u.is_zero:
                continue
            for v in flat:
                if u == v:
                    break
            else:
                flat.append(u)
    n = len(flat)
    if n == 1:
        return flat[0]
    if n == 0:
        return ZERO
    keep: list[Term] = []
    for i, a in enumerate(flat):
        for j, b in enumerate(flat):
            if j != i and _leq(a, b) and (j < i or not _leq(b, a)):
                break
        else:
            keep.append(a)
    return keep[0] if len(keep) == 1 else Max(tuple(keep))


def _leq(a: Term, b: Term) -> bool:
    """A sufficient structural test of ``a <= b`` for terms of positive symbols."""
    ta, tb = type(a), type(b)
    if ta is Mono and tb is Mono:
        return a.powers == b.powers and a.coeff <= b.coeff
    if a == b:
        return True
    if tb is Max:
        return any(_leq(a, c) for c in b.args)
    if ta is Max:
        return all(_leq(c, b) for c in a.args)
    if ta is Mono:
        return any(_leq(a, c) for c in b.args)  # b is a Sum of positive terms
    if tb is not Sum:  # a is a Sum, b a monomial
        return False
    rest = list(b.args)
    for c in a.args:
        hit = next((i for i, d in enumerate(rest) if _leq(c, d)), None)
        if hit is None:
            return False
        rest.pop(hit)
    return True


def _mul(a: Term, b: Term) -> Term:
    if type(a) is Mono and type(b) is Mono:
        if a.coeff == 0 or b.coeff == 0:
            return ZERO
        if not b.powers:
            return a if b.coeff == 1 else Mono(at.cmul(a.coeff, b.coeff), a.powers)
        if not a.powers:
            return b if a.coeff == 1 else Mono(at.cmul(a.coeff, b.coeff), b.powers)
        return Mono(*at.product_of_powers(a.coeff, a.powers, b.coeff, b.powers))
    if a.is_zero or b.is_zero:
        return ZERO
    if type(a) is not Mono:
        a, b = b, a
    # a: any term, b: a Sum or a Max; a product of positive terms distributes over both
    if type(b) is Sum:
        return add(*(_mul(a, c) for c in b.args))
    return maximum(*(_mul(a, c) for c in b.args))


def _inverse(t: Term) -> Term:
    if type(t) is Mono:
        return Mono(*at.inverse_of_powers(t.coeff, t.powers))
    return Mono(1, ((atom_id(t.sympy()), -1),))  # 1/(a + b): kept whole as an atom


def _power(t: Term, e: object) -> Term:
    if isinstance(e, sympy.Rational):
        e = Fraction(e.p, e.q)
    if isinstance(e, bool) or not isinstance(e, int | Fraction | float):
        raise TypeError(f"a cost term's exponent is a number, not {e!r}")
    e = at.num(e) if type(e) is Fraction else e
    if e == 1:
        return t
    if e == 0:
        return ONE
    if type(t) is Mono:
        return Mono(*at.power_of_powers(t.coeff, t.powers, e))
    if type(e) is int and e > 0:
        return reduce(_mul, [t] * e)
    if type(t) is Max and not isinstance(e, float) and e > 0:
        return maximum(*(_power(a, e) for a in t.args))  # x -> x^e is increasing for e > 0
    return Mono(1, ((atom_id(t.sympy()), e),))
