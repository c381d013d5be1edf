"""Memory per device by part, the remat policies, FLOPs from the plans, transients, inference, defaults stated,
and the errors a user meets."""

from __future__ import annotations

import pytest
import sympy

from shardalg.algebra.symbols import dim_size
from shardalg.errors import UsageError
from shardalg.models.analysis import analyze
from shardalg.models.memory import memory
from shardalg.models.program import model_program
from shardalg.planning.symbolic import NeedsSizes, piecewise

B, D, F, L, S = (dim_size(n) for n in "BDFLS")

GATED = """params W_gate, W_in, W_out
layers L
tokens B
In[B_X, D] * W_gate[D_X, F] -> G[B_X, F]
In[B_X, D] * W_in[D_X, F] -> U[B_X, F]
H[B_X, F] * W_out[F_X, D] -> Out[B_X, D]"""
DP = "params W\nIn[B_X, D] * W[D, F] -> Out[B_X, F]"
FSDP = "params W\nIn[B_X, D] * W[D_X, F] -> Out[B_X, F]"
LOCAL = "params W\nIn[B, D] * W[D, F] -> Out[B, F]"  # nothing sharded: every plan decided without sizes


# sizes at which every plan is decided: the gradients all-reduce, FSDP gathers W (B > 4*D*F/(D + 4*F))
AT = {B: 65536, D: 1024, F: 4096}
SIZES = {str(k): v for k, v in AT.items()}


def test_dp_replicates_parameters_and_fsdp_shards_them():
    dp, fsdp = memory(DP, mesh="X=4", sizes=SIZES), memory(FSDP, mesh="X=4", sizes=SIZES)
    assert dp.parts["params"] == (2 * D * F).subs(AT) and fsdp.parts["params"] == (D * F / 2).subs(AT)
    assert dp.parts["optimizer"] == (8 * D * F).subs(AT) and fsdp.parts["optimizer"] == (2 * D * F).subs(
        AT
    )  # adam: 8 bytes a param
    assert dp.parts["grads"] == dp.parts["params"]  # the gradient ends in the parameter's sharding
    assert dp.params == fsdp.params == (D * F).subs(AT)
    assert dp.parts["transient"] == 0 and fsdp.parts["transient"] == (2 * D * F).subs(AT)  # the gathered W


def test_memory_chooses_no_plan_by_a_made_up_size():
    # FSDP's plan depends on B: below 6144 it moves the activations (nothing gathered), above it gathers W
    with pytest.raises(NeedsSizes) as err:
        memory(FSDP, mesh="X=4", sizes="D=4096,F=16384")
    assert err.value.choice.symbols == ("B",) and err.value.choice.contenders[-1].low == 6144
    pieces = piecewise(lambda: memory(FSDP, mesh="X=4", sizes="D=4096,F=16384").parts["transient"])
    assert [w for w, _ in pieces] == ["B < 16384/9", "16384/9 < B < 6144", "B > 6144"]
    assert [t for _, t in pieces] == [0, 0, 4096 * 16384 * 2]
    for b, (_, t) in zip((1024, 4096, 8192), pieces, strict=True):  # each piece is the numeric plan's answer
        assert memory(FSDP, mesh="X=4", sizes=f"B={b},D=4096,F=16384").parts["transient"] == t


@pytest.mark.parametrize(
    ("remat", "saved", "recomputed"),
    [
        ("none", ("In", "G", "U", "H"), ()),  # In and H by the gradient einsums; G and U by the hidden gate
        ("block", ("In",), ("G", "U")),
        ("G,U,Out", ("G", "U", "Out"), ()),
        ("Out", ("Out",), ("G", "U")),
    ],
)
def test_remat_policies_keep_and_recompute(remat, saved, recomputed):
    a = analyze(model_program(GATED, mesh="X=4"), remat=remat)
    assert a.saved == saved
    assert tuple(a.model.statements[i].result for i in a.recomputed) == recomputed
    f = a.flops()
    assert f.forward == 6 * B * D * F * L and f.backward == 2 * f.forward  # 2 gradient einsums a product
    assert f.recompute == 2 * B * D * F * L * len(recomputed)
    assert f.total_per_device == f.total / 4  # every product split over X


def test_activations_follow_their_sharding_and_the_layer_count():
    r = memory(GATED, mesh="X=4", sizes={**SIZES, "L": 8}, remat="none")
    want = (L * (B * D / 4 * 2 + 3 * B * F / 4 * 2)).subs({**AT, L: 8})  # In; G, U, H
    assert r.parts["activations"] == want


def test_the_program_saved_list_is_the_default_policy_and_is_stated():
    r = memory(GATED + "\nsaved G, U, Out", mesh="X=4", sizes={**SIZES, "L": 8})
    assert r.analysis.remat.names == ("G", "U", "Out") and not r.analysis.remat.chosen
    assert ("remat", "keep G, U, Out (the program's saved list)") in r.notes


def test_every_default_is_stated():
    r = memory("params W\nIn[B, D] * W[D, F] -> Out[B, F]", mesh="X=1")
    keys = [k for k, _ in r.notes]
    assert keys == ["layers", "mode", "remat", "optimizer", "precision", "zero"]
    data = r.to_json()
    assert [d["key"] for d in data["defaults"]] == keys
    assert "note: optimizer: adam (default" in str(r)


