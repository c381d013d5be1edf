"""The region engine's prover (search/prover.py): what it derives from certificates equals what a linear
program answers, and it poses far fewer linear programs than questions.

The property test draws polyhedra in 2 and 3 log-coordinates with small integer exponents and constants
(so boundaries meet exactly, as the strategy maps' do) and asks the prover and a fresh LP
(:func:`.polyhedra.nonempty`, :func:`.polyhedra.implies`) the same questions in turn: every answer agrees,
whatever the prover learned from the questions before it."""

from __future__ import annotations

import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import shardalg as sa
from shardalg.search import polyhedra as lp
from shardalg.search.conditions import Atom
from shardalg.search.prover import Prover

P, Q, R = sympy.symbols("P Q R", positive=True)


def half(lam: tuple[int, ...], c: sympy.Rational | int) -> Atom:
    """``c·Π P_k^λ_k < 1``: the atom ``λ·y + log c < 0``."""
    c = sympy.Rational(c)
    lhs = c * sympy.Mul(*(s**k for s, k in zip((P, Q, R), lam, strict=False)))
    return Atom(tuple(sympy.Integer(k) for k in lam), c, lhs, sympy.Integer(1))


def lps(f):
    before = lp.LP_CALLS[0]
    out = f()
    return out, lp.LP_CALLS[0] - before


exponent = st.integers(-2, 2)
constant = st.sampled_from([1, 2, 3, 6, 12])


@st.composite
def questions(draw):
    dims = draw(st.integers(2, 3))
    atom = st.builds(half, st.tuples(*[exponent] * dims).filter(any), constant)
    pool = draw(st.lists(atom, min_size=3, max_size=7, unique=True))
    asks = []
    for _ in range(draw(st.integers(4, 14))):
        atoms = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=5, unique=True))
        target = draw(
            st.none()
            | st.sampled_from(pool)
            | atom
            | st.builds(
                near,
                st.sampled_from(pool),
                st.sampled_from(pool),
                st.sampled_from([1, 2, 3]),
                st.sampled_from([1, 2, 3]),
            )
        )
        asks.append((atoms, target))
    return dims, asks


def near(a: Atom, b: Atom, up: int, down: int) -> Atom | None:
    """An atom in the cone of two others, its constant a little above or below theirs combined: the edge the
    cone test decides."""
    lam = tuple(int(x + y) for x, y in zip(a.lam, b.lam, strict=True))
    if not any(lam):
        return None
    return half(lam, sympy.Rational(up, down) * a.coef * b.coef)


@settings(max_examples=60, deadline=None)
@given(questions())
def test_the_prover_answers_as_a_linear_program_does(drawn):
    dims, asks = drawn
    prover = Prover(dims)
    for atoms, target in asks:
        if target is None:
            got = prover.interior(atoms)
            assert (got is not None) == lp.nonempty(atoms, dims)
            if got is not None:  # the point it gives is inside
                assert all(a.margin(got) > lp.TOL for a in atoms)
        else:
            assert prover.implies(atoms, target) == lp.implies(atoms, target, dims)


def test_a_support_answers_a_larger_polyhedron_and_a_cone_needs_no_lp():
    prover = Prover(2)
    p_small, q_small = half((1, 0), 2), half((0, 1), 3)  # 2P < 1, 3Q < 1
    target = half((1, 1), 5)  # 5PQ < 1: implied (PQ < 1/6), by both atoms together
    assert lps(lambda: prover.implies([p_small, q_small], target)) == (True, 0)  # a cone: λ = λ1 + λ2
    far = half((1, 2), 1)  # PQ² < 1: the cone of P and Q spans it too
    assert lps(lambda: prover.implies([p_small, q_small, half((-1, 1), 1)], far)) == (True, 0)
    ratio = half((1, -1), 7)  # 7P/Q < 1: not implied; the LP's maximizer is kept as a point
    assert lps(lambda: prover.implies([p_small, q_small], ratio)) == (False, 1)
    assert lps(lambda: prover.implies([p_small, q_small, half((1, 1), 1)], ratio)) == (False, 0)
    # P < 1, Q < 1 and PQ > 1: empty, since the third is the complement of what the cone of the first two gives
    a, b, c = half((1, 0), 1), half((0, 1), 1), half((-1, -1), 1)
    assert lps(lambda: prover.interior([a, b, c])) == (None, 0)


def test_an_lp_s_support_answers_every_polyhedron_that_holds_it():
    """PQR < 1 needs all three of P, Q, R < 1 (no two span it): one LP, then none for a polyhedron with more."""
    prover = Prover(3)
    p, q, r, t = half((1, 0, 0), 1), half((0, 1, 0), 1), half((0, 0, 1), 1), half((1, 1, 1), 1)
    assert lps(lambda: prover.implies([p, q, r], t)) == (True, 1)
    more = [half((1, -1, 0), 2), p, half((0, 1, 1), 1), q, r]
    assert lps(lambda: prover.implies(more, t)) == (True, 0)
    assert lps(lambda: prover.interior([p, q, r, half((-1, -1, -1), 1)])) == (None, 0)  # PQR > 1 with them


def test_the_golden_v5p_map_poses_few_linear_programs():
    """The MLP's map on a 2x2 mesh (golden 317) posed 2,541 LPs before the prover; now under 200."""
    m = sa.strategy_map(
        "params W_in, W_out; In[B, D] * W_in[D, F] -> Tmp[B, F]; Tmp[B, F] * W_out[F, D] -> Out[B, D]",
        mesh="X=2,Y=2",
        hw="h100",
        sizes={"B": 4096, "D": 8192, "F": 32768},
    )
    assert 0 < m.lps < 200
