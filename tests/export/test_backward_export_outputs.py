"""The exported backward returns what a caller wants and runs in each torch form (review h1):

- every input's gradient is an output, also one that is a cotangent passed on unchanged and read by a later
  step (``X + A -> R``: dX is dR, and dA sums dR): the flow used to return dW and dA and drop dX;
- a backward that runs no step (every gradient passed on unchanged) is refused in one line (it was an
  IndexError, exit 3);
- the DTensor form runs a backward's ``+`` (a value read twice, as Q's and K's projections read X) and the
  functions and their derivatives, on the local blocks with the statistics all-reduced; it refused them.
"""

from __future__ import annotations

import numpy as np
import pytest

from shardalg.algebra.mesh import Mesh
from shardalg.errors import UsageError
from shardalg.export.flow import as_flow, node_text
from shardalg.export.harness import dense_outputs, random_inputs
from shardalg.export.jax import export_jax
from shardalg.planning.backward import backward

MESH = Mesh(Y=4)
BIAS = "X[B, D] + A[D] -> R[B, D]; R[B, D] * W[D, F_Y] -> O[B, F_Y]"
SIZES = {"B": 8, "D": 16, "F": 16}


def test_a_backward_returns_the_gradient_of_every_input() -> None:
    bw = backward(BIAS, MESH, SIZES)
    assert node_text(bw.gradient("X")) == "dR[B, D]"  # passed on unchanged by the +
    flow = as_flow(bw, MESH, SIZES)
    assert [node_text(t) for t in flow.outputs] == ["dW[D, F_Y]", "dA[D]", "dR[B, D]"]
    assert [(n, node_text(t)) for n, t in bw.input_gradients] == [
        ("X", "dR[B, D]"),
        ("A", "dA[D]"),
        ("W", "dW[D, F_Y]"),
    ]
    # dX, as the flow returns it, is dO·Wᵀ (on the dense meaning of the flow)
    arrays = random_inputs(flow, MESH, SIZES)
    by_name = {node_text(t): a.astype(np.float64) for t, a in zip(flow.inputs, arrays, strict=True)}
    d_x = dense_outputs(flow, arrays, MESH)[2]
    np.testing.assert_allclose(d_x, by_name["dO[B, F_Y]"] @ by_name["W[D, F_Y]"].T, rtol=1e-6)
    assert "return dW, dA, dR_1" in export_jax(bw, MESH, sizes=SIZES, name="backward")


def test_a_backward_that_runs_no_step_is_refused_by_name() -> None:
    bw = backward("X[B, D] + Y[B, D] -> R[B, D]", MESH, SIZES)
    with pytest.raises(UsageError, match=r"nothing to export: the backward runs no step \(dX is dR\[B, D\]"):
        export_jax(bw, MESH, sizes=SIZES)


def test_the_passed_on_gradient_runs_in_jax() -> None:
    pytest.importorskip("jax", reason="jax is not installed (pip install 'shardalg[jax]'); CI installs it")
    from shardalg.export.jax import check_jax

    (r,) = check_jax([backward(BIAS, MESH, SIZES)], MESH, sizes=SIZES)
    assert r.ok, r.message
    assert r.max_error < 1e-5


DT_MESH = Mesh(X=2, Y=2)
QK = "X[B, D] * W_q[D, H_Y] -> Q[B, H_Y]; X[B, D] * W_k[D, H_Y] -> K[B, H_Y]"
FUNCTIONS = (
    "softmax_{S,causal}(Sc[B_Y, T, S_X]) -> P[B_Y, T, S_X]; sum_S(P[B_Y, T, S_X]) -> Z[B_Y, T]; "
    "layernorm_S(Sc[B_Y, T, S_X]) -> L[B_Y, T, S_X]; gelu(L[B_Y, T, S_X]) -> G[B_Y, T, S_X]"
)
DT_SIZES = {"B": 4, "D": 8, "H": 8, "T": 8, "S": 8}


def test_the_dtensor_form_runs_a_backwards_addition_and_the_functions() -> None:
    pytest.importorskip(
        "torch", reason="torch is not installed (pip install 'shardalg[torch]'); CI installs it"
    )
    from shardalg.export.torch_check import check_torch
    from shardalg.export.torch_export import export_torch

    qk = backward(QK, DT_MESH, DT_SIZES)
    assert "dX = DTensor.from_local(_y, mesh, [Replicate(), Partial()], run_check=False)" in export_torch(
        qk, DT_MESH, sizes=DT_SIZES, dtensor=True
    )
    jobs = [qk, FUNCTIONS, backward(FUNCTIONS, DT_MESH, DT_SIZES)]
    results = check_torch(jobs, DT_MESH, sizes=DT_SIZES, dtensor=True)
    for r in results:
        assert r.ok, r.message
        assert r.max_error < 1e-5
