"""Legality: the rules of DESIGN.md section 2 that a single expression must obey, run as a table.

    >>> [v.rule for v in check("A[I_X, J_X]")]
    ['axis-used-twice']

Each rule is a record (name, error class, node type, check function); ``check`` walks the tree children
first, left to right, and runs every rule whose node type matches. A check yields violations: the message,
the span of the offending part (the dim ``J_X``, the ``{U_X}`` suffix, a collective's subscript) and a fix
written in the notation. ``check_or_raise`` raises the first one as its error class.

What is *not* illegal here: a contraction whose dim is sharded on one side only or on different axes (the
planner gathers or slices first), and a written result whose sharding differs from the natural one (that is
a request: the planner adds the collectives).

The mesh and sizes a check sees, and the layout an expression produces, come from :mod:`shardalg.algebra.context`
(``Context``, ``context_for``, ``as_sizes``, ``value_of``, ``product_dims`` are re-exported here).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from shardalg.errors import (
    AxisUsedTwice,
    BatchDimMismatch,
    IllegalCollective,
    IllegalSharding,
    IndivisibleDim,
    SameAxisResultDims,
    ShapeMismatch,
    ShardalgError,
    Span,
    UnknownAxis,
    UnreachableUnreduced,
    UnreducedProduct,
    UsageError,
)
from shardalg.notation.syntax import Arrow, Collective, Dim, Node, Op, Product, Program, Tensor

from .context import Context, as_sizes, context_for, product_dims, target_index, value_of
from .mesh import Mesh
from .rules import RULES as COLLECTIVES
from .statements import apply_statement

__all__ = [
    "Violation", "Rule", "RULES", "Context", "check", "check_or_raise", "context_for", "as_sizes",
    "value_of", "product_dims",
]  # fmt: skip


@dataclass(frozen=True)
class Violation:
    """One broken rule: which, where (``span`` into ``source``), why and what would fix it."""

    rule: str
    error: type[IllegalSharding]
    message: str
    span: Span | None = None
    fix: str | None = None
    source: str | None = field(default=None, compare=False, repr=False)

    def to_error(self) -> IllegalSharding:
        return self.error(self.message, span=self.span, source=self.source, fix=self.fix, rule=self.rule)

    def __str__(self) -> str:
        return str(self.to_error())

    def __repr__(self) -> str:
        from shardalg.notation.printing.display import short

        return short("Violation", f"[{self.rule}] {self.message}")


class Violations(list):
    """What :func:`check` found: a list of :class:`Violation` (empty when legal), a table in a notebook."""

    def _repr_html_(self) -> str:
        from shardalg.errors import render_caret
        from shardalg.notation.printing.display import html_table

        rows = []
        for v in self:
            where = render_caret(v.source, v.span) if v.source is not None and v.span is not None else ""
            rows.append([v.rule, v.message, where, v.fix or ""])
        caption = "legal: no rule is broken" if not self else f"{len(self)} broken rule(s)"
        return html_table(["rule", "what is wrong", "where", "fix"], rows, caption, code=(2,))


# a check yields (message, span, fix)
Found = tuple[str, Span | None, str | None]
CheckFn = Callable[[Node, Context], Iterator[Found]]


@dataclass(frozen=True)
class Rule:
    name: str
    error: type[IllegalSharding]
    node: type[Node]
    check: CheckFn


def _text(node: Node) -> str:
    from shardalg.notation.printing import text

    return text(node)


# ---- spans of the parts of a node ------------------------------------------------------------------


def _slice_span(node: Node, source: str | None, start_at: int, end_at: int) -> Span | None:
    """The span of ``source[start_at:end_at]`` without its surrounding blanks."""
    if source is None:
        return node.span
    part = source[start_at:end_at]
    lead = len(part) - len(part.lstrip())
    trail = len(part) - len(part.rstrip())
    if lead + trail >= len(part):
        return node.span
    return Span(start_at + lead, end_at - trail)


def _suffix_span(t: Tensor, source: str | None) -> Span | None:
    """The ``{U_X}`` / ``\\{ U_X \\}`` suffix of a tensor: what follows its closing bracket."""
    if t.span is None or source is None:
        return t.span
    close = source.rfind("]", t.span.start, t.span.end)
    if close < 0:
        return t.span
    return _slice_span(t, source, close + 1, t.span.end)


def _head_span(c: Collective, source: str | None) -> Span | None:
    """A collective's name and subscript, ``AllGather_X``, without its argument."""
    if c.span is None or source is None or c.arg.span is None:
        return c.span
    head = source[c.span.start : c.arg.span.start].rstrip()
    head = head[:-1] if head.endswith(("(", ":")) else head
    return _slice_span(c, source, c.span.start, c.span.start + len(head))


