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
from shardalg.notation.syntax import Op

BF16 = 2  # bytes per element of the gradient (the table's dtype, bf16 by default)
# one table and one layer: the part outside the repeated layer is the lookup's gradient alone
TABLE_ONLY = (
    "params W; embeddings E; tokens B, T; layers L\nE[V, D]\nIn[B_X, T, D] * W[D, F] -> Out[B_X, T, F]"
)
V, D = 32000, 4096
SIZES = {"B": 16, "T": 256, "D": D, "F": 1024, "V": V, "L": 4}


def _outside(model, hw: str, **state) -> tuple[float, dict[str, float]]:
    """The part outside the layer's communication seconds and its seconds on each axis."""
    parts = step_seconds(analyze(model, "train", "none"), hw, state=TrainState(**state) if state else None)
    got = [p for p in parts if p.name.startswith("outside")]
    return sum(p.comms for p in got), {ax: s for p in got for ax, s in p.axes}


def _reductions(model, name: str, **state) -> list[Op]:
    """The collectives of the part outside the layer's backward (all its passes) that read ``name``."""
    from shardalg.models.step import _part_plans
    from shardalg.models.zerostep import pass_analysis, step_parts

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
    m = model_program(TABLE_ONLY, mesh="X=8", sizes=SIZES)
    chip = {str(k): v for k, v in as_chip_text("tpu-v5p").values().items()}
    comms, axes = _outside(m, "tpu-v5p")
    expected = 2 * (BF16 * V * D) / chip["W_ici"]  # 2×bytes/W_ici, bytes = V·D·2: 0.2913 ms
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


def test_tied_embedding_reduces_the_lookup_part_where_the_head_gathers_instead():
    # at B=8 the planner gathers the head's activations (fewer bytes), dW_emb is whole: no partial sum to add
    # the lookup's into, so the lookup's partial sum is reduced by its own plan, the one reduction of dW_emb
    m = _tied(8)
    (g,) = analyze(m, "train", "none").lookup_grads
    assert g.partial.unreduced == ("X",)
    assert [op for op in _reductions(m, "dW_emb") if op in (Op.ALL_REDUCE, Op.REDUCE_SCATTER)] == [
        Op.ALL_REDUCE
    ]


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
