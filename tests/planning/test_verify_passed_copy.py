"""verify reads a collective that copies the cotangent a ``+`` passes on into an operand's gradient,
``Slice_{X,B}(dO[B, F]) -> dH[B_X, F]``, as that operand's contribution: a collective is the identity on the
global value, so the gradient *is* the cotangent, resharded (``backward`` writes the same with the name kept,
``Slice_{X,B}(dO[B, F]) -> dO[B_X, F]``, and reads ``dO``). Each program accepted here is clean, and is the
derived backward with the names renamed (or the derived sum in another order), whose numbers ``gradcheck``
confirms. A copy over the wrong axis or into the wrong layout, a copy of a partial cotangent used as the whole
value or of a whole one summed again, and a copy that replaces a contribution the gradient already held (a
collective writes its result, it does not add to it) are still errors, each with its own rule.

Before, the copy was reported as a missing contribution, with a fix that added dO to itself."""

from __future__ import annotations

import re

import pytest

from shardalg.notation.parse import parse
from shardalg.notation.printing import text
from shardalg.numeric.gradcheck import gradcheck
from shardalg.planning.backward import backward
from shardalg.planning.verify import verify

SIZES = {"B": 8, "D": 8, "E": 8, "F": 8}

# the brief's example: dH is dO, sliced into H's sharding
RESIDUAL = "In[B_X, D] * W[D, F] -> H[B_X, F]\nH[B_X, F] + R[B, F] -> O[B, F]"
RESIDUAL_COPY = {
    False: (
        "Slice_{X,B}(dO[B, F]) -> dH[B_X, F]\n"
        "In[B_X, D] * dH[B_X, F] -> dW[D, F]{U_X}\n"
        "AllReduce_X(dW[D, F]{U_X}) -> dW[D, F]\n"
        "dH[B_X, F] * W[D, F] -> dIn[B_X, D]"
    ),
    True: (  # reductions deferred: dW is left partial, as the derived backward leaves it
        "Slice_{X,B}(dO[B, F]) -> dH[B_X, F]\n"
        "In[B_X, D] * dH[B_X, F] -> dW[D, F]{U_X}\n"
        "dH[B_X, F] * W[D, F] -> dIn[B_X, D]"
    ),
}

# a residual X + Att -> Y beside products on two axes; Y gathered, so its cotangent is sliced into Att's sharding
BLOCK = (
    "X[B_X, D] * Wq[D, F_Y] -> Q[B_X, F_Y]; Q[B_X, F_Y] * Wo[F_Y, D] -> Att[B_X, D]{U_Y}; "
    "AllReduce_Y(Att[B_X, D]{U_Y}) -> Att[B_X, D]; X[B_X, D] + Att[B_X, D] -> Y[B_X, D]; "
    "AllGather_X(Y[B_X, D]) -> Y[B, D]"
)
BLOCK_COPY = {
    False: (
        "Slice_{X,B}(dY[B, D]) -> dAtt[B_X, D]\n"
        "dAtt[B_X, D] * Wo[F_Y, D] -> dQ[B_X, F_Y]\n"
        "Q[B_X, F_Y] * dAtt[B_X, D] -> dWo[F_Y, D]{U_X}\n"
        "AllReduce_X(dWo[F_Y, D]{U_X}) -> dWo[F_Y, D]\n"
        "dQ[B_X, F_Y] * Wq[D, F_Y] -> dX[B_X, D]{U_Y}\n"
        "AllReduce_Y(dX[B_X, D]{U_Y}) -> dX[B_X, D]\n"
        "X[B_X, D] * dQ[B_X, F_Y] -> dWq[D, F_Y]{U_X}\n"
        "AllReduce_X(dWq[D, F_Y]{U_X}) -> dWq[D, F_Y]\n"
        "Slice_{X,B}(dY[B, D]) -> dY[B_X, D]\n"
        "dX[B_X, D] + dY[B_X, D] -> dX[B_X, D]"
    ),
    True: (
        "Slice_{X,B}(dY[B, D]) -> dAtt[B_X, D]\n"
        "dAtt[B_X, D] * Wo[F_Y, D] -> dQ[B_X, F_Y]\n"
        "Q[B_X, F_Y] * dAtt[B_X, D] -> dWo[F_Y, D]{U_X}\n"
        "dQ[B_X, F_Y] * Wq[D, F_Y] -> dX[B_X, D]{U_Y}\n"
        "X[B_X, D] * dQ[B_X, F_Y] -> dWq[D, F_Y]{U_X}\n"
        "AllReduce_Y(dX[B_X, D]{U_Y}) -> dX[B_X, D]\n"
        "Slice_{X,B}(dY[B, D]) -> dY[B_X, D]\n"
        "dX[B_X, D] + dY[B_X, D] -> dX[B_X, D]"
    ),
}

