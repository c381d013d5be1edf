"""The planner does not read the tensors' names: the plans of an einsum renamed are its plans renamed, in the
same order. Plans that tie on bytes (or seconds) are ordered by their steps, each tensor in them named by its
place among the plan's inputs and output (:func:`shardalg.planning.order.plan_text_key`); the per-statement
graph search relies on it when it prices K's projection as Q's renamed (:mod:`shardalg.search.graph`)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from shardalg.algebra.mesh import Mesh
from shardalg.api import plans
from shardalg.errors import NoPlan, UnreachableUnreduced
from shardalg.notation.plan import Plan
from shardalg.notation.syntax import Arrow, Product, Tensor

from .test_never_beaten import BIG, SIZES, einsums

NAMES = ("A", "B", "C", "W_q", "dX", "Zz", "h1", "In")


def _shape(plan: Plan, name: dict[str, str]) -> list[Any]:
    """The plan's steps with each tensor's name mapped by ``name``."""

    def t(x: Tensor) -> tuple[Any, ...]:
        return (name.get(x.name or "", x.name), tuple((d.label, d.axes) for d in x.dims), x.unreduced)

    return [(s.op, s.axes, s.dim, tuple(t(i) for i in s.inputs), t(s.output)) for s in plan.steps]


def _plans(a: Tensor, b: Tensor, c: Tensor, mesh: Mesh, sizes: dict[str, int], hw: str | None) -> Any:
    try:
        return plans(Arrow(Product(a, b), c), mesh, sizes, hw=hw)
    except (NoPlan, UnreachableUnreduced) as e:
        return type(e).__name__


@given(einsums(max_axes=3), st.permutations(NAMES), st.sampled_from([None, "tpu-v5e"]), st.booleans())
def test_the_plans_of_a_statement_renamed_are_its_plans_renamed(case, names, hw, big) -> None:
    mesh, a, b, c = case
    sizes = BIG if big else SIZES
    new = dict(zip("ABC", names[:3], strict=True))
    back = {v: k for k, v in new.items()}
    mine = _plans(a, b, c, mesh, sizes, hw)
    renamed = _plans(*(t.replace(name=new[t.name]) for t in (a, b, c)), mesh, sizes, hw)
    if isinstance(mine, str):
        assert renamed == mine
        return
    assert [_shape(p, back) for p in renamed] == [_shape(p, {}) for p in mine]


def test_products_that_differ_only_by_names_are_one_query_of_the_planner() -> None:
    """``plan`` plans a product under stand-in names and renames its plan back, so Q's and K's projections of
    one input, sharded alike (as a layer's candidate shards them), are planned once: the second is a hit of the
    planner's memo, and its plan names K's tensors, reasons included."""
    from shardalg import clear_caches
    from shardalg.api import plan
    from shardalg.notation.parse import parse
    from shardalg.planning import planner

    mesh, sizes = Mesh(X=2, Y=2), {"B": 64, "D": 256, "H": 8, "E": 32}
    q = parse("Ha[B_X, D] * W_q[D_X, H_Y, E] -> Q[B_X, H_Y, E]").statements[0]
    k = parse("Ha[B_X, D] * W_k[D_X, H_Y, E] -> Kp[B_X, H_Y, E]").statements[0]
    clear_caches()
    mine = plan(q, mesh, sizes)
    before = planner._einsum_plans.cache_info()
    theirs = plan(k, mesh, sizes)
    after = planner._einsum_plans.cache_info()
    assert (after.misses, after.hits) == (before.misses, before.hits + 1)
    assert len(mine.steps) > 1  # collectives around the product: its reasons name the operands
    assert _shape(theirs, {}) == _shape(mine, {"W_q": "W_k", "Q": "Kp"})
    text = " ".join(s.reason for s in theirs.steps)
    assert "W_k" in text and "W_q" not in text and "⟨" not in text
