"""Costs of single steps as closed-form expressions: communication models, compute, HBM traffic.

    >>> from shardalg import Mesh, Op, Tensor, Dim
    >>> from shardalg.costs.plancost import collective_cost
    >>> a = Tensor("A", (Dim("E", ("Y",)), Dim("F")))
    >>> collective_cost(Op.ALL_GATHER, a, ("Y",), Mesh(X=8, Y=None)).total()
    Max(T_min*Y/2, 2*E*F/W_ici)

Every formula is built over the positive symbols of :mod:`shardalg.algebra.symbols` (``W_ici``, ``T_min``, ``C``,
``W_hbm``, ``alpha``, ``beta``, ``W_dcn``, axis sizes, link counts M, dim sizes), as light terms
(:mod:`shardalg.costs.terms`: monomials, sums, maxima) that evaluate at a chip's numbers without sympy and
become sympy expressions on demand; a chip's numbers come in only at evaluation
(:meth:`shardalg.costs.plancost.PlanCost.seconds`, where a plan's steps are scheduled). The models are the two
of DESIGN.md section 5:

``ici`` (the book's torus)
    AllGather / ReduceScatter of V bytes over the axes A_i: ``max(T_min·Σ hops_i, V / Σ rate_i)``; a ring
    (wraparound) axis has ``|X|/2`` hops and rate ``W_ici·M``; a line has ``|X| − 1`` hops and rate
    ``W_ici·M·(1/2)·|X|/(|X| − 1)`` (one-way links, ``(|X|−1)·(V/|X|)/W_one_way``), right for one line alone:
    several axes or sides with a line cost at least ``(N − 1)/N·V / Σ in_i`` (what each of N devices receives;
    ``in_i`` into the worst-placed: ``W_ici·M`` on a ring, half at a line's end), lines alone exactly that
    (:func:`_ici_gather`). AllReduce is ReduceScatter + AllGather.
    AllToAll: ``V·max_i(|X_i|/rate_i)/(4·N)`` (``V/(4·W_ici)`` on one ring).
    Permute: one shard S per device, hop by hop over the longest path: ``Σ hops_i·S/(rate_i/2)``.
    Shift by k along one axis, and Send (no wrap-around): :mod:`shardalg.costs.shift`.
``alpha-beta`` (seed 003, a GPU switch)
    ring AllGather / ReduceScatter ``(n−1)·α + (n−1)/n·V/β``; AllReduce = ReduceScatter + AllGather;
    AllToAll (pairwise exchange) ``(n−1)·α + (n−1)/n²·V/β``; Permute ``α + S/β``.
``alpha-beta-rd``
    as ``alpha-beta`` but AllReduce by recursive doubling, ``log2(n)·(α + V/β)`` (not RS + AG).

Two options change the ici counting. ``exact=True`` keeps the ring's (N − 1)/N of a gather's bytes (N the
group's size: what ``jax.experimental.roofline`` counts; the book's V/W drops it; a line already counts it): a
group costs its receive floor. ``ring="uni"`` makes every ring carry data one way only (W_ici/2 per device,
|X| − 1 hops): AllGather costs 2·V/W_ici and AllToAll half of that, V/W_ici, against V/W_ici and V/(4·W_ici)
on a bidirectional ring (the book's chapter 3 counting exercise; seed 000, footnote 5).

V is the bytes of the array as one gather group sees it: dims sharded on other axes count at their local size.
Slice and a local einsum communicate nothing; an einsum costs 2·Π(local dim sizes) FLOPs at C FLOP/s and
reads and writes its operands' local bytes at W_hbm. Mesh axes listed in ``dcn_axes`` (or marked ``dcn``) run
over the data-center network at ``W_dcn`` per chip (no hop latency term). An axis of a real slice knows the
physical torus axes under it (``Axis.torus``): its hops are summed per torus axis (``Σ side/2`` on rings), not
``|X|/2`` over the whole axis.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction

import sympy
from sympy import Expr, Integer, Rational

from shardalg.algebra.context import as_sizes
from shardalg.algebra.factors import parent_of
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.registry import RECORDS, Layer
from shardalg.algebra.subaxes import refine, with_parts
from shardalg.algebra.symbols import axis_size, dim_size, links, quantity
from shardalg.algebra.traffic import DEFAULT_DTYPE
from shardalg.cache import Kind, memoized
from shardalg.errors import UsageError
from shardalg.notation.syntax import Dim, Op, Tensor

from . import terms as tm
from .commcost import (
    NOTHING,
    CommCost,
    Formula,
    ab_all_to_all,
    ab_permute,
    ab_recursive_doubling,
    ab_ring,
    group_size,
)
from .costmodel import CostModel
from .fromsympy import from_sympy
from .hardware import MODELS
from .hierarchy import hierarchical_parts
from .shift import send_unit, shift_unit
from .terms import ZERO, Mono, Term, add, atom_id, const, maximum

__all__ = [
    "Link",
    "CommCost",
    "FORMULAS",
    "group_bytes",
    "Options",
    "unit_cost",
    "UNIT_COSTS",
    "local_bytes",
    "local_size",
    "moved_share",
]


# The model's structural constants (not hardware numbers; those live in shardalg.costs.hardware). They are
# the model's definition, not options: the memos of step costs are keyed by the CostModel and not by these, so
# a test that replaces one (to see a proof fail) clears the caches after it (shardalg.clear_caches()).
ONE_WAY = Rational(1, 2)  # one direction of a bidirectional link carries half of W_ici
RING_HOPS = Rational(1, 2)  # a bidirectional ring reaches every device in |X|/2 hops
ALL_TO_ALL_SHARE = Rational(1, 4)  # AllToAll moves a quarter of AllGather's bytes (seed 000, note 5)
UNI_ALL_TO_ALL_SHARE = Rational(1, 2)  # one way round a ring: each link carries N(N-1)/2 chunks of V/N^2
FLOPS_PER_MAC = 2  # one multiply and one add

W_ICI, W_DCN, W_HBM = quantity("W_ici"), quantity("W_dcn"), quantity("W_hbm")
T_MIN, ALPHA, BETA, FLOPS = quantity("T_min"), quantity("alpha"), quantity("beta"), quantity("C")


def _t(x: object) -> Term:
    """A module constant (a sympy number or symbol) as a term."""
    return tm._coerce(x)


@dataclass(frozen=True)
class Link:
    """One mesh axis as a collective sees it: size, link multiplicity M, ring or line, ICI or DCN, and
    the counting options (``uni``: a ring used one way only; ``exact``: keep the ring's (N − 1)/N)."""

    name: str
    size: Term
    links: Term
    wraps: bool
    dcn: bool = False
    uni: bool = False
    exact: bool = False
    number: int | None = None  # the size when it is a number
    node: int | None = None  # GPU devices per node along the axis (X=64:node8); priced by .hierarchy
    leaf: int | None = None  # GPU devices per leaf switch group along the axis (X=1024:node8:leaf256)
    sides: tuple[tuple[int, bool, int], ...] = ()  # the physical torus axes under the axis (a real slice),
    # whether each wraps and the links one step along it crosses: a collective crosses them side by side
    stride: int = 1  # links one step crosses (a strided factor of a torus axis), shared by as many groups

    def side_links(self) -> tuple[Link, ...]:
        """The torus sides under an axis of a real slice, each as a one-link axis of its own (empty otherwise):
        a collective over the axis is priced as over these sides together."""
        return tuple(
            Link(self.name, const(n), tm.ONE, w, False, self.uni, self.exact, n, stride=k)
            for n, w, k in self.sides
        )

    @property
    def strided(self) -> bool:
        """A side under the axis steps over more than one physical link (a strided factor of a torus axis)."""
        return any(k != 1 for _, _, k in self.sides)

    @property
    def one_way(self) -> bool:
        """Data moves one way along this axis: a line, or a ring used one way."""
        return not self.dcn and (not self.wraps or self.uni)

    @property
    def hops(self) -> Term:
        if self.dcn:
            return ZERO
        if self.sides:  # each physical torus axis is its own ring (or line): hops add up side by side
            return add(*(side.hops for side in self.side_links()))
        if self.stride == 1:
            return self.size * _t(RING_HOPS) if self.wraps and not self.uni else self._less_one()
        # a strided factor (its size a number): floor(n/2) steps round a ring (the book's n/2 for an even n,
        # exact for an odd one, as the slice's hop counts are), each crossing ``stride`` links
        n = self.number if self.number is not None else 0
        steps = n // 2 if self.wraps and not self.uni else n - 1
        return const(steps * self.stride)

    def _less_one(self) -> Term:
        """|X| − 1: a number, or the expression kept whole for a symbolic size."""
        if self.number is not None:
            return const(self.number - 1)
        return tm.mono(axis_size(self.name) - 1)

    @property
    def rate(self) -> Term:
        """Bidirectional bandwidth out of one device along this axis; a strided factor of a torus axis shares
        each link with the other groups whose steps cross it (``stride`` of them), so it gets W_ici/stride."""
        if self.dcn:
            return _t(W_DCN)
        return _t(W_ICI) * self.links / const(self.stride) if self.stride != 1 else _t(W_ICI) * self.links

    @property
    def gather_rate(self) -> Term:
        """Effective bandwidth of a gather along this axis: the ring's, or the one-way share of a line or a
        one-way ring (a line's (|X| − 1)/|X| is kept here unless ``exact`` counts it for the whole group)."""
        if self.sides:
            return add(*(side.gather_rate for side in self.side_links()))
        if not self.one_way:
            return self.rate
        if self.exact or self.wraps:
            return self.rate * _t(ONE_WAY)
        return self.rate * _t(ONE_WAY) * self.size / self._less_one()

    @property
    def spread_rate(self) -> Term:
        """Bandwidth of an AllToAll along this axis, and into a gather's worst-placed device: both ways on a
        ring, one way on a line (its end has one neighbour) or one-way ring."""
        return self.rate * _t(ONE_WAY) if self.one_way else self.rate


def _exact_share(group: tuple[Link, ...]) -> Term:
    """(N − 1)/N of the group's N devices: a number, or the expression kept whole."""
    if all(g.number is not None for g in group):
        n = 1
        for g in group:
            n *= g.number  # type: ignore[operator]
        return const(Fraction(n - 1, n))
    n_sym = sympy.Mul(*(axis_size(g.name) if g.number is None else g.number for g in group))
    return tm.mono((n_sym - 1) / n_sym)


def moved_share(op: Op, axes: tuple[str, ...], opts: Options) -> Term:
    """The share of V a step's ring moves: (N − 1)/N for a gather, a scatter or their sum (an AllReduce)
    when ``exact`` counts it on the ici model, else 1 (the book's V)."""
    if (
        not opts.costs.exact
        or opts.costs.model != "ici"
        or op not in (Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALL_REDUCE)
    ):
        return tm.ONE
    group = tuple(link for link in (opts.link(a) for a in axes) if link.number != 1)
    return _exact_share(group) if group else tm.ONE


def _split(moved: Term, rates: list[Term], group: tuple[Link, ...]) -> tuple[tuple[str, Term], ...]:
    """Each axis's share of ``moved`` bytes, in proportion to its rate."""
    total = add(*rates)
    return tuple((g.name, moved * r / total) for g, r in zip(group, rates, strict=True))


# ---- ici: the book's torus -------------------------------------------------------------------------
def _ici_gather(v: Term, group: tuple[Link, ...]) -> CommCost:
    """The book's ``V / Σ gather_rate_i``, held at ``(N − 1)/N·V / Σ in_i`` (what each device receives, the
    worst-placed over ``in_i``) when a line is among several axes or sides: lines alone cost this floor (above
    the folded sum: (N − 1)/N >= (|X_i| − 1)/|X_i|), ring + line the larger: the book's count where physical
    (its dropped (N − 1)/N over-prices, as on rings), the floor where a line's folded rate beats physics (N is
    the group's: no (N − 1)/N is the line's). The split is the binding term's (the book's if both stay)."""
    latency = _t(T_MIN) * add(*(g.hops for g in group))
    sides = [g.side_links() or (g,) for g in group]  # the physical axes under each mesh axis
    parts, lines = sum(map(len, sides)), sum(1 for s in sides for p in s if not p.wraps and not p.dcn)
    moved, rates = v, [g.gather_rate for g in group]
    time = moved / add(*rates)
    if group[0].exact or (lines and parts > 1):  # in_i: both ways on a ring, one way at a line's end
        floor_moved, floor_rates = v * _exact_share(group), [add(*(p.spread_rate for p in s)) for s in sides]
        floor = floor_moved / add(*floor_rates)
        time = floor if group[0].exact or lines == parts else maximum(time, floor)
        moved, rates = (floor_moved, floor_rates) if time == floor else (moved, rates)
    return CommCost(((latency, time),), True, _split(moved, rates, group))


def _spread(g: Link) -> Term:
    """|X| over an AllToAll's rate along the axis; on an axis of a real slice, its longest torus side over one
    side's rate (the physical axes under it are crossed side by side, as separate mesh axes would be)."""
    if g.sides:
        return maximum(*(side.size / side.spread_rate for side in g.side_links()))
    return g.size / g.spread_rate


def _ici_all_to_all(v: Term, group: tuple[Link, ...]) -> CommCost:
    worst = maximum(*(_spread(g) for g in group))
    hops = add(*(g.hops for g in group))
    uni = any(g.uni and g.wraps for g in group)
    share = _t(UNI_ALL_TO_ALL_SHARE if uni else ALL_TO_ALL_SHARE)
    if uni and group[0].exact:
        share = share * _exact_share(group)
    moved = v * share * worst / group_size(group)
    rates = [g.spread_rate for g in group]
    return CommCost(((_t(T_MIN) * hops, moved),), True, _split(moved * add(*rates), rates, group))


def _moving(g: Link, shard: Term) -> Term:
    """A shard's time hop by hop along an axis: over its whole path at the axis's rate; on an axis of a real
    slice, side by side, each side's hops over one side's link."""
    if g.sides:
        return add(*(_moving(side, shard) for side in g.side_links()))
    return g.hops * shard / (g.rate * _t(ONE_WAY))


def _ici_permute(shard: Term, group: tuple[Link, ...]) -> CommCost:
    hops = add(*(g.hops for g in group))
    moving = add(*(_moving(g, shard) for g in group))
    return CommCost(((_t(T_MIN) * hops, moving),), True, tuple((g.name, g.hops * shard) for g in group))


# model -> op -> a formula, or a tuple of ops whose costs add up (AllReduce = ReduceScatter + AllGather)
_RS_AG = (Op.REDUCE_SCATTER, Op.ALL_GATHER)
FORMULAS: dict[str, dict[Op, Formula | tuple[Op, ...]]] = {
    "ici": {
        Op.ALL_GATHER: _ici_gather,
        Op.REDUCE_SCATTER: _ici_gather,
        Op.ALL_REDUCE: _RS_AG,
        Op.ALL_TO_ALL: _ici_all_to_all,
        Op.PERMUTE: _ici_permute,
    },
    "alpha-beta": {
        Op.ALL_GATHER: ab_ring,
        Op.REDUCE_SCATTER: ab_ring,
        Op.ALL_REDUCE: _RS_AG,
        Op.ALL_TO_ALL: ab_all_to_all,
        Op.PERMUTE: ab_permute,
    },
    "alpha-beta-rd": {
        Op.ALL_GATHER: ab_ring,
        Op.REDUCE_SCATTER: ab_ring,
        Op.ALL_REDUCE: ab_recursive_doubling,
        Op.ALL_TO_ALL: ab_all_to_all,
        Op.PERMUTE: ab_permute,
    },
}
assert set(FORMULAS) == set(MODELS)


@dataclass(frozen=True, eq=False)
class Options:
    """Everything a cost depends on besides the step: the mesh, the dim sizes and the :class:`CostModel`
    (chip, communication model, counting options), resolved once per call. A value: equal and hashed by
    those three, so the memos of step costs are keyed by it (:func:`Options.of` shares equal ones)."""

    mesh: Mesh
    sizes: Mapping[str, int]
    costs: CostModel
    key: tuple = field(init=False, repr=False)  # (mesh, sizes as sorted items, costs): what equality reads
    hashed: int = field(init=False, repr=False)  # hash(key), made once: every memo of a step's cost hashes it
    links: Mapping[str, Link] = field(init=False, repr=False)  # each mesh axis as a collective sees it
    values: Mapping[sympy.Symbol, float] = field(init=False, repr=False)  # the chip's numbers (empty without)
    point: tm.Point = field(init=False, repr=False)  # the chip's numbers keyed for evaluating terms

    def __post_init__(self) -> None:
        if self.mesh is None:
            raise UsageError("a cost needs a mesh: pass mesh='X=4,Y=2' (CLI: --mesh X=4,Y=2)")
        for a in self.costs.dcn_axes:
            self.mesh[a]  # noqa: B018 -- raises UnknownAxis for an axis the mesh lacks
        chip = self.costs.chip
        values = chip.values() if chip is not None else {}
        setattr_ = object.__setattr__
        setattr_(self, "key", (self.mesh, tuple(sorted(self.sizes.items())), self.costs))
        setattr_(self, "hashed", hash(self.key))
        setattr_(self, "links", {name: self._link(name) for name in self.mesh.names})
        setattr_(self, "values", values)
        setattr_(self, "point", tm.point(values))

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, Options) and self.key == other.key)

    def __hash__(self) -> int:
        return self.hashed

    @classmethod
    def of(cls, costs: CostModel, mesh: Mesh | None, sizes: object = None) -> Options:
        """The options of ``costs`` on ``mesh`` (a Mesh: its text is read at the edges, by the public
        functions) with ``sizes``: equal calls share one."""
        if not isinstance(mesh, Mesh):
            raise UsageError("a cost needs a mesh: pass mesh='X=4,Y=2' (CLI: --mesh X=4,Y=2)")
        sz = as_sizes(sizes)
        try:
            return _made(costs, mesh, tuple(sorted(sz.items())))
        except TypeError:  # an unhashable part (a user's chip with mutable parts): not shared
            return cls(mesh, dict(sz), costs)

    def _link(self, name: str) -> Link:
        ax, costs = self.mesh[name], self.costs
        wraps = ax.wraps
        whole = self.mesh[parent_of(name)] if ":" in name and parent_of(name) in self.mesh else ax
        sides = tuple(  # a real slice: the chip's rule per side (a ring when nothing says otherwise)
            (n, _side_wraps(n, k, side, wraps, costs), k)
            for n, (k, side) in zip(ax.torus, ax.strides or tuple((1, n) for n in ax.torus), strict=True)
        )
        if sides:
            wraps = all(w for _, w, _ in sides)
        if wraps is None:  # the chip's rule, read on the whole axis (a sub-axis is on its parent's ring)
            wraps = (
                costs.chip.wraps(whole.size, whole.links)
                if costs.chip is not None and whole.size is not None
                else True
            )
        parent = parent_of(name)  # a sub-axis runs on its parent's links (over DCN when the parent does)
        m = tm.mono(links(parent)) if costs.symbolic_links else const(ax.links)
        size = tm.mono(axis_size(name)) if ax.size is None else const(ax.size)
        dcn = ax.dcn or name in costs.dcn_axes or parent in costs.dcn_axes
        return Link(
            name, size, m, wraps, dcn, costs.ring == "uni", costs.exact, ax.size, ax.node, ax.leaf, sides
        )

    def link(self, name: str) -> Link:
        got = self.links.get(name)
        return got if got is not None else self._link(name)  # an axis the mesh lacks: raises UnknownAxis

    def dim(self, d) -> Expr:
        if d.size is not None:
            return Integer(d.size)
        if d.label in self.sizes:
            return Integer(self.sizes[d.label])
        return dim_size(d.label)


