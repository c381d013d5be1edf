"""The per-statement search over a program's dataflow graph, not only a chain: a choice per statement, a
resharding edge wherever one statement's result is another's operand, and an *input node* for a program
input that several statements read (as Q, K and V read one ``In``): its layout is a choice of its own,
priced nothing, each reader paying the resharding from it.

    >>> r = search_graph(ATTENTION, mesh=Mesh(X=2, Y=2), sizes="B=8,T=8,D=16,N=16", hw="tpu-v5e", mode="infer")
    >>> r.solver, r.optimal                                               # doctest: +SKIP
    ('dp', True)

Each statement's choices are those of :mod:`.chain` (its assignments priced once, equivalent and dominated
ones dropped, counted); the edges are priced by the planner's redistribution as there (training: with the
gradient's way back). Solved exactly: where the graph is a forest (a chain, a star of readers, a tree) a
dynamic program over it, rooted at each component's first statement, without the cap; when its optimum is
over the memory cap, or the graph has a cycle, an integer program with ``scipy.optimize.milp`` (HiGHS, gap 0):
a binary per choice, one per node, a binary per costly pair of layouts on each edge
(``x[u, writes a] + x[v, reads b] - 1 <= y[e, a, b]``) and the cap as a knapsack row on parameter bytes per
device. The result names its solver and whether it is optimal. The tests check both against a brute force.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shardalg.algebra.mesh import as_mesh
from shardalg.errors import UsageError
from shardalg.notation.syntax import Program, Tensor

from .chain import (
    Ticks,
    _operands,
    _statement_choices,
    edge_tables,
    layout_key,
)
from .chainsolve import milp_picks
from .numeric import prepare_search
from .price import Settings, size_text, time_text
from .space import Pruned

__all__ = [
    "InputLayout",
    "GraphProblem",
    "GraphResult",
    "graph_problem",
    "is_graph",
    "search_graph",
    "solve_graph",
]


@dataclass(frozen=True)
class InputLayout:
    """A choice of an input node: the layout the shared input is held in (it costs nothing itself)."""

    layout: Tensor
    seconds: float = 0.0
    param_bytes: float = 0.0
    strategy: str = "input"

    @property
    def reads(self) -> Tensor:
        return self.layout

    @property
    def writes(self) -> Tensor:
        return self.layout


@dataclass
class GraphProblem:
    """The nodes (statements, then input nodes), each one's choices, and the edges ``(u, v, prices)``: u's
    choice writes a layout that v's reads, ``prices[(layout u writes, layout v reads)]`` in seconds (a pair
    absent costs nothing)."""

    program: Program
    names: list[str]
    choices: list[list[Any]]
    edges: list[tuple[int, int, dict[tuple, float]]]
    settings: Settings
    pruned: list[Pruned]
    dominated: list[int]
    notes: list[tuple[str, str]] = field(default_factory=list)

    def edge(self, e: int, cu: Any, cv: Any) -> float:
        return self.edges[e][2].get((layout_key(cu.writes), layout_key(cv.reads)), 0.0)

    def total(self, picks: list[int]) -> float:
        cs = [self.choices[i][k] for i, k in enumerate(picks)]
        return sum(c.seconds for c in cs) + sum(
            self.edge(e, cs[u], cs[v]) for e, (u, v, _) in enumerate(self.edges)
        )

    def param_bytes(self, picks: list[int]) -> float:
        return sum(self.choices[i][k].param_bytes for i, k in enumerate(picks))

    @property
    def is_forest(self) -> bool:
        """No cycle in the undirected graph (a union-find over the edges)."""
        parent = list(range(len(self.choices)))

        def root(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for u, v, _ in self.edges:
            ru, rv = root(u), root(v)
            if ru == rv:
                return False
            parent[ru] = rv
        return True


def _statements(prog: Program) -> list[tuple[Any, Tensor, str]]:
    roles = prog.roles
    params = set(roles.params) | set(roles.embeddings) if roles is not None else set()
    out = []
    for i, s in enumerate(prog.statements):
        ops = _operands(s)
        where = {"span": getattr(s, "span", None), "source": prog.source}
        if ops is None:
            raise UsageError("a per-statement search takes products 'A * W -> R', one per line", **where)
        left, right, _ = ops
        kinds = [t for t in (left, right) if t.name in params]
        if len(kinds) != 1:
            raise UsageError(
                f"statement {i + 1} multiplies one activation by one parameter, not {len(kinds)} parameters",
                **where,
            )
        param, act = (left, right) if left.name in params else (right, left)
        out.append((s, act, param.name))
    return out


def is_graph(program: Program) -> bool:
    """Whether ``program`` is products of an activation by a parameter that do not form a chain (a
    statement reads an input or a result other than the one before's: Q, K and V read one input), which
    the graph search takes and the chain search refuses; False for a chain and for what neither takes."""
    try:
        stmts = _statements(program)
    except UsageError:
        return False
    return len(stmts) >= 2 and any(
        act.name != stmts[i - 1][0].result.name for i, (_, act, _) in enumerate(stmts) if i
    )


def graph_problem(
    program: Program | str,
    mesh: Any = None,
    sizes: Mapping[str, int] | str | None = None,
    hw: Any = None,
    memory: str | float | None = None,
    mode: str | None = None,
    optimizer: str | None = None,
    remat: str | None = None,
    overlap: str | None = None,
    *,
    dominance: bool = True,
    progress: Any = None,
) -> GraphProblem:
    """Every statement's choices, the input nodes and the edges (see the module's doc); ``progress(done,
    total)`` is called as assignments are priced (total: the spaces of the statements priced, one of each
    shape), then as the edges' layout pairs are (the total grows by their count then)."""
    prog, whole, settings, notes = prepare_search(
        program,
        as_mesh(mesh),
        sizes,
        hw,
        memory,
        mode,
        optimizer,
        remat,
        overlap,
        "applied to each statement and each resharding on its own",
    )
    stmts = _statements(prog)
    tick = Ticks(progress)
    _, choices, pruned, dominated = _statement_choices(
        prog, stmts, whole.batch_dims, settings, dominance, tick, notes
    )
    names = [s.result.name for s, _, _ in stmts]
    producer = {s.result.name: i for i, (s, _, _) in enumerate(stmts)}
    readers: dict[str, list[int]] = {}
    for i, (_, act, _) in enumerate(stmts):
        readers.setdefault(act.name, []).append(i)
    pairs: list[tuple[int, int]] = []
    for name, rs in readers.items():
        if name in producer:
            pairs += [(producer[name], r) for r in rs]
        elif len(rs) > 1:  # a shared input: a node of its own, one choice per layout a reader reads it in
            layouts = {layout_key(c.reads): c.reads for r in rs for c in choices[r]}
            names.append(f"input {name}")
            choices.append([InputLayout(t) for t in layouts.values()])
            pruned.append(Pruned())
            dominated.append(0)
            pairs += [(len(choices) - 1, r) for r in rs]
    # a pair of layouts on several edges (an input's readers) is priced once
    tables = edge_tables([(choices[u], choices[v]) for u, v in pairs], settings, tick, "graph")
    edges = [(u, v, t) for (u, v), t in zip(pairs, tables, strict=True)]
    notes.append(
        (
            "objective",
            "the sum of each statement's step seconds (each priced alone under the overlap policy) and "
            "each resharding's",
        )
    )
    notes.append(("memory cap", "a knapsack on parameter bytes per device; activations are not in it"))
    return GraphProblem(prog, names, choices, edges, settings, pruned, dominated, notes)


