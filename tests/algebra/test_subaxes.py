"""Sub-axes (Shardy's factored axes, issue 26 item 6): the notation, the mesh, legality, refinement, costs."""

from __future__ import annotations

import json

import pytest

from shardalg.algebra.legality import check
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.subaxes import prime_cuts, refine, within
from shardalg.costs.plancost import collective_cost
from shardalg.errors import AxisUsedTwice, ParseError, UnknownAxis, UsageError
from shardalg.notation import printing
from shardalg.notation.jsonread import from_json
from shardalg.notation.parse import parse, parse_tensor
from shardalg.notation.printing.json import to_json
from shardalg.notation.syntax import Op

MESH = Mesh(X=2, Y=4)

# (written, ASCII, LaTeX): each form parses to one AST, and each printer's text parses back to it
ROUND_TRIPS = [
    ("A[I_{Y:(1)2}, J]", "A[I_{Y:(1)2}, J]", r"A[I_{Y{:}(1)2}, J]"),
    (r"A[I_{Y{:}(1)2}, J]", "A[I_{Y:(1)2}, J]", r"A[I_{Y{:}(1)2}, J]"),
    ("A[I_{X,Y:(2)2}, J]", "A[I_{X,Y:(2)2}, J]", r"A[I_{X,Y{:}(2)2}, J]"),
    ("A[I_{X Y:(2)2}, J]", "A[I_{X,Y:(2)2}, J]", r"A[I_{X,Y{:}(2)2}, J]"),
    (
        r"A[I_{\text{data}{:}(2)4}, J]{U_{Y:(1)2}}",
        "A[I_{data:(2)4}, J]{U_{Y:(1)2}}",
        r"A[I_{\text{data}{:}(2)4}, J] \{U_{Y{:}(1)2}\}",
    ),
    (
        "AllGather_{Y:(2)2}(A[I_Y, J])",
        "AllGather_{Y:(2)2}(A[I_Y, J])",
        r"\textbf{AllGather}_{Y{:}(2)2}(A[I_Y, J])",
    ),
    (
        "ReduceScatter_{Y:(1)2,K}(C[I, K]{U_{Y:(1)2}})",
        "ReduceScatter_{Y:(1)2,K}(C[I, K]{U_{Y:(1)2}})",
        r"\textbf{ReduceScatter}_{Y{:}(1)2,K}(C[I, K] \{U_{Y{:}(1)2}\})",
    ),
]


@pytest.mark.parametrize(("written", "ascii", "latex"), ROUND_TRIPS)
def test_subaxis_round_trips_in_three_syntaxes(written: str, ascii: str, latex: str) -> None:
    ast = parse(written)
    assert printing.text(ast) == ascii
    assert printing.latex(ast) == latex
    for form in (ascii, printing.unicode(ast), latex):
        assert parse(form) == ast
    j = to_json(ast)  # JSON spells each axis as Shardy does, "Y:(1)2"
    assert from_json(json.loads(json.dumps(j))) == ast


def test_a_subaxis_is_one_axis_named_as_shardy_names_it() -> None:
    t = parse_tensor("A[I_{X Y:(1)2}, J]")
    assert t.dims[0].axes == ("X", "Y:(1)2")
    assert to_json(t)["dims"][0]["axes"] == ["X", "Y:(1)2"]


@pytest.mark.parametrize("bad", ["A[I_Y:(1)2, J]", "A[I_{Y:(0)2}, J]", "A[I_{Y:(1)}, J]"])
def test_malformed_subaxes_are_parse_errors(bad: str) -> None:
    with pytest.raises(ParseError):
        parse(bad)


def test_the_mesh_resolves_a_subaxis_to_its_size_and_its_parents_links() -> None:
    m = Mesh.parse("X=2,Y=4*2:ring")
    ax = m["Y:(2)2"]
    assert (ax.size, ax.links, ax.wraps) == (2, 2, True)
    assert "Y:(1)2" in m and "Y:(1)3" not in m and "Z:(1)2" not in m
    with pytest.raises(UnknownAxis, match=r"1·3 = 3, must divide 4"):
        m["Y:(1)3"]


# (expression, rule, message fragment): the legality table
ILLEGAL = [
    ("A[I_{Y:(1)2}, J_Y]", AxisUsedTwice, "sub-axis Y:(1)2 is part of mesh axis Y"),
    ("A[I_{Y:(1)2}]{U_Y}", AxisUsedTwice, "sub-axis Y:(1)2 is part of mesh axis Y"),
    ("A[I_{Y:(1)2}, J_{Y:(1)2}]", AxisUsedTwice, "mesh axis Y:(1)2 shards both I and J"),
    ("A[I_{Y:(1)3}, J]", UnknownAxis, "is not a factor of Y=4"),
    ("A[I_{Z:(1)2}, J]", UnknownAxis, "factor of mesh axis Z, which is not in the mesh"),
    ("AllGather_{Y:(1)2}(A[I_Y, J])", None, "not its minor-most axis"),
]


@pytest.mark.parametrize(("expr", "error", "fragment"), ILLEGAL)
def test_subaxis_legality(expr: str, error: type | None, fragment: str) -> None:
    found = check(expr, MESH, {"I": 8, "J": 8})
    assert found, expr
    assert fragment in found[0].message
    if error is not None:
        assert found[0].error is error


