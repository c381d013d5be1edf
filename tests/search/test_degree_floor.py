"""The degrees search's memory floor (shardalg.search.degreefloor): on every map of a small case it is the
written program's parameter bytes (over the stages), never above what the candidate's memory is priced at;
and the search pruned by it ranks the same candidates, winner first, as the search that writes every map."""

from __future__ import annotations

import json

import pytest

from shardalg.cli import main
from shardalg.costs.topology import slice_topology
from shardalg.errors import IllegalSharding, UsageError
from shardalg.models.expand import shard
from shardalg.models.memory import param_bytes
from shardalg.models.program import model_program
from shardalg.notation.parse import parse
from shardalg.planning.symbolic import strict
from shardalg.search import degrees
from shardalg.search.degreefloor import Floor
from shardalg.search.degrees import PIPE, degree_points, search_degrees

from .test_degrees import FITS, MLP, MOE, ODD

MOE_SIZES = "B=16,T=512,D=1024,F=2048,E=8,L=2"


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
    args = ["search", MLP, "--slice", "v5e-8", "--choose-degrees", "--sizes", FITS, "--memory", "2GB"]
    assert main([*args, "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "34 of 88 maps pruned by the memory floor" in out
    assert "note: floor: 34 of 88 dimension maps pruned before any program is written" in out
    assert "shardalg: note: floor: 34 of 88 dimension maps pruned" in err
    assert "3.22 GB > 2 GB: pruned by the memory floor, no program written" in out
    assert main([*args, "--quiet", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["floor"]
    assert (got["maps"], got["pruned"]) == (88, 34)
    assert got["least"]["bytes"] == pytest.approx(3.22e9, rel=1e-3) and not got["least"]["fits"]


def test_the_limit_counts_the_maps_the_floor_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(degrees, "MAX_MAPS", 60)
    with strict():
        assert search_degrees(MLP, "v5e-8", FITS, memory="2GB").floored.count == 34  # 54 left: priced
    with pytest.raises(UsageError, match=r"88 dimension maps .* over the limit of 60"):
        search_degrees(MLP, "v5e-8", FITS)  # nothing pruned at 16 GB
