"""What each collective does to a layout, one group of functions per op: the precondition (which explains
itself when it fails, with the fix in the notation), the effect (the layout it produces), and the moves (the
applications it allows from a layout: the planner's and redistribute's search steps). :mod:`.rules` puts
them into one record per op.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import combinations, permutations, product

from shardalg.errors import IllegalCollective
from shardalg.notation.syntax import Tensor

from .layout import Axes, Layout, tensor_with
from .mesh import Mesh


def _show(t: Tensor) -> str:
    return str(t)


def axes_label(t: Tensor, axes: Axes) -> str:
    """Axes as a subscript: ``XY``, or ``{data,model}`` for multi-letter names."""
    return _label(t, axes)


def _label(t: Tensor, axes: Axes) -> str:
    return "".join(axes) if all(len(a) == 1 for a in axes) else "{" + ",".join(axes) + "}"


def _where(t: Tensor, axis: str) -> str:
    """Where ``axis`` is in ``t``, as a phrase: 'sharded over X (dim I)', 'unreduced over X', ..."""
    lay = Layout.of(t)
    i = lay.holder(axis)
    if i is not None:
        return f"{axis} shards dim {t.dims[i].label}"
    if axis in t.unreduced:
        return f"{t.name or 'it'} is unreduced over {axis}"
    return f"{t.name or 'it'} is replicated over {axis}"


def _sharded_over(t: Tensor) -> str:
    parts = [f"{''.join(d.axes)} (dim {d.label})" for d in t.dims if d.axes]
    return (
        f"{t.name or 'it'} is sharded over " + ", ".join(parts)
        if parts
        else f"{t.name or 'it'} is not sharded"
    )


def _minor_most(t: Tensor, axes: Axes, name: str, extra_fix: str = "") -> None:
    """Each dim's axes among ``axes`` must be its minor-most axes (DESIGN.md section 3)."""
    lay = Layout.of(t)
    for i, dim_axes in enumerate(lay.dims):
        mine = [a for a in dim_axes if a in axes]
        if not mine:
            continue
        k = len(dim_axes) - len(mine)
        if set(dim_axes[k:]) == set(mine):
            continue
        d = t.dims[i]
        minor = dim_axes[-1]
        major = mine[0]
        swapped = tensor_with(t, _swap(lay, (major, minor)))
        shard = f"{d.label}_{_label(t, dim_axes)}"
        raise IllegalCollective(
            f"{name}_{_label(t, axes)} would take {', '.join(mine)} off {shard} in {_show(t)}, "
            f"but {major} is not its minor-most axis ({minor} is); a collective only removes the minor-most axes",
            fix=f"Permute_{{{major},{minor}}} first ({_show(swapped)}), then {name}_{_label(t, axes)}; "
            f"or {name}_{_label(t, dim_axes[dim_axes.index(major) :])}{extra_fix}",
        )


# ---- AllGather: S(d) -> R on the named axes ------------------------------------------------------


def ag_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
    lay = Layout.of(t)
    for a in axes:
        if lay.holder(a) is None:
            if a in t.unreduced:
                fix = f"sum the partials: AllReduce_{a}, or ReduceScatter_{{{a},d}}"
            else:
                fix = (
                    f"gather an axis that shards it: AllGather_{_label(t, t.sharded_axes)}"
                    if t.sharded_axes
                    else "nothing to gather"
                )
            raise IllegalCollective(
                f"{a} does not shard {t.name or 'the tensor'}; {_sharded_over(t)}", fix=fix
            )
    _minor_most(t, axes, "AllGather")


def ag_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    return Layout(tuple(tuple(a for a in d if a not in axes) for d in lay.dims), lay.unreduced, lay.invariant)


def ag_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
    # per dim: take nothing or a minor-most suffix; any non-empty combination across dims.
    choices = [[()] + [axes[k:] for k in range(len(axes))] for axes in lay.dims]
    for pick in product(*choices):
        axes = tuple(a for part in pick for a in part)
        if axes:
            yield axes, None


# ---- ReduceScatter: U -> S(d), the axes appended minor-most to d --------------------------------


def _not_unreduced(t: Tensor, axes: Axes, name: str) -> None:
    for a in axes:
        if a not in t.unreduced:
            raise IllegalCollective(
                f"{name}_{a} sums partial values, but {t.name or 'the tensor'} is not unreduced over {a} "
                f"({_where(t, a)}; no {{U_{a}}})",
                fix=f"AllGather_{a} gathers a sharded dim"
                if Layout.of(t).holder(a) is not None
                else "nothing to reduce",
            )


def rs_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
    _not_unreduced(t, axes, "ReduceScatter")


def rs_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    assert dim is not None
    dims = tuple(d + axes if i == dim else d for i, d in enumerate(lay.dims))
    return Layout(dims, tuple(a for a in lay.unreduced if a not in axes), lay.invariant)


def _ordered_subsets(axes: Axes) -> Iterator[Axes]:
    for k in range(1, len(axes) + 1):
        for combo in combinations(axes, k):
            yield from permutations(combo)


def rs_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
    for axes in _ordered_subsets(lay.unreduced):
        for i in range(len(lay.dims)):
            yield axes, i


# ---- AllReduce: U -> R ----------------------------------------------------------------------------


def ar_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
    _not_unreduced(t, axes, "AllReduce")


def ar_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    return Layout(lay.dims, tuple(a for a in lay.unreduced if a not in axes), lay.invariant)


def ar_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
    for k in range(1, len(lay.unreduced) + 1):
        for axes in combinations(lay.unreduced, k):
            yield axes, None


# ---- AllToAll: S(d') -> S(d), the axes moved from d' to the minor end of d ------------------------


