"""Planning one einsum: compute layouts per mesh axis, then prepare, multiply locally, and finish.

For ``left · right -> out`` a plan is: reshard each operand into a *compute layout*, take the local einsum
of the shards (:mod:`shardalg.algebra.einsum`), then finish: reduce (AllReduce, ReduceScatter onto a result dim,
or leave unreduced) and reshard to the requested result. Compute layouts are enumerated per mesh axis: an
axis that shards or leaves unreduced an operand may be kept, gathered (reduced), or moved; a replicated one
may be sliced onto a dim that the other operand or the requested result shards over it; shared dims holding
the same axes in another order may adopt either side's order. Preparing and finishing are the cheapest
sequences of :func:`shardalg.planning.redistribute.best_sequences` (a Permute when it is cheapest), and each plan also
comes in a variant that slices onto spare replicated axes before a gather. Without a requested result only
the minimal compute layouts are kept (no plan that reshards strictly more than another legal one).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import product
from typing import Any

from shardalg.algebra.einsum import Spec, case_lines, default_name, local_output_or_none
from shardalg.algebra.layout import Layout, tensor_with, validate
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.traffic import Sizes
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Op, Product, Tensor

from .redistribute import best_sequences, with_spare_axes

__all__ = ["EinsumPlanner"]

# an axis's placement in an operand: ("S", dim label) / ("U", "") / ("R", "")
Place = tuple[str, str]
R: Place = ("R", "")
U: Place = ("U", "")


def _fmt(axes: tuple[str, ...] | list[str]) -> str:
    return "".join(axes) if all(len(a) == 1 for a in axes) else "{" + ",".join(axes) + "}"


def _place(t: Tensor, axis: str) -> Place:
    for d in t.dims:
        if axis in d.axes:
            return ("S", d.label)
    return U if axis in t.unreduced else R


@dataclass(frozen=True)
class _Option:
    """One operand's new placement of one axis, and why."""

    place: Place
    reason: str


