"""The two gradient einsums of one product, planned together (DESIGN.md section 4).

``dA = dC·Bᵀ`` and ``dB = Aᵀ·dC`` both read the cotangent ``dC``. Planned one at a time, each reshards
``dC`` for itself; planned together, a version of ``dC`` that one gradient's plan makes (``AllGather_XY(dC)
-> dC[I, K]``) can serve the other, which then slices it for free. Shared collectives are found before
choosing:

* the baseline: the cheapest plan of each gradient alone, their common steps run once;
* for each order (dA first, dB first) and each version ``v`` of ``dC`` that some plan of the first
  gradient makes before its einsum: the cheapest plan of the first that makes ``v``, then the cheapest
  plan of the second planned from ``v``.

Pairs are ranked by the bytes both plans communicate (the planner's measure, each collective counted once,
a step an earlier gradient already ran counted as free). The baseline is kept unless a pair moves fewer
bytes for every size: with numeric sizes, strictly fewer; with symbolic ones, when the baseline's bytes minus
the pair's is a polynomial with no negative coefficient (``2·D·F`` against ``B·F`` decides nothing, so FSDP
keeps its plans until the sizes are known). A product with nothing to share keeps the plans it had.

With numeric sizes a version is planned for the second gradient only if a pair through it could still win:
the second plan costs at least the second gradient's cheapest plan over every compute layout
(:func:`~.optimum.cheapest_plan`, a search bounded by what is left to win) less every step it could get
free (the first plan's and the earlier gradients' steps on the tensors it moves, but those that make the
version: a plan from it never makes it again). The bound changes no choice, only what is planned
(``tests/planning/test_gradient_pairs.py`` checks the pairs against ``choose`` without it). In the causal
layer's search in training on 2x2x2 the second gradient is planned from 2,756 versions; 12,598 when the steps
that make a version counted as ones a plan from it might get free. With sizes unknown the bound is taken at
the point where the planner's searches rank them (a dim at 4096, an axis at 4: a step's rank is its bytes there
times 8 and the devices), in the searches the plans were listed in; a pair that moves fewer bytes at every size
does there too.
On X=2,Y=2,Z=2,S0=2 the backward of a fuzzed program (``In[B_Z, T, D] - In[B_Z, T, D] -> V0[B, T_XYZ, D]``,
then ``In[B_Z, T, D] * W1[D_Z, F] -> V1[B, T, F]``) with its reductions deferred planned 39 versions of dV1
without it (15.8 s of CPU) and none with it (1.6 s), the same backward.

    >>> first, second = choose(left, right, dC, Mesh(X=2, Y=4), sizes, made=set())
    >>> second.shared        # the version of dC the first plan made and the second reads
    dC[I, K]
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from shardalg.algebra.factors import is_subaxis
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.subaxes import declared_cuts
from shardalg.algebra.traffic import Bytes, Sizes, rank_table, step_bytes, step_rank
from shardalg.errors import ShardalgError
from shardalg.notation import printing
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Arrow, Op, Product, Tensor

from . import symbolic
from .anonymous import Renaming
from .einsum_query import EinsumQuery
from .optimum import cheapest_plan
from .order import bytes_are_numbers, plan_bytes, sized, sort_plans
from .planner import Problem, plans
from .planset import DEFAULT_LIMITS
from .redistribute import default_key

__all__ = ["Gradient", "Chosen", "choose", "candidates", "fewer"]


@dataclass(frozen=True)
class Gradient:
    """One gradient einsum to plan: ``dC · B -> dA`` (``side`` "left") or ``A · dC -> dB`` ("right"),
    with ``primal`` the other operand as the backward reads it and the targets it may end in."""

    side: str
    primal: Tensor
    targets: tuple[Tensor, ...]

    def product(self, cotangent: Tensor) -> Product:
        return Product(cotangent, self.primal) if self.side == "left" else Product(self.primal, cotangent)


@dataclass(frozen=True)
class Chosen:
    """A gradient's chosen plan; ``shared`` is the version of the cotangent it reads that the other
    gradient's plan made (None when it starts from the cotangent itself)."""

    gradient: Gradient
    plan: Plan
    shared: Tensor | None = None


