"""The record of a function of the notation (elementwise, a reduction over a named dim, softmax or a norm), and
its rule: the layout of its result from its operands' layouts, and what it refuses (issue 26).

One rule covers them all, read from the record's facts:

- **elementwise** (``gelu``, ``silu``, ``exp``, ``relu``, ``scale``; ``+``, ``-``, ``⊙``): the result has the
  operands' layout; operands meet in one layout (a dim they share has the same axes in both; a dim one of them
  lacks is broadcast, and the other must not use that dim's axes elsewhere).
- **reductions** over a dim (``sum_D``, ``mean_D``, ``max_D``): the dim is gone from the result; over a sharded
  dim a sum (or mean) is a partial sum, ``{U_axes}``, as an einsum's contraction is; a max is not a sum, so its
  step all-reduces the per-row maxima over the axes (the step names them).
- **composites** over a dim (``softmax_S``, ``rmsnorm_D``, ``layernorm_D``): the result has the operand's
  layout; over a sharded dim the step all-reduces the per-row statistics over the dim's axes (a few bytes per
  row), which the step names; the other way is to gather the dim first (the planner offers both).
- **unreduced operands** (``{U_X}``: partial sums) are legal for a linear function only: a sum of partial
  sums, or a product with one partial factor; a nonlinearity of a partial sum is not the sum of the
  nonlinearity's values, and the refusal names the AllReduce that fixes it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

from shardalg.errors import IllegalOperand
from shardalg.notation.syntax import Dim, DType, Tensor

from ..layout import Axes, subscript, validate
from ..mesh import Mesh
from ..traffic import Volume
from .record import DimMap, OpRecord, Transpose

__all__ = [
    "FunctionRecord",
    "Kind",
    "Dense",
    "elementwise",
    "statistics_tensor",
    "function_record",
    "records",
    "np",
]


class _Numpy:
    """numpy, imported on its first use: the records' dense meanings run only in the executor, and the
    notation's checks (``shardalg parse``, ``check``, ``shape``) start without numpy."""

    def __getattr__(self, name: str) -> Any:
        import numpy

        return getattr(numpy, name)


if TYPE_CHECKING:
    import numpy as np
else:
    np = _Numpy()

# (operand arrays, the axis index of the dim worked along or None, a scale's factor) -> the result array
Dense = Callable[[Sequence["np.ndarray"], int | None, Fraction | None], "np.ndarray"]
# (the blocks of one group of devices along the sharded dim, in block order; the axis; the dim's global extent)
# -> each device's result block: the local statistics, combined over the group, then applied
Grouped = Callable[[Sequence["np.ndarray"], int, int], list["np.ndarray"]]


class Kind:
    """What a function does with its dims (a record's ``shape``)."""

    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    COMPOSITE = "composite"
    DERIVATIVE = "derivative"  # a reduction's or composite's derivative: f'_D(X, dY) has X's dims and layout
    ROUTE = "route"  # a MoE routing (dispatch, combine): its own rule, its dims change (ops.route)
    RENAME = "rename"  # a dim called by another name: the same blocks, nothing read or written


