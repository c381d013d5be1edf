"""ZeRO-1, ZeRO-2 and ZeRO-3 in the strategy map's FSDP family (issue 32, item 1).

ZeRO-1 and ZeRO-2 are DP's sharding read by the models layer under that stage; ZeRO-3 is FSDP. By sympy
equality: each member costs what DP does (ReduceScatter + AllGather once a step move the AllReduce's bytes), so
its compute-bound condition is DP's; it differs in memory (the optimizer state, then the gradients, divided by
N); under a memory cap each gets the region where it fits and the one before it does not. At a point, the
map's cost is ``shardalg step --zero N``'s."""

from __future__ import annotations

import json

import pytest
import sympy

import shardalg as sa
from shardalg.errors import UsageError
from shardalg.search.programmap import strategies_of
from shardalg.search.zerofamily import zero_strategy

from .mlp import M_X, B, C, D, F, H, N, W, X, same

MLP = "params W_in, W_out\nIn[B, D] * W_in[D, F] -> Tmp[B, F]\nTmp[B, F] * W_out[F, D] -> Out[B, D]"
DP_TEXT = (
    "params W_in, W_out; In[B_X, D] * W_in[D, F] -> Tmp[B_X, F]; Tmp[B_X, F] * W_out[F, D] -> Out[B_X, D]"
)
V5P = {"B": 48000, "D": 8192, "F": 32768}
BOOK_DP = B / N > C / (W * M_X)
FAMILY = ("DP", "ZeRO-1", "ZeRO-2", "FSDP")


def _by_name(m) -> dict:
    return {s.name: s for s in m.strategies}


@pytest.mark.parametrize("overlap", ["steady", "serial"])
@pytest.mark.parametrize("passes", ["step", "backward"])
def test_members_cost_what_dp_costs_so_their_compute_bound_condition_is_dps(overlap, passes):
    m = sa.strategy_map(MLP, over=("B/N", "C/W", "M_X"), overlap=overlap, passes=passes, names=FAMILY[:3])
    s = _by_name(m)
    for z in ("ZeRO-1", "ZeRO-2"):
        assert sympy.simplify(s[z].cost.total - s["DP"].cost.total) == 0
        dp, got = m.conditions("DP", "compute"), m.conditions(z, "compute")
        assert len(got) == len(dp) and all(
            len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
            for a, b in zip(got, dp, strict=True)
        )
        if passes == "backward":  # the book's condition, read off the pass it analyses
            ((facet,),) = got
            assert same(facet, BOOK_DP)
    # what makes them equal: DP's AllReduce became a ReduceScatter and an AllGather, in the backward's phase
    ops = [st.step.op.value for st in s["ZeRO-1"].cost.steps if st.step.communicates]
    assert sorted(ops) == ["AllGather", "AllGather", "ReduceScatter", "ReduceScatter"]
    assert [st.step.op.value for st in s["DP"].cost.steps if st.step.communicates] == ["AllReduce"] * 2


def test_what_each_member_differs_in_is_its_memory():
    """ZeRO-1 divides DP's optimizer state by N, ZeRO-2 its gradients too (the models layer's parts of DP);
    FSDP (ZeRO-3) all three: the book's 4·D·F + 4·D·F + 16·D·F bytes of DP (bf16 weights and gradients,
    Adam's fp32 moments)."""
    s = _by_name(sa.strategy_map(MLP, names=("DP", "ZeRO-1", "ZeRO-2", "ZeRO-3")))
    held = {n: sympy.expand(s[n].state.subs(s[n].substitute)) for n in s}
    dp = sa.memory(sa.shard(MLP, activations="B=X"), mesh="X=64", sizes=V5P).parts
    params, grads, opt = (dp[p] for p in ("params", "grads", "optimizer"))
    at = {D: V5P["D"], F: V5P["F"], N: 64}
    assert held["DP"].subs(at) == params + grads + opt
    assert held["ZeRO-1"].subs(at) == params + grads + sympy.Rational(opt, 64)
    assert held["ZeRO-2"].subs(at) == params + sympy.Rational(grads + opt, 64)
    assert held["FSDP"].subs(at) == sympy.Rational(params + grads + opt, 64)
    assert held["ZeRO-1"] == 4 * D * F + 4 * D * F + 16 * D * F / N
    assert held["ZeRO-2"] == 4 * D * F + (4 * D * F + 16 * D * F) / N
    # the same stages through `shardalg memory --zero N` at the numbers
    for stage, name in ((1, "ZeRO-1"), (2, "ZeRO-2"), (3, "FSDP")):
        got = sa.memory(sa.shard(MLP, activations="B=X"), mesh="X=64", sizes=V5P, zero=stage).parts
        assert sum(got[p] for p in ("params", "grads", "optimizer")) == held[name].subs(at)