# H is read by the + and by a product: dH = dP·Vᵀ + dO, two contributions
TWO_READERS = (
    "In[B_X, D] * W[D, F] -> H[B_X, F]; H[B_X, F] + R[B, F] -> O[B, F]; H[B_X, F] * V[F, E] -> P[B_X, E]"
)
TWO_READERS_HEAD = "H[B_X, F] * dP[B_X, E] -> dV[F, E]{U_X}\nAllReduce_X(dV[F, E]{U_X}) -> dV[F, E]\n"
TWO_READERS_TAIL = (
    "\ndH[B_X, F] * W[D, F] -> dIn[B_X, D]\n"
    "In[B_X, D] * dH[B_X, F] -> dW[D, F]{U_X}\n"
    "AllReduce_X(dW[D, F]{U_X}) -> dW[D, F]"
)

# the cotangent partial over Y (V's E is sharded over Y), H and R both get it
PARTIAL = (
    "In[B_X, D] * W[D, F] -> H[B_X, F]; H[B_X, F] + R[B_X, F] -> O[B_X, F]; "
    "O[B_X, F] * V[F, E_Y] -> P[B_X, E_Y]"
)
PARTIAL_HEAD = (
    "dP[B_X, E_Y] * V[F, E_Y] -> dO[B_X, F]{U_Y}\n"
    "O[B_X, F] * dP[B_X, E_Y] -> dV[F, E_Y]{U_X}\n"
    "AllReduce_X(dV[F, E_Y]{U_X}) -> dV[F, E_Y]\n"
)
PARTIAL_TAIL = (
    "\nIn[B_X, D] * dH[B_X, F] -> dW[D, F]{U_X}\n"
    "AllReduce_X(dW[D, F]{U_X}) -> dW[D, F]\n"
    "dH[B_X, F] * W[D, F] -> dIn[B_X, D]"
)


def rules(report):
    return [(f.severity, f.rule, f.statement) for f in report.findings]


def statements(program) -> set[str]:
    """A program's statements as text, a local product written as a product (``*_LOCAL`` is ``*``)."""
    return {text(s).replace(" *_LOCAL ", " * ") for s in program.statements}


def renamed(written: str, names: dict[str, str]) -> set[str]:
    """The hand-written backward's statements with its gradient names renamed (``dH`` back to ``dO``)."""
    for old, new in names.items():
        written = re.sub(rf"\b{old}\b", new, written)
    return statements(parse(written))


# forward, its hand-written backward by deferral, mesh, the copy's name -> the cotangent's: the residual's dH is
# a copy of dO; the block's dAtt a copy of dY, and X's gradient gets dY added to its product's (dY kept under
# its own name)
COPIES = {
    "residual": (RESIDUAL, RESIDUAL_COPY, "X=4", {"dH": "dO"}),
    "block on two axes": (BLOCK, BLOCK_COPY, "X=2,Y=2", {"dAtt": "dY"}),
}