@dataclass(frozen=True, kw_only=True)
class FunctionRecord(OpRecord):
    """A function's record. ``arity`` operands; ``shape`` one of :class:`Kind`; ``linear``: its value on a sum
    of partials is the sum of its values (partial operands allowed); ``bilinear``: linear in each operand
    (one partial operand allowed, the other replicated on that axis); ``statistics``: the per-row statistics
    a step all-reduces over a sharded dim (empty: none, or the dim's sum is left unreduced), each ``fp32``;
    ``vector_flops``: FLOPs per element of its largest operand, counted apart from matmul FLOPs (a chip's
    vector unit, not its ``C``); ``dense``: its global meaning on numpy arrays."""

    arity: int
    shape: str
    linear: bool = False
    bilinear: bool = False
    statistics: tuple[str, ...] = ()
    stat_reduce: str = "sum"  # how statistics combine across devices: "sum", or "max" then "sum" (softmax)
    vector_flops: int = 1
    dense: Dense
    grouped: Grouped | None = None  # the evaluation over a sharded dim, statistics combined (``statistics``)
    derivative_of: str | None = None  # a derivative's forward function (its second operand is a cotangent)
    drops_dim: bool = False  # a reduction's derivative: the cotangent lacks the dim the forward removed
    shape_only: bool = False  # its first operand is read for its shape only (sum', mean': a broadcast)
    move: ClassVar[bool] = False  # not a planner move: a function is planned as a statement

    @property
    def operands(self) -> int:  # type: ignore[override]
        return self.arity

    def reduces(self) -> bool:
        return self.shape == Kind.REDUCTION

    def stats_axes(self, operand: Tensor, dim: str | None) -> Axes:
        """The axes a step of it all-reduces statistics over: the axes of a sharded ``dim`` for a composite or a
        max; none for an elementwise function, or a sum or mean (whose result is left unreduced)."""
        if dim is None or not self.statistics or dim not in operand.dim_names:
            return ()
        return operand.axes_of(dim)

    def apply(
        self,
        operands: Sequence[Tensor],
        dim: str | None,
        mesh: Mesh,
        axes: Axes = (),
        name: str | None = None,
        flags: tuple[str, ...] = (),
    ) -> Tensor:
        """The result of the function on ``operands`` in their layouts, its statistics all-reduced over
        ``axes`` (which must be the axes of a sharded ``dim`` exactly when the function has statistics);
        IllegalOperand, naming the fix, when the rule refuses."""
        for t in operands:
            validate(t, mesh)
        out = self.result(operands, dim, flags)
        want = self.stats_axes(operands[0], dim) if self.shape != Kind.ELEMENTWISE else ()
        if tuple(axes) != tuple(want):
            raise IllegalOperand(
                f"a step of {self.op.value} over {operands[0]} all-reduces its statistics over "
                f"{subscript(want) if want else 'no axis'}, not {subscript(axes) if axes else 'none'}"
            )
        return Tensor(name, out.dims, out.unreduced, (), out.dtype)

    def result(self, operands: Sequence[Tensor], dim: str | None, flags: tuple[str, ...] = ()) -> Tensor:
        """The (unnamed) result of the function on ``operands`` as they are laid out (``flags``: the
        subscript's words after the dim); IllegalOperand, naming the fix, when the rule refuses them."""
        fn = self.op.value
        if len(operands) != self.arity:
            raise IllegalOperand(f"{fn} takes {self.arity} operand(s), not {len(operands)}")
        for t in operands:
            if len(set(t.dim_names)) != len(t.dim_names):
                raise IllegalOperand(f"{t} names a dim twice; {fn} matches dims by name", span=t.span)
        self._check_unreduced(operands)
        if self.derivative_of is not None:
            self._check_cotangent(operands, dim)
        if self.shape == Kind.ELEMENTWISE:
            return elementwise(operands, fn)
        t = operands[0]
        if dim is None or dim not in t.dim_names:
            raise IllegalOperand(
                f"{fn}_{dim} works along dim {dim}, which {t} does not have",
                fix=f"write {fn}_D with D one of {', '.join(t.dim_names)}",
                span=t.span,
            )
        if self.shape == Kind.COMPOSITE:
            return Tensor(None, t.dims, t.unreduced, (), t.dtype)
        if self.shape == Kind.DERIVATIVE:
            return elementwise(operands, fn)
        dims = tuple(d for d in t.dims if d.label != dim)
        if not dims:
            raise IllegalOperand(f"{fn}_{dim} of {t} leaves no dim; the notation has no scalars", span=t.span)
        partial = () if self.statistics else t.axes_of(dim)
        return Tensor(None, dims, tuple(t.unreduced) + partial, (), t.dtype)

    def _check_cotangent(self, operands: Sequence[Tensor], dim: str | None) -> None:
        """A derivative's second operand is the cotangent of the forward's result: the operand's dims, less the
        dim a reduction removed."""
        t, cot = operands
        want = [d for d in t.dim_names if not (self.drops_dim and d == dim)]
        if sorted(cot.dim_names) != sorted(want):
            forward = f"{self.derivative_of}_{dim}" if dim is not None else self.derivative_of
            raise IllegalOperand(
                f"{self.op.value} takes the cotangent of the result of {forward}({t}): dims "
                f"{', '.join(want)}, not {', '.join(cot.dim_names)}",
                span=cot.span,
            )

    def _check_unreduced(self, operands: Sequence[Tensor]) -> None:
        fn = self.op.value
        partial = [set(t.unreduced) for t in operands]
        if not any(partial):
            return
        if self.linear:
            if len(operands) > 1 and partial[0] != partial[1]:
                odd = sorted(partial[0] ^ partial[1])[0]
                which = operands[0] if odd in partial[0] else operands[1]
                raise IllegalOperand(
                    f"{fn} of {operands[0]} and {operands[1]}: only {which} is unreduced over {odd}, so the "
                    f"other would be added once per device of {odd}",
                    fix=f"AllReduce_{odd}({which}) first, or make both operands partial sums over {odd}",
                    span=which.span,
                )
            return
        if self.bilinear:
            both = partial[0] & partial[1]
            if not both:
                return
            odd = sorted(both)[0]
            raise IllegalOperand(
                f"{fn} of two partial sums over {odd} is not the sum of the partial products",
                fix=f"AllReduce_{odd}({operands[1]}) first",
                span=operands[1].span,
            )
        t = next(t for t, p in zip(operands, partial, strict=True) if p)
        axes = subscript(tuple(t.unreduced))
        raise IllegalOperand(
            f"{fn} is not linear: applied to the partial sums of {t} (unreduced over {axes}) it does not "
            "give the function of their sum",
            fix=f"AllReduce_{axes}({t}) first (or ReduceScatter onto a dim {fn} does not work along)",
            span=t.span,
        )


