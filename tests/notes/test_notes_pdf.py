"""``shardalg notes --pdf`` runs pdflatex as often as the contents need, so the PDF opens with a filled contents
list (read back with pdftotext). Skips, saying why, when pdflatex or pdftotext is missing; without pdflatex
``--pdf`` is a usage error that says what to install."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _notes(out: Path, *extra: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = None if path is None else {**os.environ, "PATH": path}
    return subprocess.run(
        [sys.executable, "-m", "shardalg", "notes", "--out", str(out), "--quiet", *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env=env,
    )


@pytest.mark.skipif(
    shutil.which("pdflatex") is None, reason="pdflatex missing (apt-get install texlive-latex-base)"
)
@pytest.mark.skipif(
    shutil.which("pdftotext") is None, reason="pdftotext missing (apt-get install poppler-utils)"
)
def test_pdf_has_a_filled_contents_list(tmp_path):
    done = _notes(tmp_path / "n", "--pdf")
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"shardalg-notes\.pdf \(pdflatex ran [23] times", done.stdout), done.stdout
    text = subprocess.run(
        ["pdftotext", "-layout", str(tmp_path / "n" / "shardalg-notes.pdf"), "-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    contents = text.split("Contents", 1)[1].split("\f", 1)[0]
    # each section of the notes is listed with its page number
    for title in ("Notation", "The four cases of a sharded matmul", "Proofs"):
        assert re.search(rf"\d\s+{re.escape(title)}.*?\d+\s*$", contents, flags=re.M), (title, contents[:800])


def test_pdf_without_pdflatex_says_what_to_install(tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python").symlink_to(sys.executable)
    done = _notes(tmp_path / "n", "--pdf", path=str(bare))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--pdf needs pdflatex" in done.stderr and "texlive-latex-base" in done.stderr
    assert not (tmp_path / "n").exists(), "refused before any work"


def test_pdf_goes_with_latex_only(tmp_path):
    done = _notes(tmp_path / "n", "--pdf", "--format", "html")
    assert done.returncode == 2 and "--pdf compiles the LaTeX notes" in done.stderr
