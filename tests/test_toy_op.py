"""An operation is one record: a toy operation defined here, with no change to the package, is planned,
priced and printed by ``plans`` and the CLI, and refused by name by each layer that has no method for it
(the executor, the three exporters, and the cost model when it is given no cost).

The toy, ``ToyGather``, is AllGather's rule at half AllGather's bytes (so the byte-ranked search prefers it)
with one cost-model method: a picosecond a byte, no latency (so the seconds-ranked search prefers it too).
It lives on its own mesh axis, ``T``, and the fixture forgets it and the planner's and the cost model's caches
when the test ends, so that no other test sees it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from fractions import Fraction

import pytest
import sympy

import shardalg
from shardalg.algebra.ops import RECORDS, RULES, all_gather, forget_op, register_op
from shardalg.algebra.registry import LAYERS
from shardalg.cache import clear_caches
from shardalg.cli import main
from shardalg.costs import stepcost
from shardalg.costs import terms as tm
from shardalg.costs.commcost import CommCost
from shardalg.errors import UsageError
from shardalg.export.jax import export_jax
from shardalg.export.torch_dtensor import export_dtensor
from shardalg.export.torch_export import export_torch
from shardalg.notation.plan import Step
from shardalg.notation.syntax import Op
from shardalg.numeric.execute import run_plan

MESH = "T=4"
SIZES = {"I": 1024, "J": 512}
QUERY = "A[I_T, J] -> A[I, J]"
V = 1024 * 512 * 2  # A's bytes in bf16: what the toy's group sees (AllGather's view, kept by the toy)
PER_BYTE = Fraction(1, 10**12)


def _forget_caches() -> None:
    clear_caches()  # the planner's and the costs' memos hold answers about the toy


@pytest.fixture
def toy() -> Iterator[Op]:
    """The toy operation's record, and no cost: each test registers what it needs."""
    op = Op.define("TOY_GATHER", "ToyGather")
    register_op(
        replace(
            all_gather.RECORD,
            op=op,
            doc="ToyGather_A: [.., d_{..A}, ..] -> [.., d, ..]   S(d) -> R on A, at half AllGather's bytes",
            factor=Fraction(1, 2),
            example="",
            explain=lambda axes, before, after, dim: (
                f"ToyGather: half an AllGather of {before.name} over {axes[0]}"
            ),
        )
    )
    _forget_caches()
    try:
        yield op
    finally:
        forget_op(op)
        _forget_caches()


@pytest.fixture
def priced(toy: Op) -> Op:
    """The toy with its one cost-model method: V bytes at a picosecond each."""

    @stepcost.UNIT_COSTS.register(toy)
    def _toy_cost(op: Op, axes: tuple[str, ...], opts: stepcost.Options, offset: int | None) -> CommCost:
        return CommCost(((tm.ZERO, tm.const(PER_BYTE)),), False)

    return toy


def test_the_toy_is_planned_and_printed_by_plans(priced: Op) -> None:
    found = shardalg.plans(QUERY, mesh=MESH, sizes=SIZES)
    assert [str(p) for p in found][:1] == [
        "ToyGather_T(A[I_T, J]) -> A[I, J]  # ToyGather: half an AllGather of A over T"
    ]
    assert found[0].steps[0].op is priced
    # AllGather is still a plan, ranked after the toy (twice its bytes)
    assert "AllGather_T(A[I_T, J]) -> A[I, J]  # AllGather: T no longer shards I of A" in [
        str(p) for p in found
    ]


def test_the_toy_is_priced_by_its_cost_method(priced: Op) -> None:
    (first, *_) = shardalg.plans(QUERY, mesh=MESH, sizes=SIZES, hw="tpu-v5e")
    assert first.steps[0].op is priced  # ranked first by seconds: a picosecond a byte beats the ICI
    cost = shardalg.plan_cost(first, mesh=MESH, sizes=SIZES, hw="tpu-v5e")
    assert cost.total == sympy.Rational(V) * sympy.Rational(PER_BYTE.numerator, PER_BYTE.denominator)


