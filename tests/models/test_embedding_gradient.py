"""The input embedding's gradient (:mod:`shardalg.models.lookup`): the token lookup the presets do not write
still has a gradient, a partial sum over the token axes, reduced into the table's layout once a step.

The expected seconds are the cost model's formulas at the chip's numbers, written out here from V, D, the
bytes per element and the axis's bandwidth: the book's AllReduce on a TPU axis, 2·(2·V·D)/W_ici (a
ReduceScatter and an AllGather, each V·D·2 bytes over W_ici); on the H100's switch, a ring's
2·((n − 1)·α + (n − 1)/n·(2·V·D)/β)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from shardalg.costs.chipspec import as_chip_text
from shardalg.costs.schedule import OverlapPolicy
from shardalg.costs.terms import point
from shardalg.models.analysis import analyze
from shardalg.models.expand import expand, shard
from shardalg.models.lookup import lookup_gradients
from shardalg.models.memory import memory
from shardalg.models.presets import get
from shardalg.models.program import model_program
from shardalg.models.step import step_seconds
from shardalg.models.trainstate import TrainState
from shardalg.models.zerostep import pass_analysis
from shardalg.notation.syntax import Op

BF16 = 2  # bytes per element of the gradient (the table's dtype, bf16 by default)
# one table and one layer: the part outside the repeated layer is the lookup's gradient alone
TABLE_ONLY = (
    "params W; embeddings E; tokens B, T; layers L\nE[V, D]\nIn[B_X, T, D] * W[D, F] -> Out[B_X, T, F]"
)
V, D = 32000, 4096
SIZES = {"B": 16, "T": 256, "D": D, "F": 1024, "V": V, "L": 4}
BIG = {**SIZES, "B": 512}  # more tokens than the table has rows (twice over): reducing the table is cheaper
W_ICI = {str(k): v for k, v in as_chip_text("tpu-v5p").values().items()}["W_ici"]  # 1.8e11 bytes/s


def _outside(model, hw: str, **state) -> tuple[float, dict[str, float]]:
    """The part outside the layer's communication seconds and its seconds on each axis."""
    parts = step_seconds(analyze(model, "train", "none"), hw, state=TrainState(**state) if state else None)
    got = [p for p in parts if p.name.startswith("outside")]
    return sum(p.comms for p in got), {ax: s for p in got for ax, s in p.axes}


def _reductions(model, name: str, **state) -> list[Op]:
    """The collectives of the part outside the layer's backward (all its passes) that read ``name``."""
    from shardalg.models.step import _part_plans
    from shardalg.models.zerostep import step_parts

    st = TrainState(**state)
    a, _ = pass_analysis(analyze(model, "train", "none"), st)
    return [
        s.op
        for once, _, _, (_, backward) in step_parts(a, st, _part_plans, st.micro)
        if once
        for p in backward
        for s in p.steps
        if s.op.communicates and s.inputs[0].name == name
    ]


def test_dp_reduces_the_lookup_gradient_as_the_book_prices_an_all_reduce():
    # 512 x 256 = 131,072 tokens: gathering dIn (B·T·D·2 = 1.074e9 bytes) costs more than the AllReduce
    m = model_program(TABLE_ONLY, mesh="X=8", sizes=BIG)
    chip = {str(k): v for k, v in as_chip_text("tpu-v5p").values().items()}
    comms, axes = _outside(m, "tpu-v5p")
    expected = 2 * (BF16 * V * D) / chip["W_ici"]  # 2×bytes/W_ici, bytes = V·D·2: 2.913 ms
    assert comms == pytest.approx(expected, rel=1e-9)
    assert axes == {"X": pytest.approx(expected, rel=1e-9)}
    (g,) = lookup_gradients(m)
    assert [str(s.op.value) for s in g.plan.steps] == ["AllReduce"]
    assert g.partial.unreduced == ("X",)


def test_llama_2_13b_dp_on_h100_adds_the_ring_all_reduce_of_w_emb():
    m = model_program(
        shard(expand("llama-2-13b"), activations="B=X"), mesh="X=64", sizes={"B": 64, "T": 4096}
    )
    h100 = as_chip_text("h100")
    chip = {str(k): v for k, v in h100.values().items()}
    n, size = 64, BF16 * m.sizes["V"] * m.sizes["D"]  # 32000 x 5120 x 2 = 327,680,000 bytes
    ring = 2 * ((n - 1) * chip["alpha"] + (n - 1) / n * size / chip["beta"])  # RS + AG: 1.686 ms
    (g,) = lookup_gradients(m)
    a = analyze(m, "train", "none")
    from shardalg.models.step import _cost_model, _part_cost

    costs = _cost_model(a, h100, OverlapPolicy.STEADY)
    cost = _part_cost("lookup", [[g.plan]], a, costs)
    assert size == 327_680_000
    at = point(costs.efficiency.effective(h100.values()))
    assert float(cost.light("comms").evaluate(at)) == pytest.approx(ring, rel=1e-9)
    assert _reductions(m, "dW_emb") == [Op.ALL_REDUCE]  # it was never reduced: []


