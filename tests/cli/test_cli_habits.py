"""The command line's habits: --version, completion, help for every argument and an example for every
subcommand, quiet on a closed pipe, one-line file errors, ``-`` for standard input, the progress line."""

from __future__ import annotations

import argparse
import importlib.metadata
import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shardalg.cli import (
    COMMAND_MODULES,
    COMMANDS,
    RUN_OLDEST_THRESHOLD,
    _Parser,
    build_parser,
    leaf_parsers,
    main,
)
from shardalg.cli.progressline import ProgressLine, for_stderr
from shardalg.planning.overlap import OverlapPolicy
from shardalg.progress import listening, task
from tests.shared import ROOT

CLI = [sys.executable, "-c", "from shardalg.cli import run; run()"]


def shell(args: list[str], stdin: str | None = None, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        CLI + args, input=stdin, capture_output=True, text=True, cwd=ROOT, check=False, timeout=120, **kw
    )


# ---- one command's parsers --------------------------------------------------------------------------


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_the_command_map_is_what_the_modules_register() -> None:
    found: dict[str, str] = {}
    for module in COMMAND_MODULES:
        parser = _Parser(prog="shardalg")
        importlib.import_module(f"shardalg.cli.{module}").register(parser.add_subparsers(dest="command"))
        found.update(dict.fromkeys(_commands(parser), module))
    assert COMMANDS == found


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_one_commands_parser_is_the_whole_lines(command: str) -> None:
    """A run builds only its command's module: each of its subcommands parses and helps exactly as in the
    whole command line (options, -q and the --max-<limit> options included)."""
    whole, alone = _commands(build_parser()), _commands(build_parser(command))
    assert set(alone) == {c for c, m in COMMANDS.items() if m == COMMANDS[command]}
    assert whole[command].format_help() == alone[command].format_help()
    for (words, a), (words_b, b) in zip(
        leaf_parsers(whole[command]), leaf_parsers(alone[command]), strict=True
    ):
        assert words == words_b
        assert a.format_help() == b.format_help()


def test_unknown_words_and_options_build_the_whole_line(capsys) -> None:
    assert set(_commands(build_parser("no-such-command"))) == set(COMMANDS)
    assert set(_commands(build_parser("--version"))) == set(COMMANDS)
    with pytest.raises(SystemExit) as info:
        main(["no-such-command"])
    assert info.value.code == 2
    assert "invalid choice: 'no-such-command'" in capsys.readouterr().err


# ---- the script's garbage-collector policy ----------------------------------------------------------


