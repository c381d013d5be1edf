"""Lemma: data parallelism and FSDP are compute-bound when B/|X| > C/(W_ici M_X) (seed 002, section 4.2).

Engine side: one layer's backward pass written in the notation, for each strategy (the forward pass of DP
communicates nothing; the book accounts the backward pass, where the weight gradient must be reduced):
DP reduces the replicated weight's gradient with an AllReduce; FSDP re-gathers the sharded weight and
ReduceScatters its gradient. The cost model prices each plan, and ``compute_bound`` solves for B.
Independent side: the solved condition is checked on numbers against the plan's two costs, and compared
with the book's statement.
"""

from __future__ import annotations

import sympy

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.symbols import axis_size, dim_size, links, quantity
from shardalg.costs.derive import compute_bound
from shardalg.numeric.proofs import Lemma, Proof, sym_latex

from .common import bound_steps, program_latex, strategy_cost

NAME = "compute_bound_dp_fsdp"

STRATEGIES = {
    "DP": """dOut[B_X, F] · W[D, F] -> dIn[B_X, D]
In[B_X, D] ·_LOCAL dOut[B_X, F] -> dW[D, F]{U_X}
AllReduce_X(dW[D, F]{U_X}) -> dW[D, F]""",
    "FSDP": """AllGather_X(W[D_X, F]) -> W[D, F]
dOut[B_X, F] · W[D, F] -> dIn[B_X, D]
In[B_X, D] ·_LOCAL dOut[B_X, F] -> dW[D, F]{U_X}
ReduceScatter_{X,D}(dW[D, F]{U_X}) -> dW[D_X, F]""",
}


def prove(model=None) -> Lemma:
    B, X = dim_size("B"), axis_size("X")
    C, W, M = quantity("C"), quantity("W_ici"), links("X")
    expected = sympy.StrictGreaterThan(B / X, C / (W * M))
    proof = Proof(
        NAME,
        "DP and FSDP are compute-bound when the per-device batch exceeds C/(W_ici M_X)",
        r"\frac{B}{|X|} > \frac{C}{W_{\text{ici}} M_X}",
        "Per layer and weight, the backward pass does two matmuls of 2BDF/|X| FLOPs while the gradient's"
        " reduction moves 2DF bytes twice (AllReduce = ReduceScatter + AllGather; FSDP: AllGather + ReduceScatter).",
    )
    for name, program in STRATEGIES.items():
        proof.record(program_latex(program), f"{name}: one layer's backward pass, in the notation")
        pc = strategy_cost(program, Mesh(X=None), model)
        comms = proof.given(rf"T^{{\text{{{name}}}}}_{{\text{{comms}}}}", pc.comms, "the cost model")
        work = proof.given(rf"T^{{\text{{{name}}}}}_{{\text{{compute}}}}", pc.compute, "the cost model")
        d = compute_bound(pc, solve_for=B)
        bound_steps(proof, d, work, comms, expected, "its training chapter")
    proof.record(sym_latex(expected), "so both strategies share the book's condition")
    return proof.lemma()
