"""Costs of single steps as closed-form sympy expressions: communication models, compute, HBM traffic.

    >>> from shardalg import Mesh, Op, Tensor, Dim
    >>> from shardalg.costs.stepcost import collective_cost
    >>> a = Tensor("A", (Dim("E", ("Y",)), Dim("F")))
    >>> collective_cost(Op.ALL_GATHER, a, ("Y",), Mesh(X=8, Y=None)).total()
    Max(T_min*Y/2, 2*E*F/W_ici)

Every formula is built over the positive symbols of :mod:`shardalg.algebra.symbols` (``W_ici``, ``T_min``, ``C``,
``W_hbm``, ``alpha``, ``beta``, ``W_dcn``, axis sizes, link counts M, dim sizes); a chip's numbers come in
only by substitution (:meth:`shardalg.costs.plancost.PlanCost.seconds`, where a plan's steps add up). The models
are the two of DESIGN.md section 5:

``ici`` (the book's torus)
    AllGather / ReduceScatter of V bytes over the axes A_i: ``max(T_min·Σ hops_i, V / Σ rate_i)``; a ring
    (wraparound) axis has ``|X|/2`` hops and rate ``W_ici·M``; a line has ``|X| − 1`` hops and rate
    ``W_ici·M·(1/2)·|X|/(|X| − 1)`` (one-way links, ``(|X|−1)·(V/|X|)/W_one_way``). AllReduce is
    ReduceScatter + AllGather. AllToAll: ``V·max_i(|X_i|/rate_i)/(4·N)`` (``V/(4·W_ici)`` on one ring).
    Permute: one shard S per device, hop by hop over the longest path: ``Σ hops_i·S/(rate_i/2)``.
    Shift by k along one axis of n (k' = k mod n; each shard goes whole, the short way round): on a ring
    ``max(T_min·h, h·S/(rate/2))`` with ``h = min(k', n − k')``, the hops of a shard and the shards the
    busiest link carries; on a line the shards that wrap go back across it, so the path is
    ``max(k', n − k')`` hops while the busiest link still carries ``min(k', n − k')`` shards.
``alpha-beta`` (seed 003, a GPU switch)
    ring AllGather / ReduceScatter ``(n−1)·α + (n−1)/n·V/β``; AllReduce = ReduceScatter + AllGather;
    AllToAll (pairwise exchange) ``(n−1)·α + (n−1)/n²·V/β``; Permute and Shift ``α + S/β``.
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

import sympy
from sympy import Expr, Integer, Max, Min, Rational

from shardalg.algebra.context import as_sizes
from shardalg.algebra.mesh import Mesh, as_mesh
from shardalg.algebra.symbols import as_expr, dim_size, links, quantity
from shardalg.errors import UsageError
from shardalg.notation.plan import Step
from shardalg.notation.syntax import DType, Op, Tensor

from .hardware import MODELS, Chip, as_chip

__all__ = [
    "Link", "CommCost", "StepCost", "FORMULAS", "group_bytes", "collective_cost", "einsum_flops", "step_cost",
]  # fmt: skip


DEFAULT_DTYPE = DType.BF16
# The model's structural constants (not hardware numbers; those live in shardalg.costs.hardware).
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


# ---- the ring shift: a shard per device, k hops round a ring or across a line -------------------------------
def _shift_hops(link: Link, offset: int) -> tuple[Expr, Expr]:
    """(the longest path in hops, the shards the busiest link carries) of a shift by ``offset``; with a
    symbolic axis size the offset is taken as smaller than the axis (k' = k, or n + k for k < 0)."""
    n = link.size
    k = Integer(offset % int(n)) if n.is_number else (Integer(offset) if offset > 0 else n + offset)
    near, far = Min(k, n - k), Max(k, n - k)
    if k == 0:
        return Integer(0), Integer(0)
    return (near if link.wraps else far), near


def _ici_shift(shard: Expr, group: tuple[Link, ...], offset: int) -> CommCost:
    (link,) = group
    path, load = _shift_hops(link, offset)
    if link.dcn:  # one message a device over the data-center network
        return CommCost(((Integer(0), shard / W_DCN if load != 0 else Integer(0)),), True)
    return CommCost(((T_MIN * path, load * shard / (link.rate * ONE_WAY)),), True)


def _ab_shift(shard: Expr, group: tuple[Link, ...], offset: int) -> CommCost:
    (link,) = group
    if _shift_hops(link, offset)[1] == 0:
        return ZERO
    return CommCost(((ALPHA, shard / _beta(group)),), False)


SHIFT_FORMULAS: dict[str, Callable[[Expr, tuple[Link, ...], int], CommCost]] = {
    "ici": _ici_shift, "alpha-beta": _ab_shift, "alpha-beta-rd": _ab_shift,
}  # fmt: skip


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
    Op.PERMUTE: False, Op.SHIFT: False, Op.SLICE: False,
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
        return Link(name, as_expr(self.mesh.size_expr(name)), m, wraps, name in self.dcn_axes)

    def dim(self, d) -> Expr:
        if d.size is not None:
            return Integer(d.size)
        if d.label in self.sizes:
            return Integer(self.sizes[d.label])
        return dim_size(d.label)


def _bytes(t: Tensor, opts: Options, full: Iterable[str] = ()) -> Expr:
    full = set(full)
    elements = sympy.Mul(*(
        opts.dim(d) / sympy.Mul(*(as_expr(opts.mesh.size_expr(a)) for a in d.axes if a not in full))
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
                    offset: int | None = None, **options) -> CommCost:  # fmt: skip
    """The cost of ``op`` over ``axes`` applied to ``tensor`` (its input) on ``mesh``; a Shift's ``offset``."""
    opts = Options.make(mesh, sizes, hw, model, **options)
    return _collective(op, tensor, tuple(axes), opts, offset)


def _collective(op: Op, tensor: Tensor, axes: tuple[str, ...], opts: Options, offset: int | None = None) -> CommCost:
    if op in (Op.SLICE, Op.EINSUM):
        return ZERO
    group = tuple(link for link in (opts.link(a) for a in axes) if link.size != 1)
    if not group:
        return ZERO
    if op is Op.SHIFT:
        if offset is None or len(group) != 1:
            raise UsageError("a Shift moves blocks along one axis by an offset: Shift_{X,+1}")
        return SHIFT_FORMULAS[opts.model](group_bytes(op, tensor, axes, opts), group, offset)
    return _formula(opts.model, op, group_bytes(op, tensor, axes, opts), group)


def einsum_flops(left: Tensor, right: Tensor, opts: Options) -> Expr:
    """2 × the product of the local sizes of every dim of the einsum (each dim counted once)."""
    local: dict[str, Expr] = {}
    for t in (left, right):
        for d in t.dims:
            if d.label not in local:
                shards = sympy.Mul(*(as_expr(opts.mesh.size_expr(a)) for a in d.axes))
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
        from shardalg.notation.printing import text

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
    comm = _collective(step.op, arg, step.axes, opts, step.offset)
    v = group_bytes(step.op, arg, step.axes, opts) if step.communicates else zero
    return StepCost(step, v, comm, zero, zero, comm.total(opts.latency), zero, zero)


def numeric(expr: Expr, values: Mapping[sympy.Symbol, float]) -> float | None:
    """``expr`` as a float after substituting ``values``; None while any symbol is left."""
    value = as_expr(expr).subs(values)
    return float(value) if not value.free_symbols else None
