"""Programs: check a multi-statement program statement by statement (a forward pass, say).

Each named tensor's shardings are tracked (:mod:`.held`): a statement's result (``-> H[B_X, F_Y]``) or a bare
declaration (``W[D_X, F]``) gives it a value in one sharding, and a collective applied to it
(``AllReduce_X(C[I, K]{U_X})``) holds it in one more. A statement that uses a tensor in a sharding the program
does not hold it in is a ShapeMismatch pointing at that use, whose fix is the cheapest resharding (:func:`shardalg.planning.redistribute.redistribute`). Each statement
is then planned (:func:`shardalg.planning.planner.plans`): its default plan says what communication it needs.

    >>> check_program(parse("In[B_X, D] · W[D, F_Y] -> H[B_X, F_Y]"), Mesh(X=2, Y=2))[0].steps  # no collective
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from shardalg.algebra.context import chosen_mesh, merged_sizes, say_replaced
from shardalg.algebra.layout import Layout
from shardalg.algebra.mesh import Mesh, as_mesh
from shardalg.errors import NoPlan, ShapeMismatch, ShardalgError, UsageError
from shardalg.notation.parse import parse
from shardalg.notation.plan import Plan
from shardalg.notation.syntax import Arrow, Collective, Node, Product, Program, Statement, Tensor

from .held import Held
from .planner import plan
from .redistribute import cheapest_resharding

__all__ = ["check_program"]


def _leaves(node: Node) -> Iterator[Tensor]:
    """The tensors a statement reads, left to right."""
    if isinstance(node, Tensor):
        yield node
    elif isinstance(node, Product):
        yield from _leaves(node.left)  # type: ignore[arg-type]
        yield from _leaves(node.right)  # type: ignore[arg-type]
    elif isinstance(node, Collective):
        yield from _leaves(node.arg)  # type: ignore[arg-type]
    elif isinstance(node, Arrow):
        yield from _leaves(node.expr)  # type: ignore[arg-type]


def _same_place(a: Tensor, b: Tensor) -> bool:
    """Whether two uses of a tensor place its data alike (invariant marks only matter to the backward)."""
    return Layout.of(a)[:2] == Layout.of(b)[:2]


def _fix(have: Tensor, want: Tensor, mesh: Mesh, sizes: Mapping[str, int]) -> str:
    try:
        best = cheapest_resharding(have, want, mesh, sizes)
    except NoPlan as err:
        return err.message
    lines = "; ".join(str(s.statement()) for s in best.steps)
    return f"insert {lines}" if lines else "nothing to insert"


def _produced(stmt: Statement, p: Plan) -> Tensor | None:
    """The named tensor a statement leaves behind, if any."""
    if isinstance(stmt, Arrow):
        return stmt.result if stmt.result.name is not None else None
    if isinstance(stmt, Collective | Tensor) and p.output.name is not None:
        return p.output
    return None


def check_program(
    program: Program | str,
    mesh: Mesh | Mapping[str, int] | str | None = None,
    sizes: Mapping[str, int] | None = None,
) -> list[Plan]:
    """Check ``program`` in order and return the default plan of each statement. A use of a tensor in
    another sharding than the program left it is a ShapeMismatch at that use, with the collective that
    would fix it; an illegal statement raises its own error, located in the source."""
    if isinstance(program, str):
        program = parse(program)
    if not isinstance(program, Program):
        raise UsageError(f"check_program takes a program (text or Program), not {type(program).__name__}")
    m, mesh_said = chosen_mesh(program.mesh, as_mesh(mesh))
    if m is None:
        raise UsageError("checking a program needs a mesh: an argument, or a 'mesh X=4, Y=2' line")
    known, sizes_said = merged_sizes(program.sizes, sizes)
    say_replaced(mesh_said + sizes_said)
    source = program.source
    held = Held()  # every layout each name's value is held in
    made_by: dict[str, str] = {}  # name -> "statement 2 made it" / "statement 1 used it"
    out: list[Plan] = []
    for n, stmt in enumerate(program.statements, 1):
        for use in _leaves(stmt.expr if isinstance(stmt, Arrow) else stmt):
            if use.name is None or use.name not in held or held.find(use.name, use, _same_place):
                continue
            have = held.latest(use.name)
            if have.dim_names != use.dim_names:
                raise ShapeMismatch(
                    f"statement {n} uses {use}, but {made_by[use.name]} as {have}, "  # type: ignore[index]
                    f"with dims {', '.join(have.dim_names)}",
                    span=use.span,
                    source=source,
                    fix=f"write {have}",
                )
            if not _same_place(have, use):
                raise ShapeMismatch(
                    f"statement {n} uses {use}, but {made_by[use.name]} as {have}",  # type: ignore[index]
                    span=use.span,
                    source=source,
                    fix=_fix(have, use, m, known),
                )
        try:
            p = plan(stmt, mesh=m, sizes=known)
        except ShardalgError as err:
            if err.span is None:
                err.span = getattr(stmt, "span", None)
            if source is not None:
                err.with_source(source)
            raise
        out.append(p)
        for t in _leaves(stmt.expr if isinstance(stmt, Arrow) else stmt):
            if t.name is not None and t.name not in held:
                held.computed(t.name, t)
                made_by[t.name] = f"statement {n} used it"
        produced = _produced(stmt, p)
        if produced is not None and produced.name is not None:
            moved = _moved_from(stmt)
            if moved is None:
                held.computed(produced.name, produced)
            else:
                held.moved(produced.name, moved, produced)
            made_by[produced.name] = f"statement {n} made it"
    return out


def _moved_from(stmt: Statement) -> str | None:
    """The name whose value a statement only moves (a collective or a resharding: the identity on the global
    value), None when it computes a value."""
    expr = stmt.expr if isinstance(stmt, Arrow) else stmt
    while isinstance(expr, Collective):
        expr = expr.arg
    if isinstance(expr, Tensor) and (isinstance(stmt, Collective) or expr is not stmt):
        return expr.name
    return None
