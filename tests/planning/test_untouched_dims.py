"""Untouched dims (no axis shards them in the source nor in the target) are interchangeable in a
resharding's search, so the search keeps one per mesh axis of each size and drops the rest
(``redistribute._project``; issue 31: a product with 24 untouched dims planned as fast as one with 4).
The answers are those of the search over every dim; the work does not grow with the dims."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import shardalg
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.traffic import Sizes
from shardalg.notation.parse import parse_tensor
from shardalg.notation.syntax import Dim, Tensor
from shardalg.numeric.execute import run_plan
from shardalg.planning import redistribute, space
from shardalg.planning.order import plan_bytes
from shardalg.planning.redistribute import best_sequences
from tests.shared.layouts import sharded


def _widen(t: Tensor, extra: int) -> Tensor:
    return t.replace(dims=tuple(Dim(f"E{i}") for i in range(extra)) + t.dims)


def _answer(
    src: Tensor, dst: Tensor, mesh: Mesh
) -> list[tuple[tuple[str, tuple[str, ...], str | None], ...]]:
    found = best_sequences(src, dst, mesh, Sizes())
    return [tuple((s.op.value, s.axes, s.dim) for s in steps) for steps in found.found]


def _whole(src: Tensor, dst: Tensor, mesh: Mesh, sizes: Sizes) -> tuple[Tensor, Tensor, tuple[int, ...]]:
    return src, dst, tuple(range(len(src.dims)))


@settings(max_examples=25, deadline=None)
@given(sharded(max_rank=2), sharded(max_rank=2), st.integers(2, 4))
def test_same_sequences_as_the_search_over_every_dim(a, b, extra) -> None:  # type: ignore[no-untyped-def]
    mesh, src = a
    _, dst = b
    dst = dst.replace(dims=tuple(d.with_axes(()) for d in dst.dims[: len(src.dims)]))
    if len(dst.dims) < len(src.dims) or any(x not in mesh.names for x in dst.used_axes):
        return
    src, dst = _widen(src, extra), _widen(dst, extra)
    shardalg.clear_caches()
    projected = _answer(src, dst, mesh)
    saved = redistribute._project
    redistribute._project = _whole  # type: ignore[assignment]
    try:
        shardalg.clear_caches()
        whole = _answer(src, dst, mesh)
    finally:
        redistribute._project = saved  # type: ignore[assignment]
        shardalg.clear_caches()
    assert projected == whole


def test_a_tie_is_broken_onto_the_same_dim_with_or_without_the_untouched_ones() -> None:
    # RS_Y onto I (then AllGather_XY from I) and RS_Y onto J (then from I and J) tie; the rule names the later
    # dim, J, which the projection keeps: on 5e311ce the projected search said I, the whole one J
    mesh = Mesh.parse("X=2,Y=2")
    src, dst = _widen(parse_tensor("A[I_X, J]{U_Y}"), 2), _widen(parse_tensor("A[I, J]"), 2)
    shardalg.clear_caches()
    projected = _answer(src, dst, mesh)
    assert projected == [(("ReduceScatter", ("Y",), "J"), ("AllGather", ("X", "Y"), None))]
    saved = redistribute._project
    redistribute._project = _whole  # type: ignore[assignment]
    try:
        shardalg.clear_caches()
        assert _answer(src, dst, mesh) == projected
    finally:
        redistribute._project = saved  # type: ignore[assignment]
        shardalg.clear_caches()


def _states(n: int) -> int:
    """The layout states whose moves the planning of a product with ``n`` untouched dims computed."""
    shardalg.clear_caches()
    expr = "A[" + "".join(f"D{i}, " for i in range(n)) + "I_X, J] · B[J, K_X]"
    shardalg.plans(expr, mesh="X=4,Y=2,Z=2")
    return sum(len(s._next) for s in space._SPACES.values())


def test_the_search_does_not_grow_with_untouched_dims() -> None:
    # the 4-dim product already keeps 3 of its 4 (one per axis); 24 dims search the same states
    assert _states(24) == _states(4)


def test_a_wide_resharding_is_right_on_numbers() -> None:
    expr = (
        "A["
        + "".join(f"D{i}, " for i in range(6))
        + "I_X, J] -> A["
        + "".join(f"D{i}, " for i in range(6))
        + "I, J_X]"
    )
    found = shardalg.plans(expr, mesh="X=2,Y=2", sizes={f"D{i}": 1 for i in range(6)} | {"I": 4, "J": 4})
    assert found
    mesh = Mesh.parse("X=2,Y=2")
    for p in found:
        assert run_plan(p, mesh, sizes={"I": 4, "J": 4} | {f"D{i}": 1 for i in range(6)}).ok
        assert plan_bytes(p, mesh, Sizes()) == plan_bytes(found[0], mesh, Sizes())
