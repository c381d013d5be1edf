"""The legality rules of a product ``left · right -> result`` (rows of :data:`shardalg.algebra.legality.RULES`).

Two kinds. The einsum typing (each dim named once, shared dims of one size, a contraction of shared dims, a
result that keeps every dim only one operand has) holds for every product: nothing computes it otherwise.
The rules of a *local* product (no axis unreduced in both operands or unreduced in one and sharding the
other, batch dims sharded alike, contracted dims sharded alike, not the book's case 4) hold where the shards
are multiplied as written: ``A ·_LOCAL B``, and a product nested inside a statement (its value feeds another
operation, as written). A statement's own product is a request: the planner gathers, slices or reduces
first, so there these rules are notes (what the plan must fix), not errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from itertools import product

from shardalg.errors import ShapeMismatch
from shardalg.notation.syntax import Arrow, Collective, Dim, Node, Op, Product, Tensor

from .context import Context, product_dims, value_of
from .einsum import Spec
from .findings import Found, operand_dim_span, suffix_span, text_of
from .layout import subscript
from .mesh import Mesh

__all__ = [
    "dims_named_once",
    "einsum_typing",
    "unreduced_product",
    "batch_dim_mismatch",
    "not_local",
    "case_4",
    "unreduced_result",
    "partial_sums_reach",
]


# ---- every operation: its tensors name each dim once ------------------------------------------------


def _written_tensors(node: Node) -> tuple[Tensor, ...]:
    """The tensors written directly under an operation (each belongs to exactly one operation)."""
    if isinstance(node, Product):
        kids: tuple[object, ...] = (node.left, node.right)
    elif isinstance(node, Collective):
        kids = (node.arg,)
    elif isinstance(node, Arrow):
        kids = (node.expr, node.result)
    else:
        kids = ()
    return tuple(k for k in kids if isinstance(k, Tensor))


def _repeated(t: Tensor) -> Dim | None:
    names = t.dim_names
    if len(set(names)) == len(names):  # the common case
        return None
    seen: set[str] = set()
    for d in t.dims:
        if d.label in seen:
            return d
        seen.add(d.label)
    return None


def _renamed(t: Tensor) -> str:
    """``t`` with each dim named once: a repeated name gets a digit, sizes become names bound in ``where``."""
    if all(d.name is not None for d in t.dims):
        taken, dims = set(t.dim_names), []
        for d in t.dims:
            name, k = d.label, 2
            while name in [e.label for e in dims]:
                name, k = f"{d.label}{k}", k + 1
                name = name if name not in taken else f"{name}x"
            dims.append(Dim(name, d.axes))
        return text_of(t.replace(dims=tuple(dims)))
    dims = [Dim(d.name or f"D{i}", d.axes) for i, d in enumerate(t.dims)]
    where = ", ".join(f"D{i}={d.size}" for i, d in enumerate(t.dims) if d.name is None)
    return f"{text_of(t.replace(dims=tuple(dims)))} where {where}"


def dims_named_once(node: Node, ctx: Context) -> Iterator[Found]:
    """An operation tells dims apart by name (a size stands for the name of an unnamed dim), so a tensor it
    reads or writes names each dim once; a tensor standing alone (``A[4, 4]``) may repeat one."""
    for t in _written_tensors(node):
        d = _repeated(t)
        if d is not None:
            yield (
                f"dim {d.label} appears twice in {text_of(t)}, and an operation tells dims apart by name",
                d.span or t.span,
                f"name each dim once: {_renamed(t)}",
            )


def _has_repeats(*tensors: Tensor | None) -> bool:
    return any(t is not None and _repeated(t) is not None for t in tensors)


def einsum_typing(p: Product, ctx: Context) -> Iterator[Found]:
    """The dims of ``left · right -> result`` form an einsum (:meth:`shardalg.algebra.einsum.Spec.of`)."""
    left, right, result = value_of(p.left, ctx), value_of(p.right, ctx), ctx.result
    if _has_repeats(left, right, result):
        return  # dims_named_once says so
    if result is not None and any(d not in left.dim_names + right.dim_names for d in result.dim_names):
        return  # the statement's rule says which result dim is in neither input
    try:
        Spec.of(left, right, p.contract, result)
    except ShapeMismatch as err:
        yield err.message, err.span or p.span, err.fix


# ---- a local product: the shards can simply be multiplied ------------------------------------------


def unreduced_product(p: Product, ctx: Context) -> Iterator[Found]:
    left, right = value_of(p.left, ctx), value_of(p.right, ctx)
    both = tuple(sorted(set(left.unreduced) & set(right.unreduced)))
    if not both:
        return
    span = suffix_span(p.right, ctx.source) if isinstance(p.right, Tensor) else p.right.span
    reduce = [text_of(Collective(Op.ALL_REDUCE, both, side)) for side in (p.left, p.right)]
    yield (
        f"both operands are unreduced over {', '.join(both)}: a product of partial sums is not a partial "
        f"sum of the product",
        span,
        f"reduce one operand first: {reduce[0]} or {reduce[1]}",
    )


def batch_dim_mismatch(p: Product, ctx: Context) -> Iterator[Found]:
    left, right = value_of(p.left, ctx), value_of(p.right, ctx)
    _, batch = product_dims(left, right, p.contract, ctx.result)
    for d in batch:
        la, ra = left.axes_of(d), right.axes_of(d)
        if la != ra:
            shown = [text_of(Dim(d, axes)) for axes in (la, ra)]
            fix = f"reshard one input so {d} matches: {text_of(left.with_axes(d, ra))} or {text_of(right.with_axes(d, la))}"
            yield (
                f"batch dim {d} is sharded differently in the two inputs: {shown[0]} and {shown[1]}",
                operand_dim_span(p.right, d),
                fix,
            )


def not_local(p: Product, ctx: Context) -> Iterator[Found]:
    """A local product sums the shards a device holds: a contracted dim must be sharded alike on both sides,
    and an axis unreduced in one operand cannot shard the other (each device would multiply a partial sum
    by a different block)."""
    left, right = value_of(p.left, ctx), value_of(p.right, ctx)
    for u, other, side in ((left, right, p.right), (right, left, p.left)):
        for a in u.unreduced:
            if a in other.sharded_axes and a not in other.unreduced:
                yield (
                    f"{text_of(u)} is unreduced over {a} and {text_of(other)} is sharded over {a}: each device "
                    "would multiply a partial sum by a different block",
                    side.span,
                    f"AllReduce_{a}({text_of(u)}) first, or AllGather_{a}({text_of(other)})",
                )
                return
    contracted, _ = product_dims(left, right, p.contract, ctx.result)
    for d in contracted:
        if d not in left.dim_names or d not in right.dim_names:
            continue
        la, ra = left.axes_of(d), right.axes_of(d)
        if la == ra:
            continue
        if not la or not ra:
            held, axes = (left, la) if la else (right, ra)
            yield (
                f"case 2: {d} is contracted and sharded over {subscript(axes)} in {text_of(held)} only, so a local "
                f"product would sum only a block of {d}",
                operand_dim_span(p.right if ra else p.left, d),
                f"gather it first: AllGather_{subscript(axes)}({text_of(held)}), or drop _LOCAL and let the "
                "planner choose",
            )
        else:
            yield (
                f"{d} is contracted and sharded over {subscript(la)} in {text_of(left)} but {subscript(ra)} in "
                f"{text_of(right)}: the shards on a device hold different blocks of it",
                operand_dim_span(p.right, d),
                f"gather one side first (AllGather_{subscript(ra)}({text_of(right)})), or drop _LOCAL and let the "
                "planner choose",
            )


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
            gathers = [
                text_of(Collective(Op.ALL_GATHER, dim.axes[dim.axes.index(a) :], side))
                for dim, side in ((ld, p.left), (d, p.right))
            ]
            yield (
                f"case 4: the result dims {ld.label} and {d.label} are both sharded over {a}",
                operand_dim_span(p.right, d.label),
                f"gather one operand first: {gathers[0]} or {gathers[1]}",
            )


# ---- a statement: the partial sums its result asks for are reachable ----------------------------------


def unreduced_result(s: Arrow, ctx: Context) -> Iterator[Found]:
    """A product's written result may ask for partial sums only over axes some plan can leave them on:
    an operand's partial sums, or axes sliced onto a contracted dim in both operands (case 3), renamed by
    Permutes between axes of one size. A local product (``·_LOCAL``) has no choice: only its own partial sums
    (the operands' and its contraction's), reduced or renamed."""
    if not s.result.unreduced or ctx.mesh is None:
        return
    if isinstance(s.expr, Tensor):
        yield from _resharded_unreduced(s, ctx)
        return
    if not isinstance(s.expr, Product):
        return
    if s.expr.local:
        yield from _local_unreduced(s, ctx)
        return
    left, right = value_of(s.expr.left, ctx), value_of(s.expr.right, ctx)
    if any(a not in ctx.mesh for a in s.result.unreduced + left.unreduced + right.unreduced):
        return  # the unknown-axis rule reports it
    contracted, _ = product_dims(left, right, s.expr.contract, ctx.result or s.result)
    sizes = [_known_size(d, left, right, ctx) for d in contracted]
    # each operand's partial sums are a sum of their own, kept, reduced or renamed apart from the other's: two
    # operands unreduced over Y leave partial sums over two axes (A[I]{U_Y} · B[J]{U_Y} -> C[I, J]{U_YZ} permutes
    # B's onto Z), so they are counted once for each operand
    have = (*left.unreduced, *right.unreduced)
    if any(
        partial_sums_reach((*have, *sliced), s.result.unreduced, ctx.mesh)
        for sliced in _sliceable(ctx.mesh, sizes)
    ):
        return
    why = (
        f"contracts {', '.join(contracted)}, which the axes it lacks cannot all shard"
        if contracted
        else "contracts no dim"
    )
    yield (
        f"the result is unreduced over {', '.join(s.result.unreduced)}, but no plan leaves partial sums there: "
        f"a product has them only where an operand does, or where both shard a contracted dim (case 3), and "
        f"a Permute renames them only between axes of one size; this product {why}",
        s.result.span,
        "request the result reduced (drop its {U_..}), or shard a contracted dim over those axes in both "
        "operands",
    )


def _local_unreduced(s: Arrow, ctx: Context) -> Iterator[Found]:
    """A local product leaves partial sums over its operands' unreduced axes and the axes its contraction
    leaves partial (case 3); the planner reshards that value into the result, and no rule makes partial
    sums over another axis (Permutes rename them between axes of one size): its NoPlan says the same."""
    assert isinstance(s.expr, Product) and ctx.mesh is not None
    made = replace(value_of(s.expr, ctx, s.result), name=s.result.name)  # its dims as the result names them
    if any(a not in ctx.mesh for a in s.result.unreduced + made.unreduced):
        return  # the unknown-axis rule reports it
    if partial_sums_reach(set(made.unreduced), s.result.unreduced, ctx.mesh):
        return
    want = ", ".join(a for a in s.result.unreduced if a not in made.unreduced)
    has = f"unreduced over {', '.join(made.unreduced)}" if made.unreduced else "reduced"
    yield (
        f"the local product gives {text_of(made)} ({has}: its operands' partial sums and its contraction's), "
        f"and no rule makes it unreduced over {want}: a reduction drops partial sums and a Permute renames "
        "them only between axes of one size",
        s.result.span,
        f"request {text_of(replace(s.result, unreduced=made.unreduced))}, or drop _LOCAL to let the planner "
        "choose the product",
    )


def _known_size(d: str, left: Tensor, right: Tensor, ctx: Context) -> int | None:
    """A contracted dim's size: written in an operand that has it (an explicit ``·_D`` may name a dim of
    one operand only), else bound, else None."""
    for t in (left, right):
        if d in t.dim_names and t.dim(d).size is not None:
            return t.dim(d).size
    return ctx.sizes.get(d)


def _resharded_unreduced(s: Arrow, ctx: Context) -> Iterator[Found]:
    """A resharding keeps, reduces or (by Permutes between axes of one size) renames partial sums; no rule
    makes them from a value that has none: the planner's NoPlan says the same."""
    assert isinstance(s.expr, Tensor) and ctx.mesh is not None
    src = s.expr
    if any(a not in ctx.mesh for a in s.result.unreduced + src.unreduced):
        return  # the unknown-axis rule reports it
    if partial_sums_reach(set(src.unreduced), s.result.unreduced, ctx.mesh):
        return
    want = ", ".join(a for a in s.result.unreduced if a not in src.unreduced)
    yield (
        f"no rule makes {text_of(src)} unreduced over {want}: the global value of {text_of(s.result)} is "
        "the sum of the partials, so all but one replica would have to be zeroed, and no collective does that",
        s.result.span,
        f"drop {{U_{want}}} from the target, or produce the value unreduced from a product (case 3)",
    )


def _sliceable(mesh: Mesh, sizes: list[int | None]) -> Iterator[tuple[str, ...]]:
    """Every set of mesh axes the contracted dims (of ``sizes``, None unknown) can be sharded over at once."""
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
