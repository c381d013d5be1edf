"""The notation's functions and elementwise operators (issue 26 items 1 and 2): each form parses to one AST
in ASCII, Unicode and LaTeX, prints back in each and round-trips; bad forms get a ParseError with a span."""

from __future__ import annotations

from fractions import Fraction

import pytest

from shardalg.errors import ParseError
from shardalg.notation.jsonread import from_json
from shardalg.notation.parse import parse, parse_statement
from shardalg.notation.printing import latex, text, to_json, unicode
from shardalg.notation.syntax import Apply, Arrow, Dim, Op, Product, Tensor

H = Tensor("H", (Dim("B"), Dim("F", ("Y",))))
G = Tensor("G", (Dim("B"), Dim("F", ("Y",))))
X = Tensor("X", (Dim("B"), Dim("D")))
XS = Tensor("X", (Dim("B"), Dim("D", ("X",))))
ATT = Tensor("Att", (Dim("B"), Dim("D")))
R = Tensor("R", (Dim("B"), Dim("D")))
S = Tensor("S", (Dim("B"),), unreduced=("X",))
A, B_, C = (Tensor(n, (Dim("I"),)) for n in "ABC")

# (ASCII, Unicode, LaTeX) as the printers write them, and the AST all three parse to
TABLE: list[tuple[str, str, str, object]] = [
    (
        "gelu(H[B, F_Y]) -> G[B, F_Y]",
        "gelu(H[B, F_Y]) → G[B, F_Y]",
        r"\mathrm{gelu}(H[B, F_Y]) \rightarrow G[B, F_Y]",
        Arrow(Apply(Op.GELU, (H,)), G),
    ),
    ("silu(X[B, D])", "silu(X[B, D])", r"\mathrm{silu}(X[B, D])", Apply(Op.SILU, (X,))),
    ("exp(X[B, D])", "exp(X[B, D])", r"\mathrm{exp}(X[B, D])", Apply(Op.EXP, (X,))),
    ("relu(X[B, D])", "relu(X[B, D])", r"\mathrm{relu}(X[B, D])", Apply(Op.RELU, (X,))),
    (
        "scale_{0.125}(X[B, D])",
        "scale_{0.125}(X[B, D])",
        r"\mathrm{scale}_{0.125}(X[B, D])",
        Apply(Op.SCALE, (X,), factor=Fraction(1, 8)),
    ),
    (
        "X[B, D] + Att[B, D] -> R[B, D]",
        "X[B, D] + Att[B, D] → R[B, D]",
        r"X[B, D] + \text{Att}[B, D] \rightarrow R[B, D]",
        Arrow(Apply(Op.ADD, (X, ATT)), R),
    ),
    ("A[I] - B[I]", "A[I] − B[I]", "A[I] - B[I]", Apply(Op.SUBTRACT, (A, B_))),
    ("A[I] .* B[I]", "A[I] ⊙ B[I]", r"A[I] \odot B[I]", Apply(Op.MULTIPLY, (A, B_))),
    (
        "A[I] .* (B[I] + C[I])",
        "A[I] ⊙ (B[I] + C[I])",
        r"A[I] \odot (B[I] + C[I])",
        Apply(Op.MULTIPLY, (A, Apply(Op.ADD, (B_, C)))),
    ),
    (
        "A[I] - (B[I] - C[I])",
        "A[I] − (B[I] − C[I])",
        "A[I] - (B[I] - C[I])",
        Apply(Op.SUBTRACT, (A, Apply(Op.SUBTRACT, (B_, C)))),
    ),
    (
        "sum_D(X[B, D_X]) -> S[B]{U_X}",
        "sum_D(X[B, D_X]) → S[B]{U_X}",
        r"\mathrm{sum}_D(X[B, D_X]) \rightarrow S[B] \{U_X\}",
        Arrow(Apply(Op.SUM, (XS,), "D"), S),
    ),
    ("max_D(X[B, D])", "max_D(X[B, D])", r"\mathrm{max}_D(X[B, D])", Apply(Op.MAX, (X,), "D")),
    ("mean_D(X[B, D])", "mean_D(X[B, D])", r"\mathrm{mean}_D(X[B, D])", Apply(Op.MEAN, (X,), "D")),
    (
        "softmax_D(X[B, D_X])",
        "softmax_D(X[B, D_X])",
        r"\mathrm{softmax}_D(X[B, D_X])",
        Apply(Op.SOFTMAX, (XS,), "D"),
    ),
    (
        "rmsnorm_D(X[B, D])",
        "rmsnorm_D(X[B, D])",
        r"\mathrm{rmsnorm}_D(X[B, D])",
        Apply(Op.RMSNORM, (X,), "D"),
    ),
    (
        "layernorm_D(X[B, D])",
        "layernorm_D(X[B, D])",
        r"\mathrm{layernorm}_D(X[B, D])",
        Apply(Op.LAYERNORM, (X,), "D"),
    ),
]


@pytest.mark.parametrize(("ascii", "uni", "tex", "ast"), TABLE, ids=[row[0] for row in TABLE])
def test_each_form_parses_prints_and_round_trips(ascii: str, uni: str, tex: str, ast: object) -> None:
    for source in (ascii, uni, tex):
        assert parse_statement(source) == ast
    assert (text(ast), unicode(ast), latex(ast)) == (ascii, uni, tex)
    assert from_json(to_json(ast)) == ast


