"""The planner's pieces kept by value (a step sequence with its reasons, a gather's spare-axes variant) give
each query its own reasons and pass its own objects on, whatever ran before."""

from __future__ import annotations

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
