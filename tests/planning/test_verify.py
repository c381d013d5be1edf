"""verify: a hand-written backward against the forward, each finding pinned to its statement."""

from __future__ import annotations

import pytest

from shardalg.errors import UsageError
from shardalg.numeric.gradcheck import gradcheck
from shardalg.planning.backward import backward
from shardalg.planning.verify import verify

SIZES = {"B": 1 << 16, "D": 1024, "F": 4096}
DP = "In[B_X, D] * W[D, F] -> Out[B_X, F]"
FSDP = "In[B_X, D] * W[D_X, F] -> Out[B_X, F]"
MEGATRON = "X[B, D] * W1[D, F_Y] -> H[B, F_Y]; H[B, F_Y] * W2[F_Y, D] -> Out[B, D]"

DP_RIGHT = (
    "dOut[B_X, F] * W[D, F] -> dIn[B_X, D]\n"
    "In[B_X, D] * dOut[B_X, F] -> dW[D, F]{U_X}\n"
    "AllReduce_X: dW[D, F]{U_X} -> dW[D, F]"
)
FSDP_HEAD = (
    "AllGather_X: W[D_X, F] -> W[D, F]\n"
    "dOut[B_X, F] * W[D, F] -> dIn[B_X, D]\n"
    "In[B_X, D] * dOut[B_X, F] -> dW[D, F]{U_X}\n"
)
MEGATRON_RIGHT = (
    "dOut[B, D] * W2[F_Y, D] -> dH[B, F_Y]\n"
    "H[B, F_Y] * dOut[B, D] -> dW2[F_Y, D]\n"
    "dH[B, F_Y] * W1[D, F_Y] -> dX[B, D]{U_Y}\n"
    "AllReduce_Y: dX[B, D]{U_Y} -> dX[B, D]\n"
    "X[B, D] * dH[B, F_Y] -> dW1[D, F_Y]"
)


def rules(report):
    return [(f.severity, f.rule, f.statement) for f in report.findings]


@pytest.mark.parametrize(
    "forward, written, mesh",
    [
        (DP, DP_RIGHT, "X=4"),
        (FSDP, FSDP_HEAD + "ReduceScatter_{X,D}: dW[D, F]{U_X} -> dW[D_X, F]", "X=4"),
        (MEGATRON, MEGATRON_RIGHT, "Y=4"),
    ],
)
def test_a_right_backward_has_no_findings(forward, written, mesh):
    report = verify(forward, written, mesh=mesh, sizes=SIZES)
    assert report.ok and report.findings == ()
    assert str(report).startswith("ok:")


def test_allreduce_where_the_forward_gathered_a_sharded_parameter_is_waste():
    written = FSDP_HEAD + "AllReduce_X: dW[D, F]{U_X} -> dW[D, F]\nSlice_{X,D}: dW[D, F] -> dW[D_X, F]"
    report = verify(FSDP, written, mesh="X=4", sizes=SIZES)
    assert report.ok  # correct, only wasteful
    assert rules(report) == [("warning", "wasteful-allreduce", 4)]
    (w,) = report.findings
    # AllReduce moves 2V, ReduceScatter V: V = D·F·2 bytes (bf16) = 8 MiB saved
    assert "ReduceScatter_{X,D}" in w.message and f"saves {1024 * 4096 * 2} bytes" in w.message
    assert w.fix == "ReduceScatter_{X,D}(dW[D, F]{U_X}) -> dW[D_X, F]"


def test_allreduce_leaving_the_gradient_replicated_is_an_error_with_the_cheaper_fix():
    report = verify(FSDP, FSDP_HEAD + "AllReduce_X: dW[D, F]{U_X} -> dW[D, F]", mesh="X=4", sizes=SIZES)
    assert not report.ok
    assert rules(report) == [("error", "gradient-sharding", 4), ("warning", "wasteful-allreduce", 4)]
    assert (
        report.findings[0].fix == "replace statement 4 with ReduceScatter_{X,D}(dW[D, F]{U_X}) -> dW[D_X, F]"
    )


def test_missing_reduction_for_a_replicated_parameter():
    written = "dOut[B_X, F] * W[D, F] -> dIn[B_X, D]\nIn[B_X, D] * dOut[B_X, F] -> dW[D, F]{U_X}"
    report = verify(DP, written, mesh="X=4", sizes=SIZES)
    assert rules(report) == [("error", "missing-reduction", 2)]
    f = report.findings[0]
    assert f.fix == "reduce it: AllReduce_X(dW[D, F]{U_X}) -> dW[D, F]"
    assert str(report) == (
        "WRONG\n"
        "error [missing-reduction] (statement 2): dW[D, F]{U_X} is still partial over X: every device holds a "
        "different partial sum of the gradient of W\n"
        "  In[B_X, D] * dOut[B_X, F] -> dW[D, F]{U_X}\n"
        "  " + "^" * 42 + "\n"
        "  fix: reduce it: AllReduce_X(dW[D, F]{U_X}) -> dW[D, F]"
    )


