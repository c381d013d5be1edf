"""ZeRO stages, precision recipes, offload and microbatches: DeepSpeed's published formula on LLaMA-2 13B,
the book's numbers, the data axes, the errors, and ZeRO-3 on a replicated program against the same program
written sharded (two independent paths to the same bytes)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardalg.algebra.symbols import dim_size
from shardalg.errors import UsageError
from shardalg.models.analysis import analyze
from shardalg.models.expand import expand, shard
from shardalg.models.memory import memory
from shardalg.models.program import model_program
from shardalg.models.step import model_step
from shardalg.models.trainstate import TrainState

B, D, F = (dim_size(n) for n in "BDF")
# data parallelism: weights replicated over X; the functions not written (ZeRO-3 does not gather the norms' gains)
# sizes at which every plan is decided (the gradients all-reduce): no size is made up to choose one
AT = {B: 65536, D: 1024, F: 4096}
SIZES = {str(k): v for k, v in AT.items()}
LLAMA = shard(expand("llama-2-13b", functions=False), activations="B=X")
N = 64


@pytest.fixture(scope="module")
def llama():
    return model_program(LLAMA, mesh=f"X={N}", sizes={"B": 64, "T": 4096})


def _report(model, **choices):
    return memory(model, hw="h100", remat="block", **choices)


@pytest.mark.parametrize(
    ("stage", "params", "grads", "optimizer"),
    [
        # Rajbhandari et al. 2019, figure 1: P_os, P_os+g, P_os+g+p with K = 12
        (1, lambda p: 2 * p, lambda p: 2 * p, lambda p: 12 * p / N),
        (2, lambda p: 2 * p, lambda p: 2 * p / N, lambda p: 12 * p / N),
        (3, lambda p: 2 * p / N, lambda p: 2 * p / N, lambda p: 12 * p / N),
    ],
)
def test_deepspeed_formula_on_llama_2_13b(llama, stage, params, grads, optimizer):
    r = _report(llama, zero=stage, precision="deepspeed")
    psi = r.params  # counted from the preset's einsums
    assert psi == 13_015_864_320
    assert r.parts["params"] == params(psi)
    assert r.parts["grads"] == grads(psi)
    assert r.parts["optimizer"] == optimizer(psi)
    formula = {1: 4 * psi + 12 * psi / N, 2: 2 * psi + 14 * psi / N, 3: 16 * psi / N}[stage]
    assert r.parts["params"] + r.parts["grads"] + r.parts["optimizer"] == formula


def test_the_readme_s_zero_table_is_what_memory_gives(llama):
    """The README's table (issue 32): each stage's params, grads and optimizer bytes under DeepSpeed's recipe
    as ``memory`` gives them, their sum as DeepSpeed's formula, and the book recipe's sum."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    rows = [line.split("|")[1:-1] for line in readme.splitlines() if line.startswith("| ZeRO-")]
    assert [r[0].strip() for r in rows] == ["ZeRO-1", "ZeRO-2", "ZeRO-3"]
    for stage, row in enumerate(rows, start=1):
        numbers = [int(c.strip().replace(",", "")) for c in row[1:5]]
        deepspeed = _report(llama, zero=stage, precision="deepspeed")
        book = _report(llama, zero=stage, precision="book")
        parts = [deepspeed.parts[p] for p in ("params", "grads", "optimizer")]
        psi = deepspeed.params
        formula = {1: 4 * psi + 12 * psi / N, 2: 2 * psi + 14 * psi / N, 3: 16 * psi / N}[stage]
        assert numbers == [*parts, formula]
        assert int(row[6].strip().replace(",", "")) == sum(
            book.parts[p] for p in ("params", "grads", "optimizer")
        )


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_the_book_recipe_gives_the_book_numbers(llama, stage):
    """The book: bf16 parameters and fp32 Adam moments, 2 + 8 = 10 bytes per parameter, gradients in bf16."""
    r = _report(llama, zero=stage, precision="book")
    psi = r.params
    sharded = {"optimizer": stage >= 1, "grads": stage >= 2, "params": stage >= 3}
    per = {"params": 2, "grads": 2, "optimizer": 8}
    for part, bytes_per_param in per.items():
        assert r.parts[part] == bytes_per_param * psi / (N if sharded[part] else 1)


