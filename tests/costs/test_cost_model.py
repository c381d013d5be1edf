"""A cost model is one value: the public functions' keyword options fold into a frozen CostModel at the edge,
and the layers below price under that value."""

from __future__ import annotations

import dataclasses

import pytest

from shardalg import plans
from shardalg.algebra.mesh import Mesh
from shardalg.costs.costmodel import CostModel
from shardalg.costs.derive import compare
from shardalg.costs.hardware import get
from shardalg.costs.plancost import cost, costed, plan_cost, priced, step_seconds
from shardalg.costs.ranking import BySeconds
from shardalg.costs.steps import step_weights
from shardalg.errors import UsageError
from shardalg.planning import planner
from shardalg.planning.overlap import OverlapPolicy
from shardalg.planning.planner import prepare
from shardalg.planning.ranking import Ranking

MESH = Mesh(X=4, Y=2)
SIZES = {"B": 4096, "D": 8192, "F": 16384}
STATEMENT = "X[B, D] · Y[D_X, F] -> Z[B, F]"


def test_the_edge_reads_names_once() -> None:
    costs = CostModel.of("tpu-v5e", overlap="steady", latency=False, dcn_axes=["X"], hbm=["W"])
    assert costs == CostModel(get("tpu-v5e"), "ici", OverlapPolicy.STEADY, False, False, ("X",), ("W",))
    same = CostModel.of(get("tpu-v5e"), overlap=True, latency=False, dcn_axes=("X",), hbm=("W",))
    assert same == costs and hash(same) == hash(costs)
    assert CostModel.of().model == "ici" and CostModel.of("h100").model == get("h100").model
    with pytest.raises(dataclasses.FrozenInstanceError):
        costs.latency = True  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": "torus"}, "unknown communication model 'torus'; known: ici, alpha-beta, alpha-beta-rd"),
        ({"ring": "both"}, "ring is 'bi' (both ways, the book's W_ici) or 'uni' (one way), not 'both'"),
        (
            {"ring": "uni", "model": "alpha-beta"},
            "ring='uni' counts hops on the ici torus; the alpha-beta model has no rings",
        ),
        ({"overlap": "sometimes"}, "the overlap policy is one of schedule, steady, serial, not 'sometimes'"),
        ({"hw": "tpu-v9"}, "unknown hardware 'tpu-v9'"),
    ],
)
def test_a_bad_cost_model_is_refused_where_it_is_made(kwargs, message) -> None:
    with pytest.raises(UsageError) as info:
        CostModel.of(**kwargs)
    assert message in str(info.value)
    if "hw" not in kwargs and "overlap" not in kwargs:  # the value itself refuses too, however it is made
        with pytest.raises(UsageError):
            CostModel(**kwargs)


def test_under_changes_only_the_policy() -> None:
    costs = CostModel.of("tpu-v5p", exact=True)
    assert costs.under(None) is costs and costs.under("schedule") is costs
    assert costs.under("serial") == dataclasses.replace(costs, overlap=OverlapPolicy.SERIAL)


def test_the_public_keywords_and_the_value_price_alike() -> None:
    text = "AllGather_X(A[I_X, J]) -> A[I, J]; A[I, J] · B[J, K_Y] -> C[I, K_Y]"
    sizes = {"I": 4096, "J": 8192, "K": 2048}
    by_keywords = cost(text, MESH, sizes, "tpu-v5p", None, "steady", exact=True, latency=False)
    costs = CostModel.of("tpu-v5p", overlap="steady", exact=True, latency=False)
    by_value = costed(text, MESH, sizes, costs)
    assert by_value.total == by_keywords.total and by_value.seconds == by_keywords.seconds
    plan = plans(STATEMENT, MESH, SIZES)[0]
    by_keywords = plan_cost(plan, MESH, SIZES, "tpu-v5p", overlap="steady", exact=True, latency=False)
    assert priced(plan, MESH, SIZES, costs).seconds == by_keywords.seconds
    assert priced(plan, MESH, SIZES, costs.under("serial")).seconds != by_keywords.seconds


def test_step_seconds_takes_every_option_of_the_model() -> None:
    """Ranking weights read the same CostModel as the plan's price: a DCN axis is slower (it was refused)."""
    found = plans(STATEMENT, Mesh.parse("X=4"), SIZES, hw="tpu-v5p")
    step = next(s for s in found[0].steps if s.communicates)
    ici = step_seconds(Mesh(X=4), SIZES, "tpu-v5p")(step)
    dcn = step_seconds(Mesh(X=4), SIZES, "tpu-v5p", dcn_axes=("X",))(step)
    assert dcn > ici
    assert step_weights(Mesh(X=4), SIZES, CostModel.of("tpu-v5p", dcn_axes=("X",)))(step) == dcn