def _dim_span(t: Tensor, label: str) -> Span | None:
    for d in t.dims:
        if d.label == label:
            return d.span or t.span
    return t.span


# ---- the rules ------------------------------------------------------------------------------------
# Per tensor: each mesh axis is used once (a dim, the unreduced set or the invariant set), is in the mesh,
# and a dim's size is divisible by the sizes of the axes that shard it.


def _places(t: Tensor, source: str | None) -> Iterator[tuple[str, str, str, Span | None]]:
    """(axis, kind, dim label, span) for every use of an axis in ``t``, in reading order."""
    for d in t.dims:
        for a in d.axes:
            yield a, "dim", d.label, d.span or t.span
    suffix = _suffix_span(t, source)
    for kind, axes in (("unreduced", t.unreduced), ("invariant", t.invariant)):
        for a in axes:
            yield a, kind, "", suffix


_USE = {"dim": "shards {label}", "unreduced": "is unreduced ({{U_{axis}}})", "invariant": "is invariant ({{I_{axis}}})"}


def _drop(t: Tensor, axis: str, kind: str, label: str) -> Tensor:
    """``t`` without one use of ``axis`` (the last one in ``label``'s subscript)."""
    if kind == "dim":
        axes = list(t.axes_of(label))
        del axes[len(axes) - 1 - axes[::-1].index(axis)]
        return t.with_axes(label, tuple(axes))
    return replace(t, **{kind: tuple(a for a in getattr(t, kind) if a != axis)})


def axis_used_twice(t: Tensor, ctx: Context) -> Iterator[Found]:
    first: dict[str, tuple[str, str]] = {}
    for axis, kind, label, span in _places(t, ctx.source):
        if axis not in first:
            first[axis] = (kind, label)
            continue
        k1, l1 = first[axis]
        if (k1, kind) == ("dim", "dim") and l1 == label:
            yield f"mesh axis {axis} shards {label} twice", span, f"name each axis once: {_text(_drop(t, axis, kind, label))}"
        elif (k1, kind) == ("dim", "dim"):
            fix = f"shard {label} over another axis, or replicate it: {_text(_drop(t, axis, kind, label))}"
            yield f"mesh axis {axis} shards both {l1} and {label}", span, fix
        else:
            uses = [_USE[k].format(label=lb, axis=axis) for k, lb in ((k1, l1), (kind, label))]
            fix = f"use {axis} in one place: {_text(_drop(t, axis, kind, label))} or {_text(_drop(t, axis, k1, l1))}"
            yield f"mesh axis {axis} {uses[0]} and {uses[1]}", span, fix


def unknown_axis(t: Tensor, ctx: Context) -> Iterator[Found]:
    if ctx.mesh is None:
        return
    names = ", ".join(ctx.mesh.names)
    seen: set[str] = set()
    for axis, _kind, _label, span in _places(t, ctx.source):
        if axis not in ctx.mesh and axis not in seen:
            seen.add(axis)
            yield (f"mesh axis {axis} is not in the mesh ({names})", span,
                   f"use an axis of the mesh ({names}), or add {axis} to it")  # fmt: skip


def indivisible_dim(t: Tensor, ctx: Context) -> Iterator[Found]:
    if ctx.mesh is None:
        return
    for d in t.dims:
        size = d.size if d.size is not None else ctx.sizes.get(d.label)
        if size is None or not d.axes or any(a not in ctx.mesh or ctx.mesh[a].size is None for a in d.axes):
            continue
        n = ctx.mesh.group_size(d.axes)
        if size % n == 0:
            continue
        keep = max(k for k in range(len(d.axes) + 1) if size % ctx.mesh.group_size(d.axes[:k]) == 0)
        how = f"shard {d.label} over fewer axes" if keep else f"replicate {d.label}"
        factors = " · ".join(f"|{a}|" for a in d.axes)
        yield (f"dim {d.label} has size {size}, not divisible by {factors} = {n}", d.span or t.span,
               f"{how}: {_text(t.with_axes(d.label, d.axes[:keep]))}, or make its size a multiple of {n}")  # fmt: skip


