"""A step under ``--zero`` or ``--microbatches`` prices the same backward as the plain step: the causal core's
gradient einsums halved (they counted the masked half), a MoE routing's AllToAlls transposed (they were left
out), and each microbatch's routing capacity derived from its own tokens (it kept the whole batch's and the
plan was refused)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from shardalg.models.expand import expand, shard
from shardalg.models.step import step_time

V5P_C = 4.59e14  # tpu-v5p's FLOP/s


def _layer(report, name: str = "layer") -> tuple[float, float]:
    """(compute, comms) seconds of a part of the step."""
    part = next(p for p in report.parts if p.name == name)
    return float(part.compute.subs(report.values)), float(part.comms.subs(report.values))


def test_zero_keeps_the_causal_cores_backward_halved() -> None:
    dp = shard(expand("llama-3-8b"), activations="B=X")
    on = dict(mesh="X=8", sizes={"B": 8, "T": 256}, hw="tpu-v5p", overlap="serial")
    plain, zero1 = step_time(dp, **on), step_time(dp, zero=1, **on)
    # ZeRO-1 moves the gradients' reduction, no FLOP: the layer's compute is the same. The bug counted the
    # core's four gradient einsums (dP, dVs, dQ, dKs) whole: each 2·B·T·S·N·H/2 = 2·1·256·256·32·128/2 =
    # 268,435,456 FLOPs a device causal, so 1,073,741,824 FLOPs a layer more.
    assert _layer(zero1)[0] == pytest.approx(_layer(plain)[0], rel=1e-12)


def test_microbatches_of_a_moe_derive_their_capacity_and_keep_the_routings_transposes() -> None:
    mixtral = shard(expand("mixtral-8x7b", functions=True, capacity_factor=Fraction(5, 4)), "E=X", "B=X,E=X")
    on = dict(mesh="X=8", sizes={"B": 16, "T": 4096}, hw="tpu-v5p", overlap="serial")
    whole = step_time(mixtral, **on)
    two = step_time(mixtral, microbatches=2, **on)  # was refused: C = 20480 slots for 8 sequences' 10240
    c1, m1 = _layer(whole)
    (ca, ma), (cb, mb) = _layer(two), _layer(two, "layer (last)")
    assert ca + cb == pytest.approx(c1, rel=1e-6)  # the same FLOPs in two passes
    # each pass's AllToAlls (dispatch, combine and their transposes) move half the bytes; the last pass adds the
    # gradients' reductions: the two passes' communication is the whole batch's (latency aside)
    assert ma + mb == pytest.approx(m1, rel=2e-3)
    # each microbatch's capacity: cf·k·B·T/E = 1.25·2·(8·4096)/8 = 10,240 slots, said beside the batch's 20,480
    said = [v for k, v in two.notes if k == "capacity"]
    assert any(
        v.startswith("each microbatch: ")
        and v.endswith("= 10240 slots an expert (derived from dispatch's k and cf)")
        for v in said
    )


def test_zero_3_of_a_moe_keeps_the_routings_transposes() -> None:
    mixtral = shard(expand("mixtral-8x7b", functions=True, capacity_factor=Fraction(5, 4)), "E=X", "B=X,E=X")
    on = dict(mesh="X=8", sizes={"B": 16, "T": 4096}, hw="tpu-v5p", overlap="serial")
    # each AllToAll moves V/4 over the axis, V = cf·k·B·T·D bf16 values = 2·1.25·2·65536·4096 = 1,342,177,280
    # bytes: 1.864 ms at W_ici = 1.8e11; dispatch, combine and their two transposes: 7.457 ms a layer, which
    # the layer's communication (serial: every collective added) holds (it was 5.146 ms: the transposes left out)
    alltoalls = 4 * 1_342_177_280 / 4 / 1.8e11
    assert _layer(step_time(mixtral, zero=3, **on))[1] > alltoalls