def test_plans_rank_by_a_cost_model_given_as_a_value() -> None:
    costs = CostModel.of("tpu-v5p", overlap="serial", exact=True)
    p = prepare(STATEMENT, Mesh.parse("X=4"), SIZES)
    assert list(planner.plans(p, rank=BySeconds(costs))) == list(
        plans(STATEMENT, Mesh.parse("X=4"), SIZES, hw="tpu-v5p", overlap="serial", exact=True)
    )


def test_the_planner_ranks_by_any_value_of_the_ranking_protocol() -> None:
    costs = BySeconds(CostModel.of("tpu-v5e"))
    assert isinstance(costs, Ranking)  # the planner's protocol, which the ranking by a cost model implements
    assert not isinstance(CostModel(), Ranking)  # the cost model itself is a value and nothing more
    found = planner.plans(STATEMENT, Mesh.parse("X=4"), SIZES, rank=costs)
    assert list(found) == list(plans(STATEMENT, Mesh.parse("X=4"), SIZES, hw="tpu-v5e"))
    assert list(found.columns) == ["bytes communicated", "time on tpu-v5e (schedule)"]
    assert list(planner.plans(STATEMENT, Mesh.parse("X=4"), SIZES).columns) == ["bytes communicated"]
    with pytest.raises(UsageError, match=r"rank is a ranking such as BySeconds\(CostModel"):
        planner.plans(STATEMENT, Mesh.parse("X=4"), SIZES, rank="tpu-v5e")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="ranking by seconds needs a chip"):
        planner.plans(STATEMENT, Mesh.parse("X=4"), SIZES, rank=BySeconds(CostModel()))


def test_plans_under_equal_cost_models_share_the_answer() -> None:
    """The plans found under a ranking are memoized by the ranking's value (the CostModel), not by the
    functions it hands the search (new at each call): an equal query under an equal model is answered again
    from the memo, and another model is another key."""
    from shardalg.cache import clear_caches

    clear_caches()
    first = plans(STATEMENT, Mesh.parse("X=4"), SIZES, hw="tpu-v5p", overlap="steady")
    before = planner._einsum_plans_by.cache_info()
    again = plans(STATEMENT, Mesh.parse("X=4"), SIZES, hw="tpu-v5p", overlap="steady")
    assert list(again) == list(first)
    assert planner._einsum_plans_by.cache_info().hits == before.hits + 1
    plans(STATEMENT, Mesh.parse("X=4"), SIZES, hw="tpu-v5p", overlap="serial")
    assert planner._einsum_plans_by.cache_info().misses == before.misses + 1


def test_a_derivation_folds_its_options_once() -> None:
    d = compare(
        "AllGather_X(A[I_X, J]) -> A[I, J]",
        "AllReduce_X(A[I, J]{U_X}) -> A[I, J]",
        "I",
        mesh="X=4",
        overlap="serial",
    )
    assert d.overlap is OverlapPolicy.SERIAL and d.to_json()["overlap"] == "serial"
    with pytest.raises(UsageError, match="unknown communication model"):
        compare(
            "AllGather_X(A[I_X, J]) -> A[I, J]", "AllGather_X(A[I_X, J]) -> A[I, J]", mesh="X=4", model="x"
        )


def test_a_plan_cost_carries_its_cost_model() -> None:
    pc = cost(
        "AllGather_X(A[I_X, J]) -> A[I, J]", Mesh.parse("X=4"), {"I": 4096, "J": 8192}, "tpu-v5p", exact=True
    )
    assert pc.costs == CostModel.of("tpu-v5p", exact=True) and (pc.model, pc.exact, pc.ring) == (
        "ici",
        True,
        "bi",
    )
    serial = pc.under("serial")
    assert serial.costs == pc.costs.under("serial") and serial.overlap is OverlapPolicy.SERIAL
    assert pc.under(None) is pc and pc.under(pc.costs.overlap) is pc


def test_a_model_whose_numbers_the_chip_lacks_is_named_not_called_an_unbound_size() -> None:
    """alpha-beta on a TPU: every size is bound, but the chip gives no alpha or beta (it said "needs every
    size bound"); an unbound size is still named as one."""
    with pytest.raises(UsageError) as err:
        plans(STATEMENT, Mesh.parse("X=4"), SIZES, hw="tpu-v5p", model="alpha-beta")
    assert "under the alpha-beta model needs alpha, beta, which tpu-v5p does not give" in str(err.value)
    assert "or rank under the model the chip has, ici" in str(err.value)
    unbound = {k: v for k, v in SIZES.items() if k != next(iter(SIZES))}
    with pytest.raises(UsageError, match=f"is symbolic in {next(iter(SIZES))}"):
        plans(STATEMENT, Mesh.parse("X=4"), unbound, hw="tpu-v5p")
