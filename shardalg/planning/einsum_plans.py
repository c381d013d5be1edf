"""Planning one einsum: compute layouts per mesh axis, then prepare, multiply locally, and finish.

For ``left · right -> out`` a plan is: reshard each operand into a *compute layout*, take the local einsum
of the shards (:mod:`shardalg.algebra.einsum`), then finish: reduce (AllReduce, ReduceScatter onto a result dim,
or leave unreduced) and reshard to the requested result. Compute layouts combine, axis by axis, the options
of :mod:`.einsum_options` (only pairs that can be multiplied locally); shared dims holding the same axes in
another order may adopt either side's order. Preparing and finishing are the cheapest sequences of
:func:`shardalg.planning.redistribute.best_sequences` (a Permute when it is cheapest; every tie), and each
plan also comes in a variant that slices onto spare replicated axes before a gather. Without a requested
result only the minimal compute layouts are kept (no plan that reshards strictly more than another legal one).

Whether the answer is complete is tracked: a resharding search cut by a limit, or more compute layouts
than ``limits.max_layouts``, makes :attr:`EinsumPlanner.cuts` non-empty (each a note naming the limit).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import product
from typing import Any

from shardalg.algebra.layout import Layout, subscript, tensor_with, validate
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.traffic import Sizes
from shardalg.lazy import cached
from shardalg.notation.plan import Plan, Step, chained_plan
from shardalg.notation.syntax import Op, Product, Tensor

from .einsum_options import AxisChoices, Option, Place, pair_is_local
from .einsum_query import EinsumQuery
from .optimum import cheapest_plan
from .order import BytesKey
from .planset import DEFAULT_LIMITS, Limits, Overlap
from .reasons import finish_reason, finished, note, prepared
from .redistribute import best_sequences, close, finishing_sequences
from .steps import local_product, placed, with_spare_axes

__all__ = ["EinsumPlanner"]

Reasons = dict[tuple[int, str], str]
Candidate = tuple[Tensor, Tensor, frozenset[Any], Reasons]


class EinsumPlanner:
    """Every plan of ``left · right -> result`` on a mesh (see the module docstring)."""

    def __init__(
        self,
        body: Product,
        result: Tensor | None,
        mesh: Mesh,
        sizes: Sizes,
        limits: Limits = DEFAULT_LIMITS,
        weigh: Callable[[Step], float] | None = None,
        overlap: Overlap | None = None,
        *,
        checked: bool = False,
    ):
        """``checked``: the statement passed the legality rules already (its tensors are valid and divide)."""
        self.left, self.right = body.left, body.right
        assert isinstance(self.left, Tensor) and isinstance(self.right, Tensor)
        self.local = body.local
        self.contract = body.contract
        self.mesh, self.sizes, self.limits, self.weigh = mesh, sizes, limits, weigh
        self.overlap = overlap if weigh is not None else None
        if not checked:
            for t in (self.left, self.right) + ((result,) if result is not None else ()):
                validate(t, self.mesh)
                self.sizes.require_divisible(t, self.mesh)
        self.query = EinsumQuery.of(body, result, mesh, sizes, limits)
        self.spec, self.name, self.target, self.cases = (
            self.query.spec,
            self.query.name,
            self.query.target,
            self.query.cases,
        )
        self.choices = AxisChoices(self.left, self.right, self.spec, self.target, self.local)
        self.cuts: list[str] = []  # notes of the limits that cut the answer
        self.layouts_tried = 0
        self.heads: list[tuple[int, int]] = []  # each plan's BytesKey head, once plans() has run
        self._layouts: dict[tuple[int, tuple[Place, ...], tuple[str, ...]], Tensor] = {}

    # -- compute layouts ---------------------------------------------------------------------------

    def _layout(self, side: int, places: tuple[Place, ...]) -> Tensor:
        """An operand with the axes placed as ``places`` says (in mesh order); axes new to a dim go
        minor-most, in the order the other operand (or the result) has them. Memoized per planner: the
        per-axis product repeats each operand's placement once for every option of the other operand."""
        key = (side, places, ())
        found = self._layouts.get(key)
        if found is None:
            t, ref = (self.left, self.right) if side == 0 else (self.right, self.left)
            found = self._layouts[key] = self._new_layout(
                t, dict(zip(self.mesh.names, places, strict=True)), ref
            )
        return found

    def _new_layout(self, t: Tensor, places: dict[str, Place], ref: Tensor) -> Tensor:
        """``t`` placed as ``places`` says; the order of the axes new to a dim comes from ``ref`` (the other
        operand), else the requested result. Made by :func:`.steps.placed`, memoized by equal tensors; ``t``
        itself when nothing moves."""
        ref_names = ref.dim_names
        target = self.target
        target_names = target.dim_names if target is not None else ()
        orders = []
        for label in t.dim_names:
            order = ref.axes_of(label) if label in ref_names else ()
            if target is not None and label in target_names and not order:
                order = target.axes_of(label)
            orders.append(order)
        got = placed(t, tuple(places.values()), tuple(orders), self.mesh.names)
        return t if got.layout() == t.layout() else got

    def _per_axis(self) -> list[list[tuple[Option, Option]]]:
        """For each mesh axis, the pairs of options (left, right) that can be multiplied locally."""
        out = []
        for a in self.mesh.names:
            lo = self.choices.options(self.left, self.right, a)
            ro = self.choices.options(self.right, self.left, a)
            pairs = [(x, y) for x in lo for y in ro if pair_is_local(self.spec, x.place, y.place)]
            out.append(pairs if self.mesh[a].size != 1 or not pairs else [min(pairs, key=self._fewest)])
        return out

    def _fewest(self, pair: tuple[Option, Option]) -> tuple[int, bool]:
        """A pair of options on an axis of size 1 by what it writes: the operands it changes, then whether it
        leaves the product unreduced over the axis (a finishing step more). On one device every pair computes
        the same local product and moves no byte, so the planner takes one: the first of the fewest steps."""
        x, y = pair
        return bool(x.reason) + bool(y.reason), x.place == y.place and x.place[1] in self.spec.contracted

    def _candidates(self) -> Iterator[Candidate]:
        axes = self.mesh.names
        per_axis = self._per_axis()
        for pick in product(*per_axis):
            self.layouts_tried += 1
            if self.layouts_tried > self.limits.max_layouts:
                self.cuts.append(
                    f"the einsum has more than {self.limits.max_layouts:,} compute layouts (the planning limit "
                    "max_layouts); pass limits=Limits(max_layouts=...) to try more"
                )
                return
            moved: list[tuple[int, str, Place]] = []
            reasons: Reasons = {}
            for a, (x, _) in zip(axes, pick, strict=True):
                if x.reason:
                    moved.append((0, a, x.place))
                    reasons[(0, a)] = x.reason
            for a, (_, y) in zip(axes, pick, strict=True):
                if y.reason:
                    moved.append((1, a, y.place))
                    reasons[(1, a)] = y.reason
            changes = frozenset(moved)
            left = self._layout(0, tuple([x.place for x, _ in pick]))
            right = self._layout(1, tuple([y.place for _, y in pick]))
            yield left, right, changes, reasons
            yield from self._reordered(left, right, changes, reasons)

    def _reordered(
        self, left: Tensor, right: Tensor, changes: frozenset[Any], reasons: Reasons
    ) -> Iterator[Candidate]:
        """Shared dims holding the same axes in another order: either side may adopt the other's order."""
        for d in self.spec.contracted + self.spec.batch:
            la, ra = left.axes_of(d), right.axes_of(d)
            if la != ra and sorted(la) == sorted(ra):
                for side, lt, rt in ((0, left, right.with_axes(d, la)), (1, left.with_axes(d, ra), right)):
                    who = (self.right if side == 0 else self.left).name
                    extra = {
                        (
                            1 - side,
                            f"order:{d}",
                        ): f"reorder {d} to match {who}'s {subscript(la if side == 0 else ra)}"
                    }
                    yield lt, rt, changes | {(1 - side, d, "order")}, {**reasons, **extra}

    def _legal(self) -> list[tuple[Tensor, Tensor, Tensor, frozenset[Any], Reasons]]:
        legal = []
        seen: set[tuple[Any, ...]] = set()
        for left, right, changes, reasons in self._candidates():
            out = local_product(left, right, self.spec, self.mesh, self.name)
            if out is None:
                continue
            if not (
                self.sizes.check_divisible(left, self.mesh, left.layout()[0])
                and self.sizes.check_divisible(right, self.mesh, right.layout()[0])
            ):
                continue
            legal.append((left, right, out, changes, reasons))
        if self.target is None:
            legal = [c for c in legal if not any(o[3] < c[3] for o in legal)]
        unique = []
        for c in legal:  # the same compute layouts (from another order) give the same plans: keep the first
            key = (c[0].layout(), c[1].layout())
            if key not in seen:
                seen.add(key)
                unique.append(c)
        return unique

    def plans(self) -> list[Plan]:
        """Every plan found (unsorted); :attr:`heads` then holds each one's :class:`~.order.BytesKey` head, in
        the same order (the bound of the optimum reads them, and so does the planner's sort)."""
        found: list[Plan] = []
        seen: set[tuple[Any, ...]] = set()
        legal = self._legal()
        # one backward search serves every finish: its space closed from the products that need a reshard
        target = self.target
        ends = [c[2] for c in legal if c[2].layout() != target.layout()] if target is not None else []
        if ends:
            close(ends[0], ends, self.mesh, self.sizes)
        for left, right, out, _changes, reasons in legal:
            for p in self._assemble(left, right, out, reasons):
                self._add(p, found, seen)
        key = BytesKey(self.mesh, self.sizes)
        heads = self.heads = [key.head(p) for p in found]
        if self.target is not None and not self.local:
            bound = min((h[0] for h in heads), default=float("inf"))
            optima = [cheapest_plan(self.query, bound)]
            if self.weigh is not None:
                if self.overlap is None:  # steps add up: the weights' optimum
                    weigh = self.weigh
                    bound = min((sum(weigh(s) for s in p.steps) for p in found), default=float("inf"))
                else:  # the optimum under the overlap policy
                    times = [self.overlap.time(p) for p in found]
                    bound = min((t for t in times if t is not None), default=float("inf"))
                optima.append(cheapest_plan(self.query, bound, self.weigh, self.overlap))
            for best, cuts in optima:
                self.cuts.extend(cuts)
                if best is not None:
                    self._add(best, found, seen)
        heads.extend([key.head(p) for p in found[len(heads) :]])
        return found

    def _add(self, p: Plan, found: list[Plan], seen: set[tuple[Any, ...]]) -> None:
        """Add a plan and its spare-axes variant, unless an equal plan is there already."""
        for variant in (p, with_spare_axes(p, self.mesh, self.sizes)):
            if variant is not None:
                sig = self._signature(variant)
                if sig not in seen:
                    seen.add(sig)
                    found.append(variant)

    def _signature(self, p: Plan) -> tuple[Any, ...]:
        """A plan's steps as plain values (cheap to hash): equal signatures are equal plans (the names, dims
        and dtypes of the tensors are fixed by their place in this einsum)."""
        return tuple([s.signature for s in p.steps])  # each step's part made once (the plans share steps)

    # -- assembling plans --------------------------------------------------------------------------

    @cached
    def target_text(self) -> str:
        """The requested result in the notation, printed once (every finishing step's reason names it)."""
        return str(self.target)

    def _sequences(self, src: Tensor, dst: Tensor, finish: bool = False) -> tuple[tuple[Step, ...], ...]:
        search = finishing_sequences if finish else best_sequences
        seqs = search(src, dst, self.mesh, self.sizes, self.limits)
        if not seqs.complete:
            self.cuts.append(seqs.why)
        return seqs.found

    def _prep(self, side: int, src: Tensor, dst: Tensor, reasons: Reasons) -> list[tuple[Step, ...]]:
        if src.layout() == dst.layout():
            return [()]
        return [
            prepared(
                steps, tuple([tuple([reasons.get((side, a), "") for a in s.axes]) for s in steps]), src, dst
            )
            for steps in self._sequences(src, dst)
        ]

    def _assemble(self, left: Tensor, right: Tensor, out: Tensor, reasons: Reasons) -> Iterator[Plan]:
        preps_l = self._prep(0, self.left, left, reasons)
        preps_r = self._prep(1, self.right, right, reasons)
        if not preps_l or not preps_r:
            return
        mul = self.product_step(left, right, out)
        for finish, extra in self._finishes(out):
            for pl, pr in product(preps_l, preps_r):
                why = note(pl + pr + (mul,) + finish, extra)
                yield chained_plan((self.left, self.right), pl, pr, mul, finish, self.cases, why)

    def product_step(self, left: Tensor, right: Tensor, out: Tensor) -> Step:
        """The local product of two compute layouts, with its reason (:func:`.reasons.product_step`)."""
        return self.query.product_step(left, right, out)

    @property
    def brought(self) -> frozenset[str]:
        """The axes the operands bring in unreduced."""
        return self.query.brought

    def _finishes(self, out: Tensor) -> list[tuple[tuple[Step, ...], str]]:
        if self.target is not None:
            if out.layout() == self.target.layout():
                return [((), "")]
            return [
                (finished(steps, out, self.target, self.brought), "")
                for steps in self._sequences(out, self.target, finish=True)
            ]
        if self.local or not out.unreduced:
            return [((), "")]
        return list(self._natural_finishes(out))

    def finish_reason(self, step: Step, out: Tensor) -> Step:
        """A finishing step with its reason (:func:`.reasons.finish_reason`)."""
        return finish_reason(step, out, self.brought, self.target_text)

    def _natural_finishes(self, out: Tensor) -> Iterator[tuple[tuple[Step, ...], str]]:
        """The natural outputs of an unreduced product: leave it unreduced, AllReduce it, or ReduceScatter
        it onto each result dim (all its unreduced axes at once, in mesh order)."""
        u = out.unreduced
        yield (), f"result left unreduced over {subscript(u)}"
        done = tensor_with(out, Layout(Layout.of(out).dims, (), out.invariant))
        yield (self.finish_reason(Step(Op.ALL_REDUCE, (out,), done, u), out),), ""
        for d in out.dim_names:
            nxt = done.with_axes(d, out.axes_of(d) + u)
            if self.sizes.check_divisible(nxt, self.mesh, nxt.layout()[0]):
                yield (self.finish_reason(Step(Op.REDUCE_SCATTER, (out,), nxt, u, d), out),), ""