# Per product (a local einsum): no axis unreduced in both operands, batch dims sharded alike in both,
# and no mesh axis sharding a kept dim of each operand (the book's case 4).


def _operand_dim_span(expr: Node, label: str) -> Span | None:
    return _dim_span(expr, label) if isinstance(expr, Tensor) else expr.span


def unreduced_product(p: Product, ctx: Context) -> Iterator[Found]:
    left, right = value_of(p.left, ctx), value_of(p.right, ctx)
    both = tuple(sorted(set(left.unreduced) & set(right.unreduced)))
    if not both:
        return
    span = _suffix_span(p.right, ctx.source) if isinstance(p.right, Tensor) else p.right.span
    reduce = [_text(Collective(Op.ALL_REDUCE, both, side)) for side in (p.left, p.right)]
    yield (f"both operands are unreduced over {', '.join(both)}: a product of partial sums is not a partial "
           f"sum of the product", span, f"reduce one operand first: {reduce[0]} or {reduce[1]}")  # fmt: skip


def batch_dim_mismatch(p: Product, ctx: Context) -> Iterator[Found]:
    left, right = value_of(p.left, ctx), value_of(p.right, ctx)
    _, batch = product_dims(left, right, p.contract, ctx.result)
    for d in batch:
        la, ra = left.axes_of(d), right.axes_of(d)
        if la != ra:
            shown = [_text(Dim(d, axes)) for axes in (la, ra)]
            fix = f"reshard one input so {d} matches: {_text(left.with_axes(d, ra))} or {_text(right.with_axes(d, la))}"
            yield (f"batch dim {d} is sharded differently in the two inputs: {shown[0]} and {shown[1]}",
                   _operand_dim_span(p.right, d), fix)  # fmt: skip


def case_4(p: Product, ctx: Context) -> Iterator[Found]:
    left, right = value_of(p.left, ctx), value_of(p.right, ctx)
    contracted, batch = product_dims(left, right, p.contract, ctx.result)
    skip = set(contracted) | set(batch)
    kept_left = {a: d for d in left.dims if d.label not in skip for a in d.axes}
    for d in right.dims:
        if d.label in skip:
            continue
        for a in d.axes:
            if a not in kept_left:
                continue
            ld = kept_left[a]
            gathers = [_text(Collective(Op.ALL_GATHER, dim.axes[dim.axes.index(a):], side))
                       for dim, side in ((ld, p.left), (d, p.right))]  # fmt: skip
            yield (f"case 4: the result dims {ld.label} and {d.label} are both sharded over {a}",
                   _operand_dim_span(p.right, d.label), f"gather one operand first: {gathers[0]} or {gathers[1]}")  # fmt: skip


# Per collective: its axes are in the mesh, and its input meets its precondition (DESIGN.md section 3).


def collective_unknown_axis(c: Collective, ctx: Context) -> Iterator[Found]:
    if ctx.mesh is None:
        return
    names = ", ".join(ctx.mesh.names)
    for axis in dict.fromkeys(c.axes):
        if axis not in ctx.mesh:
            yield (f"{c.op.value} names mesh axis {axis}, which is not in the mesh ({names})",
                   _head_span(c, ctx.source), f"use an axis of the mesh ({names}), or add {axis} to it")  # fmt: skip


def _symbolic_mesh(t: Tensor, c: Collective) -> Mesh:
    return Mesh({a: None for a in dict.fromkeys(t.used_axes + c.axes)})


def collective_precondition(c: Collective, ctx: Context) -> Iterator[Found]:
    """The rule's own precondition (shardalg.algebra.rules); problems of the argument tensor itself (an axis used
    twice, not in the mesh) are reported by the tensor rules, once. Without a mesh, sizes are unknown, so
    a Permute (legal only between axes that keep the local shape) is not judged."""
    if ctx.mesh is None and c.op is Op.PERMUTE:
        return
    t = value_of(c.arg, ctx)
    mesh = ctx.mesh or _symbolic_mesh(t, c)
    index = target_index(c, t, ctx.result)
    dim = t.dims[index].label if index is not None else c.dim
    try:
        COLLECTIVES[c.op].check(t, c.axes, dim, mesh)
    except (AxisUsedTwice, UnknownAxis):
        return
    except IllegalCollective as err:
        yield err.message, _head_span(c, ctx.source), err.fix


