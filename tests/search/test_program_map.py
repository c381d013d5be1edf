"""The chapter 5 conditions through the program path: ``sa.strategy_map`` takes the MLP block as notation
with its parameters declared, builds DP, FSDP, TP and FSDP+TP as shardings of it, costs each from the
engine's plans and derived backward, and the conditions it prints equal the book's by sympy equality.

As in test_book_conditions, each condition is read off the pass the book analyses (``passes``): DP's
backward pass, FSDP's whole step, TP's and FSDP+TP's forward pass."""

from __future__ import annotations

import math

import pytest
import sympy

import shardalg as sa
from shardalg.errors import UsageError
from shardalg.search import ProgramMap, StrategyMap

from .mlp import M_X, M_Y, B, C, D, F, N, W, X, Y, priced, same

MLP = "params W_in, W_out\nIn[B, D] * W_in[D, F] -> Tmp[B, F]\nTmp[B, F] * W_out[F, D] -> Out[B, D]"
BOOK_DP_FSDP = B / N > C / (W * M_X)
BOOK_TP = Y < M_Y * F * W / C
BOOK_X_OPT = sympy.sqrt(B * M_X * N / (F * M_Y))
BOOK_FSDP_TP = B / N > (C / W) ** 2 / (M_X * M_Y * F)
V5P = {"B": 48000, "D": 8192, "F": 32768}


def only(conditions) -> sympy.Basic:
    ((facet,),) = conditions
    return facet


@pytest.mark.parametrize("overlap", ["steady", "serial"])
def test_dp_and_fsdp_compute_bound(overlap):
    dp = sa.strategy_map(
        MLP, over=("B/N", "C/W_ici", "M_X"), overlap=overlap, passes="backward", names=("DP",)
    )
    assert isinstance(dp, ProgramMap) and dp.added == ()
    assert same(only(dp.conditions("DP", "compute")), BOOK_DP_FSDP)
    fsdp = sa.strategy_map(MLP, over=("B/N", "C/W", "M_X"), overlap=overlap, names=("FSDP",))
    assert same(only(fsdp.conditions("FSDP", "compute")), BOOK_DP_FSDP)


@pytest.mark.parametrize("overlap", ["steady", "serial"])
def test_tp_limit_on_its_axis(overlap):
    """TP uses every device (Y -> N): its condition comes out on N, the book's on Y."""
    m = sa.strategy_map(
        MLP, over=("N", "F", "C/W_ici", "M_Y"), overlap=overlap, passes="forward", names=("TP",)
    )
    got = only(m.conditions("TP", "compute"))
    assert same(got.subs(N, Y), BOOK_TP)


@pytest.mark.parametrize("overlap", ["steady", "serial"])
def test_fsdp_tp_x_opt_is_the_books(overlap):
    m = sa.strategy_map(MLP, overlap=overlap, passes="forward", names=("FSDP+TP",))
    assert m.added == (C / W, M_X, M_Y, N)  # the costs need them: mapped over and said so
    assert any("also mapped over C/W_ici, M_X, M_Y, N" in n for n in m.notes)
    assert sympy.simplify(m.x_opt - BOOK_X_OPT) == 0


def _interior(overlap: str) -> ProgramMap:
    """FSDP+TP's forward pass where X_opt lies in [1, N] (the engine's own interior conditions)."""
    first = sa.strategy_map(MLP, overlap=overlap, passes="forward", names=("FSDP+TP",))
    interior = first.map.entries[0].minimum.interior()  # every way its minimum is reached has the same X_opt
    return sa.strategy_map(MLP, overlap=overlap, passes="forward", names=("FSDP+TP",), domain=interior)


def test_fsdp_tp_threshold_steady():
    m = _interior("steady")
    assert same(only(m.conditions("FSDP+TP", "compute")), BOOK_FSDP_TP)


def test_fsdp_tp_threshold_serial_is_four_times_the_steady_one():
    m = _interior("serial")
    cells = [c for c in m.map.cells_of("FSDP+TP") if c.term.label == "compute" and "X_opt" in c.winner]
    (cell,) = cells
    (conj,) = cell.conditions
    (serial,) = conj
    assert same(serial, B / N > 4 * (C / W) ** 2 / (F * M_X * M_Y))


def test_costs_equal_the_strategies_written_by_hand():
    """The shardings the program path builds are the book's table (tests/search/mlp.py types them): the
    engine's costs of both agree, pass by pass and policy by policy."""
    for overlap in ("steady", "serial"):
        for passes in ("forward", "backward", "step"):
            got = sa.strategy_map(MLP, overlap=overlap, passes=passes, keep_gathered=False)
            for s in got.strategies:
                assert sympy.simplify(s.cost.total - priced(s.name, passes, overlap).total) == 0, (
                    s.name,
                    passes,
                )


