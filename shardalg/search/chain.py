"""Per-statement choices for a chain of statements (each statement's output feeds the next): the choices of
each statement, their seconds and parameter bytes, and the resharding edges between consecutive statements.

    >>> p = chain_problem("params W1, W2\\nIn[B, D] * W1[D, F] -> H[B, F]\\nH[B, F] * W2[F, D] -> Out[B, D]",
    ...                   mesh=Mesh.parse("X=2,Y=2"), sizes="B=64,D=256,F=1024", hw="tpu-v5e", mode="infer")
    >>> [len(c) for c in p.choices]                                        # doctest: +SKIP

Each statement is a program of its own (its parameters declared, the whole program's batch dims kept) and
its choices are the assignments of :mod:`.space` for that program, priced by :class:`.price.Pricer` (its
plans, derived backward when training, step seconds under the overlap policy, memory by part). Unlike the
whole-program search, interchangeable axes are *not* pruned as symmetric: a statement's image under an axis
permutation meets its neighbours on other axes, so it may be the one that needs no resharding. Equivalent
assignments (the same sharded statement) are priced once; a choice whose own parameter bytes exceed the cap
is dropped (no chain can take it); a choice *dominated* by another of the same statement (same input and
output layouts, no more seconds and no more parameter bytes) is dropped. All counted, none truncated.

An edge prices moving statement i's output, as its choice writes it, to the layout statement i+1's choice
reads: zero when equal, else the fastest sequence of collectives :func:`shardalg.costs.ranking.redistribute`
finds on the chip, priced by :func:`shardalg.costs.plancost.plan_cost` under the overlap policy; when training,
plus the gradient's way back (the same move reversed). A layout's moves to every layout of the other side are one
search of its space (:class:`Moves`), not one per pair.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from math import inf
from typing import Any

from shardalg.costs.plancost import plan_cost
from shardalg.costs.ranking import reshardings
from shardalg.errors import NoPlan, UsageError
from shardalg.models.expand import shard
from shardalg.notation.syntax import Arrow, Product, Program, Roles, Tensor
from shardalg.planning.redistribute import Reshardings

from .numeric import prepare_search
from .price import Entry, Pricer, Settings, size_text
from .space import Assignment, Pruned, Space, enumerate_space, space_of

__all__ = ["Choice", "ChainProblem", "chain_problem", "edge_tables", "MAX_EDGE_PAIRS"]

MAX_EDGE_PAIRS = (
    200_000  # layout pairs between consecutive statements, over all edges: above, refuse up front
)

PARAM_PARTS = ("params", "grads", "optimizer")  # the parts of model_memory that need no plan (param_bytes)


@dataclass(frozen=True)
class Choice:
    """One priced choice of one statement: its assignment, the layouts it reads and writes the chain's
    activations in, its seconds and its parameter bytes per device (with gradients and optimizer state when
    training)."""

    assignment: Assignment
    entry: Entry
    reads: Tensor
    writes: Tensor
    seconds: float
    param_bytes: float

    @property
    def strategy(self) -> str:
        return self.entry.strategy


def layout_key(t: Tensor) -> tuple:
    """A tensor's layout, without its name and span: its dims with their axes, and its unreduced axes."""
    return (tuple((d.label, d.axes) for d in t.dims), tuple(t.unreduced))


@dataclass
class ChainProblem:
    """The statements, each one's choices, and the edge seconds between layouts of consecutive statements
    (``edges[i][(out of i, in of i+1)]``, the layouts as :func:`layout_key`; a pair absent costs nothing)."""

    program: Program
    statements: list[Program]
    choices: list[list[Choice]]
    edges: list[dict[tuple, float]]
    settings: Settings
    pruned: list[Pruned]
    dominated: list[int]
    notes: list[tuple[str, str]] = field(default_factory=list)

    def edge(self, i: int, a: Choice, b: Choice) -> float:
        """Seconds to move statement i's output as ``a`` writes it to the layout ``b`` (of i+1) reads."""
        return self.edges[i].get((layout_key(a.writes), layout_key(b.reads)), 0.0)

    def total(self, picks: list[int]) -> float:
        """The chain's seconds for one choice index per statement: statements plus edges."""
        cs = [self.choices[i][k] for i, k in enumerate(picks)]
        return sum(c.seconds for c in cs) + sum(self.edge(i, cs[i], cs[i + 1]) for i in range(len(cs) - 1))

    def param_bytes(self, picks: list[int]) -> float:
        return sum(self.choices[i][k].param_bytes for i, k in enumerate(picks))


