"""Plans of the notation's functions (issue 26 items 1 and 2): every plan equals the dense result on numbers
(property tests over random layouts), the rule refuses what it must and names the fix, costs are HBM-bound
with their FLOPs apart, and a norm over a sharded dim chooses between all-reducing its statistics and
gathering the dim by a derived condition."""

from __future__ import annotations

import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shardalg
from shardalg.algebra.legality import notes
from shardalg.algebra.mesh import Mesh
from shardalg.costs.costmodel import CostModel
from shardalg.costs.derive import compare
from shardalg.costs.stepcost import Options
from shardalg.costs.steps import step_cost
from shardalg.errors import IllegalOperand
from shardalg.notation.printing import text
from shardalg.numeric.execute import run_plan

MESH = "X=2,Y=2"
PLACES = ["", "X", "Y", "XY", "YX"]


@st.composite
def _dim(draw: st.DrawFn, name: str, taken: set[str]) -> str:
    axes = draw(st.sampled_from([p for p in PLACES if not set(p) & taken]))
    taken.update(axes)
    return f"{name}_{axes}" if axes else name


@st.composite
def _tensor(draw: st.DrawFn, name: str, dims: list[str], partial_ok: bool = True) -> str:
    taken: set[str] = set()
    written = [draw(_dim(d, taken)) for d in dims]
    free = [a for a in "XY" if a not in taken]
    partial = draw(st.sampled_from(["", *free])) if partial_ok and free else ""
    return f"{name}[{', '.join(written)}]" + (f"{{U_{partial}}}" if partial else "")


UNARY = ["gelu", "silu", "exp", "relu", "scale_{0.5}"]
ALONG = ["sum_D", "mean_D", "max_D", "softmax_D", "rmsnorm_D", "layernorm_D"]
BINARY = ["+", "-", ".*"]


def _all_plans_equal_dense(query: str) -> None:
    try:
        found = shardalg.plans(query, mesh=MESH)
    except IllegalOperand:
        return  # a target the rule refuses (a partial result of a nonlinear function): said, not planned
    except shardalg.NoPlan:
        return
    assert found, query
    for plan in found:
        result = run_plan(plan, MESH, {"B": 4, "D": 8})
        assert result.ok, (query, str(plan), result.max_error)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fn=st.sampled_from(UNARY + ALONG), source=_tensor("X", ["B", "D"]), target=_tensor("Y", ["B", "D"], False)
)
def test_every_plan_of_a_function_of_one_operand_equals_dense(fn: str, source: str, target: str) -> None:
    if fn in ("sum_D", "mean_D", "max_D"):
        target = target.split(",")[0].replace("Y[", "Y[") + "]"  # the result has B only
    _all_plans_equal_dense(f"{fn}({source}) -> {target}")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    op=st.sampled_from(BINARY),
    left=_tensor("L", ["B", "D"]),
    right=st.one_of(_tensor("R", ["B", "D"]), _tensor("R", ["D"])),
    target=_tensor("Y", ["B", "D"], False),
)
def test_every_plan_of_an_elementwise_operator_equals_dense(
    op: str, left: str, right: str, target: str
) -> None:
    _all_plans_equal_dense(f"{left} {op} {right} -> {target}")


def test_a_sum_over_a_sharded_dim_is_a_partial_sum() -> None:
    (plan,) = shardalg.plans("sum_D(X[B, D_X]) -> S[B]{U_X}", mesh=Mesh.parse("X=4"))
    assert [text(s.statement()) for s in plan.steps] == ["sum_D(X[B, D_X]) -> S[B]{U_X}"]
    assert not plan.collectives
    first = shardalg.plans("sum_D(X[B, D_X]) -> S[B]", mesh=Mesh.parse("X=4"), sizes={"B": 64, "D": 4096})[0]
    assert [s.op.value for s in first.steps] == ["sum", "AllReduce"]  # reduce the B-sized partials, not X


def test_a_nonlinearity_of_a_partial_sum_is_refused_with_its_fix() -> None:
    # as a statement to plan it is a note (the plan reduces first, as for a product of partial sums) ...
    (err,) = notes("gelu(H[B, F]{U_X}) -> G[B, F]", mesh=Mesh.parse("X=2"))
    assert err.message == (
        "gelu is not linear: applied to the partial sums of H[B, F]{U_X} (unreduced over X) it does not "
        "give the function of their sum"
    )
    assert err.fix == "AllReduce_X(H[B, F]{U_X}) first (or ReduceScatter onto a dim gelu does not work along)"
    # ... and where its value is used as written (nested in another operation) an error, with the same fix
    (nested,) = shardalg.check("gelu(H[B, F]{U_X}) + A[B, F] -> G[B, F]", mesh="X=2")
    assert (nested.rule, nested.fix) == ("function-operand", err.fix)
    # linear functions take partial sums; the planner fixes the nonlinear one with the cheapest reduction
    assert not shardalg.check("scale_{2}(H[B, F]{U_X}) + A[B, F]{U_X} -> G[B, F]{U_X}", mesh="X=2")
    plan = shardalg.plans("gelu(H[B, F]{U_X}) -> G[B, F_X]", mesh=Mesh.parse("X=2"))[0]
    assert [s.op.value for s in plan.steps] == ["ReduceScatter", "gelu"]


