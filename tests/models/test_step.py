"""Step time: the overlap policies, the MFU factor, the inference roofline (compute, HBM reads of weights and KV
cache, communication), tokens and days, and the policy mapping."""

from __future__ import annotations

import pytest
import sympy

from shardalg.algebra.symbols import dim_size, quantity
from shardalg.errors import UsageError
from shardalg.models.step import step_time
from shardalg.planning.overlap import OverlapPolicy

B, D, F, S, H = (dim_size(n) for n in "BDFSH")
C, W_ICI, W_HBM, T_MIN = (quantity(n) for n in ("C", "W_ici", "W_hbm", "T_min"))
FSDP = "params W\ntokens B\nIn[B_X, D] * W[D_X, F] -> Out[B_X, F]"


def test_steady_is_the_max_per_phase_and_serial_the_sum():
    steady = step_time(FSDP, mesh="X=4", overlap="steady")
    serial = step_time(FSDP, mesh="X=4", overlap="serial")
    (p,), (q,) = steady.parts, serial.parts
    assert p.compute == q.compute == 6 * B * D * F / (4 * C)  # forward 2BDF + backward 4BDF, over 4 devices
    # forward AllGather of W, backward AllGather again and ReduceScatter of dW: three collectives of 2DF bytes
    one = sympy.Max(2 * T_MIN, 2 * D * F / W_ICI)
    assert p.comms == 3 * one
    # steady: each pass's collectives hide behind its own compute (issue 27): the forward's gather behind the
    # forward's 2BDF/4, the backward's gather and ReduceScatter behind its 4BDF/4; the passes add
    forward = sympy.Max(2 * B * D * F / (4 * C), one)
    backward = sympy.Max(4 * B * D * F / (4 * C), 2 * one)
    assert sympy.simplify(p.total - (forward + backward)) == 0
    assert q.total == q.compute + q.comms


def test_mfu_scales_compute_only():
    full = step_time(FSDP, mesh="X=4", sizes="B=65536,D=4096,F=16384", hw="tpu-v5p")
    forty = step_time(FSDP, mesh="X=4", sizes="B=65536,D=4096,F=16384", hw="tpu-v5p", mfu=0.4)
    assert forty.seconds_of(forty.parts[0].compute) == pytest.approx(
        full.seconds_of(full.parts[0].compute) / 0.4
    )
    assert forty.seconds_of(forty.parts[0].comms) == full.seconds_of(full.parts[0].comms)
    assert ("mfu", "1 (default: peak FLOP/s)") in full.notes and not any(k == "mfu" for k, _ in forty.notes)
    for bad in (0, 1.5, "x"):
        with pytest.raises(UsageError, match="MFU"):
            step_time(FSDP, mesh="X=4", mfu=bad)


def test_tokens_per_second_and_days():
    s = step_time(FSDP, mesh="X=4", sizes="B=65536,D=4096,F=16384", hw="tpu-v5p", tokens=1e12)
    assert s.tokens == 65536
    assert s.tokens_per_second == pytest.approx(65536 / s.seconds)
    assert s.days == pytest.approx(1e12 / s.tokens_per_second / 86400)
    untokened = step_time("params W\nIn[B_X, D] * W[D_X, F] -> Out[B_X, F]", mesh="X=4")
    assert untokened.tokens is None and any(k == "tokens" for k, _ in untokened.notes)


def test_decode_is_a_roofline_of_compute_hbm_and_comms():
    program = """params W
kvcache Kc
tokens B
Q[B, H] * Kc[B, S_X, H] -> Sc[B, S_X]
P[B, S_X] * W[S, D] -> O[B, D]"""
    s = step_time(program, mesh="X=4")
    (p,) = s.parts
    assert s.analysis.mode == "infer"
    assert p.total == sympy.Max(p.compute, p.memory, p.comms)
    # HBM reads: the KV cache's local bytes (sharded over X) and the weight's (gathered P, whole W), not the
    # activations; compute: both local products
    assert sympy.expand(p.memory - (2 * B * S * H / 4 + 2 * S * D) / W_HBM) == 0
    assert sympy.expand(p.compute - (2 * B * S * H / 4 + 2 * B * S * D) / C) == 0
    assert step_time(program, mesh="X=4", overlap="serial").parts[0].total == p.compute + p.memory + p.comms


def test_the_overlap_policies_meet_plan_cost_in_one_place():
    assert [OverlapPolicy.of(p) for p in ("schedule", "steady", "serial")] == list(OverlapPolicy)
    assert step_time(FSDP, mesh="X=4", overlap=OverlapPolicy.SERIAL).policy is OverlapPolicy.SERIAL
    assert step_time(FSDP, mesh="X=4", overlap="serial").to_json()["overlap"] == "serial"
    with pytest.raises(UsageError, match="schedule, steady, serial"):
        step_time(FSDP, mesh="X=4", overlap="overlapped")


@pytest.mark.parametrize("sizes", ["B=64,D=8192,F=32768", "B=65536,D=4096,F=16384", "B=4096,D=1024,F=4096"])
def test_a_schedule_lies_between_steady_and_serial(sizes):
    """The step's dependencies give back some of the overlap that steady assumes across layers, never more
    than serial's sum (numbers on a v5p, communication- and compute-bound sizes)."""
    reports = {
        p: step_time(FSDP, mesh="X=4", sizes=sizes, hw="tpu-v5p", overlap=p)
        for p in ("steady", "schedule", "serial")
    }
    t = {p: r.seconds_of(r.total) for p, r in reports.items()}
    assert t["steady"] <= t["schedule"] * (1 + 1e-12) and t["schedule"] <= t["serial"] * (1 + 1e-12)


def test_json_shape():
    data = step_time(FSDP, mesh="X=4", sizes="B=4096,D=1024,F=4096", hw="tpu-v5e", tokens=1e9).to_json()
    assert set(data) == {
        "mode",
        "overlap",
        "mfu",
        "chip",
        "layers",
        "parts",
        "step",
        "flops",
        "tokens_per_step",
        "tokens_per_second",
        "train_tokens",
        "days",
        "defaults",
    }
    assert data["parts"][0]["bound"] in ("compute", "comms", "hbm")
    assert isinstance(data["step"]["seconds"], float) and data["flops"]["total"] == 6 * 4096 * 1024 * 4096


@pytest.mark.parametrize("mode", ["infer", "train"])
@pytest.mark.parametrize("policy", ["schedule", "steady", "serial"])
def test_step_seconds_is_model_steps_total_in_numbers(mode, policy):
    """The search's fast path (step_seconds, no formula) prices a part as model_step does, under every policy
    (it once took the maximum for an inference step under serial, where model_step adds)."""
    from shardalg.models.analysis import analyze
    from shardalg.models.program import model_program
    from shardalg.models.step import model_step, step_seconds

    model = model_program(FSDP, "X=4", "B=4096,D=1024,F=4096")
    a = analyze(model, mode, None)
    report = model_step(a, "tpu-v5p", policy)
    fast = {p.name: p.total for p in step_seconds(a, "tpu-v5p", policy)}
    for part in report.parts:
        assert fast[part.name] == pytest.approx(report.seconds_of(part.total), rel=1e-9), part.name


def test_seconds_of_refuses_text():
    """User text never reaches sympy's parser: seconds_of takes the report's expressions (or numbers) only."""
    s = step_time(FSDP, mesh="X=4", sizes="B=65536,D=4096,F=16384", hw="tpu-v5p")
    assert s.seconds_of(2.5) == 2.5
    with pytest.raises(UsageError, match="seconds_of takes an expression"):
        s.seconds_of("__import__('os').getcwd()")
