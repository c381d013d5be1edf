"""Pipeline parallelism: a mesh axis as stages, microbatches, the bubble, the stage boundary as Sends, memory
per stage; and the two sides of the choice on two v5p pods over DCN (P as data parallelism or as stages)."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest

import shardalg
from shardalg.cli import main
from shardalg.errors import UsageError
from shardalg.models.pipeline import SCHEDULES, pipeline_price

STAGE = """params W1, W2; layers L
In[B_X, D] * W1[D, F_Y] -> H[B_X, F_Y]
H[B_X, F_Y] * W2[F_Y, D] -> Out[B_X, D]{U_Y}
"""
DATA = STAGE.replace("B_X", "B_PX")  # the same layer with P as one more data-parallel axis
MESH4, SIZES4 = "P=4,X=8,Y=4", "B=512,D=8192,F=32768,L=32"


def test_four_stages_bubble_and_memory_per_stage() -> None:
    r = pipeline_price(STAGE, MESH4, SIZES4, "tpu-v5p", axis="P", microbatches=8)
    assert (r.stages, r.layers_per_stage, r.ticks, r.bubble) == (4, 8, 11, Fraction(3, 11))
    # the step: 11 ticks of (the stage's 8 layers over 8 microbatches + the two sends)
    whole = shardalg.step_time(STAGE, MESH4, SIZES4, "tpu-v5p")
    (layer,) = [p for p in whole.parts if p.name == "layer"]
    stage = whole.seconds_of(layer.total) * 8
    assert r.stage_seconds == pytest.approx(stage)
    send = shardalg.cost(
        "Send_{P,+1}(H[S_P, E]) -> H[S_P, E]", MESH4, {"S": 4, "E": 512 // 8 * 8192 // 8}, "tpu-v5p"
    )
    assert r.send_seconds == pytest.approx(2 * send.seconds)
    assert r.seconds == pytest.approx(11 * (stage / 8 + 2 * send.seconds))
    # memory per stage: a quarter of the weights; 1F1B holds 4, 3, 2, 1 microbatches of 8 in flight
    mem = shardalg.memory(STAGE, MESH4, SIZES4, "tpu-v5p")
    weights = float(mem.parts["params"] + mem.parts["grads"] + mem.parts["optimizer"])
    acts = float(mem.parts["activations"])
    assert [s.in_flight for s in r.memory] == [4, 3, 2, 1]
    for s in r.memory:
        assert s.weights == pytest.approx(weights / 4)
        assert s.activations == pytest.approx(acts / 4 * s.in_flight / 8)
    gpipe = pipeline_price(STAGE, MESH4, SIZES4, "tpu-v5p", axis="P", microbatches=8, schedule="gpipe")
    assert [s.in_flight for s in gpipe.memory] == [8] * 4 and gpipe.bubble == r.bubble
    assert (
        "microbatches",
        "8 not checked against the batch (declare 'tokens B, ...' to check that each chip's "
        "batch splits into them)",
    ) in r.notes


def test_the_cli_prints_the_bubble_and_each_stage(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    f = tmp_path / "stage.txt"
    f.write_text(STAGE)
    args = ["step", str(f), "--mesh", MESH4, "--sizes", SIZES4, "--hw", "tpu-v5p", "--pipeline", "P"]
    assert main([*args, "--microbatches", "8"]) == 0
    out = capsys.readouterr().out
    assert "bubble       (p - 1)/(m + p - 1) = 3/11 = 27.3%" in out
    for s, n in ((0, 4), (1, 3), (2, 2), (3, 1)):
        assert f"stage {s}" in out and f"({n} microbatch" in out
    assert "pipeline schedule: 1f1b (default" in out


def _two_pods() -> shardalg.Mesh:
    return shardalg.slice_mesh("v5p-17920", "P=pod,X=x*y,Y=z")


PURE = """params W1, W2; layers L
In[B_XY, D] * W1[D, F] -> H[B_XY, F]
H[B_XY, F] * W2[F, D] -> Out[B_XY, D]
"""  # data parallelism only: the weights whole on each chip


def test_no_pipeline_when_the_model_fits_and_the_bubble_costs_more() -> None:
    """A small layer and 16384 tokens a chip: P as data parallelism pays its gradient AllReduce over DCN,
    overlapped with the compute under the steady policy; a pipeline over the two pods pays the bubble (1/9
    of its ticks) and the Sends of each microbatch's activations over DCN, more than it saves."""
    mesh, sizes = _two_pods(), "B=18350080,D=2048,F=8192,L=16"
    data = PURE.replace("B_XY", "B_PXY")
    dp = shardalg.step_time(data, mesh, sizes, "tpu-v5p")
    (layer,) = [p for p in dp.parts if p.name == "layer"]
    compute, comms = dp.seconds_of(layer.compute), dp.seconds_of(layer.comms)
    assert comms < compute  # the DCN AllReduce hides under the compute
    assert dp.seconds == pytest.approx(16 * compute)
    assert shardalg.memory(data, mesh, sizes, "tpu-v5p").fits
    pp = pipeline_price(PURE, mesh, sizes, "tpu-v5p", axis="P", microbatches=8)
    assert pp.fits and pp.bubble == Fraction(1, 9)
    assert pp.bubble_seconds + 9 * pp.send_seconds > 16 * (compute - max(comms, 0)) - pp.stage_seconds + 0
    assert pp.seconds > dp.seconds


