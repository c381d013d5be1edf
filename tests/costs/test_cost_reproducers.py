"""Issue 13's cost reproducers, each a clear answer or a clear error (API and CLI: exit 0/1/2, no traceback).

- a statement whose operands do not meet is priced by its cheapest plan, and says so;
- ``substitute`` goes to a fixed point: nothing substituted is left;
- an optimum over a symbol the cost does not depend on is a UsageError, not ``BooleanFalse has no rhs``;
- comparing equal costs (the same program twice, or a mesh of one device) answers "neither is faster".
"""

from __future__ import annotations

import json

import pytest
import sympy

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.symbols import axis_size, device_count, dim_size
from shardalg.cli import main
from shardalg.costs.derive import compare, compute_bound, optimum
from shardalg.costs.plancost import cost, plan_cost
from shardalg.costs.solve import substitute
from shardalg.errors import UsageError
from shardalg.notation.parse import parse
from shardalg.planning.planner import plans

NOT_MEETING = "A[I_X, J] · B[J_X, K] -> C[I_X, K]"
X, Y, Z, N = axis_size("X"), axis_size("Y"), axis_size("Z"), device_count()


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---- operands that do not meet ----------------------------------------------------------------------------
def test_a_statement_whose_operands_do_not_meet_costs_its_cheapest_plan():
    pc = cost(NOT_MEETING, Mesh.parse("X=4"))
    best = plans(NOT_MEETING, Mesh.parse("X=4"))[0]
    assert pc.total == plan_cost(best, "X=4").total and pc.comms != 0
    assert len(pc.notes) == 1 and "do not meet" in pc.notes[0] and "cheapest plan" in pc.notes[0]
    assert str(pc).startswith("note: ")


def test_with_a_chip_the_cheapest_plan_is_the_fastest():
    sizes, hw = {"I": 4096, "J": 8192, "K": 1024}, "tpu-v5p"
    pc = cost(NOT_MEETING, Mesh.parse("X=4"), sizes, hw=hw)
    times = [
        plan_cost(p, Mesh.parse("X=4"), sizes, hw=hw).seconds
        for p in plans(NOT_MEETING, Mesh.parse("X=4"), sizes)
    ]
    assert pc.seconds == pytest.approx(min(times))
    assert "by seconds on tpu-v5p under overlap schedule" in pc.notes[0]


def test_a_product_whose_local_result_is_not_the_one_written_is_planned():
    pc = cost("A[I, J_X] · B[J_X, K] -> C[I, K]", Mesh.parse("X=4"))  # the local product is C{U_X}
    assert [s.step.op.value for s in pc.steps] == ["Einsum", "AllReduce"]
    assert "the local product is C[I, K]{U_X}, not C[I, K]" in pc.notes[0]
    assert cost("A[I, J_X] ·_LOCAL B[J_X, K] -> C[I, K]{U_X}", Mesh.parse("X=4")).notes == ()


def test_cli_says_it_planned(capsys):
    sizes = ("--sizes", "I=4096,J=1024,K=1024")  # they decide the cheapest plan (without them, cost asks)
    code, out, err = run(capsys, "cost", NOT_MEETING, "--mesh", "X=4", *sizes)
    assert code == 0 and out.startswith("note: ") and "AllGather_X(B" in out
    assert err.startswith("shardalg: note: ") and "cheapest plan" in err
    code, out, err = run(capsys, "cost", NOT_MEETING, "--mesh", "X=4", *sizes, "--json")
    data = json.loads(out)
    assert code == 0 and data["notes"] and data["comms"]["formula"] != "0" and "cheapest plan" in err


# ---- substitution to a fixed point ----------------------------------------------------------------------
FSDP_TP = (
    "AllGather_X(W_in[D_X, F_Y]) -> W_in[D, F_Y]; AllGather_Y(In[B_X, D_Y]) -> In[B_X, D]; "
    "In[B_X, D] · W_in[D, F_Y] -> Tmp[B_X, F_Y]"
)
TP = "AllGather_Y(In[B, D_Y]) -> In[B, D]; In[B, D] · W_in[D, F_Y] -> Tmp[B, F_Y]"