def candidates(g: Gradient, cotangent: Tensor, mesh: Mesh, sizes: Mapping[str, int]) -> list[Plan]:
    """Every plan of ``g`` from ``cotangent`` to any of its targets, cheapest first (the planner's order);
    :class:`~.symbolic.NeedsSizes` when which is the cheapest depends on sizes not given."""
    found: list[Plan] = []
    last: ShardalgError | None = None
    reached = 0
    known = Sizes(sizes)
    for t in g.targets:
        # made from a checked product, its target the operand's layout: planned without the rules run again
        # (an unreachable target is refused by the planner: NoPlan)
        try:
            found.extend(plans(Problem(Arrow(g.product(cotangent), t), mesh, known, None, checked=True)))
            reached += 1
        except ShardalgError as err:  # an unreachable target is one candidate fewer
            last = err
    if not found:
        assert last is not None
        raise last
    if reached > 1:  # one target's plans are in the planner's order already (or in its choice's, made again)
        sort_plans(found, default_key(mesh, known))  # bytes first; the steps' text only among ties
    # no size-dependent choice made (the einsum's tensors hold every dim its plans move)
    written = (cotangent, g.primal, *g.targets)
    if symbolic.is_strict() and not bytes_are_numbers(found, mesh, known, written):
        found, choice = symbolic.choose(found, lambda p: plan_bytes(p, mesh, known))
        if choice is not None and not choice.decided:
            product = printing.text(Arrow(g.product(cotangent), g.targets[0]))
            raise symbolic.NeedsSizes(f"the gradient {product}", choice)
    return found


Cost = Bytes | int  # a polynomial in unknown sizes, or with every size known the step ranks' integer sum


class _Cost:
    """Bytes a set of steps communicates (each distinct step once), free steps excluded. With ``numbers``
    (every size known) a step costs its :func:`~shardalg.algebra.traffic.step_rank`, an integer that is its
    bytes times one factor of the mesh: sums compare as the bytes do, without polynomials."""

    def __init__(self, mesh: Mesh, sizes: Mapping[str, int], made: set[Step], numbers: bool = False):
        self.mesh, self.sizes, self.made = mesh, Sizes(sizes), made
        self.table = rank_table(mesh) if numbers else None
        self._bytes: dict[Step, Cost] = {}  # each step priced once (the candidate plans share most steps)
        self._point: _Cost | None = None  # with unknown sizes: this cost by ranks (_at_point)

    def __call__(self, steps: tuple[Step, ...], also_free: frozenset[Step] = frozenset()) -> Cost:
        total: Cost = Bytes() if self.table is None else 0
        for s in dict.fromkeys(steps):
            if s.communicates and s not in self.made and s not in also_free:
                total = total + self._step(s)
        return total

    def could_pair(self, g: Gradient, cotangent: Tensor, first: Plan, best: Cost, spent: Cost) -> bool:
        """Whether a plan of ``g`` from ``cotangent`` might cost less than ``best - spent`` (what is left to
        beat the best pair after the first plan) with ``first``'s steps free. With every size known, False
        when ``g``'s cheapest plan over every compute layout to each of its targets, less every step of
        ``first`` and of the earlier gradients on a tensor that plan moves (the most it could get free) but
        those that make ``cotangent`` itself, costs that much or more. A plan from ``cotangent`` never makes it
        again: its steps from it are a cheapest sequence, and those are simple (:mod:`.search`), as are the
        optimum's; a spare-axes variant's gather makes what the plain one's does. True where no bound is
        taken: a mesh with sub-axes, whose plans the optimum does not search. With sizes unknown the same bound
        is taken where the planner's searches rank them (:meth:`_at_point`): a pair fewer at every size is
        fewer there too."""
        if declared_cuts(self.mesh):
            return True
        if any(is_subaxis(a) for t in (cotangent, g.primal, *g.targets) for a in t.used_axes):
            return True
        if self.table is None:  # numbers at a point: a pair fewer at every size is fewer there
            point, best_at, spent_at = self._at_point(best, spent)  # type: ignore[arg-type]
            return point.could_pair(g, cotangent, first, best_at, spent_at)
        moved = {cotangent.name, g.primal.name, *(t.name for t in g.targets)}
        free = sum(
            self._step(s)  # type: ignore[misc]
            for s in {*first.steps, *self.made}
            if s.communicates and s.inputs[0].name in moved and s.output != cotangent
        )
        bound = best - spent + free  # type: ignore[operator]
        if bound <= 0:
            return False
        for t in g.targets:
            query = EinsumQuery.of(g.product(cotangent), t, self.mesh, self.sizes, DEFAULT_LIMITS)
            found, cuts = cheapest_plan(query, bound)
            if found is not None or cuts:  # lighter than the bound, or not searched to it
                return True
        return False

    def _at_point(self, best: Bytes, spent: Bytes) -> tuple[_Cost, int, int]:
        """This cost by ranks (:func:`~shardalg.algebra.traffic.step_rank`: the bytes where the planner's
        searches rank unknown sizes, times 8 and the devices), with ``best`` and ``spent`` there
        (:meth:`~shardalg.algebra.traffic.Bytes.rank`): a bound taken there is the numeric one, in the layout
        spaces and searches the plans were listed in."""
        if self._point is None:
            self._point = _Cost(self.mesh, self.sizes.known, self.made, numbers=True)
        table = rank_table(self.mesh)  # the point's own
        # rounded so that what is left to win is never less than it is (each rank is whole)
        return self._point, math.ceil(best.rank(table)), math.floor(spent.rank(table))

    def _step(self, s: Step) -> Cost:
        got = self._bytes.get(s)
        if got is None:
            args = (s.op, s.axes, s.inputs[0], s.output, self.mesh, self.sizes)
            got = self._bytes[s] = (
                step_bytes(*args, s.offset) if self.table is None else step_rank(*args, self.table, s.offset)
            )
        return got