def _operands(s: object) -> tuple[Tensor, Tensor, Tensor] | None:
    if (
        isinstance(s, Arrow)
        and isinstance(s.expr, Product)
        and isinstance(s.expr.left, Tensor)
        and isinstance(s.expr.right, Tensor)
        and isinstance(s.result, Tensor)
    ):
        return s.expr.left, s.expr.right, s.result
    return None


def _links(prog: Program) -> list[tuple[Any, Tensor, str]]:
    """Each statement with its activation operand and its parameter's name; refuses what is not a chain."""
    roles = prog.roles
    params = set(roles.params) | set(roles.embeddings) if roles is not None else set()
    out: list[tuple[Any, Tensor, str]] = []
    used: set[str] = set()
    for i, s in enumerate(prog.statements):
        ops = _operands(s)
        where = {"span": getattr(s, "span", None), "source": prog.source}
        if ops is None:
            raise UsageError(
                "a per-statement search takes a chain of products 'A * W -> R', one per line",
                fix="write each layer as one product of an activation and a parameter",
                **where,
            )
        left, right, result = ops
        kinds = [t for t in (left, right) if t.name in params]
        if len(kinds) != 1:
            raise UsageError(
                f"statement {i + 1} of a chain multiplies one activation by one parameter, not "
                f"{len(kinds)} parameters",
                **where,
            )
        param, act = (left, right) if left.name in params else (right, left)
        if param.name in used:
            raise UsageError(
                f"the parameter {param.name} is used by two statements: a chain gives each statement "
                "its own parameter (its bytes are counted once per statement)",
                **where,
            )
        used.add(param.name)  # type: ignore[arg-type]
        if out and act.name != _operands(prog.statements[i - 1])[2].name:  # type: ignore[index]
            raise UsageError(
                f"statement {i + 1} does not read the previous statement's result: not a chain",
                fix="the per-statement search takes layers in a row, each fed by the one before",
                **where,
            )
        out.append((s, act, param.name))  # type: ignore[arg-type]
    if len(out) < 2:
        raise UsageError(
            "a chain has at least two statements (one statement: shardalg search without --per-statement)"
        )
    return out


def _sub_program(prog: Program, s: Any, param: str) -> Program:
    roles = prog.roles or Roles()
    names = {t.name for t in _operands(s)}  # type: ignore[union-attr]
    keep = {
        k: tuple(n for n in getattr(roles, k) if n in names)
        for k in ("params", "embeddings", "saved", "kvcache")
    }
    return Program(
        (s,),
        prog.mesh,
        prog.sizes,
        Roles(**keep, tokens=roles.tokens, layers=roles.layers),
        source=prog.source,
    )


def _find(program: Program, name: str | None, result: bool) -> Tensor:
    """The chain activation ``name`` in a sharded one-statement program: the result it writes, or the
    operand its product reads."""
    for s in program.statements:
        ops = _operands(s)
        if ops is None:
            continue
        if result and ops[2].name == name:
            return ops[2]
        if not result and name in (ops[0].name, ops[1].name):
            return ops[0] if ops[0].name == name else ops[1]
    raise UsageError(f"internal: {name} not found in {program}")  # pragma: no cover


def _shape(s: Any, act: Tensor) -> tuple:
    """A statement without its tensors' names: the operands' and result's dims, and which side is the
    activation (two statements of one shape have the same choices at the same prices: the planner does not
    read the tensors' names, even to order plans that tie, ``tests/planning/test_names.py``)."""
    left, right, result = _operands(s)  # type: ignore[misc]
    return (left.dim_names, right.dim_names, result.dim_names, left is act)


def _renamed(c: Choice, sub: Program, act: Tensor, result: Tensor) -> Choice:
    """A choice of one statement for another of the same shape: its own sharded program and layouts."""
    a = c.assignment
    program = shard(sub, a.param_map, a.activation_map, sequence=a.megatron)
    return replace(
        c,
        entry=replace(c.entry, program=program),
        reads=_find(program, act.name, False),
        writes=_find(program, result.name, True),
    )


def _space(sub: Program, act: Tensor, result: Tensor, batch: tuple[str, ...], settings: Settings) -> Space:
    """A statement's space, with the whole program's batch dims (those the statement has)."""
    space = space_of(sub, settings.mesh, settings.sizes)
    mine = set(act.dim_names) | set(result.dim_names)
    return replace(space, batch_dims=tuple(d for d in batch if d in mine))


