"""What the engine accepts and how it says no: costs in normal form (a table of shapes), conditions in the
map's coordinates, and every refusal as a UsageError with its reason (texts pinned)."""

from __future__ import annotations

import pytest
import sympy

from shardalg.algebra.symbols import axis_size, dim_size, quantity
from shardalg.errors import ShardalgError, UsageError
from shardalg.search import Candidate, eliminate, strategy_map
from shardalg.search.conditions import All, AnyOf, Atom, Coordinates, brackets, less, negate
from shardalg.search.logspace import Mono, Term, normal_form, substitute, to_expr

A, B, K = dim_size("A"), dim_size("B"), dim_size("K")
X, Y, N = axis_size("X"), axis_size("Y"), quantity("N")
LOOSE = sympy.Symbol("t")  # no assumptions: not known positive


def shape(expr) -> list[list[str]]:
    return [[sympy.sstr(t.expr()) for t in piece] for piece in normal_form(expr)]


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (A, [["A"]]),
        (2 * A / B, [["2*A/B"]]),
        (sympy.sqrt(A * B), [["sqrt(A)*sqrt(B)"]]),
        (A + B, [["A", "B"]]),
        (sympy.Max(A, B), [["A"], ["B"]]),
        (sympy.Max(A, B) + K, [["K", "A"], ["K", "B"]]),  # + distributes over Max (sympy orders the args)
        (K * sympy.Max(A, B), [["A*K"], ["B*K"]]),  # so does a positive factor
        (sympy.Max(A, B) ** 2, [["A**2"], ["B**2"]]),  # max(a, b)^k = max(a^k, b^k), k > 0
        ((A + B) ** 2, [["A**2", "2*A*B", "B**2"]]),
        (sympy.Max(A, 2 * A, evaluate=False), [["2*A"]]),  # the smaller of like maxima goes
        (sympy.Max(A, A + B, evaluate=False), [["A", "B"]]),  # a sum that bounds another term by term
        (sympy.Max(A, sympy.Integer(0), evaluate=False), [["A"]]),
    ],
)
def test_normal_form(expr, expected):
    assert shape(expr) == expected


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        (
            sympy.Min(A, B),
            "UsageError [no-monomial-form]: the minimum Min(A, B) has no monomial form: a Min is a union "
            "of regions, not a maximum; split it into candidates",
        ),
        (
            1 / (A + B),
            "UsageError [no-monomial-form]: the power 1/(A + B) has no monomial form: a negative power of a "
            "sum or a maximum is a minimum",
        ),
        (
            sympy.sqrt(A + B),
            "UsageError [no-monomial-form]: the power sqrt(A + B) has no monomial form: a fractional "
            "power of a sum",
        ),
        (
            A - B,
            "UsageError [no-monomial-form]: the number -1 has no monomial form: log space needs positive "
            "coefficients (in A - B)",
        ),
        (
            A * LOOSE,
            "UsageError [no-monomial-form]: the symbol t has no monomial form: t is not declared positive "
            "(make it in shardalg.algebra.symbols) (in A*t)",
        ),
        (
            sympy.log(A),
            "UsageError [no-monomial-form]: the expression log(A) has no monomial form: log is not a "
            "product, a power, a sum or a Max",
        ),
        (
            A**X,
            "UsageError [no-monomial-form]: the power A**X has no monomial form: the exponent must be a rational "
            "number",
        ),
    ],
)
def test_shapes_with_no_monomial_form_are_refused(expr, message):
    with pytest.raises(UsageError) as e:
        normal_form(expr)
    assert (
        str(e.value).splitlines()[0]
        == message.replace("UsageError [no-monomial-form]: ", "error: ") + " [no-monomial-form]"
    )
    assert "fix: write the cost with positive symbols" in str(e.value)


def test_substitution_ties_variables_and_merges_like_terms():
    cost = normal_form(A * X + B / Y + K / X, [("first", A * X), ("second", B / Y)])
    tied = substitute(cost, eliminate(sympy.Eq(X * Y, N), Y))
    assert sympy.simplify(to_expr(tied) - (A * X + B * X / N + K / X)) == 0
    merged = substitute(normal_form(A * X + A * Y, [("x", A * X), ("y", A * Y)]), {Y: X})
    assert [[(t.label, sympy.sstr(t.expr())) for t in p] for p in merged] == [[("x + y", "2*A*X")]]
    with pytest.raises(UsageError, match="the value must be a monomial"):
        substitute(cost, {Y: N - X})