def test_deferred_reductions_accept_the_unreduced_gradient_of_a_replicated_parameter():
    written = "dOut[B_X, F] * W[D, F] -> dIn[B_X, D]\nIn[B_X, D] * dOut[B_X, F] -> dW[D, F]{U_X}"
    assert verify(DP, written, mesh="X=4", sizes=SIZES, defer_reductions=True).ok
    # but not for an invariant parameter: its gradient must arrive reduced
    inv = "In[B_X, D] * W[D, F]{I_X} -> Out[B_X, F]"
    written_inv = "dOut[B_X, F] * W[D, F]{I_X} -> dIn[B_X, D]\nIn[B_X, D] * dOut[B_X, F] -> dW[D, F]{U_X}"
    report = verify(inv, written_inv, mesh="X=4", sizes=SIZES, defer_reductions=True)
    assert [f.rule for f in report.errors] == ["missing-reduction"]


def test_collective_on_the_wrong_axis():
    written = MEGATRON_RIGHT.replace("AllReduce_Y: dX[B, D]{U_Y}", "AllReduce_Z: dX[B, D]{U_Z}")
    report = verify(MEGATRON, written, mesh="Y=4,Z=2", sizes=SIZES)
    assert rules(report)[0] == ("error", "wrong-axis", 4)
    assert report.findings[0].fix == "AllReduce_Y"
    assert "AllReduce_Z sums over Z, but dX[B, D]{U_Y} is partial over Y" in report.findings[0].message


def test_partial_value_consumed_as_replicated():
    written = MEGATRON_RIGHT.replace(
        "-> dX[B, D]{U_Y}\nAllReduce_Y: dX[B, D]{U_Y} -> dX[B, D]", "-> dX[B, D]"
    )
    report = verify(MEGATRON, written, mesh="Y=4", sizes=SIZES)
    assert rules(report) == [("error", "partial-as-replicated", 3)]
    f = report.findings[0]
    assert "each device holds a partial sum over Y" in f.message
    assert f.span is not None and report.source is not None
    assert report.source[f.span.start : f.span.end] == "dX[B, D]"


def test_replicated_value_summed_again_scales_the_gradient_by_the_axis_size():
    # the classic Megatron bug: transposing the forward's AllReduce into an AllReduce of dOut, which is
    # already whole on every device
    written = "AllReduce_Y: dOut[B, D]{U_Y} -> dOut[B, D]\n" + MEGATRON_RIGHT
    report = verify(MEGATRON, written, mesh="Y=4", sizes=SIZES)
    assert rules(report) == [("error", "scaled-gradient", 1)]
    assert "|Y| = 4 times too large" in report.findings[0].message


def test_missing_and_doubled_contributions_and_non_gradients():
    missing = verify(
        DP,
        "In[B_X, D] * dOut[B_X, F] -> dW[D, F]{U_X}\nAllReduce_X: dW[D, F]{U_X} -> dW[D, F]",
        mesh="X=4",
        sizes=SIZES,
    )
    assert ("error", "missing-gradient", 2) in rules(missing)
    assert any(f.rule == "missing-contribution" for f in missing.findings)
    doubled = verify(DP, DP_RIGHT + "\nIn[B_X, D] * dOut[B_X, F] -> dW[D, F]{U_X}", mesh="X=4", sizes=SIZES)
    assert ("error", "duplicate-contribution", 4) in rules(doubled)
    wrong = verify(DP, "In[B_X, D] * W[D, F] -> dW[B_X, F]", mesh="X=4", sizes=SIZES)
    assert ("error", "not-a-gradient", 1) in rules(wrong)


SQUARE = "C[I, F, B_Y] *_LOCAL C[I, F, B_Y] -> W[I, F, B_Y]"  # a value times itself, dC = dW·C + C·dW
SQUARE_TWO = "dW[I, F, B_Y] * C[I, F, B_Y] -> dC[I, F, B_Y]\nC[I, F, B_Y] * dW[I, F, B_Y] -> dC'[I, F, B_Y]\n"
SQUARE_SIZES = {"I": 2, "F": 3, "B": 4}


