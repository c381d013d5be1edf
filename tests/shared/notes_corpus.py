"""Shared by the notes, KaTeX and pdflatex tests: the notes are built once per test session."""

from __future__ import annotations

import json
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KATEX_CHECK = ROOT / "tests" / "shared" / "katex_check.js"


@cache
def notes_dir() -> Path:
    import tempfile

    from shardalg.notes import write_notes

    out = Path(tempfile.mkdtemp(prefix="shardalg-notes-"))
    written, problems = write_notes(out)
    assert not problems, problems
    return out


@cache
def notes_document():  # -> Document
    from shardalg.notes import build_notes

    doc = build_notes()
    assert not doc.problems, doc.problems
    return doc


def require_katex() -> None:
    """Skip (with the reason) unless node and the katex package are installed."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed: KaTeX validation needs node and `npm ci` (package.json)")
    if not (ROOT / "node_modules" / "katex").is_dir():
        pytest.skip("the katex npm package is not installed: run `npm ci` at the repo root")


def katex_errors(fragments: list[tuple[str, bool, str]]) -> list[dict[str, object]]:
    """Render (latex, display, where) fragments with KaTeX; the list of failures."""
    require_katex()
    payload = json.dumps([{"latex": f, "display": d, "where": w} for f, d, w in fragments])
    proc = subprocess.run(
        ["node", str(KATEX_CHECK)], input=payload, capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    if proc.returncode not in (0, 1):
        raise AssertionError(f"katex_check.js failed: {proc.stderr}")
    return json.loads(proc.stdout)
