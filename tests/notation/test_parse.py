r"""The parser: a table of inputs in every accepted spelling with the AST each means, and a table of
bad inputs with the full ParseError text each gets (message, source line, caret)."""

from __future__ import annotations

import pytest
from hypothesis import given

from shardalg.errors import LimitExceeded, ParseError, Span, UsageError
from shardalg.notation.parse import grammar_path, parse, parse_statement, parse_tensor, split_axes
from shardalg.notation.printing import text
from shardalg.notation.syntax import (
    Arrow,
    Collective,
    Dim,
    DType,
    MeshDecl,
    Node,
    Op,
    Product,
    Program,
    Tensor,
    without_spans,
)
from tests.shared.strategies import programs


def T(
    name: str | None,
    *dims: str | Dim,
    u: tuple[str, ...] = (),
    i: tuple[str, ...] = (),
    dtype: DType | None = None,
) -> Tensor:
    """``T("A", "I.X", "J")`` is ``A[I_X, J]``: each letter after the dot is one axis."""
    out = []
    for spec in dims:
        if isinstance(spec, Dim):
            out.append(spec)
            continue
        label, _, axes = spec.partition(".")
        out.append(Dim(None, tuple(axes), size=int(label)) if label.isdigit() else Dim(label, tuple(axes)))
    return Tensor(name, tuple(out), u, i, dtype)


A = T("A", "I.X", "J")
B = T("B", "J", "K.Y")
C = T("C", "I.X", "K.Y")
AB = Product(A, B)

