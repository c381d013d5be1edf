"""The audit's LaTeX and HTML carry everything its text does (one jax subprocess, ~5 s): the header, each
statement's plans and lines, the FLAG, the cheapest-plan lines, the backward section, the verdict, the notes.
Each text line is looked for in the other format read back as plain text (tags and TeX markup undone); each
plan block of the text parses back from the LaTeX."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

pytest.importorskip("jax", reason="jax is not installed (pip install 'shardalg[jax]'); CI installs it")

from shardalg.algebra.mesh import Mesh  # noqa: E402
from shardalg.audit.report import report_html, report_latex, report_text  # noqa: E402
from shardalg.audit.run import AuditJob, audit_files  # noqa: E402
from shardalg.notation.parse import parse  # noqa: E402

CASES = str(Path(__file__).with_name("cases.py"))
JOBS = {  # a backward with its pairs, and a flagged statement
    "megatron": (
        f"{CASES}:mlp",
        "x: bf16[B, D]; w_in: bf16[D, F_Y]; w_out: bf16[F_Y, D]",
        "Y=4",
        {"B": 64, "D": 256, "F": 1024},
        True,
    ),
    "poor": (
        f"{CASES}:matmul",
        "A: bf16[I_XY, J]; B: bf16[J_XY, K]",
        "X=2,Y=4",
        {"I": 8, "J": 4096, "K": 4096},
        False,
    ),
}


@pytest.fixture(scope="module")
def audits() -> dict[str, object]:
    jobs = [AuditJob.of(t, [i], Mesh.parse(m), s, backward=b) for t, i, m, s, b in JOBS.values()]
    return dict(zip(JOBS, audit_files(jobs), strict=True))


def _plain_html(s: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", s))


def _plain_latex(s: str) -> str:
    s = re.sub(r"\$([^$]*?)\\times\$", r"\1x", s)
    s = re.sub(r"\\(?:textbf|texttt|emph|paragraph)\{((?:[^{}]|\\[{}])*)\}", r"\1", s)
    s = re.sub(r"\\(?:noindent|item|quad)\b ?", "", s)
    for a, b in (("\\textbackslash{}", "\\"), ("\\_", "_"), ("\\%", "%"), ("\\&", "&"), ("\\#", "#")):
        s = s.replace(a, b)
    return s.replace("\\$", "$").replace("\\{", "{").replace("\\}", "}")


def _said(text: str) -> list[str]:
    """The text report's lines that say something (not plan lines), without their ``#``; a plan line's
    comment too."""
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            out.append(line.lstrip("#").strip())
        elif "  # " in line:
            out.append(line.split("  # ", 1)[1])
    return out


def _plans(text: str) -> list[str]:
    """The text report's plan blocks (consecutive lines that are not comments)."""
    blocks: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.startswith("#"):
            blocks.append([])
        else:
            blocks[-1].append(line.split("  # ", 1)[0])
    return ["\n".join(b) for b in blocks if b]


@pytest.mark.parametrize("name", sorted(JOBS))
def test_every_line_of_the_text_is_in_the_latex_and_the_html(audits, name):
    a = audits[name]
    text = report_text(a)
    tex, page = _plain_latex(report_latex(a)), _plain_html(report_html(a))
    said = _said(text)
    if name == "megatron":
        assert any(s.startswith("backward (jax.grad") for s in said)
        assert "1 of 1 backward collectives are transposes of forward ones" in said
        assert any(s.startswith("XLA's plan is the cheapest") for s in said)
    else:
        assert any(s.startswith("FLAG: XLA's plan costs") for s in said)
    assert any(s.startswith("verdict: ") for s in said)
    for s in said:
        assert s in tex, (s, tex)
        assert s in page, (s, page)
    for line in text.splitlines():  # each plan line as written, reason and all, in the HTML
        assert line.startswith("#") or line in page, line
    shown = re.findall(r"\\\[\n(.*?)\n\\\]", report_latex(a), flags=re.S)  # and parsed back from the LaTeX
    assert [parse(b) for b in shown] == [parse(b) for b in _plans(text)]
