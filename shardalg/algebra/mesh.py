"""The device mesh: named axes, each with a size, a link multiplicity M, a wraparound flag and (for a GPU
axis that spans nodes) the devices per node along it; an axis made from a real slice
(:mod:`shardalg.costs.topology`) also knows the physical torus axes under it, whether it runs over DCN, and
(GPU) the devices per leaf unit along it.

    >>> Mesh(X=4, Y=2)
    Mesh(X=4, Y=2)
    >>> Mesh({"X": 4, "Y": 2}).devices
    8
    >>> Mesh.parse("X=16*2:ring,Y=4:line,Z")
    Mesh(X=16(links=2, wraps=True), Y=4(wraps=False), Z=None)

An axis size may be left symbolic (``Mesh(X=None)``) for derivations; ``size_expr`` then gives the positive
integer symbol ``X`` from :mod:`shardalg.algebra.symbols`. :meth:`Mesh.parse` is the one reader of mesh text
(every command's ``--mesh``); its grammar is in :data:`MESH_TEXT`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from math import prod

from shardalg import limits
from shardalg.cache import Kind, memoized
from shardalg.errors import UnknownAxis, UsageError

from .factors import SUBAXIS, factor_of

__all__ = ["Axis", "Mesh", "as_mesh", "a_mesh", "MESH_TEXT"]

_AXIS_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*\Z")

MESH_TEXT = (
    "NAME[=SIZE][*LINKS][:ring|:line][:nodeN], comma separated: X=4,Y=2 (sizes); X (a symbolic size); "
    "X=16*2 (M = 2 links back the axis); X=4:ring or Y=4:line (wraparound or not, instead of the chip's rule); "
    "X*2:ring (symbolic size, numeric links); X=64:node8 (a GPU axis whose 64 devices sit 8 to a node); "
    "X=1024:node8:leaf256 (and 256 to a leaf switch group); X=320*2:torus16x20 (the physical torus axes under "
    "X); P=2:dcn (over the data-center network); Y=2x2 (an axis of 4 declared factored, major first: plans may "
    "use its sub-axes Y:(1)2 and Y:(2)2)"
)
# One axis of mesh text: name, size (legacy X:4 too; 2x2 declares its factors), links, then :options.
_AXIS_TEXT = re.compile(
    r"([A-Za-z][A-Za-z0-9]*)(?:[=:]([0-9]+(?:x[0-9]+)*))?(?:\*([0-9]+))?((?::[A-Za-z0-9]+)*)"
)
_NODE_OPTION = re.compile(r"(node|leaf)([0-9]+)")
_TORUS_OPTION = re.compile(r"torus([0-9]+(?:x[0-9]+)*)")


@dataclass(frozen=True)
class Axis:
    """One mesh axis. ``links`` is the book's M (physical ICI axes backing it, bandwidth x M);
    ``wraps`` is True for a ring with wraparound, False for a line, None when the chip decides.
    ``node`` is set for a GPU axis that spans nodes: the devices per node along the axis (NVLink inside a
    node, the scale-out network across); None when the whole axis sits in one NVLink domain. ``leaf``: the
    devices per leaf switch group (a scalable unit) along the axis, when it spans several (a spine level
    joins them); None when the axis lies under one leaf group. ``torus``: the sides of the physical torus
    axes under the axis (their product is the size, their count the links): each side is its own ring, so a
    collective's hops are summed per side, not counted over the whole size. ``strides``: per torus side, the
    physical links one step along it crosses and the physical side it is a factor of, when a side is a
    factor of a physical torus axis (``z:(1)4``; :mod:`shardalg.costs.topology` derives them, and
    :mod:`shardalg.costs.stepcost` prices them); empty when every side is a whole physical axis. ``dcn``: the axis joins slices over the data-center network."""

    name: str
    size: int | None
    links: int = 1
    wraps: bool | None = None
    node: int | None = None
    leaf: int | None = None
    torus: tuple[int, ...] = ()
    dcn: bool = False
    factors: tuple[int, ...] = ()  # declared factored (Y=2x2), major first: the planner uses its sub-axes
    strides: tuple[tuple[int, int], ...] = ()  # per torus side: (links a step crosses, its physical side)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not (
            _AXIS_NAME.match(self.name) or SUBAXIS.fullmatch(self.name)
        ):
            raise UsageError(f"bad mesh axis name {self.name!r}: letters and digits, starting with a letter")
        if self.size is not None and (
            isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1
        ):
            raise UsageError(f"mesh axis {self.name} needs a positive integer size, not {self.size!r}")
        if self.size is not None:
            limits.require_size(self.size, f"the size of mesh axis {self.name}")
        if isinstance(self.links, bool) or not isinstance(self.links, int) or self.links < 1:
            raise UsageError(f"mesh axis {self.name} needs a positive integer link count, not {self.links!r}")
        if self.node is not None:
            if isinstance(self.node, bool) or not isinstance(self.node, int) or self.node < 1:
                raise UsageError(
                    f"mesh axis {self.name} needs a positive integer of devices per node, not {self.node!r}"
                )
            if self.size is not None and self.size % self.node:
                raise UsageError(
                    f"mesh axis {self.name} has {self.size} devices, not a multiple of {self.node} per node",
                    fix=f"make the size a multiple of the node: {self.name}={self.node * max(1, self.size // self.node)}:node{self.node}",
                )
        if self.leaf is not None:
            if isinstance(self.leaf, bool) or not isinstance(self.leaf, int) or self.leaf < 1:
                raise UsageError(f"mesh axis {self.name} needs a positive integer of devices per leaf group")
            if self.node is None or self.leaf % self.node:
                raise UsageError(
                    f"mesh axis {self.name}: its devices per leaf group ({self.leaf}) must be a multiple of its "
                    "devices per node (:nodeN)",
                    fix=f"give both, e.g. {self.name}=1024:node8:leaf256",
                )
            if self.size is not None and self.size % self.leaf:
                raise UsageError(
                    f"mesh axis {self.name} has {self.size} devices, not a multiple of {self.leaf} per leaf group"
                )
        if self.torus:
            if not all(isinstance(n, int) and not isinstance(n, bool) and n > 1 for n in self.torus):
                raise UsageError(
                    f"mesh axis {self.name}: its torus sides are integers above 1, not {self.torus}"
                )
            if self.size is not None and prod(self.torus) != self.size:
                raise UsageError(
                    f"mesh axis {self.name} has {self.size} devices, but its torus sides "
                    f"{'x'.join(map(str, self.torus))} hold {prod(self.torus)}"
                )
            if len(self.torus) != self.links:
                raise UsageError(
                    f"mesh axis {self.name} stands on {len(self.torus)} torus axes but says {self.links} links",
                    fix=f"one link per torus axis: {self.name}={prod(self.torus)}*{len(self.torus)}",
                )
        if self.strides and (
            len(self.strides) != len(self.torus)
            or not all(
                isinstance(k, int) and isinstance(s, int) and k >= 1 and s % (k * n) == 0
                for (k, s), n in zip(self.strides, self.torus, strict=False)
            )
        ):
            raise UsageError(
                f"mesh axis {self.name}: each torus side needs (links a step crosses, the physical side it is "
                f"a factor of), the side a multiple of the stride times the factor; not {self.strides}"
            )
        if self.dcn and (self.node is not None or self.torus):
            raise UsageError(f"mesh axis {self.name} runs over DCN: it has no node or torus sides")


class Mesh:
    """An ordered set of named axes. Immutable and hashable.

    Accepts ``Mesh(X=4, Y=2)``, ``Mesh({"X": 4, "Y": 2})``, ``Mesh([Axis("X", 4, links=2)])``, or the CLI's
    ``--mesh`` text: ``Mesh("X=4,Y=2")`` (as ``Mesh.parse("X=4,Y=2")``).
    """

    __slots__ = ("_axes", "_index", "_names", "_hash", "_groups", "_subs")

    def __init__(
        self, axes: Mapping[str, int | None] | Iterable[Axis] | str | None = None, /, **sizes: int | None
    ):
        items: list[Axis] = []
        if isinstance(axes, str):
            items.extend(Mesh.parse(axes).axes)
        elif isinstance(axes, Mapping):
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
        # a mesh is immutable: its names and hash are made once (every cache of the planner is keyed by a mesh)
        self._names = tuple(a.name for a in self._axes)
        self._hash = hash(self._axes)
        self._groups: dict[
            tuple[str, ...], int | None
        ] = {}  # known_group's answers (few: one per axes tuple)
        self._subs: dict[str, Axis | str] = {}  # each sub-axis name asked for: its Axis, or why it is none

    @classmethod
    def parse(cls, text: str) -> Mesh:
        """Mesh text (the CLI's ``--mesh``), as :data:`MESH_TEXT` describes: ``"X=4,Y=2"`` (also
        ``"X=4 Y=2"``, ``"X:4"``), a symbolic size ``"X"``, links ``"X=16*2"``, wraparound ``"X=4:ring"`` /
        ``"Y=4:line"``, devices per node ``"X=64:node8"``. Nothing here evaluates the text."""
        axes: list[Axis] = []
        for part in re.split(r"[,\s]+", text.strip()) if isinstance(text, str) else [repr(text)]:
            if part:
                axes.append(_axis_from_text(part))
        if not axes:
            raise UsageError(f"the mesh has no axes: write {MESH_TEXT}")
        return cls(axes)

    @property
    def axes(self) -> tuple[Axis, ...]:
        return self._axes

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    def __getitem__(self, name: str) -> Axis:
        try:
            return self._index[name]
        except KeyError:
            got = self._sub(name) if isinstance(name, str) and ":" in name else None
            if isinstance(got, Axis):
                return got
            raise UnknownAxis(
                got or f"mesh axis {name} is not in the mesh ({', '.join(self.names) or 'no axes'})"
            ) from None

    def __contains__(self, name: object) -> bool:
        if name in self._index:
            return True
        return isinstance(name, str) and ":" in name and isinstance(self._sub(name), Axis)

    def _sub(self, name: str) -> Axis | str:
        """The sub-axis ``name`` (``Y:(1)2``, :mod:`.factors`) as an axis of its own: its size, and its
        parent's links and wraparound; or the sentence saying why the mesh has no such factor."""
        got = self._subs.get(name)
        if got is None:
            got = self._subs[name] = _factor_axis(self, name)
        return got

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

    def has_all(self, axes: Iterable[str]) -> bool:
        """Whether every one of ``axes`` is an axis of the mesh."""
        index = self._index
        for a in axes:
            if a not in index and a not in self:
                return False
        return True

    def known_group(self, axes: tuple[str, ...]) -> int | None:
        """The devices in the group of ``axes`` (the product of their sizes), or None when one is symbolic;
        an UnknownAxis for an axis not in the mesh. Kept per axes tuple (the planner asks for the same few)."""
        got = self._groups.get(axes, 0)
        if got == 0:
            n: int | None = 1
            for a in axes:
                size = self[a].size
                if size is None:
                    n = None
                    break
                n *= size
            got = self._groups[axes] = n
        return got

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
        return self._hash

    def __reduce__(self) -> tuple[type[Mesh], tuple[tuple[Axis, ...]]]:
        """Pickled as its axes, so another process hashes it anew (string hashes differ per process)."""
        return Mesh, (self._axes,)

    def __repr__(self) -> str:
        def one(a: Axis) -> str:
            extra = []
            if a.links != 1:
                extra.append(f"links={a.links}")
            if a.wraps is not None:
                extra.append(f"wraps={a.wraps}")
            if a.node is not None:
                extra.append(f"node={a.node}")
            if a.leaf is not None:
                extra.append(f"leaf={a.leaf}")
            if a.torus:
                extra.append(f"torus={'x'.join(map(str, a.torus))}")
            if a.strides:
                extra.append("strides=" + ",".join(f"{k}of{s}" for k, s in a.strides))
            if a.dcn:
                extra.append("dcn")
            if a.factors:
                extra.append(f"factors={'x'.join(map(str, a.factors))}")
            return f"{a.name}={a.size}" + (f"({', '.join(extra)})" if extra else "")

        return f"Mesh({', '.join(one(a) for a in self._axes)})"

    def text(self) -> str:
        """The notation's form, ``mesh X=4, Y=2``."""
        return "mesh " + ", ".join(f"{a.name}={a.size}" for a in self._axes)


