"""The atoms and numbers under :mod:`shardalg.costs.terms`: interned atoms, exact coefficients and roots.

An atom is a positive sympy Symbol, or a positive sympy expression kept whole (a line's ``X - 1``, a
recursive doubling's ``log2(n)``, an integer under a root: ``sqrt(2)`` is atom 2 to the 1/2). Atoms are
interned: a monomial's powers are (atom id, exponent) pairs sorted by id, so that building, comparing and
hashing monomials compares small integers, never sympy objects. A :class:`Point` holds values by atom id.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from fractions import Fraction
from math import isqrt

import sympy

from shardalg.cache import Kind, memo

__all__ = [
    "Number",
    "Atom",
    "Powers",
    "Unbound",
    "atom_id",
    "atom",
    "Point",
    "point",
    "cmul",
    "root",
    "product_of_powers",
    "atom_value",
    "sym_number",
    "akey",
    "INTEGERS",
    "num",
    "inverse_of_powers",
    "power_of_powers",
]

Number = int | Fraction | float
Atom = sympy.Expr
Powers = tuple[tuple[int, Number], ...]


class Unbound(Exception):
    """Raised inside an evaluation when an atom has no value (the public API returns None)."""


_ATOMS: list[Atom] = memo(f"{__name__}._ATOMS", Kind.TABLE, [])
_IDS: dict[Atom, int] = memo(f"{__name__}._IDS", Kind.TABLE, {})
_INTERNING = threading.Lock()  # one thread adds an atom at a time
# atom id -> value, for integer atoms (sqrt(2) is atom 2 to the 1/2)
INTEGERS: dict[int, int] = memo(f"{__name__}.INTEGERS", Kind.TABLE, {})


def atom_id(a: Atom) -> int:
    """The interned id of an atom."""
    got = _IDS.get(a)
    if got is None:
        with _INTERNING:  # two threads interning at once took the same id for two atoms
            got = _IDS.get(a)
            if got is None:
                _ATOMS.append(a)
                got = _IDS[a] = len(_ATOMS) - 1
                if isinstance(a, sympy.Integer):
                    INTEGERS[got] = int(a)
    return got


def atom(i: int) -> Atom:
    """The atom of an id."""
    return _ATOMS[i]


def akey(a: Atom) -> tuple:
    """A deterministic order of atoms: integers, then symbols by name, then other expressions by text."""
    if isinstance(a, sympy.Symbol):
        return (1, a.name, str(a.assumptions0))
    if isinstance(a, sympy.Integer):
        return (0, int(a), "")
    return (2, sympy.srepr(a), "")


class Point(dict):
    """Values keyed by atom id (see :func:`point`): what evaluation reads."""


def point(values: Mapping) -> Point:
    """``values`` (sympy symbol -> number or array) keyed by atom id, for repeated evaluation."""
    if isinstance(values, Point):
        return values
    return Point((atom_id(k), v) for k, v in values.items())


def num(c: Number) -> Number:
    """A Fraction with denominator 1 as an int."""
    if type(c) is Fraction and c.denominator == 1:
        return c.numerator
    return c


def root(c: Number, e: Fraction) -> tuple[Number, tuple[tuple[int, Fraction], ...]]:
    """``c ** e`` for a positive rational c: a rational and the integer atoms left under a root."""
    if isinstance(c, float):
        return c ** float(e), ()
    q = Fraction(c)
    top, bottom = q.numerator ** abs(e.numerator), q.denominator ** abs(e.numerator)
    if e.numerator < 0:
        top, bottom = bottom, top
    out: Number = 1
    rest: list[tuple[int, Fraction]] = []
    for n, sign in ((top, 1), (bottom, -1)):
        r = _iroot(n, e.denominator)
        if r is not None:
            out = num(Fraction(out) * (Fraction(r) if sign > 0 else Fraction(1, r)))
        else:
            rest.append((atom_id(sympy.Integer(n)), Fraction(sign, e.denominator)))
    return out, tuple(rest)


def _iroot(n: int, k: int) -> int | None:
    if k == 1:
        return n
    r = isqrt(n) if k == 2 else round(n ** (1 / k))
    for cand in (r - 1, r, r + 1):
        if cand >= 0 and cand**k == n:
            return cand
    return None


def cmul(x: Number, y: Number) -> Number:
    """The product of two coefficients, a Fraction only when it is not whole."""
    tx, ty = type(x), type(y)
    if tx is int and ty is int:
        return x * y
    if tx is float or ty is float:
        return float(x) * float(y)
    r = x * y if tx is Fraction else y * x  # a Fraction times an int or a Fraction
    return r.numerator if r.denominator == 1 else r


def product_of_powers(ca: Number, pa: Powers, cb: Number, pb: Powers) -> tuple[Number, Powers]:
    """The coefficient and powers of the product of two monomials (whole powers of an integer atom go
    into the coefficient: sqrt(2)*sqrt(2) is 2)."""
    if not pa or not pb:
        return cmul(ca, cb), pa or pb
    if not INTEGERS or not any(a in INTEGERS for a, _ in pa + pb):  # disjoint atoms: the powers interleave
        if pa[-1][0] < pb[0][0]:
            return cmul(ca, cb), pa + pb
        if pb[-1][0] < pa[0][0]:
            return cmul(ca, cb), pb + pa
    powers = dict(pa)
    for atom, k in pb:
        e = powers.get(atom, 0) + k
        if e == 0:
            del powers[atom]
        else:
            powers[atom] = num(e) if type(e) is Fraction else e
    coeff = cmul(ca, cb)
    if INTEGERS:
        ints = [(a, k) for a, k in powers.items() if a in INTEGERS and (k >= 1 or k <= -1)]
        for a, k in ints:  # sqrt(2)*sqrt(2): whole powers of an integer atom go into the coefficient
            whole = int(k) if k > 0 else -int(-k)
            coeff = cmul(coeff, Fraction(INTEGERS[a]) ** whole)
            rest = k - whole
            if rest == 0:
                del powers[a]
            else:
                powers[a] = rest
    return (num(coeff) if type(coeff) is Fraction else coeff), tuple(sorted(powers.items()))


def atom_value(a: Atom, values: Point) -> object:
    """The value of an atom that is not a symbol (an integer, or an expression kept whole)."""
    if isinstance(a, sympy.Integer):
        return float(a)
    free = sorted(a.free_symbols, key=akey)
    got = [values.get(_IDS.get(s, -1)) for s in free]
    if isinstance(a, sympy.Symbol) or any(v is None for v in got):
        raise Unbound(a)
    if any(hasattr(v, "shape") for v in got):
        return sympy.lambdify(free, a, "numpy")(*got)
    return float(a.xreplace(dict(zip(free, (sympy.Float(v) for v in got), strict=True))))


def sym_number(k: Number) -> sympy.Expr:
    if type(k) is Fraction:
        return sympy.Rational(k.numerator, k.denominator)
    return sympy.Float(k) if isinstance(k, float) else sympy.Integer(k)


def inverse_of_powers(c: Number, powers: Powers) -> tuple[Number, Powers]:
    """1 / (c * prod(atom ** k))."""
    if c == 0:
        raise ZeroDivisionError("division of a cost by zero")
    inv: Number = 1 if c == 1 else 1.0 / c if isinstance(c, float) else num(1 / Fraction(c))
    return inv, tuple((a, -k) for a, k in powers)


def power_of_powers(c: Number, powers: Powers, e: Number) -> tuple[Number, Powers]:
    """(c * prod(atom ** k)) ** e, exact for rational c and e (a root left over is an integer atom)."""
    if isinstance(e, float) or isinstance(c, float):
        return float(c) ** float(e), tuple((a, float(k) * e) for a, k in powers)
    if type(e) is Fraction:
        coeff, rest = root(c, e)
    else:
        coeff, rest = num(Fraction(c) ** e), ()
    raised = tuple((a, num(Fraction(k) * e)) for a, k in powers)
    return product_of_powers(coeff, (), 1, raised + rest)