def test_zero_3_of_a_replicated_program_is_the_program_written_sharded():
    written = shard(expand("llama-2-13b", functions=False), params="D=X", activations="B=X")  # FSDP, book
    a = memory(written, mesh="X=8", sizes={"B": 8, "T": 512}, remat="block", precision="deepspeed")
    z = memory(LLAMA, mesh="X=8", sizes={"B": 8, "T": 512}, remat="block", precision="deepspeed", zero=3)
    for part in ("params", "grads", "optimizer", "transient"):
        assert a.parts[part] == z.parts[part], part


@settings(max_examples=12, deadline=None)
@given(
    x=st.sampled_from([2, 4, 8]),
    d=st.sampled_from([8, 16, 64]),
    f=st.sampled_from([8, 32]),
    recipe=st.sampled_from(["book", "deepspeed", "bf16", "fp8"]),
)
def test_zero_3_on_dp_equals_fsdp_as_written(x, d, f, recipe):
    dp = f"params W\nIn[B_X, D] * W[D, F] -> Out[B_X, F] where D={d}, F={f}, B=16"
    fsdp = (  # the book's FSDP: the weight gathered before its product
        f"params W\nAllGather_X(W[D_X, F]) -> W[D, F]\nIn[B_X, D] * W[D, F] -> Out[B_X, F] where D={d}, F={f}, B=16"
    )
    z = memory(dp, mesh=f"X={x}", zero=3, precision=recipe)
    w = memory(fsdp, mesh=f"X={x}", precision=recipe)
    for part in ("params", "grads", "optimizer", "transient", "activations"):
        assert z.parts[part] == w.parts[part], part
    assert z.parts["params"] + z.parts["grads"] + z.parts["optimizer"] == (
        z.params * {"book": 12, "deepspeed": 16, "bf16": 8, "fp8": 13}[recipe] / x
    )