VALID: list[tuple[str, object]] = [
    # tensors
    ("A[I, J]", T("A", "I", "J")),
    (r"\mathbf{A}[I, J]", T("A", "I", "J")),
    (r"\textbf{A}[I, J]", T("A", "I", "J")),
    ("[B_X, D_Y]", T(None, "B.X", "D.Y")),
    ("bf16[B_X, D]", T(None, "B.X", "D", dtype=DType.BF16)),
    ("fp32[1024, 4096]", T(None, "1024", "4096", dtype=DType.FP32)),
    ("A: int8[128, 2048]", T("A", "128", "2048", dtype=DType.INT8)),
    ("A: int8[I_XY, J]", T("A", "I.XY", "J", dtype=DType.INT8)),
    (r"A\colon \text{bfloat16}[I]", T("A", "I", dtype=DType.BF16)),
    ("A[I_XY, J]", T("A", "I.XY", "J")),
    ("A[I_{XY}, J]", T("A", "I.XY", "J")),
    ("A[I_{X,Y}, J]", T("A", "I.XY", "J")),
    ("A[I_{X Y}, J]", T("A", "I.XY", "J")),
    ("A[I_{data,model}, J]", T("A", Dim("I", ("data", "model")), "J")),
    ("A[I_{data}, J]", T("A", Dim("I", ("data",)), "J")),
    ("A[I_data, J]", T("A", Dim("I", ("data",)), "J")),
    (r"A[I_{\text{DP}}, J]", T("A", Dim("I", ("DP",)), "J")),
    ("A[I_{DP}, J]", T("A", "I.DP", "J")),  # capitals without \text are one axis per letter
    (r"A[I_{\text{data},\text{model}}]", T("A", Dim("I", ("data", "model")))),
    ("A[1024_X, J]", T("A", "1024.X", "J")),
    ("C[I, K]{U_X}", T("C", "I", "K", u=("X",))),
    ("C[I, K]{U_XY}", T("C", "I", "K", u=("X", "Y"))),
    ("C[I, K]{U_X, U_Y}", T("C", "I", "K", u=("X", "Y"))),
    ("C[I, K]{U_Y, U_X}", T("C", "I", "K", u=("X", "Y"))),
    (r"C[I, K]\{U_X\}", T("C", "I", "K", u=("X",))),
    (r"C[I, K] \{ U_X \}", T("C", "I", "K", u=("X",))),
    (r"C[I, K] \{\ U_X \}", T("C", "I", "K", u=("X",))),
    (r"C[I, K] \lbrace U_X \rbrace", T("C", "I", "K", u=("X",))),
    ("C[I, K]{I_X}", T("C", "I", "K", i=("X",))),
    ("C[I, K]{U_X, I_Y}", T("C", "I", "K", u=("X",), i=("Y",))),
    ("W_in[D, F_Y]", T("W_in", "D", "F.Y")),
    ("W_{in}[D, F_Y]", T("W_in", "D", "F.Y")),
    (r"W_\text{in}[D, F_Y]", T("W_in", "D", "F.Y")),
    (r"W_{\text{in}}[D, F_Y]", T("W_in", "D", "F.Y")),
    ("W_1[D]", T("W_1", "D")),
    ("A'[I]", T("A'", "I")),
    ("meshes[I]", T("meshes", "I")),
    ("whereas[I]", T("whereas", "I")),
    ("AllGathered[I]", T("AllGathered", "I")),
    ("A[mesh, where, bf16]", T("A", "mesh", "where", "bf16")),
    # products
    ("A[I_X, J] · B[J, K_Y]", AB),
    ("A[I_X, J] * B[J, K_Y]", AB),
    ("A[I_X, J] @ B[J, K_Y]", AB),
    ("A[I_X, J] • B[J, K_Y]", AB),
    ("A[I_X, J] ⋅ B[J, K_Y]", AB),
    (r"A[I_X, J] \cdot B[J, K_Y]", AB),
    ("A[I_X, J] ·_J B[J, K_Y]", Product(A, B, ("J",))),
    (r"A[I_X, J] \cdot_J B[J, K_Y]", Product(A, B, ("J",))),
    ("A[I_X, J] ·_{J,K} B[J, K_Y]", Product(A, B, ("J", "K"))),
    ("A[I_X, J] ·_LOCAL B[J, K_Y]", Product(A, B, None, True)),
    ("A[I_X, J] ·_{LOCAL} B[J, K_Y]", Product(A, B, None, True)),
    (r"A[I_X, J] \cdot_\text{LOCAL} B[J, K_Y]", Product(A, B, None, True)),
    (r"A[I_X, J] \cdot_{\text{LOCAL}} B[J, K_Y]", Product(A, B, None, True)),
    ("A[I_X, J] ·_{LOCAL,J} B[J, K_Y]", Product(A, B, ("J",), True)),
    (
        "In[B, D_Y] · W_in[D, F_Y] · W_out[F_Y, D]",
        Product(Product(T("In", "B", "D.Y"), T("W_in", "D", "F.Y")), T("W_out", "F.Y", "D")),
    ),
    ("In[B] · (W_in[B] · W_out[B])", Product(T("In", "B"), Product(T("W_in", "B"), T("W_out", "B")))),
    ("(A[I_X, J] · B[J, K_Y])", AB),
    # arrows
    ("A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]", Arrow(AB, C)),
    ("A[I_X, J] · B[J, K_Y] → C[I_X, K_Y]", Arrow(AB, C)),
    ("A[I_X, J] · B[J, K_Y] ⟶ C[I_X, K_Y]", Arrow(AB, C)),
    (r"A[I_X, J] · B[J, K_Y] \rightarrow C[I_X, K_Y]", Arrow(AB, C)),
    (r"A[I_X, J] · B[J, K_Y] \to C[I_X, K_Y]", Arrow(AB, C)),
    (r"A[I_X, J] · B[J, K_Y] \longrightarrow C[I_X, K_Y]", Arrow(AB, C)),
    ("A[I_X, J] -> A[I, J_X]", Arrow(A, T("A", "I", "J.X"))),
    # collectives
    ("AllGather_X(A[I_X, J])", Collective(Op.ALL_GATHER, ("X",), A)),
    ("AllGather_X: A[I_X, J] -> A[I, J]", Arrow(Collective(Op.ALL_GATHER, ("X",), A), T("A", "I", "J"))),
    ("AllGather_X [B_X, D_Y]", Collective(Op.ALL_GATHER, ("X",), T(None, "B.X", "D.Y"))),
    ("AllGather_X A[I_X, J]", Collective(Op.ALL_GATHER, ("X",), A)),
    ("AllGather_X A[I_X, J] · B[J, K_Y]", Product(Collective(Op.ALL_GATHER, ("X",), A), B)),
    (
        "AllGather_X AllReduce_Y A[I_X, J]{U_Y}",
        Collective(Op.ALL_GATHER, ("X",), Collective(Op.ALL_REDUCE, ("Y",), T("A", "I.X", "J", u=("Y",)))),
    ),
    (r"\textbf{AllGather}_{XY}(A[I_{XY}, J])", Collective(Op.ALL_GATHER, ("X", "Y"), T("A", "I.XY", "J"))),
    (r"\text{AllGather}_X(A[I_X, J])", Collective(Op.ALL_GATHER, ("X",), A)),
    (r"\mathrm{AllGather}_X(A[I_X, J])", Collective(Op.ALL_GATHER, ("X",), A)),
    (r"\operatorname{AllGather}_X(A[I_X, J])", Collective(Op.ALL_GATHER, ("X",), A)),
    (
        "ReduceScatter_{X,K}(C[I, K]{U_X})",
        Collective(Op.REDUCE_SCATTER, ("X",), T("C", "I", "K", u=("X",)), "K"),
    ),
    (
        "ReduceScatter_{XY,K}(C[I, K]{U_XY})",
        Collective(Op.REDUCE_SCATTER, ("X", "Y"), T("C", "I", "K", u=("X", "Y")), "K"),
    ),
    (
        "ReduceScatter_{data,model,K}(C[K]{U_{data,model}})",
        Collective(Op.REDUCE_SCATTER, ("data", "model"), T("C", "K", u=("data", "model")), "K"),
    ),
    ("ReduceScatter_X(C[I]{U_X})", Collective(Op.REDUCE_SCATTER, ("X",), T("C", "I", u=("X",)))),
    (
        "ReduceScatter_{data model}(C[I]{U_{data,model}})",
        Collective(Op.REDUCE_SCATTER, ("data", "model"), T("C", "I", u=("data", "model"))),
    ),
    (
        r"\text{ReduceScatter}_{X,K}(C[I, K]{U_X})",
        Collective(Op.REDUCE_SCATTER, ("X",), T("C", "I", "K", u=("X",)), "K"),
    ),
    ("AllToAll_{X,J}(A[I_X, J])", Collective(Op.ALL_TO_ALL, ("X",), A, "J")),
    ("AllReduce_Y(A[I]{U_Y})", Collective(Op.ALL_REDUCE, ("Y",), T("A", "I", u=("Y",)))),
    (
        "AllReduce_{data,model}(A[I]{U_{data,model}})",
        Collective(Op.ALL_REDUCE, ("data", "model"), T("A", "I", u=("data", "model"))),
    ),
    ("Slice_{Z,B}([B_X, D_Y])", Collective(Op.SLICE, ("Z",), T(None, "B.X", "D.Y"), "B")),
    ("Permute_{X,Y}(A[I_X, J])", Collective(Op.PERMUTE, ("X", "Y"), A)),
    ("Permute_XY(A[I_X, J])", Collective(Op.PERMUTE, ("X", "Y"), A)),
    (
        r"A[I_X, J] \stackrel{\text{AllGather}_X}{\rightarrow} A[I, J]",
        Arrow(Collective(Op.ALL_GATHER, ("X",), A), T("A", "I", "J")),
    ),
]


