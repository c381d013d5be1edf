"""What each pipeline stage holds of the part outside the repeated layer: the embedding on stage 0, the head (its
weights and the logits) on the last stage, each figure derived here from the model's dims."""

from __future__ import annotations

import pytest

import shardalg
from shardalg.models.analysis import analyze
from shardalg.models.expand import expand, shard
from shardalg.models.pipeline import model_pipeline, pipeline_price
from shardalg.models.program import model_program
from tests.models.headed import HEADED, MESH, SIZES, B, D, F, L, M, P, V

BF16 = 2
STATE = BF16 + BF16 + 8  # bf16 params, bf16 grads, Adam's two fp32 moments: bytes per parameter


def test_stage_0_holds_the_embedding_and_the_last_stage_the_head() -> None:
    r = pipeline_price(HEADED, MESH, SIZES, "tpu-v5p", axis="P", microbatches=M)
    per_stage, local_b = L // P, B // 2  # B over X=2
    layer_weights = per_stage * 2 * D * F * STATE
    layer_acts = per_stage * local_b * (D + F) * BF16  # In and H, kept for the backward
    embedding = V * D * STATE
    unembedding = D * V * STATE
    head_acts = local_b * (D + V) * BF16  # Xl and the logits Lg (B/2 x V in bf16)
    assert [s.in_flight for s in r.memory] == [4, 3, 2, 1]
    assert [s.weights for s in r.memory] == pytest.approx(
        [layer_weights + embedding, layer_weights, layer_weights, layer_weights + unembedding]
    )
    assert [s.activations for s in r.memory] == pytest.approx(
        [layer_acts * 4 / M, layer_acts * 3 / M, layer_acts * 2 / M, (layer_acts + head_acts) * 1 / M]
    )
    # the part outside runs at the ends: the head on the last stage; on stage 0 the table's gradient, the
    # unwritten lookup's, made among stage 0's devices (shardalg.models.lookup): B = 64 tokens, fewer than
    # 2·V, so each device gathers them, AllGather_X(dIn[B_X, D]): B·D·2 = 32,768 bytes, 0.18 us at W_ici,
    # the collective's floor T_min = 1 us (it was reduced over P too, whose other stages hold no table:
    # Slice_P, ReduceScatter_X, AllGather_PX, 9.709 us)
    assert r.outside_seconds > 0
    assert r.first_seconds == pytest.approx(1e-6, rel=1e-9)
    assert max(r.stage_ticks) == pytest.approx(r.tick_seconds)
    assert max(r.stage_ticks[1:-1]) < min(r.stage_ticks[0], r.stage_ticks[-1])


def test_a_tied_embedding_is_held_at_both_ends() -> None:
    tied = HEADED.replace("embeddings W_emb, W_un", "embeddings W_emb").replace(
        "W_un[D, V] -> Lg", "W_emb[V, D] -> Lg"
    )
    r = pipeline_price(tied, MESH, SIZES, "tpu-v5p", axis="P", microbatches=M)
    layer_weights = L // P * 2 * D * F * STATE
    table = V * D * STATE
    assert [s.weights for s in r.memory] == pytest.approx(
        [layer_weights + table, layer_weights, layer_weights, layer_weights + table]
    )


def test_llama_3_8b_four_stages_puts_the_head_on_stage_3() -> None:
    """LLaMA-3 8B, its parameters whole on each chip, 32 sequences of 4096 tokens a chip (B=256 over X=8),
    4 stages of 8 layers, 8 microbatches: the unembedding's 6.30 GB of weight state and the logits (33.6 GB for
    the chip's batch, 4.2 GB a microbatch) are on stage 3 with the final norm (once, not in each layer), the
    embedding table's 6.30 GB on stage 0."""
    vocab, d, local_tokens = 128256, 4096, 256 // 8 * 4096
    program = shard(expand("llama-3-8b"), None, "B=X")
    a = analyze(model_program(program, "P=4,X=8", {"B": 256, "T": 4096}), "train")
    r = model_pipeline(a, "tpu-v5p", "P", 8)
    table = vocab * d * STATE
    assert table / 1e9 == pytest.approx(6.30, abs=0.005)
    logits = local_tokens * vocab * BF16
    assert logits / 1e9 == pytest.approx(33.6, abs=0.05)
    head_input = local_tokens * d * BF16  # Xf, the normed input of the unembedding
    final_norm = 2 * local_tokens * d * BF16 + local_tokens * 4  # its input Xl, result Xfr, fp32 statistics
    final_gain = d * STATE
    inner = r.memory[1]  # a stage of layers alone
    stage0, stage3 = r.memory[0], r.memory[3]
    assert stage0.weights - inner.weights == pytest.approx(table)
    assert stage3.weights - inner.weights == pytest.approx(table + final_gain)
    per_micro = inner.activations / inner.in_flight  # one microbatch of its 8 layers
    assert stage0.activations == pytest.approx(per_micro * 4)
    assert stage3.activations == pytest.approx(per_micro + (logits + head_input + final_norm) / 8)
    assert (logits / 8) / 1e9 == pytest.approx(4.2, abs=0.005)
    assert max(r.memory, key=lambda s: s.total) is stage0 and r.fits is False


