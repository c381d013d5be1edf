"""backward(): the API, its errors, its printing, and the ``backward`` / ``verify`` commands."""

from __future__ import annotations

import json

import pytest

import shardalg as sa
from shardalg.algebra.mesh import Mesh
from shardalg.cli import main
from shardalg.errors import ShapeMismatch, UsageError
from shardalg.notation.parse import parse
from shardalg.planning.backward import backward
from shardalg.planning.forward import analyze, grad_name

TRAIN = {"B": 1 << 16, "D": 1024, "F": 4096}
DP = "In[B_X, D] * W[D, F] -> Out[B_X, F]"
FSDP = "In[B_X, D] * W[D_X, F] -> Out[B_X, F]"


def test_public_names():
    # through the lazy exports (once a submodule is imported, ``shardalg.<name>`` is that module: see report)
    assert sa.__getattr__("backward").__module__ == "shardalg.api"  # backward with no made-up size
    assert sa.backward(DP, "X=4", TRAIN).collectives == backward(DP, "X=4", TRAIN).collectives
    assert sa.__getattr__("verify").__module__ == "shardalg.planning.verify"
    assert sa.__getattr__("transpose").__module__ == "shardalg.algebra.transpose"
    assert grad_name("W_in") == "dW_in"


def test_gradient_einsums_and_reasons():
    bw = backward(FSDP, Mesh(X=4), TRAIN)
    assert [(g.of, g.einsum, g.side, g.accumulate) for g in bw.grads] == [
        ("In", 0, "left", False),
        ("W", 0, "right", False),
    ]
    assert str(bw.grads[0].statement) == "dOut[B_X, F] * W[D_X, F] -> dIn[B_X, D]"
    assert str(bw.grads[1].statement) == "In[B_X, D] * dOut[B_X, F] -> dW[D_X, F]"
    assert bw.grads[0].reason == "gradient of statement 1 (In·W -> Out): dIn = dOut·Wᵀ"
    assert [str(t) for t in bw.seeds] == ["dOut[B_X, F]"]
    assert str(bw).splitlines() == [str(line) for line in str(bw).splitlines()]
    text = str(bw)
    assert text.splitlines()[0].startswith("AllGather_X(W[D_X, F]) -> W[D, F]")
    assert "# " in text  # reasons are comments
    assert bw.latex().startswith("\\begin{aligned}")
    assert "·" in bw.unicode() or "→" in bw.unicode()


def test_program_of_statements_round_trips_through_the_parser():
    bw = backward(FSDP, Mesh(X=4), TRAIN)
    prog = bw.program()
    assert parse(str(prog)).statements == prog.statements


def test_a_value_used_twice_gets_its_gradients_summed():
    bw = backward(
        "A[I, J] * W[J, K] -> H[I, K]; H[I, K] * W[J, K] -> Out[I, J]", Mesh(X=2), {"I": 8, "J": 8, "K": 8}
    )
    assert [(g.of, g.accumulate) for g in bw.grads] == [("H", False), ("W", False), ("A", False), ("W", True)]
    assert "added to dW" in bw.grads[-1].reason


QKV = (
    "params Wq, Wk, Wv\nX[B, D] * Wq[D, H_Y] -> Q[B, H_Y]\nX[B, D] * Wk[D, H_Y] -> K[B, H_Y]\n"
    "X[B, D] * Wv[D, H_Y] -> V[B, H_Y]"
)
SHARED_FSDP = "params W\nX[B_X, D] * W[D_X, F] -> H[B_X, F]\nY[B_X, D] * W[D_X, F] -> G[B_X, F]"


def test_partial_sums_of_a_gradient_are_added_before_one_reduction():
    """Megatron's backward: Q's, K's and V's projections each give X a partial sum over Y; they are added and
    all-reduced once (three AllReduces before shardalg.planning.accumulate). FSDP's weight read twice: one
    ReduceScatter of the summed partials."""
    bw = backward(QKV, Mesh(Y=4), {"B": 512, "D": 4096, "H": 4096})
    assert bw.collectives == (("AllReduce", ("Y",)),)
    adds = [str(s.statement()) for s in bw.steps if s.op.value == "add"]
    assert adds == ["dX[B, D]{U_Y} + dX'[B, D]{U_Y} -> dX[B, D]{U_Y}"] * 2
    assert sa.verify(QKV, bw.program(), Mesh(Y=4), {"B": 512, "D": 4096, "H": 4096}).ok
    # the first contribution ends where its finish started: its statement says so too
    assert str(bw.grads[0].statement) == "dV[B, H_Y] * Wv[D, H_Y] -> dX[B, D]{U_Y}"
    shared = backward(SHARED_FSDP, Mesh(X=4), {"B": 4096, "D": 128, "F": 256})
    assert [c for c in shared.collectives if c[0] == "ReduceScatter"] == [("ReduceScatter", ("X",))]
    assert [str(g.statement) for g in shared.grads if g.accumulate] == [
        "X[B_X, D] * dH[B_X, F] -> dW'[D, F]{U_X}"
    ]
    assert sa.verify(SHARED_FSDP, shared.program(), Mesh(X=4), {"B": 4096, "D": 128, "F": 256}).ok


