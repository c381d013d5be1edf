"""Collectives as rules: one record per op, in one registry (DESIGN.md section 3).

A rule is data: the op, a docstring that opens with its type signature and draws what each device holds,
whether it communicates, its transpose (the op of the backward, DESIGN.md section 4), a precondition that
explains itself when it fails, the layout it produces, and the applications it allows from a layout (the
planner's and redistribute's moves). Layouts are :class:`Layout` values (axes per dim, unreduced, invariant);
the Tensor-level API (``check``, ``apply``, :func:`apply_statement`) wraps them.

    >>> RULES[Op.ALL_GATHER].apply(parse_tensor("A[I_X, J]"), ("X",), None, Mesh(X=4))   # A[I, J]

The local einsum is the eighth rule; it takes two operands and lives in :mod:`shardalg.algebra.einsum`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from shardalg.errors import IllegalCollective, UsageError
from shardalg.notation.syntax import Op, Tensor

from .collectives import (
    a2a_effect,
    a2a_moves,
    a2a_pre,
    ag_effect,
    ag_moves,
    ag_pre,
    ar_effect,
    ar_moves,
    ar_pre,
    permute_effect,
    permute_moves,
    permute_pre,
    rs_effect,
    rs_moves,
    rs_pre,
    shift_effect,
    shift_moves,
    shift_pre,
    slice_effect,
    slice_moves,
    slice_pre,
)
from .layout import Axes, Layout, tensor_with, validate
from .mesh import Mesh
from .traffic import Sizes

__all__ = ["Rule", "Transpose", "DimMap", "RULES", "rule"]


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
                    f"{name}_{''.join(axes)} needs a target dim of {tensor}",
                    fix=f"write {name}_{{{','.join(axes)},d}} with d one of {', '.join(tensor.dim_names)}",
                )
            if dim not in tensor.dim_names:
                raise IllegalCollective(
                    f"{tensor} has no dim {dim} for {name}_{{{','.join(axes)},{dim}}}",
                    fix=f"target one of its dims: {', '.join(tensor.dim_names)}",
                )
            index = tensor.dim_names.index(dim)
        elif dim is not None:
            raise IllegalCollective(
                f"{name} takes no target dim (got {dim})", fix=f"write {name}_{''.join(axes)}(...)"
            )
        self.precondition(tensor, axes, index, mesh)
        return index


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
            ag_pre,
            ag_effect,
            ag_moves,
        ),
        Rule(
            Op.REDUCE_SCATTER,
            """ReduceScatter_{A,d}: [.., d, ..]{U_A} -> [.., d_A, ..]   U -> S(d) on A (appended minor-most)
    C[K]{U_X} on X=2:  x=0: [p0 p1]     x=1: [q0 q1]      (partials: C = p + q, two blocks each)
                   ->  x=0: [p0+q0]     x=1: [p1+q1]      each device sums and keeps its own block
    backward: AllGather_A of the cotangent (S(d) -> R)""",
            True,
            Transpose(Op.ALL_GATHER, DimMap.NONE, "R <- S(d)", "the cotangent's blocks gathered"),
            rs_pre,
            rs_effect,
            rs_moves,
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
            ar_pre,
            ar_effect,
            ar_moves,
        ),
        Rule(
            Op.ALL_TO_ALL,
            """AllToAll_{A,d}: [d'_{..A}, d] -> [d', d_A]       S(d') -> S(d) on A
    A[I_X, J] on X=2:  x=0: [a00 a01]          x=1: [a10 a11]      (a_ij: block i of I, j of J)
                   ->  x=0: [a00; a10]         x=1: [a01; a11]     each device sends block j to device j
    backward: AllToAll_{A,d'} (the move reversed)""",
            True,
            Transpose(Op.ALL_TO_ALL, DimMap.SWAP, "S(d') <- S(d)", "the same exchange, dims reversed"),
            a2a_pre,
            a2a_effect,
            a2a_moves,
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
            slice_pre,
            slice_effect,
            slice_moves,
        ),
        Rule(
            Op.PERMUTE,
            """Permute_{X,Y}: A[I_X, J] -> A[I_Y, J], I_XY -> I_YX   swap the names X and Y; shards move point to point
    A[I_X] on X=2, Y=2:  (x,y)=(0,0): a0  (0,1): a0  (1,0): a1  (1,1): a1
                     ->  (x,y)=(0,0): a0  (0,1): a1  (1,0): a0  (1,1): a1   device (x,y) fetches from (y,x)
    legal when no device's local shape changes; backward: Permute_{X,Y} (the swap is its own inverse)""",
            True,
            Transpose(Op.PERMUTE, DimMap.NONE, "the inverse permutation", "a swap is self-inverse"),
            permute_pre,
            permute_effect,
            permute_moves,
        ),
        Rule(
            Op.SHIFT,
            """Shift_{A,k}: [..] -> [..]   layout unchanged; device a sends its block to a + k (mod |A|) along A
    A[I_X] on X=4, k=+1:  x=0: a0  x=1: a1  x=2: a2  x=3: a3
                      ->  x=0: a3  x=1: a0  x=2: a1  x=3: a2      the book's send around a ring (JAX's ppermute)
    one axis; k moves |k| hops (mod |A|) on a ring, more on a line; where A shards a dim the global value is
    rolled by k blocks along it (the one op that is not the identity on global values, so no plan uses it);
    where A replicates, or leaves partial sums, the value is unchanged. backward: Shift_{A,-k}""",
            True,
            Transpose(
                Op.SHIFT, DimMap.NONE, "the inverse shift", "Shift_{A,-k}: a cyclic permutation's transpose is its inverse"
            ),
            shift_pre,
            shift_effect,
            shift_moves,
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
