"""Local einsum typing: roles and cases of the dims, the layout a local product gives, and its refusals."""

from __future__ import annotations

import pytest

from shardalg.algebra.einsum import (
    Case,
    NotLocal,
    Role,
    Spec,
    case_lines,
    classify,
    local_output,
)
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.ops.einsum import LOCAL_EINSUM
from shardalg.errors import BatchDimMismatch, SameAxisResultDims, ShapeMismatch, UnreducedProduct
from shardalg.notation.parse import parse_tensor
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Op
from shardalg.numeric.execute import run_plan

T = parse_tensor
M = Mesh(X=2, Y=2, Z=2)


def test_roles_by_name() -> None:
    spec = Spec.of(T("A[B, I, J]"), T("W[B, J, K]"), None, T("C[B, I, K]"))
    assert spec.contracted == ("J",) and spec.batch == ("B",) and spec.out == ("B", "I", "K")
    assert [spec.role(n) for n in ("B", "I", "J", "K")] == [
        Role.BATCH,
        Role.LEFT,
        Role.CONTRACTED,
        Role.RIGHT,
    ]


def test_without_a_result_every_shared_dim_is_contracted_and_explicit_contraction_wins() -> None:
    assert Spec.of(T("A[I, J]"), T("B[J, K]")).out == ("I", "K")
    spec = Spec.of(T("X[B, D]"), T("Y[D, F]"), ("D",))
    assert spec.contracted == ("D",) and spec.out == ("B", "F")


@pytest.mark.parametrize(
    "left, right, case",
    [
        ("A[I, J]", "B[J, K]", Case.UNSHARDED),
        ("A[I, J_X]", "B[J, K]", Case.ONE_SIDE),
        ("A[I, J]", "B[J_X, K]", Case.ONE_SIDE),
        ("A[I, J_X]", "B[J_X, K]", Case.SAME_AXES),
        ("A[I, J_X]", "B[J_Y, K]", Case.MISMATCHED),
        ("A[I, J_XY]", "B[J_YX, K]", Case.MISMATCHED),
    ],
)
def test_case_of_the_contracted_dim(left: str, right: str, case: Case) -> None:
    spec = Spec.of(T(left), T(right))
    (j,) = [c for c in classify(T(left), T(right), spec) if c.role is Role.CONTRACTED]
    assert j.case is case


def test_case_lines() -> None:
    left, right = T("A[I_X, J]"), T("B[J, K_X]")
    assert case_lines(left, right, Spec.of(left, right)) == (
        "case 1: J is contracted and sharded in neither operand",
        "free: I of A, sharded over X",
        "free: K of B, sharded over X",
        "case 4: I of A and K of B are both sharded over X",
    )
    left, right = T("A[I, J_X]"), T("B[J_Y, K]{U_Z}")
    assert case_lines(left, right, Spec.of(left, right))[0] == (
        "mismatched: J is contracted and sharded over X in A but Y in B"
    )
    assert case_lines(left, right, Spec.of(left, right))[-1] == "unreduced: B is unreduced over Z"


LOCAL = [
    ("A[I, J]", "B[J, K]", None, "C[I, K]"),
    ("A[I_X, J]", "B[J, K_Y]", None, "C[I_X, K_Y]"),
    ("A[I, J_X]", "B[J_X, K]", None, "C[I, K]{U_X}"),
    ("A[I, J_XY]", "B[J_XY, K]", None, "C[I, K]{U_X, U_Y}"),
    ("A[B_X, I, J_Y]", "W[B_X, J_Y, K]", "C[B, I, K]", "C[B_X, I, K]{U_Y}"),
    ("A[I, J]{U_X}", "B[J, K_Y]", None, "C[I, K_Y]{U_X}"),
    ("A[I, J]{I_X}", "B[J, K]{I_X}", None, "C[I, K]{I_X}"),
    ("A[I, J]{I_X}", "B[J, K_X]", None, "C[I, K_X]"),
]