@pytest.mark.parametrize("defer", [False, True])
@pytest.mark.parametrize("case", sorted(COPIES))
def test_a_collective_copy_of_the_passed_cotangent_is_the_operands_gradient(case: str, defer: bool) -> None:
    forward, written, mesh, names = COPIES[case]
    report = verify(forward, written[defer], mesh, SIZES, defer_reductions=defer)
    assert report.ok and report.findings == (), str(report)
    # it is the derived backward, the copy named as the cotangent, and that one matches the dense gradient
    bw = backward(forward, mesh, SIZES, defer_reductions=defer)
    assert renamed(written[defer], names) == statements(bw.program())
    assert gradcheck(bw).ok


def test_a_product_after_the_copy_adds_to_it() -> None:
    """A second product into a gradient adds to it (the module's rule), so copy-then-product is dO + dP·Vᵀ:
    the derived sum, in the other order."""
    written = (
        TWO_READERS_HEAD
        + "Slice_{X,B}(dO[B, F]) -> dH[B_X, F]\ndP[B_X, E] * V[F, E] -> dH[B_X, F]"
        + TWO_READERS_TAIL
    )
    report = verify(TWO_READERS, written, "X=4", SIZES)
    assert report.ok and report.findings == (), str(report)
    bw = backward(TWO_READERS, "X=4", SIZES)
    derived = statements(bw.program())
    assert {"dP[B_X, E] * V[F, E] -> dH[B_X, F]", "dH[B_X, F] + dO[B_X, F] -> dH[B_X, F]"} <= derived
    assert gradcheck(bw).ok


def test_a_copy_that_replaces_a_contribution_already_written_is_an_error() -> None:
    written = (
        TWO_READERS_HEAD
        + "dP[B_X, E] * V[F, E] -> dH[B_X, F]\nSlice_{X,B}(dO[B, F]) -> dH[B_X, F]"
        + TWO_READERS_TAIL
    )
    report = verify(TWO_READERS, written, "X=4", SIZES)
    assert rules(report) == [("error", "overwritten-contribution", 4)], str(report)
    (f,) = report.findings
    assert f.message == (
        "dH already holds what statement 3 wrote; this collective replaces it with the cotangent dO alone (a "
        "collective writes its result, it does not add to it), so the gradient of H loses that term"
    )
    # the fix is the derived backward's: the copy under the cotangent's name, then the addition
    assert f.fix == (
        "keep the cotangent's name and add it: Slice_{X,B}(dO[B, F]) -> dO[B_X, F]; "
        "dO[B_X, F] + dH[B_X, F] -> dH[B_X, F]"
    )
    assert {"Slice_{X,B}(dO[B, F]) -> dO[B_X, F]", "dH[B_X, F] + dO[B_X, F] -> dH[B_X, F]"} <= statements(
        backward(TWO_READERS, "X=4", SIZES).program()
    )
    # the program already holds dO in dH's sharding: the fix is the addition in the copy's place
    held = TWO_READERS_HEAD + (
        "Slice_{X,B}(dO[B, F]) -> dO[B_X, F]\ndP[B_X, E] * V[F, E] -> dH[B_X, F]\n"
        "Slice_{X,B}(dO[B, F]) -> dH[B_X, F]"
    )
    report = verify(TWO_READERS, held + TWO_READERS_TAIL, "X=4", SIZES)
    assert rules(report) == [("error", "overwritten-contribution", 5)], str(report)
    assert report.findings[0].fix == "add it instead: dO[B_X, F] + dH[B_X, F] -> dH[B_X, F]"


