"""The notes generator and the teaching CLI: the document has every section, generated from the engine; the
.tex and .md are written; engine failures are reported, not dropped; the CLI commands exit as documented."""

from __future__ import annotations

import importlib
import json
import re

import pytest

from shardalg.cli import main
from shardalg.notes import Display, Document, Math, Prose, Raw, Section, Table
from tests.shared.notes_corpus import notes_dir, notes_document

SECTIONS = [
    "Notation",
    "The four cases of a sharded matmul",
    "The collectives and what they cost",
    "Backward: the transposes",
    "Derivations",
    "Worked examples: the questions of chapter 3",
    "Training: the parallel strategies (the book's chapter 5)",
    "Training LLaMA 3 70B (the book's chapter 6)",
    "Inference: serving under a memory cap (the book's chapter 7)",
]


def test_the_notes_have_every_section_and_no_problem():
    doc = notes_document()
    assert [s.title for s in doc.sections] == SECTIONS
    assert [s.title for s in doc.appendix] == ["Proofs"]  # the proofs after the chapters, not in the body
    assert doc.problems == []


def test_sections_choose_the_chapters_and_an_unknown_one_is_refused():
    from shardalg.errors import UsageError
    from shardalg.notes import parse_sections

    assert parse_sections("ch7, ch3") == ("ch3", "ch7")  # in the book's order
    assert parse_sections(None) == ("ch3", "ch5", "ch6", "ch7")
    with pytest.raises(UsageError, match=r"no chapter 'CH5'.*did you mean ch5\?.*ch3, ch5, ch6, ch7"):
        parse_sections("ch3,CH5")


def test_cli_notes_tex_prints_the_source_of_the_chapters_chosen(capsys):
    from shardalg.cli import main

    assert main(["notes", "--sections", "ch6", "--tex", "--quiet"]) == 0
    tex = capsys.readouterr().out
    assert tex.startswith("\\documentclass") and "Training LLaMA 3 70B" in tex
    assert "The four cases" not in tex and "\\appendix" in tex  # ch6 alone, then the proofs
    assert main(["notes", "--tex", "--pdf"]) == 2


def test_the_four_cases_are_ordered_by_time_and_name_the_book_s_plan():
    from shardalg.notes.sections import four_cases

    text = "\n".join(
        b.label
        for sub in four_cases().subsections
        for b in sub.blocks
        if getattr(b, "label", "").startswith("Plan")
    )
    times = [float(t.replace(",", "")) for t in re.findall(r"([\d,]+\.\d) microseconds", text)]
    cases = four_cases().subsections
    assert len(cases) == 4
    for sub in cases:
        plans = [b.label for b in sub.blocks if getattr(b, "label", "").startswith("Plan")]
        secs = [float(re.search(r"([\d,]+\.\d) microseconds", p)[1].replace(",", "")) for p in plans]
        assert secs == sorted(secs), plans  # fastest first, on the chapter's chip
        assert sum("the book's plan" in p for p in plans) == 1, plans
    assert times
    case4 = [b for b in cases[3].blocks if isinstance(getattr(b, "parts", None), tuple)]
    said = " ".join(p for b in case4 for p in b.parts if isinstance(p, str))
    assert "The book's case: case 4: I of A and K of B are both sharded over X." in said  # not "case 1: ..."
    assert "AllGather_X(A); the book's plan" in " ".join(
        b.label for b in cases[3].blocks if getattr(b, "label", "")
    )


def test_the_notes_carry_engine_results():
    tex = (notes_dir() / "shardalg-notes.tex").read_text()
    assert tex.startswith("\\documentclass") and tex.rstrip().endswith("\\end{document}")
    for used in ("amsmath", "amssymb", "booktabs", "graphicx", "array"):
        assert f"\\usepackage{{{used}}}" in tex
    assert tex.count("\\usepackage") == 7  # fontenc, lmodern and the five above: standard packages only
    assert "D > 2 B" in tex  # question 4, derived
    assert r"\textbf{ReduceScatter}" in tex and r"\{U_X\}" in tex
    assert "10 of 10 hold" in tex  # every proof ran and held
    assert "23.3 microseconds" in tex and "46.6 microseconds" in tex  # seed 000 question 2 on v4p
    assert "16,384 bytes per device" in tex  # quick question, int8[128, 2048]


