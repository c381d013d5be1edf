"""``shardalg notes --pdf`` runs pdflatex as often as the contents need, so the PDF opens with a filled contents
list (read back with pdftotext), no line or table runs past the text width (pdflatex's log), and the notes
speak of the mathematics, never of the program's parts. Skips, saying why, when pdflatex or pdftotext is
missing; without pdflatex ``--pdf`` is a usage error that says what to install."""

from __future__ import annotations

import importlib.util
import os
import pkgutil
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


# The package's module names that are also ordinary English words, which the notes may use as words ("the
# memory of each device"); every other module name (plancost, regionmap, stepreport, ...) must not appear.
ENGLISH_MODULE_NAMES = frozenset(
    "backward cache costs deferred devices fit forward gradients held inference latex memory mesh notation notes "
    "operators optimum overlap permute plan program proofs run schedule search sections send serving shape "
    "rename route routing shift slice solve step steps symbolic symbols terms traffic transpose worked zero".split()
)
IMPLEMENTATION_WORDS = ("engine", "executor", "module", "sympy", "numpy", "lambdify", "shardalg.", ".py")


def module_names() -> set[str]:
    import shardalg

    return {
        part for m in pkgutil.walk_packages(shardalg.__path__, "shardalg.") for part in m.name.split(".")[1:]
    }


def implementation_words(text: str) -> list[str]:
    """The words of the program's parts in ``text``: "engine", "executor", module names, dotted paths."""
    lower = text.lower()
    found = [w for w in IMPLEMENTATION_WORDS if w in lower]
    words = set(re.findall(r"[a-z_]+", lower))
    return found + sorted((module_names() - ENGLISH_MODULE_NAMES) & words)


# How far a line or table may run past the text width, in points, before the build fails: pdflatex reports
# anything past 0.1pt, and a point or two of a long formula is invisible in print; a cut-off column is not.
OVERFULL_TOLERANCE_PT = 3.0


def overfull_hboxes(log: str, tolerance: float = OVERFULL_TOLERANCE_PT) -> list[str]:
    """The pdflatex log's "Overfull \\hbox (...pt too wide) ..." lines wider than ``tolerance`` points."""
    found = re.finditer(r"^Overfull \\hbox \((\d+(?:\.\d+)?)pt too wide\).*$", log, flags=re.M)
    return [m.group(0) for m in found if float(m.group(1)) > tolerance]


def test_the_overfull_check_has_teeth():
    log = (
        "Overfull \\hbox (169.3583pt too wide) in paragraph at lines 501--511\n [] \n"
        "Overfull \\hbox (0.8pt too wide) in paragraph at lines 12--12\n"
        "Overfull \\vbox (40.0pt too high) has occurred while \\output is active\n"
        "Underfull \\hbox (badness 10000) in paragraph at lines 465--466\n"
    )
    assert overfull_hboxes(log) == ["Overfull \\hbox (169.3583pt too wide) in paragraph at lines 501--511"]
    assert overfull_hboxes("Overfull \\hbox (3.5pt too wide) detected at line 7\n") == [
        "Overfull \\hbox (3.5pt too wide) detected at line 7"
    ]
    assert overfull_hboxes(log, tolerance=0.5) == [
        "Overfull \\hbox (169.3583pt too wide) in paragraph at lines 501--511",
        "Overfull \\hbox (0.8pt too wide) in paragraph at lines 12--12",
    ]


def test_the_implementation_word_check_has_teeth():
    assert implementation_words("the engine cost T_engine") == ["engine"]
    assert implementation_words("Computed by shardalg's shape module") == ["module"]
    assert implementation_words("from plancost and regionmap") == ["plancost", "regionmap"]
    assert implementation_words("the memory of each device, in bytes") == []


@pytest.mark.skipif(
    shutil.which("pdflatex") is None, reason="pdflatex missing (apt-get install texlive-latex-base)"
)
@pytest.mark.skipif(
    shutil.which("pdftotext") is None, reason="pdftotext missing (apt-get install poppler-utils)"
)
def test_the_course_notes_build_a_pdf_with_contents_and_no_implementation_words(tmp_path):
    """The suite's one pdflatex build: chapters 3, 5, 6 and 7, the proofs in an appendix."""
    done = _notes(tmp_path / "n", "--sections", "ch3,ch5,ch6,ch7", "--pdf")
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"shardalg-notes\.pdf \(pdflatex ran [23] times", done.stdout), done.stdout
    pdf = tmp_path / "n" / "shardalg-notes.pdf"
    # no line or table runs past the text width (a table once ran 169pt past it, its last column cut off)
    log = pdf.with_suffix(".log").read_text(encoding="latin-1")
    assert overfull_hboxes(log) == [], overfull_hboxes(log)
    layout = subprocess.run(
        ["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True
    )
    contents = layout.stdout.split("Contents", 1)[1].split("\f", 1)[0]
    # each section is listed with its number and page: the contents list is filled, not left for a rerun
    for number, title in (
        ("1", "Notation"),
        ("2", "The four cases of a sharded matmul"),
        ("7", "Training: the parallel strategies"),
        ("8", "Training LLaMA 3 70B"),
        ("9", "Inference: serving under a memory cap"),
        ("A", "Proofs"),
    ):
        assert re.search(rf"^{number}\s+{re.escape(title)}.*?\d+\s*$", contents, flags=re.M), (
            title,
            contents,
        )
    body = layout.stdout.split("\f", 1)[1]
    # the proofs come after the chapters, not in the body
    assert body.index("Inference: serving") < body.index("Lemma 1")
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    assert implementation_words(text) == []
    if importlib.util.find_spec("matplotlib") is not None:  # the [plot] extra draws the figures
        assert "Figure 1:" in text and "Figure 2:" in text  # the crossover and the strategy map, numbered
    else:  # the README's test command installs [test] alone: the notes say no figure rather than a blank one
        assert "Figure 1:" not in text
    assert "the book's plan" in text.replace("\u2019", "'")


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