def test_operands_that_do_not_meet_are_refused_as_written_and_planned() -> None:
    (err,) = notes("A[B_X, D] + C[B, D] -> R[B_X, D]", mesh=Mesh.parse("X=2"))
    assert err.message.startswith("the operands of add do not meet in one layout: dim B is B_X in")
    plan = shardalg.plans("A[B_X, D] + C[B, D] -> R[B_X, D]", mesh=Mesh.parse("X=2"))[0]
    assert [s.op.value for s in plan.steps] == ["Slice", "add"]  # the free slice of C, then the local add


def test_an_elementwise_step_is_hbm_bound_and_its_flops_are_apart() -> None:
    plan = shardalg.plan("gelu(H[B, F_X]) -> G[B, F_X]", mesh=Mesh.parse("X=4"))
    cost = shardalg.plan_cost(plan, mesh="X=4")
    s = {x.name: x for x in cost.total.free_symbols}
    b, f, w_hbm = s["B"], s["F"], s["W_hbm"]
    assert cost.total == 2 * (2 * b * f / 4) / w_hbm  # read and write the bf16 blocks of B×F/4
    assert cost.flops == 0  # no matmul FLOPs
    opts = Options.of(CostModel.of(None), Mesh(X=4), None)
    assert step_cost(plan.steps[0], opts).vector_flops.sympy() == 8 * b * f / 4  # gelu: 8 a element


def test_a_norm_over_a_sharded_dim_all_reduces_its_statistics_when_the_dim_is_long() -> None:
    """rmsnorm_D(X[B, D_X]) -> Y[B, D] on X devices: all-reduce the per-row sums of squares (4B bytes) and
    gather the result, or gather X and normalize whole rows. The derived condition (serial, bandwidth-bound):
    the statistics win when D·(X − 1)/X > 2·W_hbm/W_ici, i.e. when the HBM time saved on the (X − 1)/X of
    the rows' bytes beats the statistics' AllReduce."""
    m = Mesh(X=None)
    found = shardalg.plans("rmsnorm_D(X[B, D_X]) -> Y[B, D]", mesh=m)
    stats = next(p for p in found if any(s.op.function and s.axes for s in p.steps))
    gather = next(p for p in found if p is not stats)
    assert [s.op.value for s in stats.steps] == ["rmsnorm", "AllGather"]
    assert "AllReduce_X of them" in stats.steps[0].reason
    assert [s.op.value for s in gather.steps] == ["AllGather", "rmsnorm"]
    d = compare(stats, gather, "D", "serial", mesh=m)
    ratio = d.result.lhs  # the condition is ratio < 1
    assert d.result.rhs == 1
    sym = {x.name: x for x in ratio.free_symbols}
    D, X, w_hbm, w_ici = sym["D"], sym["X"], sym["W_hbm"], sym["W_ici"]
    (crossover,) = sympy.solve(sympy.Eq(ratio, 1), D)
    assert sympy.simplify(crossover - 2 * w_hbm * X / (w_ici * (X - 1))) == 0
    # and the ranking by seconds follows it on a chip: short rows gather, long rows all-reduce statistics
    chip = shardalg.plan_cost(stats, mesh="X=4", hw="tpu-v5e").values
    boundary = float(crossover.subs({w_hbm: chip[w_hbm], w_ici: chip[w_ici], X: 4}))
    for rows, stats_first in (
        (max(4, int(boundary / 8) // 4 * 4), False),
        (int(boundary * 64) // 4 * 4, True),
    ):
        ranked = shardalg.plans(
            "rmsnorm_D(X[B, D_X]) -> Y[B, D]",
            mesh="X=4",
            sizes={"B": 256, "D": rows},
            hw="tpu-v5e",
            latency=False,
        )
        chosen = ranked[0]
        assert any(s.op.function and s.axes for s in chosen.steps) is stats_first, (rows, boundary)


def test_a_functions_plans_are_memoized_by_value_and_each_caller_gets_its_own_list() -> None:
    """A function's plans in the planner's own order are memoized by the statement's value, as an einsum's are
    (a strategy search asks for one sharded norm for many candidates): an equal statement written again is
    answered from the memo with the function planner's plans, in the planner's order, in a list of its own (a
    caller that empties its list takes nothing from the next one), pointing into the text it was written in."""
    from shardalg.algebra.traffic import Sizes
    from shardalg.cache import clear_caches
    from shardalg.notation.parse import parse
    from shardalg.planning import planner
    from shardalg.planning.functions import function_plans
    from shardalg.planning.order import default_key
    from shardalg.planning.planset import DEFAULT_LIMITS

    clear_caches()
    mesh, sizes = Mesh(X=2, Y=2), {"B": 8, "D": 64}
    first = shardalg.plans("rmsnorm_D(X[B, D_X]) -> H[B, D]", mesh=mesh, sizes=sizes)
    assert len(first) > 1  # the statistics' AllReduce, and the gather before the norm
    first.clear()
    written = "  rmsnorm_D( X[B, D_X] )  ->  H[B, D]"
    before = planner._function_plans.cache_info()
    again = shardalg.plans(written, mesh=mesh, sizes=sizes)
    assert planner._function_plans.cache_info().hits == before.hits + 1
    (stmt,) = parse(written).statements
    known = Sizes(sizes)
    direct = function_plans(
        stmt.expr, stmt.result, mesh, known, default_key(mesh, known), None, DEFAULT_LIMITS
    )
    assert [text(p) for p in again] == [text(p) for p in direct]
    source = again[0].inputs[0].span
    assert source is not None and written[source.start : source.end] == "X[B, D_X]"
