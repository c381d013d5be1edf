"""verify reads the backward of products and collectives; a forward with a function (a residual's +, gelu,
a norm) is refused by name (review h1). It used to report a right backward WRONG: the + passes dR on as dH,
and verify, which knows no function's gradient, called ``dR · W -> dX`` no gradient einsum of the forward."""

from __future__ import annotations

import pytest

from shardalg.errors import UsageError
from shardalg.planning.verify import verify

FORWARD = "X[B, D] * W[D, F_Y] -> H[B, F_Y]; H[B, F_Y] + A[B, F_Y] -> R[B, F_Y]"
# right: dH is dR (the + passes it on), dA is dR too
WRITTEN = "dR[B, F_Y] * W[D, F_Y] -> dX[B, D]{U_Y}; AllReduce_Y(dX[B, D]{U_Y}) -> dX[B, D]; X[B, D] * dR[B, F_Y] -> dW[D, F_Y]"
SIZES = {"B": 512, "D": 1024, "F": 4096}


def test_a_forward_with_a_function_is_refused_by_name() -> None:
    with pytest.raises(UsageError) as err:
        verify(FORWARD, WRITTEN, mesh="Y=4", sizes=SIZES)
    assert err.value.message == (
        "verify checks the backward of products and collectives; statement 2 of the forward, "
        "H[B, F_Y] + A[B, F_Y] -> R[B, F_Y], is a function, whose gradient it does not read"
    )


def test_a_forward_of_products_is_still_verified() -> None:
    products = "X[B, D] * W[D, F_Y] -> H[B, F_Y]"
    assert verify(products, WRITTEN.replace("dR", "dH"), mesh="Y=4", sizes=SIZES).ok
