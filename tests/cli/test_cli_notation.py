"""The notation CLI: ``shardalg parse | check | shape``, its exit codes, its JSON, and the seed's quick
questions answered from the command line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from shardalg.cli import main
from shardalg.notation.parse import parse
from tests.shared import ROOT


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---- the seed's quick questions ----------------------------------------------------------------------


def test_quick_question_fp32_on_8x2(capsys):
    code, out, err = run(capsys, "shape", "A: fp32[I_XY, J] where I=1024, J=4096", "--mesh", "X=8,Y=2")
    assert code == 0 and err == ""
    assert "local shape       fp32[64, 4096]\n" in out
    assert "bytes per device  1,048,576 bytes (1.05 MB, 1 MiB)\n" in out
    code, out, _ = run(
        capsys, "shape", "A: fp32[I_XY, J]", "--mesh", "X=8,Y=2", "--sizes", "I=1024,J=4096", "--json"
    )
    data = json.loads(out)
    assert code == 0
    assert data["local_shape"] == [64, 4096] and data["dtype"] == "fp32"
    assert data["bytes_per_device"] == 1024 * 1024


def test_quick_question_int8_on_2x8x2(capsys):
    code, out, _ = run(
        capsys, "shape", "A: int8[I_XY, J]", "--mesh", "X=2,Y=8,Z=2", "--sizes", "I=128,J=2048", "--json"
    )
    data = json.loads(out)
    assert code == 0
    assert data["bytes_per_device"] == 16_384
    assert data["total_bytes"] == 512 * 1024
    assert data["local_shape"] == [8, 2048]


def test_quick_question_replication(capsys):
    code, out, _ = run(capsys, "shape", "A[I_X, J, K]", "--mesh", "X=4,Y=8,Z=2", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["replication"] == 16
    assert data["dtype"] == "bf16" and data["dtype_default"] is True
    assert data["local_shape"] == ["I/4", "J", "K"]
    assert data["bytes_per_device"] == "I*J*K/2"


def test_shape_json_keys_are_the_documented_contract(capsys):
    _, out, _ = run(capsys, "shape", "A[I_X]", "--mesh", "X=2", "--sizes", "I=8", "--json")
    assert set(json.loads(out)) == {
        "tensor",
        "mesh",
        "dtype",
        "dtype_default",
        "bits_per_element",
        "global_shape",
        "local_shape",
        "bytes_per_device",
        "total_bytes",
        "replication",
        "devices",
    }


# ---- check ----------------------------------------------------------------------------------------------


def test_check_legal(capsys):
    code, out, err = run(capsys, "check", "A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]", "--mesh", "X=4,Y=2")
    assert (code, err) == (0, "")
    assert out.startswith("legal: ")
    assert parse(out.removeprefix("legal: ")) == parse("A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]")


def test_check_illegal_exits_1_with_the_full_error_on_stderr(capsys):
    code, out, err = run(capsys, "check", "A[I_X, J] ·_LOCAL B[J, K_X]", "--mesh", "X=4,Y=2")
    assert (code, out) == (1, "")
    assert err == (
        "error: case 4: the result dims I and K are both sharded over X [case-4]\n"
        "  A[I_X, J] ·_LOCAL B[J, K_X]\n"
        "                         ^^^\n"
        "  fix: gather one operand first: AllGather_X(A[I_X, J]) or AllGather_X(B[J, K_X])\n"
    )


def test_check_notes_what_the_plans_of_a_legal_statement_must_fix(capsys):
    # without _LOCAL, case 4 is a request: legal (plan gathers one operand), with a note on what to fix
    code, out, err = run(capsys, "check", "A[I_X, J] · B[J, K_X]", "--mesh", "X=4,Y=2")
    assert (code, err) == (0, "")
    assert out == (
        "legal: A[I_X, J] * B[J, K_X]\n"
        "note: case 4: the result dims I and K are both sharded over X; the shards cannot simply be "
        "multiplied, so a plan communicates first [case-4]\n"
        "  A[I_X, J] · B[J, K_X]\n"
        "                   ^^^\n"
        "  plans: gather one operand first: AllGather_X(A[I_X, J]) or AllGather_X(B[J, K_X])\n"
    )


def test_check_lists_every_violation(capsys):
    code, _, err = run(capsys, "check", "A[I_X, J_X] · B[J, K_Z]", "--mesh", "X=4,Y=2")
    assert code == 1
    assert err.count("[axis-used-twice]\n") == 1
    assert err.count("[unknown-axis]\n") == 1


def test_check_json(capsys):
    code, out, _ = run(capsys, "check", "A[I_X]{U_X}", "--json")
    data = json.loads(out)
    assert code == 1
    assert data["legal"] is False
    assert data["violations"][0]["rule"] == "axis-used-twice"
    assert data["violations"][0]["span"] == [6, 11]
    code, out, _ = run(capsys, "check", "A[I_X]", "--json")
    assert (code, json.loads(out)) == (0, {"legal": True, "violations": [], "notes": []})
    code, out, _ = run(capsys, "check", "A[I_X, J] · B[J, K_X]", "--json")
    assert (code, [n["rule"] for n in json.loads(out)["notes"]]) == (0, ["case-4"])


def test_check_indivisible_with_sizes(capsys):
    code, _, err = run(capsys, "check", "A[I_X, J]", "--mesh", "X=4", "--sizes", "I=6")
    assert code == 1 and "[indivisible-dim]\n" in err


# ---- parse -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "unicode", "latex"])
def test_parse_round_trips_through_every_format(capsys, fmt):
    source = r"A[I_{XY}, J] \cdot B[J, K] \to C[I_{XY}, K]"
    code, out, _ = run(capsys, "parse", source, "--format", fmt)
    assert code == 0
    assert parse(out) == parse(source)


def test_parse_formats(capsys):
    assert run(capsys, "parse", "A[I_{XY}, J] · B[J, K] -> C[I_XY, K]", "--format", "unicode")[1] == (
        "A[I_XY, J] · B[J, K] → C[I_XY, K]\n"
    )
    code, out, _ = run(capsys, "parse", "A[I_X, J]", "--format", "json")
    assert code == 0 and json.loads(out)["statements"][0]["name"] == "A"


# ---- errors and exit codes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["parse", "A[I_X, J"],
        ["check", "A[I_X, J", "--mesh", "X=2"],
        ["shape", "A[I_X, J]"],  # no mesh
        ["shape", "A[I_X, J]", "--mesh", "X=two"],
        ["shape", "A[I_X, J]", "--mesh", "X=2", "--sizes", "I=__import__('os')"],
        ["check", "A[I_X]", "--sizes", "I=1e3"],
        ["parse", "__import__('os').system('true')"],
        ["check", "__import__('os').system('true')"],
        ["shape", "__import__('os').system('true')", "--mesh", "X=2"],
    ],
)
def test_parse_and_usage_errors_exit_2(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    first = err.splitlines()[0]
    assert first.startswith("error: ") and first.endswith(("[syntax]", "[usage]"))


def test_argparse_errors_exit_2(capsys):
    for argv in (["nonsense"], ["parse", "A[I]", "--format", "yaml"], ["shape"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
    err = capsys.readouterr().err
    assert "\nerror: argument COMMAND: invalid choice: 'nonsense'" in err and err.endswith(" [usage]\n")


@pytest.mark.parametrize("cmd", ["parse", "check", "shape"])
def test_help_everywhere(capsys, cmd):
    with pytest.raises(SystemExit) as info:
        main([cmd, "--help"])
    assert info.value.code == 0
    assert "EXPR" in capsys.readouterr().out


def test_stdin_and_a_real_process():
    cli = [sys.executable, "-c", "from shardalg.cli import run; run()"]
    done = subprocess.run(
        cli + ["shape", "-", "--mesh", "X=8,Y=2", "--json"],
        input="A: fp32[I_XY, J] where I=1024, J=4096\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["bytes_per_device"] == 1048576
    done = subprocess.run(
        cli + ["check", "A[I_X, J_X]"], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("error: mesh axis X shards both I and J [axis-used-twice]\n")


def test_parse_and_check_start_without_sympy():
    # cold start (target under 0.6 s): `shardalg parse` / `check` must not import sympy (about 1 s by itself);
    # command modules import it inside their handlers, not at module level.
    code = (
        "import sys\n"
        "from shardalg.cli import main\n"
        "assert main(['parse', 'A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]']) == 0\n"
        "assert main(['check', 'A[I_X, J] · B[J, K_Y]', '--mesh', 'X=4,Y=2']) == 0\n"
        "assert main(['shape', 'A: fp32[I_XY, J] where I=1024, J=4096', '--mesh', 'X=8,Y=2']) == 0\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('sympy', 'numpy'))\n"
        "assert not loaded, f'imported at start: {loaded[:3]}'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