@pytest.mark.parametrize("stage", [1, 2])
def test_zero_reduce_scatters_w_emb_before_gathering_it(stage):
    m = model_program(
        shard(expand("llama-2-13b"), activations="B=X"), mesh="X=64", sizes={"B": 64, "T": 4096}
    )
    # the updated W_emb is gathered from its shards, its gradient reduce-scattered to them first
    assert _reductions(m, "dW_emb", zero=stage) == [Op.REDUCE_SCATTER]
    # a ReduceScatter and an AllGather cost an AllReduce: the part outside communicates as much as under DP
    # (before: 2.78 ms under ZeRO-1/2 against 1.938 ms, the gather of a gradient never reduced)
    dp, _ = _outside(m, "h100")
    zero, _ = _outside(m, "h100", zero=stage)
    assert zero == pytest.approx(dp, rel=1e-9)


def test_fsdp_reduce_scatters_into_the_table_layout():
    m = model_program(
        shard(expand("llama-3-70b"), params="D=X", activations="B=X"), mesh="X=64", sizes={"B": 64, "T": 4096}
    )
    (g,) = lookup_gradients(m)
    assert [s.op for s in g.plan.steps] == [Op.REDUCE_SCATTER]
    assert g.plan.steps[-1].output.dims == g.table.tensor.dims  # W_emb[V, D_X]
    assert _reductions(m, "dW_emb") == [Op.REDUCE_SCATTER]  # in the step (it was never reduced: [])


def _tied(batch: int):
    tied = replace(get("llama-3-8b"), tied=True)
    return model_program(shard(expand(tied), activations="B=X"), mesh="X=8", sizes={"B": batch, "T": 1024})


def test_tied_embedding_reduces_once_with_the_unembedding_gradient():
    # at B=512 the head's gradient of W_emb is a partial sum over X, all-reduced: the lookup's adds into it
    m = _tied(512)
    assert analyze(m, "train", "none").lookup_grads == []  # nothing planned but the derived reduction
    assert _reductions(m, "dW_emb") == [Op.ALL_REDUCE]


def test_tied_embedding_gathers_the_lookup_part_where_the_head_gathers_too():
    # at B=8 the planner gathers the head's activations (fewer bytes), dW_emb is whole: no partial sum to add
    # the lookup's into, so the lookup's part is made by its own plan, and at 8 x 1024 = 8,192 tokens it too
    # gathers its tokens' cotangent: dIn's 8192·4096·2 = 6.711e7 bytes against the AllReduce of dW_emb's
    # 2·128256·4096·2 = 2.101e9; every device then adds the head's whole gradient and the lookup's whole sum
    m = _tied(8)
    (g,) = analyze(m, "train", "none").lookup_grads
    assert [op for op in _reductions(m, "dW_emb") if op in (Op.ALL_REDUCE, Op.REDUCE_SCATTER)] == []
    assert _reductions(m, "dIn") == [Op.ALL_GATHER]
    assert g.partial.unreduced == ("X",) and g.gathered
    assert "6.711e+07 bytes" in g.plan.note and "2.101e+09 bytes" in g.plan.note


@pytest.mark.parametrize(
    ("mesh", "dims"),
    [
        ("X=1", {"activations": "B=X"}),  # one device
        ("Y=8", {"params": "F=Y,K=Y", "activations": "F=Y,K=Y"}),  # model parallel: the tokens whole
    ],
)
def test_no_reduction_when_the_tokens_are_not_sharded(mesh, dims):
    m = model_program(shard(expand("llama-3-8b"), **dims), mesh=mesh, sizes={"B": 8, "T": 1024})
    assert lookup_gradients(m) == []
    assert _reductions(m, "dW_emb") == []


def test_memory_counts_the_table_gradient_and_optimizer_state_unchanged():
    m = model_program(
        shard(expand("llama-2-13b"), activations="B=X"), mesh="X=64", sizes={"B": 64, "T": 4096}
    )
    rows = {(part, name): b * n for part, name, b, n in memory(m, hw="h100").rows}
    size = m.sizes["V"] * m.sizes["D"]
    assert rows[("grads", "W_emb")] == BF16 * size
    assert rows[("optimizer", "W_emb")] > 0