class EinsumPlanner:
    """Every plan of ``left · right -> result`` on a mesh (see the module docstring)."""

    def __init__(self, body: Product, result: Tensor | None, mesh: Mesh, sizes: Sizes):
        self.left, self.right = body.left, body.right
        assert isinstance(self.left, Tensor) and isinstance(self.right, Tensor)
        self.local = body.local
        self.contract = body.contract
        self.target = result
        self.mesh, self.sizes = mesh, sizes
        for t in (self.left, self.right) + ((result,) if result is not None else ()):
            validate(t, self.mesh)
            self.sizes.require_divisible(t, self.mesh)
        self.spec = Spec.of(self.left, self.right, body.contract, result)
        self.name = (result.name if result is not None else None) or default_name(
            self.left.name, self.right.name
        )
        dtype = self.left.dtype or self.right.dtype
        if result is not None and (result.name is None or (result.dtype is None and dtype is not None)):
            self.target = result.replace(name=self.name, dtype=result.dtype or dtype)  # type: ignore[assignment]
        self.cases = case_lines(self.left, self.right, self.spec)
        self._layouts: dict[tuple[bool, bool, tuple[tuple[str, Place], ...]], Tensor] = {}

    def _nm(self, t: Tensor) -> str:
        """How reasons call an operand: its name, else which side it is."""
        if t.name is not None:
            return t.name
        return "the left operand" if t.dim_names == self.left.dim_names else "the right operand"

    # -- the per-axis options ----------------------------------------------------------------------

    def _dims_for(self, t: Tensor, other: Tensor, axis: str) -> list[tuple[str, str]]:
        """Dims of ``t`` the axis may be moved onto, with the reason: where the other operand has it on a
        shared dim (to match), or where the requested result has it on a dim t keeps."""
        out = []
        other_names = other.dim_names
        target_names = self.target.dim_names if self.target is not None else ()
        for d in t.dim_names:
            if d in other_names and axis in other.axes_of(d):
                out.append((d, f"{self._nm(other)} shards {d} over {axis}; match it"))
            elif (
                self.target is not None
                and d not in self.spec.contracted
                and d in target_names
                and axis in self.target.axes_of(d)
            ):
                out.append((d, f"the result {self.target} shards {d} over {axis}"))
        return out

    def _options(self, t: Tensor, other: Tensor, axis: str) -> list[_Option]:
        cur = _place(t, axis)
        opts = [_Option(cur, "")]
        if self.local:
            return opts
        other_place = _place(other, axis)
        name = self._nm(t)
        if cur[0] == "S":
            d = cur[1]
            why = self._gather_reason(t, other, axis, d, other_place)
            if why:
                opts.append(_Option(R, why))
        elif cur == U:
            if other_place != R:
                opts.append(
                    _Option(
                        R, f"{name} is unreduced over {axis} and {self._nm(other)} uses {axis}; sum it first"
                    )
                )
            elif self.target is not None and axis not in self.target.unreduced:
                opts.append(
                    _Option(R, f"the result is not unreduced over {axis}; sum {name}'s partials first")
                )
        for d, why in self._dims_for(t, other, axis):
            if ("S", d) != cur:
                verb = {"S": "move", "U": "reduce-scatter", "R": "slice"}[cur[0]]
                opts.append(_Option(("S", d), f"{verb} {name}'s {d} over {axis}: {why}"))
        return opts

    def _gather_reason(self, t: Tensor, other: Tensor, axis: str, d: str, other_place: Place) -> str:
        spec, name = self.spec, self._nm(t)
        if d in spec.contracted:
            if other_place == ("S", d):
                return f"case 3 alternative: gather {d} over {axis} in both operands instead of reducing the product"
            if axis in other.axes_of(d) or not other.axes_of(d):
                return f"case 2: {d} is contracted and sharded over {axis} in {name} only; gather it"
            return f"mismatched: {d} is contracted and sharded over {_fmt(t.axes_of(d))} in {name} but {_fmt(other.axes_of(d))} in {self._nm(other)}; gather {name}'s"
        if other_place not in (R, ("S", d)):
            if other_place[0] == "S" and spec.role(other_place[1]).name in ("LEFT", "RIGHT"):
                return f"case 4: {d} of {name} and {other_place[1]} of {self._nm(other)} are both sharded over {axis}; gather {name}'s"
            return f"{self._nm(other)} uses {axis} ({'unreduced' if other_place == U else 'on ' + other_place[1]}); gather {name}'s {d}"
        if d in spec.batch and other_place != ("S", d):
            return f"batch dim {d} must be sharded alike in both operands; gather {name}'s"
        if self.target is not None and axis not in self.target.axes_of(d):
            return f"the result {self.target} does not shard {d} over {axis}; gather {name}'s {d} before the product"
        return ""

    # -- compute layouts ---------------------------------------------------------------------------

    def _layout(self, t: Tensor, places: dict[str, Place], ref: Tensor) -> Tensor:
        """``t`` with the axes placed as ``places`` says; axes new to a dim go minor-most, in the order
        the other operand (or the result) has them. Memoized per planner: the per-axis product repeats
        each operand's placement once for every option of the other operand."""
        memo_key = (t is self.left, ref is self.left, tuple(places.items()))
        found = self._layouts.get(memo_key)
        if found is None:
            found = self._layouts[memo_key] = self._new_layout(t, places, ref)
        return found

    def _new_layout(self, t: Tensor, places: dict[str, Place], ref: Tensor) -> Tensor:
        ref_names = ref.dim_names
        target = self.target
        target_names = target.dim_names if target is not None else ()
        mesh_names = self.mesh.names
        dims = []
        for d in t.dims:
            label = d.label
            here = ("S", label)
            kept = tuple(a for a in d.axes if places[a] == here)
            new = [a for a, pl in places.items() if pl == here and a not in kept]
            if new:
                order = ref.axes_of(label) if label in ref_names else ()
                if target is not None and label in target_names and not order:
                    order = target.axes_of(label)
                new.sort(key=lambda a: (order.index(a) if a in order else len(order), mesh_names.index(a)))
            dims.append(kept + tuple(new))
        unreduced = tuple(sorted(a for a, pl in places.items() if pl == U))
        invariant = tuple(a for a in t.invariant if places[a] == R)
        return tensor_with(t, Layout(tuple(dims), unreduced, invariant))

    def _candidates(self) -> Iterator[tuple[Tensor, Tensor, frozenset[Any], dict[tuple[int, str], str]]]:
        axes = self.mesh.names
        per_axis = []
        for a in axes:
            lo = self._options(self.left, self.right, a)
            ro = self._options(self.right, self.left, a)
            per_axis.append([(x, y) for x in lo for y in ro])
        for pick in product(*per_axis):
            lp = {a: x.place for a, (x, _) in zip(axes, pick, strict=True)}
            rp = {a: y.place for a, (_, y) in zip(axes, pick, strict=True)}
            changes = frozenset(
                [(0, a, x.place) for a, (x, _) in zip(axes, pick, strict=True) if x.reason]
                + [(1, a, y.place) for a, (_, y) in zip(axes, pick, strict=True) if y.reason]
            )
            reasons = {(0, a): x.reason for a, (x, _) in zip(axes, pick, strict=True) if x.reason}
            reasons.update({(1, a): y.reason for a, (_, y) in zip(axes, pick, strict=True) if y.reason})
            left = self._layout(self.left, lp, self.right)
            right = self._layout(self.right, rp, self.left)
            yield left, right, changes, reasons
            # shared dims holding the same axes in another order: either side may adopt the other's order
            for d in self.spec.contracted + self.spec.batch:
                la, ra = left.axes_of(d), right.axes_of(d)
                if la != ra and sorted(la) == sorted(ra):
                    for side, lt, rt in (
                        (0, left, right.with_axes(d, la)),
                        (1, left.with_axes(d, ra), right),
                    ):
                        who = (self.right if side == 0 else self.left).name
                        extra = {
                            (
                                1 - side,
                                f"order:{d}",
                            ): f"reorder {d} to match {who}'s {_fmt(la if side == 0 else ra)}"
                        }
                        yield lt, rt, changes | {(1 - side, d, "order")}, {**reasons, **extra}

    def plans(self) -> list[Plan]:
        legal: list[tuple[Tensor, Tensor, Tensor, frozenset[Any], dict[tuple[int, str], str]]] = []
        for left, right, changes, reasons in self._candidates():
            out = local_output_or_none(left, right, self.spec, self.mesh, self.name)
            if out is None:
                continue
            if not (
                self.sizes.check_divisible(left, self.mesh, tuple(d.axes for d in left.dims))
                and self.sizes.check_divisible(right, self.mesh, tuple(d.axes for d in right.dims))
            ):
                continue
            legal.append((left, right, out, changes, reasons))
        if self.target is None:
            legal = [c for c in legal if not any(o[3] < c[3] for o in legal)]
        seen: set[tuple[Step, ...]] = set()
        found: list[Plan] = []
        for left, right, out, _changes, reasons in legal:
            for p in self._assemble(left, right, out, reasons):
                for variant in (p, with_spare_axes(p, self.mesh, self.sizes)):
                    if variant is not None and variant.steps not in seen:
                        seen.add(variant.steps)
                        found.append(variant)
        return found

    # -- assembling plans --------------------------------------------------------------------------

    def _prep(
        self, side: int, src: Tensor, dst: Tensor, reasons: dict[tuple[int, str], str]
    ) -> list[tuple[Step, ...]]:
        if Layout.of(src) == Layout.of(dst):
            return [()]
        seqs = best_sequences(src, dst, self.mesh, self.sizes)
        out = []
        for _, steps in seqs:
            out.append(tuple(_reasoned(s, [reasons.get((side, a), "") for a in s.axes]) for s in steps))
        return out

    def _assemble(
        self, left: Tensor, right: Tensor, out: Tensor, reasons: dict[tuple[int, str], str]
    ) -> Iterator[Plan]:
        preps_l = self._prep(0, self.left, left, reasons)
        preps_r = self._prep(1, self.right, right, reasons)
        if not preps_l or not preps_r:
            return
        contract = self.spec.contracted if self.contract is not None else ()
        local = bool(set(out.unreduced) - set(left.unreduced) - set(right.unreduced))
        mul = Step(
            Op.EINSUM,
            (left, right),
            out,
            contract=contract,
            local=local,
            reason=self._einsum_reason(left, right, out),
        )
        for finish, note in self._finishes(out):
            for pl, pr in product(preps_l, preps_r):
                steps = pl + pr + (mul,) + finish
                yield Plan(
                    (self.left, self.right), steps, steps[-1].output, self.cases, note=_note(steps, note)
                )

    def _einsum_reason(self, left: Tensor, right: Tensor, out: Tensor) -> str:
        summed = [(d, left.axes_of(d)) for d in self.spec.contracted if left.axes_of(d)]
        if summed:
            dims = ", ".join(d for d, _ in summed)
            axes = tuple(a for _, ax in summed for a in ax)
            return (f"case 3: both operands shard {dims} over {_fmt(axes)}, so the local product is "
                    f"{out.name}{{{', '.join('U_' + a for a in axes)}}}")  # fmt: skip
        passed = [a for a in out.unreduced]
        tail = f"; partial sums over {_fmt(passed)} pass through" if passed else ""
        if self.spec.contracted:
            return f"case 1: no contracted dim is sharded, so the local product needs no communication{tail}"
        return f"no contracted dim: a local product of the shards{tail}"

    def _finishes(self, out: Tensor) -> list[tuple[tuple[Step, ...], str]]:
        if self.target is not None:
            if Layout.of(out) == Layout.of(self.target):
                return [((), "")]
            seqs = best_sequences(out, self.target, self.mesh, self.sizes)
            return [(tuple(self._finish_reason(s, out) for s in steps), "") for _, steps in seqs]
        if self.local or not out.unreduced:
            return [((), "")]
        return list(self._natural_finishes(out))

    def _finish_reason(self, step: Step, out: Tensor) -> Step:
        """A finishing step's reason: a case-3 reduction names the partial products, anything else the
        requested result."""
        ax = _fmt(step.axes)
        brought = set(self.left.unreduced) | set(self.right.unreduced)
        if step.op in (Op.ALL_REDUCE, Op.REDUCE_SCATTER) and set(step.axes) <= brought:
            why = f"{step.op.value}: sum the partial sums over {ax} that the operands brought in"
            if step.dim is not None:
                why += f", leaving {step.dim} sharded over {ax}"
        elif step.op is Op.ALL_REDUCE:
            why = f"case 3 finish: AllReduce_{ax} sums the partial products of {out.name} over {ax}"
        elif step.op is Op.REDUCE_SCATTER:
            why = f"case 3 finish: ReduceScatter_{{{','.join(step.axes)},{step.dim}}} sums the partials and leaves {step.dim} sharded over {ax}"
        else:
            why = f"{step.reason}, to reach the requested {self.target}"
        return _with_reason(step, why)

    def _natural_finishes(self, out: Tensor) -> Iterator[tuple[tuple[Step, ...], str]]:
        """The natural outputs of an unreduced product: leave it unreduced, AllReduce it, or ReduceScatter
        it onto each result dim (all its unreduced axes at once, in mesh order)."""
        u = out.unreduced
        yield (), f"result left unreduced over {_fmt(u)}"
        done = tensor_with(out, Layout(Layout.of(out).dims, (), out.invariant))
        yield (self._finish_reason(Step(Op.ALL_REDUCE, (out,), done, u), out),), ""
        for d in out.dim_names:
            nxt = done.with_axes(d, out.axes_of(d) + u)
            if self.sizes.check_divisible(nxt, self.mesh, tuple(x.axes for x in nxt.dims)):
                yield (self._finish_reason(Step(Op.REDUCE_SCATTER, (out,), nxt, u, d), out),), ""


