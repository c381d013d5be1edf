"""A plan's reasons in LaTeX are math where they quote the notation (``\\mathrm{ReduceScatter}_{X,K}``,
``C\\{U_{X}\\}``, ``\\rightarrow``) and text elsewhere, never the escaped characters that render literally
(``$\\{$``, ``$\\_$``); long reasons go on over further rows, so ``shardalg latex --plan`` compiles in pdflatex
with no overfull box, and KaTeX renders it."""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys

import pytest

from tests.shared.latex import pdflatex
from tests.shared.notes_corpus import katex_errors

latex_module = importlib.import_module("shardalg.notation.printing.latex")

# sizes given: one plan each (without them latex --plan shows every plan not beaten at every size, with a note)
PLANS = (
    ("A[I, J_X] * B[J_X, K] -> C[I, K]", "X=4,Y=2", "I=64,J=4096,K=64"),
    ("X[B, D] * Y[D_X, F] -> Z[B, F]", "X=4", "B=64,D=4096,F=64"),
    ("A[I_X, J] * B[J, K_X] -> C[I, K_X]", "X=4,Y=2", "I=64,J=4096,K=64"),
    ("In[B_X, D_Y] * Win[D_X, F_Y] -> Tmp[B_X, F_Y]", "X=2,Y=2", "B=64,D=4096,F=64"),
    ("A[I_X, J_Y] -> A[I_Y, J_X]", "X=2,Y=2", "I=64,J=64"),
)


def _latex_plan(expr: str, mesh: str, sizes: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "shardalg", "latex", expr, "--plan", "--mesh", mesh, "--sizes", sizes],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def printed() -> list[str]:
    return [_latex_plan(*p) for p in PLANS]


def test_reasons_quote_the_notation_as_math(printed):
    case3 = printed[0]
    assert r"\hbox{(case 3 finish: $\mathrm{ReduceScatter}_{X,K}$ sums } \\" in case3
    assert r"& \qquad \hbox{the local product is $C\{U_{X}\}$)} \\" in case3
    for out in printed:
        assert r"$\{$" not in out and r"$\_$" not in out and r"\_" not in out, out
        assert "-$>$" not in out and "->" not in out


def test_pieces_and_rows():
    pieces = latex_module.reason_pieces("x -> y with W_in[D, F_XY] and C{U_X, U_Y}")
    assert [t for math, t in pieces if math] == ["->", "W_in[D, F_XY]", "C{U_X, U_Y}"]
    assert latex_module.reason_latex("x -> y with W_in[D, F_XY] and C{U_X, U_Y}") == [
        r"\hbox{(x $\rightarrow$ y with $W_{\mathrm{in}}[D, F_{XY}]$ and $C\{U_{X}, U_{Y}\}$)}"
    ]
    long = "word " * 30
    rows = latex_module.reason_latex(long, 40)
    assert len(rows) == 4 and all(len(r) <= len(r"\hbox{}") + 41 for r in rows)
    assert [len(r) for r in latex_module.reason_latex(long)] == [len(long.strip()) + len(r"\hbox{()}")]
    assert latex_module.reason_latex("100% & $5") == [r"\hbox{(100$\%$ $\&$ $\$$5)}"]


def test_katex_renders_them(printed):
    errors = katex_errors([(out.strip(), True, expr) for out, (expr, *_) in zip(printed, PLANS, strict=True)])
    assert not errors, errors


def test_pdflatex_sets_them_with_no_overfull_box(printed, tmp_path):
    if shutil.which("pdflatex") is None:
        pytest.skip(
            "pdflatex is not installed (apt-get install texlive-latex-base texlive-latex-recommended)"
        )
    body = "\n".join(f"\\[\n{out.strip()}\n\\]" for out in printed)
    proc = pdflatex(
        tmp_path,
        "plans",
        "\\documentclass[11pt]{article}\n\\usepackage[T1]{fontenc}\\usepackage{lmodern}\\usepackage{amsmath}\n"
        "\\usepackage[margin=2.5cm]{geometry}\n\\begin{document}\n" + body + "\n\\end{document}\n",
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    log = (tmp_path / "plans.log").read_text(errors="replace")
    over = re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log)
    assert not [w for w in over if float(w) > 1.0], over
