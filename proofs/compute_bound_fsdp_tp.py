"""Lemma: FSDP+TP at its optimal split is compute-bound when B/N > (C/W_ici)^2 / (M_X M_Y F) (seed 002).

Engine side: the FSDP+TP plan of the MLP block (proofs/x_opt.py), its |X| set to the engine's own optimum
(``optimum``), and ``compute_bound`` solved for B. Independent side: checked on numbers against the two
costs at the optimum, and compared with the book.
"""

from __future__ import annotations

import sympy

from shardalg.algebra.symbols import axis_size, device_count, dim_size, links, quantity
from shardalg.costs.derive import compute_bound, optimum
from shardalg.numeric.proofs import Lemma, Proof

from .common import bound_steps, program_latex
from .x_opt import FSDP_TP, fsdp_tp_cost

NAME = "compute_bound_fsdp_tp"


def prove(model=None) -> Lemma:
    B, F, X, Y, N = dim_size("B"), dim_size("F"), axis_size("X"), axis_size("Y"), device_count()
    C, W, MX, MY = quantity("C"), quantity("W_ici"), links("X"), links("Y")
    expected = sympy.StrictGreaterThan(B / N, (C / W) ** 2 / (MX * MY * F))
    proof = Proof(
        NAME,
        "FSDP+TP at the optimal split is compute-bound above a per-device batch of (C/W_ici)^2/(M_X M_Y F)",
        r"\frac{B}{N} > \frac{(C / W_{\text{ici}})^2}{M_X M_Y F}",
        "At the optimal |X| the FSDP and TP communication times are equal; compute must exceed either.",
    )
    proof.record(program_latex(FSDP_TP), "the FSDP+TP plan of the MLP block, in the notation")
    pc = fsdp_tp_cost(model)
    x_opt = optimum(pc, over=X, subject_to=sympy.Eq(X * Y, N)).result
    at = {X: x_opt, Y: N / x_opt}
    proof.given(r"|X|_{\text{opt}}", x_opt, "the derived optimum (the lemma on the optimal split)")
    comms = proof.given(
        r"T_{\text{comms}}(|X|_{\text{opt}})", sympy.simplify(pc.comms.subs(at)), "the cost model"
    )
    work = proof.given(r"T_{\text{compute}}", sympy.simplify(pc.compute.subs(at)), "the cost model")
    d = compute_bound(pc, solve_for=B, substitute=at)
    bound_steps(proof, d, work, comms, expected, "its training chapter")
    return proof.lemma()
