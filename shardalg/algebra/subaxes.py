"""Refining a mesh into the factors its sub-axes name, and back.

A program that names sub-axes (``A[I_{Y:(1)2}, J]`` on ``X=2, Y=4``) is planned, checked and run on the
*refined* mesh, whose axes are the factors the program cuts: here ``X=2, Y:(1)2=2, Y:(2)2=2``. There a whole
axis is the tuple of its factors, major first (``I_Y`` is ``I_{Y:(1)2,Y:(2)2}``), a sub-axis is one factor
or a run of them, and every rule of the algebra holds as it is: "an axis used twice" is the rule that a
sub-axis and its parent, or two overlapping sub-axes, never both shard one tensor; the executor's devices of
a factor are the devices that differ only in that digit of the parent's coordinate. :meth:`Refinement.coarsen`
writes the results back in the user's axes (runs of factors that make up a whole axis print as the axis).

The cuts of an axis are the pre-sizes its sub-axes name (and their ``pre · size``); they must form a chain
of divisors (``Y:(1)2`` and ``Y:(1)3`` of Y=6 do not nest: no mesh holds both).

Costs do not need the refined mesh: the mesh resolves a sub-axis's size and links by its name, and a
collective over several factors of one axis is priced on that axis's links (:func:`shardalg.costs`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from shardalg.errors import UnknownAxis, UsageError
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Apply, Arrow, Collective, Product, Program, Tensor

from .factors import Factor, factor_of, parent_of
from .mesh import Axis, Mesh

__all__ = [
    "Refinement",
    "refine",
    "axes_in",
    "names_subaxes",
    "prime_cuts",
    "overlaps",
    "within",
    "with_parts",
]


def axes_in(node: object) -> Iterable[str]:
    """Every axis name a node mentions, with repeats: its tensors' shardings, unreduced and invariant marks
    (a function's operands' too), its collectives' and steps' axes, a plan's inputs, steps and output."""
    if isinstance(node, Tensor):
        yield from node.used_axes
    elif isinstance(node, Collective):
        yield from node.axes
        yield from axes_in(node.arg)
    elif isinstance(node, Product):
        yield from axes_in(node.left)
        yield from axes_in(node.right)
    elif isinstance(node, Apply):
        for operand in node.operands:
            yield from axes_in(operand)
    elif isinstance(node, Arrow):
        yield from axes_in(node.expr)
        yield from axes_in(node.result)
    elif isinstance(node, Program):
        for s in node.statements:
            yield from axes_in(s)
    elif isinstance(node, Step):
        yield from node.axes
        for t in (*node.inputs, node.output):
            yield from t.used_axes
    elif isinstance(node, Plan):
        for t in node.inputs:
            yield from t.used_axes
        for step in node.steps:
            yield from axes_in(step)
        yield from node.output.used_axes


def mesh_is_fine(mesh: Mesh, *nodes: object) -> bool:
    """Whether every axis the nodes name is an axis of ``mesh`` itself (a refined mesh's factors)."""
    index = set(mesh.names)
    return all(a in index for n in nodes for a in axes_in(n))


def names_subaxes(*nodes: object) -> bool:
    """Whether any of ``nodes`` names a sub-axis."""
    return any(":" in a for n in nodes for a in axes_in(n))