def test_substitute_goes_to_a_fixed_point():
    mapping = {Y: N / (X * Z), X: sympy.sqrt(N / Z)}
    d = compare(parse(FSDP_TP), parse(TP), "B", mesh=Mesh(X=None, Y=None), substitute=mapping)
    for label, e in d.steps:
        if label not in ("T_a", "T_b") and label != "a faster":
            continue
        assert not (e.free_symbols & {X, Y}), (label, e)
    assert not (d.result.free_symbols & {X, Y})
    b = compute_bound(parse(FSDP_TP), "B", mesh=Mesh(X=None, Y=None), substitute=mapping)
    assert not (b.result.free_symbols & {X, Y})


def test_a_circular_substitution_is_refused():
    with pytest.raises(UsageError, match="circular"):
        substitute(X * Y, {X: Y, Y: X})


# ---- an optimum over a symbol the cost does not depend on ---------------------------------------------------
def test_optimum_over_an_absent_symbol_is_a_usage_error(capsys):
    pc = cost("AllReduce_X(Z[B, F]{U_X}) -> Z[B, F]", Mesh(X=None), latency=False)
    with pytest.raises(UsageError, match="does not depend on D"):
        optimum(pc, over="D")
    code, out, err = run(
        capsys, "optimum", "AllReduce_X(Z[B, F]{U_X}) -> Z[B, F]", "--mesh", "X", "--over", "D"
    )
    assert code == 2 and out == "" and "does not depend on D" in err and "Traceback" not in err


# ---- equal costs ----------------------------------------------------------------------------------------
LOCAL = "X[B, D_X] ·_LOCAL Y[D_X, F] -> Z[B, F]{U_X}; AllReduce_X(Z[B, F]{U_X}) -> Z[B, F]"
GATHER = "X[B, D] · AllGather_X(Y[D_X, F]) -> Z[B, F]"


@pytest.mark.parametrize("regime", ["comms", "compute", "total"])
def test_comparing_a_program_with_itself_says_neither_is_faster(regime):
    d = compare(parse(LOCAL), parse(LOCAL), "D", regime, mesh=Mesh(X=4))
    if regime == "compute":  # a at its total against b at its compute: not equal, solved as usual
        assert d.result is not None
        return
    assert d.result is sympy.false
    assert d.steps[-1][0] == "neither is faster: equal costs"


def test_comparing_on_one_device_says_neither_is_faster(capsys):
    d = compare(parse(LOCAL), parse(GATHER), "D", mesh=Mesh(X=1))
    assert d.result is sympy.false and "neither is faster" in str(d)
    code, out, err = run(capsys, "compare", LOCAL, GATHER, "--mesh", "X=1", "--solve-for", "D")
    assert code == 0 and "neither is faster: equal costs" in out and err == ""
    code, out, err = run(capsys, "compare", LOCAL, LOCAL, "--mesh", "X=4", "--json")
    assert code == 0 and json.loads(out)["condition"] == "False"


def test_a_derivation_names_its_policy():
    d = compare(parse(LOCAL), parse(GATHER), "D", mesh=Mesh(X=4))
    assert d.title.endswith("overlap steady)") and d.to_json()["overlap"] == "steady"
    s = compare(parse(LOCAL), parse(GATHER), "D", mesh=Mesh(X=4), overlap="schedule")
    assert s.title.endswith("overlap schedule)") and s.result == (dim_size("D") > 2 * dim_size("B"))
    with pytest.raises(UsageError, match="this regime compares under overlap steady"):
        compare(parse(LOCAL), parse(GATHER), "D", "overlap", mesh=Mesh(X=4), overlap="serial")
