"""Nothing silent, and nothing reported that is not a bug: a derivation says which plan it priced a statement
by (stderr and JSON), and a closed output pipe ends the command quietly with the shell's SIGPIPE code instead
of an "internal error"."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from shardalg.cli import EXIT_PIPE, main
from tests.shared import ROOT

NOT_MEETING = "A[I_X, J] · B[J_X, K] -> C[I_X, K]"
PRICED = "its operands do not meet; priced by its cheapest plan (3 found, by {by}): AllGather_X(B)"
BYTES, SECONDS = "bytes communicated", "seconds on tpu-v5p under overlap steady"
# sizes that decide the cheapest plan (with I, J, K symbolic it depends on them, and the command asks)
SIZES = ["--sizes", "I=4096,J=1024,K=1024"]
GATHER = "X[B, D] · AllGather_X(Y[D_X, F]) -> Z[B, F]"


@pytest.mark.parametrize(
    ("argv", "prefixes", "by"),
    [
        (["compare", NOT_MEETING, GATHER, "--mesh", "X=4", *SIZES], ["plan a: "], BYTES),
        (["compare", GATHER, NOT_MEETING, "--mesh", "X=4", *SIZES], ["plan b: "], BYTES),
        (["bound", NOT_MEETING, "--mesh", "X=4", "--hw", "tpu-v5p", *SIZES], [""], SECONDS),
    ],
)
def test_a_derivation_says_it_priced_a_statement_by_a_plan(capsys, argv, prefixes, by):
    assert main(argv) == 0
    _, err = capsys.readouterr()
    said = [f"{p}A[I_X, J] * B[J_X, K] -> C[I_X, K]: {PRICED.format(by=by)}" for p in prefixes]
    assert err == "".join(f"shardalg: note: {s}\n" for s in said)
    assert main([*argv, "--json"]) == 0
    out, _ = capsys.readouterr()
    assert json.loads(out)["notes"] == said


def test_a_derivation_of_a_statement_whose_plan_depends_on_sizes_asks_for_them(capsys):
    assert main(["compare", NOT_MEETING, GATHER, "--mesh", "X=4"]) == 2
    assert "depends on sizes not given (I, J, K)" in capsys.readouterr().err


def test_a_derivation_of_plans_as_written_has_no_notes(capsys):
    assert main(["compare", GATHER, GATHER, "--mesh", "X=4", "--json"]) == 0
    out, err = capsys.readouterr()
    assert (err, json.loads(out)["notes"]) == ("", [])


def test_a_closed_output_pipe_is_not_an_internal_error():
    child = subprocess.Popen(
        [sys.executable, "-m", "shardalg", "model", "show", "llama-3-70b", "--format", "json"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None
    child.stdout.close()  # the reader goes away before a byte is read (as `| head -0` would)
    _, err = child.communicate(timeout=120)
    # killed by SIGPIPE, as a shell pipeline's writer is (the shell reports 128 + 13 = 141); where the signal is
    # ignored, the BrokenPipeError path exits 141 itself
    assert (child.returncode, err.decode()) in ((-signal.SIGPIPE, ""), (EXIT_PIPE, ""))


# ---- a size or mesh the caller gives in place of the program's is said, never silently used -----------

ONE_DIM = "A[I_X, J] where I=10"
DP = "params W\nIn[B_X, D] * W[D, F] -> Out[B_X, F]"


def _notes(err: str) -> list[str]:
    return [
        line.removeprefix("shardalg: note: ")
        for line in err.splitlines()
        if line.startswith("shardalg: note: ")
    ]


def test_sizes_that_replace_the_programs_are_said_by_check(capsys):
    assert main(["check", ONE_DIM, "--mesh", "X=4", "--sizes", "I=8"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("legal")
    assert _notes(err) == ["--sizes I=8 replaces the program's I=10"]


def test_sizes_equal_to_the_programs_replace_nothing(capsys):
    assert main(["check", "A[I_X, J] where I=8", "--mesh", "X=4", "--sizes", "I=8"]) == 0
    assert capsys.readouterr().err == ""


def test_sizes_that_replace_the_programs_are_said_by_plan(capsys):
    assert main(["plan", "A[I_X, J] -> A[I, J] where I=16", "--mesh", "X=4", "--sizes", "I=8,J=4"]) == 0
    assert _notes(capsys.readouterr().err) == ["--sizes I=8 replaces the program's I=16"]


def test_a_mesh_that_replaces_the_programs_mesh_line_is_said_by_shape(capsys):
    assert main(["shape", "mesh X=4\nA[I_X, J] where I=16, J=2", "--mesh", "X=8"]) == 0
    out, err = capsys.readouterr()
    assert "X=8 (8 devices)" in out
    assert _notes(err) == ["--mesh X=8 replaces the program's mesh X=4"]


def test_sizes_that_replace_a_presets_are_said_by_memory_in_its_notes_and_json(capsys):
    argv = ["memory", "llama-3-8b", "--mesh", "X=1", "--sizes", "B=1,T=128,L=2,V=10"]
    said = ["--sizes L=2 replaces the program's L=32", "--sizes V=10 replaces the program's V=128256"]
    assert main(argv) == 0
    out, _ = capsys.readouterr()
    assert [f"note: sizes: {s}" for s in said] == [
        line for line in out.splitlines() if "note: sizes:" in line
    ]
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["value"] for d in data["defaults"] if d["key"] == "sizes"] == said


def test_a_mesh_axis_no_tensor_is_sharded_over_is_said_by_memory(capsys):
    assert main(["memory", DP, "--mesh", "X=8,Y=2", "--sizes", "B=8,D=4,F=4", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"key": "replicated", "value": REPLICATED_Y} in data["defaults"]
    assert main(["memory", DP, "--mesh", "X=8", "--sizes", "B=8,D=4,F=4", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d for d in data["defaults"] if d["key"] == "replicated"] == []


REPLICATED_Y = (
    "no tensor of the program is sharded over Y=2: every device holds the same copy over it (2 ways)"
)


def test_a_mesh_axis_no_tensor_is_sharded_over_is_said_by_step(capsys):
    argv = ["step", DP, "--mesh", "X=8,Y=2", "--sizes", "B=8,D=4,F=4", "--hw", "tpu-v5p"]
    assert main(argv) == 0
    assert f"note: replicated: {REPLICATED_Y}" in capsys.readouterr().out.splitlines()


def test_sizes_that_replace_the_programs_are_in_a_costs_notes(capsys):
    gather = "AllGather_X(A[I_X, J]) -> A[I, J] where I=16, J=4"
    argv = ["cost", gather, "--mesh", "X=4", "--sizes", "I=8", "--hw", "tpu-v5p"]
    assert main(argv) == 0
    assert _notes(capsys.readouterr().err) == ["--sizes I=8 replaces the program's I=16"]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == ["--sizes I=8 replaces the program's I=16"]


# a program with its own mesh line and sizes, for the searches and the strategy map
OWN = (
    "params W_in, W_out\nmesh X=4\nIn[B, D] * W_in[D, F] -> Tmp[B, F]\nTmp[B, F] * W_out[F, D] -> Out[B, D]\n"
)
OWN += "where B=128, D=1024, F=4096"
SEARCH_SAID = [
    ("mesh", "--mesh X=2,Y=2 replaces the program's mesh X=4"),
    ("sizes", "--sizes B=64 replaces the program's B=128"),
]


def test_sizes_and_a_mesh_that_replace_the_programs_are_in_a_searchs_notes_json_and_output(capsys):
    from shardalg.search.numeric import search

    r = search(OWN, mesh="X=2,Y=2", sizes="B=64", hw="tpu-v5e", mode="infer", top=1)
    assert r.notes[:2] == SEARCH_SAID
    assert r.to_json()["defaults"][:2] == [{"key": k, "value": v} for k, v in SEARCH_SAID]
    argv = ["search", OWN, "--mesh", "X=2,Y=2", "--sizes", "B=64", "--hw", "tpu-v5e", "--mode", "infer"]
    assert main([*argv, "--top", "1", "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [f"note: {k}: {v}" for k, v in SEARCH_SAID] == [line for line in out if "replaces" in line]
    assert main([*argv, "--top", "1", "--quiet", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["defaults"][:2] == [{"key": k, "value": v} for k, v in SEARCH_SAID]
    assert [f"note: {k}: {v}" for k, v in SEARCH_SAID] == [
        line for line in err.splitlines() if "replaces" in line
    ]
    assert main([*argv, "--per-statement", "--quiet"]) == 0  # prepare_search's notes: the chain search's too
    out = capsys.readouterr().out.splitlines()
    assert [f"note: {k}: {v}" for k, v in SEARCH_SAID] == [line for line in out if "replaces" in line]


def test_sizes_equal_to_the_programs_replace_nothing_in_a_search():
    from shardalg.search.numeric import search

    r = search(OWN, mesh="X=4", sizes="B=128", hw="tpu-v5e", mode="infer", top=1)
    assert not [v for _, v in r.notes if "replaces" in v]


DEGREES = (
    "params W1, W2; tokens B; layers L\nIn[B, D] * W1[D, F] -> H[B, F]\nH[B, F] * W2[F, D] -> Out[B, D]\n"
)


def test_sizes_and_a_mesh_that_replace_the_programs_are_in_a_degrees_searchs_notes(capsys):
    from shardalg.planning.symbolic import strict
    from shardalg.search.degrees import search_degrees

    program = "mesh X=8\n" + DEGREES + "where B=512, D=4096, F=16384, L=8"
    said = [
        ("mesh", "--slice v5e-8 replaces the program's mesh X=8"),
        ("sizes", "--sizes L=4 replaces the program's L=8"),
    ]
    with strict():
        r = search_degrees(program, "v5e-8", "L=4")
    assert [(k, v) for k, v in r.notes if "replaces" in v] == said
    argv = ["search", program, "--slice", "v5e-8", "--choose-degrees", "--sizes", "L=4", "--quiet"]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert [f"note: {k}: {v}" for k, v in said] == [line for line in out if "replaces" in line]
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d for d in data["defaults"] if "replaces" in d["value"]] == [
        {"key": k, "value": v} for k, v in said
    ]


def test_the_strategy_map_places_its_point_by_the_programs_sizes_and_says_what_sizes_replace(capsys):
    """The map took only --sizes for its current point, the program's own sizes and mesh line unread (with
    --sizes B=64: "no current point: no values for D, F"); now the program's place it, and what --sizes and
    --mesh replace of them is said."""
    argv = ["strategy-map", OWN, "--hw", "tpu-v5p", "--strategies", "DP,TP", "--over", "B/N"]
    assert main([*argv, "--mesh", "X=8", "--sizes", "B=64", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    said = [
        "mesh: --mesh X=8 replaces the program's mesh X=4",
        "sizes: --sizes B=64 replaces the program's B=128",
    ]
    assert [n for n in data["notes"] if "replaces" in n] == said
    assert [line for line in err.splitlines() if "replaces" in line] == [f"note: {n}" for n in said]
    assert not [n for n in data["notes"] if n.startswith("no current point")]
    assert main(argv) == 0  # the program's own mesh and sizes place the point, and nothing is replaced
    out, err = capsys.readouterr()
    assert "no current point" not in out + err and "replaces" not in out + err


def test_the_strategy_maps_caption_names_the_programs_mesh_and_sizes(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    argv = ["strategy-map", OWN, "--hw", "tpu-v5p", "--strategies", "DP,TP", "--over", "B/N,F"]
    assert main([*argv, "--sizes", "B=64", "--plot", str(tmp_path / "m.png"), "--format", "json"]) == 0
    caption = json.loads(capsys.readouterr().out)["plot"]["caption"]
    assert "mesh X=4" in caption and "sizes B=64,D=1024,F=4096" in caption, caption


SLICE_SAID = "--slice v5e-8 gives the mesh x=2,y=4, which replaces the program's mesh X=4"


@pytest.mark.parametrize(
    ("command", "extra"),
    [("search", ["--mode", "infer", "--top", "1"]), ("step", []), ("memory", [])],
)
def test_a_mesh_a_slice_gives_is_said_as_the_slices_not_as_a_mesh_flag(capsys, command, extra):
    """--slice alone: the note said "--mesh x=2,y=4 replaces ...", a flag the user never typed."""
    assert main([command, OWN, "--slice", "v5e-8", *extra, "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert f"note: mesh: {SLICE_SAID}" in out and not [line for line in out if "--mesh" in line]
    factored = [command, OWN, "--slice", "v5e-8", "--mesh", "X=x,Y=y", *extra, "--quiet"]
    assert main(factored) == 0
    said = "--slice v5e-8 --mesh X=x,Y=y gives the mesh X=2,Y=4, which replaces the program's mesh X=4"
    assert f"note: mesh: {said}" in capsys.readouterr().out.splitlines()


def test_a_mesh_the_caller_gives_as_a_slice_is_said_so_by_the_api():
    from shardalg.algebra.context import mesh_given_as
    from shardalg.costs.topology import slice_topology
    from shardalg.search.numeric import search

    mesh = slice_topology("v5e-8").layout(None).mesh
    with mesh_given_as("--slice v5e-8"):
        r = search(OWN, mesh=mesh, hw="tpu-v5e", mode="infer", top=1)
    assert ("mesh", SLICE_SAID) in r.notes
    r = search(OWN, mesh=mesh, hw="tpu-v5e", mode="infer", top=1)  # outside: the mesh as given
    assert ("mesh", "--mesh x=2,y=4 replaces the program's mesh X=4") in r.notes