def test_the_heads_kept_gathered_copy_is_on_the_last_stage_once() -> None:
    """The unembedding sharded over X and gathered for its product: kept for the backward (keep_gathered), its
    gathered copy (D x V in bf16) is on the last stage, held once for every microbatch in flight; a layer's
    copies are each stage's own; the other stages gather nothing."""
    fsdp = HEADED.replace(
        "Xl[B_X, D] * W_un[D, V]", "AllGather_X(W_un[D_X, V]) -> W_un[D, V]\nXl[B_X, D] * W_un[D, V]"
    )
    a = analyze(model_program(fsdp, MESH, SIZES), "train", keep_gathered=True)
    r = model_pipeline(a, "tpu-v5p", "P", M)
    plain = pipeline_price(HEADED, MESH, SIZES, "tpu-v5p", axis="P", microbatches=M)
    copy = D * V * BF16
    half = V * D * STATE / 2  # the unembedding's state, now over X=2
    assert [s.activations for s in r.memory] == pytest.approx(
        [s.activations for s in plain.memory[:3]] + [plain.memory[3].activations + copy]
    )
    assert [s.weights for s in r.memory] == pytest.approx(
        [s.weights for s in plain.memory[:3]] + [plain.memory[3].weights - half]
    )  # the kept copy is the buffer the head gathered: not a transient besides (it was: + copy, 2,097,152)


def test_logits_made_again_are_held_on_the_last_stage_one_microbatch_at_a_time() -> None:
    """Under ``--remat block`` the logits are made again for the backward, held only while the head runs: on
    the last stage, one microbatch's (B/2 x V in bf16 over m). A layer's backward makes its H again from the
    layer's input, held while that layer's backward runs: one microbatch's (B/2 x F in bf16 over m) on each
    stage of layers; on the last stage not beside the logits (the head's backward runs before its layers'),
    the larger of the two."""
    r = pipeline_price(HEADED, MESH, SIZES, "tpu-v5p", axis="P", microbatches=M, remat="block")
    kept = pipeline_price(HEADED, MESH, SIZES, "tpu-v5p", axis="P", microbatches=M)
    logits = B // 2 * V * BF16
    rerun = B // 2 * F * BF16
    assert (logits / M, rerun / M) == (65536, 16384)
    weights = [s.weights for s in kept.memory]
    assert [s.weights for s in r.memory] == pytest.approx(
        [w + rerun / M for w in weights[:3]] + [weights[3] + logits / M]
    )


def test_the_stages_module_example_runs() -> None:
    """The example in :mod:`shardalg.models.stages`' docstring prints what it says."""
    import doctest

    from shardalg.models import stages

    result = doctest.testmod(stages)
    assert result.attempted >= 3 and result.failed == 0


