"""``shardalg export`` and ``shardalg show`` through the CLI: output, exit codes, and --check."""

from __future__ import annotations

import pytest

from shardalg.cli import main

FSDP = "In[B_X, D] * W[D_X, F] -> Out[B_X, F]"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_export_jax_prints_a_module(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "export", "jax", FSDP, "--mesh", "X=4")
    assert code == 0
    assert "W_1 = jax.lax.all_gather(W, 'X', axis=0, tiled=True, to='varying')" in out
    assert "def forward(In, W, mesh=None):" in out
    compile(out, "fsdp.py", "exec")


def test_export_torch_backward_prints_the_gradients(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "export", "torch", FSDP, "--mesh", "X=4", "--backward")
    assert code == 0
    assert "def backward(dOut, W, In, mesh):" in out
    assert "_reduce_scatter(dW, mesh.get_group('X'), dim=0)" in out
    compile(out, "fsdp_backward.py", "exec")


def test_mesh_from_the_program(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "export", "jax", "mesh X=2\n" + FSDP)
    assert code == 0 and "MESH_SHAPE = (2,)" in out


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["export", "jax", FSDP], 2, "give the mesh"),
        (["export", "jax", "A[I_X, J_X] * B[J, K] -> C[I, K]", "--mesh", "X=4"], 1, "axis-used-twice"),
        (["export", "torch", "A[I_X, J", "--mesh", "X=4"], 2, "[syntax]"),
        (["show", "A[I_X, J_X]", "--mesh", "X=2"], 1, "axis-used-twice"),
        (["show", "A[I_Q, J]", "--mesh", "X=2"], 1, "unknown-axis"),
    ],
)
def test_errors_and_exit_codes(
    capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str
) -> None:
    got, out, err = run(capsys, *argv)
    assert got == code
    assert message in err
    assert out == ""


def test_show_text_tikz_and_a_collective(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "show", "A[I_X, J]{U_Y}", "--mesh", "X=2,Y=2")
    assert code == 0 and "X=1 | I1 J +0 | I1 J +1 |" in out
    code, out, _ = run(capsys, "show", "A[I_X, J]", "--mesh", "X=2", "--format", "tikz")
    assert code == 0 and out.startswith(r"\begin{tikzpicture}")
    code, out, _ = run(capsys, "show", "AllGather_X(A[I_X, J])", "--mesh", "X=2")
    assert code == 0 and "| AllGather_X" in out and "after:" in out


@pytest.mark.parametrize("fmt", ["text", "tikz"])
@pytest.mark.parametrize("expr", ["A[I_{Y:(1)2}, J]", "Permute_{X,Y:(1)2}(A[I_{X,Y:(2)2}, J]) -> A[I_Y, J]"])
def test_show_draws_sub_axes(capsys: pytest.CaptureFixture[str], expr: str, fmt: str) -> None:
    code, out, err = run(capsys, "show", expr, "--mesh", "X=2,Y=4", "--format", fmt)
    assert code == 0, err
    assert "I1 J" in out if fmt == "text" else r"$I_{1}\,J$" in out


def test_show_refuses_a_bad_sub_axis(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "show", "A[I_{Y:(1)3}, J]", "--mesh", "X=2,Y=4")
    assert code == 1 and out == ""
    assert "sub-axis Y:(1)3 is not a factor of Y=4" in err and "^^^" in err and "internal" not in err


def test_check_jax_runs_the_code(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("jax", reason="jax is not installed (pip install 'shardalg[jax]')")
    code, _, err = run(capsys, "export", "jax", FSDP, "--mesh", "X=4,Y=2", "--backward", "--check")
    assert code == 0, err
    assert "check: ok on 8 CPU devices" in err


def test_check_torch_runs_the_code(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch", reason="torch is not installed (pip install 'shardalg[torch]')")
    code, _, err = run(
        capsys, "export", "torch", "A[I, J_X] * B[J_X, K] -> C[I, K]", "--mesh", "X=4", "--check"
    )
    assert code == 0, err
    assert "check: ok on 4 gloo processes" in err


def test_check_torch_dtensor_runs_the_code(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch", reason="torch is not installed (pip install 'shardalg[torch]')")
    code, out, err = run(
        capsys, "export", "torch", FSDP, "--mesh", "X=4", "--backward", "--dtensor", "--check"
    )
    assert code == 0, err
    assert "check: ok on 4 gloo processes" in err
    assert ".redistribute(mesh, [Shard(0)])" in out and "def distribute(" in out


def test_dtensor_is_a_torch_form(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "export", "jax", FSDP, "--mesh", "X=4", "--dtensor")
    assert (code, out) == (2, "")
    assert (
        err == "error: --dtensor is a form of the torch export: shardalg export torch ... --dtensor [usage]\n"
    )
