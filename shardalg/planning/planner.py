"""The planner: every legal plan for a sharded einsum, a collective, or a resharding (DESIGN.md section 3).

For ``left · right -> out`` a plan is: reshard each operand into a *compute layout*, take the local einsum
of the shards (:mod:`shardalg.algebra.einsum`), then finish: reduce (AllReduce, ReduceScatter onto a result dim,
or leave unreduced) and reshard to the requested result. Compute layouts are enumerated per mesh axis: an
axis that shards or leaves unreduced an operand may be kept, gathered (reduced), or moved; a replicated one
may be sliced onto a dim that the other operand or the requested result shards over it. That covers the
book's strategies and XLA's: gather either operand or both (case 2, 4, mismatched), slice the replicated
operand and reduce afterwards (case 2's alternative), AllReduce vs ReduceScatter vs leaving C unreduced
(case 3), permute an operand into place (redistribute finds the Permute when it is cheapest), reshard the
inputs or the output. Each plan also comes in a variant that first slices onto the spare replicated axes
before a gather (the book's question 2: ``[B_X, D_Y] -> [B_XZ, D_Y]`` is free, then AllGather_XZ uses more
links). Plans are deduplicated and sorted by ``key`` (default: bytes communicated, then steps, then the steps
themselves); ``plan`` returns the first.

Without a requested result, each natural output is planned, and only the minimal compute layouts are kept
(no plan that does strictly more resharding than another legal one).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from shardalg.algebra.context import chosen_mesh, merged_sizes, say_replaced
from shardalg.algebra.factors import is_subaxis, parent_of
from shardalg.algebra.layout import subscript, validate
from shardalg.algebra.legality import check_or_raise
from shardalg.algebra.mesh import Mesh, a_mesh
from shardalg.algebra.statements import apply_statement
from shardalg.algebra.subaxes import axes_in, declared_cuts, prime_cuts, refine
from shardalg.algebra.traffic import Bytes, Sizes
from shardalg.cache import Kind, memoized
from shardalg.errors import IncompleteWarning, NoPlan, ShardalgError, UsageError
from shardalg.notation import printing
from shardalg.notation.parse import parse, parse_tensor
from shardalg.notation.plan import Plan, Step
from shardalg.notation.printing import display
from shardalg.notation.syntax import Apply, Arrow, Collective, MeshDecl, Product, Program, Statement, Tensor

from .anonymous import Renaming
from .attention import attention_plans, core_of
from .einsum_plans import EinsumPlanner
from .functions import free_plan, function_plans
from .noplan import no_plan
from .order import bytes_are_numbers, default_key, sort_plans
from .planset import DEFAULT_LIMITS, Limits, Overlap, Plans
from .ranking import Key, Ranking, Weigh
from .redistribute import plan_bytes, redistribute
from .respan import respanned, written_tensors
from .space import searching
from .symbolic import beaten_everywhere, choose, first, is_strict

__all__ = [
    "plans",
    "plan",
    "first_plan",
    "Problem",
    "prepare",
    "one_problem",
    "Key",
    "Weigh",
    "Ranking",
    "Plans",
    "Limits",
]


@dataclass(frozen=True)
class Problem:
    """What to plan: one statement on a mesh, with dim sizes and the requested result (if any)."""

    statement: Statement
    mesh: Mesh
    sizes: Sizes
    target: Tensor | None
    checked: bool = field(default=False, compare=False)  # by the legality rules (prepare): not checked again


def one_problem(program: Program) -> bool:
    """Whether the planner plans ``program`` as one problem: one statement, or an attention core (its three
    statements planned whole, :mod:`shardalg.planning.attention`); an empty program too (:func:`prepare`
    refuses it). A program of other statements is planned statement by statement."""
    return len(program.statements) <= 1 or core_of(program) is not None


def prepare(
    expr: object,
    mesh: Mesh | Mapping[str, int] | str | None = None,
    sizes: Mapping[str, int] | None = None,
    target: Tensor | str | None = None,
) -> Problem:
    """Normalize the API's arguments: text or AST, a one-statement program, the mesh and sizes it declares
    (a mesh or size given in place of the program's is said:
    :func:`~shardalg.algebra.context.say_replaced`)."""
    prog_sizes: tuple[tuple[str, int], ...] = ()
    prog_mesh: MeshDecl | None = None
    if isinstance(expr, str):
        expr = parse(expr)
    written = expr
    if isinstance(expr, Program):
        if not expr.statements or not one_problem(expr):
            raise UsageError(
                f"plan takes one statement (or an attention core: Q · K -> Sc; softmax_S(Sc) -> P; "
                f"P · V -> O), not {len(expr.statements)}: give one statement, or check the whole program "
                "with `shardalg check PROGRAM --mesh ...` (check_program in Python)"
            )
        prog_sizes, prog_mesh = expr.sizes, expr.mesh
        if len(expr.statements) == 1:
            expr = expr.statements[0]
        else:  # the attention core, planned whole (planning.attention)
            expr = Program(expr.statements)
    if not isinstance(expr, Arrow | Product | Collective | Tensor | Apply | Program):
        raise UsageError(f"plan takes a statement (text or AST), not {type(expr).__name__}")
    m, mesh_said = chosen_mesh(prog_mesh, a_mesh(mesh, "the planner") if mesh is not None else None)
    if m is None:
        raise UsageError(
            "planning needs a mesh: mesh=Mesh(X=4, Y=2), --mesh X=4,Y=2, or 'mesh X=4' in the text"
        )
    if isinstance(target, str):
        target = parse_tensor(target)
    known, sizes_said = merged_sizes(prog_sizes, sizes)
    say_replaced(mesh_said + sizes_said)
    # the one legality (shardalg.algebra.legality): plan refuses what check refuses, with its span and fix
    check_or_raise(written, m, known)
    if target is not None:
        check_or_raise(target, m, known)
    return Problem(expr, m, Sizes(known), target, checked=True)


@searching
def plans(
    expr: object,
    mesh: Mesh | Mapping[str, int] | str | None = None,
    sizes: Mapping[str, int] | None = None,
    target: Tensor | str | None = None,
    *,
    key: Key | None = None,
    weigh: Weigh | None = None,
    limits: Limits = DEFAULT_LIMITS,
    overlap: Overlap | None = None,
    rank: Ranking | None = None,
) -> Plans:
    """Every legal plan for a statement, cheapest first: an einsum ``A[..] · B[..] -> C[..]`` (the arrow's
    result, or ``target``, is the requested output; without one, every natural output), a collective
    statement (its one plan), or a resharding ``A[I_X, J] -> A[I, J_X]`` (redistribute's sequences).

    Ranking: by ``key`` when given, else by ``rank`` (a :class:`~.ranking.Ranking`, such as
    :class:`~shardalg.costs.ranking.BySeconds` of a cost model: seconds on its chip under its overlap policy,
    where every size is bound; ``shardalg.plans(..., hw=...)`` builds one), else by bytes communicated, then steps.
    ``weigh`` (a step's additive weight, such as its seconds on a chip) guides a resharding's search, and for
    an einsum adds the plan that is cheapest by it over every compute layout; ``overlap`` (with ``weigh``)
    says how steps overlap under the ranking's policy (:class:`~.planset.Overlap`): the search for the
    cheapest plan over every compute layout then measures plans by it, not by the sum of their steps'
    weights (see :mod:`.optimum`). A ``rank`` hands over all three (with ``key``, only its columns are read).
    The plans' table (in a notebook) shows their bytes communicated and the ranking's columns.

    The result is a :class:`Plans` list: ``complete`` is False (and ``note`` says which limit, and how to
    lift it) when a budget of the search cut the answer, and an :class:`~shardalg.errors.IncompleteWarning`
    says so (on stderr unless filtered); ``limits`` raises the budgets."""
    p = expr if isinstance(expr, Problem) else prepare(expr, mesh, sizes, target)
    given_key = key is not None  # the caller's own order: no symbolic choice is made for it
    by = None  # the ranking, when its functions are the ones the search reads (keys the plans' memo)
    columns: dict[str, Callable[[Plan], object]] = {
        "bytes communicated": lambda q: display.bytes_text(str(plan_bytes(q, p.mesh, p.sizes)))
    }
    if rank is not None:
        if not isinstance(rank, Ranking):
            raise UsageError(
                f"rank is a ranking such as BySeconds(CostModel.of('tpu-v5p')) (shardalg.costs.ranking), not {rank!r}"
            )
        ranked = rank.ranking(p.mesh, p.sizes)
        if key is None and weigh is None and overlap is None:
            try:
                hash(rank)
                by = rank  # hashable: the plans' memo is keyed by it
            except TypeError:  # an unhashable ranking (a chip with mutable parts): by its functions
                pass
        if key is None:
            key, weigh, overlap = ranked.key, weigh or ranked.weigh, overlap or ranked.overlap
        columns.update(ranked.columns)
    found = _plans(p, key, weigh, limits, overlap, by)
    if not found.complete:
        warnings.warn(f"the plans may be incomplete: {found.note}", IncompleteWarning, stacklevel=2)
    # the one place spans are settled: memos are keyed by value, so pieces may come from an equal statement
    # written elsewhere; every tensor points into what this caller wrote
    written = written_tensors(p.statement, p.target)
    own = respanned(found, written)
    if given_key:
        return Plans(own, found.complete, found.note, columns)
    listed = list(own)

    def cost(q: Plan) -> Bytes:
        return plan_bytes(q, p.mesh, p.sizes)

    if is_strict():  # an order that makes up no size, and the choice with it
        if bytes_are_numbers(listed, p.mesh, p.sizes, written):  # nothing to choose: the numeric order stands
            return Plans(listed, found.complete, found.note, columns)
        ordered, choice = choose(listed, cost)
        return Plans(ordered, found.complete, found.note, columns, choice)
    # the planner's own order; the choice is made when asked for (Plans.choice)
    return Plans(listed, found.complete, found.note, columns, lambda: choose(listed, cost)[1])


def _plans(
    p: Problem,
    key: Key | None,
    weigh: Weigh | None,
    limits: Limits,
    overlap: Overlap | None = None,
    by: Ranking | None = None,
) -> Plans:
    """The plans of ``p``; on the mesh refined into the factors its sub-axes cut when it names any, and for
    a resharding also on the mesh refined into prime factors (XLA's plans use sub-axes there: its own plan
    for ``[I_Y] -> [I_X]`` on X=2, Y=4 gathers over ``Y:(1)2``), merged with the whole-axis plans."""
    if isinstance(p.statement, Program):  # the attention core: each statement planned by this planner
        if p.target is not None:
            raise UsageError("the attention core's plans end in its written O; give no target")
        core = core_of(p.statement)
        assert core is not None  # prepare made it so

        def plan_one(stmt: Statement) -> Plans:
            return _plans(Problem(stmt, p.mesh, p.sizes, None), key, weigh, limits, overlap, by)

        return attention_plans(core, p.mesh, p.sizes, plan_one, key or default_key(p.mesh, p.sizes))
    named = [a for n in (p.statement, p.target) for a in axes_in(n)]
    written = [a for a in named if is_subaxis(a)]
    body = p.statement.expr if isinstance(p.statement, Arrow) else p.statement
    cuts: dict[str, set[int]] = {}
    if isinstance(body, Tensor) and p.mesh.is_numeric:  # split the axes it uses
        cuts = prime_cuts(p.mesh, {parent_of(a) for a in named})
    declared = declared_cuts(p.mesh)  # axes the mesh declares factored (Y=2x2): always searched
    if declared:  # then only those are refined (and written sub-axes), whatever the mesh's size
        cuts = declared
    if not written and not cuts:
        return _plans_on(p, key, weigh, limits, overlap, by)
    fine_axes = len(p.mesh) + sum(len(c) - 1 for c in cuts.values())
    if not written and not declared and fine_axes > SUBAXIS_SEARCH_AXES:  # too large a space: say so
        whole = _plans_on(p, key, weigh, limits, overlap, by)
        skipped = (
            f"sub-axes not searched: the mesh refined into prime factors would have {fine_axes} axes "
            f"(the search over sub-axes runs up to {SUBAXIS_SEARCH_AXES}); name a sub-axis, such as "
            f"{next(iter(cuts))}:(1)2, in the statement, or declare the axis factored ({next(iter(cuts))}=2x...), "
            "to plan over its factors"
        )
        return Plans(whole, whole.complete, "; ".join(n for n in (whole.note, skipped) if n))
    r = refine(p.mesh, written, cuts)
    target = None if p.target is None else r.expand(p.target)
    fine = Problem(r.expand(p.statement), r.fine, p.sizes, target, checked=True)  # type: ignore[arg-type]
    got = _plans_on(fine, key, weigh, limits, overlap, by)
    found = [_noted(r.coarsen(q)) for q in got]
    notes = [got.note] if not got.complete else []
    rank = key or default_key(p.mesh, p.sizes)
    if not written:  # the whole-axis plans, and the sub-axis plans that cost no more than the best of them
        whole_set = _plans_on(p, key, weigh, limits, overlap, by)
        notes += [whole_set.note] if not whole_set.complete else []
        whole = list(whole_set)
        if whole:
            sort_plans(whole, rank)
            found = [
                q
                for q in found
                if _not_dearer(q, whole, rank, p) and any(is_subaxis(a) for s in q.steps for a in s.axes)
            ]
        found = list(dict.fromkeys([*whole, *found]))
    sort_plans(found, rank)
    return Plans.of(found, notes)


def _not_dearer(q: Plan, whole: list[Plan], rank: Key, p: Problem) -> bool:
    """Whether the sub-axis plan ``q`` costs no more than the best whole-axis plan: by ``rank`` when the
    bytes are numbers, else when no whole-axis plan moves fewer bytes at every size (no size made up)."""
    mine = plan_bytes(q, p.mesh, p.sizes)
    if mine.is_number and plan_bytes(whole[0], p.mesh, p.sizes).is_number:
        return _head(rank, q) <= _head(rank, whole[0])
    return not any(beaten_everywhere(mine, plan_bytes(w, p.mesh, p.sizes)) for w in whole)


def _head(rank: Key, q: Plan) -> object:
    """What ``rank`` orders a plan by first (its cost), without the tie-breaking by text."""
    head = getattr(rank, "head", None)
    return head(q) if head is not None else rank(q)


# A resharding is searched over the prime factors of its mesh's axes when that refined mesh has at most this
# many axes (2x4 refines to 3): each more axis multiplies the layout space the search walks.
SUBAXIS_SEARCH_AXES = 3

SUBAXIS_NOTE = (
    "uses sub-axes, each priced as a ring of its own size on its parent's links "
    "(the stride between its devices and links shared by interleaved groups not modelled)"
)


def _noted(q: Plan) -> Plan:
    """A plan whose steps use a sub-axis, with the note that says how they are priced."""
    if not any(is_subaxis(a) for s in q.steps for a in s.axes):
        return q
    return replace(q, note=f"{q.note}; {SUBAXIS_NOTE}" if q.note else SUBAXIS_NOTE)


def _plans_on(
    p: Problem,
    key: Key | None,
    weigh: Weigh | None,
    limits: Limits,
    overlap: Overlap | None = None,
    by: Ranking | None = None,
) -> Plans:
    rank = key or default_key(p.mesh, p.sizes)
    stmt = p.statement
    result = p.target if p.target is not None else (stmt.result if isinstance(stmt, Arrow) else None)
    body = stmt.expr if isinstance(stmt, Arrow) else stmt
    if isinstance(body, Tensor):
        if result is None:
            return Plans([Plan((body,), (), body, note="nothing to do")])
        return redistribute(body, result, p.mesh, p.sizes.known, key=rank, weigh=weigh, limits=limits)
    if isinstance(body, Collective):
        return Plans([_collective_plan(body, result, p)])
    if isinstance(body, Apply):
        if key is None and weigh is None:  # the planner's own order: the answer by the statement's value
            return Plans(_function_plans(body, result, p.mesh, p.sizes, limits))
        return function_plans(body, result, p.mesh, p.sizes, rank, weigh, limits)
    if not isinstance(body.left, Tensor) or not isinstance(body.right, Tensor):
        raise UsageError("plan takes a product of two tensors; write nested products as separate statements")
    found, cuts = _ranked_einsum_plans(body, result, p, limits, weigh, overlap, by)
    found = list(found)
    if not found:
        if cuts:
            return Plans.of((), cuts)
        planner = EinsumPlanner(body, result, p.mesh, p.sizes, limits, weigh, overlap)
        planner.plans()  # again, for the facts the message states
        raise no_plan(stmt, planner)
    if key is not None:  # the answer is in the default ranking's order (bytes, then steps): the caller's
        sort_plans(found, key)
    return Plans.of(found, cuts)


@memoized(Kind.ANSWER)
def _function_plans(
    body: Apply, result: Tensor | None, mesh: Mesh, sizes: Sizes, limits: Limits
) -> tuple[Plan, ...]:
    """A function's plans in the default ranking (bytes, then steps, then their text), memoized as an einsum's
    are (:func:`_einsum_plans`): a strategy search plans the same sharded norm or residual add for many
    candidates (on the causal layer's search in training on 2x2x2, 14,867 queries of 2,023 statements)."""
    return tuple(function_plans(body, result, mesh, sizes, default_key(mesh, sizes), None, limits))


# an einsum's plans in the default ranking's order, and the notes of the limits that cut them
EinsumAnswer = tuple[tuple[Plan, ...], tuple[str, ...]]


def _ranked_einsum_plans(
    body: Product,
    result: Tensor | None,
    p: Problem,
    limits: Limits,
    weigh: Weigh | None,
    overlap: Overlap | None,
    rank: Ranking | None,
) -> EinsumAnswer:
    """:func:`_einsum_plans`, keyed by the ranking's value when ``weigh`` and ``overlap`` are the ranking's
    own and it is hashable (so equal queries under an equal cost model share the answer: the functions it hands out are new at
    each call, and a function is equal only to itself)."""
    if rank is not None:
        return _einsum_plans_by(body, result, p.mesh, p.sizes, limits, rank, p.checked)
    return _einsum_plans(body, result, p.mesh, p.sizes, limits, weigh, overlap, p.checked)


@memoized(Kind.ANSWER)
def _einsum_plans_by(
    body: Product,
    result: Tensor | None,
    mesh: Mesh,
    sizes: Sizes,
    limits: Limits,
    rank: Ranking,
    checked: bool,
) -> EinsumAnswer:
    """The plans of one product under the ranking ``rank`` (its step weights and overlap), by its value."""
    ranked = rank.ranking(mesh, sizes)
    return _einsum_plans(body, result, mesh, sizes, limits, ranked.weigh, ranked.overlap, checked)


@memoized(Kind.ANSWER)
def _einsum_plans(
    body: Product,
    result: Tensor | None,
    mesh: Mesh,
    sizes: Sizes,
    limits: Limits,
    weigh: Any,
    overlap: Any = None,
    checked: bool = False,
) -> EinsumAnswer:
    """The plans of one product, sorted by the default ranking (bytes, then steps, then their text: sorted
    once here, not at each query the memo answers), and the notes of the limits that cut them: memoized, since
    a strategy search plans the same sharded statement for many candidates (plans are immutable; spans take
    no part in the key)."""
    planner = EinsumPlanner(body, result, mesh, sizes, limits, weigh, overlap, checked=checked)
    found = planner.plans()
    sort_plans(found, default_key(mesh, sizes), planner.heads)  # the planner's heads are the default key's
    return tuple(found), tuple(planner.cuts)


def plan(
    expr: object,
    mesh: Mesh | Mapping[str, int] | str | None = None,
    sizes: Mapping[str, int] | None = None,
    target: Tensor | str | None = None,
    *,
    key: Key | None = None,
    weigh: Weigh | None = None,
    limits: Limits = DEFAULT_LIMITS,
    overlap: Overlap | None = None,
    rank: Ranking | None = None,
) -> Plan:
    """The default (first) of :func:`plans`; under :func:`~.symbolic.strict`, :class:`~.symbolic.NeedsSizes`
    when which plan is the cheapest depends on sizes not given (the error holds the
    :class:`~.symbolic.Choice`: the contenders, and where each is the cheapest when that is one size's
    interval)."""
    p = expr if isinstance(expr, Problem) else prepare(expr, mesh, sizes, target)
    if key is None and weigh is None and rank is None and overlap is None:
        free = _free(p)
        if free is not None:
            return free
        anonymous = _under_stand_ins(p)
        if anonymous is not None:
            renaming, stand_in = anonymous
            try:
                return renaming.plan(plan(stand_in, limits=limits))
            except ShardalgError:
                pass  # its message names the stand-ins: planned again under the names as written
    found = plans(p, key=key, weigh=weigh, limits=limits, overlap=overlap, rank=rank)
    if not found:
        raise NoPlan(f"the search found no plan before a limit cut it: {found.note}")
    return first(found, f"plan of {_statement_text(expr)}")


def first_plan(
    expr: object, mesh: Mesh | Mapping[str, int] | str | None = None, sizes: Mapping[str, int] | None = None
) -> Plan:
    """The first of :func:`plans` (by bytes, then steps; under :func:`~.symbolic.strict` the first of an order
    that makes up no size, whether or not the choice is decided)."""
    p = expr if isinstance(expr, Problem) else prepare(expr, mesh, sizes)
    return _free(p) or plans(p)[0]


def _under_stand_ins(p: Problem) -> tuple[Renaming, Problem] | None:
    """A product's problem with its tensors under stand-in names (:mod:`.anonymous`), and the renaming that
    takes its plan back: the planner does not read names, so two products that differ only by their names (Q's,
    K's and V's projections of one input, an MLP's gate and up projections) are one query of the planner's
    memo. None for anything else, or a product already under stand-ins or with an unnamed tensor."""
    stmt = p.statement
    if not isinstance(stmt, Arrow) or not isinstance(stmt.expr, Product):
        return None
    body = stmt.expr
    if not isinstance(body.left, Tensor) or not isinstance(body.right, Tensor):
        return None
    written = (body.left, body.right, stmt.result, *((p.target,) if p.target is not None else ()))
    renaming = Renaming(written)
    if not renaming.usable:
        return None
    to = renaming.to
    renamed = replace(
        stmt, expr=replace(body, left=to(body.left), right=to(body.right)), result=to(stmt.result)
    )
    target = None if p.target is None else to(p.target)
    return renaming, Problem(renamed, p.mesh, p.sizes, target, checked=p.checked)


def _free(p: Problem) -> Plan | None:
    """The first of the default ranking's plans when it is a function's free plan (:func:`.functions.free_plan`):
    then no plan ranks before it, by bytes at every size either (its bytes are 0, every other plan's a sum of
    positive terms), so the other compute layouts are not planned. None for anything else."""
    stmt = p.statement
    body = stmt.expr if isinstance(stmt, Arrow) else stmt
    if not isinstance(body, Apply) or declared_cuts(p.mesh):
        return None
    if any(is_subaxis(a) for n in (p.statement, p.target) for a in axes_in(n)):
        return None  # planned on the refined mesh too: as plans does
    result = p.target if p.target is not None else (stmt.result if isinstance(stmt, Arrow) else None)
    got = free_plan(body, result, p.mesh, p.sizes)
    return None if got is None else respanned([got], written_tensors(p.statement, p.target))[0]


def _statement_text(expr: object) -> str:
    """The statement planned, as text for a message."""
    if isinstance(expr, Problem):
        expr = expr.statement
    return expr if isinstance(expr, str) else printing.text(expr)


def _collective_plan(c: Collective, result: Tensor | None, p: Problem) -> Plan:
    """A collective statement's one plan: its steps, innermost first, checked by the rules."""
    chain: list[Collective] = []
    node: object = c
    while isinstance(node, Collective):
        chain.append(node)
        node = node.arg
    if not isinstance(node, Tensor):
        raise UsageError("plan takes a collective of a tensor; write products as separate statements")
    validate(node, p.mesh)
    p.sizes.require_divisible(node, p.mesh)  # as check's tensor rules: the input itself must divide
    src = cur = node
    steps: list[Step] = []
    for i, col in enumerate(reversed(chain)):
        last = i == len(chain) - 1
        stmt: Collective | Arrow = Collective(col.op, col.axes, cur, col.dim, col.offset, span=col.span)
        if last and result is not None:
            stmt = Arrow(stmt, result)
        out = apply_statement(stmt, p.mesh, p.sizes.known)
        dim = col.dim
        if dim is None and col.op.takes_dim:
            dim = next(d.label for d, e in zip(cur.dims, out.dims, strict=True) if d.axes != e.axes)
        sub = subscript(col.axes) if col.offset is None else f"{{{','.join(col.axes)},{col.offset:+d}}}"
        steps.append(
            Step(
                col.op,
                (cur,),
                out,
                col.axes,
                dim,
                reason=f"as written: {col.op.value}_{sub}",
                offset=col.offset,
            )
        )
        cur = out
    return Plan((src,), tuple(steps), cur, note="the collective as written")