def test_recipes_and_their_changes():
    prog = "params W\nIn[B_X, D] * W[D, F] -> Out[B_X, F]"
    per_param = {
        "book": (2, 2, 8),
        "deepspeed": (2, 2, 12),
        "bf16": (2, 2, 4),  # moments in bf16, no master
        "fp8": (1, 4, 8),  # fp8 weights; fp32 grads and master (4); bf16 moments (2 + 2): DeepSeek-V3
        "deepspeed,grads=fp32": (2, 4, 12),
        "deepspeed,master=none": (2, 2, 8),
    }
    df = (D * F).subs(AT)
    for recipe, (p, g, o) in per_param.items():
        r = memory(prog, mesh="X=4", sizes=SIZES, precision=recipe)
        assert (r.parts["params"], r.parts["grads"], r.parts["optimizer"]) == (p * df, g * df, o * df)
    declared = memory(
        "params W\nIn[B_X, D] * W: int8[D, F] -> Out[B_X, F]", mesh="X=4", sizes=SIZES, precision="deepspeed"
    )
    assert declared.parts["params"] == df  # a declared dtype wins over the recipe's
    adam32 = memory(prog, mesh="X=4", sizes=SIZES, optimizer="adam-fp32")
    assert adam32.parts["optimizer"] == 12 * df  # its own master
    sgd = memory(prog, mesh="X=4", sizes=SIZES, optimizer="sgd", precision="deepspeed")
    assert sgd.parts["optimizer"] == 4 * df  # mixed-precision SGD keeps the fp32 master copy


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"precision": "fp4"}, "unknown precision recipe 'fp4'; known: book, deepspeed, bf16, fp8"),
        ({"precision": "book,grad=fp32"}, "bad precision change 'grad=fp32'"),
        ({"precision": "book,grads=none"}, "only the master copy can be none"),
        ({"zero": 4}, "the ZeRO stage is 0, 1, 2 or 3, not 4"),
        ({"offload": "grads"}, "--offload takes optimizer, params"),
        ({"microbatches": 0}, "--microbatches takes a positive whole number"),
        ({"microbatches": 3}, "--microbatches 3 splits B = 16 into equal microbatches"),
    ],
)
def test_bad_choices_are_refused(kwargs, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        memory("params W\ntokens B\nIn[B_X, D] * W[D, F] -> Out[B_X, F] where B=16", mesh="X=4", **kwargs)


def test_zero_below_3_refuses_parameters_written_sharded_over_a_data_axis():
    with pytest.raises(
        UsageError,
        match=r"--zero 1 keeps the parameters whole over the data axes, and the program "
        r"shards W over X \(FSDP: ZeRO-3 as written\)",
    ):
        memory("params W\nIn[B_X, D] * W[D_X, F] -> Out[B_X, F]", mesh="X=4", zero=1)
    with pytest.raises(UsageError, match="no mesh axis shards the layer's input"):
        memory("params W\nIn[B, D] * W[D, F_X] -> Out[B, F_X]", mesh="X=4", zero=2)


def test_zero_shards_over_the_data_axes_only():
    """Tensor parallelism over Y, data parallelism over X: ZeRO shards over X, the weights keep their Y."""
    r = memory("params W\nIn[B_X, D] * W[D, F_Y] -> Out[B_X, F_Y]", mesh="X=4,Y=2", sizes=SIZES, zero=1)
    assert r.parts["optimizer"] == (8 * D * F / 8).subs(AT) and r.parts["params"] == (2 * D * F / 2).subs(AT)
    assert ("zero", "data axes X (the axes that shard the layer's input In)") in r.notes


def test_offload_moves_bytes_to_the_host_and_prices_pcie(llama):
    r = _report(llama, zero=2, precision="deepspeed", offload="optimizer")
    psi = r.params
    assert r.parts["optimizer"] == 0 and r.host["optimizer"] == 12 * psi / N
    data = r.to_json()
    host = data["host_bytes"]
    assert host["optimizer"] == 12 * psi // N and host["total"] == host["optimizer"]
    # the device's share of the fp16 gradients to the host, of the fp16 parameters back
    assert host["pcie_bytes_per_step"] == {"to_host": 2 * psi // N, "to_device": 2 * psi // N}
    assert host["host_link_bytes_per_s"] == 64e9 and "PCIe Gen5" in host["host_link_source"]
    assert host["pcie_seconds"] == pytest.approx(2 * psi / N / 64e9)
    assert "host part" in str(r) and "pcie time" in str(r)
    both = _report(llama, zero=3, precision="deepspeed", offload="optimizer,params")
    assert both.parts["params"] == 0 and both.host["params"] == 2 * psi / N
    assert both.parts["transient"] > 0  # a layer's parameters are fetched while it runs
    tpu = memory(LLAMA, mesh="X=64", sizes={"B": 64, "T": 4096}, hw="tpu-v5p", offload="optimizer")
    assert tpu.pcie()["seconds"] is None and "give --host-link" in tpu.pcie()["source"]
    given = memory(
        LLAMA, mesh="X=64", sizes={"B": 64, "T": 4096}, hw="tpu-v5p", offload="optimizer", host_link=32e9
    )
    assert given.pcie()["seconds"] == pytest.approx(2 * psi / 32e9)  # no ZeRO: every device's whole share


def test_microbatches_keep_one_microbatch_of_activations():
    big = memory(LLAMA, mesh="X=8", sizes={"B": 64, "T": 512}, remat="block", microbatches=8)
    small = memory(LLAMA, mesh="X=8", sizes={"B": 8, "T": 512}, remat="block")
    assert (
        big.parts["activations"] == small.parts["activations"]
        and big.parts["params"] == small.parts["params"]
    )
    prog = "params W\ntokens B\nIn[B_X, D] * W[D, F] -> Out[B_X, F]"
    quarter = memory(prog, mesh="X=4", sizes=SIZES, microbatches=4)
    assert quarter.parts["activations"] == (2 * B * D / 4 / 4).subs(AT)  # In[B_X, D] in bf16, a quarter of B
    with pytest.raises(UsageError, match="the first 'tokens' dim, and the program declares none"):
        memory("params W\nIn[B_X, D] * W[D, F] -> Out[B_X, F]", mesh="X=4", sizes=SIZES, microbatches=2)


def _collectives(report):
    from shardalg.notation.syntax import Op

    out = {}
    for p in report.parts:
        for sc in p.cost.steps:
            if sc.step.op is not Op.EINSUM:
                out.setdefault(sc.step.op.value, 0)
                out[sc.step.op.value] += 1
    return out


def test_step_collectives_under_each_stage():
    """DP's gradient AllReduce becomes a ReduceScatter and an AllGather (stages 1, 2); stage 3 gathers twice."""
    m = model_program(
        "params W\ntokens B\nIn[B_X, D] * W[D, F] -> Out[B_X, F] where B=8192, D=1024, F=4096", mesh="X=8"
    )
    a = analyze(m)
    ops = {z: _collectives(model_step(a, "h100", "serial", state=TrainState(zero=z))) for z in (0, 1, 2, 3)}
    assert ops[0] == {"AllReduce": 1}
    assert ops[1] == ops[2] == {"ReduceScatter": 1, "AllGather": 1}
    assert ops[3] == {"ReduceScatter": 1, "AllGather": 2}
    seconds = {z: model_step(a, "h100", "serial", state=TrainState(zero=z)).seconds for z in (0, 3)}
    assert seconds[3] > seconds[0]


def test_microbatches_run_the_step_collectives_once():
    m = model_program(
        "params W\ntokens B\nIn[B_X, D] * W[D, F] -> Out[B_X, F] where B=8192, D=1024, F=4096", mesh="X=8"
    )
    a = analyze(m)
    for z, per_pass in (
        (0, {}),
        (1, {}),
        (2, {"ReduceScatter": 1}),
        (3, {"ReduceScatter": 1, "AllGather": 2}),
    ):
        r = model_step(a, "h100", "serial", state=TrainState(zero=z, microbatches=4))
        first, last = r.parts[0], r.parts[1]
        assert (first.name, int(first.count), last.name, int(last.count)) == ("layer", 3, "layer (last)", 1)
        assert _collectives(type(r)(r.analysis, r.chip, r.policy, r.mfu, [first], r.flops)) == per_pass
        assert r.flops.total == a.flops().total  # the same tokens in four passes
        assert r.tokens == 8192


def test_conventions_are_said(llama):
    r = _report(llama, zero=1, precision="deepspeed")
    keys = [c["key"] for c in r.to_json()["conventions"]]
    assert keys == ["dtypes", "params", "activations", "zero", "transient"]
    assert "convention: dtypes: deepspeed: params fp16, grads fp16, master copy fp32, moments fp32" in str(r)
    assert "2 moments in fp32 + master copy fp32 = 12 bytes per parameter" in str(r)
    assert r.to_json()["precision"]["name"] == "deepspeed" and r.to_json()["zero"]["stage"] == 1


def test_search_prices_each_candidate_under_the_stage():
    from shardalg.search.numeric import search

    program = "params W_in, W_out\ntokens B\nIn[B, D] * W_in[D, F] -> Tmp[B, F]\nTmp[B, F] * W_out[F, D] -> Out[B, D]"
    on = dict(mesh="X=8", sizes="B=4096,D=8192,F=32768", hw="h100")
    plain = search(program, **on, precision="deepspeed")
    two = search(program, **on, precision="deepspeed", zero=2)
    assert two.pruned.zero == 3 and plain.pruned.zero == 0  # FSDP candidates (params over X, batch over X)
    assert not [e for e in two.ranked if e.strategy == "FSDP"]
    dp = next(e for e in two.ranked if e.strategy == "DP")
    written = "params W_in, W_out\ntokens B\nIn[B_X, D] * W_in[D, F] -> Tmp[B_X, F]\nTmp[B_X, F] * W_out[F, D] -> Out[B_X, D]"
    alone = memory(
        written, mesh="X=8", sizes="B=4096,D=8192,F=32768", hw="h100", precision="deepspeed", zero=2
    )
    assert dp.parts["optimizer"] == float(alone.parts["optimizer"]) == 12 * 2 * 8192 * 32768 / 8
    assert dp.parts["grads"] == 2 * 2 * 8192 * 32768 / 8 and dp.parts["params"] == 2 * 2 * 8192 * 32768
    data = two.to_json()
    assert data["zero"] == 2 and data["precision"] == "deepspeed" and data["pruned"]["zero"] == 3


def test_the_largest_batch_with_microbatches():
    from shardalg.models.fit import largest

    on = dict(
        mesh="X=8",
        sizes={"T": 512, "B": 64},
        hw="base=h100,hbm=20e9",
        remat="block",
        precision="deepspeed",
        zero=3,
    )  # made at a batch (B decides plans): largest plans again with B free
    one = largest(memory(LLAMA, **on), "B")
    four = largest(memory(LLAMA, **on, microbatches=4), "B")
    assert four.result == 4 * one.result  # one microbatch's activations in the same memory
    assert "4 microbatches of B/4, each a multiple of 8" in str(four)


def test_inference_states_the_training_choices_it_ignores():
    from shardalg.models.step import step_time

    decode = expand("llama-3-8b", phase="decode")
    r = step_time(decode, mesh="X=1", sizes={"B": 8, "S": 1024}, hw="h100", zero=1, microbatches=2)
    assert ("inference", "--zero 1, --microbatches 2 ignored (a training choice)") in r.notes


def test_gathered_weights_are_counted_in_the_recipe_dtype():
    """fp8 weights gather as fp8: the transient halves against bf16, written FSDP and ZeRO-3 alike."""
    fsdp = "params W\nAllGather_X(W[D_X, F]) -> W[D, F]\nIn[B_X, D] * W[D, F] -> Out[B_X, F] where D=64, F=32, B=16"
    dp = "params W\nIn[B_X, D] * W[D, F] -> Out[B_X, F] where D=64, F=32, B=16"
    for program, zero in ((fsdp, None), (dp, 3)):
        book = memory(program, mesh="X=4", zero=zero)
        fp8 = memory(program, mesh="X=4", zero=zero, precision="fp8")
        assert book.parts["transient"] == 2 * 64 * 32 and fp8.parts["transient"] == 64 * 32


def test_offload_is_a_training_choice():
    decode = expand("llama-3-8b", phase="decode")
    with pytest.raises(
        UsageError, match="--offload is counted for training steps; the step here is inference"
    ):
        memory(decode, mesh="X=1", sizes={"B": 8, "S": 1024}, offload="optimizer")
    r = memory(decode, mesh="X=1", sizes={"B": 8, "S": 1024}, zero=2, precision="bf16")
    assert (
        "inference",
        "no gradients, optimizer state or saved activations are counted; --precision bf16, --zero 2 ignored",
    ) in r.notes


def test_the_heads_logits_kept_recomputed_or_chunked():
    on = dict(mesh="X=8", sizes={"B": 8, "T": 4096}, remat="block")
    logits = 8 * 4096 * 32000 * 2 // 8  # Logits[B_X, T, V] in bf16 on one device
    assert memory(LLAMA, **dict(on, remat="none")).choices.head.policy == "kept"  # the remat policy's
    block = memory(LLAMA, **on, logits="recomputed")
    assert memory(LLAMA, **on).parts == block.parts  # block makes them again: the remat policy's choice
    # under block a layer's backward holds what it makes again (Q, Kp, Vp, A, Att, Hn: T x D; Gt, U, M: T x F,
    # in bf16 on one device), more than the logits the head's holds: the peak is the layer's
    rerun = 6 * 4096 * 5120 * 2 + 3 * 4096 * 13824 * 2
    assert block.parts["transient"] == rerun > logits
    # with the layer's activations kept (none), the head's logits alone are held while the head runs
    on = dict(on, remat="none")
    kept = memory(LLAMA, **on, logits="kept")
    again = memory(LLAMA, **on, logits="recomputed")
    chunked = memory(LLAMA, **on, logits="chunked=8")
    assert kept.parts["activations"] - again.parts["activations"] == logits
    assert again.parts["transient"] - kept.parts["transient"] == logits  # held while the head runs
    assert chunked.parts["activations"] == again.parts["activations"]
    assert chunked.parts["transient"] == logits // 8
    fsdp = shard(expand("llama-2-13b", functions=False), params="D=X", activations="B=X")
    big = dict(on, sizes={"B": 16, "T": 4096})  # the head's W_unemb and its logits outgrow a layer's weights
    layer = memory(fsdp, **big, logits="kept").parts["transient"]
    f = memory(fsdp, **big, logits="recomputed")
    assert f.parts["transient"] == 5120 * 32000 * 2 + 2 * logits > layer
    with pytest.raises(UsageError, match="--logits takes kept, recomputed, chunked=N, not 'chunked'"):
        memory(LLAMA, **on, logits="chunked")
