"""Costs as closed-form sympy expressions: communication models, compute, HBM traffic, and plan totals.

    >>> from shardalg import Mesh, Op, Tensor, Dim
    >>> from shardalg.costmodel import collective_cost
    >>> a = Tensor("A", (Dim("E", ("Y",)), Dim("F")))
    >>> collective_cost(Op.ALL_GATHER, a, ("Y",), Mesh(X=8, Y=None)).total()
    Max(2*E*F/W_ici, T_min*Y/2)

Every formula is built over the positive symbols of :mod:`shardalg.symbols` (``W_ici``, ``T_min``, ``C``,
``W_hbm``, ``alpha``, ``beta``, ``W_dcn``, axis sizes, link counts M, dim sizes); a chip's numbers come in
only by substitution (:meth:`PlanCost.seconds`). The models are the two of DESIGN.md section 5:

``ici`` (the book's torus)
    AllGather / ReduceScatter of V bytes over the axes A_i: ``max(T_min·Σ hops_i, V / Σ rate_i)``; a ring
    (wraparound) axis has ``|X|/2`` hops and rate ``W_ici·M``; a line has ``|X| − 1`` hops and rate
    ``W_ici·M·(1/2)·|X|/(|X| − 1)`` (one-way links, ``(|X|−1)·(V/|X|)/W_one_way``). AllReduce is
    ReduceScatter + AllGather. AllToAll: ``V·max_i(|X_i|/rate_i)/(4·N)`` (``V/(4·W_ici)`` on one ring).
    Permute: one shard S per device, hop by hop over the longest path: ``Σ hops_i·S/(rate_i/2)``.
``alpha-beta`` (seed 003, a GPU switch)
    ring AllGather / ReduceScatter ``(n−1)·α + (n−1)/n·V/β``; AllReduce = ReduceScatter + AllGather;
    AllToAll (pairwise exchange) ``(n−1)·α + (n−1)/n²·V/β``; Permute ``α + S/β``.
``alpha-beta-rd``
    as ``alpha-beta`` but AllReduce by recursive doubling, ``log2(n)·(α + V/β)`` (not RS + AG).

V is the bytes of the array as one gather group sees it: dims sharded on other axes count at their local size.
Slice and a local einsum communicate nothing; an einsum costs 2·Π(local dim sizes) FLOPs at C FLOP/s and
reads and writes its operands' local bytes at W_hbm. Mesh axes listed in ``dcn_axes`` run over the
data-center network at ``W_dcn`` per chip (no hop latency term).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

import sympy
from sympy import Expr, Integer, Max, Rational

from .errors import UsageError
from .hardware import MODELS, Chip, as_chip
from .legality import as_sizes, check_or_raise, context_for, product_dims, value_of
from .mesh import Mesh, as_mesh
from .plan import Plan, Step
from .symbols import dim_size, links, quantity
from .syntax import Arrow, Collective, DType, Node, Op, Product, Program, Tensor

__all__ = [
    "Link", "CommCost", "StepCost", "PlanCost", "FORMULAS", "group_bytes", "collective_cost",
    "einsum_flops", "step_cost", "plan_cost", "plan_of", "cost",
]  # fmt: skip

DEFAULT_DTYPE = DType.BF16
# The model's structural constants (not hardware numbers; those live in shardalg.hardware).
ONE_WAY = Rational(1, 2)  # one direction of a bidirectional link carries half of W_ici
RING_HOPS = Rational(1, 2)  # a bidirectional ring reaches every device in |X|/2 hops
ALL_TO_ALL_SHARE = Rational(1, 4)  # AllToAll moves a quarter of AllGather's bytes (seed 000, note 5)
FLOPS_PER_MAC = 2  # one multiply and one add

W_ICI, W_DCN, W_HBM = quantity("W_ici"), quantity("W_dcn"), quantity("W_hbm")
T_MIN, ALPHA, BETA, FLOPS = quantity("T_min"), quantity("alpha"), quantity("beta"), quantity("C")


@dataclass(frozen=True)
class Link:
    """One mesh axis as a collective sees it: size, link multiplicity M, ring or line, ICI or DCN."""

    name: str
    size: Expr
    links: Expr
    wraps: bool
    dcn: bool = False

    @property
    def hops(self) -> Expr:
        if self.dcn:
            return Integer(0)
        return self.size * RING_HOPS if self.wraps else self.size - 1

    @property
    def rate(self) -> Expr:
        """Bidirectional bandwidth out of one device along this axis."""
        return W_DCN if self.dcn else W_ICI * self.links

    @property
    def gather_rate(self) -> Expr:
        """Effective bandwidth of a gather along this axis: the ring's, or the line's one-way share."""
        if self.wraps or self.dcn:
            return self.rate
        return self.rate * ONE_WAY * self.size / (self.size - 1)


@dataclass(frozen=True)
class CommCost:
    """A collective's time as parts (latency, bandwidth); ``overlapped`` parts cost max(l, b), else l + b.
    A composed collective (AllReduce = ReduceScatter + AllGather) has one part per phase."""

    parts: tuple[tuple[Expr, Expr], ...]
    overlapped: bool

    def total(self, latency: bool = True) -> Expr:
        if not latency:
            return sympy.Add(*(b for _, b in self.parts))
        join = Max if self.overlapped else sympy.Add
        return sympy.Add(*(join(lat, b) for lat, b in self.parts))

    @property
    def latency(self) -> Expr:
        return sympy.Add(*(lat for lat, _ in self.parts))

    @property
    def bandwidth(self) -> Expr:
        return sympy.Add(*(b for _, b in self.parts))

    def __add__(self, other: CommCost) -> CommCost:
        return CommCost(self.parts + other.parts, self.overlapped and other.overlapped)


ZERO = CommCost(((Integer(0), Integer(0)),), True)
Formula = Callable[[Expr, tuple[Link, ...]], CommCost]


def _size(group: tuple[Link, ...]) -> Expr:
    return sympy.Mul(*(g.size for g in group))


# ---- ici: the book's torus -------------------------------------------------------------------------
def _ici_gather(v: Expr, group: tuple[Link, ...]) -> CommCost:
    hops = sympy.Add(*(g.hops for g in group))
    return CommCost(((T_MIN * hops, v / sympy.Add(*(g.gather_rate for g in group))),), True)


def _ici_all_to_all(v: Expr, group: tuple[Link, ...]) -> CommCost:
    worst = Max(*(g.size / (g.rate if g.wraps else g.rate * ONE_WAY) for g in group))
    hops = sympy.Add(*(g.hops for g in group))
    return CommCost(((T_MIN * hops, v * ALL_TO_ALL_SHARE * worst / _size(group)),), True)


def _ici_permute(shard: Expr, group: tuple[Link, ...]) -> CommCost:
    hops = sympy.Add(*(g.hops for g in group))
    moving = sympy.Add(*(g.hops * shard / (g.rate * ONE_WAY) for g in group))
    return CommCost(((T_MIN * hops, moving),), True)


# ---- alpha-beta: seed 003's switch -----------------------------------------------------------------
def _beta(group: tuple[Link, ...]) -> Expr:
    return W_DCN if any(g.dcn for g in group) else BETA


def _ab_ring(v: Expr, group: tuple[Link, ...]) -> CommCost:
    n = _size(group)
    return CommCost((((n - 1) * ALPHA, (n - 1) / n * v / _beta(group)),), False)


def _ab_recursive_doubling(v: Expr, group: tuple[Link, ...]) -> CommCost:
    steps = sympy.log(_size(group), 2)
    return CommCost(((steps * ALPHA, steps * v / _beta(group)),), False)


def _ab_all_to_all(v: Expr, group: tuple[Link, ...]) -> CommCost:
    n = _size(group)
    return CommCost((((n - 1) * ALPHA, (n - 1) / n**2 * v / _beta(group)),), False)


def _ab_permute(shard: Expr, group: tuple[Link, ...]) -> CommCost:
    return CommCost(((ALPHA, shard / _beta(group)),), False)


# model -> op -> a formula, or a tuple of ops whose costs add up (AllReduce = ReduceScatter + AllGather)
_RS_AG = (Op.REDUCE_SCATTER, Op.ALL_GATHER)
FORMULAS: dict[str, dict[Op, Formula | tuple[Op, ...]]] = {
    "ici": {
        Op.ALL_GATHER: _ici_gather, Op.REDUCE_SCATTER: _ici_gather, Op.ALL_REDUCE: _RS_AG,
        Op.ALL_TO_ALL: _ici_all_to_all, Op.PERMUTE: _ici_permute,
    },
    "alpha-beta": {
        Op.ALL_GATHER: _ab_ring, Op.REDUCE_SCATTER: _ab_ring, Op.ALL_REDUCE: _RS_AG,
        Op.ALL_TO_ALL: _ab_all_to_all, Op.PERMUTE: _ab_permute,
    },
    "alpha-beta-rd": {
        Op.ALL_GATHER: _ab_ring, Op.REDUCE_SCATTER: _ab_ring, Op.ALL_REDUCE: _ab_recursive_doubling,
        Op.ALL_TO_ALL: _ab_all_to_all, Op.PERMUTE: _ab_permute,
    },
}  # fmt: skip
assert set(FORMULAS) == set(MODELS)

# Whether V counts the op's own axes at full size (the array as the gather group sees it) or is the
# local buffer each device holds (ReduceScatter and AllReduce start from full-size partial sums).
GROUP_VIEW: dict[Op, bool] = {
    Op.ALL_GATHER: True, Op.ALL_TO_ALL: True, Op.REDUCE_SCATTER: False, Op.ALL_REDUCE: False,
    Op.PERMUTE: False, Op.SLICE: False,
}  # fmt: skip


@dataclass(frozen=True)
class Options:
    """Everything a cost depends on besides the step: resolved once per call."""

    mesh: Mesh
    sizes: Mapping[str, int] = field(default_factory=dict)
    chip: Chip | None = None
    model: str = "ici"
    symbolic_links: bool = False
    dcn_axes: tuple[str, ...] = ()
    latency: bool = True
    hbm: tuple[str, ...] | None = None

    @classmethod
    def make(cls, mesh, sizes=None, hw=None, model=None, **kw) -> Options:
        m = as_mesh(mesh)
        if m is None:
            raise UsageError("a cost needs a mesh: pass mesh='X=4,Y=2' (CLI: --mesh X=4,Y=2)")
        chip = as_chip(hw)
        model = model or (chip.model if chip is not None else "ici")
        if model not in FORMULAS:
            raise UsageError(f"unknown communication model {model!r}; known: {', '.join(FORMULAS)}")
        for a in kw.get("dcn_axes", ()):
            m[a]  # noqa: B018 -- raises UnknownAxis for an axis the mesh lacks
        return cls(m, as_sizes(sizes), chip, model, **kw)

    def link(self, name: str) -> Link:
        ax = self.mesh[name]
        wraps = ax.wraps
        if wraps is None:
            wraps = self.chip.wraps(ax.size, ax.links) if self.chip is not None and ax.size is not None else True
        m = links(name) if self.symbolic_links else Integer(ax.links)
        return Link(name, sympy.sympify(self.mesh.size_expr(name)), m, wraps, name in self.dcn_axes)

    def dim(self, d) -> Expr:
        if d.size is not None:
            return Integer(d.size)
        if d.label in self.sizes:
            return Integer(self.sizes[d.label])
        return dim_size(d.label)


def _bytes(t: Tensor, opts: Options, full: Iterable[str] = ()) -> Expr:
    full = set(full)
    elements = sympy.Mul(*(
        opts.dim(d) / sympy.Mul(*(sympy.sympify(opts.mesh.size_expr(a)) for a in d.axes if a not in full))
        for d in t.dims
    ))  # fmt: skip
    width = (t.dtype or DEFAULT_DTYPE).bytes
    return elements * Rational(width.numerator, width.denominator)


def group_bytes(op: Op, tensor: Tensor, axes: Iterable[str], opts: Options) -> Expr:
    """V: the bytes of ``tensor`` as the group of ``op`` over ``axes`` sees it."""
    return _bytes(tensor, opts, axes if GROUP_VIEW.get(op, False) else ())


def _formula(model: str, op: Op, v: Expr, group: tuple[Link, ...]) -> CommCost:
    f = FORMULAS[model][op]
    if isinstance(f, tuple):
        return sum((_formula(model, o, v, group) for o in f[1:]), _formula(model, f[0], v, group))
    return f(v, group)


def collective_cost(op: Op, tensor: Tensor, axes: Iterable[str], mesh, sizes=None, hw=None, model=None,
                    **options) -> CommCost:  # fmt: skip
    """The cost of ``op`` over ``axes`` applied to ``tensor`` (its input) on ``mesh``."""
    opts = Options.make(mesh, sizes, hw, model, **options)
    return _collective(op, tensor, tuple(axes), opts)


def _collective(op: Op, tensor: Tensor, axes: tuple[str, ...], opts: Options) -> CommCost:
    if op in (Op.SLICE, Op.EINSUM):
        return ZERO
    group = tuple(link for link in (opts.link(a) for a in axes) if link.size != 1)
    if not group:
        return ZERO
    return _formula(opts.model, op, group_bytes(op, tensor, axes, opts), group)


def einsum_flops(left: Tensor, right: Tensor, opts: Options) -> Expr:
    """2 × the product of the local sizes of every dim of the einsum (each dim counted once)."""
    local: dict[str, Expr] = {}
    for t in (left, right):
        for d in t.dims:
            if d.label not in local:
                shards = sympy.Mul(*(sympy.sympify(opts.mesh.size_expr(a)) for a in d.axes))
                local[d.label] = opts.dim(d) / shards
    return FLOPS_PER_MAC * sympy.Mul(*local.values())


@dataclass(frozen=True)
class StepCost:
    """One step's share: bytes V its collective moves, its CommCost, FLOPs and HBM bytes, and times."""

    step: Step
    bytes: Expr
    comm: CommCost
    flops: Expr
    hbm_bytes: Expr
    comms: Expr
    compute: Expr
    memory: Expr

    def to_json(self, values: Mapping[sympy.Symbol, float]) -> dict[str, object]:
        from .printing import text

        out: dict[str, object] = {"step": text(self.step.statement()), "op": self.step.op.value,
                                  "axes": list(self.step.axes)}  # fmt: skip
        for key in ("bytes", "flops", "comms", "compute", "memory"):
            expr = getattr(self, key)
            out[key] = str(expr)
            out[key + "_value"] = numeric(expr, values)
        return out