def test_an_embedding_lookups_time_is_on_stage_0() -> None:
    """An embedding lookup written as a product before the layer (``Tok[B, V] * W_emb[V, D]``) runs on stage
    0, not on the last stage with the head: stage 0's tick grows by its time over m, the last stage's does not.
    Here the lookup alone (its step: compute 0.585 us, its gradient's AllReduce over X 3.913 us, comms-bound)
    takes 4.059 us, as the head does (the same sizes); a stage's 2 layers 8.146 us, the send 2 us a microbatch:
    ticks 8.146/4 + 2 = 4.037 us, stage 0 and the last 4.037 + 4.059/4 = 5.051 us; the step the ticks once and
    the slowest 3 times more, 2 x 5.051 + 2 x 4.037 + 3 x 5.051 = 33.33 us, the plain model's 32.31 us and the
    lookup's 4.059/4 = 1.015 us on stage 0. The old count put the lookup on the last stage, priced with the
    head as one part (8.118 us: the last tick 6.066 us, stage 0's 4.037 us, the step 36.37 us). The plain model,
    its lookup not written, makes its table's gradient on stage 0 instead (:mod:`shardalg.models.lookup`: at 64
    tokens each device gathers the tokens' cotangent, B·D·2 bytes, at the collective's floor of 1 us), in place
    of which the written lookup's 4.059 us go on stage 0."""
    lookup = HEADED.replace("W_emb[V, D]\n", "Tok[B_X, V] * W_emb[V, D] -> X0[B_X, D]\n")
    r = pipeline_price(lookup, MESH, SIZES, "tpu-v5p", axis="P", microbatches=M)
    plain = pipeline_price(HEADED, MESH, SIZES, "tpu-v5p", axis="P", microbatches=M)
    alone = shardalg.step_time(
        "embeddings W_emb\nTok[B_X, V] * W_emb[V, D] -> X0[B_X, D]", MESH, SIZES, "tpu-v5p"
    )
    first = alone.seconds
    assert first == pytest.approx(4.059e-6, rel=1e-3) and r.first_seconds == pytest.approx(first)
    assert r.outside_seconds == pytest.approx(plain.outside_seconds)  # the head's alone, on the last stage
    ticks, unwritten = plain.stage_ticks, plain.first_seconds
    assert unwritten == pytest.approx(1e-6, rel=1e-9)
    assert r.stage_ticks == pytest.approx((ticks[0] - unwritten / M + first / M, *ticks[1:]))
    assert r.stage_ticks == pytest.approx((5.051e-6, 4.037e-6, 4.037e-6, 5.051e-6), rel=1e-3)
    assert r.seconds == pytest.approx(33.33e-6, rel=1e-3)


# --- a stage's plans run among its own devices: none over the pipeline axis ---


