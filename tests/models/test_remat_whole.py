"""Remat policies over the whole model (issue 27, item 7): outside the repeated layer the head is one more
block. ``none`` keeps its logits, ``block`` keeps its input and makes the logits again for the backward (the
head's product reruns, its FLOPs counted), a list keeps them when it names them; ``--logits`` overrides. The
logits not kept are held only while the head runs, so where a layer holds more than the head (its gathered
weights and what its backward makes again) the total moves by what is kept."""

from __future__ import annotations

import json

import shardalg as sa
from shardalg.cli import main
from shardalg.models.analysis import analyze
from shardalg.models.expand import expand, shard
from shardalg.models.program import model_program
from shardalg.notation.printing import text

FSDP = shard(expand("llama-2-13b", functions=False), params="D=X", activations="B=X")  # the products only
ON = {"mesh": "X=8", "sizes": {"B": 8, "T": 4096}, "hw": "h100"}
LOGITS = 8 // 8 * 4096 * 32000 * 2  # Logits[B_X, T, V] in bf16 on one device
# what a layer's backward makes again from its kept In under block (or In, Logits), held while it runs: Q, Kp,
# Vp, A, Att and Hn (T x D in bf16 on one device) and Gt, U and M (T x F)
RERUN = 6 * 4096 * 5120 * 2 + 3 * 4096 * 13824 * 2


def test_the_remat_policy_chooses_what_happens_to_the_logits_and_the_total_moves():
    named = sa.memory(FSDP, **ON, remat="In")
    with_logits = sa.memory(FSDP, **ON, remat="In,Logits")
    assert named.choices.head.policy == "recomputed" and with_logits.choices.head.policy == "kept"
    assert with_logits.parts["activations"] - named.parts["activations"] == LOGITS
    # a layer's gathered weights outweigh the head's W_unemb and its logits: held while the head runs, the
    # logits add nothing to the peak, so the total moves by all of them
    assert named.parts["transient"] == with_logits.parts["transient"]
    assert with_logits.total - named.total == LOGITS
    block = sa.memory(FSDP, **ON, remat="block")
    assert block.total == named.total and block.choices.head.policy == "recomputed"
    none = sa.memory(FSDP, **ON, remat="none")
    assert none.choices.head.policy == "kept" and "Logits" in none.analysis.saved
    # --logits still decides when given
    kept = sa.memory(FSDP, **ON, remat="block", logits="kept")
    assert kept.total == with_logits.total and kept.parts == with_logits.parts


def test_block_reruns_the_heads_product():
    model = model_program(FSDP, ON["mesh"], ON["sizes"])
    again, kept = analyze(model, "train", "In"), analyze(model, "train", "In,Logits")
    head = 2 * 8 * 4096 * 5120 * 32000  # Xf[B, T, D] * W_unemb[D, V], in all
    assert again.flops().recompute - kept.flops().recompute == head
    assert "Logits" not in again.saved and "Xf" in again.saved  # the head's input is its checkpoint


