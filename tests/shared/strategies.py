"""Hypothesis strategies that build random ASTs of the notation.

    from tests.strategies import tensors, statements, programs
    @given(tensors(axes=("X", "Y"), dims=("I", "J", "K")))

Each strategy takes the axis names and dim names to draw from, as a sequence (sampled from) or as a
strategy (drawn from); by default both are random identifiers, so the round-trip tests meet odd names.
``tensors(legal=True)`` (the default) uses each axis at most once per tensor (across dims, unreduced and
invariant) and each dim name once; ``legal=False`` allows repeats, for tests of the legality errors.
Every name these strategies make parses back: reserved words (``RESERVED``) are never drawn.
"""

from __future__ import annotations

import operator
import string
from collections.abc import Sequence
from functools import cache

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from shardalg.notation.syntax import (
    DTYPE_ALIASES,
    Arrow,
    Collective,
    Dim,
    DType,
    MeshDecl,
    Op,
    Product,
    Program,
    Roles,
    Tensor,
)

__all__ = [
    "RESERVED",
    "identifiers",
    "axis_names",
    "dim_names",
    "tensor_names",
    "dim_tuples",
    "tensors",
    "expressions",
    "statements",
    "programs",
    "mesh_decls",
    "roles",
]

# Words the grammar reads as keywords where a name could also stand.
RESERVED: frozenset[str] = frozenset(
    {op.value for op in Op}
    | set(DTYPE_ALIASES)
    | {"mesh", "where", "LOCAL"}
    | {"params", "embeddings", "saved", "kvcache", "tokens", "layers"}
)

Names = Sequence[str] | SearchStrategy[str]
COLLECTIVE_OPS: tuple[Op, ...] = tuple(op for op in Op if op is not Op.EINSUM and not op.function)


_LETTERS = string.ascii_letters
_ALNUM = string.ascii_letters + string.digits


@cache
def identifiers(max_size: int = 5) -> SearchStrategy[str]:
    """Identifiers of the notation: a letter, then letters and digits; never a reserved word."""
    word = st.builds(operator.add, st.sampled_from(_LETTERS), st.text(_ALNUM, max_size=max_size - 1))
    return word.filter(lambda s: s not in RESERVED)


@cache
def axis_names() -> SearchStrategy[str]:
    """Mostly the book's one-letter axes, sometimes multi-letter ones (``data``, ``DP``, ``x1``)."""
    return st.one_of(st.sampled_from("XYZW"), identifiers(4))


@cache
def dim_names() -> SearchStrategy[str]:
    return st.one_of(st.sampled_from("IJKBDF"), identifiers(4))


@cache
def tensor_names() -> SearchStrategy[str]:
    """``A``, ``In``, ``W_in``, ``W_1``, ``A'``: a word, maybe a subscript, maybe primes."""
    sub = st.one_of(identifiers(3), st.integers(0, 99).map(str))
    return st.builds(
        lambda base, s, primes: base + (f"_{s}" if s else "") + "'" * primes,
        identifiers(3),
        st.one_of(st.none(), sub),
        st.integers(0, 2),
    )


def _pool(names: Names | None, default: SearchStrategy[str]) -> SearchStrategy[str]:
    if names is None:
        return default
    if isinstance(names, SearchStrategy):
        return names
    return _sampled(tuple(names))


@cache
def _sampled(names: tuple[str, ...]) -> SearchStrategy[str]:
    return st.sampled_from(names)


@st.composite
def dim_tuples(
    draw: st.DrawFn,
    *,
    axes: Names | None = None,
    dims: Names | None = None,
    max_dims: int = 3,
    legal: bool = True,
    literal_sizes: bool = True,
) -> tuple[tuple[Dim, ...], tuple[str, ...]]:
    """A tuple of dims and the axes left unused by them (for unreduced / invariant marks)."""
    axis_pool, dim_pool = _pool(axes, axis_names()), _pool(dims, dim_names())
    count = draw(st.integers(1, max_dims))
    labels = draw(st.lists(dim_pool, min_size=count, max_size=count, unique=legal))
    if legal:
        available = draw(st.lists(axis_pool, unique=True, max_size=4))
        slots = draw(st.lists(st.integers(-1, count - 1), min_size=len(available), max_size=len(available)))
        per_dim = [tuple(a for a, s in zip(available, slots, strict=True) if s == i) for i in range(count)]
        unused = tuple(a for a, s in zip(available, slots, strict=True) if s == -1)
    else:
        per_dim = [tuple(draw(st.lists(axis_pool, max_size=3))) for _ in range(count)]
        unused = tuple(draw(st.lists(axis_pool, max_size=2)))
    out = []
    for label, axes_of in zip(labels, per_dim, strict=True):
        if literal_sizes and draw(st.integers(0, 9)) == 0:
            out.append(Dim(None, axes_of, size=draw(st.integers(1, 8192))))
        else:
            out.append(Dim(label, axes_of))
    return tuple(out), unused


