"""The AST: frozen, hashable nodes of the notation of "How To Scale Your Model".

Nodes know nothing of parsing, printing or costs. Source spans ride along on every node but take no part
in equality or hashing, so ``parse("A[I_X, J]") == parse("A[ I_X ,J ]")``.

The shapes of the tree::

    Program(statements, mesh, sizes, roles)
      roles     := Roles(params, embeddings, saved, kvcache, tokens, layers) | None
      statement := Arrow(expr, result) | expr
      expr      := Tensor | Product(left, right, contract, local) | Collective(op, axes, arg, dim, offset)
                 | Apply(op, operands, dim, factor)
      Tensor(name, dims, unreduced, invariant, dtype);  Dim(name | size, axes)

Axis and dim names are plain identifiers (``"X"``, ``"data"``, ``"I"``); everything else is a value:
a dim's sharding is the tuple of its axes (major first), the unreduced and invariant sets are sorted tuples,
dtypes are an enum, ops the open set :class:`Op`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields, replace
from fractions import Fraction
from typing import TypeVar

from shardalg.errors import Span, UsageError
from shardalg.lazy import cached

from . import printing
from .op import ROUTES, Op
from .printing import display

__all__ = [
    "DType",
    "Op",
    "Node",
    "Dim",
    "Tensor",
    "Product",
    "Collective",
    "Apply",
    "FLAGS",
    "GRADIENT_FLAGS",
    "flags_of",
    "Arrow",
    "plain_product",
    "MeshDecl",
    "Role",
    "Roles",
    "Program",
    "Expr",
    "Statement",
    "dtype_named",
    "without_spans",
    "nesting",
]


class _IdentityEnum(enum.Enum):
    """An enum whose members hash by identity, as they compare: in C, not Enum's Python ``__hash__``
    (planning and costing look dtypes up in dicts hundreds of times a plan)."""

    __hash__ = object.__hash__


class DType(_IdentityEnum):
    """Element types, with their canonical spelling as the value."""

    FP64 = "fp64"
    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    INT32 = "int32"
    INT8 = "int8"
    INT4 = "int4"

    @property
    def bytes(self) -> Fraction:
        """Bytes per element (int4 is half a byte)."""
        return _DTYPE_BYTES[self]

    def __repr__(self) -> str:
        return f"DType.{self.name}"


_DTYPE_BYTES: dict[DType, Fraction] = {
    DType.FP64: Fraction(8),
    DType.FP32: Fraction(4),
    DType.BF16: Fraction(2),
    DType.FP16: Fraction(2),
    DType.FP8: Fraction(1),
    DType.INT32: Fraction(4),
    DType.INT8: Fraction(1),
    DType.INT4: Fraction(1, 2),
}

# Every spelling the grammar and the API accept, to its dtype.
DTYPE_ALIASES: dict[str, DType] = {
    "fp64": DType.FP64,
    "f64": DType.FP64,
    "float64": DType.FP64,
    "fp32": DType.FP32,
    "f32": DType.FP32,
    "float32": DType.FP32,
    "bf16": DType.BF16,
    "bfloat16": DType.BF16,
    "fp16": DType.FP16,
    "f16": DType.FP16,
    "float16": DType.FP16,
    "fp8": DType.FP8,
    "f8": DType.FP8,
    "float8": DType.FP8,
    "int32": DType.INT32,
    "i32": DType.INT32,
    "int8": DType.INT8,
    "i8": DType.INT8,
    "int4": DType.INT4,
    "i4": DType.INT4,
}


def dtype_named(name: str) -> DType:
    """The dtype spelled ``name`` (``"bf16"``, ``"float32"``, ...); a UsageError names the known ones."""
    try:
        return DTYPE_ALIASES[name.lower()]
    except KeyError:
        known = ", ".join(sorted({d.value for d in DType}))
        raise UsageError(f"unknown dtype {name!r}; known: {known}") from None


@dataclass(frozen=True, repr=False)
class Node:
    """Base of all AST nodes. ``span`` locates the node in its source and is ignored by ``==``."""

    span: Span | None = field(default=None, compare=False, hash=False, repr=False, kw_only=True)

    @property
    def args(self) -> tuple[object, ...]:
        """The node's children and attributes, in field order, without the span (sympy's ``args``)."""
        return tuple(getattr(self, f.name) for f in fields(self) if f.name != "span")

    def replace(self, **changes: object) -> Node:
        return replace(self, **changes)

    def __str__(self) -> str:
        """The node in the canonical text notation, printed once (nodes are immutable; planners' reasons print
        the same tensors again and again)."""
        got = self.__dict__.get("_text")
        if got is None:
            got = self.__dict__["_text"] = printing.text(self)
        return got

    def latex(self) -> str:
        return printing.latex(self)

    def unicode(self) -> str:
        return printing.unicode(self)

    def _repr_latex_(self) -> str:
        return f"${self.latex()}$"

    def __repr__(self) -> str:
        """``<Tensor A[I_X, J]>``: the node in the notation (Unicode), on one line."""
        return display.short(type(self).__name__, printing.unicode(self).replace("\n", "; "))

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        display.pretty_text(self, p, cycle)


@dataclass(frozen=True, repr=False)
class Dim(Node):
    """One dimension of a tensor: a name (``I``) or a literal size (``1024``), and the mesh axes that
    shard it, major first (``I_XY`` is ``Dim("I", ("X", "Y"))``)."""

    name: str | None
    axes: tuple[str, ...] = ()
    size: int | None = None

    def __post_init__(self) -> None:
        if (self.name is None) == (self.size is None):
            raise UsageError(
                "a Dim has a name or a literal size, not both and not neither: "
                f"Dim({self.name!r}, {self.axes!r}, {self.size!r})",
                fix="Dim('I', ('X',)) for I_X; Dim(None, (), 1024) for a dim of size 1024",
            )
        if type(self.axes) is not tuple:
            object.__setattr__(self, "axes", tuple(self.axes))

    @property
    def label(self) -> str:
        """The name, or the literal size as text."""
        return self.name if self.name is not None else str(self.size)

    def with_axes(self, axes: tuple[str, ...]) -> Dim:
        return Dim(self.name, tuple(axes), self.size, span=self.span)  # as replace(), without its field walk


@dataclass(frozen=True, repr=False)
class Tensor(Node):
    """A sharded tensor: ``C[I, K_X]{U_Y}``, ``bf16[B_X, D]`` (no name), ``W_in[D, F_Y]``.

    ``unreduced`` holds the axes along which devices hold partial sums (``{U_X}``); ``invariant`` the axes
    along which a replicated value must get an already-reduced gradient (``{I_X}``). Both are kept sorted,
    so ``{U_Y, U_X}`` and ``{U_X, U_Y}`` are the same tensor.
    """

    name: str | None
    dims: tuple[Dim, ...]
    unreduced: tuple[str, ...] = ()
    invariant: tuple[str, ...] = ()
    dtype: DType | None = None

    def __post_init__(self) -> None:
        # normalized only when needed: the planner makes many tensors, most of them from tuples already sorted
        if type(self.dims) is not tuple:
            object.__setattr__(self, "dims", tuple(self.dims))
        for d in self.dims:
            if type(d) is not Dim:  # made by hand: Tensor("A", ("I",)) would fail later, far from here
                raise UsageError(
                    f"a Tensor's dims are Dim values, not {type(d).__name__} ({d!r})",
                    fix="Tensor('A', (Dim('I', ('X',)), Dim('J'))) for A[I_X, J], or parse('A[I_X, J]')",
                )
        for name in ("unreduced", "invariant"):
            axes = getattr(self, name)
            if type(axes) is not tuple or len(axes) > 1:
                object.__setattr__(self, name, tuple(sorted(axes)))

    @cached
    def dim_names(self) -> tuple[str, ...]:
        """Each dim's label, in order (made once per tensor: planning asks for it often)."""
        return tuple(d.label for d in self.dims)

    @cached
    def _dims_by_label(self) -> dict[str, Dim]:
        """Each dim by its label (the first, should a label repeat, as an illegal tensor may)."""
        out: dict[str, Dim] = {}
        for d in self.dims:
            out.setdefault(d.label, d)
        return out

    def dim(self, name: str) -> Dim:
        return self._dims_by_label[name]

    def axes_of(self, name: str) -> tuple[str, ...]:
        """The axes that shard dim ``name`` (empty when replicated)."""
        return self.dim(name).axes

    @cached
    def located(self) -> bool:
        """Whether the tensor, or one of its dims, points into a source text (has a span)."""
        return self.span is not None or any(d.span is not None for d in self.dims)

    @cached
    def sharded_axes(self) -> tuple[str, ...]:
        """Every axis that shards some dim, in dim order, major first."""
        return tuple([a for d in self.dims for a in d.axes])

    @cached
    def used_axes(self) -> tuple[str, ...]:
        """Every axis the tensor mentions: sharding, unreduced, invariant (with repeats, if illegal)."""
        return self.sharded_axes + self.unreduced + self.invariant

    def with_axes(self, name: str, axes: tuple[str, ...]) -> Tensor:
        """The same tensor with dim ``name`` sharded over ``axes``."""
        dims = tuple(d.with_axes(axes) if d.label == name else d for d in self.dims)
        return Tensor(self.name, dims, self.unreduced, self.invariant, self.dtype, span=self.span)

    def layout(self) -> tuple[tuple[tuple[str, ...], ...], tuple[str, ...], tuple[str, ...]]:
        """The sharding alone: (axes per dim, unreduced, invariant); equal layouts place data alike."""
        return self._layout

    def __hash__(self) -> int:
        """The fields ``==`` compares, hashed once (tensors key the planner's memos)."""
        got = self.__dict__.get("_hash")
        if got is None:
            got = self.__dict__["_hash"] = hash(
                (self.name, self.dims, self.unreduced, self.invariant, self.dtype)
            )
        return got

    def __getstate__(self) -> dict[str, object]:
        """Pickled without the hash: string hashes differ per process."""
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state

    @cached
    def _layout(self) -> tuple[tuple[tuple[str, ...], ...], tuple[str, ...], tuple[str, ...]]:
        return tuple([d.axes for d in self.dims]), self.unreduced, self.invariant


