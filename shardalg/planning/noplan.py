"""Why no plan computes an einsum: a NoPlan whose message states only what was checked.

The planner enumerates compute layouts and reshards from each product to the requested result; when none
reaches it, the reason is one of: a local product as written (``·_LOCAL``) whose shards cannot simply be
multiplied, or whose product cannot be resharded to the result; or a result requested unreduced over an
axis that no product of the operands leaves partial sums over. Each message names the facts that make it
so (the einsum's own error, which operand is unreduced, which contracted dims exist and whether they divide),
and every error keeps the statement's span and a fix.
"""

from __future__ import annotations

from shardalg.algebra.einsum import local_output
from shardalg.errors import IllegalSharding, NoPlan
from shardalg.notation.syntax import Product, Statement, Tensor

from .einsum_plans import EinsumPlanner

__all__ = ["no_plan"]


def no_plan(stmt: Statement, planner: EinsumPlanner) -> NoPlan:
    """The NoPlan for ``stmt``, which ``planner`` found no plan for."""
    span = getattr(stmt, "span", None)
    target = planner.target
    if planner.local:
        try:
            out = local_output(planner.left, planner.right, planner.spec, planner.mesh, planner.name)
        except IllegalSharding as err:
            return NoPlan(
                f"{stmt} asks for the local product as written, and the shards as written cannot simply be "
                f"multiplied: {err.message}",
                span=span,
                fix="drop _LOCAL to let the planner gather or slice first",
            )
        return NoPlan(
            f"{stmt} asks for the local product as written, which gives {out}, and no sequence of rules "
            f"reshards that to {target}" + _unreduced_facts(planner, out.unreduced),
            span=span,
            fix=f"drop _LOCAL to let the planner choose the product, or request {out}",
        )
    assert target is not None  # without a requested result, every legal product is a plan
    facts = _unreduced_facts(planner, ())
    return NoPlan(
        f"no plan computes {stmt}: no compute layout the planner tries gives a product that a sequence of rules "
        f"turns into {target}" + facts,
        span=span,
        fix=f"request the result reduced (drop {{{', '.join('U_' + a for a in target.unreduced)}}}), or shard a "
        "contracted dim over those axes in both operands"
        if target.unreduced
        else None,
    )


def _unreduced_facts(planner: EinsumPlanner, have: tuple[str, ...]) -> str:
    """Why the requested result's unreduced axes are out of reach, as checked facts ("" when none applies)."""
    target = planner.target
    if target is None:
        return ""
    brought = set(planner.left.unreduced) | set(planner.right.unreduced) | set(have)
    missing = [a for a in target.unreduced if a not in brought]
    if not missing:
        return ""
    a = missing[0]
    parts = [
        f"the result is requested unreduced over {a}, and a product leaves partial sums over {a} only "
        f"where an operand is unreduced over it, or both operands shard a contracted dim over it (case 3)"
    ]
    parts.append(_operand_fact(planner, a))
    if not planner.local:
        parts.append(_contracted_fact(planner, a))
    return ": " + "; ".join(p for p in parts if p)


def _operand_fact(planner: EinsumPlanner, a: str) -> str:
    names = [t.name or "an operand" for t in (planner.left, planner.right) if a in t.unreduced]
    if names:
        return ""
    size = planner.mesh[a].size
    same = [
        b
        for t in (planner.left, planner.right)
        for b in t.unreduced
        if size is not None and planner.mesh[b].size == size
    ]
    if same:
        return ""  # a Permute could rename them: nothing simple to say
    tail = f" (nor over another axis of size {size}, which a Permute could rename into {a})" if size else ""
    return f"neither operand is unreduced over {a}{tail}"


def _contracted_fact(planner: EinsumPlanner, a: str) -> str:
    contracted = planner.spec.contracted
    if not contracted:
        return f"{_product_text(planner)} contracts no dim"
    size = planner.mesh[a].size
    dims = []
    for d in contracted:
        n = planner.sizes.of(d, _literal(planner.left, d))
        if n is None or size is None or n % size == 0:
            return ""
        dims.append(f"{d} ({n})")
    return f"its contracted dims {', '.join(dims)} do not divide by |{a}| = {size}"


def _literal(t: Tensor, label: str) -> int | None:
    return t.dim(label).size


def _product_text(planner: EinsumPlanner) -> str:
    return str(Product(planner.left, planner.right))
