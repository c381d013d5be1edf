"""What an expression means where it stands: the mesh and dim sizes bound to it, and the layout it produces.

    >>> from shardalg import Mesh, parse
    >>> ctx = context_for(parse("A[I_X, J] -> A[I, J]"), mesh=Mesh.parse("X=4"), sizes="I=1024")
    >>> ctx.mesh.names, dict(ctx.sizes)
    (('X',), {'I': 1024})

``context_for`` resolves the mesh (argument, else the program's ``mesh`` line) and the sizes (the ``where``
clause, then the argument), merged by :func:`merged_sizes` and :func:`chosen_mesh`, which tell what the
caller's replaced of the program's (said: :func:`say_replaced`, or in a result's notes); ``value_of`` gives
the tensor a product or a collective produces, by the rules of :mod:`shardalg.algebra.ops`; ``product_dims``
splits the shared dims of a product into contracted and batch. The legality rules
(:mod:`shardalg.algebra.legality`), the cost model and the shape report all read them.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from shardalg import limits
from shardalg.errors import IllegalOperand, NoteWarning, UsageError, closest
from shardalg.notation.syntax import Apply, Arrow, Collective, Dim, MeshDecl, Node, Product, Program, Tensor

from .factors import is_subaxis
from .layout import Layout, tensor_with
from .mesh import Mesh, a_mesh_or_none
from .ops import RECORDS
from .ops import RULES as COLLECTIVES
from .subaxes import axes_in, mesh_is_fine, names_subaxes, refine

__all__ = [
    "Context",
    "context_for",
    "as_sizes",
    "merged_sizes",
    "chosen_mesh",
    "mesh_given_as",
    "say_replaced",
    "value_of",
    "product_dims",
    "tensors_of",
    "refuse_unknown_dims",
]


@dataclass(frozen=True)
class Context:
    """What a check may know beyond the expression: the mesh, the bound dim sizes, the source text,
    and the written result of the product being checked (``A · B -> C``: C decides what is contracted)."""

    mesh: Mesh | None
    sizes: Mapping[str, int]
    source: str | None
    result: Tensor | None = None
    replaced: tuple[str, ...] = ()  # what the caller's mesh and sizes replaced of the program's (said)


# ---- sizes and the context of a node ---------------------------------------------------------------

_SIZE_ITEM = re.compile(r"([A-Za-z][A-Za-z0-9]*)=([1-9][0-9]*)")


def _size_fix(part: str) -> str:
    """What a ``--sizes`` item that is not NAME=INT should be: a dim's integer that is not a positive one
    (``I=0``, ``I=-1``, ``I=007``) is said so; anything else is shown the NAME=INT form."""
    named = re.fullmatch(r"([A-Za-z][A-Za-z0-9]*)=(-?[0-9]+)", part)
    if named is None:
        return "write NAME=INT, e.g. I=1024,J=4096"
    value = named[2]
    zeros = " written without leading zeros" if value.isdigit() and value.strip("0") else ""
    return f"the size of {named[1]} must be a positive integer{zeros}, not {value} (e.g. {named[1]}=1024)"


def as_sizes(sizes: Mapping[str, int] | str | None) -> dict[str, int]:
    """Dim sizes from a mapping or from text ``"I=1024,J=4096"`` (strictly NAME=INT, comma separated)."""
    if sizes is None:
        return {}
    if isinstance(sizes, str):
        out: dict[str, int] = {}
        for part in (p.strip() for p in sizes.split(",")):
            m = _SIZE_ITEM.fullmatch(part)
            if m is None:
                raise UsageError(f"bad size {part!r}: {_size_fix(part)}")
            if m[1] in out:
                raise UsageError(f"size of {m[1]} given twice")
            out[m[1]] = limits.require_digits(m[2], f"the size of {m[1]}")
        return out
    if isinstance(sizes, Mapping):
        for k, v in sizes.items():
            if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise UsageError(f"a size is a dim name and a positive integer, not {k!r}={v!r}")
            limits.require_size(v, f"the size of {k}")
        return dict(sizes)
    raise UsageError(f"sizes are a mapping or text like 'I=1024,J=4096', not {sizes!r}")


def merged_sizes(
    written: Iterable[tuple[str, int]] | Mapping[str, int],
    given: Mapping[str, int] | Iterable[tuple[str, int]] | str | None,
) -> tuple[dict[str, int], tuple[str, ...]]:
    """The sizes a program's ``where`` binds (``written``), then ``given`` (which wins), and a line for each
    size ``given`` replaced: ``--sizes L=2 replaces the program's L=80``. Replacing is allowed (a 2-layer
    model is a fair question), never silent: the caller says the lines (:func:`say_replaced`, or a result's
    notes)."""
    bound = dict(written.items() if isinstance(written, Mapping) else written)
    if given is not None and not isinstance(given, str | Mapping):  # pairs, as a Program's sizes are
        try:
            given = dict(given)
        except (TypeError, ValueError):
            pass  # as_sizes says what sizes are
    own = as_sizes(given)
    said = tuple(
        f"--sizes {d}={n} replaces the program's {d}={bound[d]}"
        for d, n in own.items()
        if d in bound and bound[d] != n
    )
    return {**bound, **own}, said


_GIVEN_AS: ContextVar[str | None] = ContextVar("shardalg_mesh_given_as", default=None)


@contextmanager
def mesh_given_as(words: str | None) -> Iterator[None]:
    """Inside: the caller's mesh is the one ``words`` give (``--slice v5e-8``: the user typed no ``--mesh``),
    and the line of what it replaces of a program's mesh line names them (:func:`chosen_mesh`); None changes
    nothing."""
    token = _GIVEN_AS.set(words if words is not None else _GIVEN_AS.get())
    try:
        yield
    finally:
        _GIVEN_AS.reset(token)


def chosen_mesh(written: MeshDecl | None, given: Mesh | None) -> tuple[Mesh | None, tuple[str, ...]]:
    """The mesh: ``given`` (the caller's), else the program's ``mesh`` line; and a line when ``given``
    replaced a different mesh line: ``--mesh X=8 replaces the program's mesh X=4``, or, where the mesh came
    from other words (:func:`mesh_given_as`), ``--slice v5e-8 gives the mesh x=2,y=4, which replaces the
    program's mesh X=4``. An axis given without a size (a search's symbolic degree) replaces nothing."""
    if written is None:
        return given, ()
    own = Mesh(dict(written.axes))
    if given is None:
        return own, ()
    sizes = dict(written.axes)
    if given.names == own.names and all(a.size in (None, sizes[a.name]) for a in given.axes):
        return given, ()
    text = ",".join(f"{a.name}={a.size}" if a.size is not None else a.name for a in given.axes)
    words = _GIVEN_AS.get()
    if words is not None:
        return given, (f"{words} gives the mesh {text}, which replaces the program's {own.text()}",)
    return given, (f"--mesh {text} replaces the program's {own.text()}",)


def say_replaced(said: Iterable[str]) -> None:
    """Say each line of what the caller's mesh or sizes replaced, as a :class:`~shardalg.errors.NoteWarning`
    (the command line prints it on stderr as ``shardalg: note: ...``), for an answer with no notes of its own
    (a plan, a check, a shape). Issued from here, so that a line said by two entry points of one call (a plan
    checks, a backward plans) is said once, as warnings are."""
    for line in said:
        warnings.warn(line, NoteWarning, stacklevel=1)


def context_for(node: Node, mesh: Mesh | None = None, sizes=None, source: str | None = None) -> Context:
    """The mesh (argument, a :class:`Mesh` the API made, else the program's ``mesh`` line) and sizes (the program's ``where``, then the
    ``sizes`` argument, which wins) that apply to ``node``, with what the arguments replaced of the program's
    (``replaced``: :func:`merged_sizes`, :func:`chosen_mesh`; the caller says it)."""
    m = a_mesh_or_none(mesh, "context_for")
    if not isinstance(node, Program):
        return Context(m, as_sizes(sizes), source)
    m, mesh_said = chosen_mesh(node.mesh, m)
    bound, sizes_said = merged_sizes(node.sizes, sizes)
    source = source if source is not None else node.source
    return Context(m, bound, source, replaced=mesh_said + sizes_said)


def tensors_of(node: object) -> list[Tensor]:
    """Every tensor written in ``node`` (a program, statement or expression), results included, in order."""
    if isinstance(node, Tensor):
        return [node]
    if isinstance(node, Program):
        return [t for s in node.statements for t in tensors_of(s)]
    if isinstance(node, Arrow):
        return tensors_of(node.expr) + tensors_of(node.result)
    if isinstance(node, Product):
        return tensors_of(node.left) + tensors_of(node.right)
    if isinstance(node, Collective):
        return tensors_of(node.arg)
    if isinstance(node, Apply):
        return [t for o in node.operands for t in tensors_of(o)]
    return []


def refuse_unknown_dims(given: Iterable[str], known: Iterable[str], what: str, where: str) -> None:
    """A UsageError when ``what`` (e.g. "--sizes") names dims outside ``known`` (the dims of ``where``, e.g.
    "the program"): the message lists the dims there, the fix the closest names (did you mean)."""
    have = list(dict.fromkeys(known))
    unknown = [d for d in dict.fromkeys(given) if d not in have]
    if not unknown:
        return
    close = {d: c for d in unknown if (c := closest(d, have, cutoff=0.5, fold_case=False))}
    if len(unknown) == 1 and close:
        fix = f"did you mean {close[unknown[0]]}?"
    elif close:
        fix = "did you mean " + ", ".join(f"{c} for {d}" for d, c in close.items()) + "?"
    else:
        fix = None
    raise UsageError(
        f"{what} names {', '.join(unknown)}: no such dim in {where} (dims there: {', '.join(have) or 'none'})",
        fix=fix,
    )


# ---- the value of an expression --------------------------------------------------------------------


def product_dims(left: Tensor, right: Tensor, contract: tuple[str, ...] | None, result: Tensor | None):
    """(contracted, batch) dim labels of ``left · right``: explicit ``·_D`` first, else the shared dims
    that the written result does not keep, else (no result) every shared dim."""
    shared = [d for d in left.dim_names if d in right.dim_names]
    if contract is not None:
        contracted = tuple(d for d in contract if d in left.dim_names or d in right.dim_names)
    elif result is not None:
        contracted = tuple(d for d in shared if d not in result.dim_names)
    else:
        contracted = tuple(shared)
    return contracted, tuple(d for d in shared if d not in contracted)


def _product_value(p: Product, ctx: Context, result: Tensor | None) -> Tensor:
    """The natural result of a local einsum: kept dims with their input axes; contracted dims sharded on
    the same axes in both inputs make the result unreduced on them (case 3)."""
    left, right = value_of(p.left, ctx), value_of(p.right, ctx)
    contracted, _ = product_dims(left, right, p.contract, result)
    dims = [d for d in left.dims if d.label not in contracted]
    dims += [d for d in right.dims if d.label not in contracted and d.label not in left.dim_names]
    summed = {
        a
        for c in contracted
        if c in left.dim_names and c in right.dim_names and left.axes_of(c) == right.axes_of(c)
        for a in left.axes_of(c)
    }
    used = {a for d in dims for a in d.axes}
    unreduced = (set(left.unreduced) | set(right.unreduced) | summed) - used
    invariant = (set(left.invariant) & set(right.invariant)) - used - unreduced
    name = result.name if result is not None else None
    return Tensor(
        name,
        tuple(Dim(d.name, d.axes, d.size) for d in dims),
        tuple(unreduced),
        tuple(invariant),
        left.dtype or right.dtype,
    )


# A collective's effect and precondition are its record's (shardalg.algebra.ops: one registry, DESIGN.md section 3).


def target_index(c: Collective, t: Tensor, result: Tensor | None) -> int | None:
    """The target dim of ReduceScatter / AllToAll / Slice: written (``_{X,K}``) or, as the book writes
    ``ReduceScatter_X(A[I]{U_X}) -> A[I_X]``, the dim on which the rule's output matches the result."""
    if not c.op.takes_dim:
        return None
    if c.dim is not None:
        return t.dim_names.index(c.dim) if c.dim in t.dim_names else None
    if result is None:
        return None
    effect, lay, want = COLLECTIVES[c.op].effect, Layout.of(t), Layout.of(result)
    return next((i for i in range(len(t.dims)) if effect(lay, c.axes, i)[:2] == want[:2]), None)