def _side_wraps(n: int, stride: int, side: int, wraps: bool | None, costs: CostModel) -> bool:
    """Whether a torus side of ``n`` chips, each step ``stride`` links along a physical side of ``side`` chips,
    is a ring: it spans the whole physical side (``n·stride == side``) and that side wraps (the axis's own
    ring or line, else the chip's rule, else a ring). A factor with a pre-size above 1 is a line."""
    if n * stride != side:
        return False
    if wraps is not None:
        return wraps
    return costs.chip.wraps(side) if costs.chip is not None else True


@memoized(Kind.PIECE)
def _made(costs: CostModel, mesh: Mesh, sizes: tuple[tuple[str, int], ...]) -> Options:
    return Options(mesh, dict(sizes), costs)


def local_bytes(t: Tensor, opts: Options, full: Iterable[str] = ()) -> Term:
    """The local bytes of ``t`` (axes in ``full`` counted at full size), built as one monomial."""
    return local_size(t.dims, opts, (t.dtype or DEFAULT_DTYPE).bytes, full)


def local_size(
    dims: Iterable[Dim], opts: Options, scale: int | Fraction = 1, full: Iterable[str] = ()
) -> Mono:
    """``scale`` × the product of the local sizes of ``dims`` (axes in ``full`` counted at full size), built
    as one monomial."""
    num, den = scale.numerator, scale.denominator
    powers: dict[int, int] = {}
    sizes, mesh = opts.sizes, opts.mesh
    for d in dims:
        if d.size is not None:
            num *= d.size
        elif d.label in sizes:
            num *= sizes[d.label]
        else:
            i = atom_id(dim_size(d.label))
            powers[i] = powers.get(i, 0) + 1
        for a in d.axes:
            if a in full:
                continue
            n = mesh[a].size
            if n is not None:
                den *= n
            else:
                i = atom_id(axis_size(a))
                powers[i] = powers.get(i, 0) - 1
    coeff = num // den if num % den == 0 else Fraction(num, den)
    return Mono(coeff, tuple(sorted((i, k) for i, k in powers.items() if k != 0)))


