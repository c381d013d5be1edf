"""The notes' PDF: pdflatex run over the .tex as often as the contents need (the first run writes the table of
contents to the ``.toc`` file, the next prints it; runs stop when the ``.toc`` and ``.aux`` no longer change,
at most :data:`MAX_RUNS`).

Imports: the standard library and :mod:`shardalg.errors`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from shardalg.errors import ShardalgError, UsageError

__all__ = ["MAX_RUNS", "compile_pdf", "require_pdflatex"]

MAX_RUNS = 4


def _state(tex: Path) -> tuple[bytes, bytes]:
    aux, toc = tex.with_suffix(".aux"), tex.with_suffix(".toc")
    return (aux.read_bytes() if aux.exists() else b"", toc.read_bytes() if toc.exists() else b"")


def require_pdflatex() -> str:
    """pdflatex's path; a UsageError saying what to install when it is missing (checked before any work)."""
    pdflatex = shutil.which("pdflatex")
    if pdflatex is None:
        raise UsageError(
            "--pdf needs pdflatex, which is not installed (Debian: apt-get install texlive-latex-base "
            "texlive-latex-recommended lmodern); without --pdf the .tex is written"
        )
    return pdflatex


def compile_pdf(tex: Path, timeout: float = 600) -> tuple[Path, int]:
    """Compile ``tex`` in its folder; the PDF and how many runs it took. Without pdflatex a UsageError says
    what to install; a run that fails raises with the end of its log."""
    pdflatex = require_pdflatex()
    runs = 0
    before = _state(tex)
    while runs < MAX_RUNS:
        done = subprocess.run(
            [pdflatex, "-interaction=nonstopmode", "-halt-on-error", tex.name],
            cwd=tex.parent,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        runs += 1
        if done.returncode != 0:
            tail = "\n".join(done.stdout.splitlines()[-15:])
            raise ShardalgError(f"pdflatex failed on {tex.name} (run {runs}):\n{tail}")
        after = _state(tex)
        if runs > 1 and after == before:
            break
        before = after
    return tex.with_suffix(".pdf"), runs
