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
