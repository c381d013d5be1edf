"""The book's whole-model figures (How To Scale Your Model, chapters 5-8), each computed from a program in the
notation (a preset expanded, or a program written here) through memory, FLOPs, fit and step: nothing typed in
but the program, the chip and the sizes. Each test quotes the book's number and its place."""

from __future__ import annotations

import pytest

from shardalg.costs.chipspec import chip_from_text
from shardalg.models.expand import expand, shard
from shardalg.models.fit import largest, largest_params
from shardalg.models.memory import memory
from shardalg.models.presets import Cited, ModelConfig
from shardalg.models.step import step_time

DP_MLP = """params W_in, W_out
In[B_X, D] * W_in[D, F] -> Tmp[B_X, F]
Tmp[B_X, F] * W_out[F, D] -> Out[B_X, D]"""


def test_adam_is_10_bytes_per_parameter_and_the_largest_dp_model_on_a_v5p():
    # ch. 5 (training), pure data parallelism, footnote: "Since the params are in bfloat16 and optimizer state
    # is in float32, this gives us 2 + 8 = 10 bytes per parameters", and "the largest model we can fit has
    # TPU memory / 10 parameters, so e.g. on a TPUv5p pod with 96GB of HBM and pure data parallelism this is
    # about 10B parameters" (takeaway: "roughly 9B").
    v5p_96gb = chip_from_text("base=tpu-v5p,hbm=96e9")  # the book's 96GB
    # a batch decides the gradients' plans (no size is made up for them); the bytes per parameter do not need it
    sizes = "B=8192,D=4096,F=16384"
    r = memory(DP_MLP, mesh="X=8", sizes=sizes, hw=v5p_96gb, optimizer="adam", grads="none")
    d = largest_params(r)
    per_param = dict(d.steps)["bytes per parameter on a device"]
    assert per_param == 10
    assert int(d.result) == 9_600_000_000  # 96e9 / 10
    # On the preset's HBM: HBM / 10, the book's "about 10B" ("roughly 9B" in its takeaway).
    preset = largest_params(memory(DP_MLP, mesh="X=8", sizes=sizes, hw="tpu-v5p", grads="none"))
    assert int(preset.result) == int(chip_from_text("tpu-v5p").hbm_capacity.value // 10)
    assert 9e9 <= int(preset.result) <= 1.03e10
    # Counting the bf16 gradients too (the default) is 12 bytes per parameter.
    with_grads = largest_params(memory(DP_MLP, mesh="X=8", sizes=sizes, hw=v5p_96gb))
    assert dict(with_grads.steps)["bytes per parameter on a device"] == 12
    assert int(with_grads.result) == 8_000_000_000


def test_llama_2_13b_parameters_optimizer_and_three_checkpoints_per_layer():
    # ch. 5, "Some Problems to Work", LLaMA-2 13B. Question 1: "Total: 8.5e9 + 4.2e9 + 0.39e9 = 13.1e9".
    # Question 2: "(2 + 4 + 4) * 13e9 ~ 130GB" for bf16 parameters and fp32 Adam moments, and with BS=16M
    # tokens and checkpoints after the three big matmuls "2 * 40 * 16e6 * 5,120 * (1 + 2 * 2.7) ~ 4.2e13 =
    # 42TB". The program is the preset; 16e6 tokens are B=4000 sequences of T=4000.
    program = expand("llama-2-13b")
    r = memory(program, mesh="X=1", sizes="B=4000,T=4000", optimizer="adam", remat="Gt,U,Out")
    assert int(r.params) == 13_015_864_320  # the Hugging Face checkpoint (the book: 13.1e9)
    assert int(r.params) == pytest.approx(13.1e9, rel=1e-2)
    assert int(r.parts["params"] + r.parts["optimizer"]) == 10 * 13_015_864_320  # the book: ~130GB
    assert int(r.parts["params"] + r.parts["optimizer"]) == pytest.approx(130e9, rel=2e-3)
    # the book's layer is its three matmuls, no residual stream: its Out is the next layer's input, so the
    # three checkpoints are all a layer keeps (the preset's products alone)
    products = memory(
        expand("llama-2-13b", functions=False), mesh="X=1", sizes="B=4000,T=4000", remat="Gt,U,Out"
    )
    per_layer = [(name, b, n) for part, name, b, n in products.rows if part == "activations" and n == 40]
    assert [name for name, _, _ in per_layer] == ["Gt", "U", "Out"]
    checkpoints = sum(int(b * n) for _, b, n in per_layer)
    assert checkpoints == 2 * 40 * 16_000_000 * (5120 + 2 * 13824)  # the book's 2*L*B*T*(D + 2F)
    assert checkpoints == pytest.approx(4.2e13, rel=2e-2)
    # with the residual stream (Y = Rs + Out, the next layer's In) the layer's input is kept besides: the
    # backward reruns the attention block from it
    per_layer = [(name, int(b * n)) for part, name, b, n in r.rows if part == "activations" and n == 40]
    assert [name for name, _ in per_layer] == ["In", "Gt", "U", "Out"]
    assert sum(b for _, b in per_layer) == checkpoints + 2 * 40 * 16_000_000 * 5120


def test_kv_cache_per_token_with_grouped_query_attention():
    # ch. 8 (serving LLaMA 3-70B): "KV cache size per token in int8 = 2 * K * H * L = 2 * 8 * 128 * 80 =
    # 160kiB". The decode program's KV cache, one sequence of one token.
    r = memory(expand("llama-3-70b", "decode", kv_dtype="int8"), mesh="X=1", sizes="B=1,S=1")
    assert int(r.parts["kv_cache"]) == 160 * 1024
    # ch. 7, worked problem 1 (a model after LLaMA-2 13B, 8 KV heads of 256): "2 * 64 * 8 * 256 = 262kB".
    assert (
        int(memory(expand(CH7, "decode", kv_dtype="int8"), mesh="X=1", sizes="B=1,S=1").parts["kv_cache"])
        == 262_144
    )


def _ch7(kv_heads: int) -> ModelConfig:
    book = "How To Scale Your Model ch. 7 (inference), worked problems: a model based on LLaMA-2 13B"
    return ModelConfig(
        f"ch7-k{kv_heads}",
        "the book's inference-chapter model",
        layers=Cited(64, book),
        d_model=Cited(4096, book),
        d_ff=Cited(16384, book),
        heads=Cited(32, book),
        kv_heads=Cited(kv_heads, book),
        head_dim=Cited(256, book),
        vocab=Cited(32128, book),
        tied=True,
        norms=False,
    )


CH7 = _ch7(8)


@pytest.mark.parametrize(("kv_heads", "book_batch"), [(8, 7), (1, 56)])
def test_largest_batch_for_128k_sequences_on_a_v5e_4x4(kv_heads, book_batch):
    # ch. 7, question 2: "serve this model on a TPUv5e 4x4 slice and can fully shard our KV cache ... the
    # largest batch size we can fit, assuming we use int8 for everything and want to support 128k sequences?
    # ... (16 * 16e9 - 18.4e9) / 33.5e9 = 7. If we had K=1, we would have 8 times this, aka about 56."
    # The book's 128k is 128e3 tokens (262e3 * 128e3 = 33.5GB per sequence). Parameters and KV cache are
    # sharded over all 16 chips (model parallelism: activations split on D, the cache on its sequence).
    program = shard(expand(_ch7(kv_heads), "decode", dtype="int8"), "F=XY,D=XY", "F=XY,D=XY,S=XY")
    # B decides plans, so the report is made at a batch (any: largest plans again with B free, per interval)
    r = memory(program, mesh="X=4,Y=4", sizes="S=128000,B=1", hw="tpu-v5e")
    assert r.analysis.mode == "infer"
    if kv_heads == 8:
        assert int(r.params) == 18_385_207_296  # the book: 18.4e9
    d = largest(r, "B")
    assert int(d.result) == book_batch
    at = memory(program, mesh="X=4,Y=4", sizes=f"S=128000,B={book_batch}", hw="tpu-v5e")
    assert int(at.parts["transient"]) == 0  # the weights stay sharded: nothing gathered
    assert int(at.parts["params"]) * 16 == int(at.params)  # fully sharded (int8: a byte a parameter)
    assert int(at.parts["kv_cache"]) * 16 == book_batch * 2 * 64 * kv_heads * 256 * 128_000


def test_days_to_train_llama_3_70b_on_a_full_v5p_pod():
    # ch. 6 (training LLaMA 3): "6 * 70e9 = 4.2e11 FLOPs / token", "4.2e11 * 15e12 = 6.3e24 FLOPs", and on
    # 8960 chips at 40% MFU "T = 6.3e24 / (8960 * 4.59e14 * 0.4) = 3.8e6 seconds. This is about 44 days!"
    # The step: data parallel over the 8960 chips, one sequence of 4096 tokens each, compute-bound.
    # the book counts the matmuls only (6 N D): the functions (norms, softmax, gates) not written
    program = shard(expand("llama-3-70b", functions=False), None, "B=X")
    s = step_time(program, mesh="X=8960", sizes="B=8960,T=4096", hw="tpu-v5p", mfu=0.4, tokens=15e12)
    assert all(p.bound(s.values) == "compute" for p in s.parts)
    assert float(s.flops.total) / float(s.tokens) == pytest.approx(
        4.2e11, rel=1e-2
    )  # 6 x 69.5e9 matmul params
    assert float(s.flops.backward) == 2 * float(s.flops.forward)  # the 2x of the backward, from its einsums
    assert s.days * 86_400 == pytest.approx(3.8e6, rel=1e-2)
    assert s.days == pytest.approx(44, rel=1e-2)
