"""Time is a schedule (DESIGN.md section 5): a step waits for its inputs and its resources; ``steady`` is the
book's layer-level view; ``serial`` adds everything. Each identity on symbols, each law on random plans."""

from __future__ import annotations

import json

import pytest
import sympy
from hypothesis import given
from hypothesis import strategies as st

from shardalg import plans as ranked
from shardalg.algebra.mesh import Mesh
from shardalg.cli import main
from shardalg.costs.costmodel import CostModel
from shardalg.costs.plancost import cost, fast_seconds, plan_cost
from shardalg.costs.schedule import OverlapPolicy
from shardalg.costs.stepcost import Options
from shardalg.errors import NoPlan, UnreachableUnreduced, UsageError
from shardalg.notation.parse import parse
from shardalg.notation.syntax import Arrow, Dim, Op, Product, Tensor
from shardalg.planning.backward import backward
from shardalg.planning.planner import plans

MESH = Mesh(X=2, Y=4)
BW = {"latency": False}


def durations(pc) -> list[sympy.Expr]:
    return [s.duration.sympy() for s in pc.steps]


# ---- the chain: a gather, the product, an AllReduce -------------------------------------------------------
def chain_plan():
    """The planner's plan of A[I_X, J_Y] · B[J_Y, K] -> C[I, K] that gathers A over X, multiplies, and
    AllReduces C over Y: each step needs the one before."""
    found = {p.signature: p for p in plans("A[I_X, J_Y] · B[J_Y, K] -> C[I, K]", MESH)}
    return found[(("AllGather", ("X",)), ("Einsum", ()), ("AllReduce", ("Y",)))]


def test_a_dependency_chain_adds_up():
    pc = plan_cost(chain_plan(), MESH, **BW)
    gather, product, reduce = durations(pc)
    assert sympy.simplify(pc.total - (gather + product + reduce)) == 0
    assert pc.overlap == "schedule"
    assert pc.comms == gather + reduce  # communication alone: still a chain through the product


def test_the_chain_on_numbers_and_its_slots():
    sizes = {"I": 256, "J": 512, "K": 256}
    pc = plan_cost(chain_plan(), MESH, sizes, hw="tpu-v5e")
    ends = pc.schedule.numbers(pc.values)
    assert [a for a, _ in ends] == pytest.approx(
        [0.0, ends[0][1], ends[1][1]]
    )  # each starts when the last ends
    assert ends[-1][1] == pytest.approx(pc.seconds)
    assert pc.seconds == pytest.approx(sum(pc.evaluate(d) for d in (s.duration for s in pc.steps)))


def test_steady_and_serial_of_the_chain():
    pc = plan_cost(chain_plan(), MESH, **BW)
    gather, product, reduce = durations(pc)
    assert pc.under("steady").total == sympy.Max(product, gather, reduce)  # X and Y and compute overlap
    assert sympy.simplify(pc.under("serial").total - (gather + product + reduce)) == 0


# ---- independent steps overlap, dependent ones and shared axes do not ---------------------------------------
TWO_GATHERS = """
AllGather_X(A[I_X, J]) -> A[I, J]
AllGather_Y(B[J, K_Y]) -> B[J, K]
A[I, J] · B[J, K] -> C[I, K]
"""


def test_two_independent_gathers_on_different_axes_overlap():
    pc = cost(TWO_GATHERS, MESH, **BW)
    ga, gb, product = durations(pc)
    assert pc.total == sympy.Max(ga, gb) + product
    assert pc.comms == sympy.Max(ga, gb)


def test_two_gathers_on_one_axis_take_turns():
    pc = cost(TWO_GATHERS.replace("K_Y", "K_X").replace("AllGather_Y", "AllGather_X"), MESH, **BW)
    ga, gb, product = durations(pc)
    assert sympy.simplify(pc.total - (ga + gb + product)) == 0


def test_compute_overlaps_an_independent_collective():
    program = """
    A[I, J] · B[J, K] -> C[I, K]
    AllGather_X(D[I_X, J]) -> D[I, J]
    """
    pc = cost(program, MESH, **BW)
    product, gather = durations(pc)
    assert pc.total == sympy.Max(product, gather)


def test_a_collective_on_two_axes_waits_for_both():
    program = """
    AllGather_X(A[I_X, J]) -> A[I, J]
    AllGather_Y(B[J, K_Y]) -> B[J, K]
    AllGather_XY(D[I_XY, J]) -> D[I, J]
    """
    pc = cost(program, MESH, **BW)
    ga, gb, gd = durations(pc)
    assert pc.total == sympy.Max(ga, gb) + gd


