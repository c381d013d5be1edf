"""The record of an operation: what it is, in one value (the registry of records is
:mod:`shardalg.algebra.registry`).

An operation's record holds what it *is* (DESIGN.md section 8): a docstring that opens with its type signature
and draws what each device holds, whether it communicates, its transpose (the op of the backward, DESIGN.md
section 4), its bytes per device (which array V is and the book's factor, DESIGN.md section 5) and whether a
cost model sees V as the group does. A collective's record (:class:`CollectiveRecord`) adds its rule: a
precondition that explains itself when it fails, the layout it produces, and the applications it allows from
a layout (the planner's and redistribute's moves). The local einsum's record takes two operands
(:mod:`shardalg.algebra.ops.einsum`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

from shardalg.errors import IllegalCollective
from shardalg.notation.syntax import Op, Tensor

from ..layout import Axes, Layout, tensor_with, validate
from ..mesh import Mesh
from ..traffic import Sizes, Volume

__all__ = [
    "Kind",
    "DimMap",
    "Transpose",
    "OpRecord",
    "CollectiveRecord",
    "Precondition",
    "Effect",
    "Moves",
    "Idle",
    "Explain",
]


class Kind(enum.Enum):
    """What a tensor is along one mesh axis."""

    S = "S"  # shards a dim
    R = "R"  # replicated (the axis appears nowhere)
    U = "U"  # unreduced: partial sums
    I = "I"  # noqa: E741  invariant: replicated, gradient must arrive reduced

    def __repr__(self) -> str:
        return self.value


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
    reverse_axes: bool = False  # the backward runs over 3+ axes in reverse order (a cycle's inverse)


# (layout, axes, dim index) -> None or raise; the Tensor is passed for messages.
Precondition = Callable[[Tensor, Axes, int | None, Mesh], None]
Effect = Callable[[Layout, Axes, int | None], Layout]
Moves = Callable[[Layout, Mesh], Iterator[tuple[Axes, int | None]]]
# (the input's layout, axes, a Shift's offset, mesh) -> whether the step leaves every device's block where it was
Idle = Callable[[Layout, Axes, "int | None", Mesh], bool]
# (axes, the step's input, its output, its target dim) -> the planner's one-line reason for the step
Explain = Callable[[Axes, Tensor, Tensor, "str | None"], str]


@dataclass(frozen=True, kw_only=True)
class OpRecord:
    """What an operation is, beyond what the notation needs of it (its names, its subscript's shape and
    whether it communicates: the :class:`~shardalg.notation.syntax.Op`). ``doc`` opens with the type
    signature; a step's bytes are ``factor`` x V, V the array ``volume`` names; ``group_view`` is whether a
    cost model's V counts the op's own axes at full size (the array as the gather group sees it) or is the
    local buffer each device holds.

    Its transpose (DESIGN.md section 4): ``transpose`` names the backward op; ``kinds`` is what the op does on
    each axis it names, (input, output) placement, from which the backward is found per axis (None: the op
    is transposed whole, its backward on the same axes, a Shift's offset negated); ``fuses`` is whether
    consecutive steps of it over several axes are one step (no target dim); ``as_transpose`` says why the op
    appears in a backward; ``may_be_invariant`` is whether its result may be marked invariant on its axes
    (S -> I, U -> I); ``identity_on_values`` is whether a step of it leaves the global value as it is (a
    collective changes only where the data lives; a Shift rolls the blocks, a local einsum multiplies).

    Its printed forms: ``doc``; ``example``, a statement of it the notes price (empty: none); ``explain``,
    the planner's one-line reason for a step of it, in terms of the dims it touches (None: its name)."""

    op: Op
    doc: str
    transpose: Transpose
    volume: Volume
    factor: Fraction
    group_view: bool
    kinds: tuple[Kind, Kind] | None = None
    fuses: bool = False
    as_transpose: str = ""
    may_be_invariant: bool = False
    identity_on_values: bool = True
    example: str = ""
    explain: Explain | None = None
    operands: ClassVar[int] = 1  # a collective takes one; the local einsum two
    move: ClassVar[bool] = (
        True  # a one-operand record is a planner move, but a function's (planned as a statement)
    )

    def takes(self, n: int) -> bool:
        """Whether a step of it may read ``n`` operands (its ``operands``; a block of attention 3 or 4)."""
        return n == self.operands

    @property
    def communicates(self) -> bool:
        """Whether a step of it moves data between devices (the op's own: ``Op.define(communicates=)``)."""
        return self.op.communicates

    @property
    def signature(self) -> str:
        return self.doc.splitlines()[0]

    def reason(self, axes: Axes, before: Tensor, after: Tensor, dim: str | None) -> str:
        """The planner's one-line reason for a step of this op."""
        return self.op.value if self.explain is None else self.explain(axes, before, after, dim)


@dataclass(frozen=True, kw_only=True)
class CollectiveRecord(OpRecord):
    """One collective (or free slice, or permute, or shift): its record and its rule on one operand."""

    precondition: Precondition
    effect: Effect
    moves: Moves
    idle: Idle | None = None  # when a step over a group of several devices still moves nothing (Permute's)

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
