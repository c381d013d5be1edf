"""Legality: every rule of DESIGN.md section 2 with its full error text pinned, legal seed expressions,
and the illegal ones shown illegal on numbers (the local products really do not add up)."""

from __future__ import annotations

import numpy as np
import pytest

from shardalg.algebra.einsum import NotLocal
from shardalg.algebra.legality import RULES, check, check_or_raise
from shardalg.algebra.mesh import Mesh
from shardalg.errors import (
    AxisUsedTwice,
    BatchDimMismatch,
    IllegalCollective,
    IllegalOperand,
    IllegalSharding,
    IndivisibleDim,
    NoteWarning,
    ParseError,
    SameAxisResultDims,
    ShapeMismatch,
    UnknownAxis,
    UnreachableUnreduced,
    UnreducedProduct,
)
from shardalg.notation.syntax import Dim, Product, Tensor

# (source, mesh, sizes, error class, the full str() of the error: message, source line, caret, fix)
PINNED = [
    (
        "A[I_X, J_X]",
        None,
        None,
        AxisUsedTwice,
        "error: mesh axis X shards both I and J [axis-used-twice]\n"
        "  A[I_X, J_X]\n"
        "         ^^^\n"
        "  fix: shard J over another axis, or replicate it: A[I_X, J]",
    ),
    (
        "A[I_X]{U_X}",
        None,
        None,
        AxisUsedTwice,
        "error: mesh axis X shards I and is unreduced ({U_X}) [axis-used-twice]\n"
        "  A[I_X]{U_X}\n"
        "        ^^^^^\n"
        "  fix: use X in one place: A[I_X] or A[I]{U_X}",
    ),
    (
        "A[I, J]{U_X, U_X}",
        None,
        None,
        AxisUsedTwice,
        "error: mesh axis X is named twice in the unreduced set [axis-used-twice]\n"
        "  A[I, J]{U_X, U_X}\n"
        "         ^^^^^^^^^^\n"
        "  fix: write X once: A[I, J]{U_X}",
    ),
    (
        "A[I]{U_X, U_Y, U_X}",
        None,
        None,
        AxisUsedTwice,
        "error: mesh axis X is named twice in the unreduced set [axis-used-twice]\n"
        "  A[I]{U_X, U_Y, U_X}\n"
        "      ^^^^^^^^^^^^^^^\n"
        "  fix: write X once: A[I]{U_XY}",
    ),
    (
        "A[I]{I_X, I_X}",
        None,
        None,
        AxisUsedTwice,
        "error: mesh axis X is named twice in the invariant set [axis-used-twice]\n"
        "  A[I]{I_X, I_X}\n"
        "      ^^^^^^^^^^\n"
        "  fix: write X once: A[I]{I_X}",
    ),
    (
        "A[I]{U_X, I_X}",
        None,
        None,
        AxisUsedTwice,
        "error: mesh axis X is unreduced ({U_X}) and is invariant ({I_X}) [axis-used-twice]\n"
        "  A[I]{U_X, I_X}\n"
        "      ^^^^^^^^^^\n"
        "  fix: use X in one place: A[I]{U_X} or A[I]{I_X}",
    ),
    (
        "A[I_X]{U_X, U_X}",
        None,
        None,
        AxisUsedTwice,
        "error: mesh axis X shards I and is unreduced ({U_X}) [axis-used-twice]\n"
        "  A[I_X]{U_X, U_X}\n"
        "        ^^^^^^^^^^\n"
        "  fix: use X in one place: A[I_X] or A[I]{U_X}",
    ),
    (
        "A[I_XX, J]",
        None,
        None,
        AxisUsedTwice,
        "error: mesh axis X shards I twice [axis-used-twice]\n"
        "  A[I_XX, J]\n"
        "    ^^^^\n"
        "  fix: name each axis once: A[I_X, J]",
    ),
    (
        "A[I_Z, J]",
        "X=4,Y=2",
        None,
        UnknownAxis,
        "error: mesh axis Z is not in the mesh (X, Y) [unknown-axis]\n"
        "  A[I_Z, J]\n"
        "    ^^^\n"
        "  fix: use an axis of the mesh (X, Y), or add Z to it",
    ),
    (
        "A[I_XY, J] where I=12",
        "X=4,Y=2",
        None,
        IndivisibleDim,
        "error: dim I has size 12, not divisible by |X| · |Y| = 8 [indivisible-dim]\n"
        "  A[I_XY, J] where I=12\n"
        "    ^^^^\n"
        "  fix: shard I over fewer axes: A[I_X, J], or make its size a multiple of 8",
    ),
    (
        "fp32[1000_X, 4096]",
        "X=16",
        None,
        IndivisibleDim,
        "error: dim 1000 has size 1000, not divisible by |X| = 16 [indivisible-dim]\n"
        "  fp32[1000_X, 4096]\n"
        "       ^^^^^^\n"
        "  fix: replicate 1000: fp32[1000, 4096], or make its size a multiple of 16",
    ),
    (
        "A[I, J]{U_X} ·_LOCAL B[J, K]{U_X}",
        None,
        None,
        UnreducedProduct,
        "error: both operands are unreduced over X: a product of partial sums is not a partial sum of the product [unreduced-product]\n"
        "  A[I, J]{U_X} ·_LOCAL B[J, K]{U_X}\n"
        "                              ^^^^^\n"
        "  fix: reduce one operand first: AllReduce_X(A[I, J]{U_X}) or AllReduce_X(B[J, K]{U_X})",
    ),
    (
        "P[B_X, D] ·_LOCAL Q[B_Y, D, F] -> R[B, F]",
        None,
        None,
        BatchDimMismatch,
        "error: batch dim B is sharded differently in the two inputs: B_X and B_Y [batch-dim-mismatch]\n"
        "  P[B_X, D] ·_LOCAL Q[B_Y, D, F] -> R[B, F]\n"
        "                      ^^^\n"
        "  fix: reshard one input so B matches: P[B_Y, D] or Q[B_X, D, F]",
    ),
    (
        "A[I_X, J] ·_LOCAL B[J, K_X]",
        None,
        None,
        SameAxisResultDims,
        "error: case 4: the result dims I and K are both sharded over X [case-4]\n"
        "  A[I_X, J] ·_LOCAL B[J, K_X]\n"
        "                         ^^^\n"
        "  fix: gather one operand first: AllGather_X(A[I_X, J]) or AllGather_X(B[J, K_X])",
    ),
    (
        "A[I_X, J] ·_LOCAL B[J, K_X] -> C[I, K]",
        None,
        None,
        SameAxisResultDims,
        "error: case 4: the result dims I and K are both sharded over X [case-4]\n"
        "  A[I_X, J] ·_LOCAL B[J, K_X] -> C[I, K]\n"
        "                         ^^^\n"
        "  fix: gather one operand first: AllGather_X(A[I_X, J]) or AllGather_X(B[J, K_X])",
    ),
    (
        "A[I, J] · (A[I_XY, J] · B[J, K_Y])",
        None,
        None,
        SameAxisResultDims,
        "error: case 4: the result dims I and K are both sharded over Y [case-4]\n"
        "  A[I, J] · (A[I_XY, J] · B[J, K_Y])\n"
        "                               ^^^\n"
        "  fix: gather one operand first: AllGather_Y(A[I_XY, J]) or AllGather_Y(B[J, K_Y])",
    ),
    (
        "A[I, J_X] ·_LOCAL B[J, K]",
        None,
        None,
        NotLocal,
        "error: case 2: J is contracted and sharded over X in A[I, J_X] only, so a local product would sum only a block of J [not-local]\n"
        "  A[I, J_X] ·_LOCAL B[J, K]\n"
        "       ^^^\n"
        "  fix: gather it first: AllGather_X(A[I, J_X]), or drop _LOCAL and let the planner choose",
    ),
    (
        "A[I, J]{U_X} ·_LOCAL B[J, K_X]",
        None,
        None,
        NotLocal,
        "error: A[I, J]{U_X} is unreduced over X and B[J, K_X] is sharded over X: each device would multiply a partial sum by a different block [not-local]\n"
        "  A[I, J]{U_X} ·_LOCAL B[J, K_X]\n"
        "                       ^^^^^^^^^\n"
        "  fix: AllReduce_X(A[I, J]{U_X}) first, or AllGather_X(B[J, K_X])",
    ),
    (
        "A[I, J] · B[J, K] -> C[I]",
        None,
        None,
        ShapeMismatch,
        "error: dim K is in only one operand and not in the result C[I]; a product sums only dims of both operands [shape-mismatch]\n"
        "  A[I, J] · B[J, K] -> C[I]\n"
        "                       ^^^^\n"
        "  fix: keep K in the result",
    ),
    (
        "A[4, 4] · B[4, K]",
        None,
        None,
        ShapeMismatch,
        "error: dim 4 appears twice in A[4, 4], and an operation tells dims apart by name [shape-mismatch]\n"
        "  A[4, 4] · B[4, K]\n"
        "       ^\n"
        "  fix: name each dim once: A[D0, D1] where D0=4, D1=4",
    ),
    (
        "AllToAll_{Y,I}(A[J_Y, K, I])",
        "X=2,Y=2",
        "I=1,J=2,K=1",
        IndivisibleDim,
        "error: AllToAll gives A[J, K, I_Y], but its dim I has size 1, not divisible by |Y| = 2 [indivisible-dim]\n"
        "  AllToAll_{Y,I}(A[J_Y, K, I])\n"
        "  ^^^^^^^^^^^^^^\n"
        "  fix: replicate I: A[J, K, I], or make its size a multiple of 2",
    ),
    (
        "AllGather_X: A[I_X, J] -> A[I, J_X]",
        None,
        None,
        ShapeMismatch,
        "error: AllGather_X of A[I_X, J] gives A[I, J], not A[I, J_X] [shape-mismatch]\n"
        "  AllGather_X: A[I_X, J] -> A[I, J_X]\n"
        "                            ^^^^^^^^^\n"
        "  fix: write the result as A[I, J]",
    ),
    (
        "AllGather_X(A[I_XY, J])",
        None,
        None,
        IllegalCollective,
        "error: AllGather_X would take X off I_XY in A[I_XY, J], but X is not its minor-most axis (Y is); a collective only removes the minor-most axes [collective-precondition]\n"
        "  AllGather_X(A[I_XY, J])\n"
        "  ^^^^^^^^^^^\n"
        "  fix: Permute_{X,Y} first (A[I_YX, J]), then AllGather_X; or AllGather_XY",
    ),
    (
        "AllGather_Q(A[I_X, J])",
        "X=4,Y=2",
        None,
        UnknownAxis,
        "error: AllGather names mesh axis Q, which is not in the mesh (X, Y) [unknown-axis]\n"
        "  AllGather_Q(A[I_X, J])\n"
        "  ^^^^^^^^^^^\n"
        "  fix: use an axis of the mesh (X, Y), or add Q to it",
    ),
    (
        "A[I, J] · B[J, K] -> C[I, Q]",
        None,
        None,
        ShapeMismatch,
        "error: result dim Q is in neither input [shape-mismatch]\n"
        "  A[I, J] · B[J, K] -> C[I, Q]\n"
        "                            ^",
    ),
    (
        "A[I] · B[K] -> C[I, K]{U_X}",
        "X=2",
        None,
        UnreachableUnreduced,
        "error: the result is unreduced over X, but no plan leaves partial sums "
        "there: a product has them only where an operand does, or where both shard a contracted dim (case 3), and "
        "a Permute renames them only between axes of one size; this product contracts no dim [unreduced-result]\n"
        "  A[I] · B[K] -> C[I, K]{U_X}\n"
        "                 ^^^^^^^^^^^^\n"
        "  fix: request the result reduced (drop its {U_..}), or shard a contracted dim over those axes in both "
        "operands",
    ),
    (
        "gelu(H[B, F]{U_X}) + A[B, F] -> G[B, F]",
        "X=2",
        None,
        IllegalOperand,
        "error: gelu is not linear: applied to the partial sums of H[B, F]{U_X} (unreduced over X) it does not "
        "give the function of their sum [function-operand]\n"
        "  gelu(H[B, F]{U_X}) + A[B, F] -> G[B, F]\n"
        "       ^^^^^^^^^^^^\n"
        "  fix: AllReduce_X(H[B, F]{U_X}) first (or ReduceScatter onto a dim gelu does not work along)",
    ),
]


