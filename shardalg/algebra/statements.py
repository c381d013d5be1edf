"""Collective statements: what ``AllGather_X(A[I_X, J])`` or ``AllGather_X: A[I_X, J] -> A[I, J]`` produces.

The rule of the op (:data:`shardalg.algebra.ops.RULES`) is checked and applied; a written result must be the rule's
output (or that output marked invariant on the gathered / reduced axes, DESIGN.md section 4); a ReduceScatter,
AllToAll or Slice written without its target dim takes it from the written result.
"""

from __future__ import annotations

from collections.abc import Mapping

from shardalg.errors import IllegalCollective, ShapeMismatch, UsageError
from shardalg.notation.syntax import Arrow, Collective, Tensor

from .factors import is_subaxis
from .layout import Axes, Layout, tensor_with
from .mesh import Mesh
from .ops import CollectiveRecord, rule
from .ops.shared import subscript
from .subaxes import axes_in, mesh_is_fine, names_subaxes, refine

__all__ = ["apply_statement"]


def _same_value(a: Tensor, b: Tensor) -> bool:
    return a.dim_names == b.dim_names and (a.dtype is None or b.dtype is None or a.dtype == b.dtype)


def apply_statement(stmt: Collective | Arrow, mesh: Mesh, sizes: Mapping[str, int] | None = None) -> Tensor:
    """The tensor a collective statement produces: ``AllGather_X(A[I_X, J])`` or
    ``AllGather_X: A[I_X, J] -> A[I, J]`` (whose written result must be the rule's output)."""
    result = stmt.result if isinstance(stmt, Arrow) else None
    expr = stmt.expr if isinstance(stmt, Arrow) else stmt
    if not isinstance(expr, Collective):
        raise UsageError(f"not a collective statement: {type(expr).__name__}")
    if names_subaxes(stmt) and not mesh_is_fine(mesh, stmt):  # on the mesh refined into its factors
        r = refine(mesh, [a for a in axes_in(stmt) if is_subaxis(a)])
        return r.coarsen(apply_statement(r.expand(stmt), r.fine, sizes))  # type: ignore[arg-type]
    arg = expr.arg
    if isinstance(arg, Collective):
        arg = apply_statement(arg, mesh, sizes)
    elif not isinstance(arg, Tensor):
        raise UsageError("a collective applies to a tensor or another collective; plan products first")
    r = rule(expr.op)
    dim = expr.dim
    if dim is None and expr.op.takes_dim and result is not None:
        dim = _dim_from_result(r, arg, expr.axes, result, mesh)
    try:
        out = r.apply(arg, expr.axes, dim, mesh, sizes)
    except IllegalCollective as err:
        if err.span is None:
            err.span = expr.span
        raise
    if result is None:
        return out
    if not _same_value(out, result) or not _layout_matches(out, result, expr):
        sub = subscript(expr.axes)
        if expr.offset is not None:
            sub = f"{{{','.join(expr.axes)},{expr.offset:+d}}}"
        raise ShapeMismatch(
            f"{expr.op.value}_{sub} of {arg} gives {out}, not {result}",
            span=result.span,
            fix=f"write the result as {str(out.replace(name=result.name) if result.name != out.name else out)}",
        )
    return result if result.name is not None else tensor_with(out, Layout.of(result))


def _layout_matches(out: Tensor, result: Tensor, expr: Collective) -> bool:
    lo, lr = Layout.of(out), Layout.of(result)
    if lo == lr:
        return True
    if rule(expr.op).may_be_invariant and lo.dims == lr.dims and lo.unreduced == lr.unreduced:
        extra = set(lr.invariant) - set(lo.invariant)
        return set(lo.invariant) <= set(lr.invariant) and extra <= set(expr.axes)
    return False


def _dim_from_result(r: CollectiveRecord, arg: Tensor, axes: Axes, result: Tensor, mesh: Mesh) -> str | None:
    """The target dim of a ReduceScatter (AllToAll, Slice) written without one: the dim of ``arg`` on which
    the rule's output matches the written result."""
    lay, want = Layout.of(arg), Layout.of(result)
    for i, d in enumerate(arg.dims):
        if r.effect(lay, tuple(axes), i)[:2] == want[:2]:
            return d.label
    raise ShapeMismatch(
        f"{r.op.value}_{subscript(tuple(axes))}: no dim of {arg} gives {result}",
        span=result.span,
        fix=f"name the target dim: {r.op.value}_{{{','.join(axes)},d}}",
    )
