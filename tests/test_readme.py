"""Every code block of the README runs: each ```python block alone, ```console commands as shell commands
with their output compared where the README shows it; the README stays within 250 lines (the reference is in
the docs site, whose blocks tests/test_docs.py runs). The set-up prefix (venv + install) is what
``.ci/run`` does in a fresh virtualenv; here the tests already run in such an environment, so the test
checks that .ci/run performs those steps and runs the rest of the command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.shared import markdown

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
SETUP = "python3 -m venv .venv && . .venv/bin/activate && pip install -q -e '.[test]' && "
TEST_COMMAND = "python -m pytest"


def commands() -> list[tuple[str, str]]:
    return markdown.commands(README)


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
    return markdown.shim(tmp_path_factory.mktemp("bin"))


RUNNABLE = [(c.removeprefix(SETUP), o) for c, o in commands() if c.removeprefix(SETUP) != TEST_COMMAND]


@pytest.mark.parametrize(("command", "expected"), RUNNABLE, ids=[c for c, _ in RUNNABLE])
def test_console_example(command, expected, shim_path):
    markdown.run_command(command, expected, shim_path)


PYTHON = markdown.python_blocks(README)


@pytest.mark.parametrize("body", PYTHON, ids=[f"block {i + 1}" for i in range(len(PYTHON))])
def test_python_block_runs_alone(body):
    markdown.run_python(body, "README.md")


def test_the_readme_is_short_and_says_where_to_read_on():
    assert len(README.splitlines()) <= 250
    assert PYTHON, "the README has a REPL session"
    for page in re.findall(r"\]\((docs/[^)#]+)\)", README):
        assert (ROOT / page).is_file(), page


def test_every_picture_the_readme_shows_is_in_the_checkout():
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", README)
    assert pictures, "the README shows the strategy map"
    for path in pictures:
        assert (ROOT / path).is_file(), path


def test_the_notation_the_readme_writes_in_its_prose_parses():
    # "The notation in five lines" writes whole expressions in code spans; each one parses as written, an
    # operand written "..." read as A[I, J]
    from shardalg.notation.parse import parse

    section = README.split("## The notation in five lines", 1)[1].split("\n## ", 1)[0]
    spans = [s.replace("...", "A[I, J]") for s in re.findall(r"`([^`]+)`", section) if "[" in s or "(" in s]
    assert len(spans) >= 9
    for s in spans:
        parse(s)