@pytest.mark.parametrize(("source", "expected"), VALID, ids=[s for s, _ in VALID])
def test_valid_statement(source: str, expected: object) -> None:
    assert parse_statement(source) == expected
    assert parse(source).statements == (expected,)


PROGRAMS: list[tuple[str, Program]] = [
    ("", Program(())),
    ("\n\n  # only a comment\n", Program(())),
    ("A[I]; B[J]", Program((T("A", "I"), T("B", "J")))),
    ("A[I]  # a comment\nB[J]\n\n", Program((T("A", "I"), T("B", "J")))),
    (r"A[I] \\ B[J]", Program((T("A", "I"), T("B", "J")))),
    (r"\[ A[I] \]", Program((T("A", "I"),))),
    (
        r"$$\begin{aligned} A[I] &\rightarrow B[I] \\ B[I] &\to C[I] \end{aligned}$$",
        Program((Arrow(T("A", "I"), T("B", "I")), Arrow(T("B", "I"), T("C", "I")))),
    ),
    ("mesh X=4, Y=2\nA[I_X, J_Y]", Program((T("A", "I.X", "J.Y"),), MeshDecl((("X", 4), ("Y", 2))))),
    ("A[I, J] where I=1024, J=4096", Program((T("A", "I", "J"),), None, (("I", 1024), ("J", 4096)))),
    (
        "A[I, J]\nwhere J=4096\nwhere I=1024, J=4096",
        Program((T("A", "I", "J"),), None, (("J", 4096), ("I", 1024))),
    ),
    (
        r"\text{mesh}\; X=2 \\ A[I_X] \\ \text{where}\; I=8",
        Program((T("A", "I.X"),), MeshDecl((("X", 2),)), (("I", 8),)),
    ),
    (
        "A[I_X,J]·B[J,K_X] # invalid: gather one first",
        Program((Product(T("A", "I.X", "J"), T("B", "J", "K.X")),)),
    ),
]