def fewer(a: Cost, b: Cost) -> bool:
    """Whether ``a`` is fewer bytes than ``b`` for every size (:func:`.symbolic.beaten_everywhere`: ``b - a`` has
    terms, none negative; numbers: ``a < b``)."""
    if isinstance(a, int):
        return a < b  # type: ignore[operator]
    return symbolic.beaten_everywhere(b, a)  # type: ignore[arg-type]


def _least(priced: list[tuple[Cost, int]]) -> tuple[Cost, int]:
    """The first cost that no other is fewer than at every size (the least one when all are numbers)."""
    for c, i in priced:
        if not any(fewer(o, c) for o, _ in priced):
            return c, i
    raise AssertionError("a finite set of costs has one no other is fewer than everywhere")


def _prep(p: Plan) -> tuple[Step, ...]:
    """The steps before the plan's einsum (they read the operands; those after finish the gradient)."""
    out = []
    for s in p.steps:
        if s.op is Op.EINSUM:
            break
        out.append(s)
    return tuple(out)


def _versions(p: Plan, cotangent: Tensor) -> list[Tensor]:
    """The versions of ``cotangent`` the plan makes before its einsum, in order."""
    have, out = {cotangent}, []
    for s in _prep(p):
        if s.inputs[0] in have:
            have.add(s.output)
            out.append(s.output)
    return out


def choose(
    left: Gradient,
    right: Gradient,
    cotangent: Tensor,
    mesh: Mesh,
    sizes: Mapping[str, int],
    made: set[Step],
    *,
    bounded: bool = True,
) -> tuple[Chosen, Chosen]:
    """The two gradients' plans, chosen together, in the order they run (see the module docstring);
    ``bounded=False`` plans every version, as the tests' oracle.

    Chosen under stand-in names (:mod:`.anonymous`; the steps already made renamed alike) and renamed back: the
    gradients of products that differ only by their names (Q's, K's and V's projections of one input) meet in
    the planner's memo. An error is raised under the names as written."""
    renaming = Renaming((cotangent, left.primal, *left.targets, right.primal, *right.targets))
    if renaming.usable:
        al, ar = (
            Gradient(g.side, renaming.to(g.primal), tuple(map(renaming.to, g.targets))) for g in (left, right)
        )
        mine = {al: left, ar: right}  # each gradient under stand-ins -> the caller's own
        made_alike = {renaming.to_step(s) for s in made}  # the steps made, renamed alike
        try:
            got = _choose(al, ar, renaming.to(cotangent), mesh, sizes, made_alike, bounded)
        except ShardalgError:
            pass  # its message names the stand-ins: raised again below
        else:
            return tuple(  # type: ignore[return-value]
                Chosen(
                    mine[c.gradient],
                    renaming.plan(c.plan),
                    None if c.shared is None else renaming.tensor(c.shared),
                )
                for c in got
            )
    return _choose(left, right, cotangent, mesh, sizes, made, bounded)


def _choose(
    left: Gradient,
    right: Gradient,
    cotangent: Tensor,
    mesh: Mesh,
    sizes: Mapping[str, int],
    made: set[Step],
    bounded: bool,
) -> tuple[Chosen, Chosen]:
    # every size known for the operands and the cotangent, so for every tensor the plans move (their dims)
    cost = _Cost(mesh, sizes, made, sized((cotangent, left.primal, right.primal), mesh, sizes))
    first_l = candidates(left, cotangent, mesh, sizes)
    first_r = candidates(right, cotangent, mesh, sizes)
    pl, pr = first_l[0], first_r[0]
    baseline = cost(pl.steps + pr.steps)
    best = (baseline, (Chosen(left, pl), Chosen(right, pr)))
    for one, other, listed in ((left, right, first_l), (right, left, first_r)):
        maker: dict[Tensor, tuple[Cost, Plan]] = {}
        for p in listed:
            c = cost(p.steps)
            for v in _versions(p, cotangent):
                if v not in maker or fewer(c, maker[v][0]):
                    maker[v] = (c, p)
        for v, (c1, p1) in maker.items():
            if not fewer(c1, best[0]):
                continue  # a pair costs at least its first plan (bytes are never negative): it cannot win
            if bounded and not cost.could_pair(other, v, p1, best[0], c1):
                continue  # nor if the second plan costs at least what is left
            try:
                seconds = candidates(other, v, mesh, sizes)
            except ShardalgError:
                continue
            shared = frozenset(p1.steps)
            priced = [(cost(q.steps, shared), i) for i, q in enumerate(seconds)]
            c2, i2 = _least(priced)
            total = c1 + c2
            if fewer(total, baseline) and fewer(total, best[0]):
                best = (total, (Chosen(one, p1), Chosen(other, seconds[i2], v)))
    return best[1]
