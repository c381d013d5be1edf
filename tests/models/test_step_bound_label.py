"""A training step's time counts compute and communication, not HBM: the part's bound names one of those two,
and where the HBM time is the larger it is said beside the bound (it was labelled ``hbm-bound`` while the
time beside the label was the compute's)."""

from __future__ import annotations

import pytest

from shardalg.models.step import step_time

# One product on one chip, 8 tokens: the weight's traffic dwarfs the FLOPs.
ONE = "params W; tokens B\nIn[B, D] * W[D, F] -> Out[B, F]"
ON = dict(mesh="X=1", sizes={"B": 8, "D": 8192, "F": 8192}, hw="tpu-v5p")


def test_a_training_part_is_bound_by_what_its_time_counts() -> None:
    r = step_time(ONE, **ON)
    (part,) = r.parts
    # FLOPs 6·B·D·F = 6·8·8192·8192 = 3,221,225,472 at C = 4.59e14: 7.018 us, the step's time. HBM: W read
    # twice and dW written once (3 · 8192 · 8192 · 2 = 402,653,184 bytes) and the activations' 786,432:
    # 403,439,616 bytes at W_hbm = 2.8e12, 144.1 us, not in the time.
    assert float(part.total.subs(r.values)) == pytest.approx(3_221_225_472 / 4.59e14, rel=1e-12)
    assert float(part.memory.subs(r.values)) == pytest.approx(403_439_616 / 2.8e12, rel=1e-12)
    assert part.bound(r.values) == "compute" and part.hbm_above(r.values)
    line = next(s for s in str(r).splitlines() if s.startswith("layer"))
    assert line.endswith("-> 7.018 us (compute-bound; HBM 144.1 us above it, not counted in training)")
    j = r.to_json()
    assert j["parts"][0]["bound"] == "compute" and j["parts"][0]["hbm_counted"] is False


def test_an_inference_part_still_counts_its_hbm() -> None:
    r = step_time(ONE, mode="infer", roofline="whole-step", **ON)
    (part,) = r.parts
    assert part.bound(r.values) == "hbm" and not part.hbm_above(r.values)
