"""An inference step as a sum of per-op rooflines (LLaMA-3 70B decoding at batch 256 on a v5e 4x4, the KV-cache
read its own op), and the efficiencies (MFU, HBM, network) said and applied, from an argument or a chip."""

from __future__ import annotations

import json

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from shardalg.algebra.symbols import quantity
from shardalg.cli import main
from shardalg.costs.chipspec import chip_from_text
from shardalg.costs.costmodel import CostModel
from shardalg.costs.efficiency import Efficiencies
from shardalg.costs.hardware import get
from shardalg.errors import UsageError
from shardalg.models.analysis import analyze
from shardalg.models.expand import expand, shard
from shardalg.models.memory import memory
from shardalg.models.program import model_program
from shardalg.models.step import model_step, step_seconds, step_time
from shardalg.notation.printing import render

# LLaMA-3 70B in int8, decoding: the MLP over all 16 chips, the KV heads over X and the cache's context over Y
DECODE_70B = shard(
    expand("llama-3-70b", "decode", dtype="int8", functions=False), "F=XY,K=X,V=XY", "F=XY,K=X,S=Y,V=XY"
)
ON_V5E = {"mesh": "X=4,Y=4", "sizes": "B=256,S=2048", "hw": "tpu-v5e"}


def test_llama_3_70b_decode_at_batch_256_on_a_v5e_is_a_sum_of_per_op_rooflines():
    s = step_time(DECODE_70B, **ON_V5E)
    v = s.values
    sec = s.seconds_of
    layer, outside = s.parts
    assert [p.name for p in s.parts] == ["layer", "outside"] and int(layer.count) == 80
    # every op is its own roofline: under steady, the max of its compute, HBM time and communication
    for p in s.parts:
        for op in p.ops:
            assert sec(op.total) == pytest.approx(max(sec(op.compute), sec(op.memory), sec(op.comms)))
    # the step is the sum of the ops (times the layer count), not one max over the step
    by_hand = sum(float(p.count) * sum(sec(op.total) for op in p.ops) for p in s.parts)
    assert s.seconds == pytest.approx(by_hand, rel=1e-12)
    whole = step_time(DECODE_70B, **ON_V5E, roofline="whole-step")
    assert whole.seconds == pytest.approx(
        sum(float(p.count) * max(sec(p.compute), sec(p.memory), sec(p.comms)) for p in s.parts)
    )
    assert (
        whole.seconds < s.seconds
    )  # the ops' bounds differ: a max over the step hides the memory-bound ones

    # the KV-cache read is the attention's own op, memory-bound, and reads exactly the cache one layer holds
    (attention,) = [op for op in layer.ops if op.kv_read]
    assert attention.name == "attention (KV-cache read: Kc, Vc)" and attention.bound(v) == "hbm"
    kv = memory(DECODE_70B, **ON_V5E).parts["kv_cache"]
    assert attention.hbm_bytes == kv / 80  # the memory model's KV cache per device, one layer of it
    assert attention.hbm_bytes == 2 * 256 * (2048 // 4) * (8 // 4) * 128  # K and V, int8, S over Y, K over X
    assert sec(attention.memory) == pytest.approx(
        float(attention.hbm_bytes) / get("tpu-v5e").hbm_bandwidth.value
    )
    # the weights' ops read no cache; their HBM bytes are their weights' local bytes
    assert all(not op.kv_read for op in outside.ops)
    assert sum(1 for op in layer.ops if not op.kv_read) == 7  # Q, K, V, O projections and the gated MLP


def test_the_fast_path_prices_decode_per_op_as_the_report_does():
    """step_seconds (the search's path, no formula) agrees op by op with model_step's formulas."""
    a = analyze(model_program(DECODE_70B, ON_V5E["mesh"], ON_V5E["sizes"]), "infer")
    report = model_step(a, "tpu-v5e", "steady", 0.5, hbm_efficiency=0.8)
    fast = step_seconds(a, "tpu-v5e", "steady", report.efficiency)
    for part, quick in zip(report.parts, fast, strict=True):
        assert [name for name, _ in quick.ops] == [op.name for op in part.ops]
        for op, (_, seconds) in zip(part.ops, quick.ops, strict=True):
            assert seconds == pytest.approx(report.seconds_of(op.total), rel=1e-9)
        assert quick.total == pytest.approx(report.seconds_of(part.total), rel=1e-9)


def test_the_step_text_shows_the_kv_read_as_its_own_term(capsys):
    code = main(
        ["step", render(DECODE_70B, "text"), "--mesh", "X=4,Y=4", "--sizes", "B=256,S=2048"]
        + ["--hw", "tpu-v5e"]
    )
    out = capsys.readouterr().out
    assert code == 0
    head = out.splitlines()[0]
    assert "a sum of per-op rooflines" in head and "MFU peak, HBM peak, network peak" in head
    (kv_line,) = [ln for ln in out.splitlines() if "attention (KV-cache read: Kc, Vc)" in ln]
    assert kv_line.lstrip().startswith("op") and kv_line.endswith("(hbm-bound)")
    assert "note: roofline: per-op (default" in out and "note: attention:" in out
    assert "MFU 1" not in out  # never a bare 1: peak is said in words


# ---- efficiencies ----------------------------------------------------------------------------------------
FSDP = "params W\ntokens B\nIn[B_X, D] * W[D_X, F] -> Out[B_X, F]"
C, W_HBM, W_ICI = quantity("C"), quantity("W_hbm"), quantity("W_ici")


def test_each_efficiency_scales_its_own_rates_and_is_said():
    peak = step_time(DECODE_70B, **ON_V5E)
    some = step_time(DECODE_70B, **ON_V5E, mfu=0.5, hbm_efficiency=0.8, network_efficiency=0.25)
    for p, q in zip(peak.parts, some.parts, strict=True):
        for a, b in zip(p.ops, q.ops, strict=True):
            assert some.seconds_of(b.compute) == pytest.approx(peak.seconds_of(a.compute) / 0.5)
            assert some.seconds_of(b.memory) == pytest.approx(peak.seconds_of(a.memory) / 0.8)
            assert b.comms == a.comms.subs(W_ICI, W_ICI / 4)  # bandwidth scaled, latency (T_min) not
    assert not {"compute", "hbm", "network"} & set(dict(some.notes))  # chosen: not defaults
    assert dict(peak.notes)["hbm"].startswith("HBM efficiency peak (1: W_hbm at the chip's peak")
    assert "MFU 0.5, HBM 0.8, network 0.25" in str(some).splitlines()[0]
    data = some.to_json()
    assert data["efficiency"]["hbm"] == {"value": 0.8, "peak": False, "source": "given"}
    assert data["mfu"] == 0.5
    for bad in (0, 1.5, "x", True):
        with pytest.raises(UsageError, match="HBM efficiency"):
            step_time(FSDP, mesh="X=4", hbm_efficiency=bad)


def test_a_chip_carries_a_measured_efficiency_with_its_source(tmp_path):
    f = tmp_path / "measured.toml"
    f.write_text(
        'base = "tpu-v5e"\nname = "v5e-measured"\n'
        'mfu = {value = 0.6, source = "our profile of run 42"}\neff_hbm = {value = 0.9, source = "stream bench"}\n'
    )
    chip = chip_from_text(str(f))
    assert chip.efficiencies()["mfu"].source == "our profile of run 42"
    costs = CostModel.of(chip)
    assert costs.efficiency.compute.value == sympy.Rational(3, 5) and costs.efficiency.network.is_peak
    s = step_time(FSDP, mesh="X=4", sizes="B=4096,D=1024,F=4096", hw=chip)
    notes = dict(s.notes)
    assert (
        notes["compute"]
        == "MFU 0.6: C scaled by it (measured, carried by v5e-measured: our profile of run 42)"
    )
    assert notes["hbm"].startswith("HBM efficiency 0.9")
    assert notes["network"].startswith("network efficiency peak")
    # given on the call, a factor wins over the chip's, and says so
    given = step_time(FSDP, mesh="X=4", sizes="B=4096,D=1024,F=4096", hw=chip, mfu=0.3)
    assert given.efficiency.compute.source == "given" and "compute" not in dict(given.notes)
    assert "mfu = 0.6 of peak (measured); our profile of run 42" in str(chip)
    with pytest.raises(UsageError, match="fraction of peak"):
        chip_from_text("base=tpu-v5e,mfu=2")


def test_efficiencies_are_one_value_of_the_cost_model():
    e = Efficiencies.of(None, mfu=0.4)
    assert CostModel.of("tpu-v5e", efficiency=e) != CostModel.of("tpu-v5e")  # memos keyed apart
    assert e.scaling() == {C: sympy.Rational(2, 5) * C}
    assert Efficiencies().scaling() == {} and Efficiencies().label() == "MFU peak, HBM peak, network peak"
    values = get("tpu-v5e").values()
    assert (
        e.effective(values)[C] == pytest.approx(0.4 * values[C])
        and e.effective(values)[W_HBM] == values[W_HBM]
    )


# ---- properties ------------------------------------------------------------------------------------------

SMALL_DECODE = """params W
kvcache Kc
tokens B
Q[B, H] * Kc[B, S_X, H] -> Sc[B, S_X]
P[B, S_X] * W[S, D] -> O[B, D]"""


@settings(max_examples=12, deadline=None)
@given(
    b=st.sampled_from([1, 8, 64, 512]),
    s=st.sampled_from([256, 4096, 32768]),
    h=st.sampled_from([64, 128]),
    d=st.sampled_from([512, 8192]),
    chip=st.sampled_from(["tpu-v5e", "h100"]),
)
def test_per_op_lies_between_the_whole_step_max_and_the_whole_step_sum(b, s, h, d, chip):
    """Σ_i max(c_i, h_i, m_i) >= max(Σc, Σh, comms) and <= Σc + Σh + Σm: a sum of per-op rooflines is never
    below the whole-step roofline nor above the serial sum, at any size."""
    sizes = f"B={b},S={s},H={h},D={d}"
    per_op = step_time(SMALL_DECODE, mesh="X=4", sizes=sizes, hw=chip).seconds
    whole = step_time(SMALL_DECODE, mesh="X=4", sizes=sizes, hw=chip, roofline="whole-step").seconds
    serial = step_time(
        SMALL_DECODE, mesh="X=4", sizes=sizes, hw=chip, overlap="serial", roofline="whole-step"
    )
    assert whole <= per_op * (1 + 1e-12) and per_op <= serial.seconds * (1 + 1e-12)


def test_step_cli_takes_the_efficiencies_and_the_roofline(capsys):
    argv = ["step", SMALL_DECODE, "--mesh", "X=4", "--sizes", "B=8,S=4096,H=128,D=8192", "--hw", "tpu-v5e"]
    assert main([*argv, "--hbm-efficiency", "0.8", "--net-efficiency", "0.5", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["efficiency"]["hbm"]["value"] == 0.8 and data["efficiency"]["network"]["value"] == 0.5
    assert data["efficiency"]["compute"]["peak"] is True and data["roofline"] == "per-op"
    assert [o["kv_read"] for o in data["parts"][0]["ops"]] == [True, False]
    assert main([*argv, "--roofline", "whole-step"]) == 0
    assert "one roofline over each part: whole-step" in capsys.readouterr().out
    assert main([*argv, "--hbm-efficiency", "1.5"]) == 2
    assert (
        "the HBM efficiency is a fraction of peak HBM bandwidth in (0, 1], not 1.5" in capsys.readouterr().err
    )


def test_a_decode_attention_core_written_whole_is_one_op_whose_hbm_time_is_the_kv_read():
    """Q·Kc, softmax_S, P·Vc of one decode step (T = 1, the cache's context S over Y): one attention op, the
    softmax fused into it, whose HBM bytes are the cache's local bytes (plus the small Q, scores and O)."""
    from shardalg.models.inference import inference_ops

    src = (
        "kvcache Kc, Vc\ntokens B\n"
        "Q[B, H_X, E] · Kc[B, S_Y, H_X, E] -> Sc[B, H_X, S_Y]\n"
        "softmax_S(Sc[B, H_X, S_Y]) -> P[B, H_X, S_Y]\n"
        "P[B, H_X, S_Y] · Vc[B, S_Y, H_X, E] -> O[B, H_X, E]{U_Y}"
    )
    a = analyze(model_program(src, "X=4,Y=4", "B=8,S=4096,H=8,E=128"), "infer")
    (op,) = inference_ops(a, False, CostModel.of("tpu-v5e"))
    assert op.kv_read and op.statements == (0, 1, 2) and op.name == "attention (KV-cache read: Kc, Vc)"
    cache = 2 * 8 * (4096 // 4) * (8 // 4) * 128 * 2  # Kc and Vc, bf16, S over Y, H over X
    # Q and O (bf16); the scores Sc and P, each written and read (this cost model keeps nothing on chip: the
    # products write and read them, the softmax reads Sc and writes P)
    small = 2 * (8 * 2 * 128 * 2) + 4 * (8 * 2 * 1024 * 2)
    assert op.hbm_bytes.evaluate({}) == cache + small


def test_an_inference_function_reads_and_writes_its_operands():
    """An elementwise function is HBM-bound in inference as in training: a prefill's norm over B·T·D read and
    wrote nothing (0 ns: the inference HBM reads were the parameters' and the KV cache's alone), 400.6 us of
    LLaMA-2 13B's prefill on H100 per norm. An einsum still reads only its parameters."""
    from shardalg.models.analysis import analyze
    from shardalg.models.program import model_program
    from shardalg.models.step import model_step

    b, t, d, f = 4, 256, 512, 1024
    program = (
        "params W\ntokens B, T\nrmsnorm_D(In[B, T, D]) -> H[B, T, D]\nH[B, T, D] * W[D, F] -> O[B, T, F]"
    )
    sizes = {"B": b, "T": t, "D": d, "F": f}
    report = model_step(analyze(model_program(program, "X=1", sizes), "infer"), "h100")
    norm, product = report.parts[0].ops
    assert float(norm.hbm_bytes) == 2 * b * t * d * 2  # In read, H written, bf16
    assert float(report.seconds_of(norm.total)) == pytest.approx(2 * b * t * d * 2 / 3.35e12, rel=1e-9)
    assert float(product.hbm_bytes) == d * f * 2  # W alone: the einsum's activations are not counted


def test_the_attention_note_says_whether_the_softmax_is_written():
    """The note said "the softmax between them is not in the notation" beside a program that writes it."""
    from shardalg.models.step import model_step

    core = "kvcache Kc, Vc\ntokens B\nQ[B, H, E] · Kc[B, S, H, E] -> Sc[B, H, S]\n{}P[B, H, S] · Vc[B, S, H, E] -> O[B, H, E]"
    sizes = "B=8,S=4096,H=8,E=128"
    written = core.format("softmax_S(Sc[B, H, S]) -> P[B, H, S]\n")
    bare = core.format("").replace("P[B, H, S] ·", "Sc[B, H, S] ·")
    for src, says in (
        (written, "the softmax between them is part of it"),
        (bare, "writes no softmax between them, so no causal mask: every query is priced against every key"),
    ):
        notes = dict(model_step(analyze(model_program(src, "X=1", sizes), "infer"), "h100").notes)
        assert says in notes["attention"] and "not in the notation" not in notes["attention"]
