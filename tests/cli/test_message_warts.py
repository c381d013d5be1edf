"""Messages that were not the notation or plain English: a summary's sub-axis subscript, the bytes of a
collective over one device, "1 devices", a positive size called not NAME=INT, an API name shown to CLI users."""

from __future__ import annotations

import pytest

import shardalg as sa
from shardalg.cli import main

PROGRAM = "A[I_X, J] · B[J, K] -> C[I, K]\nD[I, K] · B[K, J] -> E[I, J]"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_summary_braces_a_sub_axis_as_the_step_line_does(capsys: pytest.CaptureFixture[str]) -> None:
    """The summary comment printed ``AllGather_X:(1)2(A)``; the step line prints ``AllGather_{X:(1)2}``."""
    code, out, err = run(capsys, "plan", "A[I_{X:(1)2}, J] · B[J, K] -> C[I, K]", "--mesh", "X=4")
    assert code == 0, err
    assert "# AllGather_{X:(1)2}(A) (2*I*J bytes)\n" in out
    assert "# AllGather_{X:(1)2}(C) (2*I*K bytes)\n" in out
    assert "_X:(1)2(" not in out


def test_plan_summary_keeps_letter_axes_run_together() -> None:
    from shardalg.planning.symbolic import summary

    sizes = {"I": 64, "J": 64, "K": 64}
    p = sa.plan("A[I, J_XY] · B[J_XY, K] -> C[I, K]", sa.Mesh(X=4, Y=2), sizes)
    assert summary(p) == "AllGather_Y(A), AllToAll_Y(B), ReduceScatter_X(C), AllGather_YX(C)"
    p = sa.plan("A[I, J_{data}] · B[J_{data}, K] -> C[I, K]", sa.Mesh(data=4, model=2), sizes)
    assert summary(p) == "Slice_{model}(C), ReduceScatter_{data}(C), AllGather_{model,data}(C)"
    assert "AllGather_{model,data}(C[I, K_{model,data}]) -> C[I, K]" in str(p)


def test_a_collective_over_one_device_moves_no_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    """``plan --all`` said 32 bytes for an AllGather over X=1 while ``cost`` priced it 0. On one device every
    placement computes the same product, so the planner takes one (gathering A first or C after are one plan
    there: :mod:`tests.planning.test_size_one_axes`)."""
    stmt = "A[I_X, J] · B[J, K] -> C[I, K]"
    code, out, err = run(capsys, "plan", stmt, "--mesh", "X=1", "--sizes", "I=4,J=4,K=4", "--all")
    assert code == 0, err
    assert "# plan 1 of 1: 0 bytes communicated; AllGather_X(C)\n" in out
    code, out, err = run(capsys, "cost", stmt, "--mesh", "X=1", "--sizes", "I=4,J=4,K=4")
    assert code == 0 and "AllGather_X(C[I_X, K]) -> C[I, K]\n    comms 0 " in out, out + err
    # two devices still move the gathered bytes
    code, out, err = run(capsys, "plan", stmt, "--mesh", "X=2", "--sizes", "I=4,J=4,K=4", "--all")
    assert code == 0 and "# plan 1 of 2: 32 bytes communicated; AllGather_X(A)\n" in out, out + err


def test_one_device_and_one_layer_are_singular(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "shape", "A[I_X, J]", "--mesh", "X=1", "--sizes", "I=4,J=4")
    assert code == 0 and "mesh              X=1 (1 device)\n" in out, out + err
    code, out, err = run(capsys, "shape", "A[I_X, J]", "--mesh", "X=2", "--sizes", "I=4,J=4")
    assert code == 0 and "mesh              X=2 (2 devices)\n" in out, out + err
    program = "params W\nX[B, D] · W[D, F] -> Y[B, F]"
    code, out, err = run(capsys, "memory", program, "--mesh", "X=1", "--sizes", "B=8,D=8,F=8")
    assert code == 0, err
    assert out.startswith("parameters   64 (1 layer)\nmesh         X=1 (1 device)\n"), out
    code, out, err = run(capsys, "memory", "layers 2\n" + program, "--mesh", "X=2", "--sizes", "B=8,D=8,F=8")
    assert code == 0 and "(2 layers)\n" in out and "X=2 (2 devices)\n" in out, out + err


@pytest.mark.parametrize(
    ("size", "said"),
    [
        ("I=0", "bad size 'I=0': the size of I must be a positive integer, not 0 (e.g. I=1024)"),
        ("I=-4", "bad size 'I=-4': the size of I must be a positive integer, not -4 (e.g. I=1024)"),
        ("I=007", "the size of I must be a positive integer written without leading zeros, not 007"),
        ("I=abc", "bad size 'I=abc': write NAME=INT, e.g. I=1024,J=4096"),
    ],
)
def test_a_size_that_is_not_positive_is_said_so(
    capsys: pytest.CaptureFixture[str], size: str, said: str
) -> None:
    code, out, err = run(capsys, "shape", "A[I_X, J]", "--mesh", "X=1", "--sizes", f"{size},J=4")
    assert code == 2 and said in err, out + err


@pytest.mark.parametrize("command", ["plan", "simulate"])
def test_a_program_given_to_one_statement_command_names_shardalg_check(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """``simulate`` of two statements said "check a program with check_program", an API name."""
    if command == "plan":  # plan plans a program statement by statement; --json takes one statement
        code, out, err = run(capsys, "plan", PROGRAM, "--mesh", "X=4")
        assert code == 0 and "# statement 2 of 2: D[I, K] * B[K, J] -> E[I, J]\n" in out, out + err
        with pytest.raises(sa.UsageError, match=r"with `shardalg check PROGRAM --mesh \.\.\.`"):
            sa.plan(PROGRAM, sa.Mesh(X=4))
        return
    code, out, err = run(capsys, command, PROGRAM, "--mesh", "X=4")
    assert code == 2, out + err
    assert (
        "not 2: give one statement, or check the whole program with `shardalg check PROGRAM --mesh ...`"
        in err
    )
    assert "check a program with check_program" not in err
