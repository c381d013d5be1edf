"""Lemma: gathering the weights beats reducing partial sums exactly when D > 2B (seed 000, question 4).

For X[B, D] ·_D Y[D_X, F] -> Z[B, F] the book weighs two plans: AllGather_X the weights, then a replicated
matmul (case 2, strategy 1), or multiply the local shards into Z[B, F]{U_X} and AllReduce_X it (case 3,
strategy 2). Engine side: both plans written in the notation, priced by the cost model, compared by
``compare``: when both are communication-bound, strategy 2 wins iff D > 2B; at large batch (strategy 1
compute-bound) iff D > 2C/W_ici. Independent side: each result checked on numbers against the costs it was
solved from, the plans' byte counts against the book's (2DF and 2 x 2BF bytes in bf16), and the conditions
against the book's. Both plans are run by the numeric executor and equal the dense product.
"""

from __future__ import annotations

import sympy

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.symbols import axis_size, dim_size, quantity
from shardalg.costs.derive import compare
from shardalg.numeric.proofs import Lemma, Proof

from .common import agrees_on_samples, bound_steps, program_latex

NAME = "d_greater_2b"

GATHER_WEIGHTS = """AllGather_X(Y[D_X, F]) -> Y[D, F]
X[B, D] · Y[D, F] -> Z[B, F]"""
REDUCE_PARTIALS = """X[B, D_X] ·_LOCAL Y[D_X, F] -> Z[B, F]{U_X}
AllReduce_X(Z[B, F]{U_X}) -> Z[B, F]"""


def prove(model=None) -> Lemma:
    from shardalg.costs.plancost import cost
    from shardalg.notation.parse import parse
    from shardalg.numeric.execute import run_plan

    B, D, F, X = dim_size("B"), dim_size("D"), dim_size("F"), axis_size("X")
    C, W = quantity("C"), quantity("W_ici")
    mesh = Mesh(X=None)
    proof = Proof(
        NAME,
        "AllGather the weights, or multiply locally and AllReduce: the crossover D = 2B",
        r"T^{(2)}_{\text{comms}} < T^{(1)}_{\text{comms}} \iff D > 2B",
        "Strategy 1 moves the weights (2DF bytes); strategy 2 moves the partial result twice (2 x 2BF bytes).",
    )
    one = cost(GATHER_WEIGHTS, mesh=mesh, model=model, latency=False)
    two = cost(REDUCE_PARTIALS, mesh=mesh, model=model, latency=False)
    proof.record(program_latex(GATHER_WEIGHTS), "strategy 1 (case 2), in the notation")
    proof.record(program_latex(REDUCE_PARTIALS), "strategy 2 (case 3), in the notation")
    proof.equal(one.comms, 2 * D * F / W, "the book's 2DF / W_ici", name=r"T^{(1)}_{\text{comms}}")
    proof.equal(two.comms, 4 * B * F / W, "the book's 4BF / W_ici", name=r"T^{(2)}_{\text{comms}}")
    proof.equal(
        two.compute * X,
        one.compute,
        "strategy 2 does |X| times fewer FLOPs per device",
        name=r"|X|\, T^{(2)}_{\text{compute}}",
    )
    small = compare(REDUCE_PARTIALS, GATHER_WEIGHTS, solve_for=D, regime="comms", mesh=mesh, model=model)
    bound_steps(
        proof,
        small,
        one.comms,
        two.comms,
        sympy.StrictGreaterThan(D, 2 * B),
        "the book's chapter 3, question 4, both communication-bound",
    )
    large = compare(REDUCE_PARTIALS, GATHER_WEIGHTS, solve_for=D, regime="compute", mesh=mesh, model=model)
    result = large.result
    parts = result.args if isinstance(result, sympy.And) else (result,)
    on_d = [p for p in parts if D in p.free_symbols]
    rest = [p for p in parts if D not in p.free_symbols]
    proof.fact(
        r"\text{large batch: } T^{(2)} < T^{(1)}_{\text{compute}} \text{ solved}",
        agrees_on_samples(result, one.compute, sympy.Max(two.compute, two.comms)),
        "checked at 300 random positive points",
    )
    proof.fact(
        r"\text{the other condition is } |X| > 1",
        rest == [sympy.StrictGreaterThan(X, 1)],
        "true on any mesh that shards the weights",
    )
    if len(on_d) == 1:
        proof.equivalent(
            on_d[0], sympy.StrictGreaterThan(D, 2 * C / W), "the book's large-batch condition D > 2C/W_ici"
        )
    else:
        proof.fact(
            r"\text{one condition on } D", False, "the large-batch result has no single condition on D"
        )
    sizes = {"B": 4, "D": 8, "F": 6}
    for text, label in ((GATHER_WEIGHTS, "strategy 1"), (REDUCE_PARTIALS, "strategy 2")):
        from shardalg.costs.plancost import plan_of

        plan = plan_of(parse(text), Mesh(X=4), sizes)
        ok = run_plan(plan, Mesh(X=4), sizes).ok
        proof.fact(
            rf"\text{{{label} on 4 devices}} = X \cdot Y \text{{ (dense)}}",
            ok,
            "run on random data",
        )
    return proof.lemma()