def test_markdown_has_the_same_content_with_dollar_math():
    md = (notes_dir() / "shardalg-notes.md").read_text()
    assert md.startswith("# Sharded matrices")
    for title in SECTIONS:
        assert f"## {title}" in md
    assert "## Appendix A: Proofs" in md
    assert "$$" in md and "$D > 2 B$" in md
    assert "\\documentclass" not in md


def test_the_figure_is_drawn_when_matplotlib_exists():
    pytest.importorskip("matplotlib", reason="matplotlib is the optional [plot] extra")
    assert (notes_dir() / "question4-crossover.pdf").read_bytes().startswith(b"%PDF")


def test_a_failing_section_is_reported(monkeypatch):
    import shardalg.notes.sections as sections
    from shardalg.errors import UsageError
    from shardalg.notes import build_notes

    def broken():
        raise UsageError("on purpose")

    monkeypatch.setattr(sections, "transposes", broken)
    monkeypatch.setattr("shardalg.notes.worked.proofs", lambda: Section("Proofs", ()))
    doc = build_notes()
    assert any("transposes" in p and "on purpose" in p for p in doc.problems)
    assert "Sections that could not be generated" in doc.latex()


def test_blocks_render_to_latex_and_markdown():
    doc = Document(
        "T & t",
        "a_b",
        [
            Section(
                "S_1",
                (
                    Prose.of("50% of ", Math("x_1"), " costs $5"),
                    Display(r"a = b", "label"),
                    Table(("h|1", "h2"), (("a_b", Math(r"\frac{1}{2}")),), caption="c"),
                    Raw("\\raw{}", "raw md", ("y",)),
                ),
            )
        ],
    )
    tex = doc.latex()
    assert r"50\% of $x_1$ costs \$5" in tex and r"\title{T \& t}" in tex
    assert r"$a_b$ & $\frac{1}{2}$ \\" in tex  # a subscript in running text is set as math
    md = doc.markdown()
    assert "50% of $x_1$ costs $5" in md and "| h|1 | h2 |" in md and "raw md" in md
    assert doc.fragments() == [
        ("x_1", False, "S_1"),
        ("a = b", True, "S_1"),
        (r"\frac{1}{2}", False, "S_1"),
        ("a_b", False, "S_1"),
        ("y", True, "S_1"),
    ]


# ---- the teaching CLI ----------------------------------------------------------------------------------


def test_cli_notes_writes_files(tmp_path, capsys):
    assert main(["notes", "--sections", "ch3", "--out", str(tmp_path / "n")]) == 0  # one chapter: quick
    out = capsys.readouterr().out
    assert "shardalg-notes.tex" in out and (tmp_path / "n" / "shardalg-notes.md").exists()