@pytest.mark.parametrize("defer", [False, True])
@pytest.mark.parametrize("forward", [SQUARE, SQUARE.replace("*_LOCAL", "*")])
def test_a_product_of_a_value_with_itself_has_two_contributions_that_read_alike(forward, defer):
    """``dW·C`` and ``C·dW`` read the same names: each is one side's contribution, the first not yet computed
    (the fuzzer, seed 79: verify called the derived backward's second one a repeat of the first, and the first
    missing)."""
    bw = backward(forward, "Y=2", SQUARE_SIZES, defer_reductions=defer)
    assert gradcheck(bw).ok
    report = verify(forward, bw.program(), mesh="Y=2", sizes=SQUARE_SIZES, defer_reductions=defer)
    assert report.ok and report.findings == (), str(report)
    add = "dC[I, F, B_Y] + dC'[I, F, B_Y] -> dC[I, F, B_Y]"
    assert verify(forward, SQUARE_TWO + add, mesh="Y=2", sizes=SQUARE_SIZES).findings == ()
    one = verify(forward, SQUARE_TWO.splitlines()[0], mesh="Y=2", sizes=SQUARE_SIZES)
    assert [f.rule for f in one.findings] == ["missing-contribution"]
    third = "C[I, F, B_Y] * dW[I, F, B_Y] -> dC''[I, F, B_Y]\n"
    three = verify(forward, SQUARE_TWO + third + add, mesh="Y=2", sizes=SQUARE_SIZES)
    assert ("error", "duplicate-contribution", 3) in rules(three)


def test_report_json_and_usage_errors():
    report = verify(DP, DP_RIGHT, mesh="X=4", sizes=SIZES)
    j = report.to_json()
    assert j["ok"] is True and j["findings"] == []
    assert j["derived"]["collectives"] == [{"op": "AllReduce", "axes": ["X"]}]
    with pytest.raises(UsageError):
        verify(DP, DP_RIGHT)  # no mesh


def test_what_backward_prints_is_a_backward_verify_takes(tmp_path, capsys):
    # the printed backward reads dH whole for dW after slicing it for dIn: both layouts are held
    from shardalg.cli import main

    forward, argv = "In[B, D] * W[D, F_X] -> H[B, F]", ["--mesh", "X=4", "--sizes", "B=64,D=256,F=1024"]
    assert main(["backward", forward, *argv]) == 0
    printed = capsys.readouterr().out
    assert "Slice_{X,F}(dH[B, F]) -> dH[B, F_X]" in printed and "In[B, D] * dH[B, F] -> dW[D, F]" in printed
    (tmp_path / "bw.txt").write_text(printed, encoding="utf-8")
    assert main(["verify", forward, str(tmp_path / "bw.txt"), *argv]) == 0
    # a layout no collective made is still an error: dH[B_X, F]
    wrong = "\n".join(line.split("#")[0] for line in printed.splitlines()).replace(
        "In[B, D] * dH[B, F]", "In[B, D] * dH[B_X, F]"
    )
    found = verify(forward, wrong, "X=4", {"B": 64, "D": 256, "F": 1024}).findings
    assert ("layout", "dH[B_X, F] is read, but the program made dH[B, F_X]") in [
        (f.rule, f.message) for f in found
    ]


# ---- the fix for a gradient left in the wrong sharding starts from what the program holds ----------------

FSDP_GATHERED_DIN = FSDP_HEAD + (
    "ReduceScatter_{X,D}: dW[D, F]{U_X} -> dW[D_X, F]\nAllGather_X: dIn[B_X, D] -> dIn[B, D]"
)


@pytest.mark.parametrize("batch", [8192, 512])
def test_a_collective_after_the_gradient_was_right_is_dropped(batch):
    # dIn was already In's sharding before statement 5 gathered it; the derived plan of the gradient (an
    # AllGather of W, or at B=512 an AllToAll of a dIn[B, D_X] the program never holds) is not the fix
    report = verify(FSDP, FSDP_GATHERED_DIN, mesh="X=4", sizes={**SIZES, "B": batch})
    assert rules(report) == [("error", "gradient-sharding", 5)]
    (f,) = report.findings
    assert f.fix == "drop statement 5: before it the gradient was already dIn[B_X, D], In's sharding"
    # In is an activation: the message does not call it a parameter
    assert "parameter" not in f.message
    assert f.message.endswith("in In's own sharding, dIn[B_X, D]")


