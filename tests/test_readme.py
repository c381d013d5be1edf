"""Every code block of the README runs: ```python blocks in one namespace, ```console commands as shell
commands with their output compared where the README shows it. The set-up prefix (venv + install) is what
``.ci/run`` does in a fresh virtualenv; here the tests already run in such an environment, so the test
checks that .ci/run performs those steps and runs the rest of the command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
SETUP = "python3 -m venv .venv && . .venv/bin/activate && pip install -q -e '.[test]' && "
TEST_COMMAND = "python -m pytest"

BLOCKS = re.findall(r"^```(console|python)\n(.*?)^```$", README, flags=re.S | re.M)


def commands() -> list[tuple[str, str]]:
    """(command, expected output) for every ``$ `` line of the console blocks."""
    out: list[tuple[str, str]] = []
    for kind, body in BLOCKS:
        if kind != "console":
            continue
        for chunk in re.split(r"^\$ ", body, flags=re.M)[1:]:
            command, _, output = chunk.partition("\n")
            out.append((command, output))
    return out


def test_readme_opens_with_the_two_setup_commands():
    first, second = commands()[:2]
    assert first[0].startswith(SETUP) and first[0].removeprefix(SETUP).startswith("shardalg ")
    assert first[1].strip(), "the first command shows its output"
    assert second[0] == SETUP + TEST_COMMAND


def test_ci_runs_the_setup_and_exactly_the_test_command():
    lines = [line.strip() for line in CI.splitlines()]
    assert "set -euo pipefail" in lines
    assert "python3 -m venv .venv" in lines
    assert ". .venv/bin/activate" in lines
    assert any(re.fullmatch(r"python -m pip install .*-e '\.\[test\]'", line) for line in lines)
    assert "ruff check ." in lines
    assert TEST_COMMAND in lines
    assert '[ "$status" -eq 5 ]' in CI  # no tests collected is a failure


@pytest.fixture(scope="module")
def shim_path(tmp_path_factory) -> str:
    """A ``shardalg`` on PATH that runs this checkout's CLI (the console script, without installing)."""
    bin_dir = tmp_path_factory.mktemp("bin")
    shim = bin_dir / "shardalg"
    shim.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(ROOT)!r})\nfrom shardalg.cli import run\nrun()\n"
    )
    shim.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


RUNNABLE = [(c.removeprefix(SETUP), o) for c, o in commands() if c.removeprefix(SETUP) != TEST_COMMAND]


@pytest.mark.parametrize(("command", "expected"), RUNNABLE, ids=[c for c, _ in RUNNABLE])
def test_console_example(command, expected, shim_path):
    if command.startswith("shardalg audit "):
        pytest.importorskip("jax", reason="shardalg audit needs the jax extra; CI installs it")
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PATH": shim_path},
        check=False,
    )
    if expected.strip():
        assert done.stdout == expected
    assert done.returncode in (0, 1), done.stdout  # 1: an example of an illegal expression


def test_python_blocks():
    namespace: dict[str, object] = {}
    blocks = [body for kind, body in BLOCKS if kind == "python"]
    assert blocks
    for body in blocks:
        exec(compile(body, "README.md", "exec"), namespace)  # our own README, not user text


def test_every_picture_the_readme_shows_is_in_the_checkout():
    import re

    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", README)
    assert pictures, "the README shows the strategy map"
    for path in pictures:
        assert (ROOT / path).is_file(), path
