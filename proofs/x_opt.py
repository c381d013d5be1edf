"""Lemma: FSDP+TP communicates least with |X| = sqrt(B M_X N / (F M_Y)) (seed 002, section 4.3).

Engine side: the MLP block In[B_X, D_Y] · W_in[D_X, F_Y] · W_out[F_Y, D_X] written in the notation (FSDP
gathers the weights over X, TP gathers and reduce-scatters the activations over Y), priced by the cost
model; ``optimum`` minimizes its communication over |X| subject to |X||Y| = N. Independent side: the
minimizer is checked to be a minimum on numbers (the cost is larger on both sides of it, and at every
divisor split of N tried), and compared with the book.
"""

from __future__ import annotations

from random import Random

import sympy

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.symbols import axis_size, device_count, dim_size, links
from shardalg.costs.derive import optimum
from shardalg.numeric.proofs import Lemma, Proof, sym_latex

from .common import program_latex, strategy_cost

NAME = "x_opt"

FSDP_TP = """AllGather_X(Win[D_X, F_Y]) -> Win[D, F_Y]
AllGather_X(Wout[F_Y, D_X]) -> Wout[F_Y, D]
AllGather_Y(In[B_X, D_Y]) -> In[B_X, D]
In[B_X, D] · Win[D, F_Y] -> Tmp[B_X, F_Y]
Tmp[B_X, F_Y] ·_LOCAL Wout[F_Y, D] -> Out[B_X, D]{U_Y}
ReduceScatter_{Y,D}(Out[B_X, D]{U_Y}) -> Out[B_X, D_Y]"""


def fsdp_tp_cost(model=None):  # -> PlanCost
    return strategy_cost(FSDP_TP, Mesh(X=None, Y=None), model)


def prove(model=None) -> Lemma:
    B, F, X, Y, N = dim_size("B"), dim_size("F"), axis_size("X"), axis_size("Y"), device_count()
    MX, MY = links("X"), links("Y")
    expected = sympy.sqrt(B * MX * N / (F * MY))
    proof = Proof(
        NAME,
        "the optimal FSDP axis size of FSDP+TP",
        r"|X|_{\text{opt}} = \sqrt{\frac{B\, M_X}{F\, M_Y}\, N}",
        "FSDP moves weights (bytes independent of the batch), TP moves activations (independent of F); with"
        " |X||Y| = N one falls and the other rises with |X|, and the best split balances them.",
    )
    proof.record(program_latex(FSDP_TP), "the FSDP+TP plan of the MLP block, in the notation")
    pc = fsdp_tp_cost(model)
    comms = proof.given(r"T_{\text{comms}}", pc.comms, "the cost model (X and Y links run concurrently)")
    d = optimum(pc, over=X, subject_to=sympy.Eq(X * Y, N))
    x_opt = d.result
    proof.record(
        rf"|X|_{{\text{{opt}}}} = {sym_latex(x_opt)}",
        "derived (where the two terms of the cost cross)",
    )
    proof.equal(x_opt, expected, "the book's optimum (its training chapter)", name=r"|X|_{\text{opt}}")
    along = sympy.simplify(comms.subs(Y, N / X))
    f = sympy.lambdify(sorted(along.free_symbols, key=str), along, "math")
    g = sympy.lambdify(sorted(x_opt.free_symbols, key=str), x_opt, "math")
    names = [str(s) for s in sorted(along.free_symbols, key=str)]
    rng = Random(7)
    is_min = True
    for _ in range(200):
        point = {s: 10 ** rng.uniform(-2, 4) for s in names}
        best = g(**{str(s): point[str(s)] for s in sorted(x_opt.free_symbols, key=str)})
        at = {**point, "X": best}
        here = f(**at)
        for factor in (0.5, 0.9, 0.99, 1.01, 1.1, 2.0):
            if f(**{**at, "X": best * factor}) < here * (1 - 1e-12):
                is_min = False
    proof.fact(
        r"T_{\text{comms}}(|X|_{\text{opt}}) \le T_{\text{comms}}(c\,|X|_{\text{opt}}),\ "
        r"c \in \{\tfrac12, 0.9, 0.99, 1.01, 1.1, 2\}",
        is_min,
        "at 200 random positive points",
    )
    return proof.lemma()