def group_bytes(op: Op, tensor: Tensor, axes: Iterable[str], opts: Options) -> Term:
    """V: the bytes of ``tensor`` as the group of ``op`` over ``axes`` sees it (a sub-axis of the tensor
    that lies inside ``axes`` counts as gathered too)."""
    if not RECORDS[op].group_view:
        return local_bytes(tensor, opts, ())
    seen, full = group_view(tensor, tuple(axes), opts.mesh)
    return local_bytes(seen, opts, full)


def group_view(tensor: Tensor, axes: tuple[str, ...], mesh: Mesh) -> tuple[Tensor, tuple[str, ...]]:
    """``tensor`` as the group of a collective over ``axes`` sees it, and the axes it counts at full size
    (:func:`with_parts`). A whole axis of the tensor that ``axes`` names a part of is first written as its
    parts: ``AllGather_{X:(2)2}`` of ``K[S_X]`` on X=4 gathers 2 of X's 4 shards, so V is a quarter of K
    times 2, not a quarter."""
    cut = [a for a in axes if ":" in a and parent_of(a) in tensor.sharded_axes]
    if cut:
        tensor = refine(mesh, cut).expand(tensor)
    return tensor, with_parts(tensor.sharded_axes, axes, mesh)


def _formula(model: str, op: Op, v: Term, group: tuple[Link, ...]) -> CommCost:
    f = FORMULAS[model][op]
    if isinstance(f, tuple):
        return sum((_formula(model, o, v, group) for o in f[1:]), _formula(model, f[0], v, group))
    return f(v, group)


