"""``--hw h100 --mesh X=64``: the flat mesh is priced as its node split (``X=64:node8``) and the CLI says so,
on stderr and in ``--json``'s notes (:func:`shardalg.cli.hwmesh.chip_and_mesh`)."""

from __future__ import annotations

import json

import pytest

from shardalg.cli import main

GATHER = "AllGather_X(A[I_X, J])"
SIZES = "I=4096,J=4096"
NOTE = (
    "mesh: X=64 spans 8 h100 nodes of 8 GPUs; priced as X=64:node8 (the last axis innermost); "
    "write :nodeN to place it yourself"
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _cost(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[str, str]:
    code, out, err = run(capsys, "cost", GATHER, "--sizes", SIZES, *extra)
    assert code == 0
    return out, err


def test_a_flat_gpu_mesh_is_priced_as_its_node_split_and_said(capsys) -> None:
    flat, err = _cost(capsys, "--mesh", "X=64", "--hw", "h100")
    split, split_err = _cost(capsys, "--mesh", "X=64:node8", "--hw", "h100")
    assert "seconds: 0.0001014" in flat and "seconds: 0.0001014" in split
    assert f"shardalg: note: {NOTE}" in err.splitlines()
    assert "note" not in split_err


def test_the_json_carries_the_note(capsys) -> None:
    out, err = _cost(capsys, "--mesh", "X=64", "--hw", "h100", "--json")
    data = json.loads(out)
    assert data["notes"] == [NOTE]
    assert data["seconds"] == pytest.approx(1.014e-4, rel=1e-3)
    assert f"shardalg: note: {NOTE}" in err.splitlines()


def test_only_a_flat_gpu_mesh_beyond_one_node_is_placed(capsys) -> None:
    """One node, a TPU, a slice (which places itself): unchanged and no note; beyond a node: placed."""
    out, err = _cost(capsys, "--mesh", "X=64", "--hw", "h100", "--json")
    assert json.loads(out)["notes"] == [NOTE]
    for argv in (
        ("--mesh", "X=8", "--hw", "h100", "--json"),
        ("--mesh", "X=64", "--hw", "tpu-v5p", "--json"),
        ("--slice", "h100-1024", "--mesh", "X=gpu*node*su", "--json"),
    ):
        out, err = _cost(capsys, *argv)
        assert json.loads(out)["notes"] == [] and "mesh:" not in err, argv


def test_sizes_that_do_not_tile_the_node_are_refused(capsys) -> None:
    code, out, err = run(capsys, "cost", GATHER, "--sizes", SIZES, "--mesh", "X=4,Y=3", "--hw", "h100")
    assert code != 0 and out == ""
    assert "does not tile h100 nodes of 8 GPUs: axis Y=3" in err and ":nodeN" in err


def test_a_chip_with_a_node_set_by_text_places_the_mesh(capsys) -> None:
    _, err = _cost(capsys, "--mesh", "X=64", "--hw", "base=h100,node=4")
    assert "spans 16 h100* nodes of 4 GPUs; priced as X=64:node4" in err


def test_plan_says_the_placement(capsys) -> None:
    code, out, err = run(capsys, "plan", GATHER, "--sizes", SIZES, "--mesh", "X=64", "--hw", "h100")
    assert code == 0 and "101 us on h100" in out
    assert f"shardalg: note: {NOTE}" in err.splitlines()


def test_hw_show_lists_the_node(capsys) -> None:
    code, out, _ = run(capsys, "hw", "show", "h100")
    assert code == 0 and "node   = 8" in out
    code, out, _ = run(capsys, "hw", "show", "h100", "--json")
    assert json.loads(out)["node"]["value"] == 8
