"""The planner: the book's four cases, every seed matmul with its expected collectives, and on numbers:
every plan for a random legal einsum equals the dense result on the executor."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, reject
from hypothesis import strategies as st

from shardalg.algebra.einsum import NotLocal
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.traffic import Sizes
from shardalg.errors import LimitExceeded, NoPlan, ShardalgError, UnreachableUnreduced, UsageError
from shardalg.notation.parse import parse_tensor
from shardalg.notation.plan import Plan, producers_of
from shardalg.notation.syntax import Dim, Op, Tensor
from shardalg.numeric.execute import run_plan
from shardalg.planning.planner import plan, plans
from shardalg.planning.redistribute import plan_bytes

T = parse_tensor


def sig(p: Plan) -> list[str]:
    """A plan as op names with axes (and target dims): ``["AllGather_X(A)", "Einsum", "AllReduce_X(C)"]``."""
    out = []
    for s in p.steps:
        if s.op is Op.EINSUM:
            out.append("Einsum")
        else:
            sub = "".join(s.axes) + (f",{s.dim}" if s.dim and s.op is not Op.SLICE else "")
            sub += f",{s.dim}" if s.op is Op.SLICE else ""
            out.append(f"{s.op.value}_{sub}({s.inputs[0].name})")
    return out


def sigs(expr: str, mesh: str, **kw) -> list[list[str]]:
    return [sig(p) for p in plans(expr, mesh=mesh, **kw)]


def all_ok(ps: list[Plan], mesh: str, sizes: dict[str, int] | None = None) -> bool:
    return all(run_plan(p, mesh, sizes, np.random.default_rng(0)).ok for p in ps)


# ---- the book's four cases (seed 000) ------------------------------------------------------------------


def test_case_1_needs_nothing() -> None:
    for expr in (
        "A[I, J] · B[J, K] -> C[I, K]",
        "A[I_X, J] · B[J, K] -> C[I_X, K]",
        "A[I, J] · B[J, K_Y] -> C[I, K_Y]",
        "A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]",
    ):
        ps = plans(expr, mesh=Mesh.parse("X=4,Y=2"))
        assert [sig(p) for p in ps] == [["Einsum"]], expr
        assert (
            ps[0].steps[0].reason
            == "case 1: no contracted dim is sharded, so the local product needs no communication"
        )
        assert all_ok(ps, "X=4,Y=2")


def test_case_2_gathers_and_lists_slice_then_reduce() -> None:
    ps = plans("A[I, J_X] · B[J, K] -> C[I, K]", mesh=Mesh.parse("X=4"))
    assert [sig(p) for p in ps] == [
        ["AllGather_X(A)", "Einsum"],
        ["Slice_X,J(B)", "Einsum", "AllReduce_X(C)"],
    ]
    assert (
        ps[0].steps[0].reason == "AllGather: case 2: J is contracted and sharded over X in A only; gather it"
    )
    assert ps[0].cases[0] == "case 2: J is contracted and sharded over X in A only"
    assert ps[1].steps[1].reason == "case 3: both operands shard J over X, so the local product is C{U_X}"
    assert all_ok(ps, "X=4")


def test_case_3_gives_unreduced_and_both_finishes() -> None:
    ps = plans("A[I, J_X] · B[J_X, K]", mesh=Mesh.parse("X=4"))
    assert [sig(p) for p in ps] == [
        ["Einsum"],
        ["Einsum", "ReduceScatter_X,I(C)"],
        ["Einsum", "ReduceScatter_X,K(C)"],
        ["Einsum", "AllReduce_X(C)"],
    ]
    assert ps[0].output == T("C[I, K]{U_X}")
    assert [p.output for p in ps[1:]] == [T("C[I_X, K]"), T("C[I, K_X]"), T("C[I, K]")]
    assert all_ok(ps, "X=4")
    # with a requested result: AllReduce first, gathering both operands listed too
    assert sigs("A[I, J_X] · B[J_X, K] -> C[I, K]", Mesh.parse("X=4")) == [
        ["Einsum", "AllReduce_X(C)"],
        ["AllGather_X(A)", "AllGather_X(B)", "Einsum"],
    ]
    assert sigs("A[I, J_X] · B[J_X, K] -> C[I, K_X]", Mesh.parse("X=4"))[0] == [
        "Einsum",
        "ReduceScatter_X,K(C)",
    ]


def test_case_4_lists_both_gathers() -> None:
    ps = plans("A[I_X, J] · B[J, K_X]", mesh=Mesh.parse("X=4"))
    assert [sig(p) for p in ps] == [["AllGather_X(A)", "Einsum"], ["AllGather_X(B)", "Einsum"]]
    assert [p.output for p in ps] == [T("C[I, K_X]"), T("C[I_X, K]")]
    assert "case 4: I of A and K of B are both sharded over X" in ps[0].cases
    assert all_ok(ps, "X=4")


def test_mismatched_contracting_axes() -> None:
    ps = plans("A[I, J_X] · B[J_Y, K] -> C[I, K]", mesh=Mesh.parse("X=2,Y=2"))
    got = [sig(p) for p in ps]
    assert ["AllGather_X(A)", "AllGather_Y(B)", "Einsum"] in got
    assert ["Permute_XY(B)", "Einsum", "AllReduce_X(C)"] in got  # permute into place (equal sizes)
    assert ["Permute_XY(A)", "Einsum", "AllReduce_Y(C)"] in got
    assert all_ok(ps, "X=2,Y=2")
    # unequal sizes: a permute may only reorder the axes of one dim (J_XY -> J_YX), never J_X -> J_Y
    ps = plans("A[I, J_X] · B[J_Y, K] -> C[I, K]", mesh=Mesh.parse("X=4,Y=2"))
    permutes = [s for p in ps for s in p.steps if s.op is Op.PERMUTE]
    assert permutes and all(
        sorted(s.inputs[0].axes_of("J")) == sorted(s.output.axes_of("J")) == ["X", "Y"] for s in permutes
    )
    assert ["AllGather_X(A)", "AllGather_Y(B)", "Einsum"] in [sig(p) for p in ps]
    assert all_ok(ps, "X=4,Y=2")


# ---- seed 000's matmuls and questions, seed 004's partitions --------------------------------------------


def test_seed_000_gather_inputs_or_gather_the_output() -> None:
    got = sigs("A[I_X, J] · B[J, K_Y] -> C[I, K]", Mesh.parse("X=4,Y=2"))
    assert got[0] == ["Einsum", "AllGather_XY(C)"]
    assert ["AllGather_X(A)", "AllGather_Y(B)", "Einsum"] in got
    got = sigs("A[I_X, J] · B[J, K] -> C[I, K]", Mesh.parse("X=4"))
    assert sorted(got) == sorted([["AllGather_X(A)", "Einsum"], ["Einsum", "AllGather_X(C)"]])


def test_seed_000_reduce_scatter_instead_of_all_reduce() -> None:
    p = plan("A[I, J_X] · B[J_X, K] -> C[I, K_X]", mesh=Mesh.parse("X=4"))
    assert sig(p) == ["Einsum", "ReduceScatter_X,K(C)"]
    assert str(p) == (
        "A[I, J_X] *_LOCAL B[J_X, K] -> C[I, K]{U_X}  # case 3: both operands shard J over X, so the local product is C{U_X}\n"
        "ReduceScatter_{X,K}(C[I, K]{U_X}) -> C[I, K_X]  # case 3 finish: ReduceScatter_{X,K} sums the partials and leaves K sharded over X"
    )


def test_seed_000_question_4_two_strategies_and_d_greater_than_2b() -> None:
    expr = "X[B, D] ·_D Y[D_X, F] -> Z[B, F]"
    assert sigs(expr, Mesh.parse("X=4")) == [
        ["AllGather_X(Y)", "Einsum"],
        ["Slice_X,D(X)", "Einsum", "AllReduce_X(Z)"],
    ]
    mesh = Mesh(X=4)
    small_batch = {"B": 128, "D": 8192, "F": 32768}  # D > 2B: AllReduce of the partials moves less
    ps = plans(expr, mesh=mesh, sizes=small_batch)
    assert sig(ps[0]) == ["Slice_X,D(X)", "Einsum", "AllReduce_X(Z)"]
    assert plan_bytes(ps[0], mesh, Sizes(small_batch)).number == 2 * 2 * 128 * 32768  # 2 x (2BF bytes)
    assert plan_bytes(ps[1], mesh, Sizes(small_batch)).number == 2 * 8192 * 32768  # 2DF bytes
    big_batch = {"B": 8192, "D": 8192, "F": 32768}  # D < 2B: gather the weights
    assert sig(plans(expr, mesh=mesh, sizes=big_batch)[0]) == ["AllGather_X(Y)", "Einsum"]
    assert all_ok(ps, "X=4")


def test_seed_000_question_6() -> None:
    p = plan("A[I_X, J_Y] ·_J B[J_Y, K] -> C[I_X, K]", mesh=Mesh.parse("X=4,Y=4"))
    assert sig(p) == ["Einsum", "AllReduce_Y(C)"]


def test_seed_000_all_to_all_resharding() -> None:
    p = plan("A[I_X, J] -> A[I, J_X]", mesh=Mesh.parse("X=4"))
    assert sig(p) == ["AllToAll_X,J(A)"]


def test_seed_004_column_and_row_partition() -> None:
    col = plans("x[B, D] · W[D, F_X] -> y[B, F_X]", mesh=Mesh.parse("X=2"))
    assert [sig(p) for p in col] == [["Einsum"]]  # each device computes x·W_i: concatenate, no communication
    row = plans("x[B, D_X] · W[D_X, F] -> y[B, F]", mesh=Mesh.parse("X=2"))
    assert sig(row[0]) == ["Einsum", "AllReduce_X(y)"]  # x_1 W_1 + x_2 W_2: a sum
    sizes = {"B": 1, "D": 2, "F": 4}
    x = np.array([[2.0, 3.0]])
    w = np.array([[1.0, 0, 1, 2], [0, 1, 3, 4]])
    for p in (col[0], row[0]):
        res = run_plan(p, "X=2", sizes, inputs={"x": x, "W": w})
        assert res.ok and res.output.tolist() == [[2.0, 3.0, 11.0, 16.0]]


def test_spare_axis_variant_is_listed() -> None:
    ps = plans("A[I_X, J] · B[J, K] -> C[I, K]", mesh=Mesh.parse("X=4,Z=2"))
    got = [sig(p) for p in ps]
    assert ["Slice_Z,I(A)", "AllGather_XZ(A)", "Einsum"] in got
    assert all_ok(ps, "X=4,Z=2")


def test_batch_dims_attention_style() -> None:
    expr = "Q[B_X, S, H_Y, D] · K[B_X, T, H_Y, D] -> L[B_X, S, H_Y, T]"
    ps = plans(expr, mesh=Mesh.parse("X=2,Y=2"))
    assert sig(ps[0]) == ["Einsum"]
    ps = plans("Q[B_X, S, D] · K[B, T, D] -> L[B_X, S, T]", mesh=Mesh.parse("X=2"))
    assert sig(ps[0]) == ["Slice_X,B(K)", "Einsum"]
    assert all_ok(ps, "X=2")


def test_unreduced_inputs() -> None:
    ps = plans("A[I, J]{U_X} · B[J, K]{U_X} -> C[I, K]", mesh=Mesh.parse("X=2"))
    assert all(any(s.startswith("AllReduce_X(") for s in sig(p)[:2]) for p in ps)
    assert all_ok(ps, "X=2")


def test_local_product_as_written() -> None:
    ps = plans("A[I, J_X] ·_LOCAL B[J_X, K]", mesh=Mesh.parse("X=2"))
    assert [sig(p) for p in ps] == [["Einsum"]] and ps[0].output == T("C[I, K]{U_X}")
    with pytest.raises(NotLocal):  # the legality says so before the planner starts (check agrees)
        plans("A[I, J_X] ·_LOCAL B[J, K]", mesh=Mesh.parse("X=2"))


def test_collective_statement_is_its_own_plan() -> None:
    p = plan("AllGather_X(A[I_X, J]) -> A[I, J]", mesh=Mesh.parse("X=4"))
    assert sig(p) == ["AllGather_X(A)"] and p.output == T("A[I, J]")


def test_requests_that_cannot_be_met() -> None:
    # the legality (one for check and plan) refuses it before planning, with the facts that make it unreachable
    with pytest.raises(UnreachableUnreduced) as unreachable:
        plans("A[I] · B[K] -> C[I, K]{U_X}", mesh=Mesh.parse("X=2"))
    assert unreachable.value.message == (
        "the result is unreduced over X, but no plan leaves partial sums there: a product has them only where an "
        "operand does, or where both shard a contracted dim (case 3), and a Permute renames them only between "
        "axes of one size; this product contracts no dim"
    )
    with pytest.raises(ShardalgError) as info:
        plans(
            "A[I, J] · B[J, K] -> C[I, K]",
            mesh=Mesh.parse("X=4"),
            sizes={"I": 6, "J": 4, "K": 4},
            target="C[I_X, K]",
        )
    assert info.value.rule == "indivisible-dim"
    with pytest.raises(UsageError):
        plans("A[I, J] · B[J, K] -> C[I, K]")


def test_deterministic_and_without_duplicates() -> None:
    a = plans("A[I, J_X] · B[J_Y, K]", mesh=Mesh.parse("X=2,Y=2"))
    b = plans("A[I, J_X] · B[J_Y, K]", mesh=Mesh.parse("X=2,Y=2"))
    assert a == b
    assert len({p.steps for p in a}) == len(a)


# ---- properties on numbers ---------------------------------------------------------------------------

AXES = ("X", "Y", "Z")
DIMS = ("I", "J", "K", "L")


def _shard(
    draw: st.DrawFn, labels: list[str], mesh: Mesh, unreduced: bool
) -> tuple[list[list[str]], list[str]]:
    dims: list[list[str]] = [[] for _ in labels]
    u = []
    for a in mesh.names:
        kinds = ["R", "S"] + (["U"] if unreduced else [])
        kind = draw(st.sampled_from(kinds))
        if kind == "U":
            u.append(a)
        elif kind == "S" and labels:
            dims[draw(st.integers(0, len(labels) - 1))].append(a)
    for d in dims:
        d[:] = draw(st.permutations(d))
    return dims, u


def _tensor(name: str, labels: list[str], dims: list[list[str]], u: list[str]) -> Tensor:
    return Tensor(name, tuple(Dim(n, tuple(a)) for n, a in zip(labels, dims, strict=True)), tuple(u))


@st.composite
def einsums(draw: st.DrawFn) -> tuple[Mesh, Tensor, Tensor, Tensor | None]:
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    mesh = Mesh({a: s for a, s in zip(AXES, sizes, strict=False)})
    left = draw(st.lists(st.sampled_from(DIMS), min_size=1, max_size=3, unique=True))
    right = draw(st.lists(st.sampled_from(DIMS), min_size=1, max_size=3, unique=True))
    shared = [d for d in left if d in right]
    with_result = draw(st.booleans())
    batch = [d for d in shared if with_result and draw(st.booleans())]
    contracted = [d for d in shared if d not in batch]
    out = [d for d in left if d not in contracted] + [
        d for d in right if d not in contracted and d not in left
    ]
    A = _tensor("A", left, *_shard(draw, left, mesh, True))
    B = _tensor("B", right, *_shard(draw, right, mesh, True))
    C = None
    if with_result:
        out = draw(st.permutations(out))
        C = _tensor("C", list(out), *_shard(draw, list(out), mesh, draw(st.booleans())))
    return mesh, A, B, C


@given(einsums())
def test_every_plan_equals_the_dense_result(case: tuple[Mesh, Tensor, Tensor, Tensor | None]) -> None:
    mesh, A, B, C = case
    from shardalg.notation.syntax import Arrow, Product

    stmt = Arrow(Product(A, B), C) if C is not None else Product(A, B)
    try:
        found = plans(stmt, mesh=mesh)
    except (NoPlan, UnreachableUnreduced):
        # only an unreduced request the product cannot make is unreachable
        assert C is not None and C.unreduced
        return
    assert found
    for p in found:
        try:
            res = run_plan(p, mesh, rng=np.random.default_rng(0))
        except LimitExceeded as err:  # a value too big for the executor's numpy buffers (long runs draw such)
            assert err.rule == "limit-elements", err
            reject()
        assert res.ok, f"{stmt}\n{p}\n{res}"
        if C is not None:
            assert p.output == C


@given(einsums())
def test_every_plan_passes_its_values_on_by_identity(
    case: tuple[Mesh, Tensor, Tensor, Tensor | None],
) -> None:
    """Each step reads a plan input or an earlier step's output, as that very object (the memoized searches
    hold equal tensors of other calls; the planner rewires them), and the plan's output is its last step's."""
    mesh, A, B, C = case
    from shardalg.notation.syntax import Arrow, Product

    stmt = Arrow(Product(A, B), C) if C is not None else Product(A, B)
    try:
        found = plans(stmt, mesh=mesh)
    except (NoPlan, UnreachableUnreduced):
        return
    for p in found:
        made = {id(t): t for t in p.inputs}
        for step in p.steps:
            for t in step.inputs:
                assert made.get(id(t)) is t, f"{p}\n{step} reads {t} that nothing before it made"
            made[id(step.output)] = step.output
        if p.steps:
            assert p.output is p.steps[-1].output
        assert p.producers == producers_of(p.steps, p.inputs)  # the producers a plan of chains states


@st.composite
def junk(draw: st.DrawFn) -> str:
    """Products of possibly illegal tensors: repeated axes, axes not in the mesh, repeated dims."""

    def tensor(name: str) -> str:
        dims = draw(st.lists(st.sampled_from(DIMS), min_size=1, max_size=3))
        parts = []
        for d in dims:
            axes = "".join(draw(st.lists(st.sampled_from("XYW"), max_size=2)))
            parts.append(f"{d}_{axes}" if axes else d)
        u = draw(st.lists(st.sampled_from("XYW"), max_size=2))
        return f"{name}[{', '.join(parts)}]" + ("{" + ", ".join(f"U_{a}" for a in u) + "}" if u else "")

    expr = f"{tensor('A')} · {tensor('B')}"
    if draw(st.booleans()):
        expr += " -> " + tensor("C")
    return expr


@given(junk())
def test_illegal_input_raises_only_our_errors(expr: str) -> None:
    try:
        plans(expr, mesh=Mesh.parse("X=2,Y=2"))
    except ShardalgError:
        pass