@dataclass(frozen=True, repr=False)
class Product(Node):
    """A matmul or einsum of two operands: ``A[I, J] · B[J, K]``.

    ``contract`` lists dims written under the dot (``·_D``), else None (contract the shared dims not in the
    result); ``local`` is ``·_LOCAL``: multiply the local shards and leave the sum unreduced.
    """

    left: Expr
    right: Expr
    contract: tuple[str, ...] | None = None
    local: bool = False


def plain_product(statement: Node) -> bool:
    """Whether ``statement`` (with its arrow or without) multiplies two tensors, ``A[..] · B[..]``: a product
    the planner plans as written, no expression inside an operand."""
    expr = statement.expr if isinstance(statement, Arrow) else statement
    return isinstance(expr, Product) and isinstance(expr.left, Tensor) and isinstance(expr.right, Tensor)


@dataclass(frozen=True, repr=False)
class Collective(Node):
    """A collective (or a free slice, a permute, a ring shift) applied to an expression: ``AllGather_X(A[I_X,
    J])``, ``ReduceScatter_{X,K} C[I, K]{U_X}``, ``Shift_{X,+1}(A[I_X, J])``. ``dim`` is the target dim of
    ReduceScatter, AllToAll and Slice; ``offset`` the signed step of a Shift (device x sends to x + offset)."""

    op: Op
    axes: tuple[str, ...]
    arg: Expr
    dim: str | None = None
    offset: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "axes", tuple(self.axes))
        if self.op is Op.EINSUM:
            raise ValueError("Einsum is not a collective")
        if (self.offset is not None) != self.op.takes_offset:
            raise ValueError("a Shift has an offset and no other collective has one")