@pytest.mark.parametrize(("source", "mesh", "sizes", "error", "text"), PINNED, ids=[p[0] for p in PINNED])
def test_full_error_text(source, mesh, sizes, error, text):
    found = check(source, mesh, sizes)
    assert found, "expected a violation"
    assert found[0].error is error
    assert str(found[0]) == text
    with pytest.raises(error) as info:
        check_or_raise(source, mesh, sizes)
    assert str(info.value) == text
    assert isinstance(info.value, IllegalSharding)
    assert info.value.rule == found[0].rule


def test_every_rule_has_a_pinned_text():
    pinned = {p[3] for p in PINNED}
    for rule in RULES:
        assert rule.error.rule == rule.name
        assert rule.error in pinned, rule.name


def test_caret_points_into_the_right_line_of_a_program():
    source = "mesh X=4, Y=2\nA[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]\nD[I_X, J_X]"
    (v,) = check(source)
    assert v.error is AxisUsedTwice
    assert str(v).splitlines()[1:3] == ["  D[I_X, J_X]", "         ^^^"]


# Quoted from seeds/000_*.txt (LaTeX as written there): legal as expressions on X=4, Y=2, Z=2.
LEGAL = [
    r"A[I_X, J_Y]",
    r"A[I_{XY}, J]",
    r"A[I_X, J] \cdot B[J, K_Y] \to C[I_X, K_Y]",
    r"A[I_X, J] \cdot B[J, K_Y] \to C[I, K]",
    r"A[I_X, J_Y] \cdot_J B[J_Y, K] \to C[I_X, K]",
    r"X[B, D_X] \cdot_D Y[D_X, F] \to Z[B, F] \{U_X\}",
    r"X[B, D] \cdot_D Y[D_X, F] \to Z[B, F]",
    r"In[B, D] \cdot W_\text{in}[D, F] \cdot W_\text{out}[F, D]",
    r"\text{AllGather}_{XY}([B_X, D_Y])",
    r"\text{AllGather}_{X}(A'[I_X]) \to A'[I]",
    r"\text{ReduceScatter}_X(A[I] \{U_X\}) \to A[I_X]",
    r"\text{AllReduce}_Z([B_X, D_Y] \{U_Z \})",
    r"[B_X, D_Y] \to [B_{XZ}, D_Y]",
    r"A[I_{XY}, J] \rightarrow A[I_Y, J]",
    r"X[F]\{U_Y\} \to X[F_Y]",
    "P[B_X, D] · Q[B_X, D, F] -> R[B_X, F]",
    "AllReduce_X(A[I, J]{U_X}) · B[J, K]{U_X}",
    "A[I, J_X] · B[J_X, K] · C[K, L]{U_Y}",
]