# --- the lookup's gradient gathered instead of reduced (the planner's bytes, the fewer taken) ---
# Reducing the table communicates 2·V·D·2 bytes (an AllReduce: 4·D·V as the planner counts it; V·D·2 for a
# ReduceScatter to a sharded table) whatever the batch; gathering the input's cotangent B·T·D·2 bytes. So the
# gather wins when B·T < 2·V against an AllReduce: here 2·V = 64,000 tokens.


def _lookup_ops(g) -> list[tuple[str, str]]:
    return [(s.op.value, s.inputs[0].name) for s in g.plan.steps]


def test_a_small_batch_gathers_the_tokens_cotangent_instead_of_reducing_the_table():
    # 16 x 256 = 4,096 tokens on X=8: AllGather_X(dIn[B_X, T, D]) moves 16·256·4096·2 = 33,554,432 bytes,
    # 186.4 us at W_ici = 1.8e11; the AllReduce of dE[V, D]{U_X} 2·32000·4096·2 = 524,288,000 bytes, 2.913 ms
    # (the old plan, always the AllReduce: 2.913 ms)
    m = model_program(TABLE_ONLY, mesh="X=8", sizes=SIZES)
    comms, axes = _outside(m, "tpu-v5p")
    assert comms == pytest.approx(BF16 * 16 * 256 * D / W_ICI, rel=1e-9)  # 186.4 us
    assert comms == pytest.approx(186.4e-6, rel=1e-3)
    assert axes == {"X": pytest.approx(comms, rel=1e-9)}
    (g,) = lookup_gradients(m)
    assert _lookup_ops(g) == [("AllGather", "dIn")] and g.gathered
    assert g.plan.steps[0].output.dims[0].axes == ()  # dIn[B, T, D]: every token on every device
    assert "3.355e+07 bytes" in g.plan.note and "5.243e+08 bytes" in g.plan.note


@pytest.mark.parametrize(("batch", "gathered"), [(248, True), (256, False), (264, False)])
def test_the_gather_is_taken_below_twice_the_rows_in_tokens(batch, gathered):
    # T = 250: B·T against 2·V = 64,000 tokens: 248 x 250 = 62,000 gathers; 256 x 250 = 64,000 ties (the
    # reduction kept: not fewer bytes); 264 x 250 = 66,000 reduces
    m = model_program(TABLE_ONLY, mesh="X=8", sizes={**SIZES, "B": batch, "T": 250})
    (g,) = lookup_gradients(m)
    assert _lookup_ops(g) == ([("AllGather", "dIn")] if gathered else [("AllReduce", "dE")])
    assert g.gathered is gathered


def test_an_fsdp_table_keeps_its_block_of_the_gathered_sum():
    # the table sharded over X (E[V, D_X]): the gradient ends as dE[V, D_X]. Gathering dIn (33,554,432 bytes)
    # beats the ReduceScatter (32000·4096·2 = 262,144,000 bytes); each device adds every token and keeps its
    # block of D, a slice: no bytes. The old plan: ReduceScatter_X, 1.456 ms; now 186.4 us
    fsdp = TABLE_ONLY.replace("E[V, D]", "E[V, D_X]")
    m = model_program(fsdp, mesh="X=8", sizes=SIZES)
    (g,) = lookup_gradients(m)
    assert _lookup_ops(g) == [("AllGather", "dIn"), ("Slice", "dE")]
    assert g.plan.output.dims == g.table.tensor.dims and g.plan.steps[-1].output.dims == g.table.tensor.dims
    assert "2.621e+08 bytes" in g.plan.note
    comms, _ = _outside(m, "tpu-v5p")
    assert comms == pytest.approx(BF16 * 16 * 256 * D / W_ICI, rel=1e-9)


def test_symbolic_sizes_keep_the_reduction_and_say_why():
    # 4·D·V against 2·B·D·T: neither is fewer at every size; the reduction stays, the note says so
    (g,) = lookup_gradients(model_program(TABLE_ONLY, mesh="X=8"))
    assert "depends on sizes not given" in g.plan.note
    assert _lookup_ops(g) == [("AllReduce", "dE")] and not g.gathered


def test_accumulated_microbatches_choose_for_the_whole_step():
    # 512 x 256 tokens in 4 passes of 128 x 256 = 32,768 tokens: one pass alone would gather (268 MB against
    # the AllReduce's 524 MB), but the AllReduce runs once a step over the accumulated gradient while the
    # gather runs in each pass: 4 x 268,435,456 = 1.074e9 bytes against 5.243e8, so the step reduces once
    m = model_program(TABLE_ONLY, mesh="X=8", sizes=BIG)
    assert _reductions(m, "dE", microbatches=4) == [Op.ALL_REDUCE]
    assert _reductions(m, "dIn", microbatches=4) == []
    a, _ = pass_analysis(analyze(m, "train", "none"), TrainState(microbatches=4))
    (one,) = a.lookup_grads
    assert one.gathered  # the pass alone would have gathered