def _factor_axis(mesh: Mesh, name: str) -> Axis | str:
    """A sub-axis of ``mesh`` as an :class:`Axis` (the parent's links and wraparound), or why it is none."""
    f = factor_of(name)
    if f is None:
        return f"{name!r} is neither a mesh axis nor a sub-axis: write a factor of an axis as Y:(1)2"
    parent = mesh._index.get(f.parent)
    if parent is None:
        return f"sub-axis {name} is a factor of mesh axis {f.parent}, which is not in the mesh ({', '.join(mesh.names) or 'no axes'})"
    if f.size < 2 or f.pre < 1:
        return f"sub-axis {name} needs a size of at least 2 and a pre-size of at least 1"
    if parent.node is not None:
        return f"sub-axis {name}: factors of an axis that spans nodes ({f.parent}=...:node{parent.node}) are not modelled"
    if parent.size is not None and parent.size % f.stop:
        return (
            f"sub-axis {name} is not a factor of {f.parent}={parent.size}: its pre-size times its size, "
            f"{f.pre}·{f.size} = {f.stop}, must divide {parent.size}"
        )
    if parent.size is not None and f.pre == 1 and f.size == parent.size:  # Shardy refuses it too
        return f"sub-axis {name} is the whole of {f.parent}={parent.size}: write {f.parent}"
    return Axis(name, f.size, parent.links, parent.wraps, dcn=parent.dcn)


