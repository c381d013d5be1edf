"""Bytes a plan communicates: the ranking measure of the planner until the cost model replaces it.

A step's traffic is ``factor(op) x V`` (each operation's record says which array V is and the factor:
:mod:`shardalg.algebra.ops`), V the bytes of the array as one gather group sees it (dims sharded
on other axes count at their local size), the factor the book's (DESIGN.md section 5): AllGather and
ReduceScatter 1, AllReduce 2 (= ReduceScatter + AllGather), AllToAll 1/4; a Permute or a Shift sends one local shard;
Slice and a local einsum send nothing. A tensor with no dtype counts as bf16 (2 bytes), the book's default.

Sizes are exact: a known dim is an integer, an unknown one a positive symbol (:func:`shardalg.algebra.symbols.dim_size`),
so traffic is a small polynomial (:class:`Bytes`) kept without sympy for speed, converted on demand.
No size is made up to rank plans: which plan is the cheapest when sizes are unknown is decided in one place,
:mod:`shardalg.planning.symbolic` (plans beaten at every size, and the intervals of one size where each of
the others is the cheapest). :func:`step_rank` is the searches' order of exploration (which candidates the
planner's searches look for first and keep when a budget cuts them): with an unknown size it counts a dim as
``SEARCH_DIM`` and an axis as ``SEARCH_AXIS``; it never chooses among the plans found.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from math import prod

from shardalg.cache import Kind, memo, memoized
from shardalg.errors import IndivisibleDim
from shardalg.notation.syntax import Dim, DType, Op, Tensor

from .layout import Layout
from .mesh import Mesh
from .registry import RECORDS
from .subaxes import with_parts

__all__ = [
    "Bytes",
    "Sizes",
    "Volume",
    "DEFAULT_DTYPE",
    "step_bytes",
    "move_bytes",
    "moves_nothing",
    "local_elements",
    "layout_elements",
    "step_rank",
]

DEFAULT_DTYPE = DType.BF16
# the searches' order of exploration with unknown sizes (never a choice: see the module docstring)
SEARCH_DIM = 4096
SEARCH_AXIS = 4

# A factor of a monomial: ("dim", name) or ("axis", name), with an integer exponent.
Factor = tuple[str, str]
Monomial = tuple[tuple[Factor, int], ...]


@dataclass(frozen=True)
class Bytes:
    """A polynomial in unknown dim (and axis) sizes with Fraction coefficients: ``terms`` maps a monomial
    (sorted (factor, exponent) pairs) to its coefficient. ``Bytes.of(6)`` is the number 6."""

    terms: tuple[tuple[Monomial, Fraction], ...] = ()

    @classmethod
    def of(cls, value: int | Fraction) -> Bytes:
        return cls((((), Fraction(value)),)) if value else cls()

    @classmethod
    def _from(cls, acc: dict[Monomial, Fraction]) -> Bytes:
        return cls(tuple(sorted((m, c) for m, c in acc.items() if c)))

    def __add__(self, other: Bytes) -> Bytes:
        acc = dict(self.terms)
        for m, c in other.terms:
            acc[m] = acc.get(m, Fraction(0)) + c
        return Bytes._from(acc)

    def scale(self, k: Fraction | int) -> Bytes:
        return Bytes._from({m: c * k for m, c in self.terms})

    @property
    def is_number(self) -> bool:
        return all(not m for m, _ in self.terms)

    @property
    def number(self) -> Fraction:
        """The value when numeric (a ValueError otherwise)."""
        if not self.is_number:
            raise ValueError("symbolic traffic has no number")
        return sum((c for _, c in self.terms), Fraction(0))

    def rank(self, table: RankTable) -> Fraction:
        """The bytes as :func:`step_rank` counts them: at the point where the planner's searches rank unknown
        sizes (each dim left in the polynomial at :data:`SEARCH_DIM`, each axis at its size in ``table``,
        :func:`rank_table`: an unknown one at :data:`SEARCH_AXIS`), times 8 and the devices. A step's
        ``step_bytes(...).rank(table)`` is its ``step_rank(...)``; a sum's is the sum of theirs."""
        axis, devices = table
        total = Fraction(0)
        for m, c in self.terms:
            for (kind, name), e in m:
                c *= (SEARCH_DIM if kind == "dim" else axis[name]) ** e
            total += c
        return total * 8 * devices

    def sympy(self):  # -> sympy.Expr
        import sympy

        from .symbols import axis_size, dim_size

        out = sympy.Integer(0)
        for m, c in self.terms:
            term = sympy.Rational(c.numerator, c.denominator)
            for (kind, name), e in m:
                term *= (dim_size(name) if kind == "dim" else axis_size(name)) ** e
            out += term
        return out

    def json(self) -> int | float | str:
        """A number when numeric (an int when whole), else the sympy expression as text."""
        if self.is_number:
            n = self.number
            return int(n) if n.denominator == 1 else float(n)
        return str(self.sympy())

    def __str__(self) -> str:
        return str(self.json())


