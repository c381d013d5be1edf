"""The per-statement search solved exactly: a DP over the chain (the state: the layout of the activation
between two statements) without a binding memory cap, an integer program (``scipy.optimize.milp``, HiGHS) with
one.

    >>> r = search_chain("params W1, W2\\nIn[B, D] * W1[D, F] -> H[B, F]\\nH[B, F] * W2[F, D] -> Out[B, D]",
    ...                  mesh="X=2,Y=2", sizes="B=64,D=256,F=1024", hw="tpu-v5e", mode="infer")
    >>> r.method                                                          # doctest: +SKIP
    'dp'

The integer program: a binary ``x[i, c]`` per statement i and choice c (one per statement), a binary
``y[i, a, b]`` per edge between layouts a (written by i) and b (read by i+1) that costs anything, linked by
``sum x[i, c writes a] + sum x[i+1, d reads b] - 1 <= y[i, a, b]``, and the knapsack
``sum param_bytes[i, c] x[i, c] <= cap``; it minimises the statements' seconds plus the edges'. ``solve``
runs the DP first: when its optimum fits the cap, that is the answer (``dp``); else the integer program
(``milp``). The tests check both against a brute force over every combination.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shardalg.algebra.mesh import as_mesh
from shardalg.errors import UsageError
from shardalg.notation.printing.display import Shown, Table
from shardalg.notation.syntax import Program

from .chain import ChainProblem, Choice, chain_problem, layout_key
from .price import size_text, time_text

__all__ = ["ChainResult", "milp_picks", "search_chain", "solve", "solve_dp", "solve_milp"]


def solve_dp(p: ChainProblem) -> list[int]:
    """The fastest chain, ignoring the cap: per statement and choice, the best cost of a chain ending there
    (ties to the earlier choice)."""
    best = [c.seconds for c in p.choices[0]]
    back: list[list[int]] = []
    for i in range(1, len(p.choices)):
        row, arg = [], []
        for c in p.choices[i]:
            costs = [best[k] + p.edge(i - 1, a, c) for k, a in enumerate(p.choices[i - 1])]
            k = min(range(len(costs)), key=lambda k: (costs[k], k))
            row.append(costs[k] + c.seconds)
            arg.append(k)
        best, back = row, [*back, arg]
    k = min(range(len(best)), key=lambda k: (best[k], k))
    picks = [k]
    for arg in reversed(back):
        picks.append(arg[picks[-1]])
    return picks[::-1]


def solve_milp(p: ChainProblem) -> list[int] | None:
    """The fastest chain within the cap (None: none fits), by ``scipy.optimize.milp`` (:func:`milp_picks`: a
    chain is a graph whose edges join each statement to the next)."""
    edges = [(i, i + 1, prices) for i, prices in enumerate(p.edges)]
    picks, optimal = milp_picks(p.choices, edges, p.settings.cap, p.notes)
    if not optimal:
        raise UsageError("the integer program did not finish")  # pragma: no cover
    return picks


def milp_picks(
    choices: Sequence[Sequence[Any]],
    edges: Sequence[tuple[int, int, Mapping[tuple, float]]],
    cap: float,
    notes: list[tuple[str, str]],
) -> tuple[list[int] | None, bool]:
    """The cheapest choice per node by ``scipy.optimize.milp`` (HiGHS, gap 0), the edges ``(u, v, prices)``
    priced per (layout u writes, layout v reads), parameter bytes within ``cap``: the picks (None: none fits)
    and whether HiGHS proved them optimal. HiGHS allows a row a feasibility tolerance (1e-6 relative); an
    answer over the cap by that is solved again with the cap tightened by 2e-6, and ``notes`` says so."""
    picks, optimal = _milp(choices, edges, cap, 1.0)
    if picks is not None and sum(choices[i][k].param_bytes for i, k in enumerate(picks)) > cap:
        picks, optimal = _milp(choices, edges, cap, 1 - 2e-6)
        notes.append(
            (
                "milp",
                "the integer program's answer was over the cap within HiGHS's tolerance; solved "
                "again with the cap tightened by 2e-6 (relative)",
            )
        )
    return picks, optimal


def _milp(
    choices: Sequence[Sequence[Any]],
    edges: Sequence[tuple[int, int, Mapping[tuple, float]]],
    cap: float,
    rhs: float,
) -> tuple[list[int] | None, bool]:
    """:func:`milp_picks`' integer program, parameter bytes within ``rhs`` times ``cap``."""
    import numpy as np
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import lil_matrix

    col: dict[tuple, int] = {}
    for i, cs in enumerate(choices):
        for k in range(len(cs)):
            col[("x", i, k)] = len(col)
    for e, (_, _, prices) in enumerate(edges):
        for ab, s in prices.items():
            if s > 0:
                col[("y", e, ab)] = len(col)
    values = [c.seconds for cs in choices for c in cs] + [s for *_, d in edges for s in d.values()]
    scale = max(values) or 1.0
    cost = np.zeros(len(col))
    for key, j in col.items():
        cost[j] = (choices[key[1]][key[2]].seconds if key[0] == "x" else edges[key[1]][2][key[2]]) / scale
    ys = [key for key in col if key[0] == "y"]
    rows = len(choices) + len(ys) + 1
    a = lil_matrix((rows, len(col)))
    lo, hi = np.zeros(rows), np.zeros(rows)
    for i, cs in enumerate(choices):  # one choice per node
        for k in range(len(cs)):
            a[i, col[("x", i, k)]] = 1
        lo[i] = hi[i] = 1
    for r, (_, e, (ka, kb)) in enumerate(ys, start=len(choices)):  # x_u,a + x_v,b - 1 <= y_e,a,b
        u, v, _ = edges[e]
        for k, c in enumerate(choices[u]):
            if layout_key(c.writes) == ka:
                a[r, col[("x", u, k)]] = 1
        for k, c in enumerate(choices[v]):
            if layout_key(c.reads) == kb:
                a[r, col[("x", v, k)]] = 1
        a[r, col[("y", e, (ka, kb))]] = -1
        lo[r], hi[r] = -np.inf, 1
    for i, cs in enumerate(choices):  # the knapsack, in units of the cap
        for k, c in enumerate(cs):
            a[rows - 1, col[("x", i, k)]] = c.param_bytes / cap
    lo[-1], hi[-1] = -np.inf, rhs
    res = milp(
        cost,
        constraints=LinearConstraint(a.tocsr(), lo, hi),
        integrality=np.ones(len(col)),
        bounds=Bounds(0, 1),
        options={"mip_rel_gap": 0},
    )
    if res.status == 2:  # infeasible: nothing fits
        return None, True
    if res.x is None:
        raise UsageError(f"the integer program did not finish: {res.message}")  # pragma: no cover
    picks = [max(range(len(cs)), key=lambda k: res.x[col[("x", i, k)]]) for i, cs in enumerate(choices)]
    return picks, res.status == 0


