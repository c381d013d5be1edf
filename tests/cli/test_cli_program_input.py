"""One way to give a program, on every command: notation text, ``-`` for standard input, a file (``.sa``,
``.tex``, ``.txt``) or a model preset's name; an empty program, a missing file and a word that is none of these
are errors with the full message (``shardalg.cli.common.program_text``)."""

from __future__ import annotations

import argparse
import io
import sys

import pytest

from shardalg.cli import build_parser, leaf_parsers, main

STATEMENT = "A[I, J_X] · B[J_X, K] -> C[I, K]"
MLP = "params W_in, W_out\ntokens B\nIn[B, D] * W_in[D, F] -> H[B, F]\nH[B, F] * W_out[F, D] -> Out[B, D]\n"
FORMS = "notation text, - for standard input, a file (.sa, .tex, .txt) or a model preset"
PRESETS = "llama-2-13b, llama-3-8b, llama-3-70b, mixtral-8x7b, dense"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "e.sa").write_text(STATEMENT + "\n", encoding="utf-8")
    (tmp_path / "e.tex").write_text(
        "\\[ A[I, J_X] \\cdot B[J_X, K] \\rightarrow C[I, K] \\]\n", encoding="utf-8"
    )
    (tmp_path / "mlp.txt").write_text(MLP, encoding="utf-8")
    (tmp_path / "mlp.sa").write_text(MLP, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("form", ["text", "file", "tex", "stdin"])
def test_plan_and_check_take_every_form(capsys, files, monkeypatch, form):
    arg = {"text": STATEMENT, "file": "e.sa", "tex": "e.tex", "stdin": "-"}[form]
    expected = {}
    for command in ("plan", "check"):
        monkeypatch.setattr(sys, "stdin", io.StringIO(STATEMENT))
        code, out, err = run(capsys, command, arg, "--mesh", "X=4")
        assert code == 0, err
        expected[command] = out
    assert "AllReduce_X(C[I, K]{U_X}) -> C[I, K]" in expected["plan"]
    assert expected["check"] == "legal: A[I, J_X] * B[J_X, K] -> C[I, K]\n"
    code, text_plan, _ = run(capsys, "plan", STATEMENT, "--mesh", "X=4")
    assert expected["plan"] == text_plan  # the same answer whatever the form


@pytest.mark.parametrize("form", ["text", "sa", "txt", "stdin"])
def test_memory_and_search_take_every_form(capsys, files, monkeypatch, form):
    arg = {"text": MLP, "sa": "mlp.sa", "txt": "mlp.txt", "stdin": "-"}[form]
    monkeypatch.setattr(sys, "stdin", io.StringIO(MLP))
    code, out, err = run(
        capsys, "memory", arg, "--mesh", "X=2", "--sizes", "B=64,D=64,F=256", "--hw", "tpu-v5e"
    )
    assert code == 0 and "parameters   32,768" in out, err
    monkeypatch.setattr(sys, "stdin", io.StringIO(MLP))
    code, out, err = run(
        capsys, "search", arg, "--mesh", "X=2", "--sizes", "B=64,D=64,F=256", "--hw", "tpu-v5e"
    )
    assert code == 0 and "8 assignments" in out, err


def test_a_preset_name_is_its_program(capsys):
    code, out, err = run(capsys, "memory", "llama-3-70b", "--mesh", "X=64", "--hw", "tpu-v5p")
    assert code == 0 and out.startswith("parameters   70,553,706,496 (80 layers)\n"), err
    code, out, err = run(capsys, "check", "LLaMA-3-8B", "--mesh", "X=4")  # names in any case, as model show
    assert code == 0 and out.startswith("legal: params W_q, W_k, W_v, W_o"), err


def test_a_file_of_model_show_is_the_preset(capsys, files):
    assert main(["model", "show", "llama-3-70b"]) == 0
    (files / "l70.sa").write_text(capsys.readouterr().out, encoding="utf-8")
    _, from_file, _ = run(capsys, "memory", "l70.sa", "--mesh", "X=64", "--hw", "tpu-v5p")
    _, from_name, _ = run(capsys, "memory", "llama-3-70b", "--mesh", "X=64", "--hw", "tpu-v5p")
    assert from_file == from_name and "70,553,706,496" in from_file


EMPTY_FIX = f"  fix: give a PROGRAM: {FORMS} (shardalg model list)\n"


@pytest.mark.parametrize("stdin", ["", "\n  \n", "# a comment only\n"])
def test_an_empty_program_is_an_error(capsys, monkeypatch, stdin):
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code, out, err = run(capsys, "memory", "-")
    assert (code, out) == (2, "")
    assert err == f"error: the program is empty: standard input holds no notation [usage]\n{EMPTY_FIX}"


def test_an_empty_argument_or_file_is_an_error(capsys, files):
    (files / "empty.sa").write_text("# nothing\n", encoding="utf-8")
    assert run(capsys, "check", "", "--mesh", "X=4") == (
        2,
        "",
        f"error: the program is empty: '' holds no notation [usage]\n{EMPTY_FIX}",
    )
    assert run(capsys, "search", "empty.sa", "--hw", "tpu-v5e") == (
        2,
        "",
        f"error: the program is empty: 'empty.sa' holds no notation [usage]\n{EMPTY_FIX}",
    )


@pytest.mark.parametrize("name", ["nofile.sa", "notes.tex", "dir/prog"])
def test_a_file_that_does_not_exist(capsys, files, name):
    code, out, err = run(capsys, "plan", name, "--mesh", "X=4")
    assert (code, out) == (2, "")
    assert err == (
        f"error: cannot read {name}: no such file [file]\n  fix: PROGRAM is {FORMS} (shardalg model list)\n"
    )


def test_a_directory_is_a_file_error(capsys, files):
    (files / "d.sa").mkdir()
    code, _, err = run(capsys, "memory", "d.sa")
    assert code == 2 and err.startswith("error: cannot read d.sa: ") and err.endswith("[file]\n")


@pytest.mark.parametrize(
    ("word", "guess"),
    [("llama-3-7b", "did you mean llama-3-70b? "), ("mixtral", "did you mean mixtral-8x7b? "), ("A", "")],
)
def test_a_word_that_is_neither_a_file_nor_a_preset(capsys, files, word, guess):
    code, out, err = run(capsys, "memory", word, "--mesh", "X=4")
    assert (code, out) == (2, "")
    assert err == (
        f"error: {word!r} is not notation, a file or a model preset [usage]\n"
        f"  fix: {guess}PROGRAM is {FORMS}: {PRESETS}\n"
    )


# The arguments that hold notation, by their metavar; every other positional is a name or a word.
NOTATION_ARGUMENTS = {"EXPR", "EXPR_OR_PROGRAM", "PROGRAM", "PROGRAM_A", "PROGRAM_B", "FORWARD", "BACKWARD"}
WORDS = {"export": "jax"}  # the other positionals: export's format
REQUIRED = {"--range": "128:1024", "--mesh": "X=4"}  # required options' values (B for the rest: a dim)


def _notation_commands() -> list[tuple[str, list[str]]]:
    found = []
    for words, p in leaf_parsers(build_parser()):
        positional = [
            a for a in p._actions if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
        ]
        if any(a.metavar in NOTATION_ARGUMENTS for a in positional):
            argv = words.split() + [
                ("missing.sa" if a.metavar in NOTATION_ARGUMENTS else WORDS[words]) for a in positional
            ]
            for a in p._actions:
                if a.option_strings and a.required:
                    argv += [a.option_strings[0], REQUIRED.get(a.option_strings[0], "B")]
            found.append((words, argv))
    return found


def test_every_program_argument_is_read_the_same_way(capsys, files):
    commands = _notation_commands()
    assert len(commands) >= 20  # parse, check, ..., strategy-map: a new command joins by its metavar
    for words, argv in commands:
        code, out, err = run(capsys, *argv)
        assert (code, out) == (2, ""), (words, err)
        assert err.startswith("error: cannot read missing.sa: no such file [file]\n"), (words, err)


CHIPS = "tpu-v4p, tpu-v5e, tpu-v5p, tpu-v6e, h100, h200, b200"


def test_an_unknown_chip_lists_the_presets_with_a_guess(capsys):
    code, out, err = run(capsys, "memory", MLP, "--mesh", "X=2", "--hw", "tpu-v5")
    assert (code, out) == (2, "")
    assert err.endswith(f"[usage]\n  fix: did you mean tpu-v5p? the presets are {CHIPS}\n")
    assert err.startswith("error: unknown hardware 'tpu-v5': a chip is a preset (shardalg hw list)")
    # hw show reads its argument as --hw does: the same message
    code, out, err = run(capsys, "hw", "show", "H100x")
    assert (code, out) == (2, "")
    assert err.startswith("error: unknown hardware 'H100x': a chip is a preset (shardalg hw list)")
    assert err.endswith(f"[usage]\n  fix: did you mean h100? the presets are {CHIPS}\n")
    code, _, err = run(capsys, "memory", MLP, "--mesh", "X=2", "--hw", "qqq")
    assert code == 2 and err.endswith(f"  fix: the presets are {CHIPS}\n")


def test_an_unknown_model_gets_a_guess(capsys):
    assert run(capsys, "model", "show", "llama3-70b") == (
        2,
        "",
        f"error: unknown model 'llama3-70b'; known: {PRESETS} [usage]\n  fix: did you mean llama-3-70b?\n",
    )


def test_python_gets_the_same_guesses():
    import shardalg as sa
    from shardalg.errors import UsageError

    with pytest.raises(UsageError) as err:
        sa.chip_from_text("tpu-v6")
    assert err.value.fix == f"did you mean tpu-v6e? the presets are {CHIPS}"
    with pytest.raises(UsageError) as err:
        sa.expand("mixtral")
    assert err.value.fix == "did you mean mixtral-8x7b?"


def test_mesh_takes_the_cli_text():
    import shardalg as sa
    from shardalg.errors import UsageError

    assert sa.Mesh("X=4,Y=2") == sa.Mesh(X=4, Y=2) == sa.Mesh.parse("X=4 Y=2")
    assert sa.Mesh("X=16*2:ring").axes == sa.Mesh.parse("X=16*2:ring").axes
    with pytest.raises(UsageError, match="the mesh has no axes"):
        sa.Mesh("")
