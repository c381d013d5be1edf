"""Whole models see the functions of the notation (issue 26 item 5): a written norm, softmax, activation
function or residual add makes a value, is priced as an HBM-bound step with its FLOPs counted apart, and what
its backward reads is kept for it (a nonlinear function's operands, its per-row statistics, the attention
scores unless the attention is fused)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from shardalg.algebra.ops.route import capacity
from shardalg.algebra.registry import RECORDS
from shardalg.costs.costmodel import CostModel
from shardalg.costs.hardware import get as chip_named
from shardalg.costs.plancost import priced
from shardalg.models.analysis import analyze
from shardalg.models.expand import CAPACITY_FACTOR, expand
from shardalg.models.memory import model_memory
from shardalg.models.program import model_program
from shardalg.models.step import step_time
from shardalg.notation.printing import text
from shardalg.notation.syntax import Op

SIZES = {"B": 8, "T": 512, "D": 1024, "F": 4096}

MLP = """params W_in, W_gate, W_out, g
tokens B, T
rmsnorm_D(X[B, T, D]) -> Hr[B, T, D]
Hr[B, T, D] .* g[D] -> Hn[B, T, D]
Hn[B, T, D] * W_gate[D, F] -> Gt[B, T, F]
Hn[B, T, D] * W_in[D, F] -> U[B, T, F]
silu(Gt[B, T, F]) -> Sg[B, T, F]
Sg[B, T, F] .* U[B, T, F] -> M[B, T, F]
M[B, T, F] * W_out[F, D] -> O[B, T, D]
X[B, T, D] + O[B, T, D] -> Y[B, T, D]"""

CORE = """params W_o
tokens B, T
Q[B, T, H] * K[B, S, H] -> Sc[B, T, S]
softmax_S(Sc[B, T, S]) -> P[B, T, S]
P[B, T, S] * V[B, S, H] -> O[B, T, H]
O[B, T, H] * W_o[H, D] -> Att[B, T, D]"""


def _activations(a) -> dict[str, int]:
    rows = model_memory(a, "h100").to_json()["tensors"]
    return {r["tensor"]: r["bytes_per_device"] for r in rows if r["part"] == "activations"}


def test_a_function_makes_a_value_and_the_layer_starts_at_the_norm():
    m = model_program(MLP, "X=2", SIZES)
    assert [s.kind for s in m.statements] == [
        "function",
        "function",
        "product",
        "product",
        "function",
        "function",
        "product",
        "function",
    ]
    assert m.values["M"].made_by == 5 and m.values["Hn"].made_by == 1
    assert m.layer_inputs == ("X",) and m.layer_output == "Y"
    assert not m.hidden_makers  # every step is written: nothing enters from a step the notation does not show


def test_what_the_functions_backward_reads_is_kept():
    kept = _activations(analyze(model_program(MLP, "X=2", SIZES), "train"))
    b, t, d, f = (SIZES[k] for k in "BTDF")
    assert kept["X"] == b * t * d * 2  # the norm's input (the residual add reads nothing)
    assert kept["Gt"] == kept["U"] == kept["Sg"] == b * t * f * 2  # silu's input, both factors of the product
    assert kept["Hr"] == b * t * d * 2  # a factor of the gain's product
    assert "Y" not in kept and "O" not in kept  # a residual add is linear: its backward reads nothing
    assert kept["rmsnorm_D statistics (1 fp32 a row) of Hr"] == b * t * 4


def test_the_attention_scores_are_kept_unless_the_attention_is_fused():
    sizes = {"B": 2, "T": 256, "S": 256, "H": 64, "D": 128}
    a = analyze(model_program(CORE, "X=2", sizes), "train")
    assert a.scores == ("Sc", "P") and not a.fused_attention
    kept = _activations(a)
    assert kept["P"] == 2 * 256 * 256 * 2  # softmax's backward reads its result, P ⊙ (dP − sum(dP ⊙ P))
    assert "Sc" not in kept  # ... and no scores: Q·K's gradients read Q and K
    assert "softmax_S statistics (2 fp32 a row) of P" not in kept  # P kept: no statistics needed
    fused = analyze(model_program(CORE.replace("softmax_S(", "softmax_{S,flash}("), "X=2", sizes), "train")
    assert fused.fused_attention and fused.fused_scores == ("Sc", "P")
    assert "Sc" not in fused.saved and "P" not in fused.saved and "Q" in fused.saved
    kept_fused = _activations(fused)
    assert "P" not in kept_fused
    assert (
        kept_fused["softmax_S statistics (2 fp32 a row) of P"] == 2 * 256 * 2 * 4
    )  # a flash kernel keeps them
    assert dict(fused.notes)["attention"].startswith("fused (the softmax says flash)")
    assert dict(a.notes)["attention"].startswith("materialized")


def test_the_functions_flops_are_counted_apart_and_their_time_priced():
    a = analyze(model_program(MLP, "X=2", SIZES), "train")
    b, t, d, f = (SIZES[k] for k in "BTDF")
    per = {op: RECORDS[op].vector_flops for op in (Op.RMSNORM, Op.MULTIPLY, Op.SILU, Op.ADD)}
    expected = (per[Op.RMSNORM] + per[Op.MULTIPLY]) * b * t * d
    expected += (per[Op.SILU] + per[Op.MULTIPLY]) * b * t * f + per[Op.ADD] * b * t * d
    flops = a.flops()
    assert flops.vector == expected and flops.vector_per_device == expected  # replicated over X
    assert flops.forward == 2 * 3 * b * t * d * f  # the matmul FLOPs as before: three products
    for i in (
        0,
        1,
        4,
        5,
        7,
    ):  # each function's plan is priced on the chip: its bytes read and written over W_hbm
        cost = priced(a.forward_plans[i], a.model.mesh, a.model.sizes, CostModel.of(chip_named("h100")))
        assert cost.light("memory").sympy() != 0


@pytest.mark.parametrize("mode", ["train", "infer"])
def test_step_text_says_the_vector_flops_and_the_functions_convention(mode):
    report = step_time(MLP, mesh="X=2", sizes=SIZES, hw="h100", mode=mode)
    text = str(report)
    assert "vector FLOPs" in text
    assert "convention: functions:" in text
    assert ("their backward derived" in text) == (mode == "train")


@pytest.mark.parametrize("name", ["llama-2-13b", "llama-3-8b", "llama-3-70b", "mixtral-8x7b"])
def test_the_presets_with_their_functions_written_keep_their_parameters_and_flops(name):
    moe = name == "mixtral-8x7b"  # its routing written: the capacity C = cf·k·tokens/E derived, whole
    sizes = {"B": 16 if moe else 1, "T": 256, "S": 256}
    for phase in ("train", "prefill", "decode"):
        tokens = sizes["B"] * (1 if phase == "decode" else sizes["T"])
        c = {"C": int(capacity(Fraction(tokens), 8, 2, CAPACITY_FACTOR))} if moe else {}
        written = model_program(expand(name, phase, functions=True), "X=1", sizes)
        assert written.sizes.get("C") == c.get("C")
        bare = model_program(expand(name, phase, functions=False), "X=1", {**sizes, **c})
        assert sum(s.kind == "function" for s in written.statements) >= 4
        mode = "train" if phase == "train" else "infer"
        a, b = analyze(written, mode), analyze(bare, mode)
        # the same products (the functions' FLOPs are apart), but in training the written attention core's
        # (bare, its output A is an input): Q·K and P·V over the causal half, 2·(2·B·T·S·N·H)/2 a layer
        # in prefill both write the core's products, the written one causal (softmax_{S,causal}): half its pairs
        n = {"llama-2-13b": 40, "llama-3-8b": 32, "llama-3-70b": 64, "mixtral-8x7b": 32}[name]
        half = 2 * sizes["B"] * sizes["T"] * sizes["T"] * n * 128 * a.model.layers
        core = {"train": half, "prefill": -half, "decode": 0}[phase]
        assert a.flops().forward == b.flops().forward + core
        assert a.flops().vector > 0
        assert model_memory(a, "h100").params == model_memory(b, "h100").params
    core = expand(name, "prefill", functions=True)
    assert "softmax_{S,causal}(Sc[B, K, G, T, S]) -> P[B, K, G, T, S]" in text(core)


def test_a_preset_with_functions_keeps_its_norm_inputs_for_the_backward():
    sizes = {"B": 1, "T": 4096}
    a = analyze(model_program(expand("llama-3-8b", functions=True), "X=1", sizes), "train")
    kept = _activations(a)
    for name in ("In", "Rs", "Gt", "U", "Xl"):  # the norms' and silu's inputs, the gate's factors
        assert name in kept
    assert kept["rmsnorm_D statistics (1 fp32 a row) of Har"] == 4096 * 4
    assert "Y" not in kept  # the residual add is linear


def test_a_whole_models_backward_derives_its_functions_and_its_step_prices_them():
    """The functions' derivatives are in the whole model's backward (no longer left out): each nonlinear
    function's f'(X, dY) is a gradient plan, and the step with them is longer than the products' alone."""
    a = analyze(model_program(MLP, "X=2", SIZES), "train")
    ops = {s.op for _, p in a.grad_plans for s in p.steps if s.op.function}
    assert {Op.RMSNORM_D, Op.SILU_D, Op.MULTIPLY} <= ops
    made = {info.statement.result.name for info, _ in a.grad_plans}
    assert {"Hr", "Sg"} <= made  # the gradients of the norm and silu (a residual add passes its cotangent on)
    with_fns = step_time(MLP, mesh="X=2", sizes=SIZES, hw="h100", mode="train")
    assert "their backward derived" in str(with_fns)


