r"""The printers: pinned output of each format for a few nodes, settings, determinism, plans, JSON, and
(when node and KaTeX are installed) that every LaTeX form renders in KaTeX."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from shardalg.errors import UsageError
from shardalg.notation.jsonread import from_json
from shardalg.notation.parse import parse, parse_statement, parse_tensor
from shardalg.notation.plan import Plan, Step
from shardalg.notation.printing import latex, render, text, to_json, unicode
from shardalg.notation.printing.symbology import GLYPHS, latex_escape_text
from shardalg.notation.syntax import Collective, Dim, DType, Op, Product, Tensor
from tests.shared import ROOT

# source -> (text, unicode, latex)
PINNED: list[tuple[str, tuple[str, str, str]]] = [
    ("A[I_XY, J]{U_Z}", ("A[I_XY, J]{U_Z}", "A[I_XY, J]{U_Z}", r"A[I_{XY}, J] \{U_Z\}")),
    (
        r"\mathbf{A}[I_X, J] \cdot \mathbf{B}[J, K_Y] \rightarrow \mathbf{C}[I_X, K_Y]",
        (
            "A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]",
            "A[I_X, J] · B[J, K_Y] → C[I_X, K_Y]",
            r"A[I_X, J] \cdot B[J, K_Y] \rightarrow C[I_X, K_Y]",
        ),
    ),
    (
        r"A[I, J_X] \cdot_\text{LOCAL} B[J_X, K] \rightarrow C[I, K] \{\ U_X \}",
        (
            "A[I, J_X] *_LOCAL B[J_X, K] -> C[I, K]{U_X}",
            "A[I, J_X] ·_LOCAL B[J_X, K] → C[I, K]{U_X}",
            r"A[I, J_X] \cdot_{\text{LOCAL}} B[J_X, K] \rightarrow C[I, K] \{U_X\}",
        ),
    ),
    (
        "X[B, D] ·_D Y[D_X, F] -> Z[B, F]",
        (
            "X[B, D] *_D Y[D_X, F] -> Z[B, F]",
            "X[B, D] ·_D Y[D_X, F] → Z[B, F]",
            r"X[B, D] \cdot_D Y[D_X, F] \rightarrow Z[B, F]",
        ),
    ),
    (
        "ReduceScatter_{Y,J}: A[I_X,J]{U_Y} -> A[I_X, J_Y]",
        (
            "ReduceScatter_{Y,J}(A[I_X, J]{U_Y}) -> A[I_X, J_Y]",
            "ReduceScatter_{Y,J}(A[I_X, J]{U_Y}) → A[I_X, J_Y]",
            r"\textbf{ReduceScatter}_{Y,J}(A[I_X, J] \{U_Y\}) \rightarrow A[I_X, J_Y]",
        ),
    ),
    (
        "AllGather_XY [B_X, D_Y]",
        ("AllGather_XY([B_X, D_Y])", "AllGather_XY([B_X, D_Y])", r"\textbf{AllGather}_{XY}([B_X, D_Y])"),
    ),
    (
        "In: bf16[B_{data}, D_{data,model}] · W_in[D, F]{I_X}",
        (
            "In: bf16[B_{data}, D_{data,model}] * W_in[D, F]{I_X}",
            "In: bf16[B_{data}, D_{data,model}] · W_in[D, F]{I_X}",
            r"\text{In}: \text{bf16}[B_{\text{data}}, D_{\text{data},\text{model}}] \cdot W_{\text{in}}[D, F] \{I_X\}",
        ),
    ),
    (
        "A[I] · (B[I] · C[I])",
        ("A[I] * (B[I] * C[I])", "A[I] · (B[I] · C[I])", r"A[I] \cdot (B[I] \cdot C[I])"),
    ),
    ("fp32[1024_X, 4096]", ("fp32[1024_X, 4096]", "fp32[1024_X, 4096]", r"\text{fp32}[1024_X, 4096]")),
    ("A'[I_{\\text{DP}}]", (r"A'[I_{\text{DP}}]", r"A'[I_{\text{DP}}]", r"A'[I_{\text{DP}}]")),
    (
        "ReduceScatter_{data model}(C[I]{U_{data,model}})",
        (
            "ReduceScatter_{data model}(C[I]{U_{data,model}})",
            "ReduceScatter_{data model}(C[I]{U_{data,model}})",
            r"\textbf{ReduceScatter}_{\text{data}\,\text{model}}(C[I] \{U_{\text{data},\text{model}}\})",
        ),
    ),
]


@pytest.mark.parametrize(("source", "expected"), PINNED, ids=[s for s, _ in PINNED])
def test_pinned_output(source: str, expected: tuple[str, str, str]) -> None:
    node = parse_statement(source)
    assert (text(node), unicode(node), latex(node)) == expected
    assert str(node) == expected[0] and node.unicode() == expected[1] and node.latex() == expected[2]
    assert node._repr_latex_() == f"${expected[2]}$"


def test_text_is_ascii() -> None:
    for source, _ in PINNED:
        assert text(parse(source)).isascii()


def test_program_layout() -> None:
    program = parse("A[I_X] -> B[I]\nwhere I=1024\nmesh X=4, Y=2\nAllGather_X(A[I_X])")
    assert text(program) == "mesh X=4, Y=2\nA[I_X] -> B[I]\nAllGather_X(A[I_X])\nwhere I=1024"
    assert latex(program) == (
        "\\begin{aligned}\n"
        "\\text{mesh}\\; X=4, Y=2 \\\\\n"
        "A[I_X] &\\rightarrow B[I] \\\\\n"
        "\\textbf{AllGather}_X(A[I_X]) \\\\\n"
        "\\text{where}\\; I=1024\n"
        "\\end{aligned}"
    )
    assert latex(parse("A[I] -> B[I]")) == r"A[I] \rightarrow B[I]"
    assert latex(parse("A[I]"), mode="display") == "$$A[I]$$"
    assert latex(parse("A[I]"), mode="inline") == "$A[I]$"
    assert text(parse("")) == ""


def _plan() -> Plan:
    a, b = parse_tensor("A[I, J_X]"), parse_tensor("B[J_X, K]")
    c, c2 = parse_tensor("C[I, K]{U_X}"), parse_tensor("C[I, K_X]")
    steps = (
        Step(Op.EINSUM, (a, b), c, contract=("J",), local=True, reason="case 3: the local product is C{U_X}"),
        Step(
            Op.REDUCE_SCATTER, (c,), c2, axes=("X",), dim="K", reason="50% & ~ cheaper than AllReduce_X\nhere"
        ),
    )
    return Plan((a, b), steps, c2)


def test_plan_and_step_printing() -> None:
    plan = _plan()
    assert text(plan) == (
        "A[I, J_X] *_{LOCAL,J} B[J_X, K] -> C[I, K]{U_X}  # case 3: the local product is C{U_X}\n"
        "ReduceScatter_{X,K}(C[I, K]{U_X}) -> C[I, K_X]  # 50% & ~ cheaper than AllReduce_X here"
    )
    assert text(plan, reasons=False).splitlines()[1] == "ReduceScatter_{X,K}(C[I, K]{U_X}) -> C[I, K_X]"
    assert latex(plan) == (
        "\\begin{aligned}\n"
        "A[I, J_X] \\cdot_{\\text{LOCAL},J} B[J_X, K] &\\rightarrow C[I, K] \\{U_X\\} \\\\\n"
        "& \\qquad \\hbox{(case 3: the local product is $C\\{U_{X}\\}$)} \\\\\n"
        "\\textbf{ReduceScatter}_{X,K}(C[I, K] \\{U_X\\}) &\\rightarrow C[I, K_X] \\\\\n"
        "& \\qquad \\hbox{(50$\\%$ $\\&$ $\\sim$ cheaper than $\\mathrm{AllReduce}_{X}$ here)}\n"
        "\\end{aligned}"
    )
    assert text(plan.steps[1]) == text(plan).splitlines()[1]
    # a printed plan is a program: its statements are the steps' statements, in every format
    for printer in (text, unicode, latex):
        assert parse(printer(plan)).statements == tuple(s.statement() for s in plan.steps)


def test_latex_escape_text() -> None:
    assert latex_escape_text(r"a_b {c} 50% $5 #1 & x^2 ~ \n") == (
        r"a$\_$b $\{$c$\}$ 50$\%$ $\$$5 $\#$1 $\&$ x$\hat{\ }$2 $\sim$ $\backslash$n"
    )


def test_unknown_setting_is_a_usage_error() -> None:
    node = parse_tensor("A[I]")
    with pytest.raises(UsageError, match=r"unknown setting colour for TextPrinter \(known: reasons\)"):
        text(node, colour=True)
    with pytest.raises(UsageError, match="unknown setting"):
        latex(node, wrap=True)
    with pytest.raises(UsageError, match="mode is one of"):
        latex(node, mode="block")
    with pytest.raises(UsageError, match="unknown format"):
        render(node, "yaml")
    with pytest.raises(UsageError, match="cannot print a int"):
        text(3)


def test_bold_names_setting() -> None:
    assert latex(parse_tensor("W_in[D]"), bold_names=True) == r"\mathbf{W}_{\text{in}}[D]"
    assert parse_tensor(latex(parse_tensor("W_in[D]"), bold_names=True)) == parse_tensor("W_in[D]")


def test_printing_is_deterministic() -> None:
    node = parse(r"mesh X=2, Y=2" + "\n" + PINNED[6][0] + "\nwhere B=8, D=16")
    outs = {(text(node), unicode(node), latex(node), json.dumps(to_json(node))) for _ in range(5)}
    assert len(outs) == 1
    # the same AST built by hand (no spans) prints the same text
    rebuilt = Tensor("A", (Dim("I", ("X", "Y")), Dim("J")), ("Z",))
    assert text(rebuilt) == text(parse_tensor("A[ I_{X,Y} , J ] { U_Z }"))


def test_glyph_table_spellings_all_differ_only_in_style() -> None:
    for name, glyph in GLYPHS.items():
        assert glyph.ascii.isascii(), name


def test_json_form_is_stable() -> None:
    node = parse_statement("ReduceScatter_{X,K}(C: bf16[I, K]{U_X}) -> C[I, K_X]")
    assert to_json(node, spans=False) == {
        "kind": "arrow",
        "expr": {
            "kind": "collective",
            "op": "ReduceScatter",
            "axes": ["X"],
            "dim": "K",
            "arg": {
                "kind": "tensor",
                "name": "C",
                "dtype": "bf16",
                "dims": [
                    {"kind": "dim", "name": "I", "size": None, "axes": []},
                    {"kind": "dim", "name": "K", "size": None, "axes": []},
                ],
                "unreduced": ["X"],
                "invariant": [],
            },
        },
        "result": {
            "kind": "tensor",
            "name": "C",
            "dtype": None,
            "dims": [
                {"kind": "dim", "name": "I", "size": None, "axes": []},
                {"kind": "dim", "name": "K", "size": None, "axes": ["X"]},
            ],
            "unreduced": [],
            "invariant": [],
        },
    }
    assert to_json(node)["span"] == [0, len("ReduceScatter_{X,K}(C: bf16[I, K]{U_X}) -> C[I, K_X]")]
    assert from_json(json.loads(json.dumps(to_json(node)))) == node


def test_json_plan_round_trip() -> None:
    plan = _plan()
    back = from_json(json.loads(json.dumps(to_json(plan))))
    assert back == plan and [s.reason for s in back.steps] == [s.reason for s in plan.steps]


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"kind": "nope"},
        {"kind": "tensor"},
        {"kind": "dim", "name": None, "size": None, "axes": []},
        {
            "kind": "collective",
            "op": "Einsum",
            "axes": ["X"],
            "dim": None,
            "arg": {"kind": "tensor", "name": "A", "dtype": None, "dims": []},
        },
        {"kind": "tensor", "name": "A", "dtype": "fp99", "dims": []},
        [],
        "tensor",
        {"kind": "dim", "name": "I", "size": True, "axes": []},
    ],
)
def test_from_json_rejects_malformed(bad: object) -> None:
    with pytest.raises(UsageError):
        from_json(bad)


@pytest.mark.parametrize(
    ("bad", "where", "caret"),
    [
        ("not json", "Expecting value: line 1 column 1 (char 0)", "  not json\n  ^"),
        ('{"kind": "tensor",}', "line 1 column 19 (char 18)", "  " + " " * 18 + "^"),
        ("", "Expecting value: line 1 column 1 (char 0)", None),
    ],
)
def test_from_json_says_text_is_not_json(bad: str, where: str, caret: str | None) -> None:
    with pytest.raises(UsageError) as err:
        from_json(bad)
    message = str(err.value)
    assert message.startswith("error: the text is not valid JSON: ") and where in message
    assert "missing 'kind'" not in message
    assert err.value.span is not None and err.value.source == bad
    if caret is not None:
        assert caret in message


def test_from_json_reads_json_text() -> None:
    t = parse_tensor("A[I_X, J]{U_Y}")
    assert from_json(json.dumps(to_json(t))) == t


def _katex_available() -> bool:
    return (
        shutil.which("node") is not None
        and (ROOT / "node_modules" / "katex").is_dir()
        and (ROOT / "tests" / "shared" / "katex_check.js").is_file()
    )


@pytest.mark.skipif(not _katex_available(), reason="node with KaTeX (npm ci) is not installed")
def test_latex_renders_in_katex() -> None:
    nodes: list[object] = [parse(s) for s, _ in PINNED]
    nodes += [
        _plan(),
        parse("mesh X=4\nA[I_X] -> B[I]\nwhere I=8"),
        Product(
            Tensor("W_in'", (Dim(None, ("data", "model"), size=8),), dtype=DType.INT4),
            Collective(Op.SLICE, ("Z",), Tensor(None, (Dim("B"),)), "B"),
            ("B",),
            True,
        ),
    ]
    fragments = [{"latex": latex(n), "display": True, "where": text(n)} for n in nodes]
    run = subprocess.run(
        ["node", str(ROOT / "tests" / "shared" / "katex_check.js")],
        input=json.dumps(fragments),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
