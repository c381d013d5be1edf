"""Keep or gather again (issue 27, item 2): a training candidate's backward may keep the tensors the forward
gathered (memory) or gather them again (time). The search prices both, takes the faster that fits the cap,
says which (text and JSON); ``keep_gathered`` / ``--keep-gathered`` / ``--gather-again`` force one."""

from __future__ import annotations

import json

import pytest

import shardalg as sa
from shardalg.cli import main

MLP = "params W_in, W_out\nlayers L\nIn[B, D] * W_in[D, F] -> Tmp[B, F]\nTmp[B, F] * W_out[F, D] -> Out[B, D]"
WHERE = {"mesh": "X=8", "sizes": "B=256,D=4096,F=16384,L=2", "hw": "tpu-v5e"}
COPIES = 2 * 4096 * 16384 * 2  # a layer's W_in and W_out gathered whole over X, bf16: 268,435,456 bytes
# Kept, the L = 2 layers' copies are held (2 x COPIES) and they are the buffers each layer gathered: no transient
# besides; gathered again, one layer's gathered weights are the transient (COPIES). Keeping costs COPIES more:
# 673,710,080 bytes gathering again, 942,145,536 keeping (with one layer keeping would cost nothing more).


def fsdp(memory: str, keep: bool | None = None):
    return sa.search(MLP, **WHERE, memory=memory, keep_gathered=keep).best["FSDP"]


def test_keeping_wins_when_memory_allows():
    """FSDP's weights gathered by the forward: kept, the backward moves fewer bytes; its time is the one the
    forced keep gives, less than the forced gather-again, and its memory grows by the copies."""
    e = fsdp("16GB")
    kept, again = fsdp("16GB", True), fsdp("16GB", False)
    assert e.keep is not None and e.keep.kept and not e.keep.forced
    assert e.keep.copies == 2 * COPIES
    assert e.seconds == kept.seconds < again.seconds
    assert e.keep.again == again.seconds and e.keep.keep == kept.seconds
    assert e.bytes - again.bytes == COPIES == 942_145_536 - 673_710_080
    assert e.gathered == "kept"
    assert e.keep.text().startswith("keeps the gathered copies (537 MB): 10.8 ms against 11 ms")


def test_the_cap_forces_gathering_again():
    """900 MB holds FSDP gathering again (674 MB) but not keeping (942 MB): the faster way does not fit."""
    e = fsdp("900MB")
    assert e.fits and not e.keep.kept
    assert e.keep.keep_fits is False and e.keep.keep_bytes > 900e6 >= e.bytes
    assert e.keep.keep < e.keep.again  # keeping would be faster
    assert e.seconds == e.keep.again
    assert (
        e.keep.text()
        == "gathers again: keeping the gathered copies (537 MB) goes over the cap (942 MB per device)"
    )
    forced = fsdp("900MB", True)  # forced, it is over the cap and says so
    assert forced.keep.forced and forced.keep.kept and not forced.fits


def test_a_backward_that_gathers_nothing_has_no_choice():
    r = sa.search(MLP, **WHERE, memory="16GB")
    assert r.best["DP"].keep is None and r.best["DP"].gathered == "-"
    infer = sa.search(MLP, **WHERE, memory="16GB", mode="infer")
    assert all(e.keep is None for e in infer.ranked)
    assert not any(k == "gathered" for k, _ in infer.notes)


def test_cli_says_the_choice_in_text_and_json(capsys):
    argv = ["search", MLP.replace("\n", "; "), "--mesh", "X=8", "--sizes", WHERE["sizes"], "--hw", "tpu-v5e"]
    assert main([*argv, "--memory", "900MB"]) == 0
    out = capsys.readouterr().out
    assert "its backward gathers again: keeping the gathered copies (537 MB) goes over the cap" in out
    assert "gathered  reason" in out
    assert (
        "note: gathered: each candidate's backward keeps the forward's gathered copies or gathers them again"
        in out
    )
    assert main([*argv, "--memory", "16GB", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    g = data["strategies"]["FSDP"]["gathered"]
    assert g["kept"] is True and g["forced"] is False and g["copies_bytes"] == 2 * COPIES
    assert g["seconds_keeping"] < g["seconds_gathering_again"]
    assert data["strategies"]["DP"]["gathered"] is None
    assert main([*argv, "--memory", "16GB", "--gather-again", "--json"]) == 0
    g = json.loads(capsys.readouterr().out)["strategies"]["FSDP"]["gathered"]
    assert g["kept"] is False and g["forced"] is True


def test_keep_flags_exclude_each_other(capsys):
    argv = ["search", MLP.replace("\n", "; "), "--mesh", "X=8", "--sizes", WHERE["sizes"], "--hw", "tpu-v5e"]
    with pytest.raises(SystemExit) as e:
        main([*argv, "--keep-gathered", "--gather-again"])
    assert e.value.code != 0
    assert "not allowed with argument" in capsys.readouterr().err


def test_per_statement_gathers_again_and_refuses_keep(capsys):
    argv = ["search", MLP.replace("\n", "; "), "--mesh", "X=8", "--sizes", WHERE["sizes"], "--hw", "tpu-v5e"]
    assert main([*argv, "--per-statement", "--keep-gathered"]) != 0
    assert "--keep-gathered does not apply" in capsys.readouterr().err
    assert main([*argv, "--per-statement"]) == 0
    assert "note: gathered: each statement's backward gathers the forward's gathered copies again" in (
        capsys.readouterr().out
    )
