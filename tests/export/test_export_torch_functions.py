"""The notation's functions and their derivatives exported as torch.distributed code, run by 8 gloo processes
(X=2, Y=4) against the dense result: each function's cheapest plan (over a sharded dim its statistics
all-reduced, a maximum with MAX), a causal softmax over sharded S and T, and each function's derived backward
(the derivatives' statistics all-reduced as the forward's); a wrong form is caught (issue 26, the torch
exporter's share)."""

from __future__ import annotations

import pytest

import shardalg
from shardalg.algebra.mesh import Mesh
from shardalg.notation.syntax import Op

pytest.importorskip("torch", reason="torch is not installed (pip install 'shardalg[torch]'); CI installs it")

from shardalg.export import torch_functions  # noqa: E402
from shardalg.export.torch_check import check_torch  # noqa: E402
from shardalg.export.torch_export import export_torch  # noqa: E402
from shardalg.planning.backward import backward  # noqa: E402

MESH = Mesh.parse("X=2,Y=4")
SIZES = {"B": 8, "D": 16, "F": 16, "S": 16, "T": 8}
FORWARD = [
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
    "softmax_{S,causal}(Sc[B, T_Y, S_X]) -> P[B, T_Y, S_X]",
    "rmsnorm_D(X[B, D_X]) -> Y[B, D_X]",
    "layernorm_D(X[B_Y, D_X]) -> Y[B_Y, D_X]",
    "rename_{I,J}(K[B_Y, I_X]) -> Kr[B_Y, J_X]",  # the same blocks: nothing moved
    "rename_{I,J}(K[B_Y, I_X]) -> Kr[B_Y, J]",  # the rename, then J gathered over X
]
BACKWARD = [  # each derivative's backward, the statistics over a sharded dim where it has them
    "gelu(H[B, F_Y]) -> G[B, F_Y]",
    "silu(H[B_X, F_Y]) -> G[B_X, F_Y]",
    "exp(A[B_X, T]) -> E[B_X, T]",
    "relu(A[B_X, T_Y]) -> E[B_X, T_Y]",
    "sum_D(X[B, D_X]) -> S[B]",
    "mean_D(X[B_Y, D_X]) -> S[B_Y]",
    "max_D(X[B, D_X]) -> M[B]",
    "softmax_S(Sc[B_Y, S_X]) -> P[B_Y, S_X]",
    "rmsnorm_D(X[B, D_X]) -> Y[B, D_X]",
    "layernorm_D(X[B_Y, D_X]) -> Y[B_Y, D_X]",
    "rename_{I,J}(K[B_Y, I_X]) -> Kr[B_Y, J_X]",  # its backward the rename back
]


@pytest.fixture(scope="module")
def results() -> dict[str, object]:
    """Every job in one launch of 8 forked gloo ranks."""
    jobs = [shardalg.plans(q, mesh=MESH, sizes=SIZES)[0] for q in FORWARD]
    jobs += [backward(q, MESH, SIZES) for q in BACKWARD]
    names = [f"forward:{q}" for q in FORWARD] + [f"backward:{q}" for q in BACKWARD]
    return dict(zip(names, check_torch(jobs, MESH, sizes=SIZES), strict=True))


@pytest.mark.parametrize("query", FORWARD)
def test_a_function_runs_on_gloo_and_equals_dense(results: dict, query: str) -> None:
    r = results[f"forward:{query}"]
    assert r.ok and r.max_error < 1e-5, r.message


@pytest.mark.parametrize("query", BACKWARD)
def test_a_functions_derived_backward_runs_on_gloo_and_equals_dense(results: dict, query: str) -> None:
    r = results[f"backward:{query}"]
    assert r.ok and r.max_error < 1e-5, r.message


def test_over_a_sharded_dim_the_statistics_are_all_reduced() -> None:
    src = export_torch(
        shardalg.plans("layernorm_D(X[B_Y, D_X]) -> Y[B_Y, D_X]", mesh=MESH, sizes=SIZES)[0], MESH
    )
    assert src.count("_all_reduce(") == 3  # the helper and the two statistics (sum, sum of squares)
    src = export_torch(shardalg.plans("max_D(X[B, D_X]) -> M[B]", mesh=MESH, sizes=SIZES)[0], MESH)
    assert "_all_reduce_max(torch.amax(X, dim=1), mesh.get_group('X'))" in src


def test_a_wrong_derivative_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check can fail: softmax' without its statistic's AllReduce (each rank's own row sum only)."""
    wrong = dict(torch_functions.DERIVATIVES)
    wrong[Op.SOFTMAX_D] = lambda y, x, dy, i, n, red, rmax: [
        f"{y} = {x} * ({dy} - torch.sum({dy} * {x}, dim={i}, keepdim=True))"
    ]
    monkeypatch.setattr(torch_functions, "DERIVATIVES", wrong)
    (r,) = check_torch([backward("softmax_S(Sc[B_Y, S_X]) -> P[B_Y, S_X]", MESH, SIZES)], MESH, sizes=SIZES)
    assert not r.ok


def test_attention_blocks_are_refused_by_name() -> None:
    core = (
        "Q[B, T_X, H, E] · K[B, S_X, H, E] -> Sc[B, H, T_X, S]; softmax_S(Sc[B, H, T_X, S]) -> P[B, H, T_X, S]; "
        "P[B, H, T_X, S] · V[B, S_X, H, E] -> O[B, T_X, H, E]"
    )
    ring = next(p for p in shardalg.plans(core, mesh="X=4", sizes=SIZES) if p.note.startswith("ring"))
    with pytest.raises(shardalg.ShardalgError, match="has no method for attend"):
        export_torch(ring, "X=4")


def test_a_rename_moves_nothing_on_the_ranks() -> None:
    src = export_torch(
        shardalg.plans("rename_{I,J}(K[B_Y, I_X]) -> Kr[B_Y, J_X]", mesh=MESH, sizes=SIZES)[0], MESH
    )
    assert "\n    Kr = K\n" in src  # the same block under its new name
    assert "_all_gather" not in src and "_permute" not in src
