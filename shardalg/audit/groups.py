"""Replica groups mapped back to mesh axes and sub-axes.

A replica group is a list of device ids; the mesh puts each device at coordinates (one per axis, row-major
over ``devices``, the mesh's device ids in order). A group that varies some axes fully and holds the others
fixed is a collective over those axes. A group that walks an axis in steps (``Y`` of 4 at ``0, 2``) is over a
**sub-axis**, written as Shardy writes it: ``Y:(k)m`` is the factor of size ``m`` with ``k`` devices of ``Y``
before it (``Y:(1)2`` is the major half of ``Y=4``: coordinates 0 and 2; ``Y:(2)2`` the minor: 0 and 1).
The axes are listed major first: the one whose coordinate changes slowest along the group's device list.

Pure data: no jax.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["GroupAxes", "axes_of_groups", "permute_axes", "permute_cycle", "refinement"]


@dataclass(frozen=True)
class GroupAxes:
    """The axes a set of replica groups runs over (major first, each ``"X"`` or ``"Y:(k)m"``), or why it
    cannot be said (``axes`` empty and ``problem`` set)."""

    axes: tuple[str, ...]
    problem: str = ""

    @property
    def sub_axes(self) -> tuple[str, ...]:
        return tuple(a for a in self.axes if ":" in a)

    @property
    def text(self) -> str:
        """The axes as a subscript: ``XY``, or ``{X,Y:(1)2}`` when a name is longer than a letter."""
        if all(len(a) == 1 for a in self.axes):
            return "".join(self.axes)
        return "{" + ",".join(self.axes) + "}"


def _coords(index: int, sizes: Sequence[int]) -> tuple[int, ...]:
    out = []
    for s in reversed(sizes):
        out.append(index % s)
        index //= s
    return tuple(reversed(out))


def _one_group(
    group: Sequence[int], names: Sequence[str], sizes: Sequence[int], where: dict[int, tuple[int, ...]]
) -> GroupAxes:
    if any(d not in where for d in group):
        return GroupAxes((), f"device {[d for d in group if d not in where][0]} is not on the mesh")
    pts = [where[d] for d in group]
    spelled: list[tuple[int, str]] = []  # (position in the group where it first changes, spelling)
    count = 1
    for k, (name, size) in enumerate(zip(names, sizes, strict=True)):
        values = sorted({p[k] for p in pts})
        if len(values) == 1:
            continue
        step = values[1] - values[0]
        m = len(values)
        if any(b - a != step for a, b in zip(values, values[1:], strict=False)) or size % (step * m):
            return GroupAxes((), f"the group {list(group)} takes axis {name} at {values}, not a factor of it")
        pre = size // (step * m)
        spelled_name = name if m == size else f"{name}:({pre}){m}"
        first = next(i for i, p in enumerate(pts) if p[k] != pts[0][k])
        spelled.append((first, spelled_name))
        count *= m
    if count != len(group) or len(set(pts)) != len(pts):
        return GroupAxes((), f"the group {list(group)} is not a product of mesh axes")
    spelled.sort(key=lambda fs: -fs[0])  # changes last along the list (slowest) = major
    return GroupAxes(tuple(s for _, s in spelled))


def axes_of_groups(
    groups: Sequence[Sequence[int]], names: Sequence[str], sizes: Sequence[int], devices: Sequence[int]
) -> GroupAxes:
    """The mesh axes (and sub-axes) every group of ``groups`` runs over; ``devices`` are the mesh's device
    ids in row-major order. A collective's groups must all run over the same axes, and cover the mesh."""
    where = {d: _coords(i, sizes) for i, d in enumerate(devices)}
    if not groups:  # XLA's empty replica_groups: every device in one group
        groups = [list(devices)]
    results = {_one_group(g, names, sizes, where) for g in groups}
    if len(results) != 1:
        texts = sorted(r.problem or r.text for r in results)
        return GroupAxes((), f"the replica groups run over different axes: {', '.join(texts)}")
    (only,) = results
    covered = sorted(d for g in groups for d in g)
    if not only.problem and covered != sorted(devices):
        return GroupAxes((), "the replica groups do not cover the mesh once")
    return only


def permute_axes(
    pairs: Sequence[Sequence[int]], names: Sequence[str], sizes: Sequence[int], devices: Sequence[int]
) -> GroupAxes:
    """The axes a collective-permute's source-target pairs move along (the coordinates that change)."""
    where = {d: _coords(i, sizes) for i, d in enumerate(devices)}
    moved = sorted(
        {
            k
            for s, t in pairs
            if s in where and t in where
            for k in range(len(names))
            if where[s][k] != where[t][k]
        }
    )
    if not moved:
        return GroupAxes((), "the permute's pairs are not on the mesh")
    return GroupAxes(tuple(names[k] for k in moved))


def _factor(axis: str) -> tuple[str, int, int] | None:
    """``Y:(k)m`` as (Y, k, m); None for a whole axis."""
    if ":" not in axis:
        return None
    name, rest = axis.split(":")
    return name, int(rest[1 : rest.index(")")]), int(rest[rest.index(")") + 1 :])


def refinement(mesh: dict[str, int], used: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Each axis of ``mesh`` that the sub-axes in ``used`` cut, as its factors major first (``Y=4`` cut by
    ``Y:(1)2``: ``(Y:(1)2, Y:(2)2)``); axes no sub-axis cuts are left out."""
    cuts: dict[str, set[int]] = {}
    for a in used:
        f = _factor(a)
        if f is not None:
            name, k, m = f
            cuts.setdefault(name, {1, mesh[name]}).update({k, k * m})
    out = {}
    for name, points in cuts.items():
        edges = sorted(points)
        out[name] = tuple(f"{name}:({lo}){hi // lo}" for lo, hi in zip(edges, edges[1:], strict=False))
    return out


def permute_cycle(
    before: Sequence[Sequence[str]], after: Sequence[Sequence[str]], mesh: dict[str, int]
) -> tuple[str, ...] | None:
    """The notation's ``Permute_{A,B,...}`` (A renamed to B, B to ..., the last to A) that takes a layout
    whose dims are sharded over ``before`` (per dim, major first) to ``after``, over the mesh refined into
    the factors either side names; None when the move is not one cycle of names of one size (the axes a
    tensor is replicated over fill the cycle: they are the names its shards leave and arrive on)."""
    used = [a for axes in [*before, *after] for a in axes]
    refine = refinement(mesh, used)

    def flat(dims: Sequence[Sequence[str]]) -> list[tuple[str, ...]]:
        return [tuple(f for a in axes for f in refine.get(a, (a,))) for axes in dims]

    def size(a: str) -> int:
        f = _factor(a)
        return mesh[a] if f is None else f[2]

    src, dst = flat(before), flat(after)
    if [len(d) for d in src] != [len(d) for d in dst]:
        return None
    rename = {a: b for s, d in zip(src, dst, strict=True) for a, b in zip(s, d, strict=True) if a != b}
    if len(set(rename.values())) != len(rename):
        return None
    # names only arrived on map back to names only left (one each, else the cycle is not determined)
    arrived = [b for b in rename.values() if b not in rename]
    left = [a for a in rename if a not in rename.values()]
    if len(arrived) != len(left) or len(arrived) > 1:
        return None
    rename.update(zip(arrived, left, strict=True))
    if not rename or len({size(a) for a in rename}) != 1:
        return None
    start = next(iter(rename))
    cycle = [start]
    while rename[cycle[-1]] != start:
        cycle.append(rename[cycle[-1]])
    return tuple(cycle) if len(cycle) == len(rename) else None
