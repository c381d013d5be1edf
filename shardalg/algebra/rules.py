"""Collectives as rules: one record per op, in one registry (DESIGN.md section 3).

A rule is data: the op, a docstring that opens with its type signature and draws what each device holds,
whether it communicates, its transpose (the op of the backward, DESIGN.md section 4), a precondition that
explains itself when it fails, the layout it produces, and the applications it allows from a layout (the
planner's and redistribute's moves). Layouts are :class:`Layout` values (axes per dim, unreduced, invariant);
the Tensor-level API (``check``, ``apply``, :func:`apply_statement`) wraps them.

    >>> RULES[Op.ALL_GATHER].apply(parse_tensor("A[I_X, J]"), ("X",), None, Mesh(X=4))   # A[I, J]

The local einsum is the seventh rule; it takes two operands and lives in :mod:`shardalg.algebra.einsum`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from itertools import combinations, permutations, product

from shardalg.errors import IllegalCollective, UsageError
from shardalg.notation.syntax import Op, Tensor

from .layout import Axes, Layout, tensor_with, validate
from .mesh import Mesh
from .traffic import Sizes

__all__ = [
    "Layout",
    "Rule",
    "Transpose",
    "DimMap",
    "RULES",
    "rule",
    "validate",
    "tensor_with",
    "axes_label",
]


class DimMap(enum.Enum):
    """How the backward's target dim relates to the forward's."""

    NONE = "no dim"
    SAME = "the dim the forward's axes sharded"
    SWAP = "source and target dims exchanged"


@dataclass(frozen=True)
class Transpose:
    """The backward of a rule (local view, DESIGN.md section 4): ``op`` None when it is not a collective."""

    op: Op | None
    dim: DimMap
    placement: str
    note: str


# (layout, axes, dim index) -> None or raise; the Tensor is passed for messages.
Precondition = Callable[[Tensor, Axes, int | None, Mesh], None]
Effect = Callable[[Layout, Axes, int | None], Layout]
Moves = Callable[[Layout, Mesh], Iterator[tuple[Axes, int | None]]]


@dataclass(frozen=True)
class Rule:
    """One collective (or free slice, or permute) as a rule. ``doc`` opens with the type signature."""

    op: Op
    doc: str
    communicates: bool
    transpose: Transpose
    precondition: Precondition
    effect: Effect
    moves: Moves

    @property
    def signature(self) -> str:
        return self.doc.splitlines()[0]

    def check(
        self, tensor: Tensor, axes: Axes, dim: str | None, mesh: Mesh, sizes: Mapping[str, int] | None = None
    ) -> None:
        """Raise IllegalCollective (with the reason and the fix) unless the rule applies."""
        self._checked(tensor, tuple(axes), dim, mesh, sizes)

    def apply(
        self, tensor: Tensor, axes: Axes, dim: str | None, mesh: Mesh, sizes: Mapping[str, int] | None = None
    ) -> Tensor:
        """The output tensor of the rule applied to ``tensor`` (checked first)."""
        axes = tuple(axes)
        index = self._checked(tensor, axes, dim, mesh, sizes)
        out = tensor_with(tensor, self.effect(Layout.of(tensor), axes, index))
        if sizes is not None or any(d.size is not None for d in tensor.dims):
            Sizes(sizes).require_divisible(out, mesh)
        return out

    def _checked(
        self, tensor: Tensor, axes: Axes, dim: str | None, mesh: Mesh, sizes: Mapping[str, int] | None
    ) -> int | None:
        name = self.op.value
        validate(tensor, mesh)
        if not axes:
            raise IllegalCollective(f"{name} needs at least one mesh axis", fix=f"write {name}_X(...)")
        if len(set(axes)) != len(axes):
            raise IllegalCollective(f"{name}_{''.join(axes)} names an axis twice")
        for a in axes:
            mesh[a]  # UnknownAxis
        index: int | None = None
        if self.op.takes_dim:
            if dim is None:
                raise IllegalCollective(
                    f"{name}_{''.join(axes)} needs a target dim of {_show(tensor)}",
                    fix=f"write {name}_{{{','.join(axes)},d}} with d one of {', '.join(tensor.dim_names)}",
                )
            if dim not in tensor.dim_names:
                raise IllegalCollective(
                    f"{_show(tensor)} has no dim {dim} for {name}_{{{','.join(axes)},{dim}}}",
                    fix=f"target one of its dims: {', '.join(tensor.dim_names)}",
                )
            index = tensor.dim_names.index(dim)
        elif dim is not None:
            raise IllegalCollective(
                f"{name} takes no target dim (got {dim})", fix=f"write {name}_{''.join(axes)}(...)"
            )
        self.precondition(tensor, axes, index, mesh)
        return index


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


def _ag_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
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


def _ag_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    return Layout(tuple(tuple(a for a in d if a not in axes) for d in lay.dims), lay.unreduced, lay.invariant)


def _ag_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
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


def _rs_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
    _not_unreduced(t, axes, "ReduceScatter")


def _rs_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    assert dim is not None
    dims = tuple(d + axes if i == dim else d for i, d in enumerate(lay.dims))
    return Layout(dims, tuple(a for a in lay.unreduced if a not in axes), lay.invariant)


def _ordered_subsets(axes: Axes) -> Iterator[Axes]:
    for k in range(1, len(axes) + 1):
        for combo in combinations(axes, k):
            yield from permutations(combo)


def _rs_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
    for axes in _ordered_subsets(lay.unreduced):
        for i in range(len(lay.dims)):
            yield axes, i


# ---- AllReduce: U -> R ----------------------------------------------------------------------------


def _ar_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
    _not_unreduced(t, axes, "AllReduce")


def _ar_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    return Layout(lay.dims, tuple(a for a in lay.unreduced if a not in axes), lay.invariant)


def _ar_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
    for k in range(1, len(lay.unreduced) + 1):
        for axes in combinations(lay.unreduced, k):
            yield axes, None


# ---- AllToAll: S(d') -> S(d), the axes moved from d' to the minor end of d ------------------------


def _a2a_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
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


def _a2a_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    assert dim is not None
    dims = tuple(
        d + axes if i == dim else tuple(a for a in d if a not in axes) for i, d in enumerate(lay.dims)
    )
    return Layout(dims, lay.unreduced, lay.invariant)


def _a2a_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
    for src, axes in enumerate(lay.dims):
        for k in range(len(axes)):
            for dst in range(len(lay.dims)):
                if dst != src:
                    yield axes[k:], dst


# ---- Slice: R (or I) -> S(d), free --------------------------------------------------------------


def _slice_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
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


def _slice_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    assert dim is not None
    dims = tuple(d + axes if i == dim else d for i, d in enumerate(lay.dims))
    return Layout(dims, lay.unreduced, tuple(a for a in lay.invariant if a not in axes))


def _slice_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
    for axes in _ordered_subsets(lay.free(mesh)):
        for i in range(len(lay.dims)):
            yield axes, i


# ---- Permute: swap two axis names everywhere (whole shards move point to point) --------------------


def _swap(lay: Layout, axes: Axes) -> Layout:
    x, y = axes
    sw = {x: y, y: x}

    def s(names: Axes) -> Axes:
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


def _permute_pre(t: Tensor, axes: Axes, dim: int | None, mesh: Mesh) -> None:
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


def _permute_effect(lay: Layout, axes: Axes, dim: int | None) -> Layout:
    return _swap(lay, axes)


def _permute_moves(lay: Layout, mesh: Mesh) -> Iterator[tuple[Axes, int | None]]:
    for x, y in combinations(mesh.names, 2):
        if permute_problem(lay, (x, y), mesh) is None and _swap(lay, (x, y))[:2] != lay[:2]:
            yield (x, y), None


# ---- the registry ------------------------------------------------------------------------------

RULES: dict[Op, Rule] = {
    r.op: r
    for r in (
        Rule(
            Op.ALL_GATHER,
            """AllGather_A: [.., d_{..A}, ..] -> [.., d, ..]        S(d) -> R on A (A minor-most in d)
    A[I_X] on X=2:   x=0: [a0]      x=1: [a1]
                 ->  x=0: [a0 a1]   x=1: [a0 a1]      every device concatenates all blocks, in order
    backward: ReduceScatter_{A,d} of the cotangent (U -> S(d))""",
            True,
            Transpose(
                Op.REDUCE_SCATTER, DimMap.SAME, "S(d) <- U", "the sum over devices, scattered back to d"
            ),
            _ag_pre,
            _ag_effect,
            _ag_moves,
        ),
        Rule(
            Op.REDUCE_SCATTER,
            """ReduceScatter_{A,d}: [.., d, ..]{U_A} -> [.., d_A, ..]   U -> S(d) on A (appended minor-most)
    C[K]{U_X} on X=2:  x=0: [p0 p1]     x=1: [q0 q1]      (partials: C = p + q, two blocks each)
                   ->  x=0: [p0+q0]     x=1: [p1+q1]      each device sums and keeps its own block
    backward: AllGather_A of the cotangent (S(d) -> R)""",
            True,
            Transpose(Op.ALL_GATHER, DimMap.NONE, "R <- S(d)", "the cotangent's blocks gathered"),
            _rs_pre,
            _rs_effect,
            _rs_moves,
        ),
        Rule(
            Op.ALL_REDUCE,
            """AllReduce_A: [..]{U_A} -> [..]                   U -> R on A  (= ReduceScatter + AllGather)
    C{U_X} on X=2:  x=0: [c0]      x=1: [c1]
                ->  x=0: [c0+c1]   x=1: [c0+c1]         every device holds the sum
    backward: AllReduce_A (cotangent unreduced); nothing when the result is invariant (I -> R)""",
            True,
            Transpose(
                Op.ALL_REDUCE, DimMap.NONE, "R <- U", "psum of a partial cotangent; none for an invariant one"
            ),
            _ar_pre,
            _ar_effect,
            _ar_moves,
        ),
        Rule(
            Op.ALL_TO_ALL,
            """AllToAll_{A,d}: [d'_{..A}, d] -> [d', d_A]       S(d') -> S(d) on A
    A[I_X, J] on X=2:  x=0: [a00 a01]          x=1: [a10 a11]      (a_ij: block i of I, j of J)
                   ->  x=0: [a00; a10]         x=1: [a01; a11]     each device sends block j to device j
    backward: AllToAll_{A,d'} (the move reversed)""",
            True,
            Transpose(Op.ALL_TO_ALL, DimMap.SWAP, "S(d') <- S(d)", "the same exchange, dims reversed"),
            _a2a_pre,
            _a2a_effect,
            _a2a_moves,
        ),
        Rule(
            Op.SLICE,
            """Slice_{A,d}: [.., d, ..] -> [.., d_A, ..]        R (or I) -> S(d) on A, no communication
    A[I] on X=2:   x=0: [a0 a1]   x=1: [a0 a1]
               ->  x=0: [a0]      x=1: [a1]           each device drops what it does not own
    backward: zero-pad to unreduced (S(d) -> U), no communication""",
            False,
            Transpose(
                None, DimMap.SAME, "U <- S(d)", "zero-pad the block: a partial value, no communication"
            ),
            _slice_pre,
            _slice_effect,
            _slice_moves,
        ),
        Rule(
            Op.PERMUTE,
            """Permute_{X,Y}: A[I_X, J] -> A[I_Y, J], I_XY -> I_YX   swap the names X and Y; shards move point to point
    A[I_X] on X=2, Y=2:  (x,y)=(0,0): a0  (0,1): a0  (1,0): a1  (1,1): a1
                     ->  (x,y)=(0,0): a0  (0,1): a1  (1,0): a0  (1,1): a1   device (x,y) fetches from (y,x)
    legal when no device's local shape changes; backward: Permute_{X,Y} (the swap is its own inverse)""",
            True,
            Transpose(Op.PERMUTE, DimMap.NONE, "the inverse permutation", "a swap is self-inverse"),
            _permute_pre,
            _permute_effect,
            _permute_moves,
        ),
    )
}


def rule(op: Op) -> Rule:
    """The rule of a collective op (the local einsum's is :data:`shardalg.algebra.einsum.LOCAL_EINSUM`)."""
    try:
        return RULES[op]
    except KeyError:
        raise UsageError(
            f"{op.value} is not a collective; see shardalg.algebra.einsum for the local einsum"
        ) from None