def step_cost(step: Step, opts: Options) -> StepCost:
    zero = Integer(0)
    if step.op is Op.EINSUM:
        left, right = step.inputs
        flops = einsum_flops(left, right, opts)
        moved = (left, right, step.output)
        hbm = sympy.Add(*(_bytes(t, opts) for t in moved if opts.hbm is None or t.name in opts.hbm))
        return StepCost(step, zero, ZERO, flops, hbm, zero, flops / FLOPS, hbm / W_HBM)
    (arg,) = step.inputs
    comm = _collective(step.op, arg, step.axes, opts)
    v = group_bytes(step.op, arg, step.axes, opts) if step.communicates else zero
    return StepCost(step, v, comm, zero, zero, comm.total(opts.latency), zero, zero)


def numeric(expr: Expr, values: Mapping[sympy.Symbol, float]) -> float | None:
    """``expr`` as a float after substituting ``values``; None while any symbol is left."""
    value = sympy.sympify(expr).subs(values)
    return float(value) if not value.free_symbols else None


@dataclass(frozen=True)
class PlanCost:
    """A plan's cost: per-step breakdown and totals (symbolic seconds).

    ``comms``: with ``overlap``, collectives on disjoint mesh axes use disjoint links and run concurrently,
    so it is the max over mesh axes of the time of the collectives using that axis; without, the sum.
    ``total`` is max(compute, comms) with ``overlap`` and compute + comms without. ``memory`` (HBM time)
    is reported separately. ``values`` maps symbols to the chip's numbers; ``seconds`` is ``total`` then.
    """

    steps: tuple[StepCost, ...]
    overlap: bool
    values: Mapping[sympy.Symbol, float]
    model: str

    @cached_property
    def comms(self) -> Expr:
        if not self.overlap:
            return sympy.Add(*(s.comms for s in self.steps))
        per_axis: dict[str, Expr] = {}
        for s in self.steps:
            for a in s.step.axes if s.step.communicates else ():
                per_axis[a] = per_axis.get(a, Integer(0)) + s.comms
        return Max(*per_axis.values()) if per_axis else Integer(0)

    @cached_property
    def comms_serial(self) -> Expr:
        return sympy.Add(*(s.comms for s in self.steps))

    @cached_property
    def flops(self) -> Expr:
        return sympy.Add(*(s.flops for s in self.steps))

    @cached_property
    def compute(self) -> Expr:
        return sympy.Add(*(s.compute for s in self.steps))

    @cached_property
    def memory(self) -> Expr:
        return sympy.Add(*(s.memory for s in self.steps))

    @cached_property
    def total(self) -> Expr:
        return Max(self.compute, self.comms) if self.overlap else self.compute + self.comms

    def term(self, name: str) -> Expr:
        """One of ``comms``, ``compute``, ``memory``, ``total`` by name (the derivations' regimes)."""
        if name not in ("comms", "compute", "memory", "total"):
            raise UsageError(f"a plan cost has comms, compute, memory and total, not {name!r}")
        return getattr(self, name)

    def evaluate(self, expr: Expr) -> float | None:
        return numeric(expr, self.values)

    @property
    def seconds(self) -> float | None:
        return self.evaluate(self.total)

    def latex(self) -> str:
        from .symbols import latex_names

        return sympy.latex(self.total, symbol_names=latex_names())

    def _repr_latex_(self) -> str:
        return f"${self.latex()}$"

    def __repr__(self) -> str:
        return f"PlanCost(total={self.total}, seconds={self.seconds!r}, model={self.model!r})"

    def __str__(self) -> str:
        """Each step with its comms and compute terms, then the total and (on a chip) the seconds."""
        from .printing import text

        lines = [f"{text(s.step.statement())}\n    comms {s.comms}   compute {s.compute}" for s in self.steps]
        lines.append(f"total: {self.total}")
        if self.seconds is not None:
            lines.append(f"seconds: {self.seconds:.6g}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"model": self.model, "overlap": self.overlap, "formula": str(self.total),
                                  "latex": self.latex(), "seconds": self.seconds}  # fmt: skip
        for key in ("comms", "compute", "memory"):
            out[key] = {"formula": str(getattr(self, key)), "seconds": self.evaluate(getattr(self, key))}
        out["steps"] = [s.to_json(self.values) for s in self.steps]
        return out


