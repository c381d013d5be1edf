"""The notation's functions exported as jax.shard_map code, run on 8 fake CPU devices (X=2, Y=4) against the
dense result, and differentiated by jax.vjp: a softmax or norm over a sharded dim all-reduces its statistics'
cotangents over the same axis, as their records' transposes say (issue 26 item 4, the export's share)."""

from __future__ import annotations

import pytest

import shardalg

pytest.importorskip("jax", reason="jax is not installed (pip install 'shardalg[jax]'); CI installs it")

from shardalg.algebra.mesh import Mesh
from shardalg.export.jax import check_jax  # noqa: E402

MESH = Mesh.parse("X=2,Y=4")
SIZES = {"B": 8, "D": 16, "F": 16, "S": 16, "T": 8}
QUERIES = [
    "gelu(H[B, F_Y]) -> G[B, F_Y]",
    "silu(H[B, F]{U_Y}) -> G[B, F_Y]",
    "exp(A[B_X, T]) -> E[B_X, T]",
    "relu(A[B_X, T]) -> E[B_X, T]",
    "scale_{0.125}(S[B_X, T]) -> R[B_X, T]",
    "X[B_X, D] + A[D_Y] -> R[B_X, D_Y]",
    "X[B_X, D]{U_Y} - A[B_X, D]{U_Y} -> R[B_X, D]",
    "G[B, F_Y] .* U[B, F_Y] -> R[B, F_Y]",
    "sum_D(X[B, D_X]) -> S[B]",
    "mean_D(X[B_Y, D_X]) -> S[B_Y]{U_X}",
    "max_D(X[B, D_X]) -> M[B]",
    "softmax_S(Sc[B_Y, S_X]) -> P[B_Y, S_X]",
    "rmsnorm_D(X[B, D_X]) -> Y[B, D_X]",
    "layernorm_D(X[B_Y, D_X]) -> Y[B_Y, D_X]",
]


@pytest.fixture(scope="module")
def results() -> dict[str, object]:
    """The cheapest plan of each query, in one subprocess, vjp included."""
    plans = [shardalg.plans(q, mesh=MESH, sizes=SIZES)[0] for q in QUERIES]
    return dict(zip(QUERIES, check_jax(plans, MESH, sizes=SIZES, vjp=True), strict=True))


@pytest.mark.parametrize("query", QUERIES)
def test_the_exported_function_runs_and_equals_dense(results: dict, query: str) -> None:
    r = results[query]
    assert r.ok, r.message
    assert r.max_error < 1e-5


@pytest.mark.parametrize(
    "query",
    [
        "softmax_S(Sc[B_Y, S_X]) -> P[B_Y, S_X]",
        "rmsnorm_D(X[B, D_X]) -> Y[B, D_X]",
        "layernorm_D(X[B_Y, D_X]) -> Y[B_Y, D_X]",
    ],
)
def test_vjp_all_reduces_the_statistics_cotangents_over_the_dims_axis(results: dict, query: str) -> None:
    """Only AllReduce_X (layernorm's pair of statistics is read as one AllReduce per statistic)."""
    assert set(results[query].backward) == {("AllReduce", ("X",))}


def test_an_elementwise_function_has_no_backward_communication(results: dict) -> None:
    assert results["gelu(H[B, F_Y]) -> G[B, F_Y]"].backward == ()