def value_of(expr: Node, ctx: Context, result: Tensor | None = None) -> Tensor:
    """The layout an expression produces (best effort on illegal input: the checks report those)."""
    if isinstance(expr, Tensor):
        return expr
    if ctx.mesh is not None and names_subaxes(expr) and not mesh_is_fine(ctx.mesh, expr, result):
        r = refine(ctx.mesh, [a for a in axes_in(expr) if is_subaxis(a)])  # on the mesh refined into factors
        fine = None if result is None else r.expand(result)
        got = value_of(r.expand(expr), Context(r.fine, ctx.sizes, ctx.source, fine), fine)  # type: ignore[arg-type]
        return r.coarsen(got)
    if isinstance(expr, Product):
        return _product_value(expr, ctx, result)
    if isinstance(expr, Collective):
        t = value_of(expr.arg, ctx)
        index = target_index(expr, t, result)
        if expr.op.takes_dim and index is None:
            return t
        return tensor_with(t, COLLECTIVES[expr.op].effect(Layout.of(t), expr.axes, index))
    if isinstance(expr, Apply):
        operands = [value_of(x, ctx) for x in expr.operands]
        try:
            return RECORDS[expr.op].result(operands, expr.dim, expr.flags)
        except IllegalOperand:  # best effort: the function rule reports it
            whole = [tensor_with(t, Layout(tuple(() for _ in t.dims), (), ())) for t in operands]
            try:  # the dims a layout cannot change (a routing's result, its operands laid out otherwise)
                return RECORDS[expr.op].result(whole, expr.dim)
            except IllegalOperand:
                pass
            t = operands[0]
            keep = tuple(d for d in t.dims if d.label != expr.dim or not RECORDS[expr.op].reduces())
            return Tensor(None, keep or t.dims, (), (), t.dtype)
    raise UsageError(f"not an expression: {type(expr).__name__}")
