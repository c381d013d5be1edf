"""A ranking over symbols (shardalg.planning.symbolic): no size is made up to choose a plan. With unknown sizes
the planner says which plans are the cheapest where (exact intervals of one size) or asks for the sizes; the
pieces are checked against the numeric ranking at sizes inside each of them."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import shardalg as sa
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.symbols import dim_size, quantity
from shardalg.algebra.traffic import Bytes, Sizes
from shardalg.cli import main
from shardalg.errors import IndivisibleDim, UsageError
from shardalg.planning.redistribute import plan_bytes
from shardalg.planning.symbolic import NeedsSizes, beaten_everywhere, choose, strict

MESH = Mesh.parse("X=2,Y=2,Z=2")
GRAD = "Tmp[B_XYZ, F] · dOut[B_XYZ, D] -> dW[F, D]"  # data parallelism's weight gradient on three axes
MLP = "In[B_XYZ, D] · W_in[D, F] -> Tmp[B_XYZ, F]; Tmp[B_XYZ, F] · W_out[F, D] -> Out[B_XYZ, D]"
DF = {"D": 4096, "F": 4096}
B = dim_size("B")


def _signature(p) -> list[str]:
    return [f"{s.op.value}_{''.join(s.axes)}" for s in p.collectives]


def test_one_unknown_size_gives_exact_pieces_and_the_large_batch_piece_all_reduces():
    with strict():
        found = sa.plans(GRAD, MESH, DF)
    c = found.choice
    assert c.piecewise and c.symbols == ("B",) and not c.decided
    assert [(p.low, p.high) for p in c.contenders] == [
        (None, sympy.Rational(32768, 9)),
        (sympy.Rational(32768, 9), sympy.Rational(32768, 5)),
        (sympy.Rational(32768, 5), None),
    ]
    assert _signature(c.contenders[-1].plan) == ["AllReduce_XYZ"]
    assert _signature(c.contenders[0].plan) == ["AllGather_XYZ", "AllGather_XYZ"]
    assert c.contenders[-1].condition("B") == "B > 32768/5"
    assert found[: len(c.contenders)] == [p.plan for p in c.contenders]  # the contenders lead the list


@pytest.mark.parametrize("b", [512, 3640, 3648, 6552, 6560, 65536])
def test_each_piece_is_the_numeric_rankings_choice_inside_it(b):
    with strict():
        choice = sa.plans(GRAD, MESH, DF).choice
    inside = [p for p in choice.contenders if (p.low is None or p.low < b) and (p.high is None or b < p.high)]
    numeric = sa.plans(GRAD, MESH, {**DF, "B": b})
    assert len(inside) == 1 and inside[0].plan == numeric[0]


def test_the_backward_asks_for_sizes_when_three_decide(capsys):
    assert main(["backward", MLP, "--mesh", "X=2,Y=2,Z=2"]) == 2
    err = capsys.readouterr().err
    assert "the cheapest plan depends on sizes not given (B, D, F); no size is assumed [needs-sizes]" in err
    assert (
        "AllReduce_XYZ(dW_out) (4*D*F bytes)" in err
        and "fix: give B, D, F (--sizes B=...,D=...,F=...)" in err
    )
    with pytest.raises(NeedsSizes) as caught, strict():
        sa.backward(MLP, MESH)
    assert caught.value.choice.symbols == ("B", "D", "F")


def test_the_backward_is_piecewise_in_b_and_its_large_batch_piece_all_reduces_the_gradients(capsys):
    assert main(["backward", MLP, "--mesh", "X=2,Y=2,Z=2", "--sizes", "D=4096,F=4096", "--json"]) == 0
    pieces = json.loads(capsys.readouterr().out)["pieces"]
    assert [p["where"] for p in pieces] == ["B < 32768/9", "32768/9 < B < 32768/5", "B > 32768/5"]
    last = [(c["op"], c["axes"]) for c in pieces[-1]["collectives"]]
    assert last == [["AllReduce", ["X", "Y", "Z"]]] * 2 or last == [("AllReduce", ["X", "Y", "Z"])] * 2
    numeric = sa.backward(MLP, MESH, {**DF, "B": 65536})  # a real batch inside the piece: the same plan
    assert [c for c in numeric.collectives] == [("AllReduce", ("X", "Y", "Z"))] * 2


def test_the_step_gives_the_compute_bound_threshold_on_b_as_a_condition(capsys):
    argv = ["step", "-", "--mesh", "X=2,Y=2,Z=2", "--sizes", "D=4096,F=4096", "--hw", "tpu-v5p", "--json"]
    program = "params W_in, W_out\n" + MLP.replace("; ", "\n")
    import io
    import sys

    sys.stdin = io.StringIO(program)
    try:
        assert main(argv) == 0
    finally:
        sys.stdin = sys.__stdin__
    pieces = json.loads(capsys.readouterr().out)["pieces"]
    big = pieces[-1]
    assert big["where"] == "B > 32768/5"
    got = sympy.sympify(
        big["compute_bound"]["condition"], locals={"B": B, "C": quantity("C"), "W_ici": quantity("W_ici")}
    )
    # B/N > C/(W·M) with N = 8, M = 3 links, times 2·(N − 1)/N: axes of 2 are lines on v5p (no wraparound), so
    # each device receives 7/8 of a gradient over three one-way links of W_ici/2 (the book's V/W is a ring's)
    assert got == (B > 14 * quantity("C") / (3 * quantity("W_ici")))
    # on numbers: above the threshold every phase's compute outlasts its communication, just below it not
    chip = sa.hardware.get("tpu-v5p")
    values = chip.values()
    threshold = 14 * values[quantity("C")] / (3 * values[quantity("W_ici")])
    assert 32768 / 5 < threshold
    for b in (6560, int(threshold) // 8 * 8, int(threshold) // 8 * 8 + 8, 2 * int(threshold) // 8 * 8):
        r = sa.step_time(program, "X=2,Y=2,Z=2", {**DF, "B": b}, hw="tpu-v5p")
        phases = r.parts[0].cost.phases
        bound = all(p.cost.evaluate(p.cost.compute) > p.cost.evaluate(p.cost.comms) for p in phases)
        assert bound == (b > threshold) == bool(got.subs({B: b, **values}))


def test_plan_text_and_json_say_which_plans_are_the_cheapest_where_or_which_sizes_they_need(capsys):
    assert main(["plan", GRAD, "--mesh", "X=2,Y=2,Z=2", "--sizes", "D=4096,F=4096"]) == 0
    out = capsys.readouterr().out
    assert "# the cheapest plan depends on B: each plan below is the cheapest where it says" in out
    assert (
        "# plan 3 of 15 (the cheapest where B > 32768/5): 67108864 bytes communicated; AllReduce_XYZ(dW)"
        in out
    )
    assert main(["plan", GRAD, "--mesh", "X=2,Y=2,Z=2", "--json"]) == 0
    choice = json.loads(capsys.readouterr().out)["choice"]
    assert choice["decided"] is False and choice["needs"] == ["B", "D", "F"]
    assert {"plan": "AllReduce_XYZ(dW)", "bytes": "4*D*F", "where": None} in choice["pieces"]
    assert main(["plan", GRAD, "--mesh", "X=2,Y=2,Z=2", "--sizes", "B=8192,D=4096,F=4096", "--json"]) == 0
    assert "choice" not in json.loads(capsys.readouterr().out)  # every size given: a number decides


def test_a_choice_every_size_agrees_on_is_decided_without_sizes():
    with strict():
        found = sa.plans("A[I_X, J] -> A[I, J_X]", "X=4")
    assert found.choice.decided and _signature(found[0]) == ["AllToAll_X"]


def test_cost_compare_and_optimum_ask_for_sizes_instead_of_choosing(capsys):
    fsdp = "In[B_X, D] · W[D_X, F] -> Out[B_X, F]"
    assert main(["cost", fsdp, "--mesh", "X=4"]) == 2
    assert (
        "the plan of In[B_X, D] * W[D_X, F] -> Out[B_X, F]: the cheapest plan depends on sizes not given"
        in (capsys.readouterr().err)
    )
    assert main(["cost", fsdp, "--mesh", "X=4", "--sizes", "B=65536,D=1024,F=4096"]) == 0


def test_the_library_outside_strict_keeps_the_planners_first_plan_and_says_it_was_not_decided():
    found = sa.plans("In[B_X, D] · W[D_X, F] -> Out[B_X, F]", "X=4")
    assert not found.choice.decided and found.choice.symbols == ("B", "D", "F")


_poly = st.dictionaries(
    st.sampled_from([(), ((("dim", "B"), 1),), ((("dim", "D"), 1),), ((("dim", "B"), 1), (("dim", "D"), 1))]),
    st.integers(1, 9).map(Fraction),
    max_size=4,
)


@settings(max_examples=60, deadline=None)
@given(_poly, _poly, st.integers(1, 10**6), st.integers(1, 10**6))
def test_beaten_everywhere_means_no_fewer_at_any_size(a, b, x, y):
    pa, pb = Bytes._from(dict(a)), Bytes._from(dict(b))
    if beaten_everywhere(pa, pb):
        at = {dim_size("B"): x, dim_size("D"): y}
        assert pa.sympy().subs(at) > pb.sympy().subs(at)


@settings(max_examples=40, deadline=None)
@given(st.lists(_poly, min_size=1, max_size=4), st.integers(1, 10**5))
def test_the_pieces_in_one_size_hold_the_least_cost_at_every_size(polys, b):
    costs = [Bytes._from({m: c for m, c in p.items() if all(f == ("dim", "B") for f, _ in m)}) for p in polys]
    plans = [sa.plan(f"A{i}[I_X] -> A{i}[I]", "X=2") for i in range(len(costs))]
    by = {id(p): c for p, c in zip(plans, costs, strict=True)}
    _, choice = choose(plans, lambda p: by[id(p)])
    if choice is None:
        return
    values = [c.sympy().subs(B, b) for c in costs]
    inside = [p for p in choice.contenders if (p.low is None or p.low < b) and (p.high is None or b < p.high)]
    if choice.decided:
        inside = list(choice.contenders)
    if len(inside) == 1:  # b on a crossing belongs to no open interval
        assert inside[0].cost.sympy().subs(B, b) == min(values)


def test_sizes_decide_traffic_and_the_planner_sees_them():
    # the same question with every size bound: the planner's numeric ranking answers, no choice object
    found = sa.plans(GRAD, MESH, {**DF, "B": 65536})
    assert (
        found.choice is None
        and plan_bytes(found[0], MESH, Sizes({**DF, "B": 65536})).number == 4 * 4096 * 4096
    )


def test_factors_common_to_the_costs_cancel_before_deciding_what_to_ask():
    # 2*B*D against 4*B: B is common to both, so only D decides (the pieces are exact intervals of D)
    with strict():
        choice = sa.plans("sum_D(X[B, D_X]) -> S[B]", "X=4").choice
    assert choice.symbols == ("D",) and choice.piecewise
    assert [(p.low, p.high) for p in choice.contenders] == [(None, 2), (2, None)]
    assert [_signature(p.plan) for p in choice.contenders] == [["AllGather_X"], ["AllReduce_X"]]
    for d in (4, 8, 4096):  # D > 2 at every legal D (a multiple of 4): the AllReduce, whatever B
        for b in (1, 64, 65536):
            numeric = sa.plans("sum_D(X[B, D_X]) -> S[B]", "X=4", {"B": b, "D": d})
            assert numeric[0] == choice.contenders[1].plan
    with strict(), pytest.raises(NeedsSizes) as err:  # with B given and D not, it asks for D alone
        sa.plan("sum_D(X[B, D_X]) -> S[B]", "X=4", {"B": 64})
    assert err.value.choice.symbols == ("D",)


def test_the_python_api_makes_up_no_size():
    # sa.plan, sa.backward and sa.cost raise NeedsSizes where sizes not given decide
    fsdp = "In[B_X, D] · W[D_X, F] -> Out[B_X, F]"
    for call in (
        lambda: sa.plan(fsdp, "X=4"),
        lambda: sa.backward(fsdp, "X=4"),
        lambda: sa.cost(fsdp, "X=4"),
    ):
        with pytest.raises(NeedsSizes) as err:
            call()
        assert err.value.choice.symbols == ("B", "D", "F")
    sizes = {"B": 8192, "D": 4096, "F": 16384}  # B > 4*D*F/(D + 4*F) = 3855.06: gathering W is cheaper
    assert list(sa.backward(fsdp, "X=4", sizes).collectives) == [
        ("AllGather", ("X",)),
        ("ReduceScatter", ("X",)),
    ]
    assert sa.cost(fsdp, "X=4", sizes).total == sa.cost(sa.plan(fsdp, "X=4", sizes), "X=4", sizes).total


def test_memory_asks_for_the_size_that_decides_a_gradient_plan(capsys):
    mlp = (
        "params W_in, W_out; In[B_X, D] * W_in[D, F] -> Tmp[B_X, F]; Tmp[B_X, F] * W_out[F, D] -> Out[B_X, D]"
    )
    argv = ["memory", mlp, "--mesh", "X=8", "--hw", "tpu-v5p"]
    assert main([*argv, "--sizes", "D=4096,F=16384"]) == 2
    err = capsys.readouterr().err
    assert (
        "[needs-sizes]" in err
        and "give B (--sizes B=...)" in err
        and "B > 32768/5: AllReduce_X(dW_out)" in err
    )
    assert main([*argv, "--sizes", "B=8192,D=4096,F=16384"]) == 0
    assert "activations" in capsys.readouterr().out


FSDP = "params W\nIn[B_X, D] * W[D_X, F] -> Out[B_X, F]"  # gathers W only above B = 6144 at D=4096, F=16384


def test_memory_and_step_time_from_python_make_up_no_size():
    # as the CLI's memory and step: NeedsSizes where a size not given decides a plan; piecewise per interval
    for call in (sa.memory, sa.step_time):
        with pytest.raises(NeedsSizes) as err:
            call(FSDP, "X=4", "D=4096,F=16384", hw="tpu-v5p")
        assert err.value.choice.symbols == ("B",) and err.value.choice.piecewise
    program = "params W_in, W_out\n" + MLP.replace("; ", "\n")
    pieces = sa.piecewise(lambda: sa.step_time(program, "X=2,Y=2,Z=2", DF, hw="tpu-v5p"))
    assert [w for w, _ in pieces] == ["B < 32768/9", "32768/9 < B < 32768/5", "B > 32768/5"]
    assert pieces[-1][1].to_json()["compute_bound"]["condition"] == "B > 14*C/(3*W_ici)"  # as `shardalg step`


def test_the_search_needs_every_size_a_statement_reads():
    # S is read by an activation only (not a parameter's dim, not a batch dim): it was ranked as a symbol
    program = "params W\nsum_S(In[B, S, D]) -> M[B, D]\nM[B, D] * W[D, F] -> Out[B, F]"
    with pytest.raises(UsageError, match="a numeric search needs every size: S unbound"):
        sa.search(program, "X=4", {"B": 64, "D": 4096, "F": 16384}, hw="tpu-v5p")


@pytest.mark.parametrize(("hbm", "want"), [(3e8, 6140), (1e9, 324440)])
def test_fit_solves_per_interval_of_the_size_it_solves_for_and_memory_agrees_at_the_boundary(
    capsys, hbm, want
):
    # the memory is one formula below B = 6144 (W stays sharded) and another above (W gathered): the largest
    # B that fits is read from each interval's own formula, not from one plan chosen by a made-up B
    chip = f"base=tpu-v5p,hbm={hbm:.0e}"
    argv = ["fit", FSDP, "--mesh", "X=4", "--hw", chip, "--sizes", "D=4096,F=16384", "--solve-for", "B"]
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert int(data["result"]) == want
    labels = [s["label"] for s in data["steps"]]
    assert "where B < 6144: bytes per device" in labels and "where B > 6144: bytes per device" in labels
    for b, fits in ((want, True), (want + 4, False), (want + 1, None)):  # B_X on X=4: a multiple of 4
        at = {"D": 4096, "F": 16384, "B": b}
        try:
            got = sa.memory(FSDP, "X=4", at, hw=chip).fits
        except IndivisibleDim:
            got = None  # want + 1 is no legal batch
        assert got is fits
    report = sa.memory(FSDP, "X=4", {"D": 4096, "F": 16384, "B": 64}, hw=chip)
    assert int(sa.largest(report, "B").result) == want  # the Python API: the same answer


def test_compare_from_python_makes_up_no_size():
    fsdp, dp = "In[B_X, D] · W[D_X, F] -> Out[B_X, F]", "In[B_X, D] · W[D, F] -> Out[B_X, F]"
    with pytest.raises(NeedsSizes) as err:  # FSDP's plan depends on B, D and F: as `shardalg compare` asks
        sa.compare(dp, fsdp, mesh="X=4")
    assert err.value.choice.symbols == ("B", "D", "F")
    assert sa.compare(dp, fsdp, mesh="X=4", sizes={"B": 65536, "D": 1024, "F": 4096}).result is sympy.true


BOUND = "In[B, D_Y] · W[D, F_Y] -> Out[B, F]"  # three plans, none the cheapest at every size


def test_the_compute_bound_asks_for_sizes_as_cost_and_compare_do(capsys):
    assert main(["bound", BOUND, "--mesh", "Y"]) == 2
    err = capsys.readouterr().err
    assert "[needs-sizes]" in err and "no size is assumed" in err
    with pytest.raises(NeedsSizes):
        sa.compute_bound(BOUND, mesh="Y")
    # with the sizes that decide the plan, a condition: the same from the CLI and from Python
    assert main(["bound", BOUND, "--mesh", "Y=4", "--sizes", "B=8192,D=4096,F=16384", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["condition"] == str(
        sa.compute_bound(BOUND, mesh="Y=4", sizes={"B": 8192, "D": 4096, "F": 16384}).result
    )