# (op, axes, options, a Shift's offset) -> the cost for V = 1 byte (None when the op communicates nothing)
UnitCost = Callable[[Op, tuple[str, ...], "Options", int | None], "CommCost | None"]
UNIT_COSTS: Layer[UnitCost] = Layer(
    "the cost model (shardalg.costs)", fix="register the op's cost for V = 1 byte: @UNIT_COSTS.register(op)"
)


def unit_cost(op: Op, axes: tuple[str, ...], opts: Options, offset: int | None = None) -> CommCost | None:
    """The cost of ``op`` over ``axes`` for V = 1 byte (None when it communicates nothing): every formula
    is linear in V, so it is worked out once per (op, axes, a Shift's offset) and scaled. Each op's method
    is registered on :data:`UNIT_COSTS`; an op without one is refused, naming the cost model."""
    return UNIT_COSTS.lookup(op)(op, axes, opts, offset)


@UNIT_COSTS.register(Op.SLICE, Op.EINSUM)
def _free(op: Op, axes: tuple[str, ...], opts: Options, offset: int | None) -> None:
    return None


@UNIT_COSTS.register(*(op for op in Op if op.function))
def _function_unit(op: Op, axes: tuple[str, ...], opts: Options, offset: int | None) -> CommCost | None:
    """A function's step communicates only over a sharded dim with statistics: an AllReduce of them."""
    return _formula_unit_of(Op.ALL_REDUCE, axes, opts) if axes else None


