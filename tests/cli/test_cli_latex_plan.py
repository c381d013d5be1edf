"""``shardalg latex --plan``: where the cheapest plan depends on sizes not given, it says so as ``plan`` does
(the plans not beaten at every size, with the same note, in the output and on stderr); with the sizes, one
plan and no note."""

from __future__ import annotations

from shardalg.cli import main
from shardalg.notation.parse import parse

EXPR = "A[I, J_X] · B[J, K] -> C[I, K]"
NOTE = (
    "the cheapest plan depends on J, K: 2 plans are not beaten at every size by another; give J, K to choose"
)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _comments(out: str) -> list[str]:
    return [line.removeprefix("% ") for line in out.splitlines() if line.startswith("%")]


def test_latex_plan_without_the_sizes_shows_the_plans_plan_shows_with_its_note(capsys) -> None:
    code, out, err = run(capsys, "latex", EXPR, "--mesh", "X=4", "--plan")
    assert code == 0
    _, plan_out, _ = run(capsys, "plan", EXPR, "--mesh", "X=4", "--format", "latex")
    said = [line for line in _comments(plan_out) if line.startswith(("the cheapest", "AllGather", "Slice"))]
    assert said[0] == NOTE
    assert _comments(out)[: len(said)] == said  # the same note and contenders as plan's
    assert out.count("\\begin{aligned}") == 2  # both plans, as plan prints them
    assert "\\textbf{AllGather}_X" in out and "\\textbf{AllReduce}_X" in out
    assert f"shardalg: note: {NOTE}\n" in err


def test_latex_plan_markdown_without_the_sizes_keeps_the_note_outside_the_math(capsys) -> None:
    code, out, err = run(capsys, "latex", EXPR, "--mesh", "X=4", "--plan", "--markdown")
    assert code == 0 and f"shardalg: note: {NOTE}\n" in err
    assert NOTE in out and out.count("$$\n\\begin{aligned}") == 2


def test_latex_plan_with_the_sizes_prints_one_plan_and_no_note(capsys) -> None:
    for sizes, op in (("J=4096,K=64", "AllReduce"), ("J=64,K=4096", "AllGather")):
        code, out, err = run(capsys, "latex", EXPR, "--mesh", "X=4", "--plan", "--sizes", sizes)
        assert code == 0 and err == ""
        assert out.count("\\begin{aligned}") == 1 and f"\\textbf{{{op}}}_X" in out
        assert "%" not in out and "depends on" not in out


def test_latex_of_an_expression_is_unchanged(capsys) -> None:
    code, out, err = run(capsys, "latex", EXPR)
    assert code == 0 and err == ""
    assert parse(out) == parse(EXPR)