def _choices(
    sub: Program,
    space: Space,
    act: Tensor,
    result: Tensor,
    settings: Settings,
    pruned: Pruned,
    dominance: bool = True,
    tick: Any = None,
) -> tuple[list[Choice], int]:
    # the cap is a knapsack on parameter bytes, blind to kept copies: the backward gathers again (said)
    pricer = Pricer(sub, space, replace(settings, cap=inf, keep=False), pruned)
    out: list[Choice] = []
    for a in enumerate_space(space, pruned, symmetry=False):
        if tick is not None:
            tick()
        e = pricer(a)
        if e is None:
            continue
        pb = sum(e.parts.get(k, 0.0) for k in PARAM_PARTS)
        if pb > settings.cap:
            pruned.over_cap += 1
            continue
        out.append(
            Choice(
                a,
                e,
                _find(e.program, act.name, False),
                _find(e.program, result.name, True),
                float(e.seconds),
                pb,
            )
        )  # type: ignore[arg-type]
    if not dominance:
        return out, 0
    # dominated: another choice with the same layouts, no slower and no heavier (the first such kept)
    kept: list[Choice] = []
    lightest: dict[tuple, float] = {}  # per pair of layouts, the fewest bytes of a kept choice
    for c in sorted(out, key=lambda c: (c.seconds, c.param_bytes)):
        key = (layout_key(c.reads), layout_key(c.writes))
        if key in lightest and lightest[key] <= c.param_bytes:
            continue
        lightest[key] = min(lightest.get(key, c.param_bytes), c.param_bytes)
        kept.append(c)
    order = {id(c): n for n, c in enumerate(out)}
    kept.sort(key=lambda c: order[id(c)])
    return kept, len(out) - len(kept)


class Ticks:
    """The progress of a per-statement search, ``progress(done, total)`` at each unit of work: the assignments
    priced, then the layout pairs of its edges, whose count is known only once the choices are (the total
    grows then)."""

    def __init__(self, progress: Any = None):
        self.progress, self.done, self.total = progress, 0, 0

    def grow(self, n: int) -> None:
        self.total += n

    def __call__(self) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, self.total)


def _statement_choices(
    prog: Program,
    stmts: list[tuple[Any, Tensor, str]],
    batch: tuple[str, ...],
    settings: Settings,
    dominance: bool,
    tick: Ticks,
    notes: list[tuple[str, str]],
) -> tuple[list[Program], list[list[Choice]], list[Pruned], list[int]]:
    """Each statement's one-statement program, its choices, what its space pruned and how many choices were
    dominated. A statement of the shape of one before it (a layer repeated; K's projection after Q's) takes
    that one's choices renamed, said in ``notes``; ``tick`` counts the assignments priced (its total grows by
    the spaces of the statements priced)."""
    subs = [_sub_program(prog, s, param) for s, _, param in stmts]
    spaces = [
        _space(sub, act, s.result, batch, settings) for sub, (s, act, _) in zip(subs, stmts, strict=True)
    ]
    shapes = [_shape(s, act) for s, act, _ in stmts]
    tick.grow(sum(spaces[shapes.index(shape)].size for shape in dict.fromkeys(shapes)))

    choices: list[list[Choice]] = []
    pruned: list[Pruned] = []
    dominated: list[int] = []
    first: dict[tuple, int] = {}  # a shape -> its first statement, whose choices are priced
    for i, ((s, act, _), sub, space, shape) in enumerate(zip(stmts, subs, spaces, shapes, strict=True)):
        if shape in first:
            k = first[shape]
            got = [_renamed(c, sub, act, s.result) for c in choices[k]]
            p, dropped = pruned[k], dominated[k]
            notes.append(("priced once", f"{s.result.name}'s statement as {choices[k][0].writes.name}'s"))
        else:
            p = Pruned()
            got, dropped = _choices(sub, space, act, s.result, settings, p, dominance, tick)
            first[shape] = i
        if not got:
            raise UsageError(
                f"no choice of {s.result.name}'s statement fits: its parameters alone exceed "
                f"{size_text(settings.cap)} on every assignment",
                span=getattr(s, "span", None),
                source=prog.source,
            )
        choices.append(got), pruned.append(p), dominated.append(dropped)
    return subs, choices, pruned, dominated


