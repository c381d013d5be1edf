"""A function's free plan (one step on its operands as they are, nothing moved) is taken without planning its
other compute layouts (:func:`shardalg.planning.functions.free_plan`): it must be the first of every plan, as
``plans`` ranks them, whenever it is taken; and a product's two gradients chosen by integer step ranks (every
size known) are those chosen by bytes as polynomials."""

from __future__ import annotations

import pytest

from shardalg.algebra.mesh import Mesh
from shardalg.notation.parse import parse
from shardalg.planning import gradients
from shardalg.planning.backward import backward
from shardalg.planning.planner import _free, first_plan, plan, plans, prepare

MESH = Mesh(X=2, Y=2)
SIZES = {"B": 8, "D": 16, "F": 32, "S": 8}

STATEMENTS = [
    "rmsnorm_D(A[B_X, D]) -> H[B_X, D]",
    "rmsnorm_D(A[B, D_X]) -> H[B, D_X]",
    "rmsnorm_D(A[B, D_X]) -> H[B_X, D]",
    "silu(A[B_X, F_Y]) -> G[B_X, F_Y]",
    "silu(A[B, F]{U_X}) -> G[B, F]",
    "silu(A[B_X, F]) -> G[B, F_X]",
    "A[B_X, D] + C[B_X, D] -> R[B_X, D]",
    "A[B_X, D] + C[B, D_X] -> R[B_X, D]",
    "A[B, D]{U_X} + C[B, D]{U_X} -> R[B, D]{U_X}",
    "A[B_X, F_Y] .* C[B_X, F_Y] -> M[B_X, F_Y]",
    "A[B_X, F] .* C[B_X, F_Y] -> M[B_X, F_Y]",
    "softmax_S(Sc[B_X, S]) -> P[B_X, S]",
    "softmax_S(Sc[B, S_X]) -> P[B, S_X]",
]


@pytest.mark.parametrize("text", STATEMENTS)
def test_the_free_plan_is_the_first_plan(text):
    statement = parse(text).statements[0]
    listed = plans(statement, MESH, SIZES)
    assert plan(statement, MESH, SIZES) == listed[0]
    assert first_plan(statement, MESH, SIZES) == listed[0]


def test_the_free_plan_is_taken_where_nothing_moves_and_only_there():
    taken = {t: _free(prepare(parse(t).statements[0], MESH, SIZES)) is not None for t in STATEMENTS}
    assert taken["rmsnorm_D(A[B_X, D]) -> H[B_X, D]"]  # D whole on each device: no statistics to reduce
    assert taken["A[B, D]{U_X} + C[B, D]{U_X} -> R[B, D]{U_X}"]  # linear: partial sums stay partial
    assert not taken["rmsnorm_D(A[B, D_X]) -> H[B, D_X]"]  # the statistics' AllReduce_X
    assert not taken["silu(A[B, F]{U_X}) -> G[B, F]"]  # a nonlinearity needs its partial sums reduced
    assert not taken["A[B_X, D] + C[B, D_X] -> R[B_X, D]"]  # the operands meet in one layout first
    assert sum(taken.values()) >= 6


@pytest.mark.parametrize(
    "program",
    [
        "A[B_X, D] * W[D, F_Y] -> H[B_X, F_Y]",
        "A[B, D_X] * W[D_X, F_Y] -> H[B, F_Y]{U_X}",
        "A[B_X, D_Y] * W[D_Y, F] -> H[B_X, F]\nH[B_X, F] * V[F, D_Y] -> O[B_X, D_Y]",
    ],
)
def test_gradients_chosen_by_step_ranks_are_those_chosen_by_bytes(program, monkeypatch):
    by_ranks = backward(program, MESH, SIZES)
    monkeypatch.setattr(gradients, "sized", lambda *_: False)  # every step priced as a polynomial
    by_bytes = backward(program, MESH, SIZES)
    assert [g.plan for g in by_ranks.grads] == [g.plan for g in by_bytes.grads]
    assert by_ranks.grads  # the program has gradients to choose