def collective_result_divisible(c: Collective, ctx: Context) -> Iterator[Found]:
    """A legal collective's result must divide too: the dims it newly shards, by their axes."""
    if ctx.mesh is None:
        return
    t = value_of(c.arg, ctx)
    index = target_index(c, t, ctx.result)
    try:
        COLLECTIVES[c.op].check(t, c.axes, t.dims[index].label if index is not None else c.dim, ctx.mesh)
    except ShardalgError:
        return  # reported by the precondition or the tensor rules
    out = value_of(c, ctx, ctx.result)
    for before, after in zip(t.dims, out.dims, strict=True):
        size = after.size if after.size is not None else ctx.sizes.get(after.label)
        if size is None or after.axes == before.axes or any(ctx.mesh[a].size is None for a in after.axes):
            continue
        n = ctx.mesh.group_size(after.axes)
        if size % n:
            factors = " · ".join(f"|{a}|" for a in after.axes)
            yield (f"{c.op.value} would shard {after.label} (size {size}) over {factors} = {n}, which does not "
                   f"divide it", _head_span(c, ctx.source), f"move axes whose sizes divide {size} onto "
                   f"{after.label}, or make its size a multiple of {n}")  # fmt: skip


def unreduced_result(s: Arrow, ctx: Context) -> Iterator[Found]:
    """A product's written result may ask for partial sums only over axes some plan can leave them on:
    an operand's partial sums, or axes sliced onto a contracted dim in both operands (case 3), renamed by
    Permutes between axes of one size."""
    if not isinstance(s.expr, Product) or not s.result.unreduced or ctx.mesh is None:
        return
    left, right = value_of(s.expr.left, ctx), value_of(s.expr.right, ctx)
    if any(a not in ctx.mesh for a in s.result.unreduced + left.unreduced + right.unreduced):
        return  # the unknown-axis rule reports it
    contracted, _ = product_dims(left, right, s.expr.contract, ctx.result or s.result)
    sizes = [left.dim(d).size if left.dim(d).size is not None else ctx.sizes.get(d) for d in contracted]
    have = set(left.unreduced) | set(right.unreduced)
    if any(partial_sums_reach(have | set(sliced), s.result.unreduced, ctx.mesh)
           for sliced in _sliceable(ctx.mesh, sizes)):  # fmt: skip
        return
    why = (f"contracts {', '.join(contracted)}, which the axes it lacks cannot all shard" if contracted
           else "contracts no dim")  # fmt: skip
    yield (f"the result is unreduced over {', '.join(s.result.unreduced)}, but no plan leaves partial sums there: "
           f"a product has them only where an operand does, or where both shard a contracted dim (case 3), and "
           f"a Permute renames them only between axes of one size; this product {why}", s.result.span,
           "request the result reduced (drop its {U_..}), or shard a contracted dim over those axes in both "
           "operands")  # fmt: skip


def _sliceable(mesh: Mesh, sizes: list[int | None]) -> Iterator[tuple[str, ...]]:
    """Every set of mesh axes the contracted dims (of ``sizes``, None unknown) can be sharded over at once."""
    from itertools import product

    names = [a.name for a in mesh]
    if not sizes:
        yield ()
        return
    for places in product(range(len(sizes) + 1), repeat=len(names)):
        ok = True
        for i, n in enumerate(sizes):
            group = [mesh[a].size for a, p in zip(names, places, strict=True) if p == i + 1]
            if n is not None and None not in group and n % _prod(group):
                ok = False
        if ok:
            yield tuple(a for a, p in zip(names, places, strict=True) if p)


def _prod(values: list[int | None]) -> int:
    out = 1
    for v in values:
        out *= v or 1
    return out


def partial_sums_reach(have: set[str] | tuple[str, ...], want: tuple[str, ...], mesh: Mesh) -> bool:
    """Whether partial sums over ``have`` can become partial sums over ``want``: reductions drop axes, and a
    Permute renames one into another of the same known size, so each size may only lose axes."""
    if all(a in have for a in want):
        return True
    if any(mesh[a].size is None and a not in have for a in want):
        return False
    counts: dict[int, int] = {}
    for a in have:
        size = mesh[a].size
        if size is not None:
            counts[size] = counts.get(size, 0) + 1
    for a in want:
        size = mesh[a].size
        if size is not None:
            counts[size] = counts.get(size, 0) - 1
    return all(n >= 0 for n in counts.values())


# Per statement with a written result: a collective's result is what it computes; a product keeps only
# dims of its inputs; a resharding keeps the dims in order.


def _has_product(expr: Node) -> bool:
    return isinstance(expr, Product) or (isinstance(expr, Collective) and _has_product(expr.arg))


