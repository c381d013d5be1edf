"""What ZeRO-3 gathers: every parameter a statement that computes reads (a product, or a function: a norm's
gain) and the table of the embedding lookup the program does not write, before the forward and again before
the backward; the time (:mod:`shardalg.models.zerostep`) and the memory's transient (:mod:`shardalg.models.memory`)
count the same set (:func:`shardalg.models.zero.computed_with`).

The program: a gain ``g[D]`` read by a function, a weight ``W[D, F]`` read by a product, a table ``E[V, D]``
read by the unwritten lookup, on X=4 (the data axis), bf16 (2 bytes an element):
g 1024·2 = 2,048 bytes, W 1024·4096·2 = 8,388,608 bytes, E 32768·1024·2 = 67,108,864 bytes whole.
The expected seconds are the planner's AllGather on a TPU axis of 4: Max(2·T_min, bytes/W_ici)."""

from __future__ import annotations

import pytest

from shardalg.costs.chipspec import as_chip_text
from shardalg.models.analysis import analyze
from shardalg.models.memory import memory
from shardalg.models.program import model_program
from shardalg.models.step import _part_plans, step_seconds
from shardalg.models.trainstate import TrainState
from shardalg.models.zero import computed_with
from shardalg.models.zerostep import pass_analysis, step_parts
from shardalg.notation.syntax import Op

CHIP = {str(k): v for k, v in as_chip_text("tpu-v5p").values().items()}
W_ICI, T_MIN = CHIP["W_ici"], CHIP["T_min"]  # 1.8e11 bytes/s, 1e-6 s a hop
G, W, E = 1024 * 2, 1024 * 4096 * 2, 32768 * 1024 * 2

HEAD = "params W, g\nembeddings E\ntokens B, T\n"
BODY = "In[B_X, T, D] .* g[D] -> H[B_X, T, D]\nH[B_X, T, D] * W[D, F] -> Out[B_X, T, F]\n"
WHERE = "where B=64, T=1024, D=1024, F=4096, V=32768"
GAIN = "params W, g\ntokens B, T\n" + BODY + WHERE  # a gain and a weight, no table
GAIN_AND_TABLE = HEAD + "E[V, D]\n" + BODY + WHERE  # and the table of the unwritten lookup


def _gathers(program: str, zero: int) -> list[tuple[str, str, str]]:
    """(part, phase, tensor) of each AllGather of a training step under ``zero``."""
    st = TrainState(zero=zero)
    a, _ = pass_analysis(analyze(model_program(program, mesh="X=4"), "train", "none"), st)
    return [
        (name, phase, s.inputs[0].name)
        for _, name, _, plans in step_parts(a, st, _part_plans, st.micro)
        for phase, ps in zip(("forward", "backward"), plans, strict=True)
        for p in ps
        for s in p.steps
        if s.op is Op.ALL_GATHER
    ]


def _comms(program: str, zero: int) -> dict[str, float]:
    """Communication seconds of each part of a training step on tpu-v5p."""
    a = analyze(model_program(program, mesh="X=4"), "train", "none")
    return {p.name: p.comms for p in step_seconds(a, "tpu-v5p", state=TrainState(zero=zero))}


def test_the_set_is_what_computing_statements_read_and_the_lookup_s_table():
    m = model_program(GAIN_AND_TABLE, mesh="X=4")
    assert computed_with(m) == {"g", "W", "E"}  # old: {"W"}, the products' alone
    assert computed_with(model_program(GAIN, mesh="X=4")) == {"g", "W"}


def test_zero_3_gathers_a_gain_a_function_reads_before_the_forward_and_the_backward():
    # old: ZeRO-3 sharded g (its params row 2,048 / 4 = 512 bytes, its gradient reduce-scattered) and the
    # function's plan read g[D] whole, no gather: the step moved no byte of it
    assert sorted(_gathers(GAIN, 3)) == [
        ("layer", "backward", "W"),
        ("layer", "backward", "g"),
        ("layer", "forward", "W"),
        ("layer", "forward", "g"),
    ]
    # stages 1 and 2 gather every updated parameter once a step, as before
    assert sorted(t for _, _, t in _gathers(GAIN, 1)) == ["W", "g"]


def test_the_gain_s_gathers_are_timed():
    # the layer's communication under ZeRO-3 minus ZeRO-2's: stage 3 gathers each parameter twice (stage 2
    # once), so the difference is one gather of each. The planner's AllGather on X=4 costs
    # Max(2·T_min, bytes/W_ici): W's 8,388,608 / 1.8e11 = 4.6603e-5 s; g's 2,048 bytes are latency-bound,
    # 2·T_min = 2e-6 s (T_min 1e-6). Old: 4.6603e-5 - 2e-6 = 4.4603e-5 (stage 3 dropped g's gather that
    # stage 2 makes); new: 4.6603e-5 + 2e-6 = 4.8603e-5
    added = _comms(GAIN, 3)["layer"] - _comms(GAIN, 2)["layer"]
    assert added == pytest.approx(W / W_ICI + 2 * T_MIN, rel=1e-9)
    assert added == pytest.approx(4.8603e-5, rel=1e-4)


def test_the_transient_holds_what_zero_3_gathers():
    # remat none: the transient is the larger of the layer's gathered weights and the part outside's.
    # Gain alone: old W = 8,388,608 bytes; new W + g = 8,388,608 + 2,048 = 8,390,656.
    r = memory(GAIN, mesh="X=4", remat="none", zero=3)
    assert r.parts["transient"] == W + G == 8_390_656
    # With the table: the part outside holds E gathered (its gather is timed since the lookup's fix):
    # old 8,388,608 (the table left out), new max(8,390,656, 67,108,864) = 67,108,864 bytes
    r = memory(GAIN_AND_TABLE, mesh="X=4", remat="none", zero=3)
    assert r.parts["transient"] == E == 67_108_864
    assert sorted(n for p, n, *_ in r.rows if p == "transient") == ["E", "W", "g"]


def test_time_and_memory_read_the_same_set():
    # every parameter the step gathers under ZeRO-3 is a transient row, and no other parameter is
    r = memory(GAIN_AND_TABLE, mesh="X=4", remat="none", zero=3)
    held = {n for p, n, *_ in r.rows if p == "transient"}
    assert held == {t for _, _, t in _gathers(GAIN_AND_TABLE, 3)} == {"g", "W", "E"}


def test_stage_2_holds_no_gathered_parameter():
    # stages 1 and 2 keep the parameters whole: nothing is gathered into a transient
    assert memory(GAIN_AND_TABLE, mesh="X=4", remat="none", zero=2).parts["transient"] == 0


def test_an_offload_of_the_parameters_fetches_the_same_set():
    # --offload params keeps the parameters in host memory and each pass fetches those it reads (its PCIe
    # traffic counts every parameter's share): the transient holds the same set as ZeRO-3's, here g, W and E,
    # max(8,390,656, 67,108,864) = 67,108,864 bytes (old: W alone, 8,388,608)
    r = memory(GAIN_AND_TABLE, mesh="X=4", remat="none", offload="params", hw="h100")
    assert r.parts["transient"] == E
    assert sorted(n for p, n, *_ in r.rows if p == "transient") == ["E", "W", "g"]