def test_cli_memory_of_a_preset_says_the_remat_policys_choice(capsys):
    base = ["memory", text(FSDP), "--mesh", "X=8", "--sizes", "B=8,T=4096", "--hw", "h100"]
    assert main([*base, "--remat", "block"]) == 0
    out = capsys.readouterr().out
    # the layer's gathered weights and its rerun activations, beside every part of the step
    assert RERUN == 591_396_864
    assert "total        22,469,246,464 bytes (22.5 GB, 20.9 GiB)" in out
    gathered = 4 * 5120 * 5120 * 2 + 3 * 5120 * 13824 * 2  # W_q, W_k, W_v, W_o; W_gate, W_in, W_out
    assert f"transient    {gathered + RERUN:,} bytes" in out  # 1,225,785,344
    assert (
        "note: logits: recomputed (default: as the remat policy, block: keep the layer's input, recompute the "
        "rest: Logits freed after the loss and made again for the backward (held while the head runs; the "
        "head's product runs again, its FLOPs counted))"
    ) in out
    assert main([*base, "--remat", "In,Logits", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["logits"] == {"policy": "kept", "chunks": 1}
    assert data["bytes_per_device"]["total"] == 21_877_849_600 + RERUN + LOGITS
    assert main([*base, "--remat", "block", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["logits"] == {"policy": "recomputed", "chunks": 1}
    assert "Logits" in data["remat"]["recomputed"] and "Xf" in data["remat"]["saved"]


def test_block_keeps_the_heads_input_and_makes_its_final_norm_again():
    """The head (the final norm, its gain, the unembedding) is one more block: under ``block`` it keeps its
    input ``Xl`` and makes ``Xfr``, ``Xf`` and the logits again from it, as a layer keeps ``In`` and makes the
    rest. LLaMA-3 8B, FSDP over X=64, B=64 of 4096 tokens: a chip's B/64 x T x D rows in bf16 are 4096 * 4096 *
    2 = 33,554,432 bytes; kept: 32 layers' In (1,073,741,824) and Xl (33,554,432), 1,107,296,256 bytes in all.
    No norm's statistics are kept: the backward runs each norm again (the layer's first norm from the kept In,
    the final norm from Xl), remaking them; an older count kept those of the norms whose operand is kept
    (4096 * 4 = 16,384 a norm, 33 norms: 540,672 more), and one before it Xfr and Xf besides (2 x 33,554,432
    more).
    Under ``none`` every norm's statistics are kept (the backward reads them and runs no norm again)."""
    program = shard(expand("llama-3-8b"), params="D=X", activations="B=X")
    r = sa.memory(program, mesh="X=64", sizes={"B": 64, "T": 4096}, hw="tpu-v5p", remat="block")
    row = 64 // 64 * 4096 * 4096 * 2
    assert row == 33_554_432
    assert r.analysis.saved == ("In", "Xl")
    assert {"Xfr", "Xf", "Logits"} <= {r.model.statements[i].result for i in r.analysis.recomputed}
    assert r.parts["activations"] == 32 * row + row == 1_107_296_256
    assert r.analysis.statistics() == []
    assert (
        "nor are each row's softmax statistics (the backward runs the core again"
        in r.analysis.attention_note()[1]
    )
    kept = sa.memory(program, mesh="X=64", sizes={"B": 64, "T": 4096}, hw="tpu-v5p", remat="none").analysis
    assert (
        len([label for label, _, _ in kept.statistics() if label.startswith("rmsnorm")]) == 3
    )  # 2 a layer, 1 after
    assert "each row's softmax statistics are (fp32)" in kept.attention_note()[1]


def test_a_list_that_does_not_name_the_layers_output_keeps_its_input_and_says_so():
    """``G`` alone: the backward reads In (dW1 = Inᵀ·dH, and H's rerun reads it too), which no rerun makes (it
    is the previous layer's output), so In is kept, counted and said; the list ``G,Out`` keeps the same bytes
    as each layer's Out, the next layer's In."""
    mlp = (
        "params W1, W2; tokens B; layers L; In[B, D] * W1[D, F] -> H[B, F]; gelu(H[B, F]) -> G[B, F]; "
        "G[B, F] * W2[F, D] -> Out[B, D]"
    )
    on = {"mesh": "X=1", "sizes": {"B": 1024, "D": 1024, "F": 4096, "L": 10}}
    alone, with_out = sa.memory(mlp, **on, remat="G"), sa.memory(mlp, **on, remat="G,Out")
    assert alone.analysis.saved == ("In", "G") and alone.analysis.recomputed == (0,)
    assert alone.parts["activations"] == 10 * (1024 * 4096 + 1024 * 1024) * 2 == with_out.parts["activations"]
    assert "the layer's input In: the backward reads it" in dict(alone.notes)["remat"]
    assert "remat" not in dict(with_out.notes) and with_out.analysis.saved == ("G", "Out")