def test_a_gradient_made_in_the_wrong_sharding_gets_the_resharding_of_what_it_holds():
    # the forward gathers In before its product: the product leaves dIn[B, D], and the fix slices that tensor
    # (the derived backward's last collective, which is no Slice, gave only "end with dIn[B_X, D]")
    forward = "AllGather_X(In[B_X, D]) -> In[B, D]; In[B, D] * W[D, F] -> Out[B, F]"
    written = "dOut[B, F] * W[D, F] -> dIn[B, D]; In[B, D] * dOut[B, F] -> dW[D, F]"
    report = verify(forward, written, mesh="X=4")
    assert rules(report) == [("error", "gradient-sharding", 1)]
    assert report.findings[0].fix == "Slice_{X,B}(dIn[B, D]) -> dIn[B_X, D]"


def test_a_reduce_scatter_over_the_wrong_dim_is_replaced_by_the_right_one():
    written = FSDP_HEAD + "ReduceScatter_{X,F}: dW[D, F]{U_X} -> dW[D, F_X]"
    report = verify(FSDP, written, mesh="X=4", sizes={**SIZES, "B": 512})
    assert rules(report) == [("error", "gradient-sharding", 4)]
    assert (
        report.findings[0].fix == "replace statement 4 with ReduceScatter_{X,D}(dW[D, F]{U_X}) -> dW[D_X, F]"
    )


def test_a_missing_reduction_reduces_the_tensor_the_program_holds():
    # statement 3 reduced over X; what is left is to sum dW[D, F]{U_Y} over Y, not to AllReduce_XY the
    # dW[D, F]{U_XY} statement 3 consumed
    forward = "In[B_XY, D] * W[D, F] -> Out[B_XY, F]"
    written = (
        "dOut[B_XY, F] * W[D, F] -> dIn[B_XY, D]\n"
        "In[B_XY, D] * dOut[B_XY, F] -> dW[D, F]{U_XY}\n"
        "AllReduce_X: dW[D, F]{U_XY} -> dW[D, F]{U_Y}"
    )
    report = verify(forward, written, mesh="X=2,Y=2", sizes=SIZES)
    assert rules(report) == [("error", "missing-reduction", 3)]
    fix = report.findings[0].fix
    assert fix.startswith("reduce it: ") and "U_XY" not in fix, fix
    # the planner's cheapest resharding (on a mesh with a spare axis X, a Slice, a ReduceScatter over Y and an
    # AllGather move fewer bytes than AllReduce_Y), from the tensor statement 3 left to the one wanted
    steps = fix.removeprefix("reduce it: ").split("; ")
    assert "(dW[D, F]{U_Y})" in steps[0] and steps[-1].endswith("-> dW[D, F]")


GATHERED_INPUT = "AllGather_X(In[B, D_X]) -> In[B, D]; In[B, D] * W[D, F_X] -> Out[B, F_X]"
ALLREDUCED_INPUT = (
    "dOut[B, F_X] * W[D, F_X] -> dIn[B, D]{U_X}; AllReduce_X(dIn[B, D]{U_X}) -> dIn[B, D]; "
    "Slice_{X,D}(dIn[B, D]) -> dIn[B, D_X]; In[B, D] *_LOCAL dOut[B, F_X] -> dW[D, F_X]"
)


@pytest.mark.parametrize(
    ("declared", "said"),
    [("params W; ", "the activation In is sharded"), ("", "the value In is sharded")],
)
def test_a_wasteful_allreduce_of_an_activations_gradient_does_not_call_it_a_parameter(declared, said):
    """The sequence-parallel gather of an activation, whose gradient is all-reduced then sliced: the warning
    said "the parameter is sharded over X" of In, which ``params W`` declares an activation."""
    report = verify(declared + GATHERED_INPUT, ALLREDUCED_INPUT, mesh="X=4", sizes=SIZES)
    (w,) = report.findings
    assert (w.rule, w.statement) == ("wasteful-allreduce", 2)
    assert said in w.message and "parameter" not in w.message
    assert w.fix == "ReduceScatter_{X,D}(dIn[B, D]{U_X}) -> dIn[B, D_X]"


def test_a_wasteful_allreduce_of_a_declared_parameters_gradient_names_the_parameter():
    written = FSDP_HEAD + "AllReduce_X: dW[D, F]{U_X} -> dW[D, F]\nSlice_{X,D}: dW[D, F] -> dW[D_X, F]"
    (w,) = verify("params W\n" + FSDP, written, mesh="X=4", sizes=SIZES).findings
    assert "the parameter W is sharded over X (the forward gathered it)" in w.message
