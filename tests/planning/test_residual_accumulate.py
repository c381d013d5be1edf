"""A value read by several products and by a residual's + (attention without a norm: X feeds Q's and K's
projections and the residual) gets its input gradient all-reduced once (review h1). The + passes its
cotangent dR on first, in the backward's reverse order; the products' parts were each finished (AllReduce)
to be added to it, one AllReduce a product. Now the cotangent passed on is added once the gradient is
complete, so the products' partial sums are added before the one finish, as without the residual."""

from __future__ import annotations

from shardalg.notation.printing import text
from shardalg.planning.backward import backward
from shardalg.planning.forward import analyze
from tests.planning.fnbackward import check_against_finite_differences

LAYER = (
    "X[B, D] * W_q[D, H_Y] -> Q[B, H_Y]; X[B, D] * W_k[D, H_Y] -> K[B, H_Y]; Q[B, H_Y] .* K[B, H_Y] -> G[B, H_Y]; "
    "G[B, H_Y] * W_o[H_Y, D] -> O[B, D]; X[B, D] + O[B, D] -> R[B, D]"
)
SIZES = {"B": 8, "D": 16, "H": 16}


def test_the_input_gradient_is_all_reduced_once_beside_a_residual() -> None:
    bw = backward(LAYER, "Y=4", SIZES)
    assert list(bw.collectives) == [("AllReduce", ("Y",))]
    statements = [text(s.statement()) for s in bw.steps]
    assert statements[-3:] == [
        "AllReduce_Y(dX[B, D]{U_Y}) -> dX[B, D]",
        "X[B, D] * dQ[B, H_Y] -> dW_q[D, H_Y]",
        "dX[B, D] + dR[B, D] -> dX[B, D]",  # the residual's cotangent, added to the finished sum
    ]
    assert text(bw.gradient("X")) == "dX[B, D]"


def test_the_gradients_match_finite_differences() -> None:
    bw = backward(LAYER, "Y=4", SIZES)
    grads = check_against_finite_differences(bw, analyze(bw.forward, bw.mesh, dict(SIZES)), dict(SIZES))
    assert float(abs(grads["X"]).max()) > 1e-3  # the residual's part and the products' parts are both in it


# a weight read by a product and by a +: with reductions deferred its product part is dW{U_X}, and the +'s
# cotangent dU is whole on every device; their sum had no plan (NoPlan: dU would be added once per device)
SHARED = "X[B_X, D] * W[D, E] -> H[B_X, E]; W[D, E] + V[D, E] -> U[D, E]"
SHARED_SIZES = {"B": 8, "D": 8, "E": 8}


def test_a_deferred_partial_gradient_is_reduced_before_a_whole_cotangent_is_added() -> None:
    bw = backward(SHARED, "X=4", SHARED_SIZES, defer_reductions=True)
    assert list(bw.collectives) == [("AllReduce", ("X",))]
    assert text(bw.steps[-1].statement()) == "dW[D, E] + dU[D, E] -> dW[D, E]"
    check_against_finite_differences(bw, analyze(bw.forward, bw.mesh, dict(SHARED_SIZES)), dict(SHARED_SIZES))


def test_a_deferred_partial_gradient_is_reduced_before_a_derivative_is_added() -> None:
    """The same with a function: gelu'(W, dG) is never partial sums (it had no plan into dW{U_X})."""
    program = "gelu(W[D, E]) -> G[D, E]; X[B_X, D] * W[D, E] -> H[B_X, E]"
    bw = backward(program, "X=4", SHARED_SIZES, defer_reductions=True)
    assert [text(s.statement()) for s in bw.steps][-3:] == [
        "gelu'(W[D, E], dG[D, E]) -> dW'[D, E]",
        "AllReduce_X(dW[D, E]{U_X}) -> dW[D, E]",
        "dW[D, E] + dW'[D, E] -> dW[D, E]",
    ]
    check_against_finite_differences(bw, analyze(bw.forward, bw.mesh, dict(SHARED_SIZES)), dict(SHARED_SIZES))
