"""Lemma: on a bidirectional ring an AllToAll costs a quarter of an AllGather of the same array.

Engine side: the cost model's price of ``AllToAll_{X,J}(bf16[I_X, J]) -> bf16[I, J_X]`` and of the AllGather
of the same array on a ring of |X| devices. Independent side: seed 000's footnote 5, both as a sympy sum
(each device sends N/2 + (N/2 - 1) + ... + 1 chunks one way and (N/2 - 1) + ... + 1 the other, N^2/4 in all)
and as a routing simulation on the ring (every chunk takes the shorter way) that counts chunks per link.
Each chunk is a shard of a shard, V/N^2 bytes, so a device moves (V/N^2)(N^2/4) = V/4 bytes at W_ici.
"""

from __future__ import annotations

import sympy

from shardalg.algebra.symbols import axis_size, quantity
from shardalg.notation.syntax import Dim, DType, Op, Tensor
from shardalg.numeric.proofs import Lemma, Proof

from .common import alltoall_link_loads, comms_time, global_bytes, one_step_plan, ring_mesh, sent_per_device

NAME = "alltoall_quarter"
SIZES = range(4, 17, 2)


def prove(model=None) -> Lemma:
    W, T_min, N = quantity("W_ici"), quantity("T_min"), axis_size("X")
    k, m = sympy.symbols("k m", positive=True, integer=True)
    A = Tensor("A", (Dim("I", ("X",)), Dim("J")), dtype=DType.BF16)
    moved = Tensor("A", (Dim("I"), Dim("J", ("X",))), dtype=DType.BF16)
    gathered = Tensor("A", (Dim("I"), Dim("J")), dtype=DType.BF16)
    alltoall = one_step_plan(Op.ALL_TO_ALL, A, moved, ("X",), dim="J")
    allgather = one_step_plan(Op.ALL_GATHER, A, gathered, ("X",))
    V = global_bytes(gathered)
    proof = Proof(
        NAME,
        "the AllToAll factor 1/4 from the hop count of a bidirectional ring",
        r"T_{\textbf{AllToAll}_{X,J}} = \frac{V}{4 W_{\text{ici}}} = \frac{1}{4}\, T_{\textbf{AllGather}_X}",
        "The book's chapter 3, footnote 5: every device sends N^2/4 chunks of V/N^2 bytes over its links.",
    )
    right = sympy.summation(k, (k, 1, m))
    left = sympy.summation(k, (k, 1, m - 1))
    proof.given(
        r"\sum_{k=1}^{N/2} k + \sum_{k=1}^{N/2-1} k",
        (right + left).subs(m, N / 2),
        "chunks one device sends right and left (footnote 5), with N = 2m",
    )
    proof.equal(
        (right + left).subs(m, N / 2), N**2 / 4, "the footnote's sum", name=r"\text{chunks per device}"
    )
    for n in SIZES:
        load = alltoall_link_loads(n)
        sent = sent_per_device(load, n)
        r_load, l_load = load[(0, 1)], load[(0, n - 1)]
        proof.fact(
            rf"N={n}:\ \text{{right}} = {r_load},\ \text{{left}} = {l_load},\ \text{{per device}} = {sent[0]}",
            r_load == right.subs(m, n // 2) and l_load == left.subs(m, n // 2) and set(sent) == {n * n // 4},
            f"routing simulated on a ring of {n}: every device equals the footnote's sums",
        )
    chunk = V / N**2
    per_device = sympy.simplify(chunk * N**2 / 4 / W)
    proof.equal(
        per_device,
        V / (4 * W),
        "N^2/4 chunks of V/N^2 bytes at the bidirectional W_ici",
        name=r"\frac{V}{N^2}\cdot\frac{N^2}{4}\cdot\frac{1}{W_{\text{ici}}}",
    )
    for n in SIZES:
        engine = comms_time(alltoall, ring_mesh(n), model).subs(T_min, 0)
        proof.equal(
            engine,
            per_device,
            f"the cost model's AllToAll on a ring of {n} (bandwidth term)",
            name=rf"T^{{\text{{cost}}}}_{{\textbf{{AllToAll}}}}({n})",
        )
    ratio = sympy.simplify(
        comms_time(alltoall, ring_mesh(None), model).subs(T_min, 0)
        / comms_time(allgather, ring_mesh(None), model).subs(T_min, 0)
    )
    proof.equal(
        ratio,
        sympy.Rational(1, 4),
        "the cost model's AllToAll over its AllGather, |X| symbolic",
        name=r"T_{\textbf{AllToAll}} / T_{\textbf{AllGather}}",
    )
    return proof.lemma()