def test_eliminate_solves_a_tie_for_one_symbol():
    assert eliminate(sympy.Eq(X * Y, N), Y) == {Y: N / X}
    assert eliminate(sympy.Eq(X**2 * Y, N), X) == {X: sympy.sqrt(N / Y)}
    with pytest.raises(UsageError, match="cannot solve"):
        eliminate(sympy.Eq(X + Y, N), Y)


def test_comparisons_cancel_like_terms_before_bracketing():
    coords = Coordinates([A, B])

    def cmp(p, q):
        return less([Term(m) for m in p], [Term(m) for m in q], coords)

    a, b, k = (Mono.make(1, {s: 1}) for s in (A, B, K))
    assert cmp([k, Mono(8) * a], [k, Mono(12) * a]) is True  # c + 8a < c + 12a: always
    assert cmp([k, Mono(12) * a], [k, Mono(8) * a]) is False  # never
    atom = cmp([k, a], [k, b])  # c + a < c + b is a < b: exact
    assert isinstance(atom, Atom) and atom.bracket == 1
    assert atom.solved(coords, (0, 1)) == sympy.StrictLessThan(A, B)
    two = cmp([a, b], [Mono.make(1, {A: 1, B: 1})])  # a + b < ab: no monomial form, bracketed
    assert isinstance(two, All) and brackets(two) == 2
    assert isinstance(negate(two), AnyOf)  # De Morgan down the tree, nothing expanded


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"over": [A + B]}, "the parameter A + B is not a monomial of positive symbols"),
        ({"over": [A, 2 * A]}, "the parameters A, 2*A are not independent"),
        ({"over": [A]}, "the condition B/A < 1 depends on B beyond the parameters A"),
        ({"over": [A, B], "solve_for": [K]}, "solve_for names K, which are not among the parameters"),
        (
            {"over": [A, B], "domain": [sympy.GreaterThan(A, A + B, evaluate=False)]},
            "the domain condition A >= A + B never holds",
        ),
        (
            {"over": [A, B], "domain": [sympy.Gt(A, 2 * B), sympy.Lt(A, B)]},
            "the domain is empty: its conditions contradict each other",
        ),
        (
            {"over": [A, B], "domain": [sympy.Ge(X, 1)]},
            "a domain condition evaluated to True before it reached the map",
        ),
    ],
)
def test_bad_maps_say_why(kwargs, message):
    with pytest.raises(ShardalgError) as e:
        strategy_map([Candidate("a", sympy.Max(A, B)), Candidate("b", 2 * B)], **kwargs)
    assert message in str(e.value)


def test_bad_candidates_say_why():
    with pytest.raises(UsageError, match="candidate names must differ"):
        strategy_map([Candidate("a", A), Candidate("a", B)], over=[A, B])
    with pytest.raises(UsageError, match="a constraint is an inequality"):
        strategy_map([Candidate("a", A, constraints=[sympy.Eq(A, B)])], over=[A, B])
    with pytest.raises(UsageError, match="depends on X, which is minimized over"):
        strategy_map(
            [Candidate("a", A * X + B / X, constraints=[A * X <= B], minimize=(X, 1, N))], over=[A, B, N]
        )
    with pytest.raises(UsageError, match="a candidate needs a name"):
        Candidate("", A)
    with pytest.raises(UsageError, match="expected a number or a sympy expression"):
        Candidate("a", "A + B")  # text never reaches sympify


def test_scipy_loads_only_when_a_map_needs_an_lp():
    """The CLI's start and ``import shardalg.search`` do not pay for scipy; the first LP imports it."""
    import subprocess
    import sys

    from tests.shared import ROOT

    script = (
        "import sys, sympy; import shardalg.search as s; print('scipy' in sys.modules); "
        "from shardalg.algebra.symbols import dim_size as d; A, B = d('A'), d('B'); "
        "s.strategy_map([s.Candidate('a', A), s.Candidate('b', B)], over=[A, B]); "
        "print('scipy' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]