def _argmin(costs: list[float]) -> int:
    return min(range(len(costs)), key=lambda k: (costs[k], k))


def solve_tree(p: GraphProblem) -> list[int]:
    """The cheapest assignment of a forest, the cap ignored: each component rooted at its first node; each
    node's subtree cost per choice, children first (ties to the earlier choice)."""
    adj: dict[int, list[tuple[int, int]]] = {i: [] for i in range(len(p.choices))}
    for e, (u, v, _) in enumerate(p.edges):
        adj[u].append((v, e))
        adj[v].append((u, e))
    picks = [-1] * len(p.choices)
    seen: set[int] = set()
    for root in range(len(p.choices)):
        if root in seen:
            continue
        order: list[int] = []
        parent: dict[int, tuple[int, int]] = {root: (-1, -1)}
        children: dict[int, list[int]] = {}
        stack = [root]
        seen.add(root)
        while stack:  # preorder: a node before its descendants
            n = stack.pop()
            order.append(n)
            for m, e in adj[n]:
                if m not in seen:
                    seen.add(m)
                    parent[m] = (n, e)
                    children.setdefault(n, []).append(m)
                    stack.append(m)
        up: dict[int, list[float]] = {}  # up[n][k]: n's subtree and its edge, the parent at choice k
        via: dict[int, list[int]] = {}  # via[n][k]: n's best choice, the parent at choice k
        sub: list[float] = []
        for n in reversed(order):
            sub = [c.seconds for c in p.choices[n]]
            for m in children.get(n, ()):
                sub = [s + up[m][k] for k, s in enumerate(sub)]
            par, e = parent[n]
            if par < 0:
                break
            forward = p.edges[e][0] == par
            up[n], via[n] = [], []
            for cp in p.choices[par]:
                costs = [
                    sub[k] + (p.edge(e, cp, c) if forward else p.edge(e, c, cp))
                    for k, c in enumerate(p.choices[n])
                ]
                k = _argmin(costs)
                up[n].append(costs[k])
                via[n].append(k)
        picks[root] = _argmin(sub)
        for n in order[1:]:
            picks[n] = via[n][picks[parent[n][0]]]
    return picks