@st.composite
def tensors(
    draw: st.DrawFn,
    *,
    axes: Names | None = None,
    dims: Names | None = None,
    names: Names | None = None,
    max_dims: int = 3,
    legal: bool = True,
    dtypes: bool = True,
    literal_sizes: bool = True,
    unreduced: bool = True,
    invariant: bool = True,
    anonymous: bool = True,
) -> Tensor:
    """A tensor: ``A[I_X, J]{U_Y}``, ``bf16[B_X, D]``, ``W_in[D, F_{data,model}]``."""
    the_dims, unused = draw(
        dim_tuples(axes=axes, dims=dims, max_dims=max_dims, legal=legal, literal_sizes=literal_sizes)
    )
    marks = draw(st.lists(st.sampled_from("RUI"), min_size=len(unused), max_size=len(unused)))
    u = tuple(a for a, m in zip(unused, marks, strict=True) if m == "U" and unreduced)
    i = tuple(a for a, m in zip(unused, marks, strict=True) if m == "I" and invariant)
    name_pool = _pool(names, tensor_names())
    name = draw(st.one_of(st.none(), name_pool) if anonymous else name_pool)
    dtype = draw(st.one_of(st.none(), st.sampled_from(list(DType)))) if dtypes else None
    return Tensor(name, the_dims, u, i, dtype)


def expressions(
    *,
    axes: Names | None = None,
    dims: Names | None = None,
    names: Names | None = None,
    max_leaves: int = 4,
    **tensor_options: bool,
) -> SearchStrategy[Tensor | Product | Collective]:
    """Tensors combined by products (with or without ``_D`` / ``_LOCAL``) and collectives."""
    axis_pool, dim_pool = _pool(axes, axis_names()), _pool(dims, dim_names())
    leaf = tensors(axes=axes, dims=dims, names=names, **tensor_options)

    def grow(children: SearchStrategy) -> SearchStrategy:
        contract = st.one_of(st.none(), st.lists(dim_pool, min_size=1, max_size=2).map(tuple))
        product = st.builds(Product, children, children, contract, st.booleans())
        collective = st.builds(
            lambda op, ax, arg, dim, k: Collective(
                op, ax, arg, dim if op.takes_dim else None, k if op.takes_offset else None
            ),
            st.sampled_from(COLLECTIVE_OPS),
            st.lists(axis_pool, min_size=1, max_size=3).map(tuple),
            children,
            st.one_of(st.none(), dim_pool),
            st.integers(-9, 9).filter(bool),  # a Shift's offset: nonzero
        )
        return st.one_of(product, collective)

    return st.recursive(leaf, grow, max_leaves=max_leaves)


def statements(
    *,
    axes: Names | None = None,
    dims: Names | None = None,
    names: Names | None = None,
    max_leaves: int = 4,
    **tensor_options: bool,
) -> SearchStrategy:
    """An expression, or ``expr -> tensor``."""
    expr = expressions(axes=axes, dims=dims, names=names, max_leaves=max_leaves, **tensor_options)
    result = tensors(axes=axes, dims=dims, names=names, **tensor_options)
    return st.one_of(expr, st.builds(Arrow, expr, result))


def mesh_decls(axes: Names | None = None) -> SearchStrategy[MeshDecl]:
    axis_pool = _pool(axes, axis_names())
    pairs = st.lists(
        st.tuples(axis_pool, st.integers(1, 64)), min_size=1, max_size=4, unique_by=lambda p: p[0]
    )
    return pairs.map(lambda ps: MeshDecl(tuple(ps)))


@st.composite
def roles(draw: st.DrawFn, *, names: Names | None = None, dims: Names | None = None) -> Roles:
    """Role declarations: disjoint lists of tensor names per role, token dims, a layer count (a dim name or
    an integer) or none; never empty (an empty Roles is no roles at all)."""
    pool = draw(st.lists(_pool(names, tensor_names()), unique=True, max_size=6))
    slots = draw(st.lists(st.integers(0, 4), min_size=len(pool), max_size=len(pool)))
    groups = [tuple(n for n, s in zip(pool, slots, strict=True) if s == i) for i in range(4)]
    dim_pool = _pool(dims, dim_names())
    tokens = tuple(draw(st.lists(dim_pool, unique=True, max_size=2)))
    layers = draw(st.one_of(st.none(), dim_pool, st.integers(1, 200)))
    made = Roles(*groups, tokens, layers)
    return made if not made.empty else Roles(layers=1)


def programs(
    *,
    axes: Names | None = None,
    dims: Names | None = None,
    names: Names | None = None,
    max_statements: int = 4,
    max_leaves: int = 3,
    **tensor_options: bool,
) -> SearchStrategy[Program]:
    """Statements with an optional ``mesh`` declaration and ``where`` size bindings. The parts are built once
    per call, not once per draw (a strategy built in a draw is validated again each time)."""
    body = st.lists(
        statements(axes=axes, dims=dims, names=names, max_leaves=max_leaves, **tensor_options),
        max_size=max_statements,
    ).map(tuple)
    mesh = st.one_of(st.none(), mesh_decls(axes))
    dim_pool = _pool(dims, dim_names())
    sizes = st.lists(st.tuples(dim_pool, st.integers(1, 1 << 16)), max_size=3, unique_by=lambda p: p[0]).map(
        tuple
    )
    declared = st.one_of(st.none(), roles(names=names, dims=dims))
    return st.builds(Program, body, mesh, sizes, declared)
