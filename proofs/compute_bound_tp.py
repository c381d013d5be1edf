"""Lemma: tensor parallelism is compute-bound when |Y| < F M_Y / (C/W_ici) (seed 002, section 4.2).

Engine side: the MLP block In[B, D_Y] · W_in[D, F_Y] · W_out[F_Y, D] written in the notation as the book's
TP plan (AllGather the activations, two local matmuls, ReduceScatter the partial output), priced by the
cost model; ``compute_bound`` solves for |Y|. Independent side: checked on numbers against the two costs,
and compared with the book.
"""

from __future__ import annotations

import sympy

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.symbols import axis_size, dim_size, links, quantity
from shardalg.costs.derive import compute_bound
from shardalg.numeric.proofs import Lemma, Proof

from .common import bound_steps, program_latex, strategy_cost

NAME = "compute_bound_tp"

TP = """AllGather_Y(In[B, D_Y]) -> In[B, D]
In[B, D] · Win[D, F_Y] -> Tmp[B, F_Y]
Tmp[B, F_Y] ·_LOCAL Wout[F_Y, D] -> Out[B, D]{U_Y}
ReduceScatter_{Y,D}(Out[B, D]{U_Y}) -> Out[B, D_Y]"""


def prove(model=None) -> Lemma:
    F, Y = dim_size("F"), axis_size("Y")
    C, W, M = quantity("C"), quantity("W_ici"), links("Y")
    expected = sympy.StrictLessThan(Y, F * M / (C / W))
    proof = Proof(
        NAME,
        "tensor parallelism is compute-bound while |Y| < F M_Y / (C/W_ici)",
        r"|Y| < \frac{F\, M_Y}{C / W_{\text{ici}}}",
        "The activations move (AllGather in, ReduceScatter out: 4BD bytes over W_ici M_Y) while each device"
        " does 4BDF/|Y| FLOPs, so the condition is on F/|Y| and does not involve the batch.",
    )
    proof.record(program_latex(TP), "the TP plan of the MLP block, in the notation")
    pc = strategy_cost(TP, Mesh(Y=None), model)
    comms = proof.given(r"T_{\text{comms}}", pc.comms, "the cost model")
    work = proof.given(r"T_{\text{compute}}", pc.compute, "the cost model")
    d = compute_bound(pc, solve_for=Y)
    bound_steps(proof, d, work, comms, expected, "its training chapter")
    return proof.lemma()
