r"""A plan printed in LaTeX parses back to its statements (docs/cli.md: "Printing is the inverse of parsing, in
each format"), whatever its reasons say: each row of a reason is one ``\hbox{...}``, which the grammar skips
as a remark (grammar/shardalg.lark ``LATEX_REASON``) however its words run and its braces nest, and which sets
the reason's words as text and the notation it quotes as math (a sub-axis as ``Y{:}(1)2``)."""

from __future__ import annotations

import dataclasses
import importlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

import shardalg
from shardalg.notation.parse import parse
from shardalg.notation.plan import Plan
from shardalg.notation.printing import latex
from tests.shared.notes_corpus import katex_errors
from tests.shared.plans import P

latex_module = importlib.import_module("shardalg.notation.printing.latex")

MESH = "X=2,Y=4"
SIZES = "I=64,J=64,K=64,L=64,B=64,D=64,F=64,T=64,S=64"
# a tester's sixteen, then tensors named with a subscript (quoted in reasons as W_{\mathrm{q}}) and sub-axes
EXPRESSIONS = (
    "A[I, J_X] · B[J_X, K] -> C[I, K_X]",
    "A[I_X, J] · B[J, K_X] -> C[I, K]",
    "X[B, D] · Y[D_X, F] -> Z[B, F]",
    "A[I_X, J_Y] · B[J_Y, K_X] -> C[I, K]",
    "A[I_X, J] -> A[I_Y, J]",
    "A[I_XY, J] -> A[I, J_XY]",
    "A[I_X, J_Y] -> A[I_Y, J_X]",
    "softmax_S(Sc[B, T, S_X]) -> P[B, T, S_X]",
    "rmsnorm_D(X[B, D_X]) -> Y[B, D_X]",
    "sum_D(X[B, D_X]) -> S[B]",
    "X[B_X, D] + Y[B, D_X] -> Z[B, D]",
    "layernorm_D(X[B, D_X]) -> Y[B, D]",
    "gelu(H[B, F]{U_X}) -> G[B, F]",
    "A[I, J_{Y:(1)2}] · B[J_{Y:(1)2}, K] -> C[I, K_{Y:(1)2}]",
    "Hidden[B_X, D] · Weights[D_Y, F] -> Output[B, F_X]",
    "A[I_X, J, K_Y] · B[K_Y, L] -> C[I, J_X, L]",
    "X[B, D] · W_q[D_X, F] -> Z[B, F]",
    "In[B_X, D] · W_in[D_X, F] -> Out[B_X, F]",
    "In[B_X, D_Y] · W_in[D_X, F_Y] -> Tmp[B_X, F_Y]",
    "A[I_{Y:(2)2}, J] -> A[I, J_{Y:(2)2}]",
    "W_out[F_{Y:(1)2}, D] · H[B, F_{Y:(1)2}] -> O[B, D]",
)
ROW = re.compile(r"& \\qquad (\\hbox\{.*\})(?: \\\\)?")
MATH = re.compile(r"\$[^$]*\$")


def _plans(expr: str) -> list[Plan]:
    plans = shardalg.plans(expr, MESH, sizes=SIZES)
    assert plans, expr
    return plans


def _statements(plan: Plan) -> tuple:
    return tuple(s.statement() for s in plan.steps)


def _boxes(reason_rows: list[str]) -> str:
    r"""The words the rows' ``\hbox``es hold, joined: each row is one box."""
    bodies = []
    for row in reason_rows:
        assert row.startswith(r"\hbox{") and row.endswith("}"), row
        bodies.append(row[len(r"\hbox{") : -1])
    return "".join(bodies)


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z]+", text)


