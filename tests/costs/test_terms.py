"""The light cost terms against sympy: random sums and maxima of monomials evaluate to what sympy evaluates,
convert to the same expression, read back from sympy unchanged, and sweep over arrays."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import sympy
from hypothesis import given
from hypothesis import strategies as st

from shardalg.algebra.symbols import axis_size, dim_size, quantity
from shardalg.costs.fromsympy import from_sympy
from shardalg.costs.sweep import lambdify, sweep
from shardalg.costs.terms import ONE, ZERO, Max, Mono, Sum, add, const, maximum, mono

SYMBOLS = (dim_size("B"), dim_size("D"), axis_size("X"), quantity("W_ici"), quantity("T_min"))


@st.composite
def monos(draw):
    coeff = draw(st.sampled_from([1, 2, 3, Fraction(1, 2), Fraction(3, 4), 1024]))
    out = const(coeff)
    for s in draw(st.lists(st.sampled_from(SYMBOLS), max_size=3)):
        out = out * mono(s, draw(st.sampled_from([1, -1, 2, Fraction(1, 2), Fraction(-1, 2)])))
    return out


def terms():
    return st.recursive(
        monos(),
        lambda inner: st.one_of(
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: add(*xs)),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: maximum(*xs)),
            st.tuples(inner, monos()).map(lambda ab: ab[0] * ab[1]),
        ),
        max_leaves=8,
    )


# sizes are positive integers (sympy uses it: Max(B, 1) is B), rates and times positive reals
values_st = st.tuples(
    *(st.integers(1, 100).map(float) if s.is_integer else st.floats(0.01, 100.0) for s in SYMBOLS)
).map(lambda vs: dict(zip(SYMBOLS, vs, strict=True)))


@given(terms(), values_st)
def test_evaluation_equals_sympys(t, at):
    expected = float(t.sympy().xreplace({k: sympy.Float(v) for k, v in at.items()}))
    assert t.evaluate(at) == pytest.approx(expected, rel=1e-9)


@given(terms(), values_st)
def test_unevaluated_sympy_is_the_same_function(t, at):
    lazy = t.sympy(evaluate=False)
    assert float(lazy.xreplace({k: sympy.Float(v) for k, v in at.items()}).doit()) == pytest.approx(
        t.evaluate(at)
    )


@given(terms(), values_st)
def test_read_back_from_sympy_evaluates_alike(t, at):
    assert from_sympy(t.sympy()).evaluate(at) == pytest.approx(t.evaluate(at), rel=1e-9)


@given(st.lists(terms(), min_size=1, max_size=4), values_st)
def test_maximum_drops_only_arguments_that_are_not_larger(ts, at):
    # pruning is structural (a <= a + b, 2x <= 3x): the maximum of what is kept is the maximum of all
    assert maximum(*ts).evaluate(at) == pytest.approx(max(t.evaluate(at) for t in ts), rel=1e-12)


@given(terms(), terms(), values_st)
def test_products_distribute(a, b, at):
    assert (a * b).evaluate(at) == pytest.approx(a.evaluate(at) * b.evaluate(at), rel=1e-9)
    assert (a + b).evaluate(at) == pytest.approx(a.evaluate(at) + b.evaluate(at), rel=1e-12)


def test_exact_roots_stay_exact():
    B, D = mono(dim_size("B")), mono(dim_size("D"))
    root = (2 * B / D) ** Fraction(1, 2)
    assert root.sympy() == sympy.sqrt(2) * sympy.sqrt(dim_size("B")) / sympy.sqrt(dim_size("D"))
    assert (root * root) == 2 * B / D  # sqrt(2)^2 folds back into the coefficient
    assert (const(Fraction(9, 4)) ** Fraction(1, 2)) == const(Fraction(3, 2))


def test_structure():
    B = mono(dim_size("B"))
    assert add(B, ZERO) is B and maximum(B) is B and add(B, B) == 2 * B
    assert isinstance(add(B, ONE), Sum) and isinstance(maximum(B, ONE), Max)
    assert maximum(B, B + ONE) == B + ONE and maximum(2 * B, 3 * B) == 3 * B
    assert isinstance(mono(dim_size("B") - 1), Mono)  # a difference is kept whole, as an atom
    assert mono(dim_size("B") - 1).evaluate({dim_size("B"): 3.0}) == 2.0
    assert B.evaluate({}) is None


def test_sweep_a_term_without_sympy():
    B, W = dim_size("B"), quantity("W_ici")
    t = maximum(2 * mono(B) / mono(W), const(3) * mono(quantity("T_min")))
    grid = np.array([1e3, 1e6, 1e9])
    got = sweep(t, {W: 1e11, quantity("T_min"): 1e-6}, B=grid)
    assert np.allclose(got, np.maximum(2 * grid / 1e11, 3e-6))
    assert lambdify(t, {W: 1e11, quantity("T_min"): 1e-6}).names == ("B",)
    assert np.allclose(lambdify(t.sympy(), {W: 1e11, quantity("T_min"): 1e-6})(B=grid), got)


def test_equal_trees_share_one_formula_but_float_coefficients_do_not():
    from shardalg.cache import clear_caches

    clear_caches()
    b, w = mono(dim_size("B")), mono(quantity("W_ici"))
    first = maximum(2 * b / w, 3 * mono(quantity("T_min")))
    again = maximum(2 * b / w, 3 * mono(quantity("T_min")))  # a new tree, equal to the first
    assert first is not again and first == again
    assert again.sympy() is first.sympy()  # made once
    exact, floaty = Fraction(5, 2) * b, 2.5 * b  # equal as light terms, not as formulas
    assert exact == floaty
    assert str(exact.sympy()) == "5*B/2" and str(floaty.sympy()) == "2.5*B"
    assert str((Fraction(5, 2) * b).sympy()) == "5*B/2"  # the float tree was not stored under the exact key


def test_formula_cache_is_bounded(monkeypatch):
    from shardalg import cache
    from shardalg.costs import sympymax as tm

    cache.clear_caches()
    monkeypatch.setattr(cache, "SIZE", 8)  # the one size setting bounds a memo kept in a dict too
    b = mono(dim_size("B"))
    for k in range(1, 30):
        (k * b).sympy()
        assert len(tm._FORMULAS) <= 8
