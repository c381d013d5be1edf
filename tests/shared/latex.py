"""Compiling a LaTeX document in the tests: pdflatex in a temporary directory, stopping at the first error."""

from __future__ import annotations

import subprocess
from pathlib import Path


def pdflatex(workdir: Path, name: str, document: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """``document`` written to ``workdir/name.tex`` and compiled there (nonstop, halting on an error); the
    caller reads the return code, stdout and ``name.log``."""
    (workdir / f"{name}.tex").write_text(document)
    return subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", f"{name}.tex"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