def test_a_contribution_whose_plan_ends_finished_is_added_after_it():
    """With no partial sum to share (each contribution gathered whole), the second contribution is written
    into dX' and added to the finished dX: the program says where it adds, and verify reads it so."""
    sizes = {"B": 4096, "D": 1024, "H": 1024}
    bw = backward(QKV, Mesh(Y=4), sizes)
    assert "AllReduce" not in {op for op, _ in bw.collectives}
    adds = [str(s.statement()) for s in bw.steps if s.op.value == "add"]
    assert adds == ["dX[B, D] + dX'[B, D] -> dX[B, D]"] * 2
    assert sa.verify(QKV, bw.program(), Mesh(Y=4), sizes).ok


def test_reading_a_value_in_a_sharding_the_program_did_not_give_it_is_an_error():
    with pytest.raises(ShapeMismatch, match="it was last W\\[D_X, F\\]"):
        analyze(parse("W[D_X, F] * V[F, K] -> H[D_X, K]; In[B, D] * W[D, F] -> Out[B, F]"), Mesh(X=4), {})


@pytest.mark.parametrize(
    "program, message",
    [
        ("A[I, J] * B[J, K]", "result written"),
        ("A[I, J] * B[J, K] * C[K, L] -> D[I, L]", "one product per statement"),
        ("A[I_X, J]", "no product"),
        ("A[I, J] * B[J, K] -> C[I, K]; A[I, J] * B[J, K] -> C[I, K]", "assigned twice"),
    ],
)
def test_programs_backward_cannot_read(program, message):
    with pytest.raises(UsageError, match=message):
        backward(program, Mesh(X=2))


def test_mesh_is_required_or_declared():
    with pytest.raises(UsageError, match="needs a mesh"):
        backward(DP)
    assert backward("mesh X=4; " + DP, sizes=TRAIN).collectives == (("AllReduce", ("X",)),)


# ---- the commands -------------------------------------------------------------------------------------


def test_cli_backward_text_and_json(capsys):
    assert main(["backward", FSDP, "--mesh", "X=4", "--sizes", "B=65536,D=1024,F=4096"]) == 0
    out = capsys.readouterr().out
    assert "ReduceScatter_{X,D}" in out
    assert main(["backward", FSDP, "--mesh", "X=4", "--sizes", "B=65536,D=1024,F=4096", "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert [c["op"] for c in j["collectives"]] == ["AllGather", "ReduceScatter"]
    assert j["gradients"] == {"In": "dIn[B_X, D]", "W": "dW[D_X, F]", "Out": "dOut[B_X, F]"}


def test_cli_backward_defer_and_latex(capsys):
    assert (
        main(
            [
                "backward",
                DP,
                "--mesh",
                "X=4",
                "--sizes",
                "B=65536,D=1024,F=4096",
                "--defer-reductions",
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["gradients"]["W"] == "dW[D, F]{U_X}"
    assert (
        main(["backward", DP, "--mesh", "X=4", "--sizes", "B=65536,D=1024,F=4096", "--format", "latex"]) == 0
    )
    assert "\\cdot" in capsys.readouterr().out


def test_cli_verify_exit_codes(capsys):
    right = "dOut[B_X, F] * W[D, F] -> dIn[B_X, D]; In[B_X, D] * dOut[B_X, F] -> dW[D, F]{U_X}; AllReduce_X: dW[D, F]{U_X} -> dW[D, F]"
    big = ["--sizes", "B=65536,D=1024,F=4096"]  # the derived backward's plans are chosen at sizes given
    assert main(["verify", DP, right, "--mesh", "X=4", *big]) == 0
    assert capsys.readouterr().out.startswith("ok")
    wrong = right.split("; AllReduce")[0]
    assert main(["verify", "--forward", DP, "--backward", wrong, "--mesh", "X=4", *big]) == 1
    assert "missing-reduction" in capsys.readouterr().err
    assert main(["verify", DP, wrong, "--mesh", "X=4", "--json", *big]) == 1
    j = json.loads(capsys.readouterr().out)
    assert j["ok"] is False and j["findings"][0]["rule"] == "missing-reduction"
    assert main(["verify", DP, "--mesh", "X=4"]) == 2
    assert main(["verify", DP, "dW[D, F", "--mesh", "X=4"]) == 2  # a parse error