def test_cli_proofs(capsys):
    assert main(["proofs", "alltoall_quarter"]) == 0
    assert "1 of 1 lemmas hold" in capsys.readouterr().out
    assert main(["proofs", "alltoall_quarter", "--format", "json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert record["holds"] is True and record["steps"]
    assert main(["proofs", "no_such_lemma"]) == 2


def test_cli_proofs_exit_1_when_a_lemma_fails(monkeypatch, capsys):
    cost = importlib.import_module("shardalg.costs.stepcost")
    import sympy

    from shardalg.cache import clear_caches

    monkeypatch.setattr(cost, "ALL_TO_ALL_SHARE", sympy.Rational(1, 3))
    clear_caches()  # the step-cost memos are keyed by the CostModel, not by the module's constants
    try:
        assert main(["proofs", "alltoall_quarter"]) == 1
    finally:
        clear_caches()
    assert "FAILS" in capsys.readouterr().out


def test_cli_latex(capsys):
    assert main(["latex", "A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]"]) == 0
    assert capsys.readouterr().out.strip() == r"A[I_X, J] \cdot B[J, K_Y] \rightarrow C[I_X, K_Y]"
    case3 = ["latex", "A[I, J_X] * B[J_X, K] -> C[I, K]", "--plan", "--mesh", "X=4", "--markdown"]
    assert main([*case3, "--sizes", "I=64,J=64,K=64"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("$$") and r"\textbf{AllReduce}_X" in out
    assert main(case3) == 0  # the plans not beaten at every size, with plan's note: no size is made up
    out = capsys.readouterr().out
    assert out.startswith("the cheapest plan depends on") and r"\textbf{AllReduce}_X" in out
    assert main(["latex", "A[I, J_X] * B[J_X, K] -> C[I, K]", "--plan"]) == 2
    assert main(["latex", "A[I_X, J"]) == 2  # a parse error


def test_cli_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="matplotlib is the optional [plot] extra")
    out = tmp_path / "q4.png"
    args = [
        "plot",
        "AllGather_X(Y[D_X, F]) -> Y[D, F]; X[B, D] * Y[D, F] -> Z[B, F]",
        "X[B, D_X] *_LOCAL Y[D_X, F] -> Z[B, F]{U_X}; AllReduce_X(Z[B, F]{U_X}) -> Z[B, F]",
        "--over",
        "D",
        "--range",
        "256:65536",
        "--mesh",
        "X=8",
        "--sizes",
        "B=1024,F=16384",
        "--hw",
        "tpu-v5p",
        "--regime",
        "comms",
        "--out",
        str(out),
        "--labels",
        "gather,reduce",
    ]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "crossover: D = 2048" in text and "reduce cheaper above" in text
    assert out.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize(
    "bad",
    [
        ["--over", "D;x", "--range", "1:2"],
        ["--over", "D", "--range", "5:1"],
        ["--over", "D", "--range", "1:2", "--sizes", "D=4"],
        ["--over", "D", "--range", "1:2", "--labels", "onlyone"],
    ],
)
def test_cli_plot_rejects_bad_arguments(tmp_path, bad):
    args = [
        "plot",
        "AllGather_X(A[I_X, D]) -> A[I, D]",
        "AllGather_X(A[I_X, D]) -> A[I, D]",
        "--mesh",
        "X=4",
        "--out",
        str(tmp_path / "x.png"),
        *bad,
    ]
    assert main(args) == 2


def test_fragments_of_engine_objects():
    from shardalg.algebra.mesh import Mesh
    from shardalg.algebra.symbols import dim_size
    from shardalg.costs.derive import compare
    from shardalg.notation.parse import parse_statement
    from shardalg.notes.fragments import to_latex, to_markdown
    from shardalg.numeric.proofs import prove
    from shardalg.planning.planner import plan

    stmt = parse_statement("A[I, J_X] * B[J_X, K] -> C[I, K]")
    assert to_markdown(stmt) == f"${stmt.latex()}$"
    p = plan(stmt, mesh=Mesh(X=4))
    assert to_latex(p) == p.latex() and to_markdown(p).startswith("$$\n\\begin{aligned}")
    d = compare(
        "X[B, D_X] *_LOCAL Y[D_X, F] -> Z[B, F]{U_X}\nAllReduce_X(Z[B, F]{U_X}) -> Z[B, F]",
        "AllGather_X(Y[D_X, F]) -> Y[D, F]\nX[B, D] * Y[D, F] -> Z[B, F]",
        solve_for="D",
        mesh=Mesh(X=None),
    )
    assert to_markdown(d) == f"$$\n{d.latex()}\n$$"
    assert to_markdown(2 * dim_size("B")) == "$2 B$"
    lemma = prove("alltoall_quarter")
    assert to_latex(lemma) == lemma.latex() and to_markdown(lemma) == lemma.markdown()
    table = Table(("a",), (("x",),))
    assert to_markdown(table).startswith("| a |")
    with pytest.raises(Exception, match="no LaTeX form"):
        to_latex(object())


def test_the_strategy_map_section_says_which_plan_it_took_where_sizes_decide():
    # the map plans with sizes unknown; where they decide a forward plan the notes say which plan the map
    # prices, why (ranked first at made-up sizes), which sizes decide and which plans are the cheapest elsewhere
    from shardalg.algebra.mesh import as_mesh
    from shardalg.planning.planner import plans

    md = (notes_dir() / "shardalg-notes.md").read_text()
    assert "Where sizes not given decide a forward plan, the map prices the plan ranked first with" in md
    tp = "In[B, D_Y] * W_in[D, F_Y] -> Tmp[B, F_Y]"
    row = next(line for line in md.splitlines() if line.startswith("| TP |") and tp in line)
    taken, others = row.split(" | ")[2], row.split(" | ")[4]
    assert taken == r"$\textbf{AllGather}_Y(\text{In})$"
    assert others == r"$\textbf{AllToAll}_Y(W_{\text{in}})$, $\textbf{ReduceScatter}_Y(\text{Tmp})$ |"
    choice = plans(tp, as_mesh("Y")).choice  # the row is the planner's: undecided over B, D, F
    assert not choice.decided and "B, D, F" in row and choice.symbols == ("B", "D", "F")
