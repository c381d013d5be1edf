"""A value read twice by one statement, or by several functions beside a residual, gets every contribution.

Two faults gave wrong gradients here, found by the fuzzer's random layers checked against ``verify``:

- a function's plan has no einsum, so its own step counted as one "before the einsum" that a later plan may
  reuse: the second ``dV0 + dV1 -> dV0`` of ``V0 + V0`` (read besides by another statement) was taken for the
  first and dropped, as was the second product rule's addition of ``V0 .* V0``;
- a function's contribution to a gradient that was a cotangent passed on (a residual's) was written into the
  gradient's own name and added at the end, so a second function's contribution overwrote it (``gelu(V0)``,
  ``silu(V0)`` and ``V0 + Z``: ``dV0`` lost silu's part).

Each program's derived backward is checked against central differences of its forward and by ``verify``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shardalg.notation.parse import parse
from shardalg.numeric.gradcheck import gradcheck
from shardalg.planning.backward import backward
from shardalg.planning.verify import verify
from tests.fuzz.inputs import _layers

SIZES = {"B": 4, "D": 6, "F": 4, "T": 3}

READ_TWICE = {
    "V0 + V0, and a function of V0": ("V0[B, D] + V0[B, D] -> V1[B, D]; gelu(V0[B, D]) -> V2[B, D]", "X=2"),
    "a function of V0, then V0 + V0": ("gelu(V0[B, D]) -> V2[B, D]; V0[B, D] + V0[B, D] -> V1[B, D]", "X=2"),
    "V0 .* V0, and a function of V0": ("V0[B, D] .* V0[B, D] -> V1[B, D]; gelu(V0[B, D]) -> V2[B, D]", "X=2"),
    "a product of V0, and V0 + V0": ("V0[B, D] * W[D, F] -> H[B, F]; V0[B, D] + V0[B, D] -> V1[B, D]", "X=2"),
    "V0 + V0, then a product of V0": (
        "V0[B, D] + V0[B, D] -> V1[B, D]; V0[B, D] * W[D, F] -> H[B, F]",
        "X=2",
    ),
    "two functions beside a residual": (
        "gelu(V0[B, D]) -> V2[B, D]; silu(V0[B, D]) -> V3[B, D]; V0[B, D] + Z[B, D] -> V1[B, D]",
        "X=2",
    ),
    "sharded, resharded, read twice and by a function": (
        "In[B_XY, T, D_Z] + In[B_XY, T, D_Z] -> V0[B, T, D_XZ]; V0[B, T, D_XZ] + V0[B, T, D_XZ] -> V1[B, T, D_X]; "
        "gelu(V0[B, T, D_XZ]) -> V2[B, T, D_XZ]",
        "X=2,Y=2,Z=3",
    ),
}


@pytest.mark.parametrize("name", sorted(READ_TWICE))
@pytest.mark.parametrize("defer", [False, True])
def test_every_contribution_is_added(name: str, defer: bool) -> None:
    forward, mesh = READ_TWICE[name]
    bw = backward(forward, mesh, SIZES, defer_reductions=defer)
    assert gradcheck(bw).ok, str(bw.program())
    report = verify(forward, bw.program(), mesh, SIZES, defer_reductions=defer)
    assert report.ok and report.findings == (), str(report)


# a cotangent left partial by a product (deferred reductions), read by both operands of the statement before it
REDUCED_ONCE = {
    "V0 - In": (
        "relu(In[B_X, T_Z, D]) -> V0[B, T_Y, D_X]; V0[B, T_Y, D_X] - In[B_X, T_Z, D] -> V2[B, T, D_YZ]; "
        "V2[B, T, D_YZ] * W3[D, F_Z] -> V3[B_Y, T, F_XZ]",
        "X=2,Y=2,Z=2",
    ),
    "In - In, the partial resharded before its reduction": (
        "In[B, T, D_XYZ] - In[B, T, D_XYZ] -> V0[B_X, T_Y, D_Z]; V0[B_X, T_Y, D_Z] * W1[D, F] -> V1[B, T, F_XYZ]",
        "X=2,Y=2,Z=2,S0=2",
    ),
}


@pytest.mark.parametrize("name", sorted(REDUCED_ONCE))
def test_partial_sums_reduced_for_one_operand_are_not_read_again_for_the_other(name: str) -> None:
    """``dV0``'s plan reduces the partial cotangent, and ``dIn``'s reads a layout that reduction made, not the
    partial sums again, in any layout (a reduction leaves only its output: verify called the second reduction
    a gradient |Z| or |S0| times too large)."""
    forward, mesh = REDUCED_ONCE[name]
    sizes = {"B": 12, "T": 12, "D": 24, "F": 24}
    bw = backward(forward, mesh, sizes, defer_reductions=True)
    cotangent = bw.grads[0].plan.output.name  # the first gradient: the product's, left partial
    reductions = [
        s
        for g in bw.grads
        for s in g.plan.steps
        if s.op.value in ("AllReduce", "ReduceScatter") and s.inputs[0].name == cotangent
    ]
    assert len(reductions) == 1, str(bw.program())
    assert gradcheck(bw).ok, str(bw.program())
    report = verify(forward, bw.program(), mesh, sizes, defer_reductions=True)
    assert report.ok and report.findings == (), str(report)


def test_v0_plus_v0_beside_a_product_adds_its_cotangent_twice() -> None:
    bw = backward(READ_TWICE["a product of V0, and V0 + V0"][0], "X=2", SIZES)
    adds = [str(g.statement) for g in bw.grads if "+" in str(g.statement)]
    assert adds == ["dV0[B, D] + dV1[B, D] -> dV0[B, D]"] * 2


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_layers(), st.sampled_from(["X=2,Y=2,Z=3", "X=2,Y=3,Z=2", "X=3,Y=2,Z=2"]), st.booleans())
def test_the_backward_of_a_random_layer_is_its_gradient_and_verifies(
    source: str, mesh: str, defer: bool
) -> None:
    """The fuzzer's layers (products, functions, residuals and gains on axes X, Y, Z; a value may be read
    twice by one statement): the derived backward equals central differences and verifies clean. Every dim is
    12, which each axis and product of axes divides. A layer whose function reads operands that do not meet
    (the forward's plan reshards one) is derived too: about a third of the layers raised IllegalOperand before
    the product rule's ``dV .* In`` was planned into the cotangent's layout."""
    program = parse(source)
    sizes = {"B": 12, "T": 12, "D": 12, "F": 12}
    bw = backward(program, mesh, sizes, defer_reductions=defer)
    assert gradcheck(bw).ok, str(bw.program())
    report = verify(program, bw.program(), mesh, sizes, defer_reductions=defer)
    assert report.ok, f"{bw.program()}\n{report}"