class Moves:
    """The seconds of moving a tensor from one layout to another: the fastest redistribution on the chip,
    priced under the overlap policy, for one search. A source's redistributions are one search of its layout
    space, resumed for each target (:func:`shardalg.costs.ranking.reshardings`), and a pair is priced once
    however many edges it is on (Q's, K's and V's projections read one input in the same layouts)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._searches: dict[tuple, Reshardings] = {}  # (name, layout) -> the source's searches
        self._seconds: dict[tuple, float] = {}  # (name, layout, target layout) -> seconds

    def __call__(self, src: Tensor, dst: Tensor) -> float:
        key = (src.name, layout_key(src), layout_key(dst))
        got = self._seconds.get(key)
        if got is None:
            got = self._seconds[key] = self._price(src, dst)
        return got

    def _price(self, src: Tensor, dst: Tensor) -> float:
        st = self.settings
        source = (src.name, layout_key(src))
        moves = self._searches.get(source)
        if moves is None:
            moves = self._searches[source] = reshardings(src, st.mesh, st.sizes, hw=st.chip)
        try:
            plans = moves.to(dst.replace(name=src.name), limit=1)
        except NoPlan as e:  # pragma: no cover - every layout of the space is reachable from every other
            raise UsageError(f"no redistribution moves {src} to {dst}: {e}") from None
        if not plans:
            raise UsageError(f"no redistribution found from {src} to {dst}")  # pragma: no cover
        cost = plan_cost(plans[0], st.mesh, st.sizes, hw=st.chip, overlap=st.policy)
        seconds = cost.evaluate(cost.light("total"))
        if seconds is None:  # pragma: no cover - every size is bound
            raise UsageError(f"the redistribution of {src} is symbolic: bind every size")
        return float(seconds)


def _edges(left: list[Choice], right: list[Choice], moves: Moves, tick: Ticks) -> dict[tuple, float]:
    """The seconds of each pair of a layout ``left`` writes and another ``right`` reads: the fastest
    redistribution, and in training the gradient's way back too (``tick`` once a pair)."""
    outs = {layout_key(c.writes): c.writes for c in left}
    ins = {layout_key(c.reads): c.reads for c in right}
    back = moves.settings.mode == "train"  # the gradient's way back
    out: dict[tuple, float] = {}
    for ka, a in outs.items():
        for kb, b in ins.items():
            if ka != kb:
                out[(ka, kb)] = moves(a, b) + (moves(b, a) if back else 0.0)
            tick()
    return out


def edge_tables(
    sides: list[tuple[list[Choice], list[Choice]]], settings: Settings, tick: Ticks, what: str
) -> list[dict[tuple, float]]:
    """Each edge's table (:func:`_edges`) for the choices on its two sides, a pair of layouts on several edges
    priced once (:class:`Moves`); ``tick`` counts the pairs after growing its total by them. Refused up front,
    naming ``what`` (the chain, the graph), over :data:`MAX_EDGE_PAIRS` layout pairs in all."""
    count = sum(
        len({layout_key(c.writes) for c in a}) * len({layout_key(c.reads) for c in b}) for a, b in sides
    )
    if count > MAX_EDGE_PAIRS:
        raise UsageError(
            f"the {what} has {count:,} layout pairs on its edges, over the limit of {MAX_EDGE_PAIRS:,} "
            "(MAX_EDGE_PAIRS)",
            fix="use fewer mesh axes or fewer statements",
        )
    tick.grow(count)
    moves = Moves(settings)
    return [_edges(a, b, moves, tick) for a, b in sides]


def chain_problem(
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
) -> ChainProblem:
    """Every statement's choices and the edges between them (see the module's doc); :func:`.chainsolve.
    search_chain` solves it. ``dominance=False`` keeps the dominated choices (the tests' oracle);
    ``progress(done, total)`` is called as assignments are priced (total: the spaces of the statements
    priced, one of each shape: a statement of a shape priced before takes its choices renamed), then as the
    edges' layout pairs are (the total grows by their count then)."""
    prog, whole, settings, notes = prepare_search(
        program,
        mesh,
        sizes,
        hw,
        memory,
        mode,
        optimizer,
        remat,
        overlap,
        "applied to each statement and each resharding on its own",
    )
    chosen_mode = settings.mode
    links = _links(prog)
    tick = Ticks(progress)
    subs, choices, pruned, dominated = _statement_choices(
        prog, links, whole.batch_dims, settings, dominance, tick, notes
    )
    edges = edge_tables(list(zip(choices, choices[1:], strict=False)), settings, tick, "chain")
    notes.append(
        (
            "objective",
            "the sum of each statement's step seconds (each priced alone under the overlap "
            "policy) and each resharding's; under steady this is not the whole layer's max over terms",
        )
    )
    notes.append(
        (
            "memory cap",
            "a knapsack on parameter bytes per device"
            + (" with gradients and optimizer state" if chosen_mode == "train" else "")
            + "; activations and transients are not in it",
        )
    )
    if chosen_mode == "train":
        notes.append(
            (
                "gathered",
                "each statement's backward gathers the forward's gathered copies again (the knapsack "
                "cannot hold the copies a backward would keep)",
            )
        )
    return ChainProblem(prog, subs, choices, edges, settings, pruned, dominated, notes)
