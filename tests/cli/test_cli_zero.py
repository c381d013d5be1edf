"""``shardalg memory | fit | step`` with --zero, --precision, --offload, --host-link and --microbatches: the
JSON contract, the text, and clear errors with exit code 2."""

from __future__ import annotations

import json

import pytest

from shardalg.cli import main
from shardalg.models.expand import expand, shard
from shardalg.notation.printing import render

LLAMA = render(shard(expand("llama-2-13b"), activations="B=X"), "text")
PSI, N = 13_015_864_320, 64


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _memory(capsys, *extra: str) -> dict:
    code, out, _ = run(
        capsys, "memory", LLAMA, "--mesh", f"X={N}", "--sizes", "B=64,T=4096", "--hw", "h100", "--remat", "block",
        "--json", *extra,
    )  # fmt: skip
    assert code == 0
    return json.loads(out)


@pytest.mark.parametrize(
    ("stage", "want"),
    [("1", (2 * PSI, 2 * PSI, 12 * PSI // N)), ("2", (2 * PSI, 2 * PSI // N, 12 * PSI // N)),
     ("3", (2 * PSI // N, 2 * PSI // N, 12 * PSI // N))],
)  # fmt: skip
def test_memory_zero_deepspeed_json(capsys, stage, want):
    data = _memory(capsys, "--zero", stage, "--precision", "deepspeed")
    b = data["bytes_per_device"]
    assert (b["params"], b["grads"], b["optimizer"]) == want
    assert data["zero"]["stage"] == int(stage) and data["precision"]["master"] == "fp32"
    assert data["optimizer"]["state_bytes_under_precision"] == 12


def test_memory_offload_optimizer_shows_host_bytes(capsys):
    data = _memory(capsys, "--zero", "2", "--precision", "deepspeed", "--offload", "optimizer")
    assert data["bytes_per_device"]["optimizer"] == 0
    assert data["host_bytes"]["optimizer"] == 12 * PSI // N and data["offload"] == ["optimizer"]
    code, out, _ = run(
        capsys, "memory", LLAMA, "--mesh", f"X={N}", "--sizes", "B=64,T=4096", "--hw", "h100",
        "--offload", "optimizer", "--host-link", "32e9",
    )  # fmt: skip
    assert code == 0 and "host total" in out and "3.2e+10 bytes/s each way" in out
    assert "note: host link: given by the user" in out


def test_step_takes_zero_and_microbatches(capsys):
    code, out, _ = run(
        capsys, "step", LLAMA, "--mesh", "X=8", "--sizes", "B=64,T=512", "--hw", "h100", "--zero", "3",
        "--microbatches", "4", "--json",
    )  # fmt: skip
    data = json.loads(out)
    assert code == 0 and data["zero"]["stage"] == 3 and data["microbatches"] == 4
    assert [(p["part"], p["count"]) for p in data["parts"]] == [
        ("layer", 120), ("layer (last)", 40), ("outside", 3), ("outside (last)", 1)
    ]  # fmt: skip
    assert [c["key"] for c in data["conventions"]] == ["flops", "dtypes", "plans", "functions"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--precision", "fp4"), "error: unknown precision recipe 'fp4'; known: book, deepspeed, bf16, fp8"),
        (("--offload", "grads"), "error: --offload takes optimizer, params"),
        (("--microbatches", "two"), "error: --microbatches takes a positive whole number, not 'two'"),
        (("--microbatches", "3"), "error: --microbatches 3 splits B = 64 into equal microbatches"),
        (("--host-link", "fast"), "error: --host-link takes a positive number, not 'fast'"),
    ],
)
def test_bad_options_exit_2(capsys, extra, message):
    code, _, err = run(capsys, "memory", LLAMA, "--mesh", "X=8", "--sizes", "B=64,T=512", *extra)
    assert code == 2 and message in err


def test_memory_logits_policy(capsys):
    data = _memory(capsys, "--logits", "chunked=4")
    assert data["logits"] == {"policy": "chunked", "chunks": 4}
    assert not [t for t in data["tensors"] if t["tensor"] == "Logits" and t["part"] == "activations"]
    assert [t["bytes_per_device"] for t in data["tensors"] if t["tensor"] == "Logits"] == [
        64 * 4096 * 32000 * 2 // N // 4
    ]
