"""The operations a statement or a plan step can perform: an open set of interned values.

An :class:`Op` is what the notation needs of an operation: its names, its subscript's shape and whether a
step of it moves data. What it *is* beyond that (its rule, transpose, bytes) is its record in
:mod:`shardalg.algebra.ops`; a new operation is :meth:`Op.define` plus that record.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from shardalg.errors import UsageError

__all__ = ["Op", "ROUTES"]


class _OpKind(type):
    """Iterating ``Op`` yields every operation defined, builtins first (as iterating an enum does)."""

    def __iter__(cls) -> Iterator[Op]:
        return iter(tuple(cls._by_value.values()))  # type: ignore[attr-defined]

    def __len__(cls) -> int:
        return len(cls._by_value)  # type: ignore[attr-defined]


class Op(metaclass=_OpKind):
    """An operation a statement or a plan step can perform: its identity and its subscript's shape. The value
    is the book's name (``Op("AllGather") is Op.ALL_GATHER``). It holds what the notation needs of an op: its
    names, its subscript's shape and whether it moves data.

    The set is open: :meth:`define` makes a new operation, whose record (rule, transpose, bytes) the algebra
    registers (:mod:`shardalg.algebra.ops`). Ops compare and hash by identity, as enum members do."""

    __slots__ = ("name", "value", "takes_dim", "takes_offset", "communicates", "function", "operands")
    _by_value: ClassVar[dict[str, Op]] = {}

    ALL_GATHER: ClassVar[Op]
    REDUCE_SCATTER: ClassVar[Op]
    ALL_REDUCE: ClassVar[Op]
    ALL_TO_ALL: ClassVar[Op]
    SLICE: ClassVar[Op]
    PERMUTE: ClassVar[Op]
    SHIFT: ClassVar[Op]
    SEND: ClassVar[Op]
    EINSUM: ClassVar[Op]
    # elementwise and reducing operations, applied as functions (``gelu(H[B, F])``, ``sum_D(X[B, D])``) or
    # as infix elementwise operators (``+``, ``-``, ``⊙``)
    GELU: ClassVar[Op]
    SILU: ClassVar[Op]
    EXP: ClassVar[Op]
    RELU: ClassVar[Op]
    SCALE: ClassVar[Op]
    ADD: ClassVar[Op]
    SUBTRACT: ClassVar[Op]
    MULTIPLY: ClassVar[Op]
    SUM: ClassVar[Op]
    MAX: ClassVar[Op]
    MEAN: ClassVar[Op]
    SOFTMAX: ClassVar[Op]
    RMSNORM: ClassVar[Op]
    LAYERNORM: ClassVar[Op]
    # their derivatives, the backward's statements: ``gelu'(H, dG)`` is dG times gelu's derivative at H
    GELU_D: ClassVar[Op]
    SILU_D: ClassVar[Op]
    EXP_D: ClassVar[Op]
    RELU_D: ClassVar[Op]
    SUM_D: ClassVar[Op]
    MAX_D: ClassVar[Op]
    MEAN_D: ClassVar[Op]
    SOFTMAX_D: ClassVar[Op]
    RMSNORM_D: ClassVar[Op]
    LAYERNORM_D: ClassVar[Op]
    ATTEND: ClassVar[Op]
    ATTEND_D: ClassVar[Op]
    DISPATCH: ClassVar[Op]
    COMBINE: ClassVar[Op]
    RENAME: ClassVar[Op]

    name: str  # the Python name (``ALL_GATHER``)
    value: str  # the book's name (``AllGather``)
    takes_dim: bool  # whether the subscript names a target dim (``ReduceScatter_{X,K}``)
    takes_offset: bool  # whether the subscript ends in a signed offset (``Shift_{X,+1}``)
    communicates: bool  # whether a step of it moves data between devices (a plan's ``Step.communicates``)
    function: bool  # applied to operands as a function or an elementwise operator, not a collective
    operands: int  # how many operands a function takes (``gelu'(H, dG)``: two)

    def __new__(cls, value: str | Op) -> Op:
        """The op whose book name is ``value`` (a ValueError for an unknown name, as an enum's lookup)."""
        if isinstance(value, Op):
            return value
        try:
            return cls._by_value[value]
        except (KeyError, TypeError):
            raise ValueError(f"{value!r} is not a valid Op") from None

    @classmethod
    def define(
        cls,
        name: str,
        value: str,
        *,
        takes_dim: bool = False,
        takes_offset: bool = False,
        communicates: bool = True,
        function: bool = False,
        operands: int = 1,
    ) -> Op:
        """A new operation named ``value`` (the book's spelling) and ``name`` (the Python one)."""
        if value in cls._by_value:
            raise UsageError(f"an operation named {value} is already defined")
        op = object.__new__(cls)
        attrs = {"name": name, "value": value, "takes_dim": takes_dim, "takes_offset": takes_offset}
        facts = {"communicates": communicates, "function": function, "operands": operands}
        for attr, v in {**attrs, **facts}.items():
            object.__setattr__(op, attr, v)
        cls._by_value[value] = op
        return op

    @classmethod
    def forget(cls, op: Op) -> None:
        """Remove an operation :meth:`define` made (a test's toy operation, when the test ends)."""
        if cls._by_value.get(op.value) is op:
            del cls._by_value[op.value]

    @property
    def computes(self) -> bool:
        """Whether a step of it computes a new value (an einsum, a function), rather than moving one (a
        collective, a slice)."""
        return self is Op.EINSUM or self.function

    def __setattr__(self, attr: str, value: object) -> None:
        raise AttributeError("an Op is immutable")

    def __reduce__(self) -> tuple[type, tuple[str]]:
        return Op, (self.value,)

    def __repr__(self) -> str:
        return f"Op.{self.name}"


Op.ALL_GATHER = Op.define("ALL_GATHER", "AllGather")
Op.REDUCE_SCATTER = Op.define("REDUCE_SCATTER", "ReduceScatter", takes_dim=True)
Op.ALL_REDUCE = Op.define("ALL_REDUCE", "AllReduce")
Op.ALL_TO_ALL = Op.define("ALL_TO_ALL", "AllToAll", takes_dim=True)
Op.SLICE = Op.define("SLICE", "Slice", takes_dim=True, communicates=False)
Op.PERMUTE = Op.define("PERMUTE", "Permute")
Op.SHIFT = Op.define("SHIFT", "Shift", takes_offset=True)
Op.SEND = Op.define("SEND", "Send", takes_offset=True)
Op.EINSUM = Op.define("EINSUM", "Einsum", communicates=False)

# Functions of the notation (``takes_dim``: the subscript names the dim they reduce or normalize over). A
# function with a subscript-free name is elementwise; SCALE's subscript is its factor. Their steps are local
# (``communicates`` False): a reduction over a sharded dim that must combine devices says so in its step.
Op.GELU = Op.define("GELU", "gelu", communicates=False, function=True)
Op.SILU = Op.define("SILU", "silu", communicates=False, function=True)
Op.EXP = Op.define("EXP", "exp", communicates=False, function=True)
Op.RELU = Op.define("RELU", "relu", communicates=False, function=True)
Op.SCALE = Op.define("SCALE", "scale", communicates=False, function=True)
Op.ADD = Op.define("ADD", "add", communicates=False, function=True, operands=2)
Op.SUBTRACT = Op.define("SUBTRACT", "subtract", communicates=False, function=True, operands=2)
Op.MULTIPLY = Op.define("MULTIPLY", "multiply", communicates=False, function=True, operands=2)
Op.SUM = Op.define("SUM", "sum", takes_dim=True, communicates=False, function=True)
Op.MAX = Op.define("MAX", "max", takes_dim=True, communicates=False, function=True)
Op.MEAN = Op.define("MEAN", "mean", takes_dim=True, communicates=False, function=True)
Op.SOFTMAX = Op.define("SOFTMAX", "softmax", takes_dim=True, communicates=False, function=True)
Op.RMSNORM = Op.define("RMSNORM", "rmsnorm", takes_dim=True, communicates=False, function=True)
Op.LAYERNORM = Op.define("LAYERNORM", "layernorm", takes_dim=True, communicates=False, function=True)

# The functions' derivatives (vector-Jacobian products), the statements a backward writes: ``f'(X, dY)`` is the
# gradient of f's operand X given the cotangent dY of its result (softmax's reads the forward's result P
# instead of its operand). The linear functions (scale, +, -, ⊙) need none: their backward is scale, a sum over
# broadcast dims, and ⊙ with the other operand.
for _name, _value, _dim in (
    ("GELU_D", "gelu'", False),
    ("SILU_D", "silu'", False),
    ("EXP_D", "exp'", False),
    ("RELU_D", "relu'", False),
    ("SUM_D", "sum'", True),
    ("MAX_D", "max'", True),
    ("MEAN_D", "mean'", True),
    ("SOFTMAX_D", "softmax'", True),
    ("RMSNORM_D", "rmsnorm'", True),
    ("LAYERNORM_D", "layernorm'", True),
):
    setattr(
        Op, _name, Op.define(_name, _value, takes_dim=_dim, communicates=False, function=True, operands=2)
    )

# One block of attention with the softmax statistics rescaled online (ring attention's step, flash
# attention's inner loop): ``attend_{S,0}(Q, K, V)`` starts the state, ``attend_{S,k}(Q, K, V, O)`` merges in
# the K and V blocks that came k devices round the ring (the offset says which keys they are, for a mask).
Op.ATTEND = Op.define(
    "ATTEND", "attend", takes_dim=True, takes_offset=True, communicates=False, function=True
)
# A block of attention's backward (flash attention's backward on one block, from the forward's row statistics):
# ``attend'_{S,dq,k}(Q, K, V, O, dO)`` is the block's share of dQ (``dk``, ``dv``: the gradient of the K or V
# block the device holds after k shifts round the ring).
Op.ATTEND_D = Op.define(
    "ATTEND_D",
    "attend'",
    takes_dim=True,
    takes_offset=True,
    communicates=False,
    function=True,
    operands=5,
)

# A MoE layer's routing (top-k of a router's logits, each expert's tokens up to its capacity): ``dispatch`` sends
# each token to its k experts' slots, ``[T, D] -> [E, C, D]``; ``combine`` brings the experts' outputs back, each
# weighted by its gate, ``[E, C, D] -> [T, D]``. The subscript names the capacity dim, then ``k`` (the step's offset)
# and the capacity factor ``cf`` (its factor): ``dispatch_{C,k=2,cf=1.25}(H[T_X, D], G[T_X, E])``.
Op.DISPATCH = Op.define(
    "DISPATCH", "dispatch", takes_dim=True, takes_offset=True, communicates=False, function=True, operands=2
)
Op.COMBINE = Op.define(
    "COMBINE", "combine", takes_dim=True, takes_offset=True, communicates=False, function=True, operands=2
)
ROUTES = (Op.DISPATCH, Op.COMBINE)  # the functions whose subscript holds k (offset) and cf (factor)

# A dim of a value called by another name (``rename_{T,S}(Kp[B, T, N]) -> K[B, S, N]``: the keys' positions S
# are the projection's tokens T): the same blocks on the same devices, so a step of it moves nothing; the
# subscript names the dim, then its new name.
Op.RENAME = Op.define("RENAME", "rename", takes_dim=True, communicates=False, function=True)
