"""The map against a numeric oracle (issue 12, item 5, at the level of the region engine): at sampled
parameter points, every candidate's cost is evaluated from the engine's own expression (FSDP+TP minimized
over its split numerically, not by the closed form), the fastest one that fits is found, and the map's
region at that point must name it (or one whose cost equals it: a tie).

A region whose boundaries compare sums that do not cancel (``bracket`` > 1) may name a candidate up to that
factor slower; exact regions (bracket 1) must name the fastest, to rounding."""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest
import sympy
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from shardalg.search import strategy_map

from .mlp import DOMAIN, M_X, M_Y, OVER, B, C, D, F, H, N, W, X, Y, candidate, priced, weight_bytes

NAMES = ("DP", "FSDP", "TP", "FSDP+TP")
OVER_MEMORY = OVER + (D * F / H,)
SYMBOLS = (B, N, F, C, W, M_X, M_Y, D, H, X, Y)


def axes(name: str, n: float, x: float | None = None) -> tuple[float, float]:
    """(X, Y) as each strategy uses the N devices: DP and FSDP X = N, TP Y = N, FSDP+TP X·Y = N."""
    return {"DP": (n, 1.0), "FSDP": (n, 1.0), "TP": (1.0, n), "FSDP+TP": (x or 1.0, n / (x or 1.0))}[name]


@cache
def strategy(policy: str, memory: bool):
    over = OVER_MEMORY if memory else OVER
    cands = [candidate(n, "step", policy, memory=memory) for n in NAMES]
    return strategy_map(cands, over=over, domain=DOMAIN)


@cache
def compiled(policy: str):
    """name -> (cost, weight bytes per device) as functions of SYMBOLS, straight from the engine's expressions
    in X and Y (numbers go in for the axes: no symbolic substitution, so no sympy Max is re-evaluated)."""
    return {
        n: (
            sympy.lambdify(SYMBOLS, priced(n, "step", policy).total, "math"),
            sympy.lambdify(SYMBOLS, weight_bytes(n), "math"),
        )
        for n in NAMES
    }


def oracle(values: dict, policy: str) -> dict[str, tuple[float, float]]:
    """name -> (cost, weight bytes per device) at the point; FSDP+TP at its numerically best split."""
    args = [values.get(s, 1.0) for s in SYMBOLS[:-2]]
    n_dev = values[N]
    out = {}
    for n, (cost, mem) in compiled(policy).items():
        if n == "FSDP+TP":

            def at(logx: float, cost=cost, n=n) -> float:
                return cost(*args, *axes(n, n_dev, math.exp(logx)))

            ends = [at(0.0), at(math.log(n_dev))]
            found = (
                minimize_scalar(at, bounds=(0.0, math.log(n_dev)), method="bounded", options={"xatol": 1e-12})
                if n_dev > 1
                else None
            )
            out[n] = (min(ends + ([found.fun] if found is not None else [])), mem(*args, *axes(n, n_dev)))
        else:
            out[n] = (cost(*args, *axes(n, n_dev)), mem(*args, *axes(n, n_dev)))
    return out


def point(logs: dict[str, float], memory: bool) -> dict:
    """Symbol values from log-coordinates: B/N, N, F, C/W, M_X, M_Y (and D·F/H); W and D fixed."""
    n, w, d = math.exp(logs["N"]), 1e11, 8192.0
    values = {
        N: n,
        B: math.exp(logs["b"]) * n,
        F: math.exp(logs["F"]),
        W: w,
        C: math.exp(logs["cw"]) * w,
        M_X: math.exp(logs["mx"]),
        M_Y: math.exp(logs["my"]),
        D: d,
    }
    values[H] = d * values[F] * math.exp(-logs["h"]) if memory else 1.0
    return values