def solve(p: ChainProblem, method: str | None = None) -> tuple[list[int] | None, str]:
    """``method``: ``dp`` (the cap ignored), ``milp``, or None (the DP, then the integer program if its
    optimum is over the cap)."""
    if method == "dp":
        return solve_dp(p), "dp"
    if method == "milp":
        return solve_milp(p), "milp"
    if method is not None:
        raise UsageError(f"the chain is solved by dp or milp, not {method!r}")
    picks = solve_dp(p)
    if p.param_bytes(picks) <= p.settings.cap:
        return picks, "dp"
    return solve_milp(p), "milp"


@dataclass(repr=False)
class ChainResult(Shown):
    """The per-statement search's answer: one choice per statement (``picks``), the chain's seconds, the
    parameter bytes per device, how it was solved (``dp`` or ``milp``) and the problem it solved."""

    problem: ChainProblem
    picks: list[int] | None
    method: str

    @property
    def choices(self) -> list[Choice] | None:
        return None if self.picks is None else [self.problem.choices[i][k] for i, k in enumerate(self.picks)]

    @property
    def seconds(self) -> float | None:
        return None if self.picks is None else self.problem.total(self.picks)

    @property
    def bytes(self) -> float | None:
        """Parameter bytes per device (with gradients and optimizer state when training)."""
        return None if self.picks is None else self.problem.param_bytes(self.picks)

    def edge_seconds(self) -> list[float]:
        cs = self.choices or []
        return [self.problem.edge(i, cs[i], cs[i + 1]) for i in range(len(cs) - 1)]

    def _space(self) -> str:
        p = self.problem
        parts = []
        for i, cs in enumerate(p.choices):
            pr = p.pruned[i]
            parts.append(
                f"{len(cs)} (of {pr.visited}: {pr.illegal} illegal, {pr.equivalent} equivalent, "
                f"{pr.over_cap} over the cap, {p.dominated[i]} dominated)"
            )
        return "; ".join(parts)

    def __str__(self) -> str:
        p, st = self.problem, self.problem.settings
        lines = [
            f"{'mesh':<11} {', '.join(f'{a.name}={a.size}' for a in st.mesh.axes)}",
            f"{'chip':<11} {st.chip.name}",
            f"{'mode':<11} {st.mode}",
            f"{'overlap':<11} {st.policy}",
            f"{'memory cap':<11} {size_text(st.cap)} per device (parameters)",
            f"{'choices':<11} per statement: {self._space()}, none truncated",
            f"{'solved by':<11} {self.method}",
        ]
        cs = self.choices
        if cs is None:
            lines.append("chain       none fits: every combination's parameters are over the memory cap")
        else:
            lines.append(
                f"{'chain':<11} {time_text(self.seconds)} per step, {size_text(self.bytes)} of "  # type: ignore[arg-type]
                "parameters per device"
            )
            edges = self.edge_seconds()
            for i, c in enumerate(cs):
                lines.append(
                    f"  {i + 1}. {c.strategy:<9} {str(c.assignment):<38} {time_text(c.seconds):>9} "
                    f"{size_text(c.param_bytes):>9}  reads {c.reads}, writes {c.writes}"
                )
                if i < len(edges):
                    lines.append(
                        f"     reshard {cs[i + 1].reads.name}: {time_text(edges[i]) if edges[i] else 'none'}"
                    )
        lines += [f"note: {k}: {v}" for k, v in p.notes]
        return "\n".join(lines)

    def summary(self) -> str:
        """``3 statements by milp: 1.2 ms per step, 2.9 MB of parameters per device``."""
        n = len(self.problem.choices)
        if self.choices is None:
            return f"{n} statements: none fits (every combination's parameters are over the cap)"
        return (
            f"{n} statements by {self.method}: {time_text(self.seconds)} per step, "  # type: ignore[arg-type]
            f"{size_text(self.bytes)} of parameters per device"  # type: ignore[arg-type]
        )

    def table(self) -> Table:
        """One row a statement (strategy, assignment, seconds, parameter bytes, what it reads and writes) and
        the resharding before the next."""
        cs, edges = self.choices or [], self.edge_seconds()
        rows = []
        for i, c in enumerate(cs):
            reshard = (time_text(edges[i]) if edges[i] else "none") if i < len(edges) else "-"
            rows.append(
                (
                    str(i + 1),
                    c.strategy,
                    str(c.assignment),
                    time_text(c.seconds),
                    size_text(c.param_bytes),
                    f"{c.reads} -> {c.writes}",
                    reshard,
                )
            )
        return Table(
            ("#", "strategy", "assignment", "time", "params", "reads -> writes", "reshard after"),
            tuple(rows),
            f"per-statement search: {self.summary()}",
            code=(2, 5),
            notes=tuple(f"note: {k}: {v}" for k, v in self.problem.notes),
        )

    def to_json(self) -> dict[str, Any]:
        p, st = self.problem, self.problem.settings
        cs = self.choices
        return {
            "method": self.method,
            "mode": st.mode,
            "overlap": st.policy.value,
            "memory_cap": st.cap,
            "seconds": self.seconds,
            "param_bytes_per_device": self.bytes,
            "choices_per_statement": [len(c) for c in p.choices],
            "pruned": [{**x.to_json(), "dominated": d} for x, d in zip(p.pruned, p.dominated, strict=True)],
            "truncated": False,
            "statements": None
            if cs is None
            else [
                {
                    "strategy": c.strategy,
                    "params": c.assignment.params_text,
                    "activations": c.assignment.activations_text,
                    "seconds": c.seconds,
                    "param_bytes": c.param_bytes,
                    "reads": str(c.reads),
                    "writes": str(c.writes),
                }
                for c in cs
            ],
            "reshard_seconds": self.edge_seconds() if cs is not None else None,
            "defaults": [{"key": k, "value": v} for k, v in p.notes],
        }


def search_chain(
    program: Program | str,
    mesh: Any = None,
    sizes: Mapping[str, int] | str | None = None,
    hw: Any = None,
    memory: str | float | None = None,
    mode: str | None = None,
    optimizer: str | None = None,
    remat: str | None = None,
    overlap: str | None = None,
    method: str | None = None,
    progress: Any = None,
) -> ChainResult:
    """The fastest per-statement sharding of a chain of layers within the memory cap (see the module);
    ``progress(done, total)`` is called as assignments are priced."""
    p = chain_problem(
        program, as_mesh(mesh), sizes, hw, memory, mode, optimizer, remat, overlap, progress=progress
    )
    picks, how = solve(p, method)
    return ChainResult(p, picks, how)
