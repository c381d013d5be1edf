"""The planner's pieces kept by value (a step sequence with its reasons, a gather's spare-axes variant) give
each query its own reasons, its own objects and its own source spans, whatever ran before."""

from __future__ import annotations

from typing import Any

import shardalg as sa

MESH = "X=4,Y=2"
FIRST = "A[I, J_X] · B[J_X, K] -> C[I, K]"
THEN = "A[I, J_X] · B[J_X, K] -> C[I, K_X]"


def _reasons(expr: str) -> list[list[str]]:
    return [[f"{s.op.value}_{''.join(s.axes)}: {s.reason}" for s in p.steps] for p in sa.plans(expr, MESH)]


def test_equal_steps_with_other_reasons_keep_their_own() -> None:
    """A gather that is == to another (a step's == leaves its reason out) but gives another reason gets its
    spare-axes variant and its finish with its own reason."""
    sa.clear_caches()
    alone = _reasons(THEN)
    sa.clear_caches()
    _reasons(FIRST)
    assert _reasons(THEN) == alone
    assert any("case 3 alternative" in r for plan in alone for r in plan if r.startswith("AllGather_XY"))


def test_a_plan_passes_its_own_values_on_by_identity() -> None:
    sa.clear_caches()
    for expr in (FIRST, THEN, THEN):
        for p in sa.plans(expr, MESH):
            made = {id(t) for t in p.inputs}
            for s in p.steps:
                assert all(id(t) in made for t in s.inputs), (expr, p)
                made.add(id(s.output))
            assert id(p.output) in made


def _spans(program: Any) -> list[tuple[int, int] | None]:
    """Every source span in a program's JSON form, in order."""
    found: list[tuple[int, int] | None] = []

    def walk(x: object) -> None:
        if isinstance(x, dict):
            if "span" in x:
                found.append(tuple(x["span"]) if x["span"] is not None else None)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(program.to_json())
    return found


def test_a_tensor_written_elsewhere_keeps_its_own_source_spans() -> None:
    """The same tensors written at other places of another text: the backward program points into its own
    text (a piece kept by equal tensors used to hand back the first text's tensors, with their positions)."""
    expr, sizes = "In[B_X, D] · W[D_X, F] -> Out[B_X, F]", {"B": 256, "D": 1024, "F": 4096}
    sa.clear_caches()
    alone = _spans(sa.backward(expr, MESH, sizes=sizes))
    sa.clear_caches()
    sa.backward("In[B_X, D] · W[D, F] -> Out[B_X, F]", MESH, sizes=sizes)  # Out's dims two characters earlier
    assert _spans(sa.backward(expr, MESH, sizes=sizes)) == alone
    assert any(span is not None for span in alone)


def test_a_plan_does_not_depend_on_what_an_earlier_query_closed() -> None:
    """A backward program closes more of a shape's layout space (dW[D, F] has C[I, K]'s sizes here); the
    finishing searches of a later einsum on that space read its predecessors in one order all the same, so
    equal-cost ties (Slice_{Y,K} or Slice_{Y,I} first) go the same way as in a fresh process."""
    sizes = {"I": 1024, "J": 2048, "K": 4096, "B": 256, "D": 1024, "F": 4096}

    def texts() -> list[str]:
        return [
            str(p)
            for p in sa.plans(
                "A[I, J_X] · B[J_X, K] -> C[I, K]", MESH, sizes=sizes, hw="h100", overlap="steady"
            )
        ]

    sa.clear_caches()
    alone = texts()
    sa.clear_caches()
    sa.backward("In[B_X, D] · W[D_X, F] -> Out[B_X, F]", MESH, sizes=sizes)
    assert texts() == alone
    assert any("Slice_{Y,K}" in t for t in alone)


def _tensor_spans(found: Any) -> list[tuple[object, ...]]:
    """Every tensor of every plan (inputs, each step's inputs and output, the output) with its own span and
    its dims' spans, in order."""
    out = []
    for p in found:
        for t in (*p.inputs, *(x for s in p.steps for x in (*s.inputs, s.output)), p.output):
            out.append((t.name, t.span, *(d.span for d in t.dims)))
    return out


SPACED = "X[B_X,   D_Y]  ·  W[D_Y,  F]   ->   Z[B,  F_X]"


def test_an_equal_statement_written_with_other_spaces_gets_its_own_spans() -> None:
    """The same statement written with extra spaces, after the first: its plans' tensors point into its own
    text, as in a fresh process (the planner's memos are keyed by value, and spans take no part in ==)."""
    sa.clear_caches()
    alone = _tensor_spans(sa.plans(SPACED, "X=2,Y=2"))
    sa.clear_caches()
    sa.plans("X[B_X, D_Y] · W[D_Y, F] -> Z[B, F_X]", "X=2,Y=2")
    assert _tensor_spans(sa.plans(SPACED, "X=2,Y=2")) == alone
    assert any(span is not None for row in alone for span in row[1:])


def test_a_statement_built_without_text_gets_no_spans_of_an_earlier_text() -> None:
    from shardalg.notation.parse import parse
    from shardalg.notation.syntax import Node

    def bare(x: Any) -> Any:  # the same value, made without spans (as code builds one)
        if isinstance(x, Node):
            return type(x)(*(bare(a) for a in x.args))
        return tuple(bare(a) for a in x) if isinstance(x, tuple) else x

    text = "X[B_X, D_Y] · W[D_Y, F] -> Z[B, F_X]"
    stmt = bare(parse(text).statements[0])
    assert stmt.result.span is None and stmt.result.dims[0].span is None
    sa.clear_caches()
    alone = _tensor_spans(sa.plans(stmt, "X=2,Y=2"))
    sa.clear_caches()
    sa.plans(text, "X=2,Y=2")
    assert _tensor_spans(sa.plans(stmt, "X=2,Y=2")) == alone


def test_redistribute_called_directly_points_into_its_own_tensors() -> None:
    """redistribute, as check_program, search and the functions' planner call it (not through plans): after
    the same resharding written elsewhere, its plans (the gather's spare-axes variant, kept by value,
    included) point into the tensors it was given, as in a fresh process."""
    from shardalg.algebra.mesh import Mesh
    from shardalg.notation.parse import parse_tensor
    from shardalg.planning.redistribute import redistribute

    mesh, sizes = Mesh(X=2, Y=4), {"I": 16, "J": 16}
    src, dst = parse_tensor("A[   I_X,    J_Y]"), parse_tensor("A[ I,  J]")
    sa.clear_caches()
    alone = _tensor_spans(redistribute(src, dst, mesh, sizes))
    sa.clear_caches()
    redistribute(parse_tensor("A[I_X, J_Y]"), parse_tensor("A[I, J]"), mesh, sizes)
    assert _tensor_spans(redistribute(src, dst, mesh, sizes)) == alone
    assert any(span is not None for row in alone for span in row[1:])
