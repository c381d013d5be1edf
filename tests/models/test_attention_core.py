"""The presets' training programs write the attention core (issue 26 item 5): the keys' positions S are the
tokens T renamed (S's size derived from T, refused when bound otherwise), the core is causal (its products'
FLOPs halved, checked against a count from the sizes) and fused by default (flash: the scores are not kept,
each row's softmax statistics are), which changes the memory by the scores' bytes and the FLOPs not at all."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sympy

from shardalg.algebra.context import tensors_of
from shardalg.algebra.symbols import dim_size
from shardalg.errors import UsageError
from shardalg.models.analysis import analyze
from shardalg.models.expand import expand, shard, with_attention
from shardalg.models.memory import model_memory
from shardalg.models.presets import get
from shardalg.models.program import model_program, resized
from shardalg.models.step import step_time
from shardalg.notation.printing import text

ROOT = Path(__file__).resolve().parents[2]
PRESETS = ("llama-2-13b", "llama-3-8b", "llama-3-70b", "mixtral-8x7b")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "shardalg", *args], capture_output=True, text=True, check=False, cwd=ROOT
    )


@pytest.mark.parametrize("name", PRESETS)
def test_the_training_program_writes_the_causal_core_over_the_renamed_tokens(name):
    written = text(expand(name))
    for line in (
        "rename_{T,S}(Kp[B, T, K, H]) -> Ks[B, S, K, H]",
        "rename_{T,S}(Vp[B, T, K, H]) -> Vs[B, S, K, H]",
        "Q[B, T, K, G, H] * Ks[B, S, K, H] -> Sc[B, K, G, T, S]",
        "softmax_{S,causal,flash}(Sc[B, K, G, T, S]) -> P[B, K, G, T, S]",
        "P[B, K, G, T, S] * Vs[B, S, K, H] -> A[B, T, K, G, H]",
    ):
        assert line in written
    assert "softmax_{S,causal}(Sc" in text(expand(name, attention="materialized"))
    assert "A[B, T, K, G, H] * W_o" in text(expand(name, functions=False))  # no softmax: A an input
    assert "Sc[" not in text(expand(name, functions=False))


def test_s_is_derived_from_t_and_refused_when_bound_otherwise():
    m = model_program(expand("llama-3-8b"), "X=1", {"B": 1, "T": 512})
    assert m.sizes["S"] == 512
    assert ("renamed", "S = T = 512 (rename_{T,S}: the same positions, derived)") in m.notes
    assert model_program(expand("llama-3-8b"), "X=1", {"B": 1, "T": 512, "S": 512}).sizes["S"] == 512
    with pytest.raises(UsageError) as err:
        model_program(expand("llama-3-8b"), "X=1", {"B": 1, "T": 512, "S": 256})
    assert err.value.message == (
        "S is bound to 256, but rename_{T,S} makes S the dim T under another name: its size is T's, 512"
    )
    assert err.value.fix == "drop S=256 (it is derived: S = T) or bind S=512"
    again = resized(m, {"T": 1024})  # a remedy's smaller (or larger) T derives S again
    assert again.sizes["S"] == 1024
    free = resized(m, {}, free=("T",))  # T symbolic: S is T, one symbol
    assert free.ties == {"S": "T"}
    assert ("renamed", "S = T (rename_{T,S}: the same positions; T unbound, S written as T)") in free.notes
    ks = free.values["Ks"].tensor
    assert free.bytes_of(ks).free_symbols == {dim_size("T")}  # B=1 bound; no S


def test_the_cli_refuses_a_bound_s_that_is_not_t():
    done = _cli("memory", "llama-3-8b", "--mesh", "X=8", "--sizes", "B=8,T=4096,S=2048", "--hw", "h100")
    assert done.returncode == 2
    assert "S is bound to 2048, but rename_{T,S} makes S the dim T" in done.stderr


@pytest.mark.parametrize("name", PRESETS)
def test_the_attention_flops_are_the_causal_half_of_four_btsnh_a_layer(name):
    """The core's FLOPs counted from the sizes, apart from the engine: Q·K and P·V each 2·B·T·S·N·H, halved
    by the causal mask; the backward twice the forward; per device divided by the axis that shards the KV
    heads. The program without the core (functions=False: A an input) has the rest."""
    c = get(name)
    b, t = (4, 256) if c.moe else (1, 256)
    n, h, layers = c.heads.value, c.head_dim.value, c.layers.value
    forward = sympy.Rational(1, 2) * 2 * (2 * b * t * t * n * h) * layers  # two products, causal half
    sizes = {"B": b, "T": t}
    for mesh, params in (("X=1", None), ("X=8", "K=X")):
        core = expand(name)
        bare = expand(name, functions=False)
        if params:
            core, bare = shard(core, params, params), shard(bare, params, params)
        a = analyze(model_program(core, mesh, sizes), "train").flops()
        z = analyze(model_program(bare, mesh, resized_sizes(bare, sizes)), "train").flops()
        assert a.forward - z.forward == forward
        assert a.backward - z.backward == 2 * forward
        shards = 8 if params else 1
        assert a.forward_per_device - z.forward_per_device == forward / shards


def resized_sizes(program, sizes):
    """The bare program's sizes: a MoE's capacity is bound in it as the written routing derives it."""
    if "C" not in {d for s in program.statements for t in _tensors(s) for d in t.dim_names}:
        return sizes
    written = model_program(expand("mixtral-8x7b"), "X=1", sizes)
    return {**sizes, "C": written.sizes["C"]}


def _tensors(s):
    return tensors_of(s)


def test_the_core_steps_are_flagged_causal_and_the_step_prices_the_half():
    m = model_program(expand("llama-3-8b"), "X=1", {"B": 1, "T": 256})
    a = analyze(m, "train")
    made = {info.result: info.index for info in m.statements if info.result}
    assert a.causal_products == {made["Sc"], made["A"]}
    for i in a.causal_products:
        assert all("causal" in s.flags for s in a.forward_plans[i].steps if s.op.value == "einsum")
    grads = [p for info, p in a.grad_plans if info.index in a.causal_products]
    assert len(grads) == 4 and all(
        "causal" in s.flags for p in grads for s in p.steps if s.op.value == "einsum"
    )
    other = [p for info, p in a.grad_plans if info.index not in a.causal_products]
    assert not any("causal" in s.flags for p in other for s in p.steps)


@pytest.mark.parametrize("remat", ["none", "block"])
def test_fused_and_materialized_differ_by_the_scores_bytes_and_not_in_flops(remat):
    """Materialized keeps P (softmax's backward and P·V's read it) where fused keeps each row's two fp32
    statistics: per device, with the KV heads over X=2, L·(B·T·S·(N/2)·2 − B·T·(N/2)·8) bytes under remat none;
    under block both recompute the layer, and the step's FLOPs are the same either way."""
    b, t = 2, 256
    c = get("llama-3-8b")
    n, layers = c.heads.value, c.layers.value

    def report(form):
        prog = shard(expand("llama-3-8b", attention=form), "K=X", "K=X")
        a = analyze(model_program(prog, "X=2", {"B": b, "T": t}), "train", remat)
        return a, model_memory(a, "h100").to_json()["bytes_per_device"]["activations"]

    (fa, fused), (ma, mat) = report("fused"), report("materialized")
    scores = b * t * t * (n // 2) * 2  # P, bf16, per device
    statistics = b * t * (n // 2) * 2 * 4  # max and sum, fp32, a row
    want = layers * (scores - statistics) if remat == "none" else 0
    assert mat - fused == want
    assert fa.flops() == ma.flops()
    assert fa.fused_attention and not ma.fused_attention


def test_with_attention_sets_the_softmax_flag_and_refuses_a_program_without_a_core():
    fused = with_attention(expand("llama-3-8b", attention="materialized"), "fused")
    assert text(fused) == text(expand("llama-3-8b"))
    assert text(with_attention(fused, "materialized")) == text(expand("llama-3-8b", attention="materialized"))
    with pytest.raises(UsageError, match="writes no attention core"):
        with_attention(expand("llama-3-8b", functions=False), "fused")
    with pytest.raises(UsageError, match="decode program does not write"):
        expand("llama-3-8b", "decode", attention="fused")


def test_model_show_says_the_attention_default_in_text_and_json():
    shown = _cli("model", "show", "llama-3-8b").stdout
    assert "# attention: fused (flash: softmax_{S,causal,flash};" in shown and "the default" in shown
    doc = json.loads(_cli("model", "show", "llama-3-8b", "--format", "json").stdout)
    assert doc["attention"] == {"form": "fused", "chosen": False}
    doc = json.loads(
        _cli("model", "show", "llama-3-8b", "--attention", "materialized", "--format", "json").stdout
    )
    assert doc["attention"] == {"form": "materialized", "chosen": True}
    assert (
        json.loads(_cli("model", "show", "llama-3-8b", "--phase", "decode", "--format", "json").stdout)[
            "attention"
        ]
        is None
    )
    done = _cli("model", "show", "llama-3-8b", "--phase", "prefill", "--attention", "fused")
    assert done.returncode == 2 and "does not write" in done.stderr


def test_memory_and_step_take_the_attention_and_say_it():
    args = ("llama-3-8b", "--mesh", "X=8", "--sizes", "B=8,T=1024", "--hw", "h100", "--json")
    fused = json.loads(_cli("memory", *args).stdout)
    mat = json.loads(_cli("memory", *args, "--attention", "materialized").stdout)
    said = {d["key"]: d["value"] for d in fused["defaults"]}
    assert said["attention"].startswith("fused (the softmax says flash)")
    assert {d["key"]: d["value"] for d in mat["defaults"]}["attention"].startswith("materialized")
    assert mat["bytes_per_device"]["activations"] > fused["bytes_per_device"]["activations"]
    s_fused = json.loads(_cli("step", *args).stdout)
    s_mat = json.loads(_cli("step", *args, "--attention", "materialized").stdout)
    assert s_fused["flops"] == s_mat["flops"]


def test_step_time_counts_the_core():
    with_core = step_time(expand("llama-3-8b"), mesh="X=1", sizes={"B": 1, "T": 256}, hw="h100", mode="train")
    assert "renamed: S = T = 256" in str(with_core)


def test_a_fused_cores_scores_move_no_hbm_bytes_in_a_training_step():
    """Fused, the step's HBM bytes lose exactly the scores' and their cotangents' traffic; the FLOPs stay."""
    sizes = {"B": 1, "T": 256}
    fused = analyze(model_program(expand("llama-3-8b"), "X=1", sizes), "train")
    mat = analyze(model_program(expand("llama-3-8b", attention="materialized"), "X=1", sizes), "train")
    assert set(mat.on_chip) == set(mat.gradient_parts)
    # and the parts of a gradient more than one product gives (shardalg.planning.accumulate): added as made
    assert set(fused.on_chip) == {"Sc", "P", "dSc", "dP", "dHa'", "dHn'"}
    assert set(mat.gradient_parts) == {"dHa'", "dHn'"}
    f = step_time(expand("llama-3-8b"), mesh="X=1", sizes=sizes, hw="h100", mode="train")
    m = step_time(
        expand("llama-3-8b", attention="materialized"), mesh="X=1", sizes=sizes, hw="h100", mode="train"
    )
    assert f.to_json()["flops"] == m.to_json()["flops"]
    assert f.to_json()["step"]["seconds"] < m.to_json()["step"]["seconds"]
    hbm = [{p["part"]: p["hbm"]["seconds"] for p in x.to_json()["parts"]} for x in (f, m)]
    assert hbm[0]["layer"] < hbm[1]["layer"]