def test_presets_write_their_functions_by_default():
    assert text(expand("llama-3-8b")) == text(expand("llama-3-8b", functions=True))
    assert "rmsnorm_D" in text(expand("llama-3-8b")) and "rmsnorm_D" not in text(
        expand("llama-3-8b", functions=False)
    )


@pytest.mark.parametrize("program", [MLP, CORE], ids=["mlp", "core"])
@pytest.mark.parametrize("mesh", ["X=2,Y=2", "X=4"])
def test_a_models_statements_are_planned_as_they_are_alone(program, mesh):
    """A model's program is checked once, when it is read; its statements' forward plans and its backward are
    then made without the rules run again, and are each statement's own plan and the derived backward of the
    program as the public functions make them (which check)."""
    from shardalg.costs.programplan import plan_of
    from shardalg.models.expand import shard
    from shardalg.notation.syntax import Program
    from shardalg.planning.backward import backward
    from shardalg.planning.planner import plan

    sizes = {**SIZES, "S": 512, "H": 1024}
    sharded = shard(program, "D=X", "B=X", mesh=mesh)
    a = analyze(model_program(sharded, mesh, sizes), "train", "none")
    m = a.model
    for info in m.statements:
        if info.kind == "declaration":
            continue
        s = info.statement
        alone = (
            plan(s, m.mesh, m.sizes) if info.kind == "product" else plan_of(Program((s,)), m.mesh, m.sizes)
        )
        assert a.forward_plan(info) == alone, text(s)
    shown = Program(tuple(m.statements[i].statement for i in a.shown))
    assert a.backward == backward(shown, m.mesh, m.sizes)
