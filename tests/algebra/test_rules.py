"""The rule table: each collective's output layout, its refusals (full texts pinned), its transpose as data,
and on numbers: every move a rule offers from a random layout runs on the executor and is the identity on
the global value."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardalg.algebra.layout import Layout, tensor_with
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.ops import RULES, DimMap, rule
from shardalg.algebra.statements import apply_statement
from shardalg.errors import IllegalCollective, IllegalSharding, ShapeMismatch, ShardalgError, UnknownAxis
from shardalg.notation.parse import parse_statement, parse_tensor
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Dim, Op, Tensor
from shardalg.numeric.execute import run_plan

T = parse_tensor
M = Mesh(X=4, Y=2, Z=2)

# (op, axes, dim, input, output)
APPLY = [
    (Op.ALL_GATHER, "X", None, "A[I_X, J]", "A[I, J]"),
    (Op.ALL_GATHER, "XY", None, "A[I_XY, J]", "A[I, J]"),
    (Op.ALL_GATHER, "Y", None, "A[I_XY, J]", "A[I_X, J]"),
    (Op.ALL_GATHER, "XY", None, "A[B_X, D_Y]", "A[B, D]"),
    (Op.ALL_GATHER, "X", None, "A[B_X, D_Y]", "A[B, D_Y]"),
    (Op.ALL_GATHER, "X", None, "A[I_X, J]{U_Y}", "A[I, J]{U_Y}"),
    (Op.REDUCE_SCATTER, "Y", "J", "A[I_X, J]{U_Y}", "A[I_X, J_Y]"),
    (Op.REDUCE_SCATTER, "X", "K", "C[I, K]{U_X}", "C[I, K_X]"),
    (Op.REDUCE_SCATTER, "XY", "K", "C[I, K]{U_X, U_Y}", "C[I, K_XY]"),
    (Op.REDUCE_SCATTER, "Y", "I", "C[I_X, K]{U_Y}", "C[I_XY, K]"),
    (Op.ALL_REDUCE, "Y", None, "A[I_X, J]{U_Y}", "A[I_X, J]"),
    (Op.ALL_REDUCE, "X", None, "C[I, K]{U_X, U_Y}", "C[I, K]{U_Y}"),
    (Op.ALL_TO_ALL, "X", "J", "A[I_X, J]", "A[I, J_X]"),
    (Op.ALL_TO_ALL, "Y", "J", "A[I_XY, J]", "A[I_X, J_Y]"),
    (Op.ALL_TO_ALL, "Y", "I", "A[I_X, J_Y]", "A[I_XY, J]"),
    (Op.SLICE, "Z", "B", "A[B_X, D_Y]", "A[B_XZ, D_Y]"),
    (Op.SLICE, "X", "I", "A[I, J]{I_X}", "A[I_X, J]"),
    (Op.PERMUTE, "YZ", None, "A[I_Y, J]", "A[I_Z, J]"),
    (Op.PERMUTE, "XY", None, "A[I_XY, J]", "A[I_YX, J]"),
    (Op.PERMUTE, "YZ", None, "A[I_Y, J_Z]", "A[I_Z, J_Y]"),
    (Op.PERMUTE, "YZ", None, "A[I, J]{U_Y}", "A[I, J]{U_Z}"),
]


@pytest.mark.parametrize("op, axes, dim, before, after", APPLY)
def test_apply(op: Op, axes: str, dim: str | None, before: str, after: str) -> None:
    assert RULES[op].apply(T(before), tuple(axes), dim, M) == T(after)


@pytest.mark.parametrize("op, axes, dim, before, after", APPLY)
def test_each_application_runs_on_numbers(
    op: Op, axes: str, dim: str | None, before: str, after: str
) -> None:
    src, out = T(before), T(after)
    res = run_plan(Plan((src,), (Step(op, (src,), out, tuple(axes), dim),), out), M)
    assert res.ok, str(res)


# (op, axes, dim, input, error class, full message, fix)
REFUSED = [
    (
        Op.ALL_GATHER,
        "Y",
        None,
        "A[I_X, J]",
        IllegalCollective,
        "Y does not shard A; A is sharded over X (dim I)",
        "gather an axis that shards it: AllGather_X",
    ),
    (
        Op.ALL_GATHER,
        "X",
        None,
        "A[I_XY, J]",
        IllegalCollective,
        "AllGather_X would take X off I_XY in A[I_XY, J], but X is not its minor-most axis (Y is); "
        "a collective only removes the minor-most axes",
        "Permute_{X,Y} first (A[I_YX, J]), then AllGather_X; or AllGather_XY",
    ),
    (
        Op.ALL_GATHER,
        "X",
        None,
        "C[I, K]{U_X}",
        IllegalCollective,
        "X does not shard C; C is not sharded",
        "sum the partials: AllReduce_X, or ReduceScatter_{X,d}",
    ),
    (
        Op.REDUCE_SCATTER,
        "X",
        "K",
        "C[I, K_X]",
        IllegalCollective,
        "ReduceScatter_X sums partial values, but C is not unreduced over X (X shards dim K; no {U_X})",
        "AllGather_X gathers a sharded dim",
    ),
    (
        Op.REDUCE_SCATTER,
        "X",
        None,
        "C[I, K]{U_X}",
        IllegalCollective,
        "ReduceScatter_X needs a target dim of C[I, K]{U_X}",
        "write ReduceScatter_{X,d} with d one of I, K",
    ),
    (
        Op.ALL_REDUCE,
        "Y",
        None,
        "A[I_X, J]",
        IllegalCollective,
        "AllReduce_Y sums partial values, but A is not unreduced over Y (A is replicated over Y; no {U_Y})",
        "nothing to reduce",
    ),
    (
        Op.ALL_TO_ALL,
        "X",
        "I",
        "A[I_X, J]",
        IllegalCollective,
        "AllToAll_{X,I} moves a sharding to another dim, but X already shards I",
        None,
    ),
    (
        Op.ALL_TO_ALL,
        "X",
        "J",
        "A[I_XY, J]",
        IllegalCollective,
        "AllToAll_X would take X off I_XY in A[I_XY, J], but X is not its minor-most axis (Y is); "
        "a collective only removes the minor-most axes",
        "Permute_{X,Y} first (A[I_YX, J]), then AllToAll_X; or AllToAll_XY",
    ),
    (
        Op.SLICE,
        "X",
        "J",
        "A[I_X, J]",
        IllegalCollective,
        "Slice_X needs A replicated over X, but X shards dim I",
        "AllToAll_{X,d} moves a sharding to another dim",
    ),
    (
        Op.SLICE,
        "X",
        "J",
        "A[I, J]{U_X}",
        IllegalCollective,
        "Slice_X keeps one block of a replicated value, but A is unreduced over X: each device holds only a partial sum",
        "ReduceScatter_{X,d} sums and keeps one block",
    ),
    (
        Op.PERMUTE,
        "XY",
        None,
        "A[I_X, J]",
        IllegalCollective,
        "Permute_{X,Y} cannot re-lay A[I_X, J]: |X| = 4 and |Y| = 2 differ, so the local shape would change",
        "AllGather then Slice, or AllToAll, to move the sharding between X and Y",
    ),
    (
        Op.PERMUTE,
        "XY",
        None,
        "A[I, J]{U_X}",
        IllegalCollective,
        "Permute_{X,Y} cannot re-lay A[I, J]{U_X}: partial sums over X cannot become partial sums over Y of another size",
        "AllGather then Slice, or AllToAll, to move the sharding between X and Y",
    ),
    (
        Op.PERMUTE,
        "X",
        None,
        "A[I_X, J]",
        IllegalCollective,
        "Permute swaps two mesh axes (or renames several distinct ones in a cycle), not 1 (X)",
        "write Permute_{X,Y} (a swap) or Permute_{X,Y,Z} (X to Y, Y to Z, Z to X)",
    ),
    (
        Op.SHIFT,
        "XY",
        None,
        "A[I_XY, J]",
        IllegalCollective,
        "Shift moves blocks around one ring, not 2 axes (X, Y)",
        "shift along one axis: Shift_{X,+1}; a shift along several is one Shift per axis",
    ),
]


@pytest.mark.parametrize("op, axes, dim, before, err, message, fix", REFUSED)
def test_refusals_say_why_and_the_fix(op, axes, dim, before, err, message, fix) -> None:
    with pytest.raises(err) as info:
        RULES[op].apply(T(before), tuple(axes), dim, M)
    assert info.value.message == message
    assert info.value.fix == fix


def test_unknown_axis_and_axis_used_twice_are_refused() -> None:
    with pytest.raises(UnknownAxis):
        RULES[Op.ALL_GATHER].apply(T("A[I_W, J]"), ("W",), None, M)
    with pytest.raises(IllegalSharding):
        RULES[Op.ALL_GATHER].apply(T("A[I_X, J_X]"), ("X",), None, M)


def test_permute_of_unequal_axes_is_legal_when_no_local_shape_changes() -> None:
    # I_XY -> I_YX moves blocks among the X·Y devices; every device still holds |I|/8 rows
    assert RULES[Op.PERMUTE].apply(T("A[I_XY, J]"), ("X", "Y"), None, M) == T("A[I_YX, J]")
    res = run_plan(
        Plan(
            (T("A[I_XY, J]"),),
            (Step(Op.PERMUTE, (T("A[I_XY, J]"),), T("A[I_YX, J]"), ("X", "Y")),),
            T("A[I_YX, J]"),
        ),
        M,
    )
    assert res.ok


def test_divisibility_with_known_sizes() -> None:
    with pytest.raises(IllegalSharding) as info:
        RULES[Op.SLICE].apply(T("A[I, J]"), ("X",), "I", M, {"I": 6})
    assert info.value.rule == "indivisible-dim"


def test_transposes_are_data() -> None:
    back = {op: r.transpose.op for op, r in RULES.items()}
    assert back == {
        Op.ALL_GATHER: Op.REDUCE_SCATTER,
        Op.REDUCE_SCATTER: Op.ALL_GATHER,
        Op.ALL_REDUCE: Op.ALL_REDUCE,
        Op.ALL_TO_ALL: Op.ALL_TO_ALL,
        Op.PERMUTE: Op.PERMUTE,
        Op.SHIFT: Op.SHIFT,  # by the opposite offset: the inverse cyclic permutation
        Op.SEND: Op.SEND,  # by the opposite offset: the cotangent is sent back
        Op.SLICE: None,  # zero-pad to unreduced, no communication
    }
    assert RULES[Op.ALL_TO_ALL].transpose.dim is DimMap.SWAP
    # AllGather <-> ReduceScatter is an involution on the table
    for op in (Op.ALL_GATHER, Op.REDUCE_SCATTER):
        assert RULES[RULES[op].transpose.op].transpose.op is op


def test_docstrings_open_with_the_signature_and_communication_flags() -> None:
    for op, r in RULES.items():
        assert r.signature.startswith(op.value), r.signature
        assert "backward" in r.doc
    assert [op for op, r in RULES.items() if not r.communicates] == [Op.SLICE]
    with pytest.raises(ShardalgError):
        rule(Op.EINSUM)


# ---- statements -------------------------------------------------------------------------------------

STATEMENTS = [
    ("AllGather_X(A[I_X, J])", "A[I, J]"),
    ("AllGather_X: A[I_X, J] -> A[I, J]", "A[I, J]"),
    ("AllGather_XY(A[I_XY, J]) -> A[I, J]", "A[I, J]"),
    ("ReduceScatter_{Y,J} A[I_X, J]{U_Y} -> A[I_X, J_Y]", "A[I_X, J_Y]"),
    ("ReduceScatter_X(C[I, K]{U_X}) -> C[I, K_X]", "C[I, K_X]"),  # the dim comes from the result
    ("AllReduce_Y A[I_X, J]{U_Y} -> A[I_X, J]", "A[I_X, J]"),
    ("AllToAll_{X,J} A[I_X, J] -> A[I, J_X]", "A[I, J_X]"),
    ("Slice_{Z,B}: A[B_X, D_Y] -> A[B_XZ, D_Y]", "A[B_XZ, D_Y]"),
    ("Permute_{Y,Z}: A[I_Y, J] -> A[I_Z, J]", "A[I_Z, J]"),
    ("AllGather_Y(AllGather_X(A[I_X, J_Y]))", "A[I, J]"),
    ("Shift_{X,+1}(A[I_X, J]) -> A[I_X, J]", "A[I_X, J]"),  # the layout stays; the blocks move
    ("Shift_{Y,-1}(A[I, J]{U_Y})", "A[I, J]{U_Y}"),
]


@pytest.mark.parametrize("text, out", STATEMENTS)
def test_apply_statement(text: str, out: str) -> None:
    assert apply_statement(parse_statement(text), M) == T(out)


def test_a_wrong_written_result_is_a_shape_mismatch_naming_the_expected_one() -> None:
    with pytest.raises(ShapeMismatch) as info:
        apply_statement(parse_statement("AllGather_X: A[I_X, J_Y] -> A[I, J]"), M)
    assert info.value.message == "AllGather_X of A[I_X, J_Y] gives A[I, J_Y], not A[I, J]"
    assert info.value.fix == "write the result as A[I, J_Y]"


def test_reduce_scatter_whose_result_matches_no_dim() -> None:
    with pytest.raises(ShapeMismatch) as info:
        apply_statement(parse_statement("ReduceScatter_X(C[I, K]{U_X}) -> C[I_Y, K]"), M)
    assert "no dim of C[I, K]{U_X} gives C[I_Y, K]" in info.value.message


def test_gather_to_an_invariant_result_is_accepted() -> None:
    out = apply_statement(parse_statement("AllGather_X: W[D_X, F] -> W[D, F]{I_X}"), M)
    assert out == T("W[D, F]{I_X}")


# ---- every move a rule offers is legal and runs on numbers ---------------------------------------------

AXES = ("X", "Y", "Z")


@st.composite
def layouts(draw: st.DrawFn) -> tuple[Mesh, Tensor]:
    sizes = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    mesh = Mesh({a: s for a, s in zip(AXES, sizes, strict=False)})
    ndims = draw(st.integers(1, 3))
    labels = ("I", "J", "K")[:ndims]
    dims: list[list[str]] = [[] for _ in labels]
    unreduced = []
    for a in mesh.names:
        where = draw(st.integers(-2, ndims - 1))  # -2 replicated, -1 unreduced, else that dim
        if where == -1:
            unreduced.append(a)
        elif where >= 0:
            dims[where].append(a)
    for d in dims:
        order = draw(st.permutations(d))
        d[:] = order
    t = Tensor("A", tuple(Dim(n, tuple(ax)) for n, ax in zip(labels, dims, strict=True)), tuple(unreduced))
    return mesh, t


@given(layouts(), st.data())
def test_every_move_checks_and_is_the_identity_on_numbers(
    ml: tuple[Mesh, Tensor], data: st.DataObject
) -> None:
    mesh, t = ml
    lay = Layout.of(t)
    moves = [(op, axes, dim) for op, r in RULES.items() for axes, dim in r.moves(lay, mesh)]
    if not moves:
        return
    op, axes, dim = data.draw(st.sampled_from(moves))
    label = t.dims[dim].label if dim is not None else None
    out = RULES[op].apply(t, axes, label, mesh)  # the precondition accepts every move it offers
    assert out == tensor_with(t, RULES[op].effect(lay, axes, dim))
    res = run_plan(Plan((t,), (Step(op, (t,), out, axes, label),), out), mesh, rng=np.random.default_rng(0))
    assert res.ok, str(res)


# ---- the ring shift: the layout stays, the blocks move (the one op that is not the identity) ------------


@pytest.mark.parametrize("offset", [1, -1, 3, 6])
def test_a_shift_rolls_the_blocks_of_the_dim_its_axis_shards(offset: int) -> None:
    """Device x's block goes to x + k: the reassembled value is the dense value rolled by k blocks (numpy's
    own roll, independent of the executor), and the bytes are one shard a device."""
    a = T("A[I_X, J]")
    step = Step(Op.SHIFT, (a,), a, ("X",), offset=offset)
    dense = np.arange(8 * 3, dtype=float).reshape(8, 3)
    res = run_plan(Plan((a,), (step,), a), Mesh(X=4), {"I": 8, "J": 3}, inputs={"A": dense})
    assert res.ok, str(res)
    assert np.array_equal(res.output, np.roll(dense, 2 * offset, axis=0))  # 2 rows a block
    assert res.total_bytes == 4 * 2 * 3 * 2  # each of 4 devices receives its 2x3 bf16 block


def test_a_shift_of_a_replicated_or_unreduced_value_keeps_the_value() -> None:
    rng = np.random.default_rng(3)
    for t in ("A[I, J]", "A[I, J]{U_X}", "A[I_Y, J]"):
        dense = rng.standard_normal((4, 3))
        step = Step(Op.SHIFT, (T(t),), T(t), ("X",), offset=1)
        res = run_plan(Plan((T(t),), (step,), T(t)), Mesh(X=4, Y=2), {"I": 4, "J": 3}, inputs={"A": dense})
        assert res.ok and np.allclose(res.output, dense), t  # copies, or partials of one sum, change devices


def test_a_shift_of_a_minor_axis_rolls_that_digit_of_the_block_index() -> None:
    """A[I_XY] on X=2, Y=2: block x·2 + y; Shift_Y by +1 swaps the y digit within each x."""
    a = T("A[I_XY]")
    dense = np.arange(4.0)
    res = run_plan(
        Plan((a,), (Step(Op.SHIFT, (a,), a, ("Y",), offset=1),), a),
        Mesh(X=2, Y=2),
        {"I": 4},
        inputs={"A": dense},
    )
    assert res.ok and list(res.output) == [1.0, 0.0, 3.0, 2.0]
