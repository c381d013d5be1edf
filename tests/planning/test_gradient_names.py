"""A value named as another value's gradient (``A`` and ``dA``) is refused by the backward (review h1): the
gradient of A was written into dA, and the gradient of B, which reads the forward's dA after it, read the
gradient instead (dB off: 14.23 by central differences, -1.03 derived), with verify and export agreeing."""

from __future__ import annotations

import pytest

from shardalg.errors import UsageError
from shardalg.planning.backward import backward
from shardalg.planning.verify import verify

CLASH = "dA[I, J_X] .* B[I, J_X] -> C[I, J_X]; A[I, J_X] .* C[I, J_X] -> E[I, J_X]"


def test_a_value_named_as_a_gradient_is_refused() -> None:
    with pytest.raises(UsageError) as err:
        backward(CLASH, "X=4", {"I": 8, "J": 8})
    assert (
        err.value.message
        == "the program names a value dA, which is the name the backward gives the gradient of A"
    )
    assert err.value.span is not None and CLASH[err.value.span.start : err.value.span.end] == "dA[I, J_X]"


def test_a_part_name_is_refused_too_and_verify_refuses_as_backward_does() -> None:
    with pytest.raises(
        UsageError, match="names a value dW', which is the name the backward gives the gradient of W"
    ):
        verify("X[B, D_X] * W[D_X, F] -> H[B, F]; dW'[B, F] .* H[B, F] -> G[B, F]", "", "X=4")


def test_names_that_only_start_with_d_are_read() -> None:
    assert (
        backward("dt[B, D_X] * W[D_X, F] -> H[B, F]", "X=4", {"B": 8, "D": 8, "F": 8}).gradient("dt").name
        == "ddt"
    )