@pytest.mark.parametrize(
    "source",
    [
        r"\operatorname{gelu}(H[B, F_Y]) \to G[B, F_Y]",
        r"\text{gelu}(H[B, F_Y]) → G[B, F_Y]",
        "gelu (H[B, F_Y]) -> G[B, F_Y]",
    ],
)
def test_other_spellings_are_accepted(source: str) -> None:
    assert parse_statement(source) == TABLE[0][3]


def test_the_einsum_product_is_unchanged_and_binds_tighter_than_a_sum() -> None:
    ij, jk, ik = (Tensor(n, (Dim(a), Dim(b))) for n, (a, b) in zip("ABC", ["IJ", "JK", "IK"], strict=True))
    assert parse_statement("A[I, J] * B[J, K] + C[I, K]") == Apply(Op.ADD, (Product(ij, jk), ik))
    assert parse_statement("A[I, J] · B[J, K]") == Product(ij, jk)


def test_a_tensor_may_still_be_named_like_a_function() -> None:
    """A function's name is a keyword only before a subscript or a parenthesis."""
    assert parse_statement("max[I] -> sum[I]") == Arrow(
        Tensor("max", (Dim("I"),)), Tensor("sum", (Dim("I"),))
    )


def test_a_program_mixes_functions_and_products() -> None:
    prog = parse("mesh X=2\nH[B, F] .* U[B, F] -> G[B, F]\nrmsnorm_D(G[B, D]) -> N[B, D]")
    assert [type(s.expr).__name__ for s in prog.statements] == ["Apply", "Apply"]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("sum(X[B, D])", "sum names the one dim it works along: sum_D(X[B, D])"),
        ("gelu_D(X[B, D])", "gelu is elementwise and takes no subscript: gelu(X[B, D])"),
        (
            "scale(X[B, D])",
            "scale takes its factor as a subscript, a decimal: scale_{0.125}(X[B, D])",
        ),
        ("scale_{0}(X[B, D])", "a scale's factor is a nonzero decimal, not 0"),
        ("gelu(A[I], B[I])", "gelu takes one operand, not 2"),
        ("sum_{0.5}(X[B, D])", "sum names the one dim it works along: sum_D(X[B, D])"),
    ],
)
def test_bad_forms_are_parse_errors_with_a_span(source: str, message: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_statement(source)
    assert err.value.message == message
    assert err.value.span is not None


# ---- the backward's statements: a primed function is the derivative f'(X, dY) (issue 26 item 4) -------------
DG = Tensor("dG", (Dim("B"), Dim("F", ("Y",))))
DS = Tensor("dS", (Dim("B"),))

DERIVATIVES: list[tuple[str, str, str, object]] = [
    (
        "gelu'(H[B, F_Y], dG[B, F_Y])",
        "gelu'(H[B, F_Y], dG[B, F_Y])",
        r"\mathrm{gelu'}(H[B, F_Y], \text{dG}[B, F_Y])",
        Apply(Op.GELU_D, (H, DG)),
    ),
    (
        "sum'_D(X[B, D_X], dS[B])",
        "sum'_D(X[B, D_X], dS[B])",
        r"\mathrm{sum'}_D(X[B, D_X], \text{dS}[B])",
        Apply(Op.SUM_D, (XS, DS), "D"),
    ),
    (
        "softmax'_D(X[B, D], R[B, D])",
        "softmax'_D(X[B, D], R[B, D])",
        r"\mathrm{softmax'}_D(X[B, D], R[B, D])",
        Apply(Op.SOFTMAX_D, (X, R), "D"),
    ),
    (
        "scale_{-1}(X[B, D])",
        "scale_{-1}(X[B, D])",
        r"\mathrm{scale}_{-1}(X[B, D])",
        Apply(Op.SCALE, (X,), factor=Fraction(-1)),
    ),
]


@pytest.mark.parametrize(("ascii_", "uni", "tex", "ast"), DERIVATIVES, ids=[r[0] for r in DERIVATIVES])
def test_a_derivative_parses_prints_and_round_trips(ascii_: str, uni: str, tex: str, ast: object) -> None:
    for source in (ascii_, uni, tex):
        assert parse_statement(source) == ast
    assert (text(ast), unicode(ast), latex(ast)) == (ascii_, uni, tex)
    assert from_json(to_json(ast)) == ast


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("gelu'(H[B, F])", "gelu' takes 2 operands, not 1"),
        ("scale'(X[B, D])", None),  # a linear function has no derivative record: scale' is no function
    ],
)
def test_bad_derivative_forms(source: str, message: str | None) -> None:
    with pytest.raises(ParseError) as err:
        parse_statement(source)
    if message is not None:
        assert err.value.message == message


def test_a_tensor_named_with_a_prime_is_still_a_tensor() -> None:
    """The prime makes a function's derivative only where an argument or subscript follows."""
    assert parse_statement("gelu'[B, F]") == Tensor("gelu'", (Dim("B"), Dim("F")))


@pytest.mark.parametrize(("given", "written"), [(0.5, "{0.5}"), (0.1, "{0.1}"), (2, "2"), (-1.25, "{-1.25}")])
def test_a_scale_given_a_number_in_code_is_the_decimal_it_reads_as(given: float, written: str) -> None:
    """``Apply(Op.SCALE, ..., factor=0.5)`` built in code, as a notebook or a test strategy may: its factor is
    the Fraction the text ``scale_{0.5}`` parses to, so it prints and compares as the text does (a float
    factor raised AttributeError when printed; the fuzz profile of the functions' backward found it)."""
    built = Apply(Op.SCALE, (X,), factor=given)
    assert built == parse_statement(f"scale_{written}(X[B, D])")
    assert text(built) == f"scale_{written}(X[B, D])" and isinstance(built.factor, Fraction)
