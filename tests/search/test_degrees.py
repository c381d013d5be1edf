"""The whole-model search over a slice's degrees (shardalg.search.degrees): no pipeline where the model fits
and the bubble costs more than the stages save; a pipeline of 4 stages where the model does not fit without
one; the winner's step and memory equal to what `shardalg step` and `shardalg memory` print for it."""

from __future__ import annotations

import json
import shlex

import pytest

from shardalg.cli import main
from shardalg.costs.topology import slice_topology
from shardalg.errors import UsageError
from shardalg.notation.parse import parse
from shardalg.planning.symbolic import strict
from shardalg.search import degrees
from shardalg.search.degrees import degree_points, search_degrees
from shardalg.search.degreestext import bubble_against
from shardalg.search.space import space_of

MLP = """params W1, W2; tokens B; layers L
In[B, D] * W1[D, F] -> H[B, F]
H[B, F] * W2[F, D] -> Out[B, D]
"""
FITS = "B=512,D=4096,F=16384,L=8"  # shardable dims: FSDP/TP fit a v5e's 16 GB without a pipeline
ODD = "B=512,D=4095,F=16383,L=8"  # odd dims: no axis shards a weight, only a pipeline splits them


def _search(sizes: str, memory: str | None = None, overlap: str | None = None):
    with strict():
        return search_degrees(MLP, "v5e-8", sizes, memory=memory, overlap=overlap)


# compute and collectives added (serial): a pipeline's smaller stage mesh saves communication
# 4 layers: the stages save less than their bubble costs (at L=8 they save more: TP over all eight chips, x*y,
# two lines of 2 and 4, is priced at what each chip receives over its links, 7/8 of V over 1.5·W_ici)
SAVES_LESS = "B=32,D=8192,F=32768,L=4"  # 16 sequences a chip: m <= 16
SAVES_MORE = "B=64,D=8192,F=32768,L=8"  # 32 a chip: m = 32, a bubble of 3/35


def test_no_pipeline_where_the_model_fits_and_the_bubble_costs_more_than_it_saves() -> None:
    r = _search(SAVES_LESS, overlap="serial")
    assert r.winner is not None and r.winner.pipeline is None
    b = bubble_against(r)
    pipe, flat = r.best_pipeline(), r.best_without_pipeline()
    assert b is not None and pipe is not None and flat is not None
    # the pipeline's step is its m ticks and its bubble: it loses exactly by its bubble less what it saves
    assert pipe.seconds == pytest.approx(flat.seconds - b["saved_seconds"] + b["bubble_seconds"], rel=1e-12)
    assert 0 < b["saved_seconds"] < b["bubble_seconds"] and not b["pipeline_wins"]
    assert pipe.seconds > flat.seconds
    assert "no pipeline wins" in r.text(explain=True)


def test_a_pipeline_where_it_saves_more_than_its_bubble() -> None:
    r = _search(SAVES_MORE, overlap="serial")
    assert r.winner is not None and r.winner.pipeline is not None
    assert (r.winner.stages, r.winner.microbatches) == (4, 32)
    b = bubble_against(r)
    assert b is not None and b["saved_seconds"] > b["bubble_seconds"] > 0 and b["pipeline_wins"]


def test_no_pipeline_where_tp_overlaps_its_collectives() -> None:
    r = _search(FITS)  # steady: the collectives hide under compute, the stages save nothing
    assert r.winner is not None and r.winner.pipeline is None
    b = bubble_against(r)
    assert b is not None and b["saved_seconds"] < 0 < b["bubble_seconds"]


