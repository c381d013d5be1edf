"""``shardalg cost | compare | optimum | bound | hw``: exit codes, JSON contracts, no sympify of user text."""

from __future__ import annotations

import json

import pytest
import sympy

from shardalg.algebra.symbols import dim_size
from shardalg.cli import main

LOCAL = "X[B, D_X] ·_LOCAL Y[D_X, F] -> Z[B, F]{U_X}; AllReduce_X(Z[B, F]{U_X}) -> Z[B, F]"
GATHER = "AllGather_X(Y[D_X, F]) -> Y[D, F]; X[B, D] · Y[D, F] -> Z[B, F]"
FSDP_TP = (
    "AllGather_X(W_in[D_X, F_Y]) -> W_in[D, F_Y]; AllGather_Y(In[B_X, D_Y]) -> In[B_X, D]; "
    "In[B_X, D] · W_in[D, F_Y] -> Tmp[B_X, F_Y]; AllGather_X(W_out[F_Y, D_X]) -> W_out[F_Y, D]; "
    "Tmp[B_X, F_Y] · W_out[F_Y, D] -> Out[B_X, D]{U_Y}; ReduceScatter_{Y,D}(Out[B_X, D]{U_Y}) -> Out[B_X, D_Y]"
)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cost_json(capsys):
    code, out, _ = run(
        capsys,
        "cost",
        "AllGather_Y(bf16[E_Y, F])",
        "--mesh",
        "X=8,Y=4",
        "--sizes",
        "E=2048,F=8192",
        "--hw",
        "tpu-v5e",
        "--json",
    )
    assert code == 0
    data = json.loads(out)
    assert {"formula", "latex", "seconds", "steps"} <= set(data)
    assert data["seconds"] == pytest.approx(559.24e-6, rel=1e-4)
    assert data["steps"][0]["op"] == "AllGather"


def test_cost_text_and_serial(capsys):
    code, out, _ = run(capsys, "cost", GATHER, "--mesh", "X=4", "--serial", "--no-latency")
    assert code == 0 and "total:" in out and "2*B*D*F/C + 2*D*F/W_ici" in out


def test_compare_json_condition_is_sympy_parsable(capsys):
    code, out, _ = run(capsys, "compare", LOCAL, GATHER, "--mesh", "X=4", "--solve-for", "D", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["condition"] == "D > 2*B" and data["latex"] == "D > 2 B" and len(data["steps"]) >= 4
    names = {"D": dim_size("D"), "B": dim_size("B")}
    assert sympy.sympify(data["condition"], locals=names) == (dim_size("D") > 2 * dim_size("B"))


def test_compare_large_batch_regime(capsys):
    code, out, _ = run(
        capsys, "compare", LOCAL, GATHER, "--mesh", "X=4", "--solve-for", "D", "--regime", "compute", "--json"
    )
    assert code == 0 and json.loads(out)["condition"] == "D > 2*C/W_ici"


def test_optimum_of_fsdp_tp(capsys):
    code, out, _ = run(
        capsys,
        "optimum",
        FSDP_TP,
        "--mesh",
        "X,Y",
        "--over",
        "X",
        "--subject-to",
        "X*Y=N",
        "--symbolic-links",
        "--json",
    )
    assert code == 0
    assert json.loads(out)["optimum"] == "sqrt(B)*sqrt(M_X)*sqrt(N)/(sqrt(F)*sqrt(M_Y))"


def test_bound_of_dp_backward(capsys):
    dp = (
        "dOut[B_X, F] · W[D, F] -> dIn[B_X, D]; In[B_X, D] · dOut[B_X, F] -> dW[D, F]{U_X}; "
        "AllReduce_X(dW[D, F]{U_X}) -> dW[D, F]"
    )
    code, out, _ = run(capsys, "bound", dp, "--mesh", "X", "--solve-for", "B", "--symbolic-links", "--json")
    assert code == 0 and json.loads(out)["condition"] == "B > C*X/(M_X*W_ici)"


def test_hw_list_and_show(capsys):
    code, out, _ = run(capsys, "hw", "list")
    assert code == 0 and "tpu-v5e" in out and "h100" in out
    code, out, _ = run(capsys, "hw", "show", "tpu-v5p", "--json")
    assert code == 0 and json.loads(out)["numbers"]["W_ici"]["value"] == 1.8e11


@pytest.mark.parametrize(
    "argv",
    [
        ("hw", "show", "tpu-v99"),
        ("cost", "AllGather_X(A[I_X, J])"),  # no mesh
        ("cost", "AllGather_X(A[I_X, J])", "--mesh", "X=4", "--hw", "nope"),
        ("compare", LOCAL, GATHER, "--mesh", "X=4", "--solve-for", "__import__('os')"),
        ("optimum", FSDP_TP, "--mesh", "X,Y", "--over", "X", "--subject-to", "exec('1')=N"),
        ("cost", "A[I_X", "--mesh", "X=4"),  # parse error
        ("cost", "AllGather_X(A[I_X, J])", "--mesh", "X=four"),
    ],
)
def test_bad_input_exits_2(capsys, argv):
    code, _, err = run(capsys, *argv)
    assert code == 2 and err


def test_illegal_program_exits_1(capsys):
    code, _, err = run(capsys, "cost", "A[I_X, J] ·_LOCAL B[J, K_X] -> C[I_X, K_X]", "--mesh", "X=4")
    assert code == 1 and "case-4" in err