def test_the_backward_program_is_scheduled_too():
    # DP's backward: dIn and dW on the compute one after the other, the AllReduce of dW after dW only
    mesh = Mesh(X=4)
    bw = backward(parse("In[B_X, D] · W[D, F] -> Out[B_X, F]"), mesh)
    pc = plan_cost(bw.plan(), mesh, **BW)
    assert [s.op for s in bw.plan().steps] == [Op.EINSUM, Op.EINSUM, Op.ALL_REDUCE]
    d_in, d_w, reduce = durations(pc)
    assert sympy.simplify(pc.total - (d_in + d_w + reduce)) == 0
    assert pc.under("steady").total == sympy.Max(d_in + d_w, reduce)
    # the same steps with dW first: the AllReduce overlaps dIn
    first = plan_cost(
        bw.plan().__class__(bw.plan().inputs, tuple(bw.plan().steps[i] for i in (1, 2, 0)), bw.plan().output),
        mesh,
        **BW,
    )
    assert first.total == sympy.Max(d_w + d_in, d_w + reduce)


# ---- the policy is one parameter ---------------------------------------------------------------------------
def test_policies_and_their_old_spellings():
    assert OverlapPolicy.of(None) is OverlapPolicy.SCHEDULE
    assert OverlapPolicy.of(True) is OverlapPolicy.STEADY and OverlapPolicy.of(False) is OverlapPolicy.SERIAL
    assert OverlapPolicy.of("steady") is OverlapPolicy.STEADY
    assert OverlapPolicy.of(None, OverlapPolicy.SERIAL) is OverlapPolicy.SERIAL
    with pytest.raises(
        UsageError, match="the overlap policy is one of schedule, steady, serial, not 'sometimes'"
    ):
        OverlapPolicy.of("sometimes")
    with pytest.raises(UsageError, match="not 1"):  # a number is no policy, though 1 == True
        OverlapPolicy.of(1)
    with pytest.raises(UsageError):
        cost(TWO_GATHERS, MESH, overlap="parallel")
    old = cost(TWO_GATHERS, MESH, overlap=True)
    assert old.overlap == "steady" and old.total == cost(TWO_GATHERS, MESH, overlap="steady").total


def test_schedule_json_and_gantt():
    pc = cost(TWO_GATHERS, MESH, {"I": 512, "J": 1024, "K": 512}, hw="tpu-v5e")
    data = pc.to_json()
    assert data["overlap"] == "schedule" and data["exact"] is False and data["ring"] == "bi"
    slots = data["schedule"]["slots"]
    assert [s["lanes"] for s in slots] == [["X"], ["Y"], ["compute"]]
    assert slots[2]["start_seconds"] == pytest.approx(max(slots[0]["end_seconds"], slots[1]["end_seconds"]))
    assert (
        data["schedule"]["seconds"]
        == pytest.approx(slots[2]["end_seconds"])
        == pytest.approx(data["seconds"])
    )
    text = pc.gantt()
    assert text.splitlines()[0].startswith("schedule (overlap schedule): ")
    assert len(text.splitlines()) == 4 and "|" in text
    symbolic = cost(TWO_GATHERS, MESH).gantt()
    assert "start Max(" in symbolic and "|" not in symbolic


def test_steady_slots_run_each_lane_back_to_back():
    pc = cost(TWO_GATHERS, MESH, **BW, overlap="steady")
    lanes = [(s.lane_names, s.start.sympy()) for s in pc.schedule.slots]
    assert lanes == [(("X",), 0), (("Y",), 0), (("compute",), 0)]