def check(values: dict, policy: str, memory: bool, m=None) -> None:
    m = m or strategy(policy, memory)
    got = oracle(values, policy)
    fits = {n: c for n, (c, mem) in got.items() if not memory or mem <= values[H]}
    region = m.locate(values)
    if not fits:
        assert region is None, f"nothing fits, yet the map names {region.winner}"
        return
    best = min(fits.values())
    assert region is not None, f"the map names no candidate at {values}; the oracle's best is {best}"
    name = region.parent
    assert name in fits, f"the map names {region.winner}, which does not fit ({got[name][1]} > {values[H]})"
    assert fits[name] <= best * region.bracket * (1 + 1e-7), (
        f"the map names {region.winner} at cost {fits[name]}, the oracle finds {best}: {got}"
    )


LOGS = st.fixed_dictionaries(
    {
        "b": st.floats(0, 12),
        "N": st.floats(0, 9),
        "F": st.floats(5, 12),
        "cw": st.floats(2, 9),
        "mx": st.floats(0, 1.4),
        "my": st.floats(0, 1.4),
        "h": st.floats(-4, 6),
    }
)


@pytest.mark.parametrize("policy", ["steady", "serial"])
@pytest.mark.parametrize("memory", [False, True])
@given(logs=LOGS)
# the random profile's find: under steady with the cap, FSDP+TP's region named it 1.2% slower than FSDP, its
# cost there its largest term's minimum over the split (no closed form), while the region said it was exact
@example(logs={"b": 6.40625, "N": 2.0, "F": 6.375, "cw": 7.09375, "mx": 0.65625, "my": 0.625, "h": 0.0})
def test_the_numeric_winner_lies_in_its_region(policy, memory, logs):
    check(point(logs, memory), policy, memory)


def _inside(m, region, memory: bool) -> dict:
    """A point deep inside one polyhedron of a region and the domain (its log-coordinates from the LP)."""
    y = m.example(region) + (() if memory else (0.0,))
    return point(dict(zip(("b", "N", "F", "cw", "mx", "my", "h"), y, strict=True)), memory)


@pytest.mark.parametrize("policy", ["steady", "serial"])
@pytest.mark.parametrize("memory", [False, True])
def test_each_region_is_won_by_its_candidate_inside(policy, memory):
    m = strategy(policy, memory)
    assert m.regions
    for r in m.regions:
        values = _inside(m, r, memory)
        assert m.locate(values) is r
        check(values, policy, memory)


def test_without_a_memory_cap_dp_is_never_slower_than_fsdp():
    """DP all-reduces (2V per weight), FSDP gathers twice and reduce-scatters (3V): never faster. Over a
    whole step every strategy does the same FLOPs on N devices, so where DP is compute-bound each of the others
    ties with it where it is compute-bound too, and the map says so."""
    m = strategy("steady", False)
    assert m.regions_of("FSDP") == ()
    (dp_compute,) = [r for r in m.regions_of("DP") if r.term.label == "compute"]
    # FSDP's passes are compute-bound exactly where DP's backward is (each pass's ratio is the same): it ties
    # throughout; TP and FSDP+TP where their compute binds too
    assert dp_compute.ties == ("FSDP",) + tuple(f"{n} where its compute binds too" for n in ("TP", "FSDP+TP"))


def test_with_a_memory_cap_fsdp_wins_where_dp_does_not_fit():
    m = strategy("steady", True)
    assert m.regions_of("FSDP")
    for r in m.regions_of("FSDP"):
        values = _inside(m, r, True)
        _, dp_memory = oracle(values, "steady")["DP"]
        assert dp_memory > values[H]


def test_the_maps_are_exact_where_costs_cancel():
    """A steady step is a sum of its passes' maxima: like terms cancel, so DP's compute region is exact; FSDP+TP
    gathering again balances its passes at different splits, so its minimum is bracketed, and says so. In the
    serial view every strategy has the same compute term, which cancels, so TP and FSDP+TP at X_opt are exact
    too; DP against FSDP+TP held at X = 1 (valid where X_opt < 1) compares one term with two and is bracketed,
    and says so."""
    steady = strategy("steady", False)
    assert {r.bracket for r in steady.regions if r.winner == "DP" and r.term.label == "compute"} == {1}
    assert not steady.exact and any("FSDP+TP" in n and "factor 2" in n for n in steady.notes)
    serial = strategy("serial", False)
    assert {r.winner: r.bracket for r in serial.regions} == {"DP": 2, "TP": 1, "FSDP+TP (X = X_opt)": 1}
    assert not serial.exact and any("bracketed" in n for n in serial.notes)