def _check_reasons_render_as_text(plan: Plan, printed: str) -> None:
    """Under each statement, its reason's rows: each one box, whose words outside ``$`` are the reason's own
    words (the prose, none set as math), and whose math is the notation the reason quotes."""
    if not printed.startswith("\\begin{aligned}"):  # one step, its reason after it on its line
        statement, _, box = printed.partition(" \\quad ")
        assert len(plan.steps) == 1 and (box or not plan.steps[0].reason), printed
        printed = "\n".join(["", statement] + ([f"& \\qquad {box}"] if box else []) + [""])
    lines = printed.split("\n")[1:-1]
    rows_of: list[list[str]] = []
    for line in lines:
        m = ROW.fullmatch(line)
        if m is None:
            rows_of.append([])
        else:
            rows_of[-1].append(m[1])
    assert len(rows_of) == len(plan.steps), printed
    for step, rows in zip(plan.steps, rows_of, strict=True):
        if not step.reason:
            assert not rows
            continue
        body = _boxes(rows)
        pieces = latex_module.reason_pieces("(" + " ".join(step.reason.split()) + ")")
        prose = "".join(t for math, t in pieces if not math)
        assert _words(MATH.sub("", body)) == _words(prose), (step.reason, rows)
        for math, t in pieces:
            if math:
                assert f"${latex_module._math(t)}$" in body, (t, rows)


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_latex_plan_parses_back_to_its_statements(expr: str) -> None:
    for plan in _plans(expr):
        for mode in ("plain", "inline", "display"):
            printed = latex(plan, mode=mode)
            assert parse(printed).statements == _statements(plan), printed
        for step in plan.steps:  # one step: its reason follows it on its line, after \quad
            assert parse(latex(step)).statements == (step.statement(),), latex(step)


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_latex_plan_reasons_render_as_text(expr: str) -> None:
    for plan in _plans(expr):
        _check_reasons_render_as_text(plan, latex(plan))


def test_sub_axis_reason_keeps_its_words_as_prose() -> None:
    """ "over {Y:(1)2}" is a word, then a set of axes written as the LaTeX printer writes sub-axes."""
    plan = _plans("A[I, J_{Y:(1)2}] · B[J_{Y:(1)2}, K] -> C[I, K_{Y:(1)2}]")[0]
    out = latex(plan)
    assert r"\hbox{(case 3: both operands shard J over $\{Y{:}(1)2\}$, } \\" in out
    assert r"\hbox{so the local product is $C\{U_{Y{:}(1)2}\}$)} \\" in out
    assert r"$\mathrm{ReduceScatter}_{Y{:}(1)2,K}$" in out
    assert r"\mathrm{over}" not in out and r"\mathrm{Y:" not in out
    assert latex_module.reason_latex("spare {X,Y:(2)2} and I_{data:(1)2}") == [
        r"\hbox{(spare $\{X, Y{:}(2)2\}$ and $I_{\mathrm{data}{:}(1)2}$)}"
    ]


def test_katex_renders_every_plan() -> None:
    fragments = [
        (latex(plan), True, f"{expr} plan {i + 1}")
        for expr in EXPRESSIONS
        for i, plan in enumerate(_plans(expr))
    ]
    errors = katex_errors(fragments)
    assert not errors, errors[:3]


# ------------------------------------------------------------------ any reason
# Words, the notation reasons quote (subscripted names, sub-axes, marks, sets of axes), braces nested or
# unbalanced, and the characters LaTeX escapes: a reason says what it likes and the plan still parses back.
_PIECES = st.one_of(
    st.sampled_from(
        [
            "over",
            "X",
            "in both operands instead of reducing",
            "W_q",
            "W_in[D, F_XY]",
            "{Y:(1)2}",
            "{X,Y:(2)2}",
            "C{U_{Y:(1)2}}",
            "C[I_{X,Y:(2)2}, K]{U_X, U_Y}",
            "ReduceScatter_{X,K}",
            "Shift_{X,+1}",
            "->",
            "<=",
            "{{{{x}}}}",
            "}}",
            "{",
            r"\\",
            "$",
            "%",
            "&",
            "#",
            "^",
            "~",
            "mesh",
            "where",
            "A[{]",
            "x\ny",
        ]
    ),
    st.text(max_size=12),
)
_REASONS = st.lists(_PIECES, max_size=16).map(" ".join)
_PLAN = P(
    "AllGather_X(A[I, J_X]) -> A[I, J]",
    "A[I, J] · B[J, K_X] -> C[I, K_X]",
    "ReduceScatter_{X,K}(D[I, K]{U_X}) -> D[I, K_X]",
)


@given(st.lists(_REASONS, min_size=len(_PLAN.steps), max_size=len(_PLAN.steps)))
def test_any_reasons_parse_back(reasons: list[str]) -> None:
    steps = tuple(dataclasses.replace(s, reason=r) for s, r in zip(_PLAN.steps, reasons, strict=True))
    plan = dataclasses.replace(_PLAN, steps=steps)
    printed = latex(plan)
    assert parse(printed).statements == _statements(plan), printed
    for step in steps:
        assert parse(latex(step)).statements == (step.statement(),), latex(step)