@UNIT_COSTS.register(Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALL_REDUCE, Op.ALL_TO_ALL, Op.PERMUTE)
def _formula_unit(op: Op, axes: tuple[str, ...], opts: Options, offset: int | None) -> CommCost | None:
    """A collective priced by the model's column of :data:`FORMULAS`."""
    return _formula_unit_of(op, axes, opts)


@memoized(Kind.PIECE)
def _formula_unit_of(op: Op, axes: tuple[str, ...], opts: Options) -> CommCost | None:
    group = tuple(link for link in _links_of(axes, opts) if link.number != 1)
    return _unit(opts.costs.model, op, group) if group else None


@UNIT_COSTS.register(Op.SHIFT)
def _shift_unit(op: Op, axes: tuple[str, ...], opts: Options, offset: int | None) -> CommCost | None:
    if offset is None or len(axes) != 1:
        raise UsageError("a Shift moves blocks along one axis by an offset: Shift_{X,+1}")
    return _shift(axes, opts, offset)


@memoized(Kind.PIECE)
def _shift(axes: tuple[str, ...], opts: Options, offset: int) -> CommCost | None:
    link = opts.link(axes[0])
    if len(link.sides) > 1:  # a shift's path over several torus sides depends on the carries: not priced yet
        raise UsageError(
            f"a Shift along {link.name}, an axis made of {len(link.sides)} torus axes of a slice, is not priced "
            "yet (its path depends on where each block wraps from one side to the next)",
            fix="shift along a logical axis that is one torus axis of the slice (e.g. --mesh X=x,Y=y*z)",
        )
    _no_strided_path(link, "Shift")
    return None if link.number == 1 else shift_unit(opts.costs.model, link, offset, _t(T_MIN), _t(ONE_WAY))