class Sizes:
    """Dim sizes: literal sizes in the dims, then ``sizes`` (the API's, or a program's ``where``);
    anything else is unknown (symbolic)."""

    __slots__ = ("known", "_hash")

    def __init__(self, sizes: Mapping[str, int] | None = None):
        self.known: dict[str, int] = dict(sizes or {})
        self._hash: int | None = None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sizes) and self.known == other.known

    def __hash__(self) -> int:
        # made once: the planner's caches hash the sizes of every call (``known`` is never changed after)
        h = self._hash
        if h is None:
            h = self._hash = hash(tuple(sorted(self.known.items())))
        return h

    def __getstate__(self) -> dict[str, int]:
        return self.known  # not the hash: string hashes differ per process

    def __setstate__(self, known: dict[str, int]) -> None:
        self.known, self._hash = known, None

    def of(self, label: str, literal: int | None = None) -> int | None:
        return literal if literal is not None else self.known.get(label)

    def check_divisible(self, t: Tensor, mesh: Mesh, axes_per_dim: tuple[tuple[str, ...], ...]) -> bool:
        """Whether every known dim of ``t`` divides by its axes' sizes under ``axes_per_dim``."""
        for d, axes in zip(t.dims, axes_per_dim, strict=True):
            n = self.of(d.label, d.size)
            if n is None or not axes:
                continue
            g = mesh.known_group(axes)
            if g is not None and n % g:
                return False
        return True

    def require_divisible(self, t: Tensor, mesh: Mesh) -> None:
        for d in t.dims:
            n = self.of(d.label, d.size)
            g = mesh.known_group(d.axes) if d.axes else None
            if n is not None and g is not None and n % g:
                raise IndivisibleDim(
                    f"dim {d.label} of size {n} does not divide by {'·'.join(d.axes)} = {g}",
                    span=d.span,
                    fix=f"shard {d.label} over axes whose sizes divide {n}, or replicate it",
                )


def local_elements(t: Tensor, mesh: Mesh, sizes: Sizes, gathered: tuple[str, ...] = ()) -> Bytes:
    """Elements of ``t`` per device, with the axes ``gathered`` counted as not sharding (the group's view)."""
    return layout_elements(t, tuple(d.axes for d in t.dims), mesh, sizes, gathered)


def layout_elements(
    t: Tensor,
    axes_per_dim: tuple[tuple[str, ...], ...],
    mesh: Mesh,
    sizes: Sizes,
    gathered: tuple[str, ...] = (),
) -> Bytes:
    """Elements per device of ``t``'s dims sharded as ``axes_per_dim`` (``gathered`` axes not counted)."""
    coeff = Fraction(1)
    acc: dict[Factor, int] = {}
    for d, axes in zip(t.dims, axes_per_dim, strict=True):
        n = sizes.of(d.label, d.size)
        if n is None:
            acc[("dim", d.label)] = acc.get(("dim", d.label), 0) + 1
        else:
            coeff *= n
        for a in axes:
            if a in gathered:
                continue
            s = mesh[a].size
            if s is None:
                acc[("axis", a)] = acc.get(("axis", a), 0) - 1
            else:
                coeff /= s
    mono: Monomial = tuple(sorted((f, e) for f, e in acc.items() if e))
    return Bytes._from({mono: coeff})


