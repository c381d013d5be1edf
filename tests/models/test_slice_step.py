"""``shardalg step --slice``: LLaMA-3 70B with FSDP and tensor parallelism on the v5p pod (the book's chapter 6
setting), its communication per layer from bandwidth and its latency from the hops of each torus axis."""

from __future__ import annotations

import json

import pytest

from shardalg.cli import main
from shardalg.models.expand import expand, shard
from shardalg.notation.printing import render


@pytest.fixture(scope="module")
def llama70b() -> str:
    # FSDP over X (D of the weights, the batch), tensor parallelism over Y (F), the batch also over Z: the pod's
    # y side (20) divides no LLaMA-3 dim, so it carries data parallelism only; a product of whole torus axes
    # cannot give the book's 4-way TP (that needs a factor of one axis: sub-axes)
    return render(shard(expand("llama-3-70b"), "D=X,F=Y", "B=XZ,F=Y"), "text")


def _step(capsys, program: str, *argv: str) -> dict:
    assert main(["step", program, *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_llama_3_70b_on_v5p_8960_communicates_per_layer_from_bandwidth(capsys, llama70b):
    data = _step(capsys, llama70b, "--slice", "v5p-8960", "--mesh", "X=x,Y=z,Z=y", "--sizes", "B=960,T=4096")
    assert data["chip"] == "tpu-v5p"
    assert {"key": "chip", "value": "tpu-v5p (the slice's)"} in data["defaults"]
    s = data["slice"]
    assert [(a["name"], a["size"], a["wraps"]) for a in s["axes"]] == [
        ("x", 16, True),
        ("y", 20, True),
        ("z", 28, True),
    ]
    layer = next(p for p in s["comms"] if p["part"] == "layer")
    assert {tuple(c["axes"]) for c in layer["axes"]} == {("X",), ("Y",), ("Z",)}
    for c in layer["axes"]:
        assert all(h <= 16 for h in c["hops"].values())  # latency per torus axis: at most 16 hops
        per_collective = c["latency"] / c["collectives"]
        assert per_collective <= 2 * 16 * 1e-6 + 1e-12  # T_min = 1 us per hop, two phases for an AllReduce
        assert c["bandwidth"] > c["latency"]  # communication from bandwidth, not from a flat axis's hops
    # under steady each phase takes its busiest lane: the forward's is Y (Megatron's AllReduces), the backward's X
    # (the weights gathered again, their gradients reduce-scattered), so the layer's communication is more than
    # the busiest axis's over the step and less than every axis's
    layer_part = next(p for p in data["parts"] if p["part"] == "layer")
    busiest = max(c["bandwidth"] for c in layer["axes"])
    every = sum(c["bandwidth"] + c["latency"] for c in layer["axes"])
    assert busiest < layer_part["comms"]["seconds"] < every


def test_the_text_output_names_each_axis_hops_and_its_sources_on_request(capsys, llama70b):
    assert (
        main(["step", llama70b, "--slice", "v5p-8960", "--mesh", "X=x,Y=z,Z=y", "--sizes", "B=960,T=4096"])
        == 0
    )
    out = capsys.readouterr().out
    assert "slice        v5p-8960: 8960 chips of tpu-v5p; X = x (16 chips, 1 link, hops x 8 = 8)" in out
    assert "layer comms  Y: " in out and "(hops per collective: z 14)" in out
    assert "Cloud calls this slice v5p-17920" in out


def test_a_product_axis_of_a_slice_has_the_hops_of_its_sides(capsys, llama70b):
    # the book's batch (1024 sequences of 4096) on a 16x16x16 v5p slice: FSDP over x*y (256 chips, 2 links)
    program = render(shard(expand("llama-3-70b"), "D=X,F=Y", "B=X,F=Y"), "text")
    data = _step(capsys, program, "--slice", "v5p-4096", "--mesh", "X=x*y,Y=z", "--sizes", "B=1024,T=4096")
    x = next(a for a in data["slice"]["mesh"] if a["name"] == "X")
    assert (x["size"], x["links"], x["hops"]) == (256, 2, {"x": 8, "y": 8})
    layer = next(p for p in data["slice"]["comms"] if p["part"] == "layer")
    over_x = next(c for c in layer["axes"] if c["axes"] == ["X"])
    assert over_x["hops"] == {"x": 8, "y": 8}
    assert over_x["latency"] <= over_x["collectives"] * 2 * 16e-6 + 1e-12  # 16 hops, not 128 on a flat ring


def test_a_chip_of_another_product_is_refused(capsys, llama70b):
    assert main(["step", llama70b, "--slice", "v5p-8960", "--hw", "tpu-v5e", "--sizes", "B=960,T=4096"]) == 2
    assert "the slice v5p-8960 is made of tpu-v5p chips, not tpu-v5e" in capsys.readouterr().err


def test_memory_takes_the_slice_too(capsys):
    program = render(shard(expand("llama-3-8b"), "D=X", "B=X"), "text")
    assert main(["memory", program, "--slice", "v5e-256", "--mesh", "X=x*y", "--sizes", "B=256,T=4096"]) == 0
    out = capsys.readouterr().out
    assert "note: slice: v5e-256: X = x*y (256 chips, 2 links, hops x 8 + y 8 = 16)" in out
    assert "note: chip: tpu-v5e (the slice's)" in out


def test_search_takes_the_slice_and_its_chip(capsys):
    program = "params W_in, W_out; In[B, D] * W_in[D, F] -> Tmp[B, F]; Tmp[B, F] * W_out[F, D] -> Out[B, D]"
    argv = ["search", program, "--slice", "v5e-16", "--mesh", "X=x,Y=y", "--sizes", "B=256,D=1024,F=4096"]
    assert main([*argv, "--top", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert (
        "note: slice: v5e-16: X = x (4 chips, 1 link, hops x 3 = 3); Y = y (4 chips, 1 link, hops y 3 = 3)"
        in out
    )
    assert "note: chip: tpu-v5e (the slice's)" in out
    assert main([*argv, "--json", "--quiet"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(a["name"], a["wraps"]) for a in data["slice"]["axes"]] == [("x", False), ("y", False)]


def test_cost_takes_the_slice_and_counts_hops_per_torus_axis(capsys):
    expr = "AllGather_X(W[D_X, F]) -> W[D, F]"
    assert main(["cost", expr, "--slice", "v5p-8960", "--mesh", "X=x*y,Y=z", "--sizes", "D=8960,F=8192"]) == 0
    out, err = capsys.readouterr()
    assert "comms Max(18*T_min, 73400320/W_ici)" in out  # 16/2 + 20/2 hops, not 320/2
    assert "shardalg: note: chip: tpu-v5p (the slice's)" in err
    assert main(["cost", expr, "--mesh", "X=320*2", "--sizes", "D=8960,F=8192", "--hw", "tpu-v5p"]) == 0
    assert "comms Max(160*T_min, 73400320/W_ici)" in capsys.readouterr().out  # a flat axis of 320 chips
