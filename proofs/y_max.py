"""Lemma: in inference, model parallelism pays off up to |Y|_max = F / (B beta), beta = W_hbm / W_ici (seed 002).

Engine side: the decode step's TP plan of the MLP block in the notation (AllGather the activations, two
local matmuls, ReduceScatter the output), priced by the cost model with HBM traffic counted for the weights
(the decode step is bound by loading them); ``compute_bound(..., bound="memory")`` solves for |Y|.
Independent side: checked on numbers against the two costs, and compared with the book.
"""

from __future__ import annotations

import sympy

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.symbols import axis_size, dim_size, links, quantity
from shardalg.costs.derive import compute_bound
from shardalg.numeric.proofs import Lemma, Proof, sym_latex

from .common import bound_steps, program_latex, strategy_cost

NAME = "y_max"

DECODE_TP = """AllGather_Y(In[B, D_Y]) -> In[B, D]
In[B, D] · Win[D, F_Y] -> Tmp[B, F_Y]
Tmp[B, F_Y] ·_LOCAL Wout[F_Y, D] -> Out[B, D]{U_Y}
ReduceScatter_{Y,D}(Out[B, D]{U_Y}) -> Out[B, D_Y]"""


def prove(model=None) -> Lemma:
    B, F, Y = dim_size("B"), dim_size("F"), axis_size("Y")
    W, W_hbm, M = quantity("W_ici"), quantity("W_hbm"), links("Y")
    beta = sympy.Symbol("beta", positive=True)
    proof = Proof(
        NAME,
        "the largest useful model-parallel axis in inference",
        r"|Y|_{\max} = \frac{F\, M_Y}{B\,\beta} \overset{M_Y = 1}{=} \frac{F}{B\,\beta},"
        r" \qquad \beta = \frac{W_{\text{hbm}}}{W_{\text{ici}}}",
        "Each device loads its 4DF/|Y| bytes of weights from HBM while the activations (4BD bytes) cross"
        " ICI; past |Y|_max the ICI time exceeds the HBM time and more devices stop helping.",
    )
    proof.record(program_latex(DECODE_TP), "the decode step's TP plan, in the notation")
    pc = strategy_cost(DECODE_TP, Mesh(Y=None), model, hbm=("Win", "Wout"))
    comms = proof.given(r"T_{\text{comms}}", pc.comms, "the cost model")
    memory = proof.given(r"T_{\text{hbm}}", pc.memory, "the cost model: the weights' local bytes at W_hbm")
    d = compute_bound(pc, solve_for=Y, bound="memory")
    expected = sympy.StrictLessThan(Y, (F * M / (B * beta)).subs(beta, W_hbm / W))
    bound_steps(proof, d, memory, comms, expected, "its inference chapter")
    result = d.result
    if isinstance(result, sympy.StrictLessThan) and result.lhs == Y:
        y_max = result.rhs
        proof.equal(
            y_max.subs({W_hbm: beta * W, M: 1}),
            F / (B * beta),
            "with one link per axis and the ratio of bandwidths defined above: the book's Y_max",
            name=r"|Y|_{\max}",
        )
    else:
        proof.fact(r"\text{the result is } |Y| < |Y|_{\max}", False, f"unexpected form: {sym_latex(result)}")
    return proof.lemma()
