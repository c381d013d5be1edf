"""A causal prefill counts the pairs a causal kernel does (``shardalg.models.inference``): the preset's prefill
core is ``softmax_{S,causal}`` and its two products count T·S/2 of the prompt's (T, S) pairs, the training
core's convention, in FLOPs and in time, while its K/V read stays whole; a causal core over a cache of another
length than its queries is refused (a prefix already cached does T·S − T²/2 pairs, which the halved steps do not
count); a decode step and a core written without ``causal`` count every pair. Every count is derived here
from the sizes (B, T, S, heads, head dim), never typed in."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from shardalg.cli import main
from shardalg.errors import UsageError
from shardalg.models.analysis import Analysis, analyze
from shardalg.models.expand import expand
from shardalg.models.presets import names
from shardalg.models.program import model_program
from shardalg.models.serving import serve
from shardalg.models.step import model_step
from shardalg.models.stepreport import OpPart, StepReport
from shardalg.notation.parse import parse
from shardalg.notation.printing import text
from shardalg.notation.syntax import Apply, Arrow, Op, Program

PRESET = "llama-3-8b"
B, T = 2, 128
CORE = """kvcache Kc, Vc
tokens B, T
Q[B, T, H, E] * Kc[B, S, H, E] -> Sc[B, H, T, S]
{softmax}(Sc[B, H, T, S]) -> P[B, H, T, S]
P[B, H, T, S] * Vc[B, S, H, E] -> O[B, T, H, E]"""


def _not_causal(program: Program) -> Program:
    """``program`` with its softmax's ``causal`` flag dropped: the same core counting every pair."""
    out = []
    for s in program.statements:
        f = s.expr if isinstance(s, Arrow) else None
        if isinstance(f, Apply) and f.op is Op.SOFTMAX:
            s = replace(s, expr=replace(f, flags=tuple(x for x in f.flags if x != "causal")))
        out.append(s)
    return Program(tuple(out), program.mesh, program.sizes, program.roles, source=None)


def _attention(report: StepReport) -> OpPart:
    (op,) = [o for o in report.parts[0].ops if o.kv_read]
    return op


def _flops(report: StepReport, op: OpPart) -> float:
    """The op's compute as FLOPs per device: its time at peak, FLOPs over ``C``, with ``C`` = 1."""
    assert report.seconds_of(op.compute) is not None  # bound: a number on the chip
    return float(op.compute.subs({s: 1 for s in op.compute.free_symbols if s.name == "C"}))


def _step(program: Program | str, sizes: dict[str, int]) -> tuple[Analysis, StepReport]:
    a = analyze(model_program(program, "X=1", sizes), "infer")
    return a, model_step(a, "h100")


def _heads(a: Analysis) -> int:
    """Query heads times head dim of the preset, from its own sizes: N·H = K·G·H."""
    s = a.model.sizes
    return s["K"] * s["G"] * s["H"]


def test_the_preset_prefill_counts_half_the_pairs_in_flops_and_time_and_reads_kv_whole():
    causal, report = _step(expand(PRESET, "prefill"), {"B": B, "T": T, "S": T})
    full, full_report = _step(_not_causal(expand(PRESET, "prefill")), {"B": B, "T": T, "S": T})
    every_pair = 4 * B * T * T * _heads(causal)  # Q·Kc and P·Vc, 2 FLOPs a multiply-add each, a layer
    assert _flops(full_report, _attention(full_report)) == pytest.approx(every_pair, rel=1e-9)
    assert _flops(report, _attention(report)) == pytest.approx(every_pair / 2, rel=1e-9)
    layers = causal.model.layers
    assert causal.flops().forward == full.flops().forward - every_pair // 2 * layers
    assert _attention(report).hbm_bytes == _attention(full_report).hbm_bytes  # every K/V block still read
    assert report.seconds is not None and full_report.seconds is not None
    assert report.seconds < full_report.seconds


def test_decode_counts_every_pair_and_a_prefill_of_as_many_tokens_half_of_them():
    a, decode = _step(expand(PRESET, "decode"), {"B": B, "S": T})
    per_token = 4 * B * T * _heads(a)  # one new token against all S = T keys of the cache
    assert _flops(decode, _attention(decode)) == pytest.approx(per_token, rel=1e-9)
    assert "causal" not in str(expand(PRESET, "decode"))
    _, prefill = _step(expand(PRESET, "prefill"), {"B": B, "T": T, "S": T})
    assert _flops(prefill, _attention(prefill)) == pytest.approx(T * per_token / 2, rel=1e-9)