def test_the_script_defers_full_collections_and_freezes_its_heap_the_library_does_not(capsys) -> None:
    import gc

    code = (
        "import gc, sys\n"
        "from shardalg.cli import run\n"
        "sys.argv = ['shardalg', 'check', 'A[I_X, J] * B[J, K] -> C[I_X, K]', '--mesh', 'X=2']\n"
        "try:\n    run()\nexcept SystemExit as e:\n"
        "    print(e.code, gc.isenabled(), gc.get_threshold()[2], gc.get_freeze_count() > 1000)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.stdout.split()[-4:] == ["0", "True", str(RUN_OLDEST_THRESHOLD), "True"], done.stderr
    before = gc.get_threshold(), gc.get_freeze_count(), gc.isenabled()
    assert main(["check", "A[I_X, J] * B[J, K] -> C[I_X, K]", "--mesh", "X=2"]) == 0
    assert (gc.get_threshold(), gc.get_freeze_count(), gc.isenabled()) == before
    capsys.readouterr()


# ---- --version and completion -------------------------------------------------------------------------


def test_version_is_the_installed_version(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"shardalg {importlib.metadata.version('shardalg')}\n"


@pytest.mark.parametrize("shell_name", ["bash", "zsh"])
def test_completion_scripts(capsys, shell_name: str) -> None:
    pytest.importorskip("shtab", reason="shtab is not installed (pip install 'shardalg[completion]')")
    with pytest.raises(SystemExit) as info:
        main(["--print-completion", shell_name])
    out = capsys.readouterr().out
    assert info.value.code == 0
    words = [words for words, _ in leaf_parsers(build_parser())]
    for command in ("parse", "plan", "notes", "export", "show", "hw"):
        assert command in out
    assert "--print-completion" in out and "--mesh" in out
    if shell_name == "bash":
        assert "complete -o bashdefault -F _shtab_shardalg shardalg" in out
        done = subprocess.run(["bash", "-n"], input=out, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr  # the script is valid bash
    else:
        assert out.startswith("#compdef shardalg")
    assert all(w.split()[-1] in out for w in words)  # every subcommand, down to `hw show`


def test_completion_without_shtab_is_a_clear_error(monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "shtab", None)
    with pytest.raises(SystemExit) as info:
        main(["--print-completion", "bash"])
    assert info.value.code == 2
    assert (
        capsys.readouterr().err
        == "error: shell completion needs shtab: pip install 'shardalg[completion]' [usage]\n"
    )


# ---- help ---------------------------------------------------------------------------------------------


def test_every_argument_of_every_subcommand_has_help() -> None:
    missing = []
    for words, parser in leaf_parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if not (action.help or "").strip() or action.help == argparse.SUPPRESS:
                missing.append(f"shardalg {words}: {action.option_strings or action.dest}")
    assert not missing, "arguments without help text:\n" + "\n".join(missing)


def test_every_command_that_takes_a_policy_offers_every_policy() -> None:
    """--overlap's choices are the enum's names, in every command (search and strategy-map offered two)."""
    offered = {}
    for words, parser in leaf_parsers(build_parser()):
        for action in parser._actions:
            if "--overlap" in action.option_strings:
                offered[words] = tuple(action.choices or ())
    assert {"cost", "compare", "plan", "step", "search", "strategy-map"} <= set(offered)
    assert set(offered.values()) == {OverlapPolicy.names()} == {("schedule", "steady", "serial")}


def test_every_subcommand_has_a_description_and_a_runnable_looking_example() -> None:
    bad = []
    for words, parser in leaf_parsers(build_parser()):
        if not (parser.description or "").strip():
            bad.append(f"{words}: no description")
        if f"$ shardalg {words.split()[0]}" not in (parser.epilog or ""):
            bad.append(f"{words}: no example in the epilog")
    assert not bad, bad


@pytest.mark.parametrize("words", [w for w, _ in leaf_parsers(build_parser())])
def test_help_renders_plain(capsys, words: str) -> None:
    with pytest.raises(SystemExit) as info:
        main([*words.split(), "--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0
    assert out.startswith(f"usage: shardalg {words}")
    assert "``" not in out and ":func:" not in out and ":mod:" not in out  # no reStructuredText markup
    assert "\nexamples:\n  $ shardalg " in out


def test_top_level_help_is_plain_with_examples(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "``" not in out
    assert "  A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]\n" in out  # notation is not re-wrapped
    assert "\nexamples:\n  $ shardalg check " in out
    assert "--version" in out and "--print-completion {bash,zsh}" in out


# ---- pipes, files, standard input -----------------------------------------------------------------------


def test_a_closed_pipe_is_quiet() -> None:
    """``shardalg parse ... | head -1``: no BrokenPipeError traceback."""
    program = "; ".join(f"A{i}[I_X, J] · B{i}[J, K] -> C{i}[I_X, K]" for i in range(400))
    cmd = " ".join(CLI[:2]) + " '" + CLI[2] + "' parse '" + program + "' --format unicode | head -1"
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", cmd],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=120,
    )
    assert done.stdout == "A0[I_X, J] · B0[J, K] → C0[I_X, K]\n"
    assert done.stderr == ""
    assert done.returncode in (0, 141)  # 141: ended by SIGPIPE, as `yes | head -1` is


def test_notes_into_a_missing_directory_is_one_line_and_exit_2(tmp_path: Path) -> None:
    where = tmp_path / "nonexistent" / "x"
    done = shell(["notes", "--out", str(where)])
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == f"error: cannot write the notes to {where}: No such file or directory [file]\n"


def test_notes_into_a_file_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "plain-file"
    blocker.write_text("not a directory")
    assert main(["notes", "--out", str(blocker / "x")]) == 2
    err = capsys.readouterr().err
    assert err == f"error: cannot write the notes to {blocker / 'x'}: Not a directory [file]\n"


def test_plot_into_a_missing_directory_is_one_line(tmp_path: Path, capsys) -> None:
    pytest.importorskip("matplotlib")
    code = main(
        [
            "plot",
            "X[B, D_X] ·_LOCAL Y[D_X, F] -> Z[B, F]{U_X}; AllReduce_X(Z[B, F]{U_X}) -> Z[B, F]",
            "X[B, D] · AllGather_X(Y[D_X, F]) -> Z[B, F]",
            "--over",
            "D",
            "--range",
            "128:65536",
            "--mesh",
            "X=8",
            "--sizes",
            "B=1024,F=8192",
            "--out",
            str(tmp_path / "no" / "q4.png"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("error: cannot write the picture ") and err.endswith(
        ": No such file or directory [file]\n"
    )


STDIN_COMMANDS = [
    (["parse", "-"], "A[I_X, J]", "A[I_X, J]\n"),
    (["check", "-", "--mesh", "X=2"], "A[I_X, J]", "legal: A[I_X, J]\n"),
    (["shape", "-", "--mesh", "X=2"], "A[I_X, J]", "local shape       bf16[I/2, J]"),
    (["plan", "-", "--mesh", "X=2"], "A[I_X, J] -> A[I, J]", "AllGather_X(A[I_X, J]) -> A[I, J]"),
    (["simulate", "-", "--mesh", "X=2"], "A[I_X, J] -> A[I, J]", "plan 1 of 2: ok"),
    (["latex", "-"], "A[I_X, J]", "A[I_X, J]\n"),
    (["cost", "-", "--mesh", "X=4"], "AllGather_X(A[I_X, J])", "total"),
    (
        ["backward", "-", "--mesh", "X=4", "--sizes", "B=65536,D=1024,F=4096"],
        "In[B_X, D] · W[D, F] -> Out[B_X, F]",
        "dW",
    ),
    (["show", "-", "--mesh", "X=2"], "A[I_X, J]", "A[I_X, J]"),
    (["export", "jax", "-", "--mesh", "X=2"], "A[I_X, J] · B[J, K] -> C[I_X, K]", "def forward_local"),
    (
        ["compare", "-", "X[B, D] · AllGather_X(Y[D_X, F]) -> Z[B, F]", "--mesh", "X", "--solve-for", "D"],
        "X[B, D_X] ·_LOCAL Y[D_X, F] -> Z[B, F]{U_X}; AllReduce_X(Z[B, F]{U_X}) -> Z[B, F]",
        "D > 2*B",
    ),
    (
        ["verify", "In[B_X, D] · W[D, F] -> Out[B_X, F]", "-", "--mesh", "X=4"],
        "dOut[B_X, F] · W[D, F] -> dIn[B_X, D]; In[B_X, D] ·_LOCAL dOut[B_X, F] -> dW[D, F]{U_X}; "
        "AllReduce_X(dW[D, F]{U_X}) -> dW[D, F]",
        "ok",
    ),
]


@pytest.mark.parametrize(
    ("argv", "stdin", "expected"), STDIN_COMMANDS, ids=[a[0] for a, _, _ in STDIN_COMMANDS]
)
def test_dash_reads_standard_input_everywhere(monkeypatch, capsys, argv, stdin, expected) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    assert expected in out


def test_standard_input_is_read_once(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("X[B, D] · AllGather_X(Y[D_X, F]) -> Z[B, F]"))
    assert main(["compare", "-", "-", "--mesh", "X"]) == 2
    assert (
        capsys.readouterr().err == "error: only one argument may be - (standard input is read once) [usage]\n"
    )


# ---- progress ------------------------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def started(self, label, total):
        self.events.append(("started", label, total))

    def advanced(self, done, total, detail):
        self.events.append(("advanced", done, total, detail))

    def finished(self, label, done):
        self.events.append(("finished", label, done))


def test_the_engine_reports_progress_to_whoever_listens(monkeypatch, capsys) -> None:
    rec = Recorder()
    with listening(rec):
        assert main(["simulate", "A[I_X, J] · B[J, K_X] -> C[I_X, K]", "--mesh", "X=4"]) == 0
    assert rec.events[0] == ("started", "running the plans on numbers", 3)
    assert [e[1] for e in rec.events if e[0] == "advanced"] == [1, 2, 3]
    assert rec.events[-1] == ("finished", "running the plans on numbers", 3)


def test_no_listener_means_no_output() -> None:
    with task("nothing listens", total=2) as tick:
        tick("one")
        tick("two")


def test_the_progress_line_is_silent_off_a_terminal_and_with_quiet(monkeypatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert for_stderr(quiet=False) is None  # a StringIO is not a terminal
    assert for_stderr(quiet=True) is None


def test_the_progress_line_draws_and_erases_itself() -> None:
    stream = io.StringIO()
    line = ProgressLine(stream, delay=0.0, every=0.01)
    with listening(line), task("building the notes", total=2) as tick:
        tick("notation")
        deadline = time.monotonic() + 5
        while "[1/2] notation" not in stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
    drawn = stream.getvalue()
    assert "\r\x1b[Kbuilding the notes [1/2] notation  " in drawn
    assert drawn.endswith("\r\x1b[K")  # erased at the end


def test_the_progress_line_shows_on_a_terminal(tmp_path: Path) -> None:
    """Under a pseudo-terminal, a long command draws the line on stderr; with --quiet it does not."""
    pty = pytest.importorskip("pty")

    def run_in_pty(extra: list[str]) -> bytes:
        out = tmp_path / "notes-out"
        main_fd, child_fd = pty.openpty()
        proc = subprocess.Popen(
            CLI + ["notes", "--out", str(out), *extra], stdout=subprocess.DEVNULL, stderr=child_fd, cwd=ROOT
        )
        os.close(child_fd)
        chunks = []
        while True:
            try:
                data = os.read(main_fd, 4096)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=300)
        os.close(main_fd)
        assert proc.returncode == 0
        return b"".join(chunks)

    assert b"building the notes [" in run_in_pty([])
    assert run_in_pty(["--quiet"]) == b""