def test_a_value_added_to_itself_gets_the_copy_and_one_addition() -> None:
    """``H + H``: dH is 2·dO. The copy is one term and an addition the other; the copy alone misses one (the fix
    reshards dO, which the program holds only whole), and a second copy replaces the first."""
    forward = "In[B_X, D] * W[D, F] -> H[B_X, F]; H[B_X, F] + H[B_X, F] -> O[B, F]"
    tail = (
        "\ndH[B_X, F] * W[D, F] -> dIn[B_X, D]\nIn[B_X, D] * dH[B_X, F] -> dW[D, F]{U_X}\n"
        "AllReduce_X(dW[D, F]{U_X}) -> dW[D, F]"
    )
    copy, kept = "Slice_{X,B}(dO[B, F]) -> dH[B_X, F]\n", "Slice_{X,B}(dO[B, F]) -> dO[B_X, F]\n"
    both = verify(forward, copy + kept + "dO[B_X, F] + dH[B_X, F] -> dH[B_X, F]" + tail, "X=4", SIZES)
    assert both.ok and both.findings == (), str(both)
    bw = backward(forward, "X=4", SIZES)
    assert "dO[B_X, F] + dO[B_X, F] -> dH[B_X, F]" in statements(bw.program())
    assert gradcheck(bw).ok
    alone = verify(forward, copy.rstrip() + tail, "X=4", SIZES)
    assert rules(alone) == [("error", "missing-contribution", 4)]
    assert alone.findings[0].fix == (
        "reshard dO[B, F] into dH's sharding and add it: dO[B_X, F] + dH[B_X, F] -> dH[B_X, F]"
    )
    twice = verify(forward, copy + copy.rstrip() + tail, "X=4", SIZES)
    assert rules(twice) == [("error", "overwritten-contribution", 2)]
    thrice = verify(
        forward, kept + copy + "dO[B_X, F] + dH[B_X, F] -> dH[B_X, F]\n" * 2 + tail.lstrip(), "X=4", SIZES
    )
    assert rules(thrice) == [("error", "duplicate-contribution", 4)]


@pytest.mark.parametrize(
    ("copy", "expected"),
    [
        # over the wrong axis: Slice_Y makes dY[B_Y, D], not Att's sharding
        ("Slice_{Y,B}(dY[B, D]) -> dAtt[B_X, D]", [("error", "layout", 1)]),
        # into the wrong layout: dAtt is then read as Att's sharding, which the program never made
        ("Slice_{X,D}(dY[B, D]) -> dAtt[B, D_X]", [("error", "layout", 2)]),
    ],
    ids=["wrong axis", "wrong layout"],
)
def test_a_copy_over_the_wrong_axis_or_into_the_wrong_layout_is_an_error(copy: str, expected: list) -> None:
    written = BLOCK_COPY[False].replace("Slice_{X,B}(dY[B, D]) -> dAtt[B_X, D]", copy)
    assert written != BLOCK_COPY[False]
    report = verify(BLOCK, written, "X=2,Y=2", SIZES)
    assert not report.ok
    assert rules(report)[: len(expected)] == expected, str(report)
    assert "missing-contribution" not in [f.rule for f in report.findings]


def test_a_copy_into_an_inputs_gradient_in_another_sharding_is_a_gradient_sharding_error() -> None:
    """R is whole; dO sliced into dR[B_X, F] is dR's contribution, ending in the wrong sharding."""
    written = RESIDUAL_COPY[False] + "\nSlice_{X,B}(dO[B, F]) -> dR[B_X, F]"
    report = verify(RESIDUAL, written, "X=4", SIZES)
    assert rules(report) == [("error", "gradient-sharding", 5)], str(report)
    assert report.findings[0].message.startswith("dR ends as dR[B_X, F], but R is R[B, F]")