def elementwise(operands: Sequence[Tensor], fn: str) -> Tensor:
    """The layout two (or one) operands meet in, broadcast over the dims one of them lacks: a dim both have
    must have the same axes; an axis may shard only one dim of the result."""
    dims: dict[str, Dim] = {}
    for t in operands:
        for d in t.dims:
            seen = dims.get(d.label)
            if seen is None:
                dims[d.label] = d
            elif seen.axes != d.axes:
                a, b = operands[0], operands[-1]
                raise IllegalOperand(
                    f"the operands of {fn} do not meet in one layout: dim {d.label} is "
                    f"{seen.label}{'_' + subscript(seen.axes) if seen.axes else ''} in {a} and "
                    f"{d.label}{'_' + subscript(d.axes) if d.axes else ''} in {b}",
                    fix="reshard one operand to the other's layout first (plan does)",
                    span=b.span,
                )
    out_dims = tuple(dims.values())
    used = [a for d in out_dims for a in d.axes]
    for t in operands:
        for a in t.unreduced:
            if a in used:
                raise IllegalOperand(
                    f"{t} is unreduced over {a}, which shards a dim of the other operand of {fn}",
                    fix=f"AllReduce_{a}({t}) first",
                    span=t.span,
                )
    if len(set(used)) != len(used):
        dup = next(a for a in used if used.count(a) > 1)
        raise IllegalOperand(
            f"broadcast, the operands of {fn} shard two dims of the result over {dup}",
            fix=f"gather {dup} from one operand first",
        )
    unreduced = tuple(sorted({a for t in operands for a in t.unreduced}))
    dtype = operands[0].dtype
    return Tensor(None, out_dims, unreduced, (), dtype)


def statistics_tensor(rec: FunctionRecord, operand: Tensor, dim: str) -> Tensor:
    """The per-row statistics a step of ``rec`` all-reduces: the operand's other dims (sharded as they are),
    one fp32 value per statistic."""
    rows = tuple(d for d in operand.dims if d.label != dim)
    extra = (Dim(None, size=len(rec.statistics)),) if len(rec.statistics) > 1 else ()
    return Tensor("stats", rows + extra, (), (), DType.FP32)


def records(
    rows: Sequence[tuple[Any, str, Dense, dict[str, object]]], **common: object
) -> tuple[FunctionRecord, ...]:
    """The records of a table of functions: each row (op, doc, dense meaning, facts), with ``common`` facts."""
    return tuple(function_record(op, doc, dense=dense, **common, **facts) for op, doc, dense, facts in rows)  # type: ignore[arg-type]


def function_record(
    op,
    doc: str,
    *,
    arity: int = 1,
    shape: str = Kind.ELEMENTWISE,
    dense: Dense,
    transpose_note: str,
    kind: type[FunctionRecord] = FunctionRecord,
    **facts: object,
) -> FunctionRecord:
    """A function's record (a ``kind``, :class:`FunctionRecord` or a subclass with a rule of its own): a local
    step (no collective of its own) whose backward is derived from its global meaning (``transpose_note``
    says how; ``{dim}`` in it stands for the dim the function works along, filled in where a statement's
    gradient is said)."""
    return kind(
        op=op,
        doc=doc,
        arity=arity,
        shape=shape,
        dense=dense,
        volume=Volume.NONE,
        factor=Fraction(0),
        group_view=False,
        identity_on_values=False,
        transpose=Transpose(None, DimMap.NONE, "derived", transpose_note),
        **facts,  # type: ignore[arg-type]
    )
