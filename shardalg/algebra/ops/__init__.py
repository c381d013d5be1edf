"""One record per operation (DESIGN.md section 8): what each operation *is*, in one module.

Each module holds one operation: its rule (precondition, effect, moves), its transpose, its bytes per device
(which array V is, and the book's factor) and its printed forms (the docstring that opens with its type
signature; the subscript's shape is the :class:`~shardalg.notation.syntax.Op`'s). :mod:`.record` is the type
of a record; :mod:`shardalg.algebra.registry` is the registry of records (:data:`RECORDS`, and :data:`RULES`
for the planner's one-operand moves) and of the methods the layers above keep per operation (:class:`Layer`:
cost models, the executor's data movement, the exporters). :mod:`.shared` holds what several rules share.

A new operation is ``Op.define`` plus one :func:`register_op` of its record; the planner searches it as soon
as it is registered, and each layer refuses it by name until the layer registers a method for it.
"""

from __future__ import annotations

from ..registry import LAYERS, RECORDS, RULES, Layer, forget_op, register_op, rule
from . import (
    all_gather,
    all_reduce,
    all_to_all,
    attend,
    derivatives,
    einsum,
    elementwise,
    norms,
    permute,
    reduce_scatter,
    reductions,
    rename,
    route,
    send,
    shift,
    slice,
)
from .record import CollectiveRecord, DimMap, OpRecord, Transpose

__all__ = [
    "OpRecord",
    "CollectiveRecord",
    "DimMap",
    "Transpose",
    "RECORDS",
    "RULES",
    "Layer",
    "LAYERS",
    "register_op",
    "forget_op",
    "rule",
]

# the builtin operations, in the order the planner tries their moves
for _module in (all_gather, reduce_scatter, all_reduce, all_to_all, slice, permute, shift, send, einsum):
    register_op(_module.RECORD)
# the functions of the notation (elementwise, reductions, softmax and norms), their derivatives and attention's
# block, in the order their ops are defined
for _record in (
    *elementwise.RECORDS,
    *reductions.RECORDS,
    *norms.RECORDS,
    *derivatives.RECORDS,
    attend.RECORD,
    attend.GRAD_RECORD,
    *route.RECORDS,
    rename.RECORD,
):
    register_op(_record)
