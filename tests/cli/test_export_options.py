"""Nothing silent in ``shardalg export`` and ``shardalg memory``: an option the command does not use, a size
for a dim the program lacks, which returned value is which gradient, parameters 0 for want of a ``params``
line: each is said (a usage error with a fix, or a note), never ignored."""

from __future__ import annotations

import json

import pytest

from shardalg.cli import main

MATMUL = "A[I_X, J] * B[J, K] -> C[I_X, K]"
BIAS = "X[B, D] + A[D] -> R[B, D]; R[B, D] * W[D, F_Y] -> O[B, F_Y]"
BIAS_ARGS = ("--mesh", "Y=4", "--sizes", "B=8,D=16,F=16", "--backward")
FSDP = "In[B_X, D] * W[D_X, F] -> Out[B_X, F]"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_keep_gathered_without_backward_is_refused(capsys: pytest.CaptureFixture[str], backend: str) -> None:
    code, out, err = run(capsys, "export", backend, MATMUL, "--mesh", "X=4", "--keep-gathered")
    assert code == 2
    assert out == ""
    assert "--keep-gathered changes only the backward program" in err
    assert "fix: add --backward, or drop --keep-gathered" in err


def test_keep_gathered_with_backward_still_exports(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "export", "jax", MATMUL, "--mesh", "X=4", "--keep-gathered", "--backward")
    assert code == 0
    assert "def backward(" in out


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_a_size_for_a_dim_the_program_lacks_is_refused(
    capsys: pytest.CaptureFixture[str], backend: str
) -> None:
    code, out, err = run(capsys, "export", backend, MATMUL, "--mesh", "X=4", "--sizes", "Q=3")
    assert code == 2
    assert out == ""
    # the same message as memory/cost/search give (shardalg.models.program.refuse_sizes_it_lacks)
    assert "--sizes names Q: no such dim in the program (dims there: I, J, K)" in err
    code, _, err_memory = run(capsys, "memory", MATMUL, "--mesh", "X=4", "--sizes", "Q=3")
    assert code == 2
    assert "--sizes names Q: no such dim in the program" in err_memory


def test_a_size_for_a_dim_of_the_program_is_taken(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "export", "jax", MATMUL, "--mesh", "X=4", "--sizes", "I=8,J=4")
    assert code == 0 and "def forward(" in out and "no such dim" not in err


def test_the_jax_backward_says_which_output_is_which_gradient(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "export", "jax", BIAS, *BIAS_ARGS)
    assert code == 0
    assert "returns: dW (gradient of W), dA (of A), dR_1 (of X)" in out
    assert "return dW, dA, dR_1" in out
    compile(out, "backward.py", "exec")


def test_the_jax_forward_has_no_gradient_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "export", "jax", BIAS, "--mesh", "Y=4", "--sizes", "B=8,D=16,F=16")
    assert code == 0
    assert "returns:" not in out and "gradient of" not in out


@pytest.mark.parametrize(
    ("extra", "placement"),
    [((), "DTensor placements"), (("--dtensor",), "placements")],
    ids=["rank", "dtensor"],
)
def test_the_torch_backward_says_which_output_is_which_gradient(
    capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], placement: str
) -> None:
    code, out, _ = run(capsys, "export", "torch", BIAS, *BIAS_ARGS, *extra)
    assert code == 0
    assert f"dW: dW[D, F_Y], {placement} [Shard(1)]; the gradient of W" in out
    assert f"dA: dA[D], {placement} [Replicate()]; the gradient of A" in out
    assert f"dR_1: dR[B, D], {placement} [Replicate()]; the gradient of X" in out
    compile(out, "backward.py", "exec")


def test_the_jax_backward_with_its_gradient_line_passes_check(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("jax", reason="jax is not installed (pip install 'shardalg[jax]'); CI installs it")
    code, out, err = run(capsys, "export", "jax", BIAS, *BIAS_ARGS, "--check")
    assert code == 0, err
    assert "returns: dW (gradient of W)" in out
    assert "check: ok" in err


NO_PARAMS_NOTE = (
    "params: 0: no tensor is declared a parameter ('params W, ...' or 'embeddings E'), so none is counted"
)


def test_memory_says_why_parameters_are_zero(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("memory", FSDP, "--mesh", "X=4", "--sizes", "B=8,D=16,F=16")
    code, out, _ = run(capsys, *args)
    assert code == 0
    assert "parameters   0" in out
    assert f"note: {NO_PARAMS_NOTE}" in out  # with the report's other defaults
    code, out, _ = run(capsys, *args, "--json")
    assert code == 0
    notes = {d["key"]: d["value"] for d in json.loads(out)["defaults"]}
    assert f"params: {notes['params']}" == NO_PARAMS_NOTE


def test_memory_with_a_params_line_has_no_such_note(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "memory", "params W\n" + FSDP, "--mesh", "X=4", "--sizes", "B=8,D=16,F=16")
    assert code == 0
    assert "no tensor is declared a parameter" not in out
