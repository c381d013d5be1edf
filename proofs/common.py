"""The independent routes the lemmas check the engine against, and the engine calls they share.

The simulations here move shards on a ring of devices step by step and count what crosses each directed
link; they know nothing of the cost model's formulas. A lemma compares their counts (times a chunk size
over a link bandwidth) with what the cost model says.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import sympy

from shardalg.algebra.mesh import Mesh

Link = tuple[int, int]  # (from device, to device), neighbours on the ring


@dataclass(frozen=True)
class RingSchedule:
    """A collective on a ring of ``n`` devices: per step, how many chunks cross each directed link, and
    which chunks each device holds at the end (to prove the schedule does the collective)."""

    n: int
    steps: tuple[Counter[Link], ...]
    received: tuple[frozenset[int], ...]

    @property
    def hops(self) -> int:
        return len(self.steps)

    def busiest(self, step: int) -> int:
        """The most chunks any one directed link carries in ``step``."""
        return max(self.steps[step].values(), default=0)


def ring_allgather(n: int) -> RingSchedule:
    """Bidirectional ring AllGather: each device's shard travels right ``n // 2`` hops and left the rest.

    At step t a shard that started on device s crosses the link (s+t-1 -> s+t) going right, or
    (s-t+1 -> s-t) going left; every device forwards what it received the step before.
    """
    right, left = n // 2, n - 1 - n // 2
    steps: list[Counter[Link]] = []
    held: list[set[int]] = [{d} for d in range(n)]
    for t in range(1, max(right, left) + 1):
        load: Counter[Link] = Counter()
        for s in range(n):
            if t <= right:
                load[((s + t - 1) % n, (s + t) % n)] += 1
                held[(s + t) % n].add(s)
            if t <= left:
                load[((s - t + 1) % n, (s - t) % n)] += 1
                held[(s - t) % n].add(s)
        steps.append(load)
    return RingSchedule(n, tuple(steps), tuple(frozenset(h) for h in held))


def ring_time(
    schedule: RingSchedule,
    chunk_bytes: sympy.Expr,
    w_bidirectional: sympy.Expr,
    t_min: sympy.Expr | None = None,
) -> sympy.Expr:
    """The schedule's time: per step, the busiest directed link's bytes over the one-way bandwidth
    (half the bidirectional one), floored at ``t_min`` per hop when given; steps run one after another."""
    total = sympy.Integer(0)
    for i in range(schedule.hops):
        step = schedule.busiest(i) * chunk_bytes / (w_bidirectional / 2)
        total += step if t_min is None else sympy.Max(t_min, step)
    return total


def alltoall_link_loads(n: int) -> Counter[Link]:
    """AllToAll on a bidirectional ring: device s sends one chunk to every d != s along the shorter way
    (right on a tie); the count of chunks that cross each directed link over the whole collective."""
    load: Counter[Link] = Counter()
    for s in range(n):
        for d in range(n):
            if d == s:
                continue
            dist_right = (d - s) % n
            if dist_right <= n - dist_right:
                for k in range(dist_right):
                    load[((s + k) % n, (s + k + 1) % n)] += 1
            else:
                for k in range(n - dist_right):
                    load[((s - k) % n, (s - k - 1) % n)] += 1
    return load


def sent_per_device(load: Counter[Link], n: int) -> list[int]:
    """Chunks each device puts on its two outgoing links (both directions together)."""
    return [load[(d, (d + 1) % n)] + load[(d, (d - 1) % n)] for d in range(n)]


def ring_mesh(n: int | None, name: str = "X") -> Mesh:
    """A one-axis mesh (a ring with wraparound), symbolic when ``n`` is None."""
    from shardalg.algebra.mesh import Axis

    return Mesh([Axis(name, n, wraps=True)])


def one_step_plan(op, tensor, result, axes: tuple[str, ...], dim: str | None = None):  # -> Plan
    """A plan of one collective, for pricing it with the engine's cost model."""
    from shardalg.notation.plan import Plan, Step

    step = Step(op, (tensor,), result, axes=axes, dim=dim, reason="the collective under study")
    return Plan((tensor,), (step,), result)


def comms_time(plan, mesh: Mesh, model=None, sizes=None) -> sympy.Expr:  # plan: Plan
    """The engine's communication time of ``plan`` (symbolic seconds over W_ici, T_min, ...)."""
    from shardalg.costs.plancost import plan_cost

    return sympy.sympify(plan_cost(plan, mesh, sizes=sizes, model=model).comms)


def global_bytes(tensor) -> sympy.Expr:  # tensor: Tensor with named dims and a dtype
    """V: the bytes of the whole (global) array, from its dims' size symbols and its dtype."""
    from shardalg.algebra.symbols import dim_size

    total = sympy.Rational(tensor.dtype.bytes.numerator, tensor.dtype.bytes.denominator)
    for d in tensor.dims:
        total *= dim_size(d.name) if d.name is not None else d.size
    return total


def strategy_cost(program: str, mesh: Mesh, model=None, **options):  # -> PlanCost
    """The engine's cost of a program in the notation: parsed, checked, made a plan, priced (bandwidth-bound,
    link counts as the symbols M_X) under the book's layer-level overlap policy, ``steady``."""
    from shardalg.costs.plancost import cost

    return cost(
        program,
        mesh=mesh,
        model=model,
        latency=False,
        symbolic_links=True,
        **{"overlap": "steady", **options},
    )


def agrees_on_samples(
    condition: sympy.Basic, lhs: sympy.Expr, rhs: sympy.Expr, samples: int = 300, seed: int = 1
) -> bool:
    """Whether ``condition`` is true exactly where ``lhs > rhs``, at random positive points (log-uniform over
    eight decades, seeded): the solved condition checked against the two costs it was solved from."""
    from random import Random

    free = sorted(condition.free_symbols | lhs.free_symbols | rhs.free_symbols, key=str)
    f_cond = sympy.lambdify(free, condition, "math")
    f_lhs, f_rhs = sympy.lambdify(free, lhs, "math"), sympy.lambdify(free, rhs, "math")
    rng = Random(seed)
    for _ in range(samples):
        point = [10 ** rng.uniform(-4, 4) for _ in free]
        a, b = float(f_lhs(*point)), float(f_rhs(*point))
        if abs(a - b) <= 1e-9 * max(abs(a), abs(b)):
            continue  # too close to the boundary to call
        if bool(f_cond(*point)) != (a > b):
            return False
    return True


def program_latex(program: str) -> str:
    """A program in the notation, parsed and printed by the engine's LaTeX printer."""
    from shardalg.notation.parse import parse
    from shardalg.notation.printing import latex

    return latex(parse(program))


def bound_steps(
    proof, derivation, lhs: sympy.Expr, rhs: sympy.Expr, expected: sympy.Basic, source: str
) -> bool:
    """The common ending of a derived condition: the engine's result, checked on numbers against the costs
    it came from (``lhs > rhs`` where it holds), and shown equivalent to what the book states."""
    from shardalg.numeric.proofs import sym_latex

    result = derivation.result
    proof.record(sym_latex(result), "derived from the plans' costs")
    proof.fact(
        r"\text{the derived condition holds exactly where } " + sym_latex(sympy.Gt(lhs, rhs, evaluate=False)),
        agrees_on_samples(result, lhs, rhs),
        "checked at 300 random positive points",
    )
    return proof.equivalent(result, expected, f"the book's condition ({source})")