def test_inference_counts_parameters_and_kv_cache_only():
    program = """params W_q
kvcache Kc
layers 2
Q[B, D] * W_q[D, H] -> Qh[B, H]
Qh[B, H] * Kc[B, S_X, H] -> Sc[B, S_X]"""
    r = memory(program, mesh="X=4")
    assert r.analysis.mode == "infer" and ("mode", "infer (the program declares a KV cache)") in r.notes
    assert r.parts["grads"] == r.parts["optimizer"] == r.parts["activations"] == 0
    assert sympy.expand(r.parts["kv_cache"] - 2 * (B * S * dim_size("H") / 4 * 2)) == 0
    assert sympy.expand(r.parts["params"] - 2 * (D * dim_size("H") * 2)) == 0


def test_json_numbers_when_bound_formulas_otherwise():
    bound = memory(FSDP, mesh="X=4", sizes="B=64,D=1024,F=4096", hw="tpu-v5e").to_json()
    assert set(bound) >= {
        "params",
        "bytes_per_device",
        "hbm_bytes",
        "fits",
        "headroom",
        "defaults",
        "tensors",
    }
    assert set(bound["bytes_per_device"]) == {
        "params",
        "grads",
        "optimizer",
        "activations",
        "kv_cache",
        "transient",
        "total",
    }
    assert bound["params"] == 1024 * 4096 and bound["fits"] is True
    assert bound["bytes_per_device"]["params"] == 1024 * 4096 // 2 and bound["hbm_bytes"] == 16_000_000_000
    free = memory(LOCAL, mesh="X=1").to_json()  # nothing sharded: no plan to choose, formulas in the sizes
    assert free["params"] == "D*F" and free["fits"] is None and free["hbm_bytes"] is None


def test_fits_and_headroom_on_a_chip():
    r = memory(DP, mesh="X=4", sizes="B=64,D=8192,F=262144", hw="tpu-v5e")
    assert r.fits is False and float(r.headroom) < 0
    assert "fits         NO" in str(r)


@pytest.mark.parametrize(
    ("program", "kw", "message"),
    [
        ("params W, Q\nIn[B, D] * W[D, F] -> Out[B, F]", {}, "Q is declared but not a tensor of the program"),
        (
            DP,
            {"remat": "Wrong"},
            "--remat takes none, block, saved or activations of the program, not 'Wrong'",
        ),
        (DP, {"remat": "W"}, "not 'W'"),
        (DP, {"remat": "saved"}, "the program has none"),
        (DP, {"optimizer": "adagrad"}, "unknown optimizer 'adagrad'"),
        (DP, {"grads": "fp8"}, "grads is one of param, none"),
        (DP, {"mode": "serve"}, "the mode is train or infer"),
        ("params W\n[B, D] * W[D, F] -> Out[B, F]", {}, "needs named tensors"),
    ],
)
def test_errors_name_the_problem(program, kw, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        memory(program, mesh="X=4", **kw)


def test_a_model_needs_a_mesh_and_a_number_for_the_optimizer_works():
    with pytest.raises(UsageError, match="a model needs a mesh"):
        memory(DP)
    assert memory(LOCAL, mesh="X=1", optimizer="12").parts["optimizer"] == 12 * D * F
    assert (
        sympy.simplify(
            memory(LOCAL, mesh="X=1", optimizer=2.5).parts["optimizer"] - sympy.Rational(5, 2) * D * F
        )
        == 0
    )


def test_a_kept_gathered_copy_is_one_buffer_counted_once():
    """With ``keep_gathered`` the forward's gathered copy of a weight is held until the backward reads it: one
    buffer, counted with the activations (``kept``), not again as the transient the layer gathers. LLaMA-3 8B,
    FSDP over X=64, B=64 of 4096 tokens, no remat: every gathered weight but the norms' gains is kept (each
    layer's W_q, ..., W_out, and W_unemb[D, V] = 4096 * 128256 * 2 = 1,050,673,152 bytes); the transient is the
    larger of what a layer gathers and does not keep, g_attn and g_mlp (2 x 4096 * 2 = 16,384), and the head's
    g_final (8,192): 16,384, where the old count held W_unemb again (1,050,681,344)."""
    from shardalg.models.expand import expand, shard

    program = shard(expand("llama-3-8b"), params="D=X", activations="B=X")
    on = {"mesh": "X=64", "sizes": {"B": 64, "T": 4096}, "hw": "tpu-v5p"}
    kept, again = memory(program, **on, keep_gathered=True), memory(program, **on)
    unemb = 4096 * 128256 * 2
    rows = {name: b * n for part, name, b, n in kept.rows if part == "activations"}
    assert rows["kept W_unemb[D, V]"] == unemb == 1_050_673_152
    assert kept.parts["transient"] == 2 * 4096 * 2 == 16_384
    assert again.parts["transient"] == unemb + 4096 * 2  # gathered again: the head's W_unemb and g_final
    assert kept.parts["activations"] - again.parts["activations"] == sum(
        b for name, b in rows.items() if name.startswith("kept ")
    )


def test_a_model_read_again_says_only_what_its_caller_replaced():
    from shardalg.models.program import resized

    m = model_program("params W; layers L\nIn[B_X, D] * W[D, F] -> Out[B_X, F]\nwhere L=4, B=8", "X=2", "L=2")
    said = [("sizes", "--sizes L=2 replaces the program's L=4")]
    assert [n for n in m.notes if n[0] == "sizes"] == said
    for again in (m.with_sizes(B=4), resized(m, {"B": 2})):  # B the tool's (a microbatch): not the caller's
        assert [n for n in again.notes if n[0] == "sizes"] == said
        assert again.program is m.program and again.layers == 2