def result_matches(s: Arrow, ctx: Context) -> Iterator[Found]:
    r = s.result
    if isinstance(s.expr, Product):
        inputs = value_of(s.expr.left, ctx).dim_names + value_of(s.expr.right, ctx).dim_names
        for d in r.dims:
            if d.label not in inputs:
                yield f"result dim {d.label} is in neither input", d.span or r.span, None
        return
    value = value_of(s.expr, ctx, r)
    if value.dim_names != r.dim_names:
        yield (f"the result has dims {', '.join(r.dim_names)} but the input has {', '.join(value.dim_names)}",
               r.span, None)  # fmt: skip
    elif isinstance(s.expr, Collective) and not _has_product(s.expr):
        try:
            apply_statement(s, ctx.mesh or _symbolic_mesh(value_of(s.expr.arg, ctx), s.expr))
        except ShapeMismatch as err:
            yield err.message, r.span, err.fix
        except ShardalgError:
            return  # a precondition or tensor rule, reported by its own rule
    elif isinstance(s.expr, Collective) and value.layout() != r.layout():
        expected = _text(replace(value, name=r.name, dtype=r.dtype or value.dtype))
        yield f"{s.expr.op.value} gives {expected}, not {_text(r)}", r.span, f"write the result as {expected}"


RULES: tuple[Rule, ...] = (
    Rule("axis-used-twice", AxisUsedTwice, Tensor, axis_used_twice),
    Rule("unknown-axis", UnknownAxis, Tensor, unknown_axis),
    Rule("indivisible-dim", IndivisibleDim, Tensor, indivisible_dim),
    Rule("unreduced-product", UnreducedProduct, Product, unreduced_product),
    Rule("batch-dim-mismatch", BatchDimMismatch, Product, batch_dim_mismatch),
    Rule("case-4", SameAxisResultDims, Product, case_4),
    Rule("unknown-axis", UnknownAxis, Collective, collective_unknown_axis),
    Rule("collective-precondition", IllegalCollective, Collective, collective_precondition),
    Rule("indivisible-dim", IndivisibleDim, Collective, collective_result_divisible),
    Rule("shape-mismatch", ShapeMismatch, Arrow, result_matches),
    Rule("unreduced-result", UnreachableUnreduced, Arrow, unreduced_result),
)

# ---- running the table ----------------------------------------------------------------------------


def _sites(node: Node, result: Tensor | None = None) -> Iterator[tuple[Node, Tensor | None]]:
    """Every node under ``node``, children first, left to right, with the written result of a product."""
    if isinstance(node, Program):
        for s in node.statements:
            yield from _sites(s)
        return
    if isinstance(node, Arrow):
        yield from _sites(node.expr, node.result)
        yield from _sites(node.result)
        yield node, None
        return
    if isinstance(node, Product):
        yield from _sites(node.left)
        yield from _sites(node.right)
    elif isinstance(node, Collective):
        yield from _sites(node.arg)
    yield node, result


def _parsed(node_or_text: Node | str) -> Node:
    if isinstance(node_or_text, str):
        from shardalg.notation.parse import parse

        return parse(node_or_text)
    if not isinstance(node_or_text, Node):
        raise UsageError(f"check takes notation text or an AST node, not {type(node_or_text).__name__}")
    return node_or_text


def check(node_or_text: Node | str, mesh=None, sizes=None) -> Violations:
    """Every violation of the legality rules in an expression, statement or program (empty when legal).

    ``mesh`` (a Mesh, a mapping or ``"X=4,Y=2"``) enables the unknown-axis and divisibility rules;
    ``sizes`` (a mapping or ``"I=1024"``) binds dim sizes beyond the literal ones and the ``where`` clause.
    """
    node = _parsed(node_or_text)
    ctx = context_for(node, mesh, sizes)
    out = Violations()
    for site, result in _sites(node):
        local = replace(ctx, result=result)
        for rule in RULES:
            if isinstance(site, rule.node):
                for message, span, fix in rule.check(site, local):
                    out.append(Violation(rule.name, rule.error, message, span, fix, ctx.source))
    return out


def check_or_raise(node_or_text: Node | str, mesh=None, sizes=None) -> Node:
    """Raise the first violation as its error class; return the (parsed) node when it is legal."""
    node = _parsed(node_or_text)
    found = check(node, mesh, sizes)
    if found:
        raise found[0].to_error()
    return node