@pytest.mark.parametrize(("source", "expected"), PROGRAMS, ids=[repr(s) for s, _ in PROGRAMS])
def test_valid_program(source: str, expected: Program) -> None:
    program = parse(source)
    assert program == expected
    assert program.source == source


INVALID: list[tuple[str, str]] = [
    (
        "A[I_X J]",
        """\
error: expected ',' or ']' after 'X', found 'J' (dims are separated by ',') [syntax]
  A[I_X J]
        ^""",
    ),
    (
        "A[I_X, J",
        """\
error: expected ',', ']' or '_' after 'J', found the end of the input [syntax]
  A[I_X, J
          ^""",
    ),
    (
        "A[I] B[J]",
        """\
error: expected '{', '->', '·', a new line or ';', 'where' or the end of the input after ']', found 'B' (write a product with '·', '*' or '@', or put the two expressions on separate lines) [syntax]
  A[I] B[J]
       ^""",
    ),
    (
        r"A[I] \top B[I]",
        r"""error: unknown LaTeX command \top [syntax]
  A[I] \top B[I]
       ^^^^""",
    ),
    (
        "A[I]{X}",
        """\
error: expected '_' after 'X', found '}' (unreduced and invariant axes are written {U_X} or {I_X}) [syntax]
  A[I]{X}
        ^""",
    ),
    (
        "A[I]{V_X}",
        """\
error: inside {...} after a tensor write U_<axes> (unreduced) or I_<axes> (invariant), not V_ [syntax]
  A[I]{V_X}
       ^""",
    ),
    (
        "AllGather(A[I])",
        """\
error: expected '_' after 'AllGather', found '(' (a collective needs its mesh axes as a subscript, e.g. AllGather_X(A[I_X, J])) [syntax]
  AllGather(A[I])
           ^""",
    ),
    (
        "((A[I]",
        """\
error: expected ')' after ']', found the end of the input [syntax]
  ((A[I]
        ^""",
    ),
    (
        "A[]",
        """\
error: expected a number or a name after '[', found ']' (a tensor needs at least one dim inside [...]) [syntax]
  A[]
    ^""",
    ),
    (
        "A[0]",
        """\
error: a dim's size must be a positive integer, not 0 [syntax]
  A[0]
    ^""",
    ),
    (
        "A[I__X]",
        """\
error: expected '{' or a name after '_', found '_' [syntax]
  A[I__X]
      ^""",
    ),
    (
        "A[I] ? B[J]",
        """\
error: unexpected character '?'; expected ',', '{', ')', '->', '·', a new line or ';' or 'where' [syntax]
  A[I] ? B[J]
       ^""",
    ),
    (
        "A[I]\nB[J] ->",
        """\
error: expected a dtype (bf16, fp32, ...), '[' or a name after '->', found the end of the input [syntax]
  B[J] ->
         ^""",
    ),
    (
        "A: [I]",
        """\
error: expected a dtype (bf16, fp32, ...) after ':', found '[' [syntax]
  A: [I]
     ^""",
    ),
    (
        "bf16 A[I]",
        """\
error: expected '[' after 'bf16', found 'A' [syntax]
  bf16 A[I]
       ^""",
    ),
    (
        "A[I] where I=3, I=4",
        """\
error: I is bound twice, to 3 and to 4 [syntax]
  A[I] where I=3, I=4
                  ^^^""",
    ),
    (
        "A[I] where I=0",
        """\
error: the size of I must be a positive integer, not 0 [syntax]
  A[I] where I=0
               ^""",
    ),
    (
        "mesh X=2\nmesh Y=3",
        """\
error: a program declares its mesh at most once [syntax]
  mesh Y=3
  ^^^^^^^^""",
    ),
    (
        "mesh X=2, X=3",
        """\
error: mesh axis X is declared twice [syntax]
  mesh X=2, X=3
            ^^^""",
    ),
    (
        "ReduceScatter_{X, K L}(A[I]{U_X})",
        """\
error: the target dim of ReduceScatter is one name [syntax]
  ReduceScatter_{X, K L}(A[I]{U_X})
  ^^^^^^^^^^^^^^^^^^^^^^""",
    ),
    (
        "A[I] -> B[J] * C[J]",
        """\
error: expected a new line or ';', 'where' or the end of the input after ']', found '*' [syntax]
  A[I] -> B[J] * C[J]
               ^""",
    ),
]