def _collectives_over(a, axis: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """(phase, op, axes) of each collective over ``axis`` of the plans a pipeline's stage prices: the layer's
    and those of each end's part outside (:func:`shardalg.models.step.step_seconds` with ``by_end``), forward
    and backward (the forward it recomputes, each gradient's plan, the lookup's)."""
    from shardalg.models.stages import End
    from shardalg.models.step import _part_plans

    return [
        (phase, s.op.value, s.axes)
        for once, end in ((False, None), *((True, e) for e in End))
        for phase, plans in zip(("forward", "backward"), _part_plans(a, once, end), strict=True)
        for p in plans
        for s in p.steps
        if s.op.communicates and axis in s.axes
    ]


def test_no_plan_of_a_stage_communicates_over_the_pipeline_axis() -> None:
    """HEADED at B = 65,536 on P=4, X=2: planned on the whole mesh, each weight's gradient (dW1, dW2 of the
    layer, dW_un of the head) is Slice_P, ReduceScatter_X, AllGather_PX, and the lookup's gradient too: P's
    links used by stages that hold other layers. A stage's plans, on the mesh without P, reduce over X
    alone: AllReduce_X each."""
    from shardalg.models.stages import stage_analysis, stage_mesh

    a = analyze(model_program(HEADED, MESH, SIZES.replace("B=64", "B=65536")), "train")
    whole = _collectives_over(a, "P")
    assert whole.count(("backward", "AllGather", ("P", "X"))) == 4  # dW1, dW2, dW_un and dW_emb
    stage = stage_analysis(a, "P")
    assert stage.model.mesh.names == ("X",) and stage_mesh(a.model.mesh, "P") == stage.model.mesh
    assert _collectives_over(stage, "P") == []
    grads = {
        g.of: [(s.op.value, s.axes) for s in p.steps if s.op.communicates]
        for g, (_, p) in zip(stage.backward.grads, stage.grad_plans, strict=True)
    }
    assert grads == {
        "Xl": [],
        "W_un": [("AllReduce", ("X",))],
        "H": [],
        "W2": [("AllReduce", ("X",))],
        "In": [],
        "W1": [("AllReduce", ("X",))],
    }
    assert [[(s.op.value, s.axes) for s in g.plan.steps] for g in stage.lookup_grads] == [
        [("AllReduce", ("X",))]
    ]


def test_a_tensor_parallel_stage_reduces_its_projections_within_the_stage() -> None:
    """LLaMA-3 8B, B over X and D over Y, on P=4, X=8, Y=2: on the whole mesh the forward's K and V
    projections (their partial sums over Y) were finished by Slice_P, ReduceScatter_Y, AllGather_PY, and 12 of
    the backward's gathers ran over Y, P and X; a stage's plans (on X=8, Y=2) run none over P: the forward
    finishes K and V by AllReduce_Y."""
    from shardalg.models.stages import stage_analysis

    program = shard(expand("llama-3-8b"), None, "B=X,D=Y")
    a = analyze(model_program(program, "P=4,X=8,Y=2", {"B": 256, "T": 4096}), "train")
    whole = _collectives_over(a, "P")
    assert [c for c in whole if c[0] == "forward"] == [("forward", "AllGather", ("P", "Y"))] * 2
    assert len(whole) == 14
    stage = stage_analysis(a, "P")
    assert _collectives_over(stage, "P") == []
    for i, p in stage.forward_plans.items():
        if stage.model.statements[i].result in ("Kp", "Vp"):
            assert [(s.op.value, s.axes) for s in p.steps if s.op.communicates] == [("AllReduce", ("Y",))]


def test_a_stages_time_counts_its_reductions_within_the_stage() -> None:
    """HEADED at B = 1,024 on P=4, X=2, 4 microbatches, on tpu-v5p (W_ici = 1.8e11 bytes/s, 4.59e14 FLOP/s in
    bf16). Each chip holds B/2 = 512 tokens. A layer: its forward 2·(2·512·256·1024) FLOPs = 1.170 us, its
    backward twice that, 2.339 us, under which run its gradients' reductions, AllReduce_X of dW1 and dW2, each
    D·F·2 = 524,288 bytes, 2·524,288/1.8e11 = 5.825 us: 1.170 + max(2.339, 11.651) = 12.821 us. The head: its
    forward 2·512·256·4096 FLOPs = 2.339 us, its backward 4.678 us under dW_un's AllReduce_X, D·V·2 =
    2,097,152 bytes, 23.302 us: 25.641 us. Stage 0's lookup gradient gathers the 1,024 tokens' dIn (fewer than
    2·V): B·D·2 = 524,288 bytes / 1.8e11 = 2.913 us. The send 2 us a microbatch. Ticks: the inner stages'
    2·12.821/4 + 2 = 8.410 us, stage 0's 8.410 + 2.913/4 = 9.138 us, the last's 8.410 + 25.641/4 = 14.820 us;
    the step 3·14.820 + (9.138 + 2·8.410 + 14.820) = 85.24 us. Planned over P too (the gradients' Slice_P,
    ReduceScatter_X, AllGather_PX: 4 us a weight at the collectives' 1 us floor and P's links), a layer was
    1.170 + 8 = 9.170 us and the head 12.048 us: ticks 7.313, 6.585, 6.585, 9.597 us, the step 58.87 us."""
    w_ici, peak, tokens = 1.8e11, 4.59e14, B * 16 // 2
    r = pipeline_price(HEADED, MESH, SIZES.replace("B=64", "B=1024"), "tpu-v5p", axis="P", microbatches=M)
    forward = 2 * 2 * tokens * D * F / peak
    layer = forward + 2 * (2 * D * F * BF16 / w_ici)
    head = 2 * tokens * D * V / peak + 2 * D * V * BF16 / w_ici
    first = B * 16 * D * BF16 / w_ici
    assert (forward, layer, head, first) == pytest.approx(
        (1.170e-6, 12.821e-6, 25.641e-6, 2.913e-6), rel=1e-3
    )
    assert r.send_seconds == pytest.approx(2e-6)
    assert r.outside_seconds == pytest.approx(head) and r.first_seconds == pytest.approx(first)
    assert r.stage_seconds == pytest.approx(L // P * layer + head)
    inner = L // P * layer / M + 2e-6
    assert r.stage_ticks == pytest.approx((inner + first / M, inner, inner, inner + head / M))
    assert r.stage_ticks == pytest.approx((9.138e-6, 8.410e-6, 8.410e-6, 14.820e-6), rel=1e-3)
    assert r.seconds == pytest.approx(3 * r.stage_ticks[-1] + sum(r.stage_ticks))
    assert r.seconds == pytest.approx(85.24e-6, rel=1e-3)