def plan_cost(plan: Plan, mesh, sizes=None, hw=None, model=None, overlap: bool = True, *,
              latency: bool = True, symbolic_links: bool = False, dcn_axes: Iterable[str] = (),
              hbm: Iterable[str] | None = None) -> PlanCost:  # fmt: skip
    """The symbolic cost of every step of ``plan`` and its totals.

    ``hw``: a Chip or preset name, whose numbers give ``seconds`` and whose wraparound rule and default model
    apply; ``model``: ``"ici"``, ``"alpha-beta"`` or ``"alpha-beta-rd"``; ``latency=False`` keeps only
    bandwidth terms (the bandwidth-bound regime of the book's derivations); ``symbolic_links`` writes each
    axis's link count as the symbol M_X; ``dcn_axes`` run over DCN; ``hbm`` restricts HBM traffic to the
    named tensors (e.g. the weights, in the book's decode accounting), default every einsum operand and result.
    """
    opts = Options.make(mesh, sizes, hw, model, symbolic_links=symbolic_links, dcn_axes=tuple(dcn_axes),
                        latency=latency, hbm=None if hbm is None else tuple(hbm))  # fmt: skip
    steps = tuple(step_cost(s, opts) for s in plan.steps)
    values = opts.chip.values() if opts.chip is not None else {}
    return PlanCost(steps, overlap, values, opts.model)


