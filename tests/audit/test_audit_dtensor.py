"""A DTensor Megatron MLP (ColwiseParallel, then RowwiseParallel) on 4 gloo processes: its products read into
the notation, CommDebugMode's counts against shardalg's plans, forward and backward (one run, ~25 s)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from shardalg.algebra.mesh import Mesh  # noqa: E402
from shardalg.cli import main

pytest.importorskip("torch", reason="torch is not installed (pip install 'shardalg[torch]'); CI installs it")

from shardalg.audit.dtensor import audit_dtensor  # noqa: E402

TARGET = f"{Path(__file__).with_name('dtensor_cases.py')}:megatron_mlp"


@pytest.fixture(scope="module")
def megatron():
    return audit_dtensor(TARGET, Mesh.parse("Y=4"))


def test_the_module_is_written_in_the_notation_with_its_placements(megatron):
    assert megatron.program == [
        # ColwiseParallel: the weight Shard(0) of Linear's [out, in]
        "in0: fp32[B, D] · W0: fp32[F_Y, D] -> H1: fp32[B, F_Y]",
        # RowwiseParallel: Shard(1), the product Partial
        "H1': fp32[B, F_Y] *_LOCAL W2: fp32[I, F_Y] -> H2: fp32[B, I]{U_Y}",
        "H2: fp32[B, I]{U_Y} -> H2: fp32[B, I]",  # the module's output is replicated
    ]
    assert megatron.sizes == {"B": 8, "D": 16, "F": 32, "I": 16}


def test_gelu_tanh_silu_and_relu_are_statements_and_gelus_erf_form_is_primed(megatron):
    """F.gelu(approximate="tanh"), F.silu and F.relu are the notation's functions, each a statement of its
    DTensor placements; nn.GELU() (the erf form, not the notation's gelu) leaves its value primed (above)."""
    got = audit_dtensor(f"{Path(__file__).with_name('dtensor_cases.py')}:activations_mlp", Mesh.parse("Y=4"))
    assert got.program == [
        "in0: fp32[B, D] · Wup: fp32[F_Y, D] -> H1: fp32[B, F_Y]",
        "gelu(H1: fp32[B, F_Y]) -> H2: fp32[B, F_Y]",
        "silu(H2: fp32[B, F_Y]) -> H3: fp32[B, F_Y]",
        "relu(H3: fp32[B, F_Y]) -> H4: fp32[B, F_Y]",
        "H4: fp32[B, F_Y] *_LOCAL Wdown: fp32[I, F_Y] -> H5: fp32[B, I]{U_Y}",
        "H5: fp32[B, I]{U_Y} -> H5: fp32[B, I]",
    ]
    assert got.forward == got.shardalg_forward == Counter({"AllReduce_Y": 1})  # the functions move nothing
    assert got.forward_matches and got.backward_matches


def test_collective_counts_mapped_to_the_notation_and_compared(megatron):
    assert megatron.forward == Counter({"AllReduce_Y": 1})  # RowwiseParallel's Partial -> Replicate
    assert megatron.backward == Counter({"AllReduce_Y": 1})  # ColwiseParallel's input gradient
    assert megatron.forward_matches and megatron.backward_matches
    text = megatron.text()
    assert "# forward: DTensor AllReduce_Y x1; shardalg's best plans AllReduce_Y x1 (the same)" in text
    assert "# backward: DTensor AllReduce_Y x1; shardalg's derived backward AllReduce_Y x1 (the same)" in text
    assert megatron.to_json()["backward_matches"] is True


def test_dtensor_takes_no_inputs(capsys):
    assert main(["audit", TARGET, "--dtensor", "--mesh", "Y=4", "--inputs", "x[B, D]"]) == 2
    assert "--dtensor: the function builds the module and its inputs" in capsys.readouterr().err


def test_dtensor_reports_as_text_or_json(capsys):
    assert main(["audit", TARGET, "--dtensor", "--mesh", "Y=4", "--format", "latex"]) == 2
    assert "--dtensor reports as text or json" in capsys.readouterr().err