def test_v5p_worked_example():
    """TPU v5p 4x4x4 (N = 64), F = 32768, B = 48000: X_opt = sqrt(B·M_X·N/(F·M_Y)) with M_X/M_Y of the split,
    the divisors 8 and 16 around it, and the split X = 16 (two cube axes, M_X = 2), Y = 4 (M_Y = 1) first."""
    m = sa.strategy_map(MLP, mesh="X=4,Y=4,Z=4", hw="tpu-v5p", sizes=V5P, passes="forward")
    assert sympy.simplify(m.x_opt - BOOK_X_OPT) == 0
    s = m.splits
    assert s is not None and s.continuous == pytest.approx(math.sqrt(48000 * 2 * 64 / 32768))
    assert (s.below, s.above) == (8, 16)
    assert s.best.values == ((X, 16), (Y, 4), (M_X, 2), (M_Y, 1))
    assert m.values[M_X] == 2 and m.values[M_Y] == 1 and m.values[N] == 64
    # the mesh written as the split itself (X spans two axes: 2 links) gives the same optimum and divisors
    named = sa.strategy_map(MLP, mesh="X=16*2,Y=4", hw="tpu-v5p", sizes=V5P, passes="forward")
    assert named.splits.continuous == pytest.approx(s.continuous) and named.splits.best.values[0] == (X, 16)


def test_the_point_is_located_and_agrees_with_the_numbers():
    """At the v5p point the map's region is the strategy whose cost, evaluated with numbers, is least
    (FSDP+TP at X_opt; DP and FSDP on all 64 devices; TP on all 64)."""
    m = sa.strategy_map(MLP, mesh="X=4,Y=4,Z=4", hw="tpu-v5p", sizes=V5P, passes="forward")
    values = dict(m.values)
    x_opt = float(m.x_opt.subs(values))
    numbers = {}
    for s in m.strategies:
        at = {**values, **{k: v.subs({N: 64}) for k, v in s.substitute.items()}}
        if s.name == "FSDP+TP":
            at[X] = x_opt
            at[Y] = 64 / x_opt
        numbers[s.name] = float(sympy.sympify(s.cost.total).subs(at))
    assert m.here is not None
    fastest = min(numbers.values())
    assert numbers[m.here.parent] == pytest.approx(fastest, rel=1e-9)
    assert D in values and values[B] == 48000


def test_printers():
    m = sa.strategy_map(MLP, mesh="X=4,Y=4,Z=4", hw="tpu-v5p", sizes=V5P, keep_gathered=True)
    assert m._repr_latex_().startswith("$$\\begin{cases}") and "X_{\\mathrm{opt}}" in m.latex()
    text = str(m)
    assert "current point: B/N = 750" in text and "linear programs solved" in text and "note: remat" in text
    data = m.to_json()
    assert data["point"]["B/N"] == pytest.approx(750) and data["lps"] == m.lps > 0
    assert data["fastest"]["candidate"] and [s["name"] for s in data["strategies"]] == [
        "DP",
        "FSDP",
        "TP",
        "FSDP+TP",
    ]
    assert isinstance(m.map, StrategyMap)


def test_no_point_without_values_and_it_says_why():
    m = sa.strategy_map(MLP, names=("DP", "FSDP"))
    assert m.here is None and m.point() is None
    assert any("no current point: no values for" in n and "--hw" in n for n in m.notes)


@pytest.mark.parametrize(
    ("program", "kwargs", "message"),
    [
        ("In[B, D] * W[D, F] -> Out[B, F]", {}, "declare them"),
        ("params W\nIn[B_X, D] * W[D, F] -> Out[B_X, F]", {}, "without shardings"),
        (MLP, {"over": ("B/Q",)}, "unknown name 'Q'"),
        (MLP, {"over": ("B//N",)}, "cannot read the map parameter"),
        (MLP, {"over": ("B/",)}, "ends with an operator"),
        (MLP, {"passes": "sideways"}, "passes is one of"),
        (MLP, {"overlap": "sometimes"}, "overlap policy is one of"),
        (MLP, {"names": ("ZeRO",)}, "unknown strategies"),
        (MLP, {"sizes": {"Q": 3}}, "not a dim of the program"),
        ("params W\nIn[B, X] * W[X, F] -> Out[B, F]", {}, "share a name with the strategies' axes"),
    ],
)
def test_refusals(program, kwargs, message):
    with pytest.raises(UsageError, match=message):
        sa.strategy_map(program, **kwargs)


def test_a_bad_parameter_shows_a_caret():
    with pytest.raises(UsageError) as info:
        sa.strategy_map(MLP, over=("B/Q",))
    assert "^" in str(info.value) and "B/Q" in str(info.value)