@pytest.mark.parametrize("source", LEGAL)
def test_seed_expressions_are_legal(source):
    assert (
        check(source, "X=4,Y=2,Z=2", {"I": 1024, "J": 4096, "K": 2048, "B": 256, "D": 1024, "F": 4096}) == []
    )


def test_mesh_and_sizes_come_from_the_program():
    assert [v.rule for v in check("mesh X=4\nA[I_Y, J]")] == ["unknown-axis"]
    assert [v.rule for v in check("A[I_X, J] where I=6", mesh=Mesh(X=4))] == ["indivisible-dim"]
    # the sizes argument wins over the where clause, and says so
    with pytest.warns(NoteWarning, match=r"^--sizes I=8 replaces the program's I=6$"):
        assert check("A[I_X, J] where I=6", mesh=Mesh(X=4), sizes={"I": 8}) == []
    # unknown sizes and a symbolic mesh axis cannot be judged divisible or not
    assert check("A[I_X, J]", mesh=Mesh(X=None)) == []
    assert check("A[I_X, J]", mesh="X=3") == []


COLLECTIVES_ILLEGAL = [
    ("Slice_{X,J}(A[I_X, J])", "X=4,Y=2"),
    ("Permute_{X,Y}(A[I_X, J])", "X=4,Y=2"),
    ("AllReduce_X(A[I, J])", None),
    ("ReduceScatter_{X,K}(A[I, J]{U_X})", None),
    ("ReduceScatter_X(A[I]{U_X})", None),
    ("AllToAll_{X,I}(A[I_X, J])", None),
]