FLAGS = (
    "causal",
    "flash",
)  # the words a softmax's (or a block of attention's) subscript may add after its dim
GRADIENT_FLAGS = ("dq", "dk", "dv")  # which gradient a block of attention's backward (``attend'``) writes


def flags_of(op: Op) -> tuple[str, ...]:
    """The flags ``op``'s subscript may take, in their order: a block's backward takes ``causal`` and the
    gradient it writes; softmax and attend take :data:`FLAGS`; other functions none."""
    if op is Op.ATTEND_D:
        return ("causal", *GRADIENT_FLAGS)
    return FLAGS if op in (Op.SOFTMAX, Op.ATTEND) else ()


@dataclass(frozen=True, repr=False)
class Apply(Node):
    """A function of the notation applied to its operands: elementwise (``gelu(H[B, F_Y])``,
    ``scale_{0.125}(S[B, T])``, ``X[B, D] + Att[B, D]``, ``G[B, F] ⊙ U[B, F]``), a reduction over a named dim
    (``sum_D(X[B, D_X])``, ``max_D``, ``mean_D``) or a composite over one (``softmax_S``, ``rmsnorm_D``,
    ``layernorm_D``). ``dim`` is the dim a reduction or composite works along; ``factor`` a scale's factor.
    Operations of several operands (``attend_S(Q, K, V)``) are the same node with more ``operands``.
    ``flags`` are the words after the dim in the subscript, in :data:`FLAGS` order: ``causal`` (a softmax or
    a block of attention that masks the keys after each query: ``softmax_{S,causal}``) and ``flash`` (fused
    with its products: the scores are never written to HBM). ``offset``: a block of attention's, the devices
    its K and V blocks came round the ring (``attend_{S,causal,1}``), so a mask knows which keys they are.
    A rename's one flag is the new name of its dim (``rename_{T,S}``: dim T, flags ``("S",)``; :attr:`to`)."""

    op: Op
    operands: tuple[Expr, ...]
    dim: str | None = None
    factor: Fraction | None = None
    flags: tuple[str, ...] = ()
    offset: int | None = None  # a block of attention's: how many devices round the ring its K, V came

    def __post_init__(self) -> None:
        object.__setattr__(self, "operands", tuple(self.operands))
        object.__setattr__(self, "flags", tuple(self.flags))
        if isinstance(self.factor, int | float) and not isinstance(self.factor, bool):
            # a factor given in code as a number: the decimal it reads as (0.1 is 1/10, as ``scale_{0.1}``
            # parses), so it prints, prices and compares as the text would
            object.__setattr__(self, "factor", Fraction(repr(self.factor)))
        if (self.offset is not None) != self.op.takes_offset or (self.offset or 0) < 0:
            raise ValueError(
                "a block of attention has an offset (k >= 0), a routing its k, and no other function has one"
            )
        if self.op is Op.RENAME:
            if (
                len(self.flags) != 1
                or not self.flags[0].isidentifier()
                or self.flags[0] in (self.dim, *FLAGS, *GRADIENT_FLAGS)
            ):
                raise ValueError("a rename names its dim, then the dim's new name: rename_{T,S}")
        elif self.flags:
            allowed = flags_of(self.op)
            if not allowed:
                raise ValueError(
                    f"{self.op.value} takes no flags; softmax and attend take {', '.join(FLAGS)}"
                )
            if any(f not in allowed for f in self.flags) or list(self.flags) != sorted(
                set(self.flags), key=allowed.index
            ):
                raise ValueError(f"flags are {', '.join(allowed)}, each once, in that order")
        picked = [f for f in self.flags if f in GRADIENT_FLAGS and self.op is not Op.RENAME]
        if (len(picked) != 1) if self.op is Op.ATTEND_D else bool(picked):
            raise ValueError(
                "attend' names the one gradient it writes (dq, dk or dv); no other function takes those flags"
            )
        if not self.op.function:
            raise ValueError(f"{self.op.value} is not a function of the notation")
        if (self.dim is not None) != self.op.takes_dim:
            raise ValueError(f"{self.op.value} {'takes' if self.op.takes_dim else 'takes no'} dim")
        if (self.factor is not None) != (self.op is Op.SCALE or self.op in ROUTES):
            raise ValueError(
                "a scale has a factor, a routing its capacity factor, and no other function has one"
            )

    @property
    def to(self) -> str | None:
        """A rename's new name for its dim (None for other functions)."""
        return self.flags[0] if self.op is Op.RENAME else None


