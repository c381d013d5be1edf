"""A step says where its plan choice (the fewest bytes) is slower on the chip than another plan of the same
statement (shardalg.models.planchoice), with both times, and says nothing where it is not."""

from __future__ import annotations

import pytest

from shardalg.algebra.traffic import Sizes
from shardalg.costs.costmodel import CostModel
from shardalg.costs.stepcost import Options
from shardalg.costs.steps import fast_seconds
from shardalg.models.analysis import analyze
from shardalg.models.planchoice import slower_plans
from shardalg.models.program import model_program
from shardalg.models.step import step_time
from shardalg.planning.planner import Problem, plans
from shardalg.planning.symbolic import summary

# Megatron's row-parallel product (LLaMA-2 13B's attention output on 8 H100s, B=32, T=2048): gathering both
# operands moves 7/8 of A (32*2048*5120 bf16 = 671 MB) and of W (52 MB), 724 MB, against 2 * 7/8 * 671 MB for the
# AllReduce of the result; so the planner's first gathers them and computes the whole product on every device
ROW = "A[B, T, K_X] * W[K_X, D] -> O[B, T, D]"
ROW_SIZES = "B=32,T=2048,K=5120,D=5120"


def _analysis(src: str, mesh: str, sizes: str, mode: str = "infer"):
    return analyze(model_program(src, mesh, sizes), mode)


@pytest.mark.parametrize("policy", ["steady", "serial", "schedule"])
def test_the_row_parallel_product_runs_a_slower_plan_than_its_fastest(policy):
    a = _analysis(ROW, "X=8", ROW_SIZES)
    costs = CostModel.of("h100", overlap=policy)
    (found,) = slower_plans(a, costs)
    assert found.chosen == a.forward_plans[0]  # the plan the step runs
    assert summary(found.chosen) == "AllGather_X(A), AllGather_X(W)"
    # each timed alone under the policy; the fastest at most every plan the planner lists by bytes (the
    # ranking by seconds adds the plan cheapest by time over every compute layout)
    m = a.model
    seconds = fast_seconds(Options.of(costs, m.mesh, m.sizes), costs.overlap)
    problem = Problem(m.statements[0].statement, m.mesh, Sizes(m.sizes), None, checked=True)
    every = [seconds(p) for p in plans(problem)]
    assert found.fastest_seconds == pytest.approx(seconds(found.fastest), rel=1e-12)
    assert found.fastest_seconds <= min(every) * (1 + 1e-12)
    assert found.chosen_seconds == pytest.approx(seconds(found.chosen), rel=1e-12)
    # the gathered product computes 2*B*T*K*D FLOPs on every device: 3.47 ms at the h100's 989.5 TFLOP/s
    assert found.chosen_seconds >= 2 * 32 * 2048 * 5120 * 5120 / 989.5e12 * (1 - 1e-9)
    assert found.fastest_seconds < found.chosen_seconds / 2


def test_a_product_whose_first_plan_is_its_fastest_is_not_said():
    # a local product over every device: no communication and the least compute there is
    a = _analysis("In[B_X, D] * W[D, F_Y] -> Out[B_X, F_Y]", "X=2,Y=2", "B=1024,D=4096,F=8192")
    assert slower_plans(a, CostModel.of("tpu-v5p", overlap="steady")) == []


def test_symbolic_sizes_compare_nothing():
    a = _analysis(ROW, "X=8", "K=5120,D=5120")
    assert slower_plans(a, CostModel.of("h100", overlap="steady")) == []


def test_the_step_says_it_with_both_times_in_text_and_json():
    report = step_time(ROW, mesh="X=8", sizes=ROW_SIZES, hw="h100", mode="infer", overlap="steady")
    said = dict(report.notes)["plans"]
    assert said.startswith("1 forward product runs the fewest-bytes plan, slower on h100 than another")
    assert "runs AllGather_X(A), AllGather_X(W) (3.47 ms)" in said
    assert {"key": "plans", "value": said} in report.to_json()["defaults"]
    assert f"note: plans: {said}" in str(report)
    # the same program sharded so its first plan is its fastest: no such note
    quiet = step_time(
        "In[B_X, D] * W[D, F_Y] -> Out[B_X, F_Y]", mesh="X=2,Y=2", sizes="B=1024,D=4096,F=8192", hw="tpu-v5p"
    )
    assert "plans" not in dict(quiet.notes)
