"""What a plan's cost reads instead of working it out again: each step cost's lanes and duration (kept on the
step cost, which the plans and queries share), the cost model's parts hashed once, the peak efficiencies one
value."""

from __future__ import annotations

import shardalg as sa
from shardalg.costs import schedule as sched
from shardalg.costs.costmodel import CostModel
from shardalg.costs.efficiency import PEAKS, Efficiencies
from shardalg.costs.hardware import get
from shardalg.costs.plancost import plan_cost
from shardalg.costs.stepcost import Options
from shardalg.costs.steps import step_cost

MESH = "X=2,Y=4"
SIZES = {"I": 1024, "J": 8192, "K": 4096}


def test_a_step_costs_lanes_and_duration_are_its_steps() -> None:
    opts = Options.of(CostModel.of("tpu-v5p"), sa.Mesh.parse(MESH), SIZES)
    found = sa.plans("A[I_X, J] · B[J, K_X] -> C[I_X, K]", MESH, SIZES)
    steps = [s for p in found for s in p.steps]
    assert len({s.op for s in steps}) >= 3  # gathers, slices, products, all-to-alls...
    for s in steps:
        sc = step_cost(s, opts)
        assert sc.lanes == sched.lanes_of(s)
        want = sc.compute if s.op is sa.Op.EINSUM else sc.comms
        assert sc.duration is sc.duration and sc.duration == want


def test_a_plans_total_is_its_schedule_of_its_steps() -> None:
    """The total read through the kept lanes and durations is the schedule built from the steps themselves."""
    for p in sa.plans("A[I_X, J_Y] · B[J, K] -> C[I_X, K]", MESH, SIZES):
        pc = plan_cost(p, MESH, SIZES, hw="tpu-v5p")
        lanes = [sched.lanes_of(s) for s in p.steps]
        built = sched.build([sc.duration for sc in pc.steps], lanes, sched.dependencies(p.steps), pc.overlap)
        assert pc.light("total") == built.total and pc.seconds == pc.evaluate(built.total) > 0


def test_the_peak_efficiencies_are_one_value() -> None:
    chip = get("tpu-v5p")
    assert Efficiencies.of(chip) is PEAKS == Efficiencies() and Efficiencies.of(None) is PEAKS
    given = Efficiencies.of(chip, mfu=0.5)
    assert given is not PEAKS and given.compute.value == 0.5 and given.hbm is PEAKS.hbm
    a, b = CostModel.of("tpu-v5p"), CostModel.of("tpu-v5p")
    assert a == b and hash(a) == hash(b) and a.efficiency is b.efficiency is PEAKS