@pytest.mark.parametrize(
    ("softmax", "t", "s", "pairs"),
    [
        ("softmax_S", 64, 64, lambda t, s: t * s),  # a core written without causal: every pair
        ("softmax_S", 64, 256, lambda t, s: t * s),
        ("softmax_{S,causal}", 64, 64, lambda t, s: t * s / 2),  # the training core's T·S/2
    ],
)
def test_a_written_core_counts_the_pairs_it_does(softmax, t, s, pairs):
    h, e = 4, 32
    a, report = _step(parse(CORE.format(softmax=softmax)), {"B": B, "T": t, "S": s, "H": h, "E": e})
    assert _flops(report, _attention(report)) == pytest.approx(4 * B * pairs(t, s) * h * e, rel=1e-9)
    kv = 2 * B * s * h * e * 2  # Kc and Vc in bf16, read whole however many pairs are done
    assert float(_attention(report).hbm_bytes) == kv


def test_a_causal_core_with_fewer_keys_than_queries_is_refused():
    with pytest.raises(UsageError, match="at least as many keys as queries: S=32 keys against T=64"):
        _step(parse(CORE.format(softmax="softmax_{S,causal}")), {"B": B, "T": 64, "S": 32, "H": 4, "E": 32})


def test_a_causal_core_over_a_cached_prefix_is_refused_not_halved():
    """S > T: a causal kernel does T·S − T²/2 pairs; the halved steps would count T·S/2, in FLOPs and time."""
    with pytest.raises(
        UsageError, match=r"prefix of 192 tokens already cached\) does T·S − T²/2 pairs"
    ) as got:
        _step(parse(CORE.format(softmax="softmax_{S,causal}")), {"B": B, "T": 64, "S": 256, "H": 4, "E": 32})
    assert "write softmax_S to count every pair" in got.value.fix


def test_serve_prices_the_causal_prefill_and_says_so():
    r = serve(PRESET, "X=1", f"B={B}", "h100", T, 2)
    causal, step = _step(expand(PRESET, "prefill"), {"B": B, "T": T, "S": T})
    _, full = _step(_not_causal(expand(PRESET, "prefill")), {"B": B, "T": T, "S": T})
    every_pair = 4 * B * T * T * _heads(causal)
    assert _flops(r.prefill, _attention(r.prefill)) == pytest.approx(every_pair / 2, rel=1e-9)
    assert r.ttft_s == pytest.approx(step.seconds, rel=1e-12)
    assert full.seconds is not None and r.ttft_s < full.seconds
    said = dict(r.notes)["prefill"]
    assert "causal" in said and "T·S/2" in said and "every (T, S) pair" not in said


def test_the_cli_step_of_the_preset_prefill_counts_half_the_pairs(tmp_path, capsys):
    path = tmp_path / "prefill.sa"
    path.write_text(text(expand(PRESET, "prefill")))
    argv = [
        "step",
        str(path),
        "--mesh",
        "X=1",
        "--sizes",
        f"B={B},T={T},S={T}",
        "--hw",
        "h100",
        "--mode",
        "infer",
    ]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (op,) = [o for o in doc["parts"][0]["ops"] if o["kv_read"]]
    a, _ = _step(expand(PRESET, "prefill"), {"B": B, "T": T, "S": T})
    assert op["compute"]["formula"] == f"{4 * B * T * T * _heads(a) // 2}/C"  # half of every pair's FLOPs
    assert op["hbm_bytes"] == 2 * B * T * a.model.sizes["K"] * a.model.sizes["H"] * 2  # Kc, Vc whole, bf16


@pytest.mark.parametrize("phase", ["train", "prefill"])
@pytest.mark.parametrize("name", names())
def test_a_preset_core_masks_by_its_tokens(name, phase):
    """A causal softmax masks by the dim just before S (the executor, the JAX export). The presets wrote
    Sc[B, T, K, G, S], whose dim before S is G, the query group: the mask was between G and S."""
    program = expand(name, phase)
    applied = [s.expr for s in program.statements if isinstance(s, Arrow) and isinstance(s.expr, Apply)]
    (core,) = [f for f in applied if "causal" in f.flags]
    dims = core.operands[0].dim_names
    assert dims[dims.index(core.dim) - 1] in program.roles.tokens
