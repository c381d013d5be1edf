"""XLA's collectives placed on the audited program's statements as steps (:mod:`.program` reads which statement
each one was inserted for): on an operand, before the local product or elementwise op, or on the result, after
it; free slices where the result shards an operand more finely; a collective that several statements of one
line could take goes to the one whose local op it alone makes meet, else it is listed apart. A statement's plan
as read is complete when its local op meets (:func:`meets`, by :func:`shardalg.costs.programplan.program_plan`,
which would otherwise price it by its cheapest plan)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from math import prod
from typing import Any

from shardalg.algebra.mesh import Mesh
from shardalg.costs.programplan import REPLANNED, program_plan
from shardalg.errors import ShardalgError
from shardalg.notation.parse import parse

from .groups import GroupAxes, axes_of_groups, permute_axes, permute_cycle
from .hlo import HloCollective
from .records import Layout, Statement, XlaStep, size_of

__all__ = [
    "place",
    "completes",
    "meets",
    "on_operand",
    "on_result",
    "unmapped",
    "group_axes",
    "aligned",
    "slices",
]


def place(
    st: Statement,
    c: HloCollective,
    order: Mapping[str, Any],
    sizes: Mapping[str, int],
    mesh: Mapping[str, int],
    outside: list[XlaStep],
) -> None:
    """Place one collective (not a permute) on the statement's operand, else on its result."""
    if not on_operand(st, c, order, sizes, mesh, []):
        on_result(st, c, order, mesh, outside)


def meets(st: Statement, sizes: Mapping[str, int], mesh: Mapping[str, int]) -> bool:
    """Whether XLA's plan of ``st`` as read so far (its free slices added) is complete: its local product
    or op meets, so the plan is priced as written, not as shardalg's cheapest."""

    trial = replace(st, before=list(st.before), after=list(st.after))
    if trial.op == "·":
        slices(trial)
    else:
        aligned(trial)
    if any(s.before is None or s.sub_axes for s in trial.steps):
        return False
    try:
        _, said = program_plan(parse(trial.plan_text()), Mesh(dict(mesh)), dict(sizes))
    except ShardalgError:
        return False
    return not any(REPLANNED in n for n in said)


def completes(
    st: Statement,
    c: HloCollective,
    order: Mapping[str, Any],
    sizes: Mapping[str, int],
    mesh: Mapping[str, int],
) -> bool:
    """Whether ``c`` (not a permute) makes XLA's plan of ``st`` complete where it was not."""
    if c.kind == "Permute" or meets(st, sizes, mesh):
        return False
    trial = replace(st, before=list(st.before), after=list(st.after))
    scratch: list[XlaStep] = []
    place(trial, c, order, sizes, mesh, scratch)
    return not scratch and meets(trial, sizes, mesh)


def group_axes(c: HloCollective, order: Mapping[str, Any]) -> GroupAxes:
    names, sizes, devices = order["names"], order["sizes"], order["devices"]
    if c.kind == "Permute":
        return permute_axes(c.groups, names, sizes, devices)
    return axes_of_groups(c.groups, names, sizes, devices)


def unmapped(c: HloCollective, order: Mapping[str, Any], why: str) -> XlaStep:
    g = group_axes(c, order)
    return XlaStep(c.kind, g.axes, c, problem=g.problem or why)


