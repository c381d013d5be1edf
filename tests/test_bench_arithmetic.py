"""The arithmetic bench (``python -m bench arithmetic``): its sympy and symengine routes price a plan as
``plan_cost`` does, so its timings compare like with like; and the one fact they miss is pinned."""

from __future__ import annotations

import pytest

import shardalg as sa
from bench.arithmetic import Evaluators, sympy_arithmetic, total_of
from bench.plans import BOOK_CASES, BOOK_MESH, HW, SIZES


def _costs(overlap: str) -> list:
    return [
        sa.plan_cost(p, BOOK_MESH, SIZES, hw=HW, overlap=overlap)
        for _, expr in BOOK_CASES
        for p in sa.plans(expr, BOOK_MESH, SIZES)
    ]


@pytest.mark.parametrize("overlap", ["schedule", "serial"])
def test_the_sympy_route_prints_and_evaluates_todays_totals(overlap: str) -> None:
    ar = sympy_arithmetic()
    for pc in _costs(overlap):
        total = total_of(pc, ar)
        assert str(total) == str(pc.total)
        ev = Evaluators(dict(pc.values))
        assert ev.sympy_lambdify(total) == pytest.approx(pc.seconds, rel=1e-12)
        assert ev.sympy_xreplace(total) == pytest.approx(pc.seconds, rel=1e-12)


def test_sympys_max_keeps_a_lane_the_light_maximum_drops() -> None:
    """Under ``steady`` a step on two axes is alone on one lane and in a sum on the other: the light
    ``maximum`` drops ``Max(a, b)`` below ``Max(a, b) + c``; sympy's ``Max`` keeps its arguments (the 10 of 430
    golden totals that print differently through sympy or symengine)."""
    ar = sympy_arithmetic()
    pc = sa.plan_cost(
        sa.plans(BOOK_CASES[2][1], BOOK_MESH, SIZES)[2], BOOK_MESH, SIZES, hw=HW, overlap="steady"
    )
    total = total_of(pc, ar)
    assert (
        str(pc.total) == "Max(34359738368/C, Max(2*T_min, 8388608/W_ici) + Max(3*T_min, 117440512/(3*W_ici)))"
    )
    assert str(total) == (
        "Max(34359738368/C, 3*T_min, 117440512/(3*W_ici), Max(2*T_min, 8388608/W_ici) + Max(3*T_min, 117440512/(3*W_ici)))"
    )
    assert Evaluators(dict(pc.values)).sympy_lambdify(total) == pytest.approx(pc.seconds, rel=1e-12)


def test_the_symengine_route_gives_todays_seconds_and_text_through_sympy() -> None:
    pytest.importorskip("symengine")
    from bench.arithmetic import symengine_arithmetic, to_sympy

    ar = symengine_arithmetic()
    for pc in _costs("schedule"):
        total = total_of(pc, ar)
        ev = Evaluators(dict(pc.values))
        assert ev.symengine_subs(total) == pytest.approx(pc.seconds, rel=1e-12)
        assert ev.symengine_lambdify(total) == pytest.approx(pc.seconds, rel=1e-12)
        assert str(to_sympy(total)) == str(pc.total)


def test_a_steps_light_seconds_equal_the_float_paths() -> None:
    """The ranked table swaps the float path for the light terms: both give each step the same seconds."""
    from bench.arithmetic import _opts, light_seconds_of
    from shardalg.costs.steps import seconds_of

    opts = _opts(BOOK_MESH)
    steps = [s for _, expr in BOOK_CASES for p in sa.plans(expr, BOOK_MESH, SIZES) for s in p.steps]
    assert len(steps) > 10
    for s in steps:
        assert light_seconds_of(s, opts) == pytest.approx(seconds_of(s, opts), rel=1e-12)
