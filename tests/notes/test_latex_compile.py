"""The generated notes compile with pdflatex (where it is installed; the test says so when it is skipped)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.shared.notes_corpus import notes_dir


def test_notes_compile_with_pdflatex():
    if shutil.which("pdflatex") is None:
        pytest.skip(
            "pdflatex is not installed (apt-get install texlive-latex-base texlive-latex-recommended)"
        )
    out = notes_dir()
    for _ in range(2):  # twice: the table of contents
        proc = subprocess.run(
            ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "shardalg-notes.tex"],
            cwd=out,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stdout[-3000:]
    pdf = out / "shardalg-notes.pdf"
    assert pdf.read_bytes().startswith(b"%PDF")
    log = (out / "shardalg-notes.log").read_text(errors="replace")
    assert "LaTeX Warning: Reference" not in log
    assert "Undefined control sequence" not in log
    assert "Missing character" not in log
    # no box sticks into the margin by more than a point (a student reads the PDF)
    over = [(float(m[1]), m[0]) for m in re.finditer(r"Overfull \\hbox \(([\d.]+)pt too wide\)[^\n]*", log)]
    assert not [line for width, line in over if width > 1.0], over
    assert "mktexpk" not in log  # vector fonts (lmodern), not bitmaps made on the fly