@pytest.mark.parametrize("left, right, result, out", LOCAL)
def test_local_output(left: str, right: str, result: str | None, out: str) -> None:
    spec = Spec.of(T(left), T(right), None, T(result) if result else None)
    got = local_output(T(left), T(right), spec, M)
    assert got == T(out)
    assert LOCAL_EINSUM.apply(T(left), T(right), spec, M) == got
    # the executor agrees that the local product of the shards is that tensor
    step = Step(Op.EINSUM, (T(left), T(right)), got)
    assert run_plan(Plan((T(left), T(right)), (step,), got), M).ok


REFUSED = [
    (
        "A[I, J_X]",
        "B[J, K]",
        None,
        NotLocal,
        "case 2: J is contracted and sharded over X in A[I, J_X] only, so a local product would sum only a block of J",
        "gather it: AllGather_X(A[I, J_X]); or slice B onto X (Slice_{X,J}) and reduce the product",
    ),
    (
        "A[I, J_X]",
        "B[J_Y, K]",
        None,
        NotLocal,
        "J is contracted and sharded over X in A[I, J_X] but Y in B[J_Y, K]: the shards on a device hold different blocks of it",
        "gather one side (AllGather_Y(B[J_Y, K])), or permute it into place",
    ),
    (
        "A[I_X, J]",
        "B[J, K_X]",
        None,
        SameAxisResultDims,
        "case 4: I of A[I_X, J] and K of B[J, K_X] are both sharded over X; each device would hold only a diagonal block of the result",
        "gather one operand first: AllGather_X(A[I_X, J]) or AllGather_X(B[J, K_X])",
    ),
    (
        "A[I, J]{U_X}",
        "B[J, K]{U_X}",
        None,
        UnreducedProduct,
        "both A[I, J]{U_X} and B[J, K]{U_X} are unreduced over X: a product of sums is not the sum of products",
        "reduce one first: AllReduce_X(A[I, J]{U_X})",
    ),
    (
        "A[I, J]{U_X}",
        "B[J, K_X]",
        None,
        UnreducedProduct,
        "A[I, J]{U_X} is unreduced over X and B[J, K_X] is sharded over X: each device would multiply a partial sum by a different block",
        "AllReduce_X(A[I, J]{U_X}) first, or AllGather_X(B[J, K_X])",
    ),
    (
        "A[B_X, J]",
        "W[B, J, K]",
        "C[B, K]",
        BatchDimMismatch,
        "batch dim B is sharded over X in A[B_X, J] but nothing in W[B, J, K]",
        "shard B alike in both operands",
    ),
]


@pytest.mark.parametrize("left, right, result, err, message, fix", REFUSED)
def test_refusals(left, right, result, err, message, fix) -> None:
    spec = Spec.of(T(left), T(right), None, T(result) if result else None)
    with pytest.raises(err) as info:
        local_output(T(left), T(right), spec, M)
    assert info.value.message == message
    assert info.value.fix == fix


@pytest.mark.parametrize(
    "left, right, contract, result, message",
    [
        (
            "A[I, J]",
            "B[J, K]",
            None,
            "C[I, L]",
            "the result C[I, L] has dim L, which A[I, J] · B[J, K] does not produce",
        ),
        (
            "A[I, J]",
            "B[J, K]",
            None,
            "C[K]",
            "dim I is in only one operand and not in the result C[K]; a product sums only dims of both operands",
        ),
        (
            "A[I, J]",
            "B[J, K]",
            ("I",),
            None,
            "·_I contracts I, which is not a dim of both A[I, J] and B[J, K]",
        ),
        ("A[I, I]", "B[I, K]", None, None, "dim I appears twice in A[I, I]"),
        ("A[I, 4]", "B[8, K]", None, None, None),
    ],
)
def test_shape_mismatches(left, right, contract, result, message) -> None:
    if message is None:  # literal sizes are dims named by their size; no shared dim here
        assert Spec.of(T(left), T(right)).contracted == ()
        return
    with pytest.raises(ShapeMismatch) as info:
        Spec.of(T(left), T(right), contract, T(result) if result else None)
    assert info.value.message == message