class Volume(enum.Enum):
    """Which array a step's V is: the output or input as the group sees it, one local shard, or nothing."""

    OUTPUT_GROUP = "output as the gather group sees it"
    INPUT_GROUP = "input as the group sees it"
    INPUT_LOCAL = "one local shard of the input"
    NONE = "nothing moves"


def step_bytes(
    op: Op,
    axes: tuple[str, ...],
    before: Tensor,
    after: Tensor,
    mesh: Mesh,
    sizes: Sizes,
    offset: int | None = None,
) -> Bytes:
    """Bytes communicated by one step (``before`` its input, ``after`` its output; a Shift's or a Send's
    ``offset``)."""
    dims_before, dims_after = tuple(d.axes for d in before.dims), tuple(d.axes for d in after.dims)
    return move_bytes(
        op, axes, before, dims_before, dims_after, mesh, sizes, offset, unreduced=before.unreduced
    )


def move_bytes(
    op: Op,
    axes: tuple[str, ...],
    proto: Tensor,
    before: tuple[tuple[str, ...], ...],
    after: tuple[tuple[str, ...], ...],
    mesh: Mesh,
    sizes: Sizes,
    offset: int | None = None,
    *,
    unreduced: tuple[str, ...],
) -> Bytes:
    """``step_bytes`` on layouts: ``proto`` gives the dims' names, sizes and the dtype; ``unreduced`` the axes
    the input holds partial sums over (whether a Permute moves anything depends on them)."""
    rec = RECORDS[op]
    volume, factor = rec.volume, rec.factor
    if moves_nothing(op, axes, before, unreduced, mesh, offset):
        return Bytes()
    stats = statistics_of(op, axes, proto, before)
    if stats is not None:  # a function's step over a sharded dim: an AllReduce of its per-row statistics
        t, lay = stats
        return layout_elements(t, lay, mesh, sizes).scale(STATS_FACTOR * t.dtype.bytes)
    if volume is Volume.NONE:
        return Bytes()
    dtype = proto.dtype or DEFAULT_DTYPE
    if volume is Volume.OUTPUT_GROUP:
        elems = layout_elements(proto, after, mesh, sizes)
    elif volume is Volume.INPUT_GROUP:
        elems = layout_elements(
            proto, before, mesh, sizes, gathered=with_parts((a for d in before for a in d), axes, mesh)
        )
    else:
        elems = layout_elements(proto, before, mesh, sizes)
    return elems.scale(factor * dtype.bytes)


def moves_nothing(
    op: Op,
    axes: tuple[str, ...],
    dims: tuple[tuple[str, ...], ...],
    unreduced: tuple[str, ...],
    mesh: Mesh,
    offset: int | None = None,
) -> bool:
    """Whether a step of ``op`` over ``axes`` (a Shift's or a Send's ``offset``) on a block laid out as
    ``dims`` (partial sums over ``unreduced``) moves no byte on ``mesh``: its group is one device, or its
    record says it leaves every device's block where it was (``Permute_{X,Y}`` of ``I_XY`` on ``|X| = 1``, a
    Shift by a whole turn of its ring). The one rule the bytes (:func:`move_bytes`), the rankings
    (:func:`step_rank`, a layout space's) and the cost model read."""
    axes = tuple(axes)  # a caller's list too: the mesh keys its groups by tuples
    if not axes:
        return False  # an einsum, a function's local step: no group
    if mesh.known_group(axes) == 1:
        return True
    idle = getattr(RECORDS[op], "idle", None)
    return idle is not None and idle(Layout(dims, tuple(unreduced), ()), axes, offset, mesh)


STATS_FACTOR = Fraction(2)  # a function's statistics are all-reduced: AllReduce's factor on their bytes


