"""The derived backward held against the forward's derivative (:mod:`shardalg.numeric.gradcheck`): through the
API, ``shardalg backward --check`` and ``export --backward --check``. The check must pass on the derived
backward of every kind of program and fail on a backward that is not the forward's derivative."""

from __future__ import annotations

import dataclasses
import json

import pytest

import shardalg as sa
from shardalg.cli import main
from shardalg.errors import LimitExceeded, UsageError
from shardalg.models.expand import shard
from shardalg.notation.parse import parse
from shardalg.numeric.gradcheck import TOLERANCE, gradcheck
from shardalg.planning.backward import backward
from tests.search.programs import TRANSFORMER_FN

MLP = (
    "X[B_X, D] · W1[D, F_Y] -> H[B_X, F_Y]; gelu(H[B_X, F_Y]) -> G[B_X, F_Y]; "
    "G[B_X, F_Y] · W2[F_Y, D] -> O[B_X, D]; O[B_X, D] + X[B_X, D] -> R[B_X, D]; "
    "rmsnorm_D(R[B_X, D]) -> N[B_X, D]"
)
CORE = (
    "Q[B_X, T, H_Y, E] · K[B_X, S, H_Y, E] -> Sc[B_X, H_Y, T, S]; "
    "softmax_{S,causal}(Sc[B_X, H_Y, T, S]) -> P[B_X, H_Y, T, S]; "
    "P[B_X, H_Y, T, S] · V[B_X, S, H_Y, E] -> A[B_X, T, H_Y, E]"
)
CASES = {
    "mlp with a residual and a norm": (MLP, "X=2,Y=4", {"B": 8, "D": 8, "F": 16}, {}),
    "causal attention core": (CORE, "X=2,Y=2", {"B": 4, "T": 8, "S": 8, "H": 4, "E": 4}, {}),
    "fsdp kept gathered": (
        "In[B_X, D] · W[D_X, F] -> Out[B_X, F]",
        "X=4",
        {"B": 16, "D": 8, "F": 8},
        {"keep_gathered": True},
    ),
    "deferred reductions": (
        "In[B_X, D] · W[D, F_Y] -> H[B_X, F_Y]",
        "X=2,Y=2",
        {"B": 4, "D": 4, "F": 4},
        {"defer_reductions": True},
    ),
    "ring core (the forward's blocks run first)": (
        CORE.replace("T, S", "T_X, S")
        .replace("S, H", "S_X, H")
        .replace("B_X", "B")
        .replace("H_Y", "H")
        .replace("T, H", "T_X, H"),
        "X=4",
        {"B": 2, "T": 8, "S": 8, "H": 2, "E": 4},
        {},
    ),
    "a transformer layer: TP over X, FSDP and DP over Y": (
        "layer",
        "X=2,Y=2",
        {"B": 4, "T": 8, "S": 8, "D": 8, "H": 2, "E": 4, "F": 16},
        {},
    ),
    "a sub-axis": (
        "X[B_{Y:(1)2}, D] · W[D, F_X] -> H[B_{Y:(1)2}, F_X]",
        "X=2,Y=4",
        {"B": 8, "D": 4, "F": 4},
        {},
    ),
    "a function whose operands alone name sub-axes": (
        "X[B_{Y:(1)2}, D] · W[D, F_{Y:(2)2}] -> H[B_{Y:(1)2}, F_{Y:(2)2}]\n"
        "gelu(H[B_{Y:(1)2}, F_{Y:(2)2}]) -> G[B, F]\n"
        "G[B, F] + H[B_{Y:(1)2}, F_{Y:(2)2}] -> R[B, F]",
        "X=2,Y=4",
        {"B": 8, "D": 4, "F": 4},
        {},
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_derived_backward_is_the_forward_derivative(name):
    program, mesh, sizes, options = CASES[name]
    if program == "layer":  # the searched layer (norms, the causal core, residuals, the gated MLP), sharded
        program = shard(parse(TRANSFORMER_FN), "H=X,F=X,D=Y", "B=Y,H=X,F=X")
    bw = backward(program, mesh, sizes, **options)
    assert bool(bw.runs_first) == name.startswith("ring")
    got = gradcheck(bw)
    assert got.ok, str(got)
    assert got.probes and got.max_error < 1e-7
    assert {p.input for p in got.probes} == set(got.inputs) and len(got.probes) == 2 * len(got.inputs)
    assert all(abs(p.numeric) > 1e-6 for p in got.probes)  # a direction that moves the loss: not vacuous


def test_a_backward_of_another_forward_fails():
    """silu's backward held against gelu's forward: the same names and shapes, another derivative."""
    sizes = {"B": 8, "F": 8}
    silu = backward("silu(H[B_X, F_Y]) -> G[B_X, F_Y]", "X=2,Y=4", sizes)
    gelu = backward("gelu(H[B_X, F_Y]) -> G[B_X, F_Y]", "X=2,Y=4", sizes)
    wrong = dataclasses.replace(silu, forward=gelu.forward)
    got = gradcheck(wrong)
    assert not got.ok and got.max_error > TOLERANCE
    assert str(got).startswith("derivative: FAILED") and "dH along a direction" in str(got)
    assert gradcheck(gelu).ok and gradcheck(silu).ok


def test_a_dropped_contribution_fails():
    """The residual's contribution to dX (``dX + dR -> dX``, the backward's last step) dropped: dX is short
    by it."""
    bw = backward(MLP, "X=2,Y=4", {"B": 8, "D": 8, "F": 16})
    last = max(i for i, g in enumerate(bw.grads) if g.of == "X")
    assert "+ dR" in str(bw.grads[last].statement)
    wrong = dataclasses.replace(bw, grads=bw.grads[:last] + bw.grads[last + 1 :])
    got = gradcheck(wrong)
    assert not got.ok and "X" in {p.input for p in got.probes if p.error > TOLERANCE}


def test_sizes_not_given_are_small_defaults_and_said():
    got = gradcheck(backward("In[B_X, D] · W[D_X, F] -> Out[B_X, F]", "X=4", {"B": 64, "D": 256, "F": 8}))
    assert got.ok and got.defaulted == ()
    bw = backward(
        "In[B_X, D] · W[D, F] -> Out[B_X, F]", "X=4"
    )  # no size-dependent choice: derived without sizes
    got = gradcheck(bw, seed=3)
    assert got.ok and got.defaulted == ("B", "D", "F") and "(not given: B,D,F)" in str(got)
    assert dict(got.sizes)["B"] % 4 == 0 and got.to_json()["defaulted"] == ["B", "D", "F"]


def test_big_sizes_are_refused_up_front():
    bw = backward("In[B_X, D] · W[D_X, F] -> Out[B_X, F]", "X=4", {"B": 65536, "D": 1024, "F": 4096})
    with pytest.raises(LimitExceeded, match="dense value of In"):
        gradcheck(bw)


def test_the_api_takes_a_backward_only():
    with pytest.raises(UsageError, match="takes a derived backward"):
        sa.gradcheck("In[B_X, D] · W[D, F] -> Out[B_X, F]")
    with pytest.raises(UsageError, match="at least one direction"):
        gradcheck(backward("In[B_X, D] · W[D, F] -> Out[B_X, F]", "X=4"), tries=0)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_backward_check_on_the_command_line(capsys):
    code, out, err = run(capsys, "backward", MLP, "--mesh", "X=2,Y=4", "--sizes", "B=8,D=8,F=16", "--check")
    assert code == 0 and "AllReduce_X(dW2" in out
    assert "derivative: ok, the gradients of X, W1, W2 against central differences" in err
    code, out, err = run(
        capsys,
        "backward",
        MLP,
        "--mesh",
        "X=2,Y=4",
        "--sizes",
        "B=8,D=8,F=16",
        "--check",
        "--json",
        "--seed",
        "5",
    )
    got = json.loads(out)["check"]
    assert code == 0 and got["ok"] and got["seed"] == 5 and len(got["probes"]) == 6


def test_backward_check_exits_1_on_a_wrong_backward(capsys, monkeypatch):
    import shardalg.planning.backward as module

    sizes = {"B": 8, "F": 8}
    gelu = backward("gelu(H[B_X, F_Y]) -> G[B_X, F_Y]", "X=2,Y=4", sizes)
    silu = backward("silu(H[B_X, F_Y]) -> G[B_X, F_Y]", "X=2,Y=4", sizes)
    monkeypatch.setattr(module, "backward", lambda *a, **k: dataclasses.replace(silu, forward=gelu.forward))
    code, _, err = run(capsys, "backward", "gelu(H[B_X, F_Y]) -> G[B_X, F_Y]", "--mesh", "X=2,Y=4", "--check")
    assert code == 1 and "derivative: FAILED" in err


def test_export_backward_check_holds_the_backward_against_the_derivative(capsys):
    pytest.importorskip("jax", reason="jax is not installed (pip install 'shardalg[jax]'); CI installs it")
    code, out, err = run(
        capsys, "export", "jax", "In[B_X, D] · W[D_X, F] -> Out[B_X, F]", "--mesh", "X=4",
        "--sizes", "B=8,D=8,F=8", "--backward", "--check",
    )  # fmt: skip
    assert code == 0 and "def backward(dOut, W, In" in out
    assert "check: ok on 4 CPU devices" in err and "derivative: ok, the gradients of In, W" in err


EXP3 = "exp(A[B_X, D]) -> E1[B_X, D]; exp(E1[B_X, D]) -> E2[B_X, D]; exp(E2[B_X, D]) -> E3[B_X, D]"


def test_a_forward_that_overflows_at_unit_inputs_is_checked_at_smaller_ones():
    """``exp(exp(exp(A)))`` overflows where A is over about 1.9, which 64 unit normal draws reach: central
    differences of infinities say nothing of the backward (this was called FAILED, the backward being right).
    The check runs at inputs scaled down until the forward is finite, and says the scale."""
    got = gradcheck(backward(EXP3, "X=2", {"B": 8, "D": 8}))
    assert got.ok and got.scale == 0.25, str(got)
    assert "inputs scaled by 0.25" in str(got) and got.to_json()["input_scale"] == 0.25
    assert gradcheck(backward(MLP, "X=2,Y=4", {"B": 8, "D": 8, "F": 16})).scale == 1.0


def test_a_forward_that_overflows_at_every_scale_is_refused():
    """Five exps overflow at any input (exp of exp of exp of e is already 3.8e6): no check is possible, and
    the error says which value overflows."""
    five = EXP3 + "; exp(E3[B_X, D]) -> E4[B_X, D]; exp(E4[B_X, D]) -> E5[B_X, D]"
    with pytest.raises(UsageError, match="not finite at random inputs.*E5 overflows"):
        gradcheck(backward(five, "X=2", {"B": 4, "D": 4}))