@pytest.mark.parametrize(
    ("copy", "expected"),
    [
        # right: the copy is the reduction (and each operand gets its own)
        (
            "AllReduce_Y(dO[B_X, F]{U_Y}) -> dH[B_X, F]\nAllReduce_Y(dO[B_X, F]{U_Y}) -> dR[B_X, F]",
            [("warning", "extra-communication", None)],
        ),
        # the partial cotangent copied as the whole value (dR reduced by the program, dH not)
        (
            "AllReduce_Y(dO[B_X, F]{U_Y}) -> dR[B_X, F]\nAllGather_X(dO[B_X, F]) -> dH[B, F]\n"
            "Slice_{X,B}(dH[B, F]) -> dH[B_X, F]",
            [("error", "partial-as-replicated", 5)],
        ),
        # the cotangent reduced, then summed again in the copy: dH |Y| times too large
        (
            "AllReduce_Y(dO[B_X, F]{U_Y}) -> dO[B_X, F]\nAllReduce_Y(dO[B_X, F]{U_Y}) -> dH[B_X, F]",
            [("error", "scaled-gradient", 5)],
        ),
    ],
    ids=["reduced in the copy", "partial copied as whole", "reduced twice"],
)
def test_a_copy_of_a_partial_cotangent_must_reduce_it_once(copy: str, expected: list) -> None:
    report = verify(PARTIAL, PARTIAL_HEAD + copy + PARTIAL_TAIL, "X=2,Y=2", SIZES)
    assert rules(report) == expected, str(report)
    # the derived backward reduces dO once, then reads it for both operands
    bw = backward(PARTIAL, "X=2,Y=2", SIZES)
    assert "AllReduce_Y(dO[B_X, F]{U_Y}) -> dO[B_X, F]" in statements(bw.program())
    assert gradcheck(bw).ok


def test_the_copy_is_the_cotangent_while_nothing_adds_to_it() -> None:
    """``Slice_{X,B}(dY[B, D]) -> dAtt[B_X, D]`` makes dAtt the cotangent dY in X's sharding: adding dAtt to dX
    adds dY (it was called not-a-gradient, so dY had to be sliced a second time); twice is a doubled term."""
    copy_added = BLOCK_COPY[False].replace(
        "Slice_{X,B}(dY[B, D]) -> dY[B_X, D]\ndX[B_X, D] + dY[B_X, D] -> dX[B_X, D]",
        "dX[B_X, D] + dAtt[B_X, D] -> dX[B_X, D]",
    )
    assert copy_added != BLOCK_COPY[False]
    report = verify(BLOCK, copy_added, "X=2,Y=2", SIZES)
    assert report.ok and report.findings == (), str(report)
    twice = copy_added + "\ndX[B_X, D] + dAtt[B_X, D] -> dX[B_X, D]"
    assert [r for _, r, _ in rules(verify(BLOCK, twice, "X=2,Y=2", SIZES))] == ["duplicate-contribution"]


def test_a_copy_a_contribution_was_added_to_is_no_longer_the_cotangent() -> None:
    """Att is read by the + and by a product: once dZ·W3ᵀ is added into the copy dAtt, dAtt is dY plus that
    term, and adding it to dX as if it were dY is an error (adding dY itself is right)."""
    forward = BLOCK + "; Att[B_X, D] * W3[D, E] -> Z[B_X, E]"
    body = (
        "Slice_{X,B}(dY[B, D]) -> dAtt[B_X, D]\n"
        "dZ[B_X, E] * W3[D, E] -> dAtt[B_X, D]\n"
        "Att[B_X, D] * dZ[B_X, E] -> dW3[D, E]{U_X}\n"
        "AllReduce_X(dW3[D, E]{U_X}) -> dW3[D, E]\n"
        + BLOCK_COPY[False].split("\n", 1)[1].rsplit("\nSlice_{X,B}(dY[B, D])", 1)[0]
        + "\n"
    )
    right = body + "Slice_{X,B}(dY[B, D]) -> dY[B_X, D]\ndX[B_X, D] + dY[B_X, D] -> dX[B_X, D]"
    assert verify(forward, right, "X=2,Y=2", SIZES).ok
    wrong = verify(forward, body + "dX[B_X, D] + dAtt[B_X, D] -> dX[B_X, D]", "X=2,Y=2", SIZES)
    assert [(sev, r, n) for sev, r, n in rules(wrong) if sev == "error"] == [("error", "not-a-gradient", 12)]
