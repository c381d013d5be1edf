"""Megatron sequence parallelism (issue 32 item 6): on a TP=8 axis for one LLaMA layer, the norm and
elementwise regions are sharded over the sequence, the tensor-parallel regions begin with an AllGather of the
activation and end with a ReduceScatter onto the sequence (no AllReduce), and the activations of the norm
regions take an eighth of the memory; the search names the strategy and lays it out."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from shardalg.cli import main
from shardalg.errors import UsageError
from shardalg.models.analysis import analyze
from shardalg.models.expand import expand, shard
from shardalg.models.memory import model_memory
from shardalg.models.program import model_program
from shardalg.notation.printing import text
from shardalg.notation.syntax import Op
from shardalg.search.numeric import search

TP = "F=Y,K=Y"
SIZES = {"B": 1, "T": 4096}


def _layer(sequence: str | None):
    """One LLaMA-3 8B layer (and the head), its functions not written, tensor-parallel over Y=8, with or
    without Megatron SP."""
    program = shard(expand("llama-3-8b", functions=False), TP, TP, sequence=sequence)
    return analyze(model_program(program, "Y=8", SIZES), "train")


def _activations(a) -> dict[str, int]:
    rows = model_memory(a, "h100").to_json()["tensors"]
    return {r["tensor"]: r["bytes_per_device"] for r in rows if r["part"] == "activations"}


def test_the_tensor_parallel_regions_begin_with_an_allgather_and_end_with_a_reducescatter():
    a = _layer("Y")
    lines = [text(s) for s in a.model.program.statements]
    assert "AllGather_Y(In[B, T_Y, D]) -> In[B, T, D]" in lines
    assert "AllGather_Y(Hn[B, T_Y, D]) -> Hn[B, T, D]" in lines
    assert "ReduceScatter_{Y,T}(Att[B, T, D]{U_Y}) -> Att[B, T_Y, D]" in lines
    assert "ReduceScatter_{Y,T}(Out[B, T, D]{U_Y}) -> Out[B, T_Y, D]" in lines
    layer = [p for i, p in a.forward_plans.items() if not a.model.statements[i].once]
    ops = [s.op for p in layer for s in p.steps]
    assert ops.count(Op.ALL_GATHER) == 2 and ops.count(Op.REDUCE_SCATTER) == 2
    assert Op.ALL_REDUCE not in ops  # the TP layer's two AllReduces are gone
    tp = [
        s.op for i, p in _layer(None).forward_plans.items() if not a.model.statements[i].once for s in p.steps
    ]
    assert tp.count(Op.ALL_REDUCE) == 2 and Op.REDUCE_SCATTER not in tp


def test_the_norm_regions_take_an_eighth_of_the_activation_memory():
    tp, sp = _activations(_layer(None)), _activations(_layer("Y"))
    residual = ("In", "Att", "Hn", "Xf")  # the norms' and residual adds' operands: [B, T, D]
    for name in residual:
        assert sp[name] * 8 == tp[name] == 1 * 4096 * 4096 * 2
    for name in ("Q", "Kp", "Vp", "A", "Gt", "U", "M"):  # inside the tensor-parallel regions: as TP
        assert sp[name] == tp[name]
    assert sp["Logits"] * 8 == tp["Logits"]  # the head's input is sharded over the sequence too


def test_megatron_sp_is_refused_without_a_tensor_parallel_axis_or_a_sequence_dim():
    with pytest.raises(UsageError, match="X shards no parameter"):
        shard(expand("llama-3-8b"), TP, TP, sequence="X")
    with pytest.raises(UsageError, match="declares none"):
        shard(expand("llama-3-8b", "decode"), TP, TP, sequence="Y")
    with pytest.raises(UsageError, match="already shard T over Y"):
        shard(expand("llama-3-8b"), TP, "T=Y", sequence="Y")


def test_model_show_lays_it_out():
    done = subprocess.run(
        [sys.executable, "-m", "shardalg", "model", "show", "llama-3-8b", "--params", TP, "--activations", TP]
        + ["--megatron-sp", "Y"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert done.returncode == 0, done.stderr
    assert "ReduceScatter_{Y,T}(Out[B, T, D]{U_Y}) -> Out[B, T_Y, D]" in done.stdout


MLP = """params W_in, W_out
tokens B, T
Hn[B, T, D] * W_in[D, F] -> U[B, T, F]
M[B, T, F] * W_out[F, D] -> Out[B, T, D]"""


def test_the_search_names_megatron_sp_and_it_saves_activation_memory_over_tp():
    # gathering again in the backward, as Megatron does: keeping the gathered activations (the search's other
    # choice) holds the whole sequence from the forward to the backward, and would undo the saving
    r = search(
        MLP, mesh="X=4", sizes="B=2,T=1024,D=1024,F=4096", hw="h100", mode="train", keep_gathered=False
    )
    meg, tp = r.best["Megatron-SP"], r.best["TP"]
    assert (
        meg.assignment.megatron == ("X",) and meg.assignment.params_text == tp.assignment.params_text == "F=X"
    )
    assert "ReduceScatter_{X,T}" in text(meg.program) and "AllReduce" not in text(meg.program)
    assert meg.parts["activations"] < tp.parts["activations"]
    assert meg.to_json()["megatron_sp"] == "X" and tp.to_json()["megatron_sp"] is None


def test_with_the_norms_written_they_run_on_an_eighth_of_the_sequence():
    def layer(sequence):
        program = shard(expand("llama-3-8b", functions=True), TP, TP, sequence=sequence)
        return analyze(model_program(program, "Y=8", SIZES), "train")

    sp, tp = layer("Y"), layer(None)
    lines = [text(s) for s in sp.model.program.statements]
    assert "rmsnorm_D(In[B, T_Y, D]) -> Har[B, T_Y, D]" in lines
    assert "Har[B, T_Y, D] .* g_attn[D] -> Ha[B, T_Y, D]" in lines
    assert "In[B, T_Y, D] + Att[B, T_Y, D] -> Rs[B, T_Y, D]" in lines
    assert "AllGather_Y(Ha[B, T_Y, D]) -> Ha[B, T, D]" in lines
    kept_sp, kept_tp = _activations(sp), _activations(tp)
    for name in ("In", "Rs", "Ha", "Hn"):  # the norms' inputs and outputs
        assert kept_sp[name] * 8 == kept_tp[name]
    stats = "rmsnorm_D statistics (1 fp32 a row) of Hnr"
    assert kept_sp[stats] * 8 == kept_tp[stats]


def test_a_region_partly_outside_tensor_parallelism_reads_the_gathered_copy():
    """TP over the query groups alone (G): W_q is sharded, W_k and W_v are not. In is gathered once before
    the query projection, and the key and value projections read that whole copy (before the fix they read
    In[B, T_Y, D] after the program had made it whole, and the search crashed with a shape mismatch)."""
    program = shard(expand("llama-3-8b", functions=False), "G=Y", "G=Y", sequence="Y")
    lines = [text(s) for s in program.statements]
    assert lines.count("AllGather_Y(In[B, T_Y, D]) -> In[B, T, D]") == 1
    assert "In[B, T, D] * W_k[D, K, H] -> Kp[B, T_Y, K, H]" in lines
    a = analyze(model_program(program, "Y=4", SIZES), "train")
    assert model_memory(a, "h100").total > 0
    found = search(expand("llama-3-8b", functions=False), "Y=4", {"B": 8, "T": 1024}, "tpu-v5p", top=1)
    assert found.winner is not None


def test_a_residual_add_after_the_gather_reads_the_gathered_copy():
    """The layer's input feeds its first product directly and the residual add after it: Megatron SP gathers
    In before the product, and the add reads that whole copy, its plan slicing it back for free (it read
    In[B, T_XY, D] after the program had made it whole, and the search of this program failed
    with a shape mismatch; found by the search's brute-force oracle)."""
    prog = (
        "params W1, W2\ntokens B, T\nIn[B, T, D] * W1[D, F] -> H[B, T, F]\nH[B, T, F] * W2[F, D] -> Out[B, T, D]\n"
        "In[B, T, D] + Out[B, T, D] -> Y[B, T, D]"
    )
    program = shard(prog, "F=XY", "F=XY", sequence="XY")
    lines = [text(s) for s in program.statements]
    assert lines[0] == "AllGather_XY(In[B, T_XY, D]) -> In[B, T, D]"
    assert lines[-1] == "In[B, T, D] + Out[B, T_XY, D] -> Y[B, T_XY, D]"
    sizes = {"B": 16, "T": 256, "D": 256, "F": 1024}
    a = analyze(model_program(program, "X=2,Y=2", sizes), "train")
    assert a.backward is not None and model_memory(a, "tpu-v5e").total > 0


@pytest.mark.parametrize("given", ["YY", "Y+Y", ("Y", "Y")])
def test_an_axis_named_twice_in_the_megatron_sp_axes_is_refused(capsys, given):
    """As ``--params D=XX`` is: ``--megatron-sp YY`` would shard the sequence ``T_YY``, an illegal tensor (it
    was accepted silently and wrote ``AllGather_YY(Ha[B, T_YY, D])``)."""
    with pytest.raises(UsageError, match="names Y twice") as refused:
        shard(expand("llama-3-8b"), TP, TP, sequence=given)
    assert refused.value.fix is not None and "--megatron-sp Y)" in refused.value.fix
    if isinstance(given, str):
        code = main(
            ["model", "show", "llama-3-8b", "--params", TP, "--activations", TP, "--megatron-sp", given]
        )
        out, err = capsys.readouterr()
        assert code == 2 and out == "", out
        assert f"--megatron-sp {given} names Y twice" in err.splitlines()[0] and "[usage]" in err
        assert "fix: name each axis once (--megatron-sp Y)" in err and "Traceback" not in err


@pytest.mark.parametrize("given", ["", " ", "Y,Z", "1", "Y+", "Y Z"])
def test_empty_or_malformed_megatron_sp_axes_are_refused(capsys, given):
    """An empty value was ignored silently; ``Y,Z`` and ``1`` were taken for one axis named ``Y,Z`` or ``1``."""
    with pytest.raises(UsageError, match="--megatron-sp"):
        shard(expand("llama-3-8b"), TP, TP, sequence=given)
    code = main(["model", "show", "llama-3-8b", "--params", TP, "--activations", TP, "--megatron-sp", given])
    out, err = capsys.readouterr()
    assert code == 2 and out == "", out
    assert "--megatron-sp" in err and "axis names" in err and "Traceback" not in err


def test_megatron_sp_over_an_axis_outside_the_mesh_is_refused():
    with pytest.raises(UsageError, match="Z shards no parameter"):
        shard(MLP, "F=Y", "F=Y", mesh="Y=4", sequence="Z")


def test_multi_letter_megatron_sp_axes_are_written_as_the_search_names_them():
    """``data+model``, as the search's ``megatron_sp`` writes multi-letter axes (it was taken for one axis)."""
    program = shard(MLP, "F=data+model", "F=data+model", sequence="data+model")
    lines = [text(s) for s in program.statements]
    assert lines[0] == "AllGather_{data,model}(Hn[B, T_{data,model}, D]) -> Hn[B, T, D]"
    assert (
        lines[-1] == "ReduceScatter_{data,model,T}(Out[B, T, D]{U_{data,model}}) -> Out[B, T_{data,model}, D]"
    )