def test_the_oracle_has_teeth():
    """A map built from a wrong cost (TP's communication a tenth of what the engine says) gives TP ground it
    does not hold, and the oracle catches it at some of 150 fixed points."""
    pc = priced("TP", "step", "steady")
    wrong = candidate("TP", "step", "steady")
    wrong = type(wrong)("TP", sympy.Max(pc.compute, pc.comms / 10), substitute={Y: N})
    cands = [candidate(n, "step", "steady") if n != "TP" else wrong for n in NAMES]
    m = strategy_map(cands, over=OVER, domain=DOMAIN)
    rng = np.random.default_rng(0)
    failures = 0
    for _ in range(150):
        low, high = [0, 0, 5, 2, 0, 0, 0], [12, 9, 12, 9, 1.4, 1.4, 0]
        logs = dict(zip(("b", "N", "F", "cw", "mx", "my", "h"), rng.uniform(low, high), strict=True))
        try:
            check(point(logs, False), "steady", False, m)
        except AssertionError:
            failures += 1
    assert failures > 0


def test_sums_that_do_not_cancel_are_bracketed_and_the_bracket_holds():
    """a = P + Q against b = 3·R: the boundary ``P + Q < 3R`` has no monomial form; the map compares
    max(P, Q) with 3R, says so (bracket 2, a note, ``exact`` false), and its winner is never more than that
    factor slower than the true one."""
    from shardalg.algebra.symbols import dim_size
    from shardalg.search import Candidate

    p, q, r = dim_size("P"), dim_size("Q"), dim_size("R")
    m = strategy_map([Candidate("a", p + q), Candidate("b", 3 * r)], over=[p, q, r])
    assert not m.exact and any("bracketed" in n for n in m.notes)
    assert {x.bracket for x in m.regions_of("a")} == {2}
    rng = np.random.default_rng(1)
    worst = 1.0
    for vp, vq, vr in np.exp(rng.uniform(-3, 3, size=(300, 3))):
        costs = {"a": vp + vq, "b": 3 * vr}
        got = m.locate({p: vp, q: vq, r: vr})
        worst = max(worst, costs[got.winner] / min(costs.values()))
        assert costs[got.winner] <= got.bracket * min(costs.values()) * (1 + 1e-12)
    assert worst > 1.0  # the bracket is not empty talk: somewhere the max-comparison picks the slower one


def test_a_point_needs_every_symbol():
    from shardalg.errors import UsageError

    with pytest.raises(UsageError, match="a point of the map needs values for B, C, F"):
        strategy("steady", False).locate({N: 4.0})


# ---- any costs, not only the book's: random maxima and sums of monomials in two parameters -------------
P2, Q2 = (sympy.Symbol(n, positive=True) for n in ("P", "Q"))
EXPONENT = st.sampled_from([sympy.Rational(k, 2) for k in range(-4, 5)])


@st.composite
def random_candidates(draw):
    """Two or three candidates; each a Max of monomials or a sum of two, some with a constraint <= 1.
    Returned with plain-number copies of every term, so the oracle evaluates them without sympy."""
    out = []
    for i in range(draw(st.integers(2, 3))):
        terms = [
            (draw(st.integers(1, 9)), draw(EXPONENT), draw(EXPONENT)) for _ in range(draw(st.integers(1, 3)))
        ]
        kind = draw(st.sampled_from(["max", "sum"])) if len(terms) > 1 else "max"
        monos = [c * P2**a * Q2**b for c, a, b in terms]
        cost = sympy.Max(*monos, evaluate=False) if kind == "max" else sympy.Add(*monos)
        limit = (draw(st.integers(1, 9)), draw(EXPONENT), draw(EXPONENT)) if draw(st.booleans()) else None
        constraints = (
            [sympy.Le(limit[0] * P2 ** limit[1] * Q2 ** limit[2], 1, evaluate=False)] if limit else []
        )
        out.append((f"c{i}", cost, constraints, terms, kind, limit))
    return out


