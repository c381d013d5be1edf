"""The gradient's reduction across two v5p pods over DCN: the hierarchical plan (ICI, then DCN on 1/|X| of the
bytes, then ICI) priced ICI + DCN, against one flat ring through every chip (its DCN crossing binds) and the
cost model's pooled multi-axis bound."""

from __future__ import annotations

import pytest

import shardalg
from shardalg.costs.chipspec import as_chip_text
from shardalg.costs.podreduce import pod_reductions
from shardalg.errors import UsageError

SIZES = {"D": 8960, "F": 8192}
V = 8960 * 8192 * 2  # the gradient in bf16


def _mesh() -> shardalg.Mesh:
    return shardalg.slice_mesh("v5p-17920", "P=pod,X=x*y,Y=z")  # two 16x20x28 pods; X = 320 chips a pod


def test_the_hierarchical_reduction_across_two_pods_is_ici_plus_dcn_and_beats_the_flat_ring() -> None:
    hier, flat, pooled = pod_reductions("G[D, F]", _mesh(), "P", "X", SIZES, "tpu-v5p")
    w_dcn = float(as_chip_text("tpu-v5p").dcn_bandwidth.value)
    # the DCN phase: an AllReduce over the 2 pods of the 1/320 shard each chip holds
    ar = shardalg.cost("AllReduce_P(G[D_X, F]{U_P}) -> G[D_X, F]", _mesh(), SIZES, "tpu-v5p")
    assert hier.dcn == pytest.approx(ar.seconds) == pytest.approx(2 * (V / 320) / w_dcn)
    rs = shardalg.cost("ReduceScatter_{X,D}(G[D, F]{U_PX}) -> G[D_X, F]{U_P}", _mesh(), SIZES, "tpu-v5p")
    ag = shardalg.cost("AllGather_X(G[D_X, F]) -> G[D, F]", _mesh(), SIZES, "tpu-v5p")
    assert hier.ici == pytest.approx(rs.seconds + ag.seconds)
    # the flat ring: one AllReduce over 640 chips whose ring crosses DCN
    assert flat.dcn == pytest.approx(2 * V / w_dcn)
    assert hier.seconds < flat.seconds / 40
    # the pooled multi-axis formula is a bound below both (said in its note)
    assert pooled.seconds < hier.seconds and "bound" in pooled.note


def test_the_hierarchical_plan_equals_the_dense_sum_on_numbers() -> None:
    hier, *_ = pod_reductions("G[D, F]", _mesh(), "P", "X", SIZES, "tpu-v5p")
    ops = [line.split("(", 1)[0] for line in hier.program.splitlines()]
    assert ops == ["ReduceScatter_{X,D}", "AllReduce_P", "AllGather_X"]
    chain = "AllGather_X(AllReduce_P(ReduceScatter_{X,D}(G[D, F]{U_PX}))) -> G[D, F]"
    runs = shardalg.simulate(chain, mesh="P=2,X=4", sizes={"D": 8, "F": 2})
    assert [r.ok for r in runs] == [True]


def test_a_pod_axis_must_run_over_dcn() -> None:
    with pytest.raises(UsageError, match="X is not an axis over DCN"):
        pod_reductions("G[D, F]", _mesh(), "X", "Y", SIZES, "tpu-v5p")
