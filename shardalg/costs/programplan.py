"""A program in the notation as a plan: one step per collective and product, inner expressions first.

A product written as a statement is one local einsum only when its operands meet (their shards can simply
be multiplied) and the local product is the result written; otherwise (``A[I_X, J] · B[J_X, K] ->
C[I_X, K]``: J is sharded on one side only; ``A[I, J_X] · B[J_X, K] -> C[I, K]``: the local product is
unreduced over X) the statement needs communication the text does not spell out, and it is replaced by its
cheapest plan from the planner, with a note that says so (pricing it as one einsum would price the missing
collective at zero).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from shardalg.algebra.context import Context, context_for, product_dims, value_of
from shardalg.algebra.einsum import Spec, local_output_or_none
from shardalg.algebra.legality import check_or_raise
from shardalg.errors import UsageError
from shardalg.notation.plan import Plan, Step
from shardalg.notation.printing import text
from shardalg.notation.syntax import Apply, Arrow, Collective, Node, Op, Product, Program, Tensor
from shardalg.planning import symbolic

# what the note of a statement says when its written steps do not make it (its operands do not meet, or
# its local result is not the one written) and it is priced by its cheapest plan instead: read by the audit,
# whose plan as read from XLA is then incomplete
REPLANNED = "priced by its cheapest plan"

__all__ = ["REPLANNED", "plan_of", "program_plan"]

Chooser = Callable[
    [list[Plan]], tuple[Plan, str]
]  # the cheapest of a statement's plans, and how it was ranked


def _meets(local: Tensor | None, result: Tensor | None) -> bool:
    """Whether the local product exists and is the result as written (dims on the same axes, the same
    partial sums)."""
    if local is None:
        return False
    if result is None:
        return True
    want = {d.label: d.axes for d in result.dims}
    return {d.label: d.axes for d in local.dims} == want and set(local.unreduced) == set(result.unreduced)


def _first(found: list[Plan]) -> tuple[Plan, str]:
    return symbolic.first(found, "a statement to price"), "by bytes communicated"


def _located(pick: Chooser, found: list[Plan], stmt: Node) -> tuple[Plan, str]:
    """``pick(found)``; a choice that needs sizes names the statement it is about."""
    try:
        return pick(found)
    except symbolic.NeedsSizes as err:
        raise symbolic.NeedsSizes(f"the plan of {text(stmt)}", err.choice) from None


def _planned(stmt: Node, ctx: Context) -> Sequence[Plan]:
    """The planner's plans of a statement the program does not spell out. The planner is imported here, when
    a statement needs it (:data:`shardalg.deferred.DEFERRED`): a program whose statements all meet, as the
    README's ``compare`` writes them, is priced without loading it."""
    from shardalg.planning.planner import plans

    return plans(stmt, ctx.mesh, ctx.sizes)


def program_plan(
    node: Node, mesh=None, sizes=None, choose: Chooser | None = None, *, checked: bool = False
) -> tuple[Plan, tuple[str, ...]]:
    """The plan a program (or one statement) spells out, and a note for each statement that had to be
    planned (see the module's docstring). ``choose`` picks the cheapest of a statement's plans (default:
    the planner's first, by bytes communicated). ``checked``: ``node`` passed the legality rules already (a
    statement of a model's program, checked when it was read): not checked again."""
    if not checked:
        check_or_raise(node, mesh, sizes)
    ctx = context_for(node, mesh, sizes)
    statements = node.statements if isinstance(node, Program) else (node,)
    steps: list[Step] = []
    produced: set[Tensor] = set()
    leaves: list[Tensor] = []
    notes: list[str] = []

    def leaf(t: Tensor) -> None:
        if t not in produced and t not in leaves:
            leaves.append(t)

    def emit(expr: Node, result: Tensor | None) -> Tensor:
        if isinstance(expr, Tensor):
            leaf(expr)
            return expr
        if isinstance(expr, Collective):
            arg = emit(expr.arg, None)
            out = result or value_of(Collective(expr.op, expr.axes, arg, expr.dim, expr.offset), ctx)
            steps.append(Step(expr.op, (arg,), out, expr.axes, expr.dim, offset=expr.offset))
        elif isinstance(expr, Product):
            left, right = emit(expr.left, None), emit(expr.right, None)
            spec = Spec.of(left, right, expr.contract, result)
            local = local_output_or_none(left, right, spec, ctx.mesh, result.name if result else None)
            if _meets(local, result):
                out = result or value_of(Product(left, right, expr.contract, expr.local), ctx, result)
                contracted, _ = product_dims(left, right, expr.contract, result)
                steps.append(Step(Op.EINSUM, (left, right), out, contract=contracted, local=expr.local))
            else:
                product = Product(left, right, expr.contract, expr.local)
                stmt = Arrow(product, result) if result is not None else product
                found = _planned(stmt, ctx)
                best, how = _located((choose or _first), found, stmt)
                steps.extend(best.steps)
                for t in best.inputs:
                    leaf(t)
                out = best.output
                why = (
                    "its operands do not meet"
                    if local is None
                    else f"the local product is {text(local)}, not {text(result)}"
                )
                notes.append(
                    f"{text(stmt)}: {why}; {REPLANNED} ({len(found)} found, {how}): "
                    f"{best.note or 'no communication'}"
                )
        elif isinstance(expr, Apply):  # a function: priced by its cheapest plan (a single step when it meets)
            operands = tuple(emit(x, None) for x in expr.operands)
            call = Apply(expr.op, operands, expr.dim, expr.factor, expr.flags, offset=expr.offset)
            stmt = Arrow(call, result) if result is not None else call
            found = _planned(stmt, ctx)
            best, how = _located((choose or _first), found, stmt)
            steps.extend(best.steps)
            out = best.output
            if len(best.steps) > 1:
                notes.append(
                    f"{text(stmt)}: {REPLANNED} ({len(found)} found, {how}): "
                    f"{best.note or 'no communication'}"
                )
        else:
            raise UsageError(f"cannot cost a {type(expr).__name__}")
        produced.add(out)
        return out

    for s in statements:
        if isinstance(s, Arrow) and isinstance(s.expr, Tensor):
            raise UsageError("a resharding request has no steps to cost: plan it first (shardalg plan)")
        if isinstance(s, Tensor):
            continue
        expr, result = (s.expr, s.result) if isinstance(s, Arrow) else (s, None)
        emit(expr, result)
    if not steps:
        raise UsageError("nothing to cost: write a collective or a product, e.g. AllGather_X(A[I_X, J])")
    return Plan(tuple(leaves), tuple(steps), steps[-1].output, note="; ".join(notes)), tuple(notes)


def plan_of(node: Node, mesh=None, sizes=None, *, checked: bool = False) -> Plan:
    """The explicit plan a program (or one statement) spells out: one step per collective and product,
    inner expressions first; a product that needs communication it does not write is replaced by its
    cheapest plan (the plan's ``note`` says so). Checks legality first (unless ``checked``, as
    :func:`program_plan`); a bare resharding request (``A[I_X] -> A[I_Y]``) has no steps of its own and is a
    UsageError (plan it with the planner)."""
    return program_plan(node, mesh, sizes, checked=checked)[0]