def test_the_pipeline_wins_when_the_gradient_allreduce_dominates() -> None:
    """Large weights and 2 tokens a chip: data parallelism over both pods reduces every layer's gradients
    each step (its comms dwarf its compute); a pipeline over the pods holds half the layers a chip, so half
    the gradients to reduce, and pays a bubble of 1/5 and the Sends of its microbatches."""
    mesh, sizes = _two_pods(), "B=35840,D=8192,F=16384,L=16"
    data = PURE.replace("B_XY", "B_PXY")
    dp = shardalg.step_time(data, mesh, sizes, "tpu-v5p")
    (layer,) = [p for p in dp.parts if p.name == "layer"]
    compute, comms = dp.seconds_of(layer.compute), dp.seconds_of(layer.comms)
    # the gradients' AllReduce hides behind the backward's compute only (per-phase overlap): the layer is
    # its forward plus its comms-bound backward, and the comms dwarf the compute
    assert comms > 100 * compute and dp.seconds == pytest.approx(16 * dp.seconds_of(layer.total))
    assert dp.seconds_of(layer.total) == pytest.approx(comms, rel=0.01)
    assert shardalg.memory(data, mesh, sizes, "tpu-v5p").fits  # it fits without a pipeline, and still loses
    pp = pipeline_price(PURE, mesh, sizes, "tpu-v5p", axis="P", microbatches=4)  # 4 tokens a chip: 1 each
    assert pp.bubble == Fraction(1, 5) and pp.fits
    assert pp.seconds < dp.seconds
    assert pp.stage_seconds < 0.55 * dp.seconds  # half the layers (and their gradients) a chip


@pytest.mark.parametrize(
    ("program", "mesh", "sizes", "axis", "message"),
    [
        (DATA, MESH4, SIZES4, "P", "In is sharded over the pipeline axis P"),
        (STAGE, MESH4, SIZES4, "Q", "the pipeline axis Q is not an axis of the mesh (P, X, Y)"),
        (STAGE, MESH4, "B=512,D=8192,F=32768,L=30", "P", "30 layers do not split evenly into 4 stages"),
        (
            "tokens B; " + STAGE,
            MESH4,
            "B=16,D=8192,F=32768,L=32",
            "P",
            "4 microbatches do not split the 2 of B",
        ),
    ],
)
def test_a_pipeline_is_refused_where_it_has_no_meaning(program, mesh, sizes, axis, message) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        pipeline_price(program, mesh, sizes, "tpu-v5p", axis=axis, microbatches=4)


def test_the_schedules_are_data() -> None:
    assert {n: s.bubble(4, 8) for n, s in SCHEDULES.items()} == {
        "1f1b": Fraction(3, 11),
        "gpipe": Fraction(3, 11),
    }
    assert SCHEDULES["1f1b"].in_flight(4, 2, 0) == 2  # fewer microbatches than stages: all of them


