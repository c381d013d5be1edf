"""The device mesh: named axes, each with a size, a link multiplicity M and a wraparound flag.

    >>> Mesh(X=4, Y=2)
    Mesh(X=4, Y=2)
    >>> Mesh({"X": 4, "Y": 2}).devices
    8

An axis size may be left symbolic (``Mesh(X=None)``) for derivations; ``size_expr`` then gives the positive
integer symbol ``X`` from :mod:`shardalg.algebra.symbols`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from math import prod

from shardalg import limits
from shardalg.errors import UnknownAxis, UsageError

__all__ = ["Axis", "Mesh", "as_mesh"]

_AXIS_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*\Z")


@dataclass(frozen=True)
class Axis:
    """One mesh axis. ``links`` is the book's M (physical ICI axes backing it, bandwidth x M);
    ``wraps`` is True for a ring with wraparound, False for a line, None when the chip decides."""

    name: str
    size: int | None
    links: int = 1
    wraps: bool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _AXIS_NAME.match(self.name):
            raise UsageError(f"bad mesh axis name {self.name!r}: letters and digits, starting with a letter")
        if self.size is not None and (isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1):
            raise UsageError(f"mesh axis {self.name} needs a positive integer size, not {self.size!r}")
        if self.size is not None:
            limits.require_size(self.size, f"the size of mesh axis {self.name}")
        if isinstance(self.links, bool) or not isinstance(self.links, int) or self.links < 1:
            raise UsageError(f"mesh axis {self.name} needs a positive integer link count, not {self.links!r}")


class Mesh:
    """An ordered set of named axes. Immutable and hashable.

    Accepts ``Mesh(X=4, Y=2)``, ``Mesh({"X": 4, "Y": 2})``, ``Mesh([Axis("X", 4, links=2)])`` or
    ``Mesh.parse("X=4,Y=2")`` (the CLI's ``--mesh`` form).
    """

    __slots__ = ("_axes", "_index")

    def __init__(self, axes: Mapping[str, int | None] | Iterable[Axis] | None = None, /, **sizes: int | None):
        items: list[Axis] = []
        if isinstance(axes, Mapping):
            items.extend(Axis(str(k), v) for k, v in axes.items())
        elif axes is not None:
            for a in axes:
                if not isinstance(a, Axis):
                    raise UsageError(f"Mesh takes a mapping of sizes or Axis values, not {a!r}")
                items.append(a)
        items.extend(Axis(k, v) for k, v in sizes.items())
        index: dict[str, Axis] = {}
        for a in items:
            if a.name in index:
                raise UsageError(f"mesh axis {a.name} is declared twice")
            index[a.name] = a
        self._axes = tuple(items)
        self._index = index

    @classmethod
    def parse(cls, text: str) -> Mesh:
        """``"X=4,Y=2"`` (also ``"X=4 Y=2"``, ``"X:4"``); optional ``*M`` link multiplicity: ``"X=16*2"``."""
        axes: list[Axis] = []
        for part in re.split(r"[,\s]+", text.strip()):
            if not part:
                continue
            m = re.fullmatch(r"([A-Za-z][A-Za-z0-9]*)[=:](\d+)(?:\*(\d+))?", part)
            if m is None:
                raise UsageError(f"bad mesh axis {part!r}: write NAME=SIZE, e.g. X=4,Y=2")
            size = limits.require_digits(m[2], f"the size of mesh axis {m[1]}")
            links = limits.require_digits(m[3], f"the link count of mesh axis {m[1]}") if m[3] else 1
            axes.append(Axis(m[1], size, links))
        if not axes:
            raise UsageError("the mesh has no axes: write NAME=SIZE, e.g. X=4,Y=2")
        return cls(axes)

    @property
    def axes(self) -> tuple[Axis, ...]:
        return self._axes

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self._axes)

    def __getitem__(self, name: str) -> Axis:
        try:
            return self._index[name]
        except KeyError:
            raise UnknownAxis(
                f"mesh axis {name} is not in the mesh ({', '.join(self.names) or 'no axes'})"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __iter__(self) -> Iterator[Axis]:
        return iter(self._axes)

    def __len__(self) -> int:
        return len(self._axes)

    def size(self, name: str) -> int:
        """The numeric size of an axis; a UsageError when it is symbolic."""
        s = self[name].size
        if s is None:
            raise UsageError(f"mesh axis {name} has no numeric size")
        return s

    def size_expr(self, name: str):  # -> sympy.Expr
        """The size as a sympy value: the integer, or the positive integer symbol named after the axis."""
        from .symbols import axis_size

        s = self[name].size
        return axis_size(name) if s is None else s

    def group_size(self, axes: Iterable[str]) -> int:
        return prod(self.size(a) for a in axes)

    @property
    def is_numeric(self) -> bool:
        return all(a.size is not None for a in self._axes)

    @property
    def devices(self) -> int:
        return prod(self.size(a.name) for a in self._axes)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.size(a.name) for a in self._axes)

    def with_axis(self, axis: Axis) -> Mesh:
        """The mesh with ``axis`` replacing the axis of that name (or appended)."""
        if axis.name in self._index:
            return Mesh([axis if a.name == axis.name else a for a in self._axes])
        return Mesh([*self._axes, axis])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mesh) and self._axes == other._axes

    def __hash__(self) -> int:
        return hash(self._axes)

    def __repr__(self) -> str:
        def one(a: Axis) -> str:
            extra = []
            if a.links != 1:
                extra.append(f"links={a.links}")
            if a.wraps is not None:
                extra.append(f"wraps={a.wraps}")
            return f"{a.name}={a.size}" + (f"({', '.join(extra)})" if extra else "")

        return f"Mesh({', '.join(one(a) for a in self._axes)})"

    def text(self) -> str:
        """The notation's form, ``mesh X=4, Y=2``."""
        return "mesh " + ", ".join(f"{a.name}={a.size}" for a in self._axes)


def as_mesh(mesh: Mesh | Mapping[str, int | None] | str | None) -> Mesh | None:
    """Normalize what the API accepts as a mesh."""
    if mesh is None or isinstance(mesh, Mesh):
        return mesh
    if isinstance(mesh, str):
        return Mesh.parse(mesh)
    if isinstance(mesh, Mapping):
        return Mesh(mesh)
    raise UsageError(f"a mesh is a Mesh, a mapping of axis sizes or text like 'X=4,Y=2', not {mesh!r}")