def _no_strided_path(link: Link, what: str) -> None:
    """A Shift or Send along a strided factor of a torus axis is refused: its path crosses ``stride`` links a
    step, shared with the other groups, which the point-to-point formulas of :mod:`.shift` do not count."""
    if link.strided:
        raise UsageError(
            f"a {what} along {link.name}, a strided factor of a torus axis of a slice, is not priced yet (each "
            "step crosses several physical links, shared with the other groups)",
            fix=f"{what.lower()} along a whole torus axis or a contiguous factor of one (e.g. z:(4)7 of z=28)",
        )


def _links_of(axes: tuple[str, ...], opts: Options) -> list[Link]:
    """The links a collective over ``axes`` runs on: one per axis, where the sub-axes of one axis
    (``Y:(1)2``, ``Y:(2)2``, :mod:`shardalg.algebra.factors`) share their parent's links, so a group of them
    is one link of the product of their sizes (the parent itself when they make it up whole). A sub-axis is
    priced as a ring of its own size on its parent's links: the stride between its devices and the links
    interleaved groups share are not modelled (plans over sub-axes say so)."""
    if not any(":" in a for a in axes):
        return [opts.link(a) for a in axes]
    by_parent: dict[str, list[str]] = {}
    for a in axes:
        by_parent.setdefault(parent_of(a), []).append(a)
    out: list[Link] = []
    for parent, names in by_parent.items():
        if len(names) == 1:
            out.append(opts.link(names[0]))
            continue
        # a mesh declared factored (Y=2x2) holds only the factors, not the parent
        whole = opts.mesh[parent].size if parent in opts.mesh else None
        n = opts.mesh.known_group(tuple(names))
        if n is not None and n == whole:
            out.append(opts.link(parent))
        else:
            one = opts.link(names[0])
            out.append(replace(one, name="".join(names), size=const(n), number=n) if n is not None else one)
    return out


