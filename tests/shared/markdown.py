"""The code blocks of a Markdown page (the README, a page of the docs site), for the tests that run them:
```console blocks as ``$ `` commands with the output shown under each, ```python blocks as code that runs
alone (each block in a fresh namespace, so a reader can copy any one)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_BLOCK = re.compile(r"^```(console|python)\n(.*?)^```$", flags=re.S | re.M)


def blocks(text: str) -> list[tuple[str, str]]:
    """(kind, body) of every console and python block."""
    return _BLOCK.findall(text)


def commands(text: str) -> list[tuple[str, str]]:
    """(command, expected output) for every ``$ `` line of the console blocks."""
    out: list[tuple[str, str]] = []
    for kind, body in blocks(text):
        if kind != "console":
            continue
        for chunk in re.split(r"^\$ ", body, flags=re.M)[1:]:
            command, _, output = chunk.partition("\n")
            out.append((command, output))
    return out


def python_blocks(text: str) -> list[str]:
    return [body for kind, body in blocks(text) if kind == "python"]


def shim(bin_dir: Path) -> str:
    """A ``shardalg`` on PATH that runs this checkout's CLI (the console script, without installing); the
    PATH to run commands with."""
    script = bin_dir / "shardalg"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(ROOT)!r})\nfrom shardalg.cli import run\nrun()\n"
    )
    script.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


def run_command(command: str, expected: str, path: str) -> None:
    """Run ``command`` in bash from the checkout; its output must be ``expected`` when the page shows one, and
    it exits 0 or 1 (1: an example of an illegal expression). ``shardalg audit`` needs the jax extra (CI
    installs it): skipped without it."""
    if command.startswith("shardalg audit "):
        pytest.importorskip("jax", reason="shardalg audit needs the jax extra; CI installs it")
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PATH": path},
        check=False,
    )
    if expected.strip():
        assert done.stdout == expected
    assert done.returncode in (0, 1), done.stdout


def run_python(body: str, where: str) -> None:
    """Run one python block alone, in a fresh namespace (our own pages, not user text)."""
    exec(compile(body, where, "exec"), {"__name__": "__docs__"})
