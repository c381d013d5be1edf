"""The registry of operations' records, and the registries the layers above keep per operation.

:data:`RECORDS` maps each operation to its record (:mod:`shardalg.algebra.ops.record`), in the order
registered; :data:`RULES` holds the one-operand records, the planner's moves, in that order. What a layer
*does* with an operation (a cost formula, the executor's data movement, an exporter's emitter) is a method
the layer registers on its :class:`Layer`, keyed by the operation; a layer asked for an operation it has no
method for refuses it with a :class:`~shardalg.errors.UsageError` naming the layer. This module imports no
record, not even for annotations (it knows a record by :class:`Record`, what it reads of one), so that the
modules a record is built from (:mod:`shardalg.algebra.traffic`) can read the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import Any, Protocol, TypeVar

from shardalg.errors import UsageError
from shardalg.notation.syntax import Op

__all__ = ["RECORDS", "RULES", "register_op", "forget_op", "rule", "Layer", "LAYERS"]


# ---- the registry of records -------------------------------------------------------------------


class Record(Protocol):
    """What the registry reads of a record (:class:`shardalg.algebra.ops.record.OpRecord`); the layers
    above read the rest."""

    op: Op
    operands: int
    move: bool


R = TypeVar("R", bound=Record)

# The records, typed ``Any``: each is an :class:`~shardalg.algebra.ops.record.OpRecord` (RULES' a
# ``CollectiveRecord``), which this module does not import.
RECORDS: dict[Op, Any] = {}  # every operation's record, in the order registered
RULES: dict[Op, Any] = {}  # the one-operand records that are moves: the planner's, in that order


def register_op(rec: R) -> R:
    """Add an operation's record (a new operation is one record: the layers above read it from here)."""
    if rec.op in RECORDS:
        raise UsageError(f"{rec.op.value} already has a record")
    RECORDS[rec.op] = rec
    if rec.operands == 1 and rec.move:
        RULES[rec.op] = rec
    return rec


def forget_op(op: Op) -> None:
    """Remove an operation: its record, every layer's method for it, and its name (a test's toy operation)."""
    RECORDS.pop(op, None)
    RULES.pop(op, None)
    for layer in LAYERS:
        layer.methods.pop(op, None)
    Op.forget(op)


def rule(op: Op) -> Any:
    """The rule of a collective (the local einsum's is :data:`shardalg.algebra.ops.einsum.LOCAL_EINSUM`)."""
    try:
        return RULES[op]
    except KeyError:
        raise UsageError(
            f"{op.value} is not a collective; see shardalg.algebra.einsum for the local einsum"
        ) from None


# ---- what the layers above register per operation ----------------------------------------------

F = TypeVar("F", bound=Callable[..., object])

LAYERS: list[Layer] = []  # every layer made, so that forgetting an operation forgets its methods


class Layer(MutableMapping[Op, F]):
    """The methods one layer (a cost model, the executor, an exporter) has per operation: ``register(op)``
    decorates a method; ``lookup(op)`` finds it, or refuses the operation naming the layer. A layer is a
    mapping from operation to method (so a test can replace one method for its duration)."""

    def __init__(self, name: str, fix: str = ""):
        self.name, self.fix = name, fix
        self.methods: dict[Op, F] = {}
        LAYERS.append(self)

    def register(self, *ops: Op) -> Callable[[F], F]:
        def add(fn: F) -> F:
            for op in ops:
                self.methods[op] = fn
            return fn

        return add

    def lookup(self, op: Op) -> F:
        got = self.methods.get(op)
        if got is None:
            raise UsageError(f"{self.name} has no method for {op.value}", fix=self.fix or None)
        return got

    def __getitem__(self, op: Op) -> F:
        return self.methods[op]

    def __setitem__(self, op: Op, fn: F) -> None:
        self.methods[op] = fn

    def __delitem__(self, op: Op) -> None:
        del self.methods[op]

    def __iter__(self) -> Iterator[Op]:
        return iter(self.methods)

    def __len__(self) -> int:
        return len(self.methods)

    def __repr__(self) -> str:
        return f"Layer({self.name!r}: {', '.join(op.value for op in self.methods)})"