@UNIT_COSTS.register(Op.SEND)
def _send_unit(op: Op, axes: tuple[str, ...], opts: Options, offset: int | None) -> CommCost | None:
    if offset is None or len(axes) != 1:
        raise UsageError("a Send moves blocks along one axis by an offset: Send_{X,+1}")
    return _send(axes, opts, offset)


@memoized(Kind.PIECE)
def _send(axes: tuple[str, ...], opts: Options, offset: int) -> CommCost | None:
    link = opts.link(axes[0])
    if len(link.sides) > 1:  # the path over several torus sides depends on where each block crosses
        raise UsageError(
            f"a Send along {link.name}, an axis made of {len(link.sides)} torus axes of a slice, is not priced "
            "yet (its path depends on where each block crosses from one side to the next)",
            fix="send along a logical axis that is one torus axis or the pods of a slice (e.g. --mesh P=pod)",
        )
    _no_strided_path(link, "Send")
    return None if link.number == 1 else send_unit(opts.costs.model, link, offset, _t(T_MIN), _t(ONE_WAY))


def _unit(model: str, op: Op, group: tuple[Link, ...]) -> CommCost:
    if any(g.node is not None for g in group):  # a GPU axis across nodes: NVLink inside, scale-out across
        parts = hierarchical_parts(
            model, op, sympy.Integer(1), [(g.size.sympy(), g.node, g.leaf) for g in group]
        )
        return CommCost(tuple((from_sympy(lat), from_sympy(b)) for lat, b in parts), False)
    return _formula(model, op, tm.ONE, group)


def _collective(
    op: Op, tensor: Tensor, axes: tuple[str, ...], opts: Options, offset: int | None = None
) -> CommCost:
    unit = unit_cost(op, axes, opts, offset)
    return NOTHING if unit is None else unit.scaled(group_bytes(op, tensor, axes, opts))
