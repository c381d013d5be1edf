"""``shardalg plan | simulate``: the text and JSON of plans, exit codes, and the executor from the CLI."""

from __future__ import annotations

import json
import re
import shutil

import pytest

import shardalg
from shardalg.cli import main
from shardalg.notation.parse import parse, parse_statement, parse_tensor
from tests.shared.latex import pdflatex


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_text_default_and_all(capsys) -> None:
    code, out, err = run(capsys, "plan", "A[I, J_X] · B[J, K] -> C[I, K]", "--mesh", "X=4")
    assert code == 0 and err == ""
    # which plan is the cheapest depends on J and K (2IJ against 4IK bytes: I is common and cancels): no size
    # is made up, both are shown
    assert out.startswith(
        "# case 2: J is contracted and sharded over X in A only\n"
        "# free: I of A\n"
        "# free: K of B\n"
        "# the cheapest plan depends on J, K: 2 plans are not beaten at every size by another; give J, K "
        "to choose\n"
        "# AllGather_X(A) (2*I*J bytes)\n"
        "# Slice_X(B), AllReduce_X(C) (4*I*K bytes)\n"
        "# plan 1 of 2 (not beaten at every size): 2*I*J bytes communicated; AllGather_X(A)\n"
        "AllGather_X(A[I, J_X]) -> A[I, J]  # AllGather: case 2: J is contracted and sharded over X in A only; gather it\n"
        "A[I, J] * B[J, K] -> C[I, K]  # case 1: no contracted dim is sharded, so the local product needs no communication\n"
        "# plan 2 of 2 (not beaten at every size): 4*I*K bytes communicated; Slice_X(B), AllReduce_X(C)\n"
    )
    code, out, _ = run(
        capsys, "plan", "A[I, J_X] · B[J, K] -> C[I, K]", "--mesh", "X=4", "--sizes", "I=64,J=64,K=64"
    )
    assert (
        code == 0
        and "# default plan (1 of 2; --all lists them): 8192 bytes communicated; AllGather_X(A)\n" in out
    )
    code, out, _ = run(capsys, "plan", "A[I, J_X] · B[J, K] -> C[I, K]", "--mesh", "X=4", "--all")
    assert code == 0
    assert (
        "# plan 2 of 2 (not beaten at every size): 4*I*K bytes communicated; Slice_X(B), AllReduce_X(C)\n"
        in out
    )
    assert "Slice_{X,J}(B[J, K]) -> B[J_X, K]" in out


def test_plan_json_contract(capsys) -> None:
    argv = ["plan", "X[B, D] ·_D Y[D_X, F] -> Z[B, F]", "--mesh", "X=4", "--sizes", "B=128,D=8192,F=32768"]
    code, out, _ = run(capsys, *argv, "--json", "--all")
    data = json.loads(out)
    assert code == 0 and set(data) == {"complete", "case", "plans"} and data["complete"] is True
    assert data["case"][0] == "case 2: D is contracted and sharded over X in Y only"
    first, second = data["plans"]
    assert set(first) == {"steps", "output", "bytes_communicated"}
    assert [s["op"] for s in first["steps"]] == [
        "Slice",
        "Einsum",
        "AllReduce",
    ]  # D > 2B: reduce the partials
    assert first["bytes_communicated"] == 2 * 2 * 128 * 32768
    assert [s["op"] for s in second["steps"]] == ["AllGather", "Einsum"]
    assert second["bytes_communicated"] == 2 * 8192 * 32768
    ag = second["steps"][0]
    assert set(ag) == {"op", "axes", "tensor", "before", "after", "reason"}
    assert (ag["axes"], ag["tensor"], ag["before"], ag["after"]) == (["X"], "Y", "Y[D_X, F]", "Y[D, F]")
    assert first["output"] == "Z[B, F]"
    # --format json is the same, and without --all only the default plan is listed
    code, out2, _ = run(capsys, *argv, "--format", "json")
    assert json.loads(out2)["plans"] == [first]


def test_plan_json_symbolic_bytes_are_text(capsys) -> None:
    code, out, _ = run(capsys, "plan", "A[I_X, J] · B[J, K_Y] -> C[I, K]", "--mesh", "X=4,Y=2", "--json")
    data = json.loads(out)
    assert data["plans"][0]["bytes_communicated"] == "2*I*K"
    assert [s["op"] for s in data["plans"][0]["steps"]] == ["Einsum", "AllGather"]


def test_plan_accepts_a_resharding_and_latex(capsys) -> None:
    code, out, _ = run(capsys, "plan", "A[I_X, J] -> A[I, J_X]", "--mesh", "X=4", "--format", "latex")
    assert code == 0
    assert r"\textbf{AllToAll}_{X,J}(A[I_X, J]) \rightarrow A[I, J_X]" in out
    assert out.startswith("% default plan")