@pytest.mark.parametrize("overlap", ["steady", "serial"])
def test_zero3_is_fsdp(overlap):
    """DP's program under ZeRO-3 (the models layer gathers the parameters from their shards before the
    forward and again before the backward) costs and holds what the map's FSDP does: so the map takes the name
    ZeRO-3 as FSDP's, and says so."""
    dp, fsdp = strategies_of(MLP, overlap, names=("DP", "FSDP"), keep_gathered=False)
    z3 = zero_strategy(dp, 3, overlap)
    assert sympy.simplify(z3.cost.total - fsdp.cost.total) == 0
    assert sympy.simplify(z3.state.subs(X, N) - fsdp.state.subs(X, N)) == 0
    m = sa.strategy_map(MLP, names=("ZeRO-3",))
    assert [s.name for s in m.strategies] == ["FSDP", "FSDP kept"]  # gathering again, and keeping
    assert any(n.startswith("ZeRO-3 is FSDP") for n in m.notes)
    both = sa.strategy_map(MLP, names=("FSDP", "ZeRO-3"))
    assert [s.name for s in both.strategies] == ["FSDP", "FSDP kept"]


def _fits(s, at) -> sympy.Basic:
    """Where a strategy's state fits under H, each term against H (what the map derives), solved for D*F/H."""
    terms = sympy.Add.make_args(sympy.expand(s.state.subs(s.substitute)))
    return [sympy.StrictLessThan(D * F / H, D * F / t) for t in terms]


def test_under_a_cap_each_member_fits_where_the_one_before_does_not():
    """With the cap symbolic, ZeRO-1's regions hold where DP's bytes pass H (D*F/H > 1/24) and each term of
    its own are under it (D*F/H < 1/8, D*F/H < N/16); ZeRO-2's where what ZeRO-1 keeps whole passes H; FSDP's where
    ZeRO-2's does. Every bound is built here from the strategies' memory (the models layer), none typed."""
    m = sa.strategy_map(MLP, names=FAMILY, over=("B/N",), memory="symbolic")
    s = _by_name(m)
    for before, name in zip(FAMILY, FAMILY[1:], strict=False):
        fits = _fits(s[name], {})
        terms = sympy.Add.make_args(sympy.expand(s[before].state.subs(s[before].substitute)))
        (whole,) = [t for t in terms if N not in t.free_symbols]  # what the one before keeps whole
        out = sympy.StrictGreaterThan(D * F / H, D * F / whole)  # ... passes H
        regions = m.map.regions_of(name)
        assert regions, name
        for r in regions:
            for conj in r.conditions:
                for f in (*fits, out):
                    assert any(same(c, f) for c in conj), (name, f, conj)
    assert {f.rhs for f in _fits(s["ZeRO-1"], {})} == {sympy.Rational(1, 8), N / 16}
    # the map compares a sum term by term, and says so
    assert any(n.startswith("ZeRO-1 fits where 8*D*F + 16*D*F/N <= H, a sum") for n in m.notes)


