"""The degrees search's memory floor (shardalg.search.degreefloor): on every map of a small case it is the
written program's parameter bytes (over the stages), never above what the candidate's memory is priced at;
and the search pruned by it ranks the same candidates, winner first, as the search that writes every map."""

from __future__ import annotations

import json
import shlex

import pytest

from shardalg.cli import main
from shardalg.costs.topology import slice_topology
from shardalg.errors import IllegalSharding, UsageError
from shardalg.models.expand import shard
from shardalg.models.program import model_program
from shardalg.models.unplanned import param_bytes
from shardalg.notation.parse import parse
from shardalg.planning.symbolic import strict
from shardalg.search import degrees
from shardalg.search.degreefloor import Floor
from shardalg.search.degrees import PIPE, degree_points, search_degrees

from .test_degrees import FITS, MLP, MOE, ODD

MOE_SIZES = "B=16,T=512,D=1024,F=2048,E=8,L=2"
ROUTED = """params W_r, W_in, W_out
tokens B, T
layers L
Hn[B, T, D] * W_r[D, E] -> R[B, T, E]
dispatch_{C,k=2,cf=1.25}(Hn[B, T, D], R[B, T, E]) -> Xd[E, C, D]
Xd[E, C, D] * W_in[E, D, F] -> U[E, C, F]
U[E, C, F] * W_out[E, F, D] -> Out[E, C, D]
combine_{C,k=2,cf=1.25}(Out[E, C, D], R[B, T, E]) -> Mo[B, T, D]
"""  # a routed layer without the gate: fewer statements to price


@pytest.mark.parametrize(
    ("program", "where", "sizes"),
    [(MLP, "v5e-8", FITS), (MOE, "v5e-4", MOE_SIZES)],
)
def test_the_floor_is_the_written_programs_parameter_bytes_on_every_map(
    program: str, where: str, sizes: str
) -> None:
    base = parse(program)
    topo = slice_topology(where)
    known = dict(model_program(base, topo.layout(None).mesh, sizes).sizes)
    checked = 0
    for deg, _ in degree_points(topo, known["L"]):
        mesh, _, _, maps = degrees._inner(base, topo, deg, known, {})
        stages = int(mesh.size(PIPE)) if deg.pipeline else 1
        floor = Floor(base, mesh, sizes, None, stages)
        for a in maps:
            try:
                sharded = shard(base, a.param_map, a.activation_map, mesh=mesh, sequence=a.megatron)
            except IllegalSharding:
                continue
            written = float(param_bytes(model_program(sharded, mesh, sizes), "train")) / stages
            assert floor.bytes(a) == written, (deg.mesh_text, str(a))
            checked += 1
    assert checked > 80


def _table(r: degrees.DegreesResult) -> list[tuple[str, float | None, float, int | None]]:
    return [(c.text(), c.seconds, c.bytes, c.microbatches) for c in r.ranked]


@pytest.mark.parametrize(
    ("sizes", "cap"),
    [(FITS, "2GB"), (ODD, "8GB")],  # the first prunes maps of every point; the second all without a pipeline
)
def test_the_pruned_search_ranks_what_the_unpruned_one_does(
    sizes: str, cap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with strict():
        pruned = search_degrees(MLP, "v5e-8", sizes, memory=cap)
    with monkeypatch.context() as m:
        m.setattr(degrees, "_prune", lambda base, deg, inner, *rest: inner)  # every map written and priced
        with strict():
            whole = search_degrees(MLP, "v5e-8", sizes, memory=cap)
    assert pruned.floored.count > 0 and whole.floored.count == 0
    assert pruned.winner is not None and _table(pruned) == _table(whole)
    # what the floor pruned is what the unpruned search refused before any plan (or dropped as illegal or
    # the same program as another): the rest of its refusals are the pruned search's
    before = [c for c in whole.refused if "before any plan" in c.refused]
    assert before and [c.text() for c in whole.refused if c not in before] == [
        c.text() for c in pruned.refused
    ]
    assert pruned.floored.count >= len(before)
    assert pruned.floored.least is not None
    assert pruned.floored.least.bytes == min(c.bytes for c in before)
    assert float(cap[:-2]) * 1e9 < pruned.floored.least.bytes


def test_the_pruned_count_is_said_in_text_json_and_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["search", MLP, "--slice", "v5e-8", "--choose-degrees", "--sizes", ODD, "--memory", "8GB"]
    assert main([*args, "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "6 of 10 maps pruned by the memory floor" in out
    assert "note: floor: 6 of 10 dimension maps pruned before any program is written" in out
    assert "shardalg: note: floor: 6 of 10 dimension maps pruned" in err
    assert "12.9 GB > 8 GB: pruned by the memory floor, no program written" in out
    assert main([*args, "--quiet", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["floor"]
    assert (got["maps"], got["pruned"]) == (10, 6)
    # replicated: two weights of D x F over 8 layers, 2 + 2 + 8 bytes each (bf16 params and grads, Adam's fp32)
    assert got["least"]["bytes"] == 2 * 4095 * 16383 * 8 * (2 + 2 + 8) and not got["least"]["fits"]


def test_the_limit_counts_the_maps_the_floor_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(degrees, "MAX_MAPS", 60)
    with strict():
        assert search_degrees(MLP, "v5e-8", FITS, memory="2GB").floored.count == 34  # 54 left: priced
    with pytest.raises(UsageError, match=r"88 dimension maps .* over the limit of 60"):
        search_degrees(MLP, "v5e-8", FITS)  # nothing pruned at 16 GB


def test_a_routed_layer_chooses_ep_under_a_cap_and_its_winner_is_what_step_and_memory_report(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's MoE must-show at a CI-sized scale: expert parallelism chosen among the degrees with maps
    pruned by the floor, its step and memory those `shardalg step` and `shardalg memory` print (the Mixtral
    preset on v5e-64 takes ~40 s of CPU: `python -m bench strategy --moe`)."""
    path = tmp_path / "winner.sa"
    sizes = "B=16,T=512,D=1024,F=8192,E=8,L=1"  # the experts' state 0.4 GB a chip at 4 ways, 0.805 GB at 2
    args = ["search", ROUTED, "--slice", "v5e-4", "--choose-degrees", "--sizes", sizes, "--memory", "0.8GB"]
    assert main([*args, "--json", "--explain", "--quiet", "--emit-program", str(path)]) == 0
    got = json.loads(capsys.readouterr().out)
    w = got["winner"]
    assert w["strategy"] == "EP" and w["activations"] in ("B=XY,E=XY", "B=X,E=X") and w["pipeline"] is None
    assert got["floor"]["pruned"] > 0 and got["floor"]["least"]["bytes"] > 0.8e9
    rows = got["best_per_strategy"]
    assert rows and all(r["against_winner"] >= 1 for r in rows if r["fits"])
    assert any(not r["fits"] for r in rows)  # a strategy none of whose maps fits, by its least memory
    step_cmd, memory_cmd = (shlex.split(c)[1:] for c in got["commands"])
    assert main([step_cmd[0], str(path), *step_cmd[2:], "--json"]) == 0
    step = json.loads(capsys.readouterr().out)
    assert main([memory_cmd[0], str(path), *memory_cmd[2:], "--json"]) == 0
    mem = json.loads(capsys.readouterr().out)
    assert step["step"]["seconds"] == pytest.approx(w["seconds"], rel=1e-9)
    assert mem["bytes_per_device"]["total"] == pytest.approx(w["bytes"], rel=1e-9)