@dataclass(frozen=True)
class Refinement:
    """A mesh and its refinement: ``parts`` maps each refined axis to its factors, major first."""

    coarse: Mesh
    fine: Mesh
    parts: tuple[tuple[str, tuple[Factor, ...]], ...]

    @property
    def trivial(self) -> bool:
        return not self.parts

    def factors(self, name: str) -> tuple[str, ...]:
        """The fine axes that make up ``name`` (a coarse axis, a sub-axis or a fine axis)."""
        table = dict(self.parts)
        parent = parent_of(name)
        if parent not in table:
            return (name,)
        f = factor_of(name)
        if f is None:
            return tuple(p.name for p in table[parent])
        got = tuple(p.name for p in table[parent] if f.pre <= p.pre < f.stop)
        if not got or factor_of(got[0]).pre != f.pre or _stop(got) != f.stop:  # type: ignore[union-attr]
            raise UnknownAxis(f"sub-axis {name} does not fit the cuts of {parent}")
        return got

    def expand_axes(self, axes: Iterable[str]) -> tuple[str, ...]:
        return tuple(x for a in axes for x in self.factors(a))

    def expand(self, node):  # Node | Step | Plan, same type back
        """``node`` with every axis written as its fine factors (spans kept)."""
        if self.trivial:
            return node
        if isinstance(node, Tensor):
            dims = tuple(d.with_axes(self.expand_axes(d.axes)) if d.axes else d for d in node.dims)
            return Tensor(
                node.name,
                dims,
                self.expand_axes(node.unreduced),
                self.expand_axes(node.invariant),
                node.dtype,
                span=node.span,
            )
        if isinstance(node, Collective):
            return Collective(
                node.op,
                self.expand_axes(node.axes),
                self.expand(node.arg),
                node.dim,
                node.offset,
                span=node.span,
            )
        if isinstance(node, Product):
            return Product(
                self.expand(node.left), self.expand(node.right), node.contract, node.local, span=node.span
            )
        if isinstance(node, Arrow):
            return Arrow(self.expand(node.expr), self.expand(node.result), span=node.span)  # type: ignore[arg-type]
        if isinstance(node, Program):
            return replace(node, statements=tuple(self.expand(s) for s in node.statements))
        if isinstance(node, Step):
            return replace(
                node,
                inputs=tuple(self.expand(t) for t in node.inputs),
                output=self.expand(node.output),
                axes=self.expand_axes(node.axes),
            )
        if isinstance(node, Plan):
            return replace(
                node,
                inputs=tuple(self.expand(t) for t in node.inputs),
                steps=tuple(self.expand(s) for s in node.steps),
                output=self.expand(node.output),
            )
        return node

    # ---- back to the user's axes ----------------------------------------------------------------
    def coarsen_axes(self, axes: tuple[str, ...], ordered: bool = True) -> tuple[str, ...]:
        """Runs of adjacent factors of one axis merged (major then minor), a whole axis written as itself;
        ``ordered=False`` (an unreduced set) merges the factors of each axis in any order."""
        if self.trivial or not any(":" in a for a in axes):
            return axes
        if not ordered:
            groups: dict[str, list[Factor]] = {}
            rest: list[str] = []
            for a in axes:
                f = factor_of(a)
                if f is None:
                    rest.append(a)
                else:
                    groups.setdefault(f.parent, []).append(f)
            for fs in groups.values():
                rest.extend(self._merged(sorted(fs)))
            return tuple(sorted(rest))
        out: list[str] = []
        run: list[Factor] = []
        for a in axes:
            f = factor_of(a)
            if f is not None and run and run[-1].parent == f.parent and run[-1].stop == f.pre:
                run.append(f)
                continue
            if run:
                out.extend(self._merged(run))
                run = []
            if f is None:
                out.append(a)
            else:
                run = [f]
        if run:
            out.extend(self._merged(run))
        return tuple(out)

    def _merged(self, fs: list[Factor]) -> list[str]:
        """Contiguous factors of one axis as few names as possible (the axis's own name when whole)."""
        out: list[str] = []
        start = fs[0]
        prev = fs[0]
        for f in [*fs[1:], None]:
            if f is not None and f.pre == prev.stop:
                prev = f
                continue
            whole = self.coarse[start.parent].size
            if start.pre == 1 and prev.stop == whole:
                out.append(start.parent)
            else:
                out.append(Factor(start.parent, start.pre, prev.stop // start.pre).name)
            if f is not None:
                start = prev = f
        return out

    def coarsen(self, node):  # Tensor | Plan | Step, same type back
        """A tensor, step or plan written back in the coarse mesh's axes."""
        if self.trivial:
            return node
        if isinstance(node, Tensor):
            dims = tuple(d.with_axes(self.coarsen_axes(d.axes)) if d.axes else d for d in node.dims)
            return Tensor(
                node.name,
                dims,
                self.coarsen_axes(node.unreduced, ordered=False),
                self.coarsen_axes(node.invariant, ordered=False),
                node.dtype,
                span=node.span,
            )
        if isinstance(node, Step):
            return Step(
                node.op,
                tuple(self.coarsen(t) for t in node.inputs),
                self.coarsen(node.output),
                self.coarsen_axes(node.axes),
                node.dim,
                node.contract,
                node.local,
                node.reason,
                node.offset,
            )
        if isinstance(node, Plan):
            return Plan(
                tuple(self.coarsen(t) for t in node.inputs),
                tuple(self.coarsen(s) for s in node.steps),
                self.coarsen(node.output),
                node.cases,
                node.note,
            )
        return node


def overlaps(t: Tensor) -> Iterator[tuple[str, str]]:
    """Pairs (first, second) of axes of ``t`` that overlap: a sub-axis and its parent, or two sub-axes of
    one axis that share a factor (``Y:(1)4`` and ``Y:(2)2`` of Y=8 both hold Y:(2)2)."""
    seen: list[tuple[str, Factor | None]] = []
    for a in t.used_axes:
        f = factor_of(a)
        p = parent_of(a)
        for b, g in seen:
            if parent_of(b) != p or b == a:  # the same name twice is the axis-used-twice rule's
                continue
            if f is None or g is None or max(f.pre, g.pre) < min(f.stop, g.stop):
                yield b, a
        seen.append((a, f))


def within(a: str, axes: Iterable[str], mesh: Mesh) -> bool:
    """Whether axis ``a`` lies inside the union of ``axes``: ``Y:(1)2`` inside ``Y``; ``Y`` inside
    ``Y:(1)2, Y:(2)2`` of Y=4."""
    axes = tuple(axes)
    if a in axes:
        return True
    pa = parent_of(a)
    same = [b for b in axes if parent_of(b) == pa]
    if not same:
        return False
    if pa in same:
        return True
    f = factor_of(a)
    lo, hi = (f.pre, f.stop) if f is not None else (1, mesh[pa].size)
    if hi is None:
        return False
    cur = lo
    for g in sorted(x for x in map(factor_of, same) if x is not None):
        if g.pre <= cur < g.stop:
            cur = g.stop
    return cur >= hi


def with_parts(used: Iterable[str], axes: tuple[str, ...], mesh: Mesh) -> tuple[str, ...]:
    """``axes`` and every axis in ``used`` (a tensor's) that lies inside them (:func:`within`): what a
    collective over ``axes`` takes in whole, when a plan names a whole axis on one side and its factors on
    the other."""
    used = tuple(used)
    if not any(":" in a for a in axes) and not any(":" in a for a in used):
        return axes
    return axes + tuple(a for a in used if a not in axes and within(a, axes, mesh))


def _stop(names: tuple[str, ...]) -> int:
    last = factor_of(names[-1])
    return last.stop if last is not None else 0


def refine(mesh: Mesh, names: Iterable[str] = (), extra: dict[str, set[int]] | None = None) -> Refinement:
    """The refinement of ``mesh`` that the sub-axis ``names`` cut (others are ignored), plus the cuts in
    ``extra`` (axis -> pre-sizes, as :func:`prime_cuts` gives); a UsageError when the cuts of an axis do
    not nest."""
    cuts: dict[str, set[int]] = {k: set(v) for k, v in (extra or {}).items()}
    for a in names:
        f = factor_of(a)
        if f is None:
            continue
        mesh[a]  # noqa: B018 -- raises UnknownAxis (with the reason) for a factor the mesh lacks
        cuts.setdefault(f.parent, set()).update((f.pre, f.stop))
    parts: list[tuple[str, tuple[Factor, ...]]] = []
    for parent, points in cuts.items():
        size = mesh[parent].size
        if size is None:
            raise UsageError(
                f"the sub-axes of {parent} need its size: give the mesh a number for {parent}, e.g. {parent}=4"
            )
        chain = sorted(points | {1, size})
        for a, b in zip(chain, chain[1:], strict=False):
            if b % a:
                raise UsageError(
                    f"the sub-axes of {parent} cut it at pre-sizes {a} and {b}, which do not nest "
                    f"({a} does not divide {b}): no refinement of {parent}={size} holds both"
                )
        if len(chain) > 2:
            parts.append(
                (parent, tuple(Factor(parent, a, b // a) for a, b in zip(chain, chain[1:], strict=False)))
            )
    if not parts:
        return Refinement(mesh, mesh, ())
    table = dict(parts)
    axes: list[Axis] = []
    for ax in mesh:
        if ax.name in table:
            axes.extend(Axis(f.name, f.size, ax.links, ax.wraps, dcn=ax.dcn) for f in table[ax.name])
        else:
            axes.append(ax)
    return Refinement(mesh, Mesh(axes), tuple(sorted(parts)))


def declared_cuts(mesh: Mesh) -> dict[str, set[int]]:
    """The cuts of the axes the mesh declares factored (``Y=2x2``: Y cut at pre-sizes 1 and 2)."""
    out: dict[str, set[int]] = {}
    for ax in mesh:
        if ax.factors:
            pre, points = 1, set()
            for f in ax.factors:
                points.add(pre)
                pre *= f
            out[ax.name] = points
    return out


def prime_cuts(mesh: Mesh, axes: Iterable[str] | None = None) -> dict[str, set[int]]:
    """The cuts that split each axis (of ``axes``, default all) with a numeric, composite size into its
    prime factors, major first: Y=4 into Y:(1)2, Y:(2)2; Z=12 into Z:(1)2, Z:(2)2, Z:(4)3."""
    out: dict[str, set[int]] = {}
    for ax in mesh:
        if (axes is not None and ax.name not in axes) or ax.size is None or ax.node is not None:
            continue
        n, p, pre, points = ax.size, 2, 1, set()
        while n > 1:
            while n % p == 0:
                points.add(pre)
                pre *= p
                n //= p
            p += 1
        if len(points) > 1:
            out[ax.name] = points
    return out