# ---- programs in the notation as plans --------------------------------------------------------------
def plan_of(node: Node, mesh=None, sizes=None) -> Plan:
    """The explicit plan a program (or one statement) spells out: one step per collective and product,
    inner expressions first. Checks legality first; a bare resharding request (``A[I_X] -> A[I_Y]``)
    has no steps of its own and is a UsageError (plan it with the planner)."""
    check_or_raise(node, mesh, sizes)
    ctx = context_for(node, mesh, sizes)
    statements = node.statements if isinstance(node, Program) else (node,)
    steps: list[Step] = []
    produced: set[Tensor] = set()
    leaves: list[Tensor] = []

    def emit(expr: Node, result: Tensor | None) -> Tensor:
        if isinstance(expr, Tensor):
            if expr not in produced and expr not in leaves:
                leaves.append(expr)
            return expr
        if isinstance(expr, Collective):
            arg = emit(expr.arg, None)
            out = result or value_of(Collective(expr.op, expr.axes, arg, expr.dim), ctx)
            steps.append(Step(expr.op, (arg,), out, expr.axes, expr.dim))
        elif isinstance(expr, Product):
            left, right = emit(expr.left, None), emit(expr.right, None)
            out = result or value_of(Product(left, right, expr.contract, expr.local), ctx, result)
            contracted, _ = product_dims(left, right, expr.contract, result)
            steps.append(Step(Op.EINSUM, (left, right), out, contract=contracted, local=expr.local))
        else:
            raise UsageError(f"cannot cost a {type(expr).__name__}")
        produced.add(out)
        return out

    for s in statements:
        if isinstance(s, Arrow) and isinstance(s.expr, Tensor):
            raise UsageError("a resharding request has no steps to cost: plan it first (shardalg plan)")
        if isinstance(s, Tensor):
            continue
        expr, result = (s.expr, s.result) if isinstance(s, Arrow) else (s, None)
        emit(expr, result)
    if not steps:
        raise UsageError("nothing to cost: write a collective or a product, e.g. AllGather_X(A[I_X, J])")
    return Plan(tuple(leaves), tuple(steps), steps[-1].output)