def solve_milp(p: GraphProblem) -> tuple[list[int] | None, bool]:
    """The cheapest assignment within the cap (None: none fits) by ``scipy.optimize.milp`` and whether
    HiGHS proved it optimal (gap 0): :func:`.chainsolve.milp_picks`."""
    return milp_picks(p.choices, p.edges, p.settings.cap, p.notes)


def solve_graph(p: GraphProblem, solver: str | None = None) -> tuple[list[int] | None, str, bool]:
    """``solver``: ``dp`` (a forest, the cap ignored), ``milp``, or None (the DP on a forest when its optimum
    fits the cap, else the integer program). Returns the picks, the solver and whether it is optimal."""
    if solver not in (None, "dp", "milp"):
        raise UsageError(f"the graph is solved by dp or milp, not {solver!r}")
    forest = p.is_forest
    if solver == "dp" and not forest:
        raise UsageError("the DP takes a chain or a tree: this graph has a cycle", fix="solver='milp'")
    if solver != "milp" and forest:
        picks = solve_tree(p)
        if solver == "dp" or p.param_bytes(picks) <= p.settings.cap:
            return picks, "dp", p.param_bytes(picks) <= p.settings.cap
    got, optimal = solve_milp(p)
    return got, "milp", optimal


@dataclass
class GraphResult:
    """The graph search's answer: a choice per node (``picks``; None: nothing fits), the solver that found
    it (``dp`` or ``milp``) and whether it is proven optimal."""

    problem: GraphProblem
    picks: list[int] | None
    solver: str
    optimal: bool

    @property
    def seconds(self) -> float | None:
        return self.problem.total(self.picks) if self.picks is not None else None

    @property
    def bytes(self) -> float | None:
        return self.problem.param_bytes(self.picks) if self.picks is not None else None

    def __str__(self) -> str:
        p = self.problem
        lines = [
            f"solver      {self.solver} ({'optimal' if self.optimal else 'not proven optimal'}; "
            f"the graph is {'a forest' if p.is_forest else 'not a tree'}: {len(p.choices)} nodes, "
            f"{len(p.edges)} edges)"
        ]
        if self.picks is None:
            lines.append("winner      none fits: every assignment is over the memory cap")
        else:
            lines.append(
                f"winner      {time_text(self.seconds)} per step, {size_text(self.bytes)} parameter bytes "  # type: ignore[arg-type]
                "per device"
            )
            for name, cs, k in zip(p.names, p.choices, self.picks, strict=True):
                c = cs[k]
                what = (
                    f"held as {c.layout}" if isinstance(c, InputLayout) else f"{c.strategy}: {c.assignment}"
                )
                lines.append(f"  {name:<12} {what}")
        lines += [f"note: {k}: {v}" for k, v in p.notes]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        p = self.problem
        return {
            "solver": self.solver,
            "optimal": self.optimal,
            "forest": p.is_forest,
            "seconds": self.seconds,
            "param_bytes_per_device": self.bytes,
            "nodes": [
                {
                    "name": n,
                    "choices": len(cs),
                    "pick": None
                    if self.picks is None
                    else str(
                        cs[self.picks[i]].layout
                        if isinstance(cs[self.picks[i]], InputLayout)
                        else cs[self.picks[i]].assignment
                    ),
                }
                for i, (n, cs) in enumerate(zip(p.names, p.choices, strict=True))
            ],
            "notes": [{"key": k, "value": v} for k, v in p.notes],
        }


def search_graph(program: Program | str, *, solver: str | None = None, **kw: Any) -> GraphResult:
    """The per-statement search of ``program`` over its dataflow graph (arguments as :func:`graph_problem`)."""
    p = graph_problem(program, **kw)
    picks, used, optimal = solve_graph(p, solver)
    return GraphResult(p, picks, used, optimal)