@pytest.mark.parametrize(("source", "mesh"), COLLECTIVES_ILLEGAL)
def test_collective_preconditions(source, mesh):
    found = check(source, mesh)
    assert [v.rule for v in found] == ["collective-precondition"]
    assert found[0].span.start == 0 and "^" in str(found[0])


def test_collective_results_follow_the_rules():
    # the book's ReduceScatter without a target dim: the dim comes from the written result
    assert check(r"\text{ReduceScatter}_X(A[I] \{U_X\}) \to A[I_X]") == []
    # AllGather may mark its result invariant on its axes (DESIGN.md section 4)
    assert check("AllGather_X: A[I_X, J] -> A[I, J]{I_X}", "X=4") == []
    assert check("Permute_{X,Y}(A[I_X, J])", "X=4,Y=4") == []
    # a product inside the collective: the result is compared with the natural product
    assert check("AllReduce_X(A[I, J_X] · B[J_X, K]) -> C[I, K]") == []
    assert [v.rule for v in check("AllReduce_X(A[I, J_X] · B[J_X, K]) -> C[I, K_X]")] == ["shape-mismatch"]


def test_without_a_mesh_only_mesh_free_rules_run():
    assert check("A[I_Q, J]") == []
    assert [v.rule for v in check("A[I_Q, J_Q]")] == ["axis-used-twice"]


