"""Lemma: AllReduce = ReduceScatter followed by AllGather, in time and as an operator.

Engine side: the cost model prices AllReduce_X(C[I, K]{U_X}) and the two-step program ReduceScatter_{X,K}
then AllGather_X, in each model that implements AllReduce by ring phases (ICI ring, ICI line, alpha-beta);
the executor builds all three as matrices on the stacked per-device buffers, on one- and two-axis meshes.
Independent side: the times are compared term by term (each model's two phases), the matrices multiplied
out, and the AllReduce matrix checked against the definition (every device gets the sum of all partials).
"""

from __future__ import annotations

import numpy as np

from shardalg.numeric.proofs import Lemma, Proof

NAME = "allreduce_is_rs_plus_ag"

ALL_REDUCE = "AllReduce_X(C[I, K]{U_X}) -> C[I, K]"
RS_THEN_AG = "ReduceScatter_{X,K}(C[I, K]{U_X}) -> C[I, K_X]\nAllGather_X(C[I, K_X]) -> C[I, K]"
MODELS = (("ici", True, "ICI ring"), ("ici", False, "ICI line"), ("alpha-beta", True, "alpha-beta ring"))
OPERATOR_CASES = (
    ({"X": 2}, "C[I, K]{U_X}", ("X",), "K", {"I": 2, "K": 4}),
    ({"X": 3}, "C[I, K]{U_X}", ("X",), "I", {"I": 3, "K": 2}),
    ({"X": 2, "Y": 3}, "C[I_Y, K]{U_X}", ("X",), "K", {"I": 3, "K": 4}),
    ({"X": 2, "Y": 2}, "C[I, K]{U_X, U_Y}", ("X", "Y"), "K", {"I": 2, "K": 4}),
)


def _steps(tensor: str, axes: tuple[str, ...], dim: str):
    from shardalg.notation.parse import parse_tensor
    from shardalg.notation.plan import Step
    from shardalg.notation.syntax import Op

    partial = parse_tensor(tensor)
    reduced = partial.replace(unreduced=())
    scattered = reduced.with_axes(dim, reduced.axes_of(dim) + axes)
    return (
        Step(Op.ALL_REDUCE, (partial,), reduced, axes),
        Step(Op.REDUCE_SCATTER, (partial,), scattered, axes, dim),
        Step(Op.ALL_GATHER, (scattered,), reduced, axes),
    )


def prove(model=None) -> Lemma:
    from shardalg.algebra.mesh import Axis, Mesh
    from shardalg.costs.plancost import cost
    from shardalg.numeric.operators import operator_matrix

    proof = Proof(
        NAME,
        "AllReduce is a ReduceScatter followed by an AllGather",
        r"\textbf{AllReduce}_X = \textbf{AllGather}_X \circ \textbf{ReduceScatter}_{X,K},"
        r"\qquad T_{\textbf{AllReduce}} = T_{\textbf{ReduceScatter}} + T_{\textbf{AllGather}}",
        "So an AllReduce costs twice an AllGather of the same array, and its final AllGather can be deferred.",
    )
    for name, wraps, label in MODELS:
        if model is not None and name != model:
            continue
        mesh = Mesh([Axis("X", None, wraps=wraps)])
        whole = cost(ALL_REDUCE, mesh=mesh, model=name, overlap=False).comms
        phases = cost(RS_THEN_AG, mesh=mesh, model=name, overlap=False).comms
        proof.equal(
            whole,
            phases,
            f"{label}: the cost model, |X| symbolic",
            numeric=True,
            name=rf"T^{{\text{{{label}}}}}_{{\textbf{{AllReduce}}}}",
        )
        bw = cost(ALL_REDUCE, mesh=mesh, model=name, latency=False).comms
        gather = cost("AllGather_X(C[I, K_X]) -> C[I, K]", mesh=mesh, model=name, latency=False).comms
        proof.equal(
            bw,
            2 * gather,
            f"{label}: bandwidth term is twice an AllGather's",
            name=rf"T^{{\text{{{label}}}}}_{{\text{{bw}}}}",
        )
    for axes_sizes, tensor, axes, dim, sizes in OPERATOR_CASES:
        mesh = Mesh(axes_sizes)
        ar, rs, ag = _steps(tensor, axes, dim)
        m_ar = operator_matrix(ar, mesh, sizes)
        m_rs, m_ag = operator_matrix(rs, mesh, sizes), operator_matrix(ag, mesh, sizes)
        where = ", ".join(f"{k}={v}" for k, v in axes_sizes.items())
        proof.fact(
            rf"\textbf{{AllReduce}} = \textbf{{AllGather}} \cdot \textbf{{ReduceScatter}} \text{{ on }} {where}",
            m_ar.shape == (m_ag @ m_rs).shape and bool(np.array_equal(m_ar, m_ag @ m_rs)),
            f"per-device matrices for {tensor}, exact integers",
        )
        group = int(np.prod([axes_sizes[a] for a in axes]))
        proof.fact(
            rf"\text{{every row of }} \textbf{{AllReduce}} \text{{ sums {group} partials}}",
            bool((m_ar.sum(axis=1) == group).all() and set(np.unique(m_ar)) <= {0, 1}),
            "the definition: each device gets the sum over its group",
        )
    return proof.lemma()