def _axis_from_text(part: str) -> Axis:
    """One axis of mesh text; a UsageError that names the part and shows the forms when it is malformed."""
    m = _AXIS_TEXT.fullmatch(part)
    if m is None:
        raise UsageError(f"bad mesh axis {part!r}: write {MESH_TEXT}")
    name, size, links, options = m[1], m[2], m[3], [o for o in m[4].split(":") if o]
    wraps: bool | None = None
    node: int | None = None
    leaf: int | None = None
    torus: tuple[int, ...] = ()
    dcn = False
    for option in options:
        found = _NODE_OPTION.fullmatch(option)
        sides = _TORUS_OPTION.fullmatch(option)
        if option == "dcn":
            dcn = True
        elif sides is not None:
            torus = tuple(
                limits.require_digits(n, f"a torus side of mesh axis {name}") for n in sides[1].split("x")
            )
        elif option in ("ring", "line"):
            if wraps is not None:
                raise UsageError(
                    f"mesh axis {part!r} says ring or line twice", fix=f"keep one: {name}=...:{option}"
                )
            wraps = option == "ring"
        elif found is not None:
            count = limits.require_digits(found[2], f"the devices per {found[1]} of mesh axis {name}")
            if (node if found[1] == "node" else leaf) is not None:
                raise UsageError(f"mesh axis {part!r} gives its devices per {found[1]} twice")
            if found[1] == "node":
                node = count
            else:
                leaf = count
        else:
            raise UsageError(
                f"unknown option :{option} of mesh axis {name}: the options are :ring, :line, "
                f":nodeN (devices per node), :leafN (devices per leaf group), :torusAxB (torus sides) and "
                f":dcn, e.g. {name}=4:ring"
            )
    factors: tuple[int, ...] = ()
    if size is not None and "x" in size:  # Y=2x2: the axis of 4 declared as its factors, major first
        factors = tuple(limits.require_digits(f, f"a factor of mesh axis {name}") for f in size.split("x"))
        if any(f < 2 for f in factors):
            raise UsageError(f"mesh axis {part!r}: each factor is at least 2", fix=f"write e.g. {name}=2x2")
        size = str(prod(factors))
    n = limits.require_digits(size, f"the size of mesh axis {name}") if size is not None else None
    if n is not None and n < 1:
        raise UsageError(f"mesh axis {name} needs a positive size, not {size}", fix=f"write e.g. {name}=4")
    k = limits.require_digits(links, f"the link count of mesh axis {name}") if links else 1
    if torus and not links:
        k = len(torus)
    if torus and n is None:  # the sides give the size
        n = prod(torus)
    if factors and node is not None:
        raise UsageError(f"mesh axis {part!r}: an axis that spans nodes cannot be declared factored")
    return Axis(name, n, k, wraps, node, leaf, torus, dcn, factors)


