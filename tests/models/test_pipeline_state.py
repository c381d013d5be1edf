"""Per-stage pipeline memory honours the memory's choices (optimizer, ZeRO, precision): each stage's weights
differ from the default's by the state its parameters hold, derived here from the model's dims."""

from __future__ import annotations

import json

import pytest

from shardalg.cli import main
from shardalg.models.pipeline import pipeline_price
from shardalg.models.trainstate import TrainState
from tests.models.headed import HEADED, MESH, SIZES, D, F, L, M, P, V

ADAM = 8  # Adam's two fp32 moments, bytes per parameter (the default)


def _stage_params() -> list[int]:
    layers = L // P * 2 * D * F
    return [layers + V * D, layers, layers, layers + D * V]  # the embedding on stage 0, the head on stage 3


def _weights(state: TrainState | None = None) -> list[float]:
    r = pipeline_price(HEADED, MESH, SIZES, "tpu-v5p", axis="P", microbatches=M, state=state)
    return [s.weights for s in r.memory]


def test_sgd_holds_no_optimizer_state_on_any_stage() -> None:
    default, sgd = _weights(), _weights(TrainState("sgd"))
    assert [d - s for d, s in zip(default, sgd, strict=True)] == pytest.approx(
        [n * ADAM for n in _stage_params()]
    )


def test_zero_1_shards_each_stages_optimizer_state_over_the_data_axis() -> None:
    default, zero1 = _weights(), _weights(TrainState(zero=1))
    assert [d - z for d, z in zip(default, zero1, strict=True)] == pytest.approx(
        [n * ADAM / 2 for n in _stage_params()]  # X=2: each chip holds half
    )


def test_deepspeeds_fp32_master_copy_is_on_each_stage() -> None:
    default, mixed = _weights(), _weights(TrainState(precision="deepspeed"))
    assert [m - d for d, m in zip(default, mixed, strict=True)] == pytest.approx(
        [n * 4 for n in _stage_params()]  # fp16 params and grads as bf16's, plus an fp32 master copy
    )


def test_memory_with_a_pipeline_passes_the_optimizer_on(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["memory", HEADED, "--mesh", MESH, "--sizes", SIZES, "--hw", "tpu-v5p", "--pipeline", "P"]
    args += ["--microbatches", str(M), "--json"]
    assert main(args) == 0
    default = json.loads(capsys.readouterr().out)["pipeline"]["memory_per_stage"]
    assert main([*args, "--optimizer", "sgd"]) == 0
    sgd = json.loads(capsys.readouterr().out)["pipeline"]["memory_per_stage"]
    assert [d["weights"] - s["weights"] for d, s in zip(default, sgd, strict=True)] == pytest.approx(
        [n * ADAM for n in _stage_params()]
    )
