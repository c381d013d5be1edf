"""What several operations' rules share: the phrases their refusals are written in (where an axis is, what
shards a tensor), the minor-most check of a collective that removes axes, the swap of two axis names (a
Permute's effect, and the fix the minor-most check proposes), and the ordered subsets of axes a move may take.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import combinations, permutations

from shardalg.errors import IllegalCollective
from shardalg.notation.syntax import Tensor

from ..layout import Axes, Layout, subscript, tensor_with

__all__ = [
    "subscript",
    "show",
    "where",
    "sharded_over",
    "minor_most",
    "swap",
    "not_unreduced",
    "ordered_subsets",
]


def show(t: Tensor) -> str:
    return str(t)


def where(t: Tensor, axis: str) -> str:
    """Where ``axis`` is in ``t``, as a phrase: 'sharded over X (dim I)', 'unreduced over X', ..."""
    lay = Layout.of(t)
    i = lay.holder(axis)
    if i is not None:
        return f"{axis} shards dim {t.dims[i].label}"
    if axis in t.unreduced:
        return f"{t.name or 'it'} is unreduced over {axis}"
    return f"{t.name or 'it'} is replicated over {axis}"


def sharded_over(t: Tensor) -> str:
    parts = [f"{''.join(d.axes)} (dim {d.label})" for d in t.dims if d.axes]
    return (
        f"{t.name or 'it'} is sharded over " + ", ".join(parts)
        if parts
        else f"{t.name or 'it'} is not sharded"
    )


def minor_most(t: Tensor, axes: Axes, name: str) -> None:
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
        swapped = tensor_with(t, swap(lay, (major, minor)))
        shard = f"{d.label}_{subscript(dim_axes)}"
        raise IllegalCollective(
            f"{name}_{subscript(axes)} would take {', '.join(mine)} off {shard} in {show(t)}, "
            f"but {major} is not its minor-most axis ({minor} is); a collective only removes the minor-most axes",
            fix=f"Permute_{{{major},{minor}}} first ({show(swapped)}), then {name}_{subscript(axes)}; "
            f"or {name}_{subscript(dim_axes[dim_axes.index(major) :])}",
        )


def not_unreduced(t: Tensor, axes: Axes, name: str) -> None:
    for a in axes:
        if a not in t.unreduced:
            raise IllegalCollective(
                f"{name}_{a} sums partial values, but {t.name or 'the tensor'} is not unreduced over {a} "
                f"({where(t, a)}; no {{U_{a}}})",
                fix=f"AllGather_{a} gathers a sharded dim"
                if Layout.of(t).holder(a) is not None
                else "nothing to reduce",
            )


def ordered_subsets(axes: Axes) -> Iterator[Axes]:
    for k in range(1, len(axes) + 1):
        for combo in combinations(axes, k):
            yield from permutations(combo)


def swap(lay: Layout, axes: Axes) -> Layout:
    """The names of ``axes`` renamed in a cycle, each to the next (``(X, Y)``: a swap; ``(X, Y, Z)``: X to Y,
    Y to Z, Z to X), in every dim, the partial sums and the invariants."""
    sw = {a: axes[(i + 1) % len(axes)] for i, a in enumerate(axes)}

    def s(names: Axes) -> Axes:
        if not set(names) & sw.keys():
            return names
        return tuple(sw.get(a, a) for a in names)

    return Layout(
        tuple(s(d) for d in lay.dims), tuple(sorted(s(lay.unreduced))), tuple(sorted(s(lay.invariant)))
    )