def on_operand(
    st: Statement,
    c: HloCollective,
    order: Mapping[str, Any],
    sizes: Mapping[str, int],
    mesh: Mapping[str, int],
    permutes: list[tuple[HloCollective, GroupAxes]],
) -> bool:
    """Place ``c`` on one of the statement's operands (an all-gather of it); False if it is not one.

    A collective-permute of an operand is held in ``permutes`` until the all-gather that reads its result
    says which layout it made (XLA slices, permutes, then gathers: ``Permute_{X,Y}: B[J, K_X] -> B[J, K_Y]``
    before ``AllGather_Y``)."""
    g = group_axes(c, order)
    if g.problem:
        return False
    axes = g.axes
    if c.kind == "Permute":
        permutes.append((c, g))
        return True
    if c.kind == "AllToAll" and st.op != "·":
        return _all_to_all(st, c, axes, sizes, mesh)
    if c.kind != "AllGather" or c.dim is None:
        return False
    mesh_sub = dict(mesh)
    for a in axes:
        mesh_sub.setdefault(a, size_of([a], mesh))
    for t in [st.before_last(x) for x in st.operands]:
        local = t.local(sizes, mesh_sub)
        dim, held = t.dims[c.dim]
        if local == tuple(c.operand):
            if tuple(held[len(held) - len(axes) :]) == axes:
                after = t.replace_dim(dim, held[: len(held) - len(axes)])
                st.before.append(XlaStep(c.kind, axes, c, t, after, dim))
                return True
        elif permutes and tuple(permutes[0][0].result) == tuple(c.operand):
            # the permute made dim c.dim sharded over the gather's axes, the rest of the layout as it was;
            # before it, XLA sliced the operand (free) when its block was larger than the permute's
            others = [k for k in range(len(local)) if k != c.dim]
            if not all(local[k] == c.operand[k] for k in others) or sizes[dim] != c.result[c.dim]:
                continue
            if local[c.dim] % c.operand[c.dim]:
                continue
            pc, pg = permutes[0]
            moved = t.replace_dim(dim, axes)
            sliced = _sliced(t, dim, local[c.dim] // c.operand[c.dim], moved, pc, order)
            if sliced is None:
                continue
            permutes.pop(0)
            if sliced != t:
                sub = sliced.dims[c.dim][1][-1]
                st.before.append(XlaStep("Slice", (sub,), pc, t, sliced, dim, problem=""))
            # the notation's Permute renames axes in a cycle (XLA's K_{X,Y:(1)2} -> K_Y: X to Y:(1)2 to Y:(2)2)
            cycle = permute_cycle([a for _, a in sliced.dims], [a for _, a in moved.dims], dict(mesh))
            st.before.append(XlaStep("Permute", cycle or pg.axes, pc, sliced, moved, dim))
            st.before.append(XlaStep(c.kind, axes, c, moved, t.replace_dim(dim, ()), dim))
            return True
    return False


def _like_result(st: Statement, t: Layout) -> Layout:
    """Operand ``t`` of an elementwise statement in the layout its local op needs: each of its dims sharded
    as the result's first layout (before the steps on the result) shards it."""
    first = st.after[0].before if st.after and st.after[0].before is not None else st.out
    want = dict(first.dims)
    return replace(t, dims=tuple((d, want.get(d, a)) for d, a in t.dims))


def _all_to_all(
    st: Statement, c: HloCollective, axes: tuple[str, ...], sizes: Mapping[str, int], mesh: Mapping[str, int]
) -> bool:
    """Place an all-to-all on an operand of an elementwise statement: the one operand whose block has the
    collective's elements and that reaches the result's layout by moving exactly ``axes`` (minor last) from
    one of its dims to another (the HLO's tuple form names no dims: the layouts do)."""
    for t in [st.before_last(x) for x in st.operands]:
        want = _like_result(st, t)
        if want == t or prod(t.local(sizes, mesh)) != prod(c.operand):
            continue
        moved = [(d, a, b) for (d, a), (_, b) in zip(t.dims, want.dims, strict=True) if a != b]
        if len(moved) != 2:
            continue
        k = len(axes)
        (d1, a1, b1), (d2, a2, b2) = moved
        for (_src, held, left), (dst, have, get) in (
            ((d1, a1, b1), (d2, a2, b2)),
            ((d2, a2, b2), (d1, a1, b1)),
        ):
            if held[len(held) - k :] == axes and held[: len(held) - k] == left and get == (*have, *axes):
                st.before.append(XlaStep("AllToAll", axes, c, t, want, dst))
                return True
    return False


def aligned(st: Statement) -> None:
    """The free slices XLA made of an elementwise statement's operands: an operand whose dim the result
    (its first layout) shards over more axes than the operand, after XLA's steps on it, is sliced to it."""
    for t in st.operands:
        t = st.before_last(t)
        want = _like_result(st, t)
        for (d, have), (_, need) in zip(t.dims, want.dims, strict=True):
            if have != need and need[: len(have)] == have:
                sliced = t.replace_dim(d, need)
                st.before.append(XlaStep("Slice", need[len(have) :], None, t, sliced, d))
                t = sliced


def slices(st: Statement) -> None:
    """The free slices XLA made (a dynamic-slice, no collective) so that the local product has the partial
    sums its result's first step reduces: a contracted dim sharded over axes on one side only, those axes
    unreduced in the local result, gets the other operand sliced over them."""
    first = st.after[0].before if st.after and st.after[0].before is not None else st.out
    lhs, rhs = st.before_last(st.lhs), st.before_last(st.rhs)
    out_dims = {d for d, _ in st.out.dims}
    for dim, la in lhs.dims:
        ra = dict(rhs.dims).get(dim)
        if ra is None or dim in out_dims or la == ra:
            continue
        for have, other in ((la, rhs), (ra, lhs)):
            if have and not dict(other.dims)[dim] and set(have) <= set(first.unreduced):
                sliced = other.replace_dim(dim, have)
                st.before.append(XlaStep("Slice", have, None, other, sliced, dim))
                break


def _coordinate(axis: str, coords: Mapping[str, int], mesh: Mapping[str, int]) -> tuple[int, int]:
    """A device's coordinate along an axis or sub-axis ``Y:(k)m``, and that (sub-)axis's size."""
    if ":" not in axis:
        return coords[axis], mesh[axis]
    name, rest = axis.split(":")
    k, m = int(rest[1 : rest.index(")")]), int(rest[rest.index(")") + 1 :])
    return (coords[name] // (mesh[name] // (k * m))) % m, m


def _block(axes: Sequence[str], coords: Mapping[str, int], mesh: Mapping[str, int]) -> int:
    """Which block of a dim sharded over ``axes`` (major first) a device holds."""
    idx = 0
    for a in axes:
        c, n = _coordinate(a, coords, mesh)
        idx = idx * n + c
    return idx


def _sliced(
    t: Layout, dim: str, factor: int, moved: Layout, permute: HloCollective, order: Mapping[str, Any]
) -> Layout | None:
    """The layout XLA sliced ``t`` to before a permute to ``moved``: ``dim`` further split ``factor`` ways
    over the (sub-)axis for which every source-target pair hands the target the block it needs (found
    from the pairs, not assumed); ``t`` itself when ``factor`` is 1; None when no (sub-)axis fits."""
    names, sizes, devices = order["names"], order["sizes"], order["devices"]
    mesh = dict(zip(names, sizes, strict=True))
    where = {}
    for i, d in enumerate(devices):
        rest, coords = i, {}
        for n, s in zip(reversed(names), reversed(sizes), strict=True):
            coords[n] = rest % s
            rest //= s
        where[d] = coords
    held = dict(t.dims)[dim]
    target = dict(moved.dims)[dim]
    candidates: list[tuple[str, ...]] = [held] if factor == 1 else []
    if factor > 1:
        for n, size in mesh.items():
            if n in held or size % factor:
                continue
            for k in range(1, size // factor + 1):
                if (size // factor) % k == 0:
                    candidates.append((*held, n if factor == size else f"{n}:({k}){factor}"))
    for axes in candidates:
        if all(
            _block(axes, where[s], mesh) == _block(target, where[d], mesh)
            for s, d in permute.groups
            if s in where and d in where
        ):
            return t.replace_dim(dim, axes)
    return None


def on_result(
    st: Statement, c: HloCollective, order: Mapping[str, Any], mesh: Mapping[str, int], outside: list[XlaStep]
) -> None:
    """Place ``c`` on the statement's result, working back from its last known layout (the collectives
    on the result are placed last first)."""
    g = group_axes(c, order)
    if g.problem:
        outside.append(XlaStep(c.kind, (), c, problem=g.problem))
        return
    axes = g.axes
    last = st.after[0].before if st.after and st.after[0].before is not None else st.out
    if c.kind == "AllReduce":
        before = replace(last, unreduced=tuple(dict.fromkeys([*last.unreduced, *axes])))
        after = last
        st.after.insert(0, XlaStep(c.kind, axes, c, before, after))
        return
    if c.kind == "ReduceScatter" and c.dim is not None:
        dim, held = last.dims[c.dim]
        if tuple(held[len(held) - len(axes) :]) == axes:
            before = replace(
                last.replace_dim(dim, held[: len(held) - len(axes)]), unreduced=(*last.unreduced, *axes)
            )
            st.after.insert(0, XlaStep(c.kind, axes, c, before, last, dim))
            return
    if c.kind == "AllGather" and c.dim is not None:
        dim, held = last.dims[c.dim]
        before = last.replace_dim(dim, (*held, *axes))
        st.after.insert(0, XlaStep(c.kind, axes, c, before, last, dim))
        return
    outside.append(XlaStep(c.kind, axes, c, problem=f"could not be placed in {st.text}"))
