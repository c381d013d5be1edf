"""The docs site: every page's code blocks run (each ```python block alone, each ```console command with the
output the page shows), every page is in the site's nav, and ``mkdocs build --strict`` passes (a broken link,
a missing page or a docstring mkdocstrings cannot read fails it). The build skips, saying why, when mkdocs (the
``docs`` extra) is absent; the blocks run everywhere."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.shared import markdown

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
CONFIG = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")

COMMANDS = [(p.name, c, o) for p in PAGES for c, o in markdown.commands(p.read_text(encoding="utf-8"))]
PYTHON = [
    (p.name, i, body)
    for p in PAGES
    for i, body in enumerate(markdown.python_blocks(p.read_text(encoding="utf-8")))
]


def test_the_docs_hold_the_reference():
    names = {p.name for p in PAGES}
    assert {"index.md", "cli.md", "models.md", "search.md", "limits.md", "api.md", "notebooks.md"} <= names
    assert len(COMMANDS) >= 20 and len(PYTHON) >= 5


def test_every_page_is_in_the_nav():
    listed = re.findall(r"^\s+- [^:]+: (\S+\.md)$", CONFIG, flags=re.M)
    assert sorted(listed) == sorted(p.name for p in PAGES)


@pytest.fixture(scope="module")
def shim_path(tmp_path_factory) -> str:
    return markdown.shim(tmp_path_factory.mktemp("bin"))


@pytest.mark.parametrize(
    ("page", "command", "expected"), COMMANDS, ids=[f"{p}: {c[:80]}" for p, c, _ in COMMANDS]
)
def test_console_example(page, command, expected, shim_path):
    markdown.run_command(command, expected, shim_path)


@pytest.mark.parametrize(("page", "index", "body"), PYTHON, ids=[f"{p} block {i + 1}" for p, i, _ in PYTHON])
def test_python_block_runs_alone(page, index, body):
    markdown.run_python(body, f"docs/{page}")


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None, reason="mkdocs missing: pip install -e '.[docs]'"
)
def test_mkdocs_build_strict(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8").count("doc-heading") >= 10
