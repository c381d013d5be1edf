"""The minimum over a split in closed form equals the numeric minimum, on random costs: a maximum of monomials
(the LP-dual vertices: crossings and bounds), a sum with one rising and one falling term (the stationary
point and the bounds, each valid where it is least), and any other sum (bracketed within its term count)."""

from __future__ import annotations

import math

import pytest
import sympy
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from shardalg.algebra.symbols import axis_size, dim_size
from shardalg.errors import UsageError
from shardalg.search import minimize

P, Q, X = dim_size("P"), dim_size("Q"), axis_size("X")
HALF = sympy.Rational(1, 2)
SLOPES = st.sampled_from([-2, -1, -HALF, 0, HALF, 1, 2])


@st.composite
def monomials(draw, slope=SLOPES):
    """(the monomial as sympy, its exponents (c, a, b, e) for c·X^a·P^b·Q^e): the oracle evaluates the
    exponents directly, so it shares no code (and no sympy Max evaluation) with the engine."""
    c, a, b, e = draw(st.integers(1, 9)), draw(slope), draw(st.integers(-1, 1)), draw(st.integers(-1, 1))
    return c * X**a * P**b * Q**e, (c, float(a), b, e)


def numeric_min(terms, values: dict, hi: float, join=max) -> float:
    """min over log x in [0, log hi] of join(terms), by bounded Brent plus both ends (the cost is convex in
    log x, so that is its minimum)."""
    p, q = values[P], values[Q]

    def at(logx: float) -> float:
        x = math.exp(logx)
        return join(c * x**a * p**b * q**e for c, a, b, e in terms)

    found = minimize_scalar(at, bounds=(0.0, math.log(hi)), method="bounded", options={"xatol": 1e-12})
    return min(found.fun, at(0.0), at(math.log(hi)))


def value(cost, values: dict) -> float:
    """A normal-form cost at a point: max over its sums, each term evaluated on its own."""
    return max(sum(float(t.expr().subs(values)) for t in piece) for piece in cost)


VALUES = st.fixed_dictionaries({P: st.floats(0.05, 20), Q: st.floats(0.05, 20)})


@given(st.lists(monomials(), min_size=1, max_size=5), VALUES, st.floats(1.5, 1e4))
def test_min_of_a_max_is_the_max_of_the_dual_vertices(terms, values, hi):
    cost = sympy.Max(*(t for t, _ in terms), evaluate=False)
    m = minimize(cost, X, 1, hi)
    assert m.kind == "max" and len(m.options) == 1
    assert value(m.options[0].cost, values) == pytest.approx(
        numeric_min([e for _, e in terms], values, hi), rel=1e-7
    )


@given(
    monomials(st.sampled_from([HALF, 1, 2])),
    monomials(st.sampled_from([-2, -1, -HALF])),
    monomials(st.just(0)),
    VALUES,
    st.floats(1.5, 1e4),
)
def test_min_of_a_sum_is_the_valid_option(rising, falling, flat, values, hi):
    m = minimize(rising[0] + falling[0] + flat[0], X, 1, hi)
    assert m.kind == "sum" and len(m.options) == 3
    point = dict(values)
    valid = [
        o
        for o in m.options
        if all(float(a.expr().subs(point)) <= float(b.expr().subs(point)) * (1 + 1e-9) for a, b in o.valid)
    ]
    assert valid, "the options cover every point"
    closed = min(value(o.cost, point) for o in valid)
    assert closed == pytest.approx(numeric_min([rising[1], falling[1], flat[1]], values, hi, sum), rel=1e-7)


@given(
    st.lists(monomials(st.sampled_from([HALF, 1, 2])), min_size=2, max_size=3),
    monomials(st.sampled_from([-2, -1])),
    VALUES,
    st.floats(1.5, 1e4),
)
def test_any_other_sum_is_bracketed_and_says_so(rising, falling, values, hi):
    cost = sympy.Add(*(t for t, _ in rising), falling[0])
    m = minimize(cost, X, 1, hi)
    terms = len(sympy.Add.make_args(cost))
    if m.kind != "bracket":  # like rising terms merged into one: the exact case
        assert terms == 2
        return
    assert m.bracket == terms and "no closed form" in str(m.derivation)
    low = value(m.options[0].cost, values)
    true = numeric_min([e for _, e in rising] + [falling[1]], values, hi, sum)
    assert low * (1 - 1e-9) <= true <= terms * low * (1 + 1e-9)


def test_x_opt_of_the_textbook_shape():
    """min over X of max(F·X/N, B/X): where the rising and the falling term cross."""
    B, F, N = dim_size("B"), dim_size("F"), sympy.Symbol("N", positive=True)
    m = minimize(sympy.Max(F * X / N, B / X), X, 1, N)
    assert sympy.simplify(m.optimum - sympy.sqrt(B * N / F)) == 0
    assert len(m.interior()) == 2


@pytest.mark.parametrize(
    ("cost", "lower", "upper", "message"),
    [
        (P / X, 1, None, "falls without bound as X grows"),
        (P / X + Q / X**2, 1, None, "monotone in X and unbounded on that side"),
        (P * Q, 1, 4, None),
    ],
)
def test_refusals_say_why(cost, lower, upper, message):
    if message is None:
        from shardalg.search import Candidate, strategy_map

        with pytest.raises(UsageError, match="does not depend on X"):
            strategy_map([Candidate("a", cost, minimize=(X, lower, upper))], over=[P, Q])
        return
    with pytest.raises(UsageError, match=message):
        minimize(cost, X, lower, upper)
