"""A cost's Max is built without sympy's evaluation (shardalg.costs.sympymax): the same expression that sympy's
evaluation gives, since the light Max already drops structurally dominated arguments."""

from __future__ import annotations

import pytest
import sympy

import shardalg as sa
from shardalg.costs.plancost import plan_cost
from shardalg.costs.sympymax import unevaluated_max

CASES = [
    ("A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]", "X=2,Y=4"),
    ("A[I_X, J_Y] · B[J, K] -> C[I_X, K]", "X=2,Y=4"),
    ("A[I_X, J_Y] · B[J_Y, K] -> C[I_X, K]", "X=2,Y=4"),
    ("A[I_X, J] · B[J, K_X] -> C[I_X, K]", "X=2,Y=4"),
    ("A[I, J_XYZ] · B[J_XYZ, K] -> C[I, K_XYZ]", "X=2,Y=2,Z=2"),
]


def _evaluated(e: sympy.Expr) -> sympy.Expr:
    """``e`` with every Max rebuilt by sympy's own evaluation, innermost first."""
    return e.replace(lambda x: isinstance(x, sympy.Max), lambda x: sympy.Max(*x.args))


@pytest.mark.parametrize("overlap", ["schedule", "steady", "serial"])
@pytest.mark.parametrize(("expr", "mesh"), CASES)
def test_every_plan_cost_is_what_sympys_evaluation_gives(expr, mesh, overlap):
    for p in sa.plans(expr, mesh):
        for sizes, hw in ((None, None), ({"I": 1024, "J": 8192, "K": 4096}, "tpu-v5p")):
            total = plan_cost(p, mesh, sizes, hw=hw, overlap=overlap).total
            assert total == _evaluated(total), (str(p), total)


def test_flattened_distinct_and_numbers_evaluated():
    x, y = sympy.symbols("x y", positive=True)
    assert unevaluated_max([x]) == x
    assert unevaluated_max([sympy.Max(x, y), x]) == sympy.Max(x, y)
    assert unevaluated_max([sympy.Integer(2), sympy.Integer(3)]) == 3
