"""Under a remat policy the backward makes a layer's activations again and holds them while that layer's
backward runs, beside the layer's gathered weights: the transient counts them (it counted the weights alone,
while the head's logits, made again the same way, were already counted)."""

from __future__ import annotations

import shardalg as sa

# Data parallelism over X=4: no weight is gathered; the backward reads In (dW1) and H (dW2).
MLP = "params W1, W2; layers L\nIn[B_X, D] * W1[D, F] -> H[B_X, F]\nH[B_X, F] * W2[F, D] -> Out[B_X, D]"
SIZES = {"B": 64, "D": 128, "F": 256, "L": 2}


def test_block_transient_holds_one_layers_rerun_activations() -> None:
    none = sa.memory(MLP, mesh="X=4", sizes=SIZES, remat="none")
    block = sa.memory(MLP, mesh="X=4", sizes=SIZES, remat="block")
    # H per device: B/4 * F * 2 bytes = 16 * 256 * 2 = 8,192; In: 16 * 128 * 2 = 4,096
    assert none.parts["activations"] == 2 * (8192 + 4096) and none.parts["transient"] == 0
    assert block.parts["activations"] == 2 * 4096  # one checkpoint a layer
    assert block.parts["transient"] == 8192  # one layer's H, made again, held while its backward runs
    assert ("transient", "rerun H", 8192, 1) in block.rows


def test_rerun_rows_in_json_and_conventions() -> None:
    j = sa.memory(MLP, mesh="X=4", sizes=SIZES, remat="block").to_json()
    assert {"part": "transient", "tensor": "rerun H", "bytes_per_device": 8192, "count": 1} in j["tensors"]
    said = {c["key"]: c["value"] for c in j["conventions"]}
    assert "counted in the transient" in said["activations"] and "rerun rows" in said["transient"]


def test_llama_70b_fsdp_block_transient() -> None:
    """The FSDP table of docs/models.md (X=64, B=64, T=4096: 4,096 tokens a device): the layer holds its
    gathered weights (1,711,341,568 bytes) and its rerun activations; the head its gathered W_unemb
    (2,101,346,304), the final norm's gain (16,384), the logits (4096 * 128,256 * 2 = 1,050,673,152) and the
    rerun Xfr and Xf (4096 * 8192 * 2 = 67,108,864 each): 3,286,253,568, the larger (was 3,152,035,840)."""
    fsdp = sa.shard(sa.expand("llama-3-70b"), params="D=X", activations="B=X")
    r = sa.memory(fsdp, mesh="X=64", sizes={"B": 64, "T": 4096}, remat="block")
    rerun = {n: b for p, n, b, _ in r.rows if p == "transient" and n.startswith("rerun ")}
    # the layer's: what remat none keeps of a layer but its input In (7 of D, 2 of K*H, 4 of F a token)
    layer = 7 * 67_108_864 + 2 * 8_388_608 + 4 * 234_881_024
    assert sum(b for n, b in rerun.items() if n not in ("rerun Xfr", "rerun Xf")) == layer
    assert r.parts["transient"] == 2_101_346_304 + 16_384 + 1_050_673_152 + 2 * 67_108_864