HEAD = """params W1, W2; embeddings W_un; layers L
In[B_X, D] * W1[D, F_Y] -> H[B_X, F_Y]
H[B_X, F_Y] * W2[F_Y, D] -> Out[B_X, D]{U_Y}
Xl[B_X, D] * W_un[D, V] -> Lg[B_X, V]
"""  # a head outside the repeated layer: one stage carries it, the others do not


def _simulate(forward: list[float], backward: list[float], m: int, schedule: str) -> float:
    """The makespan of a pipeline schedule, op by op: stage s runs its forwards and backwards in the
    schedule's order (1F1B: p - s - 1 warm-up forwards, then one forward one backward; GPipe: every forward
    then every backward), each after its own stage's previous op and the op it reads (the forward of the
    stage before, the backward of the stage after)."""
    p = len(forward)
    order = []
    for s in range(p):
        warm = m if schedule == "gpipe" else min(p - s - 1, m)
        ops, nf, nb = [("F", j) for j in range(warm)], warm, 0
        while nf < m:
            ops += [("F", nf), ("B", nb)]
            nf, nb = nf + 1, nb + 1
        ops += [("B", j) for j in range(nb, m)]
        order.append(ops)
    done: dict[tuple[str, int, int], float] = {}
    free, at = [0.0] * p, [0] * p
    while any(at[s] < 2 * m for s in range(p)):
        for s in range(p):
            while at[s] < 2 * m:
                kind, j = order[s][at[s]]
                if kind == "F":
                    dep = ("F", s - 1, j) if s else None
                else:
                    dep = ("B", s + 1, j) if s < p - 1 else ("F", s, j)
                if dep is not None and dep not in done:
                    break
                end = max(free[s], done[dep] if dep else 0.0) + (forward if kind == "F" else backward)[s]
                done[(kind, s, j)] = free[s] = end
                at[s] += 1
    return max(free)


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_a_stage_holding_the_head_fills_and_drains_at_the_others_ticks(schedule: str) -> None:
    """The head on one stage makes its tick the longest: the step is that stage's m ticks and each other
    stage's tick once, as a schedule run op by op gives it (the head on the last stage, which reads the last
    layer's output). Counting every fill and drain tick at the longest tick, (m + p - 1) x max, overstates it."""
    sizes = "B=512,D=8192,F=32768,L=32,V=65536"
    r = pipeline_price(HEAD, MESH4, sizes, "tpu-v5p", axis="P", microbatches=8, schedule=schedule)
    whole = shardalg.step_time(HEAD, MESH4, sizes, "tpu-v5p")
    seconds = {p.name: whole.seconds_of(p.total) * (8 if p.name == "layer" else 1) for p in whole.parts}
    assert r.outside_seconds == pytest.approx(seconds["outside"]) and r.outside_seconds > 0
    light = seconds["layer"] / 8 + r.send_seconds
    heavy = (seconds["layer"] + seconds["outside"]) / 8 + r.send_seconds
    ticks = [light, light, light, heavy]  # stage 3, the last, holds the head
    simulated = _simulate([t / 3 for t in ticks], [2 * t / 3 for t in ticks], 8, schedule)
    assert r.seconds == pytest.approx(simulated, rel=1e-12)
    assert r.seconds == pytest.approx(8 * heavy + 3 * light, rel=1e-12)
    assert r.bubble_seconds == pytest.approx(3 * light, rel=1e-12)
    assert r.seconds < 0.91 * r.ticks * heavy  # what (m + p - 1) x the longest tick charged
    # equal stages (no part outside): the same simulation gives (m + p - 1) ticks
    eq = pipeline_price(STAGE, MESH4, SIZES4, "tpu-v5p", axis="P", microbatches=8, schedule=schedule)
    t = eq.tick_seconds
    assert eq.seconds == pytest.approx(_simulate([t / 3] * 4, [2 * t / 3] * 4, 8, schedule), rel=1e-12)
