"""What a warm query reads instead of working it out again: the einsum planner's heads (each plan's bytes and
steps, made once and read by the sort), and an answer whose tensors already point where the caller wrote them,
handed back as it is by the respan."""

from __future__ import annotations

import pytest

import shardalg as sa
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.traffic import Sizes
from shardalg.notation.parse import parse
from shardalg.planning.einsum_plans import EinsumPlanner
from shardalg.planning.order import BytesKey, plan_text_key, sort_plans
from shardalg.planning.respan import respanned, written_tensors

SIZES = {"I": 1024, "J": 8192, "K": 4096}
BOOK = (
    "A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]",
    "A[I_X, J_Y] · B[J, K] -> C[I_X, K]",
    "A[I_X, J_Y] · B[J_Y, K] -> C[I_X, K]",
    "A[I_X, J] · B[J, K_X] -> C[I_X, K]",
    "A[I, J_X] · B[J_X, K]",  # no requested result: the natural outputs
)


@pytest.mark.parametrize("expr", BOOK)
def test_the_planners_heads_are_each_plans_bytes_and_steps(expr: str) -> None:
    stmt, mesh, sizes = parse(expr).statements[0], Mesh.parse("X=2,Y=4"), Sizes(SIZES)
    body, result = (stmt.expr, stmt.result) if hasattr(stmt, "result") else (stmt, None)
    planner = EinsumPlanner(body, result, mesh, sizes)
    found = planner.plans()
    key = BytesKey(mesh, sizes)
    assert planner.heads == [key.head(p) for p in found] and len(found) > 0
    given, worked = list(found), list(found)
    sort_plans(given, key, list(planner.heads))
    sort_plans(worked, key)
    assert given == worked  # the same order, heads read or worked out
    assert given == sorted(found, key=lambda p: (*key.head(p), plan_text_key(p)))


def test_plans_whose_tensors_point_where_written_come_back_as_they_are() -> None:
    stmt = parse(BOOK[3]).statements[0]
    found = sa.plans(stmt, Mesh.parse("X=2,Y=4"), SIZES)
    again = respanned(found, written_tensors(stmt))
    assert len(again) == len(found) and all(a is b for a, b in zip(again, found, strict=True))


def test_plans_made_for_other_text_point_into_this_one() -> None:
    """The pieces of an equal statement written with other spaces carry its positions; this text's plans carry
    this text's (the planner's own answer, respanned: every located tensor and dim re-made)."""
    mesh = Mesh.parse("X=2,Y=4")
    sa.clear_caches()
    sa.plans(parse("A[I_X,J]·B[J,K_X]->C[I_X,K]").statements[0], mesh, SIZES)
    stmt = parse(BOOK[3]).statements[0]
    found = sa.plans(stmt, mesh, SIZES)
    spans = {t.name: t.span for t in written_tensors(stmt)}
    located = [t for p in found for s in p.steps for t in (*s.inputs, s.output) if t.span is not None]
    assert located and all(t.span is spans[t.name] for t in located)


def test_a_statement_written_nowhere_gets_plans_that_point_nowhere() -> None:
    """A search's statements have no spans (``without_spans``): answered from the pieces of an equal statement
    written in a text, their plans point nowhere (the respan re-makes every located tensor); those plans handed
    to the respan again come back as they are (each plan knows it points nowhere)."""
    from shardalg.notation.syntax import without_spans

    mesh = Mesh.parse("X=2,Y=4")
    sa.clear_caches()
    written = parse(BOOK[3]).statements[0]
    first = sa.plans(written, mesh, SIZES)
    assert any(p.located for p in first)  # the memos now hold pieces that point into that text
    bare = without_spans(written)
    found = sa.plans(bare, mesh, SIZES)
    tensors = [t for p in found for s in p.steps for t in (*s.inputs, s.output)]
    assert tensors and all(t.span is None and all(d.span is None for d in t.dims) for t in tensors)
    assert not any(p.located for p in found)
    again = respanned(found, written_tensors(bare))
    assert len(again) == len(found) and all(a is b for a, b in zip(again, found, strict=True))
