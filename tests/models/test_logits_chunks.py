"""``--logits chunked=N`` cuts the tokens each device holds into N equal chunks: a count that does not divide
them, or more chunks than tokens, is refused as ``--microbatches`` is, and the chunk held is whole bytes. A
count is refused only when the tokens are known: with a size unbound no number is made up."""

from __future__ import annotations

import json

import pytest

from shardalg.algebra.symbols import dim_size
from shardalg.cli import main
from shardalg.errors import UsageError
from shardalg.models.analysis import analyze
from shardalg.models.expand import expand, shard
from shardalg.models.memory import memory, model_memory
from shardalg.models.program import model_program

DP = shard(expand("llama-3-8b"), activations="B=X")  # B over X: 8 / 8 = 1 batch row, 4,096 tokens a device
ON = dict(mesh="X=8", sizes={"B": 8, "T": 4096})
LOGITS = 4096 * 128256 * 2  # Logits[B_X, T, V] in bf16 on one device
ARGS = ["memory", "llama-3-8b", "--mesh", "X=8", "--sizes", "B=8,T=4096", "--hw", "h100", "--json"]


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([*args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("chunks", "said"),
    [
        (
            7,
            "--logits chunked=7 cuts the 4096 tokens per device (B = 1, T = 4096 of Logits) into equal chunks, "
            "and 7 does not divide them",
        ),
        (
            5000,
            "--logits chunked=5000 cuts the 4096 tokens per device (B = 1, T = 4096 of Logits) into more "
            "chunks than tokens",
        ),
    ],
)
def test_a_chunk_count_that_does_not_divide_the_tokens_per_device_is_refused(chunks: int, said: str) -> None:
    with pytest.raises(UsageError, match="cuts the 4096 tokens per device") as err:
        memory(DP, **ON, logits=f"chunked={chunks}")
    assert err.value.message == said
    assert "4096" in (err.value.fix or "")


def test_the_cli_refuses_it_with_exit_2_naming_the_tokens_and_the_limit(capsys) -> None:
    for chunks in ("7", "5000"):
        code, out, err = _cli(capsys, *ARGS, "--logits", f"chunked={chunks}")
        assert code == 2 and out == ""
        # unsharded: each device holds the whole batch, 8 x 4096 tokens
        assert f"--logits chunked={chunks} cuts the 32768 tokens per device" in err
        assert "a divisor of 32768, at most 32768" in err


def test_a_count_that_divides_the_tokens_holds_whole_bytes_of_one_chunk(capsys) -> None:
    again = memory(DP, **ON, logits="recomputed")
    assert again.parts["transient"] == LOGITS  # no weight is gathered: the logits are the transient
    for chunks in (1, 8, 4096):
        r = memory(DP, **ON, logits=f"chunked={chunks}")
        assert r.parts["activations"] == again.parts["activations"]
        assert r.parts["transient"].is_Integer and r.parts["transient"] == LOGITS // chunks
    code, out, _ = _cli(capsys, *ARGS, "--logits", "chunked=8")
    data = json.loads(out)
    assert code == 0 and data["logits"] == {"policy": "chunked", "chunks": 8}
    assert isinstance(data["bytes_per_device"]["transient"], int)


def test_with_microbatches_the_chunks_cut_one_microbatchs_tokens() -> None:
    on = dict(mesh="X=2", sizes={"B": 8, "T": 512})  # 4 batch rows a device, 2 a microbatch: 1,024 tokens
    assert memory(DP, **on, microbatches=2, logits="chunked=1024").parts["transient"].is_Integer
    with pytest.raises(UsageError, match="cuts the 1024 tokens per device in a microbatch"):
        memory(DP, **on, microbatches=2, logits="chunked=2048")


def test_with_a_size_unbound_no_count_is_refused() -> None:
    a = analyze(model_program(DP, "X=8", {"T": 4096}))  # B unbound: the tokens per device are B/8 * 4096
    assert model_memory(a, logits="chunked=7").parts["transient"] == dim_size("B") / 8 * LOGITS / 7