def _value(terms, kind, p, q) -> float:
    vals = [c * p ** float(a) * q ** float(b) for c, a, b in terms]
    return max(vals) if kind == "max" else sum(vals)


@settings(max_examples=max(12, settings.default.max_examples // 5))  # each example builds a map (~100 LPs)
@given(random_candidates(), st.lists(st.tuples(st.floats(-5, 5), st.floats(-5, 5)), min_size=10, max_size=10))
def test_any_map_agrees_with_the_oracle(cands, points):
    from shardalg.search import Candidate

    m = strategy_map([Candidate(n, cost, constraints=k) for n, cost, k, *_ in cands], over=[P2, Q2])
    for lp_, lq in points:
        p, q = math.exp(lp_), math.exp(lq)
        costs = {n: _value(t, kind, p, q) for n, _, _, t, kind, _ in cands}
        caps = {n: 0.0 if lim is None else math.log(_value([lim], "max", p, q)) for n, *_, lim in cands}
        fits = [n for n in costs if caps[n] <= 0]
        near = [n for n in costs if caps[n] < 1e-9]  # locate's tolerance on a boundary, in log space
        region = m.locate({P2: p, Q2: q})
        if not fits:  # outside every cap, or within the tolerance of one (0.0, 2.2e-16 found it)
            assert region is None or region.winner in near
            continue
        assert region is not None, f"no region holds ({p}, {q}), where {sorted(fits)} fit"
        best = min(costs[n] for n in fits)
        assert region.winner in near
        assert costs[region.winner] <= best * region.bracket * (1 + 1e-9)


def test_on_the_boundary_of_a_cap_the_candidate_that_fits_there_wins():
    """Regions are open; on the boundary of c1's memory cap (P*Q = 1, where 1/(P^2*Q^2) <= 1 holds) c1 fits
    and is twice as fast as c0. The deepest region alone is a tie there, and named c0 (random examples found
    it); just inside the cap c1 wins, just outside c0."""
    from shardalg.search import Candidate

    # R is not a parameter: a factor of both costs the point need not give, compared by its sign
    r = sympy.Symbol("R", positive=True)
    for f in (1, r):
        c0 = Candidate("c0", 2 * f / (P2**2 * Q2**2))
        c1 = Candidate("c1", f / (P2**2 * Q2**2), constraints=[sympy.LessThan(f / (P2**2 * Q2**2), f)])
        m = strategy_map([c0, c1], over=[P2, Q2])
        at = ((1, 1), (2, 0.5), (1.001, 1), (0.999, 1))
        assert [m.winner({P2: p, Q2: q}) for p, q in at] == ["c1", "c1", "c1", "c0"]


def test_a_cell_compares_the_sum_that_binds_there():
    """Inside a cell of a candidate's cost the sum that binds is its cost, so each comparison reads that one
    sum: TP compute-bound (its cost 12·B·D·F/(C·N)) beats DP exactly where B/N < C/(M_X·W). Comparing all of
    TP's sums with DP's, bracketed, once left this point (TP fastest, tied with FSDP+TP) to no candidate."""
    logs = {"b": 2.1141659, "N": 5.9835550, "F": 7.6152494, "cw": 2.3640701, "mx": 0.0624966, "my": 0.7662520}
    values = point({**logs, "h": 0.0}, False)
    m = strategy("steady", False)
    region = m.locate(values)
    assert region is not None and region.winner == "TP" and region.term.label == "compute"
    assert region.bracket == 1
    check(values, "steady", False)
