"""Lemma: AllGather and ReduceScatter are each other's transpose (seed 000, the Kronecker argument).

With u = (1, ..., 1) in R^p: broadcast = u ⊗ I_n, reduce = uᵀ ⊗ I_n = broadcastᵀ, AllGather = broadcast ⊗ I_p,
ReduceScatter = reduce ⊗ I_p, hence AllGatherᵀ = ReduceScatter and ReduceScatterᵀ = AllGather.
Engine side: the executor's AllGather_X(A[I_X]) and ReduceScatter_{X,I}(A[I]{U_X}) as exact matrices on the
stacked per-device buffers (device-major; |X| = p devices, shards of n elements), from
:func:`shardalg.numeric.operators.kron_forms`, and the rule engine's local transpose (``transpose_step``).
Independent side: the Kronecker products built here with sympy, for every p <= 4 and n <= 3.
"""

from __future__ import annotations

import sympy

from shardalg.notation.syntax import Op
from shardalg.numeric.proofs import Lemma, Proof, sym_latex

NAME = "allgather_reducescatter_transpose"
PS, NS = range(1, 5), range(1, 4)


def prove(model=None) -> Lemma:
    from shardalg.notation.plan import Step
    from shardalg.numeric.operators import kron_forms, operator_matrix, transpose_step

    proof = Proof(
        NAME,
        "AllGather and ReduceScatter are transposes (Kronecker form)",
        r"\textbf{AllGather} = (u \otimes I_n) \otimes I_p, \quad "
        r"\textbf{ReduceScatter} = (u^{T} \otimes I_n) \otimes I_p = \textbf{AllGather}^{T}",
        "Broadcast and reduce are transposes, and the transpose of a Kronecker product is the product of the"
        " transposes; the per-device operators built from the rules are exactly these Kronecker products on the stacked buffers.",
    )
    checks = {
        "reduce": (r"u^{T} \otimes I_n = (u \otimes I_n)^{T}", []),
        "ag": (r"\textbf{AllGather}_X = (u \otimes I_n) \otimes I_p", []),
        "rs": (r"\textbf{ReduceScatter}_{X,I} = (u^{T} \otimes I_n) \otimes I_p", []),
        "ag_t": (r"\textbf{AllGather}_X^{T} = \textbf{ReduceScatter}_{X,I}", []),
        "rs_t": (r"\textbf{ReduceScatter}_{X,I}^{T} = \textbf{AllGather}_X", []),
        "rule": (r"\operatorname{transpose}(\textbf{AllGather}_X) = \textbf{ReduceScatter}_{X,I}", []),
        "rule2": (r"\operatorname{transpose}(\textbf{ReduceScatter}_{X,I}) = \textbf{AllGather}_X", []),
    }
    for p in PS:
        for n in NS:
            k = kron_forms(p, n)
            u = sympy.ones(p, 1)
            broadcast = sympy.kronecker_product(u, sympy.eye(n))
            reduce = sympy.kronecker_product(u.T, sympy.eye(n))
            ag = sympy.kronecker_product(broadcast, sympy.eye(p))
            rs = sympy.kronecker_product(reduce, sympy.eye(p))
            checks["reduce"][1].append(reduce == broadcast.T)
            checks["ag"][1].append(k.all_gather_op == ag)
            checks["rs"][1].append(k.reduce_scatter_op == rs)
            checks["ag_t"][1].append(k.all_gather_op.T == k.reduce_scatter_op)
            checks["rs_t"][1].append(k.reduce_scatter_op.T == k.all_gather_op)
            from shardalg.algebra.mesh import Mesh
            from shardalg.notation.syntax import Dim, Tensor

            sharded, full = Tensor("A", (Dim("I", ("X",)),)), Tensor("A", (Dim("I"),))
            partial = Tensor("A", (Dim("I"),), unreduced=("X",))
            gather = Step(Op.ALL_GATHER, (sharded,), full, ("X",))
            scatter = Step(Op.REDUCE_SCATTER, (partial,), sharded, ("X",), "I")
            mesh, sizes = Mesh(X=p), {"I": p * n}
            back = transpose_step(gather)
            checks["rule"][1].append(
                back.op is Op.REDUCE_SCATTER and operator_matrix(back, mesh, sizes, exact=True) == ag.T
            )
            back2 = transpose_step(scatter)
            checks["rule2"][1].append(
                back2.op is Op.ALL_GATHER and operator_matrix(back2, mesh, sizes, exact=True) == rs.T
            )
    cases = f"p \\le {max(PS)},\\ n \\le {max(NS)}"
    for claim, results in checks.values():
        proof.fact(
            rf"{claim} \quad ({cases})",
            all(results) and len(results) == len(PS) * len(NS),
            f"exact matrices, all {len(results)} cases",
        )
    k = kron_forms(2, 1)
    x, y = sympy.Matrix([7, 5]), sympy.Matrix([8, 9, 1, 2])
    proof.matrix_equal(
        k.all_gather_op * x,
        sympy.Matrix([7, 5, 7, 5]),
        r"\textbf{AllGather}_X (7, 5)^{T} = (7, 5, 7, 5)^{T}",
        "p = 2, n = 1: both devices hold (7, 5)",
    )
    proof.matrix_equal(
        k.reduce_scatter_op * y,
        sympy.Matrix([9, 11]),
        r"\textbf{ReduceScatter}_{X,I} (8, 9, 1, 2)^{T} = (9, 11)^{T}",
        "device 0 keeps 8 + 1, device 1 keeps 9 + 2",
    )
    proof.record(
        rf"\textbf{{AllGather}}_X = {sym_latex(k.all_gather_op)}", "the operator's matrix, p = 2, n = 1"
    )
    return proof.lemma()
