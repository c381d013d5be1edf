"""Serving end to end: LLaMA-2 13B on 8 H100s, a prompt of 2,048 tokens and 256 generated at batch 32: the time to
first token, tokens per second and cost per million tokens, each checked against a derivation by hand from the
same per-op terms (steps priced here on their own), not against a number typed in."""

from __future__ import annotations

import json

import pytest

from shardalg.cli import main
from shardalg.errors import UsageError
from shardalg.models.analysis import analyze
from shardalg.models.expand import expand, shard
from shardalg.models.program import model_program
from shardalg.models.serving import serve
from shardalg.models.step import model_step

SHARDING = {"params": "F=X,K=X,V=X", "activations": "F=X,K=X,V=X"}  # Megatron over the 8 GPUs of a node
P, N, BATCH, GPUS, PRICE = 2048, 256, 32, 8, 2.5


@pytest.fixture(scope="module")
def served():
    return serve(
        "llama-2-13b",
        "X=8",
        "B=32",
        "h100",
        P,
        N,
        price_per_chip_hour=PRICE,
        **SHARDING,  # type: ignore[arg-type]
    )


def _step_seconds(phase: str, sizes: dict[str, int]) -> float:
    """One step of LLaMA-2 13B priced on its own: the sum over its parts of count x the sum of its per-op
    rooflines (each op's total read from the report's own ops)."""
    program = shard(expand("llama-2-13b", phase), SHARDING["params"], SHARDING["activations"])
    report = model_step(analyze(model_program(program, "X=8", sizes), "infer"), "h100")
    return sum(float(p.count) * sum(report.seconds_of(op.total) for op in p.ops) for p in report.parts)


def test_time_to_first_token_is_the_prefill_step(served):
    ttft = _step_seconds("prefill", {"B": BATCH, "T": P, "S": P})
    assert served.ttft_s == pytest.approx(ttft, rel=1e-12)
    attention = [op for op in served.prefill.parts[0].ops if op.kv_read]
    assert len(attention) == 1  # the prompt's attention core reads its cache as one op


def test_each_decode_step_is_priced_at_its_own_context(served):
    lengths = [s for s, _ in served.decode_steps]
    assert lengths == list(range(P + 1, P + N))  # tokens 2 .. N, each over the prompt and those before it
    for i in (0, 127, N - 2):
        s, seconds = served.decode_steps[i]
        assert seconds == pytest.approx(_step_seconds("decode", {"B": BATCH, "S": s}), rel=1e-9), s
    times = [t for _, t in served.decode_steps]
    assert all(a < b for a, b in zip(times, times[1:], strict=False))  # a longer cache is a longer read
    last = served.decode_last
    (attention,) = [op for op in last.parts[0].ops if op.kv_read]
    assert attention.bound(last.values) == "hbm"


def test_tokens_per_second_and_cost_per_million_tokens_by_hand(served):
    decode = sum(t for _, t in served.decode_steps)
    total = served.ttft_s + decode
    assert served.total_s == pytest.approx(total, rel=1e-12)
    assert served.tpot_s == pytest.approx(decode / (N - 1))
    assert served.tokens_per_s_per_user == pytest.approx(N / total)
    assert served.tokens_per_s_per_chip == pytest.approx(BATCH * N / total / GPUS)
    dollars = PRICE * GPUS * total / 3600  # eight chips for the request's time
    assert served.cost_per_million_tokens == pytest.approx(dollars / (BATCH * N) * 1e6)
    data = served.to_json()
    assert data["ttft_s"] == served.ttft_s
    assert data["tokens_per_s"] == {
        "per_user": served.tokens_per_s_per_user,
        "per_chip": served.tokens_per_s_per_chip,
        "in_all": served.tokens_per_s,
    }
    assert data["cost_per_million_tokens"] == served.cost_per_million_tokens
    keys = [d["key"] for d in data["defaults"]]
    assert {"compute", "hbm", "network", "roofline", "ttft", "decode", "tokens"} <= set(keys)