def test_every_violation_is_reported_in_reading_order():
    found = check("A[I_X, J_X] ·_LOCAL B[J, K_X]{U_Z}", mesh="X=2,Y=2")
    assert [v.rule for v in found] == ["axis-used-twice", "unknown-axis", "not-local", "case-4"]


def test_ast_without_source_has_no_caret():
    t = Tensor("A", (Dim("I", ("X",)), Dim("J", ("X",))))
    (v,) = check(t)
    assert str(v).splitlines()[0] == "error: mesh axis X shards both I and J [axis-used-twice]"
    assert "^" not in str(v)
    assert check_or_raise(Tensor("A", (Dim("I", ("X",)),))) == Tensor("A", (Dim("I", ("X",)),))


def test_bad_text_is_a_parse_error():
    with pytest.raises(ParseError):
        check("A[I_X, J")
    with pytest.raises(ParseError):
        check("__import__('os').system('true')")


# ---- the illegal ones, on numbers -------------------------------------------------------------------

rng = np.random.default_rng(0)


def test_case_4_local_products_cover_only_the_diagonal_blocks():
    # A[I_X, J] · B[J, K_X] on |X| = 4: device c holds row block c of A and column block c of B, so the
    # local products give the blocks (c, c) of C and nothing else: C cannot be assembled.
    n, size = 4, 8
    a, b = rng.standard_normal((size, 6)), rng.standard_normal((6, size))
    rows, cols = np.split(a, n, axis=0), np.split(b, n, axis=1)
    c = a @ b
    got = np.zeros_like(c)
    covered = np.zeros(c.shape, bool)
    blk = size // n
    for dev in range(n):
        got[dev * blk : (dev + 1) * blk, dev * blk : (dev + 1) * blk] = rows[dev] @ cols[dev]
        covered[dev * blk : (dev + 1) * blk, dev * blk : (dev + 1) * blk] = True
    assert covered.sum() == c.size // n  # a quarter of C
    assert not np.allclose(got, c)
    assert [v.rule for v in check("A[I_X, J] ·_LOCAL B[J, K_X]")] == ["case-4"]
    # case 1 with distinct axes covers every block: legal
    assert check("A[I_X, J] ·_LOCAL B[J, K_Y]") == []


def test_product_of_two_unreduced_values_is_not_the_sum_of_local_products():
    n = 3
    a_parts = [rng.standard_normal((4, 5)) for _ in range(n)]
    b_parts = [rng.standard_normal((5, 2)) for _ in range(n)]
    true = sum(a_parts) @ sum(b_parts)
    local_sum = sum(a @ b for a, b in zip(a_parts, b_parts, strict=True))
    assert not np.allclose(true, local_sum)
    # one side reduced first: the sum of local products is right, and the checker agrees
    assert np.allclose(sum(a @ sum(b_parts) for a in a_parts), true)
    assert [v.rule for v in check("A[I, J]{U_X} ·_LOCAL B[J, K]{U_X}")] == ["unreduced-product"]
    assert check("A[I, J]{U_X} ·_LOCAL AllReduce_X(B[J, K]{U_X})") == []


def test_batch_dim_sharded_differently_multiplies_different_batch_elements():
    # P[B_X, D] · Q[B_Y, D] -> R[B] on X=2, Y=2: device (x, y) holds batch block x of P and block y of Q.
    p, q = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    true = np.einsum("bd,bd->b", p, q)
    ps, qs = np.split(p, 2), np.split(q, 2)
    x, y = 0, 1
    assert not np.allclose(np.einsum("bd,bd->b", ps[x], qs[y]), true[:2])
    assert [v.rule for v in check("P[B_X, D] ·_LOCAL Q[B_Y, D] -> R[B]")] == ["batch-dim-mismatch"]


def test_products_of_ast_values():
    a = Tensor("A", (Dim("I"), Dim("J")), unreduced=("X",))
    b = Tensor("B", (Dim("J"), Dim("K")), unreduced=("X",))
    assert [v.rule for v in check(Product(a, b, local=True))] == ["unreduced-product"]
