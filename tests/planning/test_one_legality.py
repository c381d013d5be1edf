"""``check`` and ``plan`` agree (issue 13): what check calls legal, the planner plans, and what the planner
refuses, check reports. The one difference is by design: check's product rules (case 4, an unreduced product,
batch dims sharded apart) judge the product as written, shard by shard, while the planner reshards the
operands first; so where only those rules fire, the plan it finds does reshard an operand before the product.
Random einsums (partial sums too) and collectives, on meshes of up to three axes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shardalg.algebra.legality import check
from shardalg.algebra.mesh import Mesh
from shardalg.errors import ShardalgError
from shardalg.notation.syntax import Arrow, Collective, Op, Product, Tensor
from shardalg.planning.planner import plans

from ..shared.layouts import sharded
from .test_planner import einsums

LOCAL_RULES = {"case-4", "unreduced-product", "batch-dim-mismatch"}
OPS = [Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALL_REDUCE, Op.ALL_TO_ALL, Op.SLICE, Op.PERMUTE]


def _agree(stmt: object, mesh: Mesh, sizes: dict[str, int] | None = None) -> None:
    found_rules = [v.rule for v in check(stmt, mesh, sizes)]  # type: ignore[arg-type]
    try:
        found = plans(stmt, mesh=mesh, sizes=sizes)
    except ShardalgError as err:
        assert found_rules, f"{stmt} on {mesh}: check says legal, plan says {type(err).__name__}: {err.message}"
        return
    assert found and found.complete
    if found_rules:
        assert set(found_rules) <= LOCAL_RULES, f"{stmt} on {mesh}: planned, yet check says {found_rules}"
        first = found[0].steps
        einsum = next(i for i, s in enumerate(first) if s.op is Op.EINSUM)
        assert einsum > 0, f"{stmt}: check's {found_rules} fire, yet the plan multiplies the operands as written"


@given(einsums())
def test_check_legal_iff_an_einsum_is_planned(case: tuple[Mesh, Tensor, Tensor, Tensor | None]) -> None:
    mesh, a, b, c = case
    _agree(Arrow(Product(a, b), c) if c is not None else Product(a, b), mesh)



@st.composite
def collectives(draw: st.DrawFn) -> tuple[Mesh, Collective, dict[str, int]]:
    mesh, t = draw(sharded())
    axes = tuple(draw(st.lists(st.sampled_from(list(mesh.names)), min_size=1, max_size=2, unique=True)))
    dim = draw(st.sampled_from([None, *t.dim_names]))
    sizes = {d: draw(st.integers(1, 8)) for d in t.dim_names if not d.isdigit()}
    return mesh, Collective(draw(st.sampled_from(OPS)), axes, t, dim), sizes


@given(collectives())
def test_check_legal_iff_a_collective_is_planned(case: tuple[Mesh, Collective, dict[str, int]]) -> None:
    mesh, c, sizes = case
    _agree(c, mesh, sizes)


def test_the_examiners_reproducers() -> None:
    assert [v.rule for v in check("A[I] · B[K] -> C[I, K]{U_X}", "X=2")] == ["unreduced-result"]
    assert [v.rule for v in check("A[I, J] · B[J, K] -> C[I, K]{U_X}", "X=4")] == []
    assert [v.rule for v in check("AllToAll_{Y,I}(A[J_Y, K, I])", "X=2,Y=2", "I=1,J=2,K=1")] == ["indivisible-dim"]
    assert [v.rule for v in check("A[L]{U_X} · B[K]{U_Y} -> C[L, K]{U_XZ}", "X=3,Y=2,Z=3")] == ["unreduced-result"]
    assert [v.rule for v in check("A[L]{U_X} · B[K]{U_Y} -> C[L, K]{U_XZ}", "X=3,Y=2,Z=2")] == []