@pytest.mark.parametrize(("cap", "fastest"), [(7e9, "DP"), (3e9, "ZeRO-1"), (1.5e9, "ZeRO-2"), (5e8, "FSDP")])
def test_at_a_point_the_fastest_is_the_first_of_the_family_that_fits(cap, fastest):
    """D = 8192, F = 32768 on 64 devices: DP holds 24·D·F = 6.4 GB, ZeRO-1 2.2 GB, ZeRO-2 1.2 GB, FSDP
    0.1 GB (``shardalg memory --zero N``); the map's winner at each cap is the first that fits (equal costs go to
    the one listed first), and ``memory --zero`` agrees it fits and the one before does not."""
    # gathering again, as DeepSpeed's stages do (FSDP kept, whose gathers hide behind the forward, beats DP's
    # AllReduce where comms bind under steady: tests/search/test_keep_map.py)
    m = sa.strategy_map(
        MLP, mesh="X=64", hw="tpu-v5p", sizes=V5P, names=FAMILY, memory=cap, keep_gathered=False
    )
    assert m.here is not None and m.here.winner == fastest
    held = {}
    for stage, name in enumerate(FAMILY):
        parts = sa.memory(sa.shard(MLP, activations="B=X"), mesh="X=64", sizes=V5P, zero=stage).parts
        held[name] = sum(parts[p] for p in ("params", "grads", "optimizer"))
    k = FAMILY.index(fastest)
    assert held[fastest] <= cap and all(held[n] > cap for n in FAMILY[:k])