def a2a_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
    lay = Layout.of(t)
    assert dim is not None
    holders = {lay.holder(a) for a in axes}
    if None in holders:
        a = next(a for a in axes if lay.holder(a) is None)
        raise IllegalCollective(
            f"AllToAll_{{{_label(t, axes)},{t.dims[dim].label}}} moves a sharding to {t.dims[dim].label}, "
            f"but {a} does not shard {t.name or 'the tensor'}; {_sharded_over(t)}",
            fix=f"Slice_{{{a},{t.dims[dim].label}}} shards a replicated axis for free"
            if a not in t.unreduced
            else f"ReduceScatter_{{{a},{t.dims[dim].label}}} sums the partials onto {t.dims[dim].label}",
        )
    if len(holders) > 1:
        raise IllegalCollective(
            f"AllToAll_{_label(t, axes)} moves axes of one dim, but they shard several dims of {_show(t)}"
        )
    if dim in holders:
        raise IllegalCollective(
            f"AllToAll_{{{_label(t, axes)},{t.dims[dim].label}}} moves a sharding to another dim, "
            f"but {_label(t, axes)} already shards {t.dims[dim].label}",
        )
    _minor_most(t, axes, "AllToAll")


def a2a_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    assert dim is not None
    dims = tuple(
        d + axes if i == dim else tuple(a for a in d if a not in axes) for i, d in enumerate(lay.dims)
    )
    return Layout(dims, lay.unreduced, lay.invariant)


def a2a_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
    for src, axes in enumerate(lay.dims):
        for k in range(len(axes)):
            for dst in range(len(lay.dims)):
                if dst != src:
                    yield axes[k:], dst


# ---- Slice: R (or I) -> S(d), free --------------------------------------------------------------


def slice_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
    lay = Layout.of(t)
    for a in axes:
        if a in t.unreduced:
            raise IllegalCollective(
                f"Slice_{a} keeps one block of a replicated value, but {t.name or 'the tensor'} is unreduced "
                f"over {a}: each device holds only a partial sum",
                fix=f"ReduceScatter_{{{a},d}} sums and keeps one block",
            )
        if lay.holder(a) is not None:
            raise IllegalCollective(
                f"Slice_{a} needs {t.name or 'the tensor'} replicated over {a}, but {_where(t, a)}",
                fix=f"AllToAll_{{{a},d}} moves a sharding to another dim",
            )


def slice_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    assert dim is not None
    dims = tuple(d + axes if i == dim else d for i, d in enumerate(lay.dims))
    return Layout(dims, lay.unreduced, tuple(a for a in lay.invariant if a not in axes))


def slice_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
    for axes in _ordered_subsets(lay.free(mesh)):
        for i in range(len(lay.dims)):
            yield axes, i


# ---- Permute: swap two axis names everywhere (whole shards move point to point) --------------------


def _swap(lay: Layout, axes: Axes) -> Layout:
    x, y = axes
    sw = {x: y, y: x}

    def s(names: Axes) -> Axes:
        if x not in names and y not in names:
            return names
        return tuple(sw.get(a, a) for a in names)

    return Layout(
        tuple(s(d) for d in lay.dims), tuple(sorted(s(lay.unreduced))), tuple(sorted(s(lay.invariant)))
    )


def permute_problem(lay: Layout, axes: Axes, mesh: Mesh) -> str | None:
    """Why Permute_{x,y} cannot move ``lay`` (None when it can): it moves whole shards, so every device's
    local shape must stay, and partial sums cannot be re-split over an axis of another size."""
    x, y = axes
    sx, sy = mesh[x].size, mesh[y].size
    if sx is not None and sx == sy:
        return None
    after = _swap(lay, axes)
    for before_axes, after_axes in zip(lay.dims, after.dims, strict=True):
        if sorted(before_axes) != sorted(after_axes):
            return f"|{x}| = {sx or x} and |{y}| = {sy or y} differ, so the local shape would change"
    if (x in lay.unreduced) != (y in lay.unreduced):
        return f"partial sums over {x} cannot become partial sums over {y} of another size"
    return None


def permute_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
    if len(axes) != 2:
        raise IllegalCollective(
            f"Permute swaps two mesh axes, not {len(axes)} ({', '.join(axes)})", fix="write Permute_{X,Y}"
        )
    why = permute_problem(Layout.of(t), axes, mesh)
    if why is not None:
        raise IllegalCollective(
            f"Permute_{{{axes[0]},{axes[1]}}} cannot re-lay {_show(t)}: {why}",
            fix=f"AllGather then Slice, or AllToAll, to move the sharding between {axes[0]} and {axes[1]}",
        )


def permute_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    """The swap of two axes; anything else (its precondition's to refuse) leaves the layout as it is, so the
    value of an illegal Permute can still be read while its error is reported."""
    return _swap(lay, axes) if len(axes) == 2 else lay


def permute_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
    # a swap moves data when either axis shards a dim, or exactly one of them holds partial sums
    sharding, unreduced = {a for d in lay.dims for a in d}, set(lay.unreduced)
    for x, y in combinations(mesh.names, 2):
        if x not in sharding and y not in sharding and (x in unreduced) == (y in unreduced):
            continue
        if permute_problem(lay, (x, y), mesh) is None:
            yield (x, y), None


# ---- Shift: a cyclic permutation of the devices along one axis (JAX's ppermute with i -> i + k) ------------


def shift_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
    if len(axes) != 1:
        raise IllegalCollective(
            f"Shift moves blocks around one ring, not {len(axes)} axes ({', '.join(axes)})",
            fix=f"shift along one axis: Shift_{{{axes[0]},+1}}; a shift along several is one Shift per axis",
        )


def shift_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    return lay  # the layout is the same; which device holds which block is what moves


def shift_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
    # never a planner's move: where the axis shards a dim, a shift changes the global value (it rolls the blocks)
    return iter(())