def test_the_cli_plans_and_prints_the_toy(priced: Op, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", QUERY, "--mesh", MESH, "--sizes", "I=1024,J=512", "--all"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [
        "# plan 1 of 4: 524288 bytes communicated; redistribute",
        "ToyGather_T(A[I_T, J]) -> A[I, J]  # ToyGather: half an AllGather of A over T",
    ]


def test_the_executor_refuses_the_toy_by_name(priced: Op) -> None:
    plan = shardalg.plans(QUERY, mesh=MESH, sizes=SIZES)[0]
    with pytest.raises(UsageError) as err:
        run_plan(plan, MESH, SIZES)
    assert err.value.message == "the numpy executor (shardalg.numeric) has no method for ToyGather"
    assert err.value.fix == "register the op's data movement: @MOVES.register(op)"


@pytest.mark.parametrize(
    ("export", "layer"),
    [
        (export_jax, "the JAX exporter (shardalg.export.jax)"),
        (export_torch, "the torch.distributed exporter (shardalg.export.torch_export)"),
        (export_dtensor, "the DTensor exporter (shardalg.export.torch_dtensor)"),
    ],
)
def test_each_exporter_refuses_the_toy_by_name(priced: Op, export: object, layer: str) -> None:
    plan = shardalg.plans(QUERY, mesh=MESH, sizes=SIZES)[0]
    with pytest.raises(UsageError) as err:
        export(plan, shardalg.Mesh.parse(MESH), sizes=SIZES)  # type: ignore[operator]
    assert err.value.message == f"{layer} has no method for ToyGather (ToyGather_T(A[I_T, J]) -> A[I, J])"
    assert err.value.fix == "register the op's emitter: @EMITTERS.register(op)"


def test_the_cost_model_refuses_a_toy_without_a_cost(toy: Op) -> None:
    plan = shardalg.plans(QUERY, mesh=MESH, sizes=SIZES)[0]  # bytes rank it: no cost model is asked
    assert plan.steps[0].op is toy
    with pytest.raises(UsageError) as err:
        shardalg.plan_cost(plan, mesh=MESH, sizes=SIZES, hw="tpu-v5e").total  # noqa: B018
    assert err.value.message == "the cost model (shardalg.costs) has no method for ToyGather"


def test_forgetting_the_toy_leaves_the_package_as_it_was() -> None:
    before = (list(Op), list(RECORDS), list(RULES), [dict(layer.methods) for layer in LAYERS])
    op = Op.define("TOY_GATHER", "ToyGather")
    register_op(replace(all_gather.RECORD, op=op))
    stepcost.UNIT_COSTS.register(op)(lambda *args: None)
    assert Op("ToyGather") is op and RULES[op].op is op and op in stepcost.UNIT_COSTS
    forget_op(op)
    assert (list(Op), list(RECORDS), list(RULES), [dict(layer.methods) for layer in LAYERS]) == before
    with pytest.raises(ValueError, match="'ToyGather' is not a valid Op"):
        Op("ToyGather")


def test_an_operation_is_defined_once() -> None:
    with pytest.raises(UsageError, match="an operation named AllGather is already defined"):
        Op.define("ALL_GATHER_AGAIN", "AllGather")
    with pytest.raises(UsageError, match="AllGather already has a record"):
        register_op(all_gather.RECORD)


def test_whether_a_step_communicates_is_the_operations_own_fact() -> None:
    op = Op.define("TOY_LOCAL", "ToyLocal", communicates=False)
    try:
        register_op(replace(all_gather.RECORD, op=op))
        a = shardalg.parse_tensor("A[I_T, J]")
        step = Step(op, (a,), a, ("T",))
        assert (step.communicates, RECORDS[op].communicates) == (False, False)
        assert Step(Op.ALL_GATHER, (a,), a, ("T",)).communicates
    finally:
        forget_op(op)