def test_overlapping_subaxes_of_a_larger_axis_are_refused() -> None:
    found = check("A[I_{Y:(1)4}, J_{Y:(2)2}]", Mesh(Y=8), {"I": 8, "J": 8})
    assert found and "sub-axes Y:(1)4 and Y:(2)2 of Y overlap" in found[0].message


@pytest.mark.parametrize(
    "expr",
    ["A[I_{Y:(1)2}, J_{Y:(2)2}]", "A[I_{Y:(1)2}, J_X]{U_{Y:(2)2}}", "AllGather_{Y:(2)2}(A[I_Y, J])"],
)
def test_legal_subaxis_uses(expr: str) -> None:
    assert not check(expr, MESH, {"I": 8, "J": 8})


def test_factors_must_divide_the_dim() -> None:
    found = check("A[I_{X,Y:(1)2}, J]", MESH, {"I": 6, "J": 8})
    assert found and "not divisible" in found[0].message


def test_refinement_writes_a_whole_axis_as_its_factors_and_back() -> None:
    r = refine(MESH, ["Y:(1)2"])
    assert r.fine == Mesh({"X": 2, "Y:(1)2": 2, "Y:(2)2": 2})
    t = parse_tensor("A[I_Y, J_X]{U_Z}")
    fine = r.expand(t)
    assert fine.dims[0].axes == ("Y:(1)2", "Y:(2)2")
    assert r.coarsen(fine) == t
    assert r.coarsen_axes(("Y:(2)2", "Y:(1)2")) == ("Y:(2)2", "Y:(1)2")  # not a run major-first: kept


def test_cuts_that_do_not_nest_are_refused() -> None:
    with pytest.raises(UsageError, match="do not nest"):
        refine(Mesh(Y=6), ["Y:(1)2", "Y:(1)3"])


def test_prime_cuts() -> None:
    assert prime_cuts(Mesh(X=2, Y=4, Z=12)) == {"Y": {1, 2}, "Z": {1, 2, 4}}


def test_within() -> None:
    assert within("Y:(1)2", ("Y",), MESH)
    assert within("Y", ("Y:(2)2", "Y:(1)2"), MESH)
    assert not within("Y", ("Y:(1)2",), MESH)
    assert not within("Y:(1)2", ("X",), MESH)


def test_factors_of_one_axis_are_priced_on_its_links() -> None:
    """A gather over both factors of Y is the gather over Y (not a gather over two axes, at twice the
    bandwidth); a gather over one factor of V bytes costs V/W_ici, as over any axis, with its own latency."""
    mesh, sizes = Mesh.parse("X=2,Y=4"), {"I": 1024, "J": 1024}
    whole = collective_cost(Op.ALL_GATHER, parse_tensor("A[I_Y, J]"), ("Y",), mesh, sizes, hw="tpu-v5p")
    factors = collective_cost(
        Op.ALL_GATHER,
        parse_tensor("A[I_{Y:(1)2,Y:(2)2}, J]"),
        ("Y:(1)2", "Y:(2)2"),
        mesh,
        sizes,
        hw="tpu-v5p",
    )
    assert whole.total() == factors.total()
    one = collective_cost(
        Op.ALL_GATHER, parse_tensor("A[I_{Y:(1)2}, J]"), ("Y:(1)2",), mesh, sizes, hw="tpu-v5p"
    )
    x = collective_cost(
        Op.ALL_GATHER, parse_tensor("A[I_X, J]"), ("X",), Mesh.parse("X=2"), sizes, hw="tpu-v5p"
    )
    assert one.total() == x.total()


def test_shape_of_a_tensor_over_a_subaxis() -> None:
    """A[I_{Y:(1)2}, J] on X=2, Y=4: I is cut in 2, and the copies are X's 2 times Y's minor factor's 2."""
    from shardalg.algebra.shape import shape

    info = shape("A[I_{Y:(1)2}, J]", MESH, {"I": 8, "J": 8})
    assert info.local_shape == (4, 8)
    assert info.replication == 4
    assert shape("A[I_{Y:(1)2}, J_{Y:(2)2}]", MESH, {"I": 8, "J": 8}).replication == 2


@pytest.mark.parametrize("mesh", ["X=2,Y=4", "X=2,Y=2x2"])
def test_a_subaxis_as_large_as_its_axis_is_refused_naming_the_axis(mesh: str) -> None:
    """Y:(1)4 on Y=4 is Y itself: refused as Shardy refuses it ("sub-axis size is equal to the full axis
    size"), with the fix to write Y. It was taken as an axis of its own: shape said replication 8 (A[I_Y, J]
    has 2), and the executor refined the mesh by nothing and recursed."""
    m = Mesh.parse(mesh)
    assert "Y:(1)4" not in m
    with pytest.raises(UnknownAxis, match=r"sub-axis Y:\(1\)4 is the whole of Y=4: write Y"):
        m["Y:(1)4"]
    found = check("AllGather_{Y:(1)4}(A[I_{Y:(1)4}, J]) -> A[I, J]", m, {"I": 8, "J": 8})
    assert [(f.error, f.fix) for f in found] == [(UnknownAxis, "write Y"), (UnknownAxis, "write Y")]
    from shardalg.algebra.shape import shape

    with pytest.raises(UnknownAxis, match="write Y"):
        shape("A[I_{Y:(1)4}, J]", m, {"I": 8, "J": 8})
