"""The head after the repeated layer is counted once, though its final norm reads no ``embeddings`` tensor: the
final norm of the last layer's output (``rmsnorm_D(Xl) -> Xfr``), its input, its result and its statistics,
each size derived here from the model's dims."""

from __future__ import annotations

import pytest

import shardalg as sa
from shardalg.models.analysis import analyze
from shardalg.models.expand import expand, shard
from shardalg.models.memory import model_memory
from shardalg.models.program import model_program
from shardalg.notation.printing import render

BF16, FP32 = 2, 4
NORMED = """params W1, W2, g; embeddings W_emb, g_final, W_un; layers L
W_emb[V, D]
rmsnorm_D(In[B_X, D]) -> Hr[B_X, D]
Hr[B_X, D] .* g[D] -> H[B_X, D]
H[B_X, D] * W1[D, F] -> Z[B_X, F]
Z[B_X, F] * W2[F, D] -> Out[B_X, D]
In[B_X, D] + Out[B_X, D] -> Y[B_X, D]
rmsnorm_D(Xl[B_X, D]) -> Xfr[B_X, D]
Xfr[B_X, D] .* g_final[D] -> Xf[B_X, D]
Xf[B_X, D] * W_un[D, V] -> Lg[B_X, V]
"""  # a layer with its own norm, then the final norm, its gain and the unembedding
B, D, F, V, L, X = 64, 256, 1024, 4096, 8, 2


def _rows(report: object) -> dict[str, tuple[float, int]]:
    return {name: (float(b), int(k)) for part, name, b, k in report.rows if part == "activations"}


def test_the_final_norm_of_a_small_model_is_counted_once() -> None:
    m = model_program(NORMED, f"X={X}", f"B={B},D={D},F={F},V={V},L={L}")
    assert [s.once for s in m.statements][-3:] == [True, True, True]
    assert m.layer_output == "Y" and m.values["Xl"].once and m.values["Xfr"].once
    rows = _rows(model_memory(analyze(m, "train")))
    local = B // X
    row = local * D * BF16  # Xl, Xfr and Xf: the chip's rows of the model width in bf16
    assert rows["Xl"] == rows["Xfr"] == rows["Xf"] == (row, 1)
    assert rows["rmsnorm_D statistics (1 fp32 a row) of Xfr"] == (local * FP32, 1)
    assert rows["Lg"] == (local * V * BF16, 1)
    assert rows["rmsnorm_D statistics (1 fp32 a row) of Hr"] == (local * FP32, L)  # the layer's own norm
    assert rows["In"] == (row, L)


def test_the_final_norms_time_is_counted_once() -> None:
    """The step's layer part holds the layer's norm alone; the final norm's time is outside, once."""
    on = {"mesh": f"X={X}", "sizes": f"B={B},D={D},F={F},V={V},L={L}", "hw": "tpu-v5p"}
    step = sa.step_time(NORMED, **on)
    without = sa.step_time(NORMED.replace("rmsnorm_D(Xl[B_X, D]) -> Xfr[B_X, D]\nXfr[", "Xl["), **on)
    layer, outside = (next(p for p in r.parts if p.name == n) for r in (step,) for n in ("layer", "outside"))
    layer0, outside0 = (next(p for p in without.parts if p.name == n) for n in ("layer", "outside"))
    assert step.seconds_of(layer.total) == pytest.approx(without.seconds_of(layer0.total))
    assert step.seconds_of(outside.total) > without.seconds_of(outside0.total)


def test_llama_3_8b_memory_drops_by_the_final_norm_over_the_other_31_layers() -> None:
    """LLaMA-3 8B, parameters whole, B=256 over X=8 of 4096 tokens: the final norm's input Xl, its result Xfr
    (each B/8 x T x D in bf16) and its statistics (B/8 x T in fp32) were counted once a layer, 2.15 GB a
    layer, 66.6 GB too many over the other 31; against the same model whose head scales Xl by the gain with
    no norm (counted once by the old rule too, it reads g_final), the preset adds Xfr and the statistics
    alone, not 31 Xl and 32 of each."""
    b, t, d, layers, x = 256, 4096, 4096, 32, 8
    program = render(shard(expand("llama-3-8b"), None, "B=X"), "text")
    norm = "rmsnorm_D(Xl[B_X, T, D]) -> Xfr[B_X, T, D]\nXfr[B_X, T, D] .* g_final"
    assert norm in program
    no_norm = program.replace(norm, "Xl[B_X, T, D] .* g_final")
    on = {"mesh": f"X={x}", "sizes": {"B": b, "T": t}}
    preset, plain = sa.memory(program, **on), sa.memory(no_norm, **on)
    tensor, stats = b // x * t * d * BF16, b // x * t * FP32
    assert float(preset.total) - float(plain.total) == tensor + stats
    per_layer = 2 * tensor + stats  # what the old rule counted in every layer
    assert per_layer / 1e9 == pytest.approx(2.15, abs=0.005)
    assert (layers - 1) * per_layer / 1e9 == pytest.approx(66.6, abs=0.05)
    assert _rows(preset)["Xfr"] == (tensor, 1) and _rows(preset)["Xl"] == (tensor, 1)


def test_the_final_norm_is_once_when_its_result_is_gathered_for_the_unembedding() -> None:
    """Under Megatron SP the head's norm runs on the sequence's shards and its result is gathered before the
    unembedding: the gather reads the norm's result too, and it is the head's (a collective of what only the
    head reads), so the norm stays once. It was counted once a layer before: its result and statistics in
    every layer's activations, its time in every layer's step."""
    sharded = (
        NORMED.replace("[B_X, ", "[B, T_X, ")
        .replace("Xfr[B, T_X, D] .* g_final[D] -> Xf[B, T_X, D]\n", "")
        .replace(
            "Xf[B, T_X, D] * W_un",
            "AllGather_X(Xfr[B, T_X, D]) -> Xfr[B, T, D]\nXfr[B, T, D] * W_un",
        )
        .replace("-> Lg[B, T_X, V]", "-> Lg[B, T, V_X]")
        .replace("W_un[D, V]", "W_un[D, V_X]")
        .replace("g_final, W_un; layers L\n", "W_un; tokens B, T; layers L\n")
    )
    assert "AllGather_X(Xfr[B, T_X, D]) -> Xfr[B, T, D]" in sharded
    t = 128
    m = model_program(sharded, f"X={X}", f"B={B},T={t},D={D},F={F},V={V},L={L}")
    assert [s.once for s in m.statements][-3:] == [True, True, True]
    rows = _rows(model_memory(analyze(m, "train")))
    local = B * t // X
    assert rows["Xfr"] == (local * D * BF16, 1)
    assert rows["rmsnorm_D statistics (1 fp32 a row) of Xfr"] == (local * FP32, 1)
