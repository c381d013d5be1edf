"""The ring shift's cost: a shard per device, the short way round a ring, across and back on a line."""

from __future__ import annotations

import sympy

from shardalg.algebra.mesh import Axis, Mesh
from shardalg.algebra.symbols import axis_size, dim_size, quantity
from shardalg.costs.plancost import collective_cost
from shardalg.notation.parse import parse_tensor
from shardalg.notation.syntax import Op

A = parse_tensor("bf16[I_X, J]")
T_MIN, W, ALPHA, BETA = (quantity(n) for n in ("T_min", "W_ici", "alpha", "beta"))
SHARD = dim_size("I") * dim_size("J") / 4  # bf16[I/8, J]


def cost(mesh: Mesh, k: int, model: str = "ici") -> sympy.Expr:
    return collective_cost(Op.SHIFT, A, ("X",), mesh, model=model, offset=k).total()


def test_on_a_ring_a_shift_by_k_costs_k_hops_the_short_way():
    ring = Mesh(X=8)
    assert sympy.simplify(cost(ring, 1) - sympy.Max(T_MIN, SHARD / (W / 2))) == 0
    assert sympy.simplify(cost(ring, 3) - sympy.Max(3 * T_MIN, 3 * SHARD / (W / 2))) == 0
    assert cost(ring, -1) == cost(ring, 1) == cost(ring, 7)  # k' = k mod 8, the short way: 1 hop
    assert cost(ring, 5) == cost(ring, 3)
    assert cost(ring, 8) == 0  # a whole turn moves nothing


def test_on_a_line_the_wrapping_shards_go_back_across():
    line = Mesh([Axis("X", 8, wraps=False)])
    assert sympy.simplify(cost(line, 1) - sympy.Max(7 * T_MIN, SHARD / (W / 2))) == 0  # device 7 -> 0: 7 hops
    assert sympy.simplify(cost(line, 3) - sympy.Max(5 * T_MIN, 3 * SHARD / (W / 2))) == 0
    assert cost(line, 4).subs({T_MIN: 0}) == cost(Mesh(X=8), 4).subs({T_MIN: 0})  # same busiest link


def test_alpha_beta_is_one_message():
    assert sympy.simplify(cost(Mesh(X=8), 3, "alpha-beta") - (ALPHA + SHARD / BETA)) == 0


def test_symbolic_axis_keeps_the_short_way_exact():
    c = cost(Mesh(X=None), 1)
    assert c.subs({axis_size("X"): 8}) == cost(Mesh(X=8), 1)


def test_a_shift_statement_is_priced_by_cost():
    from shardalg.costs.plancost import cost as plan_cost

    c = plan_cost("Shift_{X,-1}(bf16[I_X, J]) -> bf16[I_X, J]", Mesh(X=8))
    assert sympy.simplify(c.total - sympy.Max(T_MIN, SHARD / (W / 2))) == 0
