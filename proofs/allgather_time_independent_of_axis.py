"""Lemma: a bandwidth-bound AllGather over one ring axis takes V / W_ici, whatever the axis size.

Engine side: the cost model's price of ``AllGather_X(bf16[I_X]) -> bf16[I]`` on a ring of |X| devices.
Independent side: a bidirectional ring schedule simulated step by step (:func:`proofs.common.ring_allgather`):
every device ends with every shard, each step's busiest directed link carries one shard of V/|X| bytes at
the one-way bandwidth W_ici/2, so a hop takes 2V/(|X| W_ici) (seed 000), and there are |X|/2 hops.
"""

from __future__ import annotations

import sympy

from shardalg.algebra.symbols import axis_size, quantity
from shardalg.notation.syntax import Dim, DType, Op, Tensor
from shardalg.numeric.proofs import Lemma, Proof

from .common import comms_time, global_bytes, one_step_plan, ring_allgather, ring_mesh, ring_time

NAME = "allgather_time_independent_of_axis"
SIZES = range(2, 17, 2)  # even ring sizes: the full bidirectional ring of the book


def prove(model=None) -> Lemma:
    W, T_min, X = quantity("W_ici"), quantity("T_min"), axis_size("X")
    A = Tensor("A", (Dim("I", ("X",)),), dtype=DType.BF16)
    gathered = Tensor("A", (Dim("I"),), dtype=DType.BF16)
    plan = one_step_plan(Op.ALL_GATHER, A, gathered, ("X",))
    V = global_bytes(gathered)
    proof = Proof(
        NAME,
        "the bandwidth-bound ring AllGather does not depend on the axis size",
        r"T_{\textbf{AllGather}_X} = \max\left(\frac{T_{\min} |X|}{2}, \frac{V}{W_{\text{ici}}}\right)"
        r" \;\Longrightarrow\; \frac{\partial}{\partial |X|}\frac{V}{W_{\text{ici}}} = 0",
        "On a bidirectional ring each hop moves V/|X| bytes each way and |X|/2 hops reach every device, so the"
        " bandwidth term is V/W_ici for every even |X|; only the latency floor T_min |X|/2 grows with |X|.",
    )
    proof.given(r"V", V, "bytes of the gathered array bf16[I]")
    symbolic = comms_time(plan, ring_mesh(None), model)
    proof.given(r"T_{\text{cost}}(|X|)", symbolic, "the cost model, axis size left symbolic")
    bandwidth = sympy.simplify(symbolic.subs(T_min, 0))
    proof.equal(
        bandwidth,
        V / W,
        "bandwidth-bound (T_min -> 0) term of the cost model's time",
        name=r"T_{\text{cost}}\big|_{T_{\min}=0}",
    )
    proof.zero(
        sympy.diff(bandwidth, X),
        "it does not depend on the axis size",
        name=r"\frac{\partial T}{\partial |X|}",
    )
    one_shard_per_hop = True
    for n in SIZES:
        sched = ring_allgather(n)
        complete = all(held == frozenset(range(n)) for held in sched.received)
        one_shard_per_hop &= all(sched.busiest(i) == 1 for i in range(sched.hops))
        proof.fact(
            rf"\text{{ring of {n}: every device holds all {n} shards after {sched.hops} hop{'s' if sched.hops != 1 else ''}}}",
            complete and sched.hops == n // 2,
            "simulated bidirectional ring schedule",
        )
        simulated = ring_time(sched, V / n, W, T_min)
        engine = comms_time(plan, ring_mesh(n), model)
        proof.equal(
            engine,
            simulated,
            f"the cost model = simulated ring time for |X| = {n}",
            name=rf"T_{{\text{{cost}}}}({n})",
            numeric=True,
        )
    proof.fact(
        r"\text{every hop: the busiest directed link carries one shard of } V/|X|",
        one_shard_per_hop,
        "simulated schedules, |X| = 2..16",
    )
    hop = (V / X) / (W / 2)
    proof.equal(
        hop,
        2 * V / (X * W),
        "one shard at the one-way bandwidth W_ici/2 (the book's chapter 3)",
        name=r"T_{\text{hop}}",
    )
    proof.equal(
        (X / 2) * hop,
        bandwidth,
        "|X|/2 hops of T_hop = the cost model's bandwidth term",
        name=r"\frac{|X|}{2} T_{\text{hop}}",
    )
    return proof.lemma()