def test_the_cli_serves_and_says_its_defaults(capsys):
    argv = ["serve", "llama-2-13b", "--mesh", "X=8", "--sizes", "B=32", "--hw", "h100"]
    argv += ["--params", "F=X,K=X,V=X", "--activations", "F=X,K=X,V=X"]
    argv += ["--prefill", "2048", "--generate", "256", "--price-per-chip-hour", "2.5"]
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ttft_s"] > 0 and data["tokens_per_s"]["per_chip"] > 0 and data["cost_per_million_tokens"] > 0
    assert main([*argv, "--steps"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("serve ") and "TTFT" in out and "per million generated tokens at $2.5" in out
    assert "MFU peak" in out and "MFU 1" not in out
    assert "attention (KV-cache read: Kc, Vc)" in out and "-- last decode:" in out
    assert main(argv) == 0
    brief = capsys.readouterr().out
    assert "-- last decode:" not in brief and brief.splitlines()[:6] == out.splitlines()[:6]


def test_memory_is_counted_at_the_longest_cache(served):
    m = served.memory
    assert served.longest == P + N - 1 and m.fits is True
    # K and V of 40 layers, each [B, S, K/8, H] in bf16 on a device, at the last decode step's context
    assert m.parts["kv_cache"] == 2 * 40 * BATCH * (P + N - 1) * (40 // 8) * 128 * 2
    assert served.to_json()["memory"]["at_S"] == P + N - 1 and "memory" not in dict(served.notes)
    big = serve("llama-2-13b", "X=8", "B=512", "h100", 8192, 2, **SHARDING)  # type: ignore[arg-type]
    assert big.memory.fits is False and "do not fit in h100's HBM" in dict(big.notes)["memory"]
    assert "does NOT fit in h100's HBM" in str(big)


def test_a_single_token_has_no_decode_step():
    r = serve("llama-2-13b", "X=8", "B=4", "h100", 128, 1, **SHARDING)  # type: ignore[arg-type]
    assert r.decode_steps == [] and r.total_s == r.ttft_s and r.tpot_s is None
    assert r.cost_per_million_tokens is None  # no price given
    assert dict(r.notes)["decode"].startswith("one token generated")


def test_plans_that_differ_across_the_generation_are_made_at_each_context():
    """W[S, D_X]: below S = B the planner gathers W, above it gathers the product's result; a generation
    across S = 128 plans each step on its own."""
    program = "params W\nkvcache Kc\ntokens B\nQ[B, S] * Kc[B, S] -> Sc[B]\nP[B, S] * W[S, D_X] -> O[B, D]\nwhere D=64"
    r = serve((program, program), "X=4", "B=128", "tpu-v5e", 125, 6)
    assert [s for s, _ in r.decode_steps] == [126, 127, 128, 129, 130]
    assert dict(r.notes)["decode"] == "5 steps, each planned and priced at its own S"
    for s, seconds in r.decode_steps:
        alone = model_step(analyze(model_program(program, "X=4", {"B": 128, "S": s}), "infer"), "tpu-v5e")
        assert seconds == pytest.approx(alone.seconds, rel=1e-12)


def test_a_context_sharded_over_an_axis_is_refused_with_the_reason():
    with pytest.raises(
        UsageError, match=r"the decode steps attend to S = 17 \.\. 19 tokens, one more a step"
    ):
        serve("llama-2-13b", "X=8", "B=8", "h100", 16, 4, params="F=X", activations="S=X")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sizes": "B=8,T=4"}, "serving sets T from --prefill"),
        ({"sizes": "D=8"}, "serving needs the batch"),
        ({"prefill": 0}, "the prompt's length is a positive whole number"),
        ({"generate": 2.5}, "the number of generated tokens is a positive whole number"),
        ({"price_per_chip_hour": -1.0}, "the price per chip-hour is a positive number"),
        ({"hw": None}, "serving needs a chip"),
    ],
)
def test_bad_serving_requests_are_refused(kwargs, message):
    args = {"sizes": "B=8", "hw": "h100", "prefill": 16, "generate": 2, **kwargs}
    with pytest.raises(UsageError, match=message):
        serve(
            "llama-2-13b",
            "X=8",
            args.pop("sizes"),
            args.pop("hw"),
            args.pop("prefill"),
            args.pop("generate"),
            **args,
        )  # type: ignore[arg-type]
