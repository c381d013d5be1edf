"""Legality: the rules of DESIGN.md section 2 that an expression must obey, run as a table. This is the one
legality of shardalg: ``check`` says it, and ``plan``, ``simulate``, ``shape``, ``backward`` and ``cost`` run it
(``check_or_raise``) before they start, so they agree on what is legal and every refusal has a span and a fix.

    >>> [v.rule for v in check("A[I_X, J_X]")]
    ['axis-used-twice']

Each rule is a record (name, error class, node types, check function, what it is on a planned product);
``check`` walks the tree children first, left to right, and runs every rule whose node type matches. A check
yields findings (:mod:`shardalg.algebra.findings`): the message, the span of the offending part and a fix
written in the notation. ``check_or_raise`` raises the first violation as its error class.

What is *not* illegal here: a statement's product whose shards cannot simply be multiplied (a contraction
sharded on one side only or on different axes, the book's case 4, two unreduced operands, batch dims
sharded differently): that is a request, and the planner gathers, slices or reduces first. ``notes`` lists
what such a plan must fix. Written as a local product (``·_LOCAL``, or nested inside a statement) the same
findings are errors. Nor is a written result whose sharding differs from the natural one (the planner adds
the collectives).

Before any rule, ``check`` enforces the limits of :mod:`shardalg.limits` on mesh axes and dims per tensor.
The mesh and sizes a check sees, and the layout an expression produces, come from :mod:`shardalg.algebra.context`
(``Context``, ``context_for``, ``as_sizes``, ``value_of``, ``product_dims`` are re-exported here).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Literal

from shardalg import limits
from shardalg.cache import Kind, Memo, memo
from shardalg.errors import (
    AxisUsedTwice,
    BatchDimMismatch,
    IllegalCollective,
    IllegalOperand,
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
from shardalg.notation.parse import parse
from shardalg.notation.syntax import Apply, Arrow, Collective, Node, Op, Product, Program, Tensor

from .context import Context, as_sizes, context_for, product_dims, say_replaced, target_index, value_of
from .einsum import NotLocal
from .factors import is_subaxis, parent_of
from .findings import (
    CheckFn,
    Found,
    Violation,
    Violations,
    factors_apart,
    head_span,
    suffix_span,
    text_of,
    unknown_axis_fix,
)
from .mesh import Mesh, as_mesh
from .ops import RECORDS
from .ops import RULES as COLLECTIVES
from .product_rules import (
    batch_dim_mismatch,
    case_4,
    dims_named_once,
    einsum_typing,
    not_local,
    unreduced_product,
    unreduced_result,
)
from .statements import apply_statement
from .subaxes import axes_in as axes_in_node
from .subaxes import names_subaxes, overlaps, refine

__all__ = [
    "Violation",
    "Rule",
    "RULES",
    "Context",
    "check",
    "check_or_raise",
    "notes",
    "context_for",
    "as_sizes",
    "value_of",
    "product_dims",
]


@dataclass(frozen=True)
class Rule:
    """A row of the table: ``check`` runs on every node of type ``node``. On a product the planner will plan
    (a statement's own, not ``·_LOCAL``), ``planned`` says what a finding is: an ``error`` still, a ``note``
    (the plan must fix it), or nothing to ``skip``."""

    name: str
    error: type[IllegalSharding]
    node: type[Node] | tuple[type[Node], ...]
    check: CheckFn
    planned: Literal["error", "note", "skip"] = "error"


# ---- the rules ------------------------------------------------------------------------------------
# Per tensor: each mesh axis is used once (a dim, the unreduced set or the invariant set), is in the mesh,
# and a dim's size is divisible by the sizes of the axes that shard it.


def _places(t: Tensor, source: str | None) -> Iterator[tuple[str, str, int, Span | None]]:
    """(axis, kind, dim index or -1, span) for every use of an axis in ``t``, in reading order."""
    for i, d in enumerate(t.dims):
        for a in d.axes:
            yield a, "dim", i, d.span or t.span
    suffix = suffix_span(t, source)
    for kind, axes in (("unreduced", t.unreduced), ("invariant", t.invariant)):
        for a in axes:
            yield a, kind, -1, suffix


_USE = {
    "dim": "shards {label}",
    "unreduced": "is unreduced ({{U_{axis}}})",
    "invariant": "is invariant ({{I_{axis}}})",
}
_TIMES = {2: "twice"}


def _without(t: Tensor, axis: str, kind: str, index: int) -> Tensor:
    """``t`` without ``axis`` in one place: the subscript of dim ``index``, or the set ``kind``."""
    if kind == "dim":
        d = t.dims[index]
        axes = tuple(a for a in d.axes if a != axis)
        return replace(t, dims=tuple(d.with_axes(axes) if i == index else e for i, e in enumerate(t.dims)))
    return replace(t, **{kind: tuple(a for a in getattr(t, kind) if a != axis)})


def _once(t: Tensor) -> Tensor:
    """``t`` with each axis named at most once in each place (a dim's subscript, the unreduced set, the
    invariant set), where it first was there: what every fix writes (a repeat is never meant)."""

    def first_only(axes: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(axes))

    dims = tuple(d.with_axes(first_only(d.axes)) if len(set(d.axes)) < len(d.axes) else d for d in t.dims)
    return replace(t, dims=dims, unreduced=first_only(t.unreduced), invariant=first_only(t.invariant))


def axis_used_twice(t: Tensor, ctx: Context) -> Iterator[Found]:
    """An axis named more than once: in two places (two dims, a dim and a set, two sets), one finding for
    each place after its first; else repeated in its one place, one finding for that place. In reading
    order; each fix names the axis once wherever it stays."""
    used = t.used_axes
    if len(set(used)) == len(used):  # the common case, without walking the places and their spans
        return
    uses: dict[str, dict[tuple[str, int], list[tuple[int, Span | None]]]] = {}  # axis -> place -> uses
    for n, (axis, kind, index, span) in enumerate(_places(t, ctx.source)):
        uses.setdefault(axis, {}).setdefault((kind, index), []).append((n, span))
    found: list[tuple[int, Found]] = []
    for axis, places in uses.items():
        (k1, i1), *others = places
        l1 = t.dims[i1].label if i1 >= 0 else ""
        here = places[(k1, i1)]
        if not others and len(here) > 1:  # repeated in its one place: A[I_XX], {U_X, U_X}
            n, span = here[1]  # pointed at from its second use
            times = _TIMES.get(len(here), f"{len(here)} times")
            what, how = (
                (f"shards {l1} {times}", "name each axis once")
                if k1 == "dim"
                else (f"is named {times} in the {k1} set", f"write {axis} once")
            )
            found.append((n, (f"mesh axis {axis} {what}", span, f"{how}: {text_of(_once(t))}")))
        for kind, index in others:
            n, span = places[(kind, index)][0]
            label = t.dims[index].label if index >= 0 else ""
            if (k1, kind) == ("dim", "dim"):
                kept = text_of(_once(_without(t, axis, kind, index)))
                what = f"shards both {l1} and {label}"
                fix = f"shard {label} over another axis, or replicate it: {kept}"
            else:
                said = [_USE[k].format(label=lb, axis=axis) for k, lb in ((k1, l1), (kind, label))]
                ways = [text_of(_once(_without(t, axis, k, i))) for k, i in ((kind, index), (k1, i1))]
                what, fix = f"{said[0]} and {said[1]}", f"use {axis} in one place: {ways[0]} or {ways[1]}"
            found.append((n, (f"mesh axis {axis} {what}", span, fix)))
    yield from (f for _, f in sorted(found, key=lambda nf: nf[0]))


def subaxis_overlap(t: Tensor, ctx: Context) -> Iterator[Found]:
    """A sub-axis and its parent, or two overlapping sub-axes, never both in one tensor: a device's
    coordinate along the shared factor would place the tensor twice (Shardy's rule)."""
    if not any(":" in a for a in t.used_axes):
        return
    for first, second in overlaps(t):
        if ":" in first and ":" in second:
            what = f"sub-axes {first} and {second} of {parent_of(first)} overlap"
        else:
            sub, whole = (first, second) if ":" in first else (second, first)
            what = f"sub-axis {sub} is part of mesh axis {whole}"
        yield (
            f"{what}, and both are used by {text_of(t)}: a sub-axis and its parent, or two overlapping "
            "sub-axes, never both shard one tensor",
            t.span,
            f"use one of {first} and {second}, or factors that do not overlap ({factors_apart(first, second, ctx.mesh)})",
        )


def unknown_axis(t: Tensor, ctx: Context) -> Iterator[Found]:
    mesh = ctx.mesh
    if mesh is None or mesh.has_all(t.used_axes):
        return
    seen: set[str] = set()
    for axis, _kind, _index, span in _places(t, ctx.source):
        if axis not in ctx.mesh and axis not in seen:
            seen.add(axis)
            yield _not_in_mesh(axis, ctx.mesh), span, unknown_axis_fix(axis, ctx.mesh)


def _not_in_mesh(axis: str, mesh: Mesh) -> str:
    """Why ``axis`` is not an axis of ``mesh`` (a sub-axis says which rule of factors it breaks)."""
    if ":" in axis:
        try:
            mesh[axis]  # noqa: B018 -- its UnknownAxis says why
        except UnknownAxis as e:
            return e.message if hasattr(e, "message") else str(e)
    return f"mesh axis {axis} is not in the mesh ({', '.join(mesh.names)})"


def _indivisible(t: Tensor, ctx: Context) -> Iterator[tuple[str, int, str]]:
    """(message, dim index, fix) for each dim of ``t`` whose known size its axes do not divide."""
    mesh = ctx.mesh
    if mesh is None:
        return
    for i, d in enumerate(t.dims):
        if not d.axes:
            continue
        size = d.size if d.size is not None else ctx.sizes.get(d.label)
        if size is None or not mesh.has_all(d.axes):
            continue
        n = mesh.known_group(d.axes)
        if n is None or size % n == 0:  # a symbolic axis: nothing to say
            continue
        keep = max(k for k in range(len(d.axes) + 1) if size % ctx.mesh.group_size(d.axes[:k]) == 0)
        how = f"shard {d.label} over fewer axes" if keep else f"replicate {d.label}"
        factors = " · ".join(f"|{a}|" for a in d.axes)
        yield (
            f"dim {d.label} has size {size}, not divisible by {factors} = {n}",
            i,
            f"{how}: {text_of(t.with_axes(d.label, d.axes[:keep]))}, or make its size a multiple of {n}",
        )


def indivisible_dim(t: Tensor, ctx: Context) -> Iterator[Found]:
    for message, i, fix in _indivisible(t, ctx):
        yield message, t.dims[i].span or t.span, fix


# Per collective: its axes are in the mesh, and its input meets its precondition (DESIGN.md section 3).


def collective_unknown_axis(c: Collective, ctx: Context) -> Iterator[Found]:
    if ctx.mesh is None:
        return
    names = ", ".join(ctx.mesh.names)
    for axis in dict.fromkeys(c.axes):
        if axis not in ctx.mesh:
            yield (
                f"{c.op.value} names mesh axis {axis}, which is not in the mesh ({names})"
                if ":" not in axis
                else f"{c.op.value} names {_not_in_mesh(axis, ctx.mesh)}",
                head_span(c, ctx.source),
                unknown_axis_fix(axis, ctx.mesh),
            )


def _symbolic_mesh(t: Tensor, c: Collective) -> Mesh:
    return Mesh({a: None for a in dict.fromkeys(t.used_axes + c.axes)})


def collective_precondition(c: Collective, ctx: Context) -> Iterator[Found]:
    """The rule's own precondition (shardalg.algebra.ops); problems of the argument tensor itself (an axis used
    twice, not in the mesh) are reported by the tensor rules, once. Without a mesh, sizes are unknown, so
    a Permute (legal only between axes that keep the local shape) is judged only on naming two axes."""
    if ctx.mesh is None and c.op is Op.PERMUTE and len(c.axes) >= 2 and len(set(c.axes)) == len(c.axes):
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
        yield err.message, head_span(c, ctx.source), err.fix


def collective_output_divisible(c: Collective, ctx: Context) -> Iterator[Found]:
    """What a legal collective produces divides too: ``AllToAll_{Y,I}(A[J_Y, K, I])`` moves Y onto I, so
    |Y| must divide I (its argument's own dims are the tensor rules' to judge)."""
    t = value_of(c.arg, ctx)
    index = target_index(c, t, ctx.result)
    if c.op.takes_dim and index is None:
        return
    try:
        COLLECTIVES[c.op].check(
            t, c.axes, t.dims[index].label if index is not None else None, ctx.mesh or _symbolic_mesh(t, c)
        )
    except IllegalSharding:
        return  # the precondition rule reports it
    out = value_of(c, ctx, ctx.result)
    for message, _i, fix in _indivisible(out, ctx):
        yield f"{c.op.value} gives {text_of(out)}, but its {message}", head_span(c, ctx.source), fix


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
        yield (
            f"the result has dims {', '.join(r.dim_names)} but the input has {', '.join(value.dim_names)}",
            r.span,
            None,
        )
    elif isinstance(s.expr, Tensor) and None not in (value.name, r.name) and value.name != r.name:
        yield (
            f"a resharding keeps the tensor: {text_of(value)} -> {text_of(r)} renames {value.name} to {r.name}",
            r.span,
            f"name the target {value.name}",
        )
    elif isinstance(s.expr, Collective) and not _has_product(s.expr):
        try:
            apply_statement(s, ctx.mesh or _symbolic_mesh(value_of(s.expr.arg, ctx), s.expr))
        except ShapeMismatch as err:
            yield err.message, r.span, err.fix
        except ShardalgError:
            return  # a precondition or tensor rule, reported by its own rule
    elif isinstance(s.expr, Collective) and value.layout() != r.layout():
        expected = text_of(replace(value, name=r.name, dtype=r.dtype or value.dtype))
        yield (
            f"{s.expr.op.value} gives {expected}, not {text_of(r)}",
            r.span,
            f"write the result as {expected}",
        )


def function_operands(a: Apply, ctx: Context) -> Iterator[Found]:
    """A function's rule on its operands as written (:mod:`shardalg.algebra.ops.function`): a nonlinear
    function of partial sums, operands that do not meet in one layout, a dim the operand lacks. Planning
    reshards the operands first, so for a plan these are notes."""
    if _function_shape_error(a, ctx) is not None:
        return  # reported by function_shape: no layout fixes it
    operands = [value_of(x, ctx) for x in a.operands]
    try:
        RECORDS[a.op].result(operands, a.dim, a.flags)
    except IllegalOperand as err:
        yield err.message, err.span or a.span, err.fix


def _function_shape_error(a: Apply, ctx: Context) -> IllegalOperand | None:
    """What the function refuses of its operands whatever their layouts (a dim it lacks, a dim named twice,
    a reduction that leaves no dim): tried on the operands replicated and reduced."""
    whole = [
        Tensor(t.name, tuple(d.with_axes(()) for d in t.dims), (), (), t.dtype)
        for t in map(lambda x: value_of(x, ctx), a.operands)
    ]
    try:
        RECORDS[a.op].result(whole, a.dim, a.flags)
    except IllegalOperand as err:
        return err
    return None


def function_shape(a: Apply, ctx: Context) -> Iterator[Found]:
    """A function's operands that no plan can fix: the dim it works along missing, a dim named twice."""
    err = _function_shape_error(a, ctx)
    if err is not None:
        yield err.message, err.span or a.span, err.fix


_OPERATIONS = (Product, Collective, Arrow)

RULES: tuple[Rule, ...] = (
    Rule("axis-used-twice", AxisUsedTwice, Tensor, axis_used_twice),
    Rule("axis-used-twice", AxisUsedTwice, Tensor, subaxis_overlap),
    Rule("unknown-axis", UnknownAxis, Tensor, unknown_axis),
    Rule("indivisible-dim", IndivisibleDim, Tensor, indivisible_dim),
    Rule("shape-mismatch", ShapeMismatch, _OPERATIONS, dims_named_once),
    Rule("shape-mismatch", ShapeMismatch, Product, einsum_typing),
    Rule("unreduced-product", UnreducedProduct, Product, unreduced_product, planned="note"),
    Rule("batch-dim-mismatch", BatchDimMismatch, Product, batch_dim_mismatch, planned="note"),
    Rule("not-local", NotLocal, Product, not_local, planned="skip"),
    Rule("case-4", SameAxisResultDims, Product, case_4, planned="note"),
    Rule("unknown-axis", UnknownAxis, Collective, collective_unknown_axis),
    Rule("collective-precondition", IllegalCollective, Collective, collective_precondition),
    Rule("indivisible-dim", IndivisibleDim, Collective, collective_output_divisible),
    Rule("shape-mismatch", ShapeMismatch, Apply, function_shape),
    Rule("function-operand", IllegalOperand, Apply, function_operands, planned="note"),
    Rule("shape-mismatch", ShapeMismatch, Arrow, result_matches),
    Rule("unreduced-result", UnreachableUnreduced, Arrow, unreduced_result),
)

# ---- running the table ----------------------------------------------------------------------------


def _sites(
    node: Node, result: Tensor | None = None, nested: bool = False
) -> Iterator[tuple[Node, Tensor | None, bool]]:
    """Every node under ``node``, children first, left to right, with the written result of a product and
    whether the node's value feeds another operation of its statement (then a product is taken as written)."""
    if isinstance(node, Program):
        for s in node.statements:
            yield from _sites(s)
        return
    if isinstance(node, Arrow):
        yield from _sites(node.expr, node.result)
        yield from _sites(node.result)
        yield node, None, False
        return
    if isinstance(node, Product):
        yield from _sites(node.left, nested=True)
        yield from _sites(node.right, nested=True)
    elif isinstance(node, Collective):
        yield from _sites(node.arg, nested=True)
    elif isinstance(node, Apply):
        for x in node.operands:
            yield from _sites(x, nested=True)
    yield node, result, nested


def _parsed(node_or_text: Node | str) -> Node:
    if isinstance(node_or_text, str):
        return parse(node_or_text)
    if not isinstance(node_or_text, Node):
        raise UsageError(f"check takes notation text or an AST node, not {type(node_or_text).__name__}")
    return node_or_text


def _bounded(node: Node, ctx: Context) -> None:
    """The limits a check enforces up front: mesh axes, and dims per tensor."""
    mesh = ctx.mesh
    if mesh is not None:
        limits.require("axes", len(mesh), lambda: f"the mesh {', '.join(mesh.names)}")


_BY_TYPE: dict[type, tuple[Rule, ...]] = memo(f"{__name__}._BY_TYPE", Kind.TABLE, {})


def _rules_for(kind: type) -> tuple[Rule, ...]:
    """The rules that apply to nodes of one type, in table order (found once per type)."""
    got = _BY_TYPE.get(kind)
    if got is None:
        got = _BY_TYPE[kind] = tuple(r for r in RULES if issubclass(kind, r.node))
    return got


def _findings(node_or_text: Node | str, mesh, sizes, want: str) -> Iterator[Violation]:
    """Every finding of kind ``want`` here: ``"error"`` or ``"note"`` (a rule that can only give the other
    kind at a site is not run there)."""
    node = _parsed(node_or_text)
    ctx = context_for(node, mesh, sizes)
    _bounded(node, ctx)
    if ctx.mesh is not None and names_subaxes(node):
        yield from _findings_with_subaxes(node, ctx, want)
        return
    yield from _findings_in(node, ctx, want)


def _findings_with_subaxes(node: Node, ctx: Context, want: str) -> Iterator[Violation]:
    """The findings of a node that names sub-axes: each sub-axis exists and no two overlap (on the mesh as
    written); then every rule on the mesh refined into the factors the node cuts (:mod:`.subaxes`)."""
    first = False
    for site, _result, _nested in _sites(node):
        if isinstance(site, Tensor) and want == "error":
            for rule, check in (("unknown-axis", unknown_axis), ("axis-used-twice", subaxis_overlap)):
                for message, span, fix in check(site, ctx):
                    first = True
                    error = UnknownAxis if rule == "unknown-axis" else AxisUsedTwice
                    yield Violation(rule, error, message, span, fix, ctx.source)
        if isinstance(site, Collective) and want == "error":
            for message, span, fix in collective_unknown_axis(site, ctx):
                first = True
                yield Violation("unknown-axis", UnknownAxis, message, span, fix, ctx.source)
    if first:
        return
    names = [a for a in axes_in_node(node) if is_subaxis(a)]
    r = refine(ctx.mesh, names)
    fine = Context(r.fine, ctx.sizes, ctx.source, None if ctx.result is None else r.expand(ctx.result))
    yield from _findings_in(r.expand(node), fine, want)


def _findings_in(node: Node, ctx: Context, want: str) -> Iterator[Violation]:
    """The findings of every rule at every site of ``node`` in ``ctx``."""
    max_dims = limits.value("dims")
    for site, result, nested in _sites(node):
        clean = None
        if isinstance(site, Tensor):
            if len(site.dims) > max_dims:
                limits.require(
                    "dims",
                    len(site.dims),
                    lambda site=site: f"the tensor {text_of(site)[:60]}",
                    span=site.span,
                )
            if want != "error":
                continue  # a tensor's rules give errors only
            clean = (site, ctx.mesh, tuple([ctx.sizes.get(d) for d in site.dim_names]))
            if clean in _CLEAN:
                continue
        planned = (isinstance(site, Product) and not site.local or isinstance(site, Apply)) and not nested
        local = ctx if result is ctx.result else Context(ctx.mesh, ctx.sizes, ctx.source, result)
        found = False
        for rule in _rules_for(type(site)):
            kind = rule.planned if planned else "error"
            if kind != want:
                continue
            for message, span, fix in rule.check(site, local):
                found = True
                yield Violation(rule.name, rule.error, message, span, fix, ctx.source)
        if clean is not None and not found:
            _CLEAN.keep(clean, True)


# Tensors that passed every tensor rule, by the tensor, the mesh and the bound sizes of its dims (all that
# those rules read; a finding's span comes from the source, so only passes are kept)
_CLEAN: Memo = memo(f"{__name__}._CLEAN", Kind.PIECE)


def check(node_or_text: Node | str, mesh=None, sizes=None) -> Violations:
    """Every violation of the legality rules in an expression, statement or program (empty when legal).

    ``mesh`` (a Mesh, a mapping or ``"X=4,Y=2"``) enables the unknown-axis and divisibility rules;
    ``sizes`` (a mapping or ``"I=1024"``) binds dim sizes beyond the literal ones and the ``where`` clause.
    Over a limit of :mod:`shardalg.limits` (mesh axes, dims per tensor) it refuses up front. A mesh or size
    that replaces the program's own (its ``mesh`` line, its ``where``) is said, as a
    :class:`~shardalg.errors.NoteWarning` (:func:`~.context.say_replaced`).
    """
    node = _parsed(node_or_text)
    say_replaced(context_for(node, as_mesh(mesh), sizes).replaced)
    return _violations(node, mesh, sizes)


def _violations(node: Node, mesh, sizes) -> Violations:
    """:func:`check` without saying what the arguments replaced (the caller that merged them says it)."""
    return Violations(_findings(node, as_mesh(mesh), sizes, "error"))


def notes(node_or_text: Node | str, mesh=None, sizes=None) -> list[Violation]:
    """What the plans of a legal statement must fix: the findings of the local-product rules on products
    the planner plans (case 4, unreduced operands, batch dims sharded differently)."""
    node = _parsed(node_or_text)
    say_replaced(context_for(node, as_mesh(mesh), sizes).replaced)
    return list(_findings(node, mesh, sizes, "note"))


def check_or_raise(node_or_text: Node | str, mesh=None, sizes=None) -> Node:
    """Raise the first violation as its error class; return the (parsed) node when it is legal. What the
    mesh and sizes replace of the program's is its caller's to say (the caller merged them:
    :func:`~.context.merged_sizes`)."""
    node = _parsed(node_or_text)
    found = _violations(node, mesh, sizes)
    if found:
        raise found[0].to_error()
    return node