@dataclass(frozen=True, repr=False)
class Arrow(Node):
    """``expr -> result``: a statement that names (and states the sharding of) what ``expr`` produces.
    With a bare tensor on the left it is a resharding request: ``A[I_X, J] -> A[I, J_X]``."""

    expr: Expr
    result: Tensor


@dataclass(frozen=True, repr=False)
class MeshDecl(Node):
    """``mesh X=4, Y=2``."""

    axes: tuple[tuple[str, int], ...]


class Role(enum.Enum):
    """What a tensor is to a whole model; the value is the keyword that declares it (``params W_in``)."""

    PARAMS = "params"  # parameters of the repeated layer (counted L times)
    EMBEDDINGS = (
        "embeddings"  # parameters outside the repeated layer (embeddings, a final norm: counted once)
    )
    SAVED = "saved"  # activations kept for the backward (a rematerialisation policy's named list)
    KV_CACHE = "kvcache"  # the KV cache of inference

    def __repr__(self) -> str:
        return f"Role.{self.name}"


@dataclass(frozen=True, repr=False)
class Roles(Node):
    """The role declarations of a program: ``params W_in, W_out``, ``embeddings W_emb``, ``saved Tmp``,
    ``kvcache Kc, Vc``, ``tokens B, T`` (the dims whose product counts the tokens of a step) and
    ``layers L`` (how many times the program repeats: a dim name bound like any size, or an integer).
    Names keep their declared order; a tensor has at most one role."""

    params: tuple[str, ...] = ()
    embeddings: tuple[str, ...] = ()
    saved: tuple[str, ...] = ()
    kvcache: tuple[str, ...] = ()
    tokens: tuple[str, ...] = ()
    layers: str | int | None = None

    def __post_init__(self) -> None:
        for name in (*(role.value for role in Role), "tokens"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    def names(self, role: Role) -> tuple[str, ...]:
        """The tensors declared with ``role`` (the field is named by the keyword)."""
        return getattr(self, role.value)

    def role_of(self, name: str) -> Role | None:
        """The role of tensor ``name``, or None."""
        return self._by_name.get(name)

    @cached
    def _by_name(self) -> dict[str, Role]:
        """Each declared tensor's role, by its name (the first role that names it, if a checker let two)."""
        out: dict[str, Role] = {}
        for role in Role:
            for n in self.names(role):
                out.setdefault(n, role)
        return out

    @property
    def empty(self) -> bool:
        return not any(self.names(r) for r in Role) and not self.tokens and self.layers is None


@dataclass(frozen=True, repr=False)
class Program(Node):
    """Statements in order, with the mesh declaration, the ``where`` size bindings and the role
    declarations they came with (``roles`` is None when there are none: an empty Roles becomes None).

    ``source`` is the text it was parsed from (for carets in later errors); like spans it is not compared.
    """

    statements: tuple[Statement, ...]
    mesh: MeshDecl | None = None
    sizes: tuple[tuple[str, int], ...] = ()
    roles: Roles | None = None
    source: str | None = field(default=None, compare=False, hash=False, repr=False, kw_only=True)

    def __post_init__(self) -> None:
        if self.roles is not None and self.roles.empty:
            object.__setattr__(self, "roles", None)

    @property
    def declares_nothing(self) -> bool:
        """Whether it is its statements alone: no mesh, ``where`` sizes or roles declared with them."""
        return (self.mesh, self.sizes, self.roles) == (None, (), None)


Expr = Tensor | Product | Collective | Apply
Statement = Arrow | Tensor | Product | Collective | Apply
_N = TypeVar("_N")


def without_spans(node: _N) -> _N:
    """``node`` (a node, or a tuple of them) made again with no source spans: equal to it (spans take no part in
    ``==``), for work that never points into the text, such as a search pricing thousands of shardings of one
    program (the planner then has no span to settle on its answers: :mod:`shardalg.planning.respan`)."""
    if isinstance(node, tuple):
        return tuple(without_spans(x) for x in node)  # type: ignore[return-value]
    if not isinstance(node, Node):
        return node
    kept = {f.name: without_spans(getattr(node, f.name)) for f in fields(node) if f.init and f.name != "span"}
    return type(node)(**kept)  # type: ignore[return-value]


def nesting(statement: Node) -> int:
    """How many products, collectives and functions nest in a statement (walked without recursion)."""
    deepest, todo = 0, [(statement, 0)]
    while todo:
        node, level = todo.pop()
        if isinstance(node, Arrow):
            todo.append((node.expr, level))
        elif isinstance(node, Product):
            todo += [(node.left, level + 1), (node.right, level + 1)]
        elif isinstance(node, Collective):
            todo.append((node.arg, level + 1))
        elif isinstance(node, Apply):
            todo += [(a, level + 1) for a in node.operands]
        deepest = max(deepest, level)
    return deepest