def _with_reason(step: Step, why: str) -> Step:
    return Step(step.op, step.inputs, step.output, step.axes, step.dim, step.contract, step.local, why)


def _reasoned(step: Step, reasons: list[str]) -> Step:
    """A preparing step's reason: why the axes it moves had to move (a Permute: which dims it re-lays)."""
    if step.op is Op.PERMUTE:
        before, after = step.inputs[0], step.output
        moved = [
            f"{d.label}_{_fmt(d.axes)} -> {e.label}_{_fmt(e.axes)}"
            for d, e in zip(before.dims, after.dims, strict=True)
            if d.axes != e.axes
        ]
        x, y = step.axes
        return _with_reason(
            step,
            f"Permute into place: {', '.join(moved)} of {before.name} by moving whole shards point to point "
            f"(swapping {x} and {y} keeps every device's local shape), instead of gathering and slicing",
        )
    why = "; ".join(dict.fromkeys(r for r in reasons if r))
    return _with_reason(step, f"{step.op.value}: {why}") if why else step


def _note(steps: tuple[Step, ...], extra: str) -> str:
    parts = [f"{s.op.value}_{_fmt(s.axes)}({s.inputs[0].name})" for s in steps if s.op is not Op.EINSUM]
    text = ", ".join(parts) if parts else "no communication"
    return f"{text}; {extra}" if extra else text