def test_cli_cost_overlap_and_schedule(capsys):
    code = main(
        [
            "cost",
            TWO_GATHERS,
            "--mesh",
            "X=2,Y=4",
            "--sizes",
            "I=512,J=1024,K=512",
            "--hw",
            "tpu-v5e",
            "--schedule",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "overlap: schedule" in out and "schedule (overlap schedule):" in out
    code = main(["cost", TWO_GATHERS, "--mesh", "X=2,Y=4", "--overlap", "steady", "--json"])
    assert code == 0 and json.loads(capsys.readouterr().out)["overlap"] == "steady"
    code = main(["cost", TWO_GATHERS, "--mesh", "X=2,Y=4", "--overlap", "steady", "--serial"])
    assert code == 2 and "--serial is --overlap serial" in capsys.readouterr().err


# ---- ranking by seconds uses the schedule -----------------------------------------------------------------
def test_ranking_by_the_schedule_beats_ranking_by_the_steady_view():
    # small sizes on v5e: the steady view prefers gathering both operands over Y and C over X, which runs
    # as a chain; the schedule ranks it behind a ReduceScatter then AllGather of C
    sizes, stmt = {"I": 512, "J": 256, "K": 512}, "A[I_X, J_Y] · B[J_Y, K] -> C[I, K]"
    by_steady = ranked(stmt, MESH, sizes, hw="tpu-v5e", overlap="steady")[0]
    by_schedule = ranked(stmt, MESH, sizes, hw="tpu-v5e")[0]
    time = [plan_cost(p, MESH, sizes, hw="tpu-v5e").seconds for p in (by_steady, by_schedule)]
    assert time[1] < time[0]
    assert plan_cost(by_steady, MESH, sizes, hw="tpu-v5e", overlap="steady").seconds < time[0]


# ---- laws on random plans ---------------------------------------------------------------------------------
AXES, DIMS = ("X", "Y", "Z"), ("I", "J", "K", "L")


@st.composite
def einsum_plans(draw):
    sizes = draw(st.lists(st.sampled_from([1, 2, 4]), min_size=1, max_size=3))
    mesh = Mesh({a: s for a, s in zip(AXES, sizes, strict=False)})
    left = draw(st.lists(st.sampled_from(DIMS), min_size=1, max_size=3, unique=True))
    right = draw(st.lists(st.sampled_from(DIMS), min_size=1, max_size=3, unique=True))

    def shard(labels):
        dims: dict[str, list[str]] = {d: [] for d in labels}
        for a in mesh.names:
            where = draw(st.sampled_from([*labels, None]))
            if where is not None:
                dims[where].append(a)
        return Tensor(None, tuple(Dim(d, tuple(dims[d])) for d in labels))

    a, b = shard(left), shard(right)
    stmt = Product(a.replace(name="A"), b.replace(name="B"))
    try:
        found = plans(stmt, mesh)
    except (NoPlan, UnreachableUnreduced):
        found = []
    if not found:
        return mesh, None, {}
    values = {d: draw(st.sampled_from([128, 1024, 8192])) for d in DIMS}
    return mesh, found[draw(st.integers(0, len(found) - 1))], values


@given(einsum_plans(), st.sampled_from(["tpu-v5e", "tpu-v5p", "h100"]), st.booleans())
def test_serial_is_at_least_schedule_is_at_least_steady(case, hw, latency):
    mesh, p, sizes = case
    if p is None:
        return
    pc = plan_cost(p, mesh, sizes, hw=hw, latency=latency)
    serial, schedule, steady = (pc.under(o).seconds for o in ("serial", "schedule", "steady"))
    assert serial >= schedule * (1 - 1e-12) and schedule >= steady * (1 - 1e-12)
    comms = [pc.under(o).evaluate(pc.under(o).light("comms")) for o in ("serial", "schedule", "steady")]
    assert comms[0] >= comms[1] * (1 - 1e-12) and comms[1] >= comms[2] * (1 - 1e-12)


@given(
    einsum_plans(), st.sampled_from(["schedule", "steady", "serial"]), st.sampled_from(["tpu-v5e", "h100"])
)
def test_the_ranking_numbers_equal_the_formula(case, policy, hw):
    mesh, p, sizes = case
    if p is None:
        return
    pc = plan_cost(p, mesh, sizes, hw=hw, overlap=policy)
    fast = fast_seconds(Options.of(CostModel.of(hw), mesh, sizes), policy)(p)
    assert fast == pytest.approx(pc.seconds, rel=1e-12, abs=1e-18)
    assert float(pc.total.subs(pc.values)) == pytest.approx(pc.seconds, rel=1e-9, abs=1e-18)


@given(einsum_plans())
def test_every_symbolic_schedule_evaluates_to_its_numbers(case):
    mesh, p, sizes = case
    if p is None:
        return
    pc = plan_cost(p, mesh, sizes, hw="tpu-v5e")
    numbers = pc.schedule.numbers(pc.values)
    assert numbers is not None
    for slot, (a, b) in zip(pc.schedule.slots, numbers, strict=True):
        assert b == pytest.approx(a + pc.evaluate(pc.steps[slot.index].duration))
    assert max((b for _, b in numbers), default=0.0) == pytest.approx(pc.seconds)


def test_a_statement_priced_by_its_plan_is_scheduled_like_its_plan():
    stmt = Arrow(
        Product(Tensor("A", (Dim("I", ("X",)), Dim("J"))), Tensor("B", (Dim("J", ("X",)), Dim("K")))),
        Tensor("C", (Dim("I", ("X",)), Dim("K"))),
    )
    best = plans(stmt, Mesh.parse("X=4"))[0]
    assert cost(stmt, Mesh.parse("X=4")).total == plan_cost(best, Mesh.parse("X=4")).total
