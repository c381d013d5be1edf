"""A tensor's sharding as a value: the axes of each dim (major first), the unreduced and invariant axes.

The rules (:mod:`shardalg.algebra.ops`), redistribute and the planner work on :class:`Layout` values; a Tensor is
rebuilt from one with :func:`tensor_with`. :func:`validate` holds the per-tensor rules every rule's input obeys.
"""

from __future__ import annotations

from typing import NamedTuple

from shardalg.errors import AxisUsedTwice
from shardalg.notation.syntax import Tensor

from .mesh import Mesh

__all__ = ["Axes", "Layout", "subscript", "tensor_with", "validate"]

Axes = tuple[str, ...]


def subscript(axes: Axes | list[str]) -> str:
    """Axes as a subscript: ``XY``, or ``{data,model}`` when a name has more than one letter."""
    return "".join(axes) if all(len(a) == 1 for a in axes) else "{" + ",".join(axes) + "}"


class Layout(NamedTuple):
    """A tensor's sharding alone: the axes of each dim (major first), the unreduced and invariant axes."""

    dims: tuple[Axes, ...]
    unreduced: Axes
    invariant: Axes

    @classmethod
    def of(cls, t: Tensor) -> Layout:
        return cls(*t.layout())

    @property
    def sharding(self) -> frozenset[str]:
        return frozenset(a for axes in self.dims for a in axes)

    def holder(self, axis: str) -> int | None:
        """The index of the dim sharded over ``axis``, or None."""
        for i, axes in enumerate(self.dims):
            if axis in axes:
                return i
        return None

    def free(self, mesh: Mesh) -> Axes:
        """Mesh axes that neither shard a dim nor are unreduced (R or I), in mesh order."""
        used = self.sharding | set(self.unreduced)
        return tuple(a for a in mesh.names if a not in used)


def tensor_with(t: Tensor, layout: Layout) -> Tensor:
    """``t`` with its sharding replaced by ``layout`` (name, dim names and sizes, dtype kept); ``t`` itself
    when the layout is its own."""
    dims = tuple(
        [d if d.axes == axes else d.with_axes(axes) for d, axes in zip(t.dims, layout.dims, strict=True)]
    )
    if dims == t.dims and layout.unreduced == t.unreduced and layout.invariant == t.invariant:
        return t
    return Tensor(t.name, dims, layout.unreduced, layout.invariant, t.dtype)


def validate(t: Tensor, mesh: Mesh) -> None:
    """The per-tensor rules a rule's input must obey: known axes, each used once."""
    used = t.used_axes
    if len(set(used)) == len(used) and mesh.has_all(used):  # the common case: nothing to say
        return
    seen: set[str] = set()
    for a in used:
        mesh[a]  # UnknownAxis
        if a in seen:
            raise AxisUsedTwice(f"mesh axis {a} is used twice in {t}", span=t.span)
        seen.add(a)