def cost(x: Plan | Node | str, mesh=None, sizes=None, hw=None, model=None, overlap: bool = True,
         **options) -> PlanCost:  # fmt: skip
    """The cost of a plan, a program, a statement or notation text (``"AllGather_X(bf16[B_X, D_Y])"``).
    The mesh and sizes may come from the program's ``mesh`` line and ``where`` clause."""
    if isinstance(x, str):
        from .parse import parse

        x = parse(x)
    if isinstance(x, Plan):
        return plan_cost(x, mesh, sizes, hw, model, overlap, **options)
    if not isinstance(x, Node):
        raise UsageError(f"cost takes a plan, a program or notation text, not {type(x).__name__}")
    ctx = context_for(x, mesh, sizes)
    if ctx.mesh is None:
        raise UsageError("a cost needs a mesh: pass mesh='X=4,Y=2' or write 'mesh X=4, Y=2'")
    return plan_cost(plan_of(x, ctx.mesh, ctx.sizes), ctx.mesh, ctx.sizes, hw, model, overlap, **options)


def step_seconds(mesh, sizes=None, hw=None, model=None, *, latency: bool = True) -> Callable[[Step], float]:
    """A function giving one communication step's seconds on ``hw``: the edge weight of a cost-ranked
    redistribute search (steps add up: serial time). Memoized per step; a symbol left unbound is an error."""
    opts = Options.make(mesh, sizes, hw, model, latency=latency)
    if opts.chip is None:
        raise UsageError("ranking by seconds needs a chip: pass hw='tpu-v5e' (CLI: --hw tpu-v5e)")
    values = opts.chip.values()
    memo: dict[Step, float] = {}

    def seconds(step: Step) -> float:
        got = memo.get(step)
        if got is None:
            value = numeric(step_cost(step, opts).comms, values)
            if value is None:
                raise UsageError(f"ranking by seconds needs every size bound: {step.statement()} is symbolic")
            got = memo[step] = value
        return got

    return seconds