def test_a_pipeline_of_four_stages_where_the_model_does_not_fit_without_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = [
        "search",
        MLP,
        "--slice",
        "v5e-8",
        "--choose-degrees",
        "--sizes",
        ODD,
        "--memory",
        "8GB",
        "--explain",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "winner      P=y,X=x (pipeline 4 stages x 32 microbatches)" in out
    assert "bubble       (p - 1)/(m + p - 1) = 3/35 = 8.6%" in out
    for s in range(4):
        assert f"  stage {s}      " in out
    assert "nothing fits the cap without a pipeline" in out
    r = _search(ODD, "8GB")
    assert r.best_without_pipeline() is None
    # every map without a pipeline is pruned by the memory floor (its parameters alone pass 8 GB): none written
    assert not [c for c in r.refused if c.pipeline is None] and r.floored.least is not None
    assert "pruned by the memory floor" in r.floored.least.refused
    assert max(s.total for s in r.winner.pipeline.memory) <= 8e9 < r.floored.least.bytes


@pytest.mark.parametrize(
    ("program", "where", "sizes", "extra"),
    [
        (MLP, "v5e-8", FITS, []),
        (MLP, "v5e-8", ODD, ["--memory", "8GB"]),
        (MLP, "v5e-8", ODD, ["--memory", "8GB", "--optimizer", "sgd"]),  # each stage without Adam's state
        ("llama-3-70b", "v5p-8960", "B=1280,T=4096", ["--remat", "block"]),  # the must-show, ~7 s CPU
        # the program's own mesh line and sizes, B replaced by --sizes: the file held the stale mesh X=4 and
        # B=1024, and its commands (no --sizes B: the program binds B) priced B=1024, not the search's 512
        ("mesh X=4\n" + MLP + "where B=1024, D=4096, F=16384, L=8", "v5e-8", "B=512", []),
    ],
)
def test_the_winner_is_what_step_and_memory_report(
    program: str, where: str, sizes: str, extra: list[str], tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "winner.sa"
    args = ["search", program, "--slice", where, "--choose-degrees", "--sizes", sizes, "--json", *extra]
    args += ["--emit-program", str(path)]
    assert main(args) == 0
    got = json.loads(capsys.readouterr().out)
    w = got["winner"]
    lines = path.read_text().splitlines()
    assert not [x for x in lines if x.startswith("mesh")]  # the slice gives it
    own = [x for x in got["winner_program"].splitlines() if x.startswith(("mesh", "where"))]
    assert set(own) <= {x for x in lines if x.startswith("where")}  # the sizes searched, where it has any
    step_cmd, memory_cmd = (shlex.split(c)[1:] for c in got["commands"])
    assert step_cmd[1] == "FILE.sa" and memory_cmd[1] == "FILE.sa"
    assert main([step_cmd[0], str(path), *step_cmd[2:], "--json"]) == 0
    step = json.loads(capsys.readouterr().out)
    assert main([memory_cmd[0], str(path), *memory_cmd[2:], "--json"]) == 0
    mem = json.loads(capsys.readouterr().out)
    if w["pipeline"] is None:
        assert step["step"]["seconds"] == pytest.approx(w["seconds"], rel=1e-9)
        assert mem["bytes_per_device"]["total"] == pytest.approx(w["bytes"], rel=1e-9)
    else:
        assert step["pipeline"]["seconds"] == pytest.approx(w["seconds"], rel=1e-9)
        worst = max(s["total"] for s in mem["pipeline"]["memory_per_stage"])
        assert worst == pytest.approx(w["bytes"], rel=1e-9)
        assert len(mem["pipeline"]["memory_per_stage"]) == w["stages"]


def test_degree_points_of_the_v5p_pod() -> None:
    topo = slice_topology("v5p-8960")
    pts = degree_points(topo, 80)
    # a pipeline over one torus side whose chips divide the 80 layers: x (16) or y (20), never z (28)
    assert {d.pipeline for d, _ in pts} == {(), ("x",), ("y",)}
    for d, micro in pts:
        mesh = topo.layout(d.factoring).mesh
        assert mesh.devices == 8960
        assert micro == (
            (16, 32, 64, 128) if d.pipeline == ("x",) else (20, 40, 80, 160) if d.pipeline else ()
        )
    assert len(pts) == 9  # 5 factorings of x, y, z; 2 of the two sides each pipeline leaves


def test_interchangeable_sides_are_one_point() -> None:
    pts = degree_points(slice_topology("v5p-8"), 8)  # 2x2x2: x, y, z alike
    assert [d.mesh_text for d, _ in pts] == [
        "X=x,Y=y,Z=z",
        "X=x*y,Y=z",
        "X=x,Y=y*z",
        "X=x*y*z",
        "P=x,X=y,Y=z",
        "P=x,X=y*z",
    ]


def test_refusals(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["search", MLP, "--choose-degrees", "--sizes", FITS]
    assert main(base) == 2
    assert "add --slice v5p-8960" in capsys.readouterr().err
    assert main([*base, "--slice", "v5e-8", "--mesh", "X=x*y"]) == 2
    assert "chooses the factoring" in capsys.readouterr().err
    assert main([*base, "--slice", "v5e-8", "--mode", "infer"]) == 2
    capsys.readouterr()
    monkeypatch.setattr(degrees, "MAX_POINTS", 4)
    with pytest.raises(UsageError, match="10 degree points on v5e-8 \\(over the limit of 4\\)"):
        _search(FITS)


def test_the_pods_over_dcn_pipeline_or_hold_data() -> None:
    topo = slice_topology("v5e-512")  # two 16x16 pods over DCN; 16 does not divide 8 layers
    pts = degree_points(topo, 8)
    assert [(d.mesh_text, m) for d, m in pts] == [
        ("R=pod,X=x,Y=y", ()),
        ("R=pod,X=x*y", ()),
        ("P=pod,X=x,Y=y", (2, 4, 8, 16)),
        ("P=pod,X=x*y", (2, 4, 8, 16)),
    ]
    mesh = topo.layout(pts[0][0].factoring).mesh
    assert mesh["R"].dcn and mesh["R"].size == 2 and not mesh["X"].dcn
    # the pods' axis holds data only (DP or FSDP over DCN); an ICI axis may also shard a dim for TP
    space = space_of(parse(MLP), mesh, {"B": 512, "D": 4096, "F": 16384})
    assert degrees._axis_choices(space, "R", 2, space.sizes) == (
        ((), ("B",)),
        (("D",), ("B",)),
        (("F",), ("B",)),
    )
    assert (("F",), ("F",)) in degrees._axis_choices(space, "X", 16, space.sizes)


MOE = """params W_r, W_gate, W_in, W_out
tokens B, T
layers L
Hn[B, T, D] * W_r[D, E] -> R[B, T, E]
dispatch_{C,k=2,cf=1.25}(Hn[B, T, D], R[B, T, E]) -> Xd[E, C, D]
Xd[E, C, D] * W_gate[E, D, F] -> Gt[E, C, F]
Xd[E, C, D] * W_in[E, D, F] -> U[E, C, F]
silu(Gt[E, C, F]) -> Sg[E, C, F]
Sg[E, C, F] .* U[E, C, F] -> M[E, C, F]
M[E, C, F] * W_out[E, F, D] -> Out[E, C, D]
combine_{C,k=2,cf=1.25}(Out[E, C, D], R[B, T, E]) -> Mo[B, T, D]
"""


def test_each_point_searches_sp_megatron_sp_and_ep() -> None:
    """The space inside a point is the ordinary search's: on a routed layer with a sequence dim, EP (the
    experts with the tokens' batch over an axis) wins; SP, Megatron TP with Megatron SP are priced too."""
    with strict():
        r = search_degrees(MOE, "v5e-4", "B=16,T=512,D=1024,F=2048,E=8,L=2")
    kinds = {c.strategy for c in r.ranked + r.refused}
    assert {"EP", "SP", "Megatron-SP", "DP+EP", "FSDP+SP"} <= kinds
    assert r.winner is not None and r.winner.strategy == "EP"
    assert r.winner.assignment.activations_text in ("B=XY,E=XY", "B=X,E=X")
    assert any(c.assignment.megatron for c in r.ranked)
    note = dict(r.notes)["space"]
    assert "(T: SP)" in note and "Megatron SP" in note and "the experts E with the batch B (EP)" in note
    assert "sequence parallelism, Megatron SP and experts are the inner search's" not in r.text()


def test_too_many_maps_are_refused_up_front(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(degrees, "MAX_MAPS", 10)
    with pytest.raises(
        UsageError,
        match=r"88 dimension maps over the 4 factorings of v5e-8 after the memory floor pruned 0 of 88, over the "
        r"limit of 10 \(MAX_MAPS\)",
    ):
        _search(FITS)