@memoized(Kind.PIECE)
def _mesh_of_text(text: str) -> Mesh:
    """``Mesh.parse``, memoized: a mesh is immutable and one text is asked for again by every cost of a plan
    list. A refusal is never cached; a mesh already read is not checked again against a size limit lowered
    later (the axes limit is the legality's, checked on every query)."""
    return Mesh.parse(text)


def as_mesh(mesh: Mesh | Mapping[str, int | None] | str | None) -> Mesh | None:
    """Normalize what the API accepts as a mesh."""
    if mesh is None or isinstance(mesh, Mesh):
        return mesh
    if isinstance(mesh, str):
        return _mesh_of_text(mesh)
    if isinstance(mesh, Mapping):
        return Mesh(mesh)
    raise UsageError(f"a mesh is a Mesh, a mapping of axis sizes or text like 'X=4,Y=2', not {mesh!r}")


def a_mesh_or_none(mesh: object, what: str) -> Mesh | None:
    """:func:`a_mesh`, where no mesh (None) is an answer too (the program's ``mesh`` line may give one)."""
    return None if mesh is None else a_mesh(mesh, what)


def a_mesh(mesh: object, what: str) -> Mesh:
    """``mesh`` as the layers below the public functions take it: a :class:`Mesh`, which the public function
    or the CLI made once from what the user gave (:func:`as_mesh`); anything else is a UsageError naming
    ``what`` (text is not parsed again down here)."""
    if not isinstance(mesh, Mesh):
        raise UsageError(f"{what} takes a Mesh, not {mesh!r}", fix="as_mesh('X=4,Y=2') or Mesh(X=4, Y=2)")
    return mesh