def test_zero_1_gathers_against_a_reduce_scatter_to_the_shard():
    # ZeRO-1 wants dE's shard (a ReduceScatter: 262,144,000 bytes once a step). At 16 x 256 tokens the gather
    # moves 33,554,432 bytes, and each device keeps its shard of the whole sum (a slice)
    m = model_program(TABLE_ONLY, mesh="X=8", sizes=SIZES)
    assert _reductions(m, "dE", zero=1) == []
    assert _reductions(m, "dIn", zero=1) == [Op.ALL_GATHER]


# --- the pipeline: stage 0 alone holds the table ---


def test_a_pipeline_reduces_the_table_within_stage_0():
    # HEADED on P=4, X=2 with B = 65,536 tokens (more than 2·V = 8,192: the reduction wins). The old plan split
    # the V·D·2 = 4096·256·2 = 2,097,152 bytes over P, whose other stages hold no table (Slice_P,
    # ReduceScatter_X, AllGather_PX: 9.709 us). Within the stage: AllReduce_X, 2·2,097,152/1.8e11 = 23.30 us
    from shardalg.models.pipeline import pipeline_price
    from tests.models.headed import HEADED, MESH
    from tests.models.headed import SIZES as HEADED_SIZES

    sizes = HEADED_SIZES.replace("B=64", "B=65536")
    r = pipeline_price(HEADED, MESH, sizes, "tpu-v5p", axis="P", microbatches=4)
    assert r.first_seconds == pytest.approx(2 * BF16 * 4096 * 256 / W_ICI, rel=1e-9)
    assert r.first_seconds == pytest.approx(23.30e-6, rel=1e-3)
    from shardalg.models.stages import stage_analysis

    a = analyze(model_program(HEADED, MESH, sizes), "train")
    (g,) = stage_analysis(a, "P").lookup_grads
    assert [(s.op, s.axes) for s in g.plan.steps] == [(Op.ALL_REDUCE, ("X",))]


# --- ZeRO-3 gathers the table before the lookup ---


def _gathers(model, name: str, **state) -> list[tuple[str, Op]]:
    """(phase, op) of each collective of the part outside the layer (all its passes) that reads ``name``."""
    from shardalg.models.step import _part_plans
    from shardalg.models.zerostep import step_parts

    st = TrainState(**state)
    a, _ = pass_analysis(analyze(model, "train", "none"), st)
    return [
        (phase, s.op)
        for once, _, _, plans in step_parts(a, st, _part_plans, st.micro)
        if once
        for phase, ps in zip(("forward", "backward"), plans, strict=True)
        for p in ps
        for s in p.steps
        if s.op.communicates and s.inputs[0].name == name
    ]


def test_zero_3_gathers_the_table_before_the_lookup_and_its_backward():
    # 512 x 256 tokens on X=8 (the reduction wins). Stage 3 gathers every parameter before the forward and
    # again before the backward; the lookup's table too (as FSDP unshards the embedding's weight), which it
    # never did. The part outside (the table alone): ReduceScatter of dE and two AllGathers of E, each
    # V·D·2 = 262,144,000 bytes / 1.8e11 = 1.456 ms: 4.369 ms (old: the ReduceScatter alone, 1.456 ms)
    m = model_program(TABLE_ONLY, mesh="X=8", sizes=BIG)
    assert _gathers(m, "E", zero=3) == [("forward", Op.ALL_GATHER), ("backward", Op.ALL_GATHER)]
    assert _gathers(m, "dE", zero=3) == [("backward", Op.REDUCE_SCATTER)]
    comms, _ = _outside(m, "tpu-v5p", zero=3)
    assert comms == pytest.approx(3 * BF16 * V * D / W_ICI, rel=1e-9)
    assert comms == pytest.approx(4.369e-3, rel=1e-3)
    # stages 1 and 2 gather the updated table once a step, as before
    assert _gathers(m, "E", zero=1) == [("backward", Op.ALL_GATHER)]


def test_zero_still_reduce_scatters_a_tied_tables_derived_gradient():
    # the head's gradient of a tied table (a partial sum over X at B=512) is replanned to its ZeRO shard as any
    # weight's; the lookup adds into it and plans nothing of its own
    m = _tied(512)
    assert _reductions(m, "dW_emb", zero=1) == [Op.REDUCE_SCATTER]
