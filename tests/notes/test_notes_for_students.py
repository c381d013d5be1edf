"""The notes as a student reads them: math set as math (no ASCII formulas or notation in running text), no
names of our files, the typed notation in monospace, derivations aligned on the relation, and a figure the
Markdown notes can show in a browser."""

from __future__ import annotations

import re

import pytest

from shardalg.notes.mathtext import ASCII_MATH, MathPart, split_math
from tests.shared.notes_corpus import notes_dir


def running_text(tex: str) -> str:
    """The text a reader sees as text: the document body without math, verbatim or monospace."""
    body = tex.split(r"\begin{document}", 1)[1]
    body = re.sub(r"\\\[.*?\\\]", " ", body, flags=re.S)
    body = re.sub(r"\\begin\{(aligned|align\*|verbatim)\}.*?\\end\{\1\}", " ", body, flags=re.S)
    body = re.sub(r"(?<!\\)\$[^$]*(?<!\\)\$", " ", body)
    body = re.sub(r"\\texttt\{(?:\\.|[^{}\\])*\}", " ", body)
    return re.sub(r"\\(?:begin|end)\{[^}]*\}(?:\{[^}]*\})?", " ", body)


def test_running_text_has_no_ascii_math() -> None:
    tex = (notes_dir() / "shardalg-notes.tex").read_text()
    found = [
        (m.group(), line.strip()[:120])
        for line in running_text(tex).splitlines()
        for m in ASCII_MATH.finditer(line)
    ]
    assert not found, found


def test_the_ascii_math_check_has_teeth() -> None:
    """The check finds what the notes used to show: subscripts, powers, divisions, sets, arrows typed out."""
    for bad in (
        r"the local product is C\{U\_X\}",
        r"(C/W\_ici)\textasciicircum{}2/(M\_X M\_Y F)",
        r"N\textasciicircum{}2/4 chunks of V/N\textasciicircum{}2",
        r"Plan 1 (AllGather\_X(A))",
        "S(d) <- U",
        "each hop moves V/|X| bytes",
        "moves 2DF bytes",
    ):
        assert ASCII_MATH.search(running_text(r"\begin{document}" + bad)), bad
    assert not ASCII_MATH.search(running_text(r"\begin{document}and/or $C\{U_X\}$ \texttt{A[I\_X, J]}"))
    assert not ASCII_MATH.search(
        running_text(r"\begin{document}a 3D mesh, 16GB of HBM, 2TFLOPS, $2D F$ bytes")
    )


def test_engine_sentences_become_math() -> None:
    def tex(s: str) -> list[str]:
        return [p if isinstance(p, str) else f"${p.latex}$" for p in split_math(s)]

    assert tex("the local product is C{U_X}.") == ["the local product is ", r"$C\{U_X\}$", "."]
    assert tex("a batch of (C/W_ici)^2/(M_X M_Y F).") == [
        "a batch of ",
        r"$(C/W_{\text{ici}})^{2}/(M_X M_Y F)$",
        ".",
    ]
    assert tex("Plan 1 (AllGather_X(A)):") == ["Plan 1 ", r"$(\textbf{AllGather}_X(A))$", ":"]
    assert tex("the result C[I, K_X] shards K") == ["the result ", "$C[I, K_X]$", " shards K"]
    assert tex("the crossover D = 2B.") == ["the crossover ", "$D = 2B$", "."]
    assert tex("moves (AllGather in, 4BD bytes over W_ici M_Y)") == [
        "moves (AllGather in, ",
        "$4B D$",
        " bytes over ",
        r"$W_{\text{ici}} M_Y$",
        ")",
    ]
    # a number times dims is a product, set as math; a 3D mesh, 16GB and 2TFLOPS stay words
    assert tex("the gradient moves 2DF bytes") == ["the gradient moves ", "$2D F$", " bytes"]
    assert tex("a 3D mesh with 16GB of HBM and 2TFLOPS") == ["a 3D mesh with 16GB of HBM and 2TFLOPS"]
    assert tex("compute/comms and/or nothing") == ["compute/comms and/or nothing"]


