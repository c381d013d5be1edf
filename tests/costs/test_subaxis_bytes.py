"""V of a collective over part of an axis the tensor is sharded over whole (issue 25's fuzz finding).

``AllGather_{X:(2)2}(K[S_X]) -> K[S_{X:(1)2}]`` on X=4 gathers 2 of X's 4 shards: V (the array as the group
sees it) is K's output block, a half of K. It was counted as a quarter (the sub-axis was not found inside the
whole X the tensor names), so the two-step gather over X's halves ranked above ``AllGather_X`` on a line of
4 (29.1 us against 35 us at S = 2^20 on tpu-v5e) while moving 1.5x the bytes.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shardalg import cost, plan_cost, plans
from shardalg.algebra.mesh import Mesh
from shardalg.costs.costmodel import CostModel
from shardalg.costs.stepcost import Options, group_bytes, local_bytes
from shardalg.costs.steps import fast_seconds
from shardalg.notation.parse import parse_statement, parse_tensor
from shardalg.notation.syntax import Op

K = 2**20  # S: 2 MiB of bf16, the finding's size


def test_a_gather_over_part_of_a_whole_axis_counts_the_shards_it_gathers() -> None:
    opts = Options.of(CostModel(), Mesh(X=4), {"S": K})
    v = group_bytes(Op.ALL_GATHER, parse_tensor("K[S_X]"), ("X:(2)2",), opts)
    assert v == local_bytes(parse_tensor("K[S_{X:(1)2}]"), opts)  # the output block: half of K
    assert v.evaluate({}) == 2 * K // 2


@given(st.sampled_from([4, 8, 16]), st.sampled_from(["tpu-v5e", "tpu-v5p", "h100"]))
def test_the_gather_in_two_steps_moves_no_less_than_the_whole_gather(n: int, hw: str) -> None:
    """On one axis of n, the gather over X's minor part then its major part takes no less bandwidth time
    than the one gather over X (equal on a line: (n - 1)/n of V either way). Only the latency terms may
    favour two steps (1 + 1 hops against 3 on a line of 4; alpha + alpha against 3 alpha on the alpha-beta
    ring), so they are left out here."""
    mesh, sizes = Mesh(X=n), {"S": K}
    whole = cost("AllGather_X(K[S_X]) -> K[S]", mesh, sizes, hw=hw, latency=False).seconds
    first = f"AllGather_{{X:({n // 2 if n > 2 else 1})2}}(K[S_X]) -> K[S_{{X:(1){n // 2}}}]"
    second = f"AllGather_{{X:(1){n // 2}}}(K[S_{{X:(1){n // 2}}}]) -> K[S]"
    two = sum(cost(s, mesh, sizes, hw=hw, latency=False).seconds for s in (first, second))
    assert whole is not None
    assert two >= whole * (1 - 1e-12)


def test_the_finding_ranks_the_whole_gather_first() -> None:
    found = plans("K[S_X] -> K[S]", "X=4", {"S": K}, hw="tpu-v5e")
    assert [s.op for s in found[0].steps] == [Op.ALL_GATHER]
    assert found[0].steps[0].axes == ("X",)
    for p in found[1:]:  # a plan over sub-axes is listed only where it is not dearer
        assert plan_cost(p, "X=4", {"S": K}, hw="tpu-v5e").seconds >= plan_cost(
            found[0], "X=4", {"S": K}, hw="tpu-v5e"
        ).seconds * (1 - 1e-12)


def test_the_float_path_agrees_with_the_terms_over_a_subaxis() -> None:
    """The ranking's seconds (numbers straight from the step) and the cost's formula agree."""
    stmt = parse_statement("AllGather_{X:(2)2}(K[S_X]) -> K[S_{X:(1)2}]")
    mesh = Mesh(X=4)
    plan = plans(stmt, mesh, {"S": K})[0]
    pc = plan_cost(plan, mesh, {"S": K}, hw="tpu-v5e")
    costs = CostModel.of("tpu-v5e")
    fast = fast_seconds(Options.of(costs, mesh, {"S": K}), costs.overlap)(plan)
    assert fast is not None and pc.seconds is not None
    assert abs(fast - pc.seconds) <= 1e-12 * pc.seconds