@pytest.mark.parametrize("overlap", ["steady", "serial", "schedule"])
@pytest.mark.parametrize("stage", [1, 2])
def test_the_maps_cost_at_a_point_is_step_zero(stage, overlap, capsys):
    """The map's ZeRO-N cost at B, D, F on 64 v5p chips (one axis X, M_X = 1) equals ``shardalg step --zero N``
    of DP's program at the same sizes: the step prices each collective as the larger of its bandwidth and its
    latency (T_min a hop), the map its bandwidth only (the book's); here the bandwidth binds, so both are
    13.68 ms under steady (17.19 ms serial, 15.44 ms schedule), and with T_min = 0 the step's cost is the map's
    at every size."""
    from shardalg.cli import main

    name = f"ZeRO-{stage}"
    m = sa.strategy_map(MLP, mesh="X=64", hw="tpu-v5p", sizes=V5P, names=(name,), overlap=overlap)
    (s,) = m.strategies
    mapped = float(s.cost.total.subs(s.substitute).subs(m.values))
    r = sa.step_time(
        sa.shard(MLP, activations="B=X"), mesh="X=64", sizes=V5P, hw="tpu-v5p", zero=stage, overlap=overlap
    )
    assert round(r.seconds * 1e5) == {"steady": 1368, "serial": 1719, "schedule": 1544}[overlap]
    assert r.seconds == pytest.approx(mapped, rel=1e-12)
    t_min = next(x for x in r.total.free_symbols if x.name == "T_min")
    bandwidth_only = r.total.subs(t_min, 0).subs({k: v for k, v in r.values.items() if k != t_min})
    assert float(bandwidth_only) == pytest.approx(mapped, rel=1e-12)
    args = ["step", DP_TEXT, "--mesh", "X=64", "--sizes", "B=48000,D=8192,F=32768", "--hw", "tpu-v5p"]
    assert main([*args, "--zero", str(stage), "--overlap", overlap, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["step"]["seconds"] == pytest.approx(mapped, rel=1e-12)


def test_printed_json_and_latex_name_the_members():
    m = sa.strategy_map(
        MLP, mesh="X=64", hw="tpu-v5p", sizes=V5P, names=FAMILY, memory=3e9, keep_gathered=False
    )
    text, latex, data = str(m), m.latex(), m.to_json()
    assert "strategies: DP, ZeRO-1, ZeRO-2, FSDP" in text and "\n  ZeRO-1, comms X" in text
    assert r"\text{ZeRO-1" in latex
    assert [s["name"] for s in data["strategies"]] == list(FAMILY)
    assert data["fastest"]["candidate"] == "ZeRO-1"
    assert any("ZeRO-1: DP's sharding with the optimizer state sharded over X" in n for n in data["notes"])


def test_the_cli_takes_the_members_by_name(capsys):
    from shardalg.cli import main

    prog = "params W_in, W_out; In[B, D] * W_in[D, F] -> Tmp[B, F]; Tmp[B, F] * W_out[F, D] -> Out[B, D]"
    args = ["strategy-map", prog, "--mesh", "X=64", "--hw", "tpu-v5p", "--sizes", "B=48000,D=8192,F=32768"]
    assert (
        main(
            [
                *args,
                "--memory",
                "3e9",
                "--strategies",
                "DP,ZeRO-1,ZeRO-3",
                "--gather-again",
                "--format",
                "json",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in data["strategies"]] == ["DP", "ZeRO-1", "FSDP"]
    assert data["fastest"]["candidate"] == "ZeRO-1"
    assert main([*args, "--strategies", "DP,ZeRO-4"]) == 2
    err = capsys.readouterr().err
    assert (
        "unknown strategies ['ZeRO-4']" in err and "ZeRO-1, ZeRO-2, ZeRO-3" in err and "Traceback" not in err
    )


def test_the_default_map_has_no_members():
    with pytest.raises(UsageError, match="unknown strategies"):
        sa.strategy_map(MLP, names=("ZeRO",))
    m = sa.strategy_map(MLP, names=("DP", "FSDP"))
    assert [s.name for s in m.strategies] == ["DP", "FSDP", "FSDP kept"] and not any(
        "ZeRO" in n for n in m.notes
    )


def test_what_the_notes_say_is_read_off_the_costs_and_bytes():
    """Without optimizer state (SGD) ZeRO-1 holds what DP holds, and the note says so rather than a
    difference; ZeRO-2 still divides the gradients."""
    m = sa.strategy_map(MLP, names=("DP", "ZeRO-1", "ZeRO-2"), optimizer="sgd")
    said = {n.split(":")[0]: n for n in m.notes if n.startswith("ZeRO")}
    assert said["ZeRO-1"].endswith("it holds what DP holds (8*D*F bytes per device)")
    assert said["ZeRO-2"].endswith("it holds 4*D*F + 4*D*F/N bytes per device against DP's 8*D*F")


@pytest.mark.parametrize("passes", ["step", "backward"])
def test_a_recomputed_forward_is_in_the_step_and_not_in_the_backward_pass(passes):
    """Under remat 'block' the backward recomputes the forward: in a member's step as in DP's, and left out of
    the backward pass alone as DP's is (the costs stay equal: 10·B·D·F/(C·N) in the step's backward phase)."""
    m = sa.strategy_map(MLP, names=("DP", "ZeRO-1", "ZeRO-2"), passes=passes, remat="block")
    dp, z1, z2 = m.strategies
    assert sympy.simplify(z1.cost.total - dp.cost.total) == 0
    assert sympy.simplify(z2.cost.total - dp.cost.total) == 0
    assert (10 * B * D * F / (C * X) in dp.cost.total.atoms(sympy.Mul)) == (passes == "step")


def test_under_schedule_the_once_a_step_gather_is_not_hidden():
    """Under ``schedule`` (one step's dependencies) the parameters' AllGather follows their ReduceScatter with
    no compute left to hide it: a member costs more than DP where the backward's compute would hide DP's
    AllReduce, never less (both wholly comms-bound, or wholly compute-bound, they are equal), and its note
    gives both costs instead of calling them equal."""
    m = sa.strategy_map(MLP, names=("DP", "ZeRO-1"), overlap="schedule")
    dp, z1 = m.strategies
    gap = sympy.lambdify((B, D, F, C, W, M_X, X), z1.cost.total - dp.cost.total)
    points = [(64 * 10 ** (k / 4), 8192, 32768, 4.59e14, 1.8e11, 1, 64) for k in range(33)]  # B/N: 1 to 1e8
    gaps = [gap(*p) for p in points]
    assert all(g >= -1e-15 for g in gaps) and max(gaps) > 0
    (said,) = [n for n in m.notes if n.startswith("ZeRO-1")]
    assert "its cost equals DP's" not in said and f"against DP's {sympy.sstr(dp.cost.total)}" in said