def test_no_internal_names_where_a_reader_looks() -> None:
    out = notes_dir()
    for name in ("shardalg-notes.tex", "shardalg-notes.md"):
        text = (out / name).read_text()
        for internal in (
            "seed 00",
            "Seed 00",
            "seeds/",
            "000_f7b4",
            "002_45aa",
            ".txt",
            "proofs/",
            "x_opt)",
            "d_greater_2b",
            "alltoall_quarter",
            "transpose_step",
            "collective_cost",
            "shardalg.costs",
            "shardalg.numeric",
            "plan(s)",
            "e+0",
            "e+1",
        ):
            assert internal not in text, (name, internal)
    from shardalg.cli import main

    for chip in ("tpu-v5e", "tpu-v5p", "h100"):
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(["hw", "show", chip]) == 0
        assert "seed" not in buf.getvalue().lower(), buf.getvalue()


def test_typed_notation_is_monospace_and_derivations_align_on_the_relation() -> None:
    tex = (notes_dir() / "shardalg-notes.tex").read_text()
    assert r"\texttt{ReduceScatter\_\{X,K\}(C[I, K]\{U\_X\}) -> C[I, K\_X]}" in tex
    assert r"\frac{2 B}{D} &< 1 && \text{(divide by the right side)}" in tex
    assert r"D &> 2 B && \text{(solve for D)}" in tex
    assert r"T_a &= \frac{4 B F}{W_{\text{ici}}}" in tex


def test_derivations_read_as_a_student_writes_them() -> None:
    """Word subscripts upright (X_opt is X with 'opt', not o·p·t), a value on the chip's numbers as a number
    (45,000 bytes, with its unit; not 45000.0 or 4.5e+04), and no row repeated as the result."""
    tex = (notes_dir() / "shardalg-notes.tex").read_text()
    assert r"X_{\text{opt}} &=" in tex and r"V_{\text{shard}} &=" in tex
    assert "X_{opt}" not in tex and "V_{shard}" not in tex and "45000.0" not in tex
    assert r"(= $= 45{,}000" not in tex and r"($= 45{,}000\ \text{bytes}$ with the chip's numbers)" in tex
    for block in re.findall(r"\\begin\{aligned\}(.*?)\\end\{aligned\}", tex, flags=re.S):
        relations = [row.split("&&")[0].strip() for row in block.split("\\\\")]
        assert all(a != b for a, b in zip(relations, relations[1:], strict=False)), block


def test_numbers_and_units_in_running_text() -> None:
    from shardalg.notes.mathtext import number_latex

    assert [number_latex(v) for v in (45000.0, 0.125, 3.35e12, 1.5e-6, 0.0)] == [
        "45{,}000",
        "0.125",
        r"3.35 \times 10^{12}",
        r"1.5 \times 10^{-6}",
        "0",
    ]
    assert split_math("loading at 3.35 TB/s or 4 bytes/s over V/N") == [
        "loading at 3.35 TB/s or 4 bytes/s over ",
        MathPart("V/N"),
    ]
    assert not ASCII_MATH.search("at 3.35 TB/s, 2 GiB/s and 5 FLOPs/s") and ASCII_MATH.search("V/N bytes")


def test_markdown_figure_is_for_a_browser() -> None:
    pytest.importorskip("matplotlib")  # the figure is drawn with the plot extra
    out = notes_dir()
    md = (out / "shardalg-notes.md").read_text()
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert figures and all(f.endswith((".svg", ".png")) for f in figures), figures
    for f in figures:
        assert (out / f).read_text().lstrip().startswith(("<?xml", "<svg")) if f.endswith(".svg") else True


def test_no_identity_is_shown_as_a_result() -> None:
    """A derived condition that is the book's, as printed, is shown once ("the same relation"), never as
    ``Y < F M_Y W/C <=> Y < F M_Y W/C``."""
    tex = (notes_dir() / "shardalg-notes.tex").read_text()
    pairs = re.findall(r"\$([^$]*?) \\iff ([^$]*?)\$", tex)
    assert all(a.strip() != b.strip() for a, b in pairs), [a for a, b in pairs if a.strip() == b.strip()]
    assert "the same relation" in tex
