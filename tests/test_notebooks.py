"""The notebooks under ``docs/notebooks`` run from top to bottom (nbmake executes each in a fresh kernel; the
cells' ``assert`` lines are the book's numbers). Skips, saying why, when nbmake (the ``docs`` extra) is absent."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "docs" / "notebooks").glob("*.ipynb"))


def test_there_is_a_notebook():
    assert [n.name for n in NOTEBOOKS] == ["chapter3.ipynb"]


@pytest.mark.skipif(
    importlib.util.find_spec("nbmake") is None, reason="nbmake missing: pip install -e '.[docs]'"
)
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.name for n in NOTEBOOKS])
def test_notebook_runs(notebook, tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbmake",
            str(notebook),
            "-q",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