def statistics_of(
    op: Op, axes: tuple[str, ...], proto: Tensor, before: tuple[tuple[str, ...], ...]
) -> tuple[Tensor, tuple[tuple[str, ...], ...]] | None:
    """The per-row statistics a function's step all-reduces over ``axes`` (the axes of the dim it works along),
    as an fp32 tensor and its layout: the operand's other dims, and one entry per statistic; None for any
    other step."""
    if not op.function or not axes:
        return None
    count = len(getattr(RECORDS[op], "statistics", ()))
    if not count or tuple(axes) not in before:
        return None
    i = before.index(tuple(axes))
    dims = tuple(d for j, d in enumerate(proto.dims) if j != i)
    lay = tuple(a for j, a in enumerate(before) if j != i)
    if count > 1:
        dims, lay = dims + (Dim(None, size=count),), lay + ((),)
    return Tensor("stats", dims, (), (), DType.FP32), lay


RankTable = tuple[dict[str, int], int]


@memoized(Kind.PIECE)
def rank_table(mesh: Mesh) -> RankTable:
    """Per mesh, for :func:`step_rank`: each axis's ranking size (unknown at 4) and their product. A caller
    that ranks many steps on one mesh passes it to ``step_rank(..., table=)``."""
    axis = _AxisSizes(mesh)
    axis.update((a.name, a.size or SEARCH_AXIS) for a in mesh)
    return axis, prod(axis.values())


class _AxisSizes(dict):
    """Each mesh axis's ranking size; a sub-axis (``Y:(1)2``, which a plan on the refined mesh names and a
    ranking on the mesh as written prices) is resolved by the mesh when first asked for."""

    def __init__(self, mesh: Mesh) -> None:
        super().__init__()
        self.mesh = mesh

    def __missing__(self, name: str) -> int:
        size = self.mesh[name].size or SEARCH_AXIS
        return size


# (op, dtype) -> 8 x bytes per element x the op's traffic factor, an exact integer
_RANK_SCALE: dict[tuple[Op, DType], int] = memo(f"{__name__}._RANK_SCALE", Kind.TABLE, {})


def step_rank(
    op: Op,
    axes: tuple[str, ...],
    before: Tensor,
    after: Tensor,
    mesh: Mesh,
    sizes: Sizes,
    table: RankTable | None = None,
    offset: int | None = None,
) -> int:
    """``step_bytes(...).rank(table)`` as an exact integer, worked out without the polynomial (x 8 x the product
    of all axis sizes, unknown dims at 4096 and unknown axes at 4): the fast ranking measure, equal across steps
    on one mesh. ``table`` is ``rank_table(mesh)``, when the caller holds it."""
    rec = RECORDS[op]
    volume, factor = rec.volume, rec.factor
    axis, devices = table if table is not None else rank_table(mesh)
    if moves_nothing(op, axes, before.layout()[0], before.unreduced, mesh, offset):
        return 0
    stats = statistics_of(op, axes, before, tuple(d.axes for d in before.dims))
    if stats is not None:
        t, lay = stats
        group = dims = 1
        for d, d_axes in zip(t.dims, lay, strict=True):
            for a in d_axes:
                group *= axis[a]
            dims *= (d.size if d.size is not None else sizes.known.get(d.name)) or SEARCH_DIM
        return devices // group * dims * int(8 * t.dtype.bytes * STATS_FACTOR)
    if volume is Volume.NONE:
        return 0
    t = after if volume is Volume.OUTPUT_GROUP else before
    skip = with_parts(t.sharded_axes, axes, mesh) if volume is Volume.INPUT_GROUP else ()
    group = dims = 1
    known = sizes.known
    for d in t.dims:
        for a in d.axes:
            if a not in skip:
                group *= axis[a]
        n = d.size if d.size is not None else known.get(d.name)  # a named dim's label is its name
        dims *= n or SEARCH_DIM
    dtype = before.dtype or DEFAULT_DTYPE
    scale = _RANK_SCALE.get((op, dtype))
    if scale is None:
        scale = _RANK_SCALE[(op, dtype)] = int(8 * dtype.bytes * factor)
    return devices // group * dims * scale