BACKWARD = [
    "backward",
    "In[B_X, D] · W_in[D_X, F] -> Out[B_X, F]",
    "--mesh",
    "X=4",
    "--sizes",
    "B=8192,D=4096,F=16384",
]


def test_backward_latex_ends_as_a_plans_does(capsys) -> None:
    """One newline ends it, as it ends a plan's, never a blank line (which ends a paragraph, and math refuses
    one); it parses back to the statements of the text form."""
    code, out, _ = run(capsys, *BACKWARD, "--format", "latex")
    assert code == 0 and out.endswith("\n") and "\n\n" not in out, out[-300:]
    assert out.rstrip("\n").splitlines()[-1].startswith("% not kept")  # its note, ended by the one newline
    _, plan_out, _ = run(
        capsys, "plan", "A[I, J_X] · B[J_X, K] -> C[I, K_X]", "--mesh", "X=4", "--format", "latex"
    )
    assert plan_out.endswith("\\end{aligned}\n") and "\n\n" not in plan_out
    _, text_out, _ = run(capsys, *BACKWARD)
    assert parse(out).statements == parse(text_out).statements


def test_backward_latex_inputs_into_display_math(capsys, tmp_path) -> None:
    r"""``\[ \input{bw.tex} \]`` compiles in pdflatex (it stopped at "Missing $ inserted" on a last blank line)."""
    if shutil.which("pdflatex") is None:
        pytest.skip(
            "pdflatex is not installed (apt-get install texlive-latex-base texlive-latex-recommended)"
        )
    code, out, _ = run(capsys, *BACKWARD, "--format", "latex")
    assert code == 0
    (tmp_path / "bw.tex").write_text(out)
    proc = pdflatex(
        tmp_path,
        "doc",
        "\\documentclass{article}\n\\usepackage{amsmath}\n\\begin{document}\n\\[ \\input{bw.tex} \\]\n"
        "\\end{document}\n",
    )
    assert proc.returncode == 0, proc.stdout[-2000:]


def test_plan_errors_and_exit_codes(capsys) -> None:
    code, _, err = run(capsys, "plan", "A[I] · B[K] -> C[I, K]{U_X}", "--mesh", "X=2")
    assert code == 1 and err.startswith(
        "error: the result is unreduced over X, but no plan leaves partial sums"
    )
    code, _, err = run(capsys, "plan", "A[I, J", "--mesh", "X=2")
    assert code == 2 and err.splitlines()[0].endswith("[syntax]")
    code, _, err = run(capsys, "plan", "A[I, J] · B[J, K]")
    assert code == 2 and "needs a mesh" in err
    code, _, err = run(capsys, "plan", "A[I_W, J] · B[J, K]", "--mesh", "X=2")
    assert code == 1 and "[unknown-axis]" in err


def test_simulate(capsys) -> None:
    code, out, _ = run(capsys, "simulate", "A[I_X, J] · B[J, K_Y] -> C[I, K]", "--mesh", "X=4,Y=2")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 7 and all(": ok (max relative error" in line for line in lines)
    code, out, _ = run(capsys, "simulate", "A[I, J_X] · B[J_X, K]", "--mesh", "X=2", "--json")
    data = json.loads(out)
    assert code == 0 and len(data["plans"]) == 4 and all(p["ok"] for p in data["plans"])


def test_python_api(capsys) -> None:
    # sizes that decide the plan (4IK against 2IJ + 2JK bytes): shardalg.plan makes none up
    p = shardalg.plan(
        "A[I, J_X] · B[J_X, K] -> C[I, K]", mesh=shardalg.Mesh(X=4), sizes={"I": 1024, "J": 8192, "K": 4096}
    )
    assert p.output == parse_tensor("C[I, K]")
    assert len(p.steps) == 2
    assert str(p).splitlines()[1] == (
        "AllReduce_X(C[I, K]{U_X}) -> C[I, K]  # case 3 finish: AllReduce_X sums the partial products of C over X"
    )
    assert p.latex().startswith(r"\begin{aligned}") and p._repr_latex_().startswith("$$")
    assert shardalg.plans(parse_statement("A[I_X, J] · B[J, K_X]"), mesh="X=2")
    assert shardalg.redistribute(parse_tensor("A[I_X, J]"), parse_tensor("A[I, J_X]"), "X=2")
    assert len(shardalg.check_program("A[I, J_X] · B[J_X, K] -> C[I, K]", "X=2")) == 1


@pytest.mark.parametrize("fmt", ["text", "unicode", "latex"])
def test_every_format_prints(capsys, fmt: str) -> None:
    code, out, _ = run(capsys, "plan", "A[I_X, J] · B[J, K_X]", "--mesh", "X=2", "--all", "--format", fmt)
    assert code == 0 and len(re.findall(r"^[#%] plan \d+ of 2", out, flags=re.M)) == 2