def test_candidates_still_go_to_the_engine():
    from shardalg.search import Candidate

    m = sa.strategy_map([Candidate("a", B * F), Candidate("b", B**2)], over=[B, F])
    assert isinstance(m, StrategyMap) and {r.winner for r in m.regions} == {"a", "b"}


def test_a_memory_cap_gives_fsdp_its_region():
    """With a cap H on the parameters, gradients and Adam state per device (24·D·F bytes for DP: bf16 weights
    and gradients, fp32 moments; the models layer's numbers), DP lives only where 24·D·F < H, and FSDP wins
    where DP does not fit and the batch per device is large."""
    m = sa.strategy_map(MLP, mesh="X=4,Y=4,Z=4", hw="tpu-v5p", sizes=V5P, memory="hbm")
    cap = m.values[next(s for s in m.values if s.name == "H")]
    from shardalg.costs.chipspec import as_chip_text

    assert cap == as_chip_text("tpu-v5p").hbm_capacity.value
    (ratio,) = [
        p for p in m.parameters if p.free_symbols == {D, F, next(s for s in m.values if s.name == "H")}
    ]
    for r in m.map.regions_of("DP"):
        assert all(any(same(c, ratio < sympy.Rational(1, 24)) for c in conj) for conj in r.conditions)
    assert any(m.map.regions_of("FSDP"))
    dp = sa.memory(sa.shard(MLP, activations="B=X"), mesh="X=64", sizes=V5P)
    assert sum(dp.parts[p] for p in ("params", "grads", "optimizer")) == 24 * 8192 * 32768  # the 24·D·F
    # where the weights do not fit one device and the batch per device is large, FSDP is fastest
    values = {**m.values, B: 1e5 * 64, F: 1e6}
    assert 24 * 8192 * 1e6 > cap and m.map.winner(values) == "FSDP"
    assert any("memory cap H" in n for n in m.notes)


def test_memory_cap_refusals():
    with pytest.raises(UsageError, match="needs a chip"):
        sa.strategy_map(MLP, memory="hbm")
    for bad in ("lots", -1, float("inf"), True):
        with pytest.raises(UsageError, match="memory cap"):
            sa.strategy_map(MLP, memory=bad)


@pytest.mark.parametrize("huge", [10**400, "9" * 400, "1e400"])
def test_a_memory_cap_beyond_a_float_is_refused_not_an_overflow(huge):
    """An int of 400 digits raised OverflowError in float(); a string of one became inf silently."""
    with pytest.raises(UsageError, match="finite number of bytes") as e:
        sa.strategy_map(MLP, mesh="X=4,Y=4,Z=4", hw="tpu-v5p", sizes=V5P, memory=huge)
    assert len(str(e.value)) < 200  # the number is shortened, not printed whole


def test_a_memory_cap_at_the_top_of_the_float_range_is_a_cap():
    m = sa.strategy_map(MLP, mesh="X=4,Y=4,Z=4", hw="tpu-v5p", sizes=V5P, memory=10**308)
    assert any("memory cap H" in n for n in m.notes)


def test_the_cli_refuses_a_memory_cap_beyond_a_float_with_exit_2(capsys):
    from shardalg.cli import main

    prog = "params W_in, W_out; In[B, D] * W_in[D, F] -> Tmp[B, F]; Tmp[B, F] * W_out[F, D] -> Out[B, D]"
    assert main(["strategy-map", prog, "--mesh", "X=4", "--hw", "tpu-v5p", "--memory", "9" * 400]) == 2
    err = capsys.readouterr().err
    assert "finite number of bytes" in err and "Traceback" not in err


def test_a_map_poses_the_same_linear_programs_whatever_ran_before_and_solves_each_once(monkeypatch):
    """Each LP is answered once per value of its atoms (the cache layer): the same map again, in another
    format or on another chip, solves none, and reports the same count of LPs posed."""
    from shardalg.search import polyhedra

    solved = []
    real = polyhedra._linprog
    monkeypatch.setattr(polyhedra, "_linprog", lambda *a: solved.append(1) or real(*a))
    program = "params W\nIn[B, D] * W[D, F] -> Out[B, F]"
    sa.clear_caches()
    first = sa.strategy_map(program, mesh="X=4", hw="tpu-v5p", names=("DP", "FSDP", "TP"))
    assert first.lps >= len(solved) > 0  # a repeat within the map is answered from the first
    before = len(solved)
    again = sa.strategy_map(program, mesh="X=4", hw="h100", names=("DP", "FSDP", "TP"))
    assert again.lps == first.lps and len(solved) == before
    assert str(again.map) == str(first.map)