@pytest.mark.parametrize(("source", "message"), INVALID, ids=[s for s, _ in INVALID])
def test_invalid_input_has_a_pinned_error(source: str, message: str) -> None:
    with pytest.raises(ParseError) as info:
        parse(source)
    assert str(info.value) == message
    assert info.value.source == source and isinstance(info.value.span, Span)


def test_parse_tensor_takes_one_tensor_only() -> None:
    assert parse_tensor(r"$\mathbf{A}[I_{XY}, J] \{U_Z\}$") == T("A", "I.XY", "J", u=("Z",))
    with pytest.raises(ParseError, match="expected a new line or ';' or the end of the input after"):
        parse_tensor("A[I] * B[I]")


def test_parse_statement_takes_one_statement_only() -> None:
    assert parse_statement("A[I] -> B[I]") == Arrow(T("A", "I"), T("B", "I"))
    with pytest.raises(ParseError):
        parse_statement("A[I]\nB[I]")
    with pytest.raises(ParseError):
        parse_statement("mesh X=2")


def test_spans_locate_every_node() -> None:
    source = "AllGather_X(A[I_X, J]) · B[J, K_Y] -> C[I, K_Y]"
    arrow = parse_statement(source)
    assert isinstance(arrow, Arrow)
    product = arrow.expr
    assert isinstance(product, Product) and isinstance(product.left, Collective)

    def text_of(node: object) -> str:
        span = node.span  # type: ignore[attr-defined]
        return source[span.start : span.end]

    assert text_of(arrow) == source
    assert text_of(product) == "AllGather_X(A[I_X, J]) · B[J, K_Y]"
    assert text_of(product.left) == "AllGather_X(A[I_X, J])"
    assert text_of(product.left.arg) == "A[I_X, J]"
    assert text_of(product.left.arg.dims[0]) == "I_X"  # type: ignore[union-attr]
    assert text_of(arrow.result) == "C[I, K_Y]"
    assert parse(source).statements[0].span == arrow.span


def test_spans_do_not_take_part_in_equality() -> None:
    assert parse("A[I_X, J]") == parse("  A[ I_X ,J ]  ")
    assert hash(parse_tensor("A[I_X, J]")) == hash(parse_tensor("A[I_X,   J]"))


def _spans(node: object) -> list[object]:
    """Every span in ``node`` and the nodes (and tuples of them) under it."""
    if isinstance(node, tuple):
        return [s for x in node for s in _spans(x)]
    if not isinstance(node, Node):
        return []
    return [s for s in (node.span,) if s is not None] + [s for a in node.args for s in _spans(a)]


@given(programs())
def test_a_program_without_spans_is_the_program_with_none(p) -> None:
    """``without_spans`` (what a search prices) is equal to the program parsed, prints the same and has no span
    left in any node; the parsed program keeps its own."""
    parsed = parse(text(p))
    bare = without_spans(parsed)
    assert bare == parsed and text(bare) == text(parsed) and type(bare) is Program
    assert (_spans(parsed) or not parsed.statements) and not _spans(bare)


def test_split_axes_rule() -> None:
    assert split_axes("XY") == ("X", "Y")
    assert split_axes("X") == ("X",)
    assert split_axes("data") == ("data",)
    assert split_axes("X1") == ("X1",)
    assert split_axes("DP", quoted=True) == ("DP",)


def test_non_text_input_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        parse(b"A[I]")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        parse_tensor(None)  # type: ignore[arg-type]


def test_deep_nesting_is_refused_by_the_depth_limit_not_a_crash() -> None:
    deep = "(" * 5000 + "A[I]" + ")" * 5000  # parentheses nest no operation; lark may still run out of stack
    try:
        assert parse_statement(deep) == T("A", "I")
    except LimitExceeded as err:
        assert err.rule == "limit-depth" and "nests too deeply" in err.message
    chain = " · ".join(["A[I]"] * 3000)
    with pytest.raises(LimitExceeded) as info:
        parse_statement(chain)
    assert info.value.rule == "limit-depth"
    with pytest.raises(LimitExceeded) as info:
        parse_statement(" · ".join(["A[I]"] * 100))
    assert info.value.message.startswith("a statement nests 99 levels, over the depth limit of 64 levels")
    assert _depth_ok(" · ".join(["A[I]"] * 65))  # 64 products nest 64 levels: the limit itself is fine


def _depth_ok(text: str) -> bool:
    return parse_statement(text) is not None


def test_the_grammar_file_is_found() -> None:
    path = grammar_path()
    assert path.name == "shardalg.lark" and path.is_file()
