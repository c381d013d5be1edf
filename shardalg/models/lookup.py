"""The input embedding's gradient: the token lookup the program does not write, and its reduction.

    >>> from shardalg.models.program import model_program
    >>> m = model_program("params W; embeddings E; tokens B; layers L\\nE[V, D]\\n"
    ...                   "In[B_X, D] * W[D, F] -> Out[B_X, F]", mesh="X=4")
    >>> [(g.table.name, [s.op.value for s in g.plan.steps]) for g in lookup_gradients(m)]
    [('E', ['AllReduce'])]

A model's first layer reads its input (``In[B, T, D]``) made by looking up each token's row of the embedding
table (``W_emb[V, D]``), a step the notation does not write: the table is declared and read by no statement.
The backward still differentiates it: ``dW_emb`` is the cotangent of the layer stack's input ``dIn[B, T, D]``
scatter-added into the rows of the tokens' ids (negligible compute, one add per element of ``dIn``: no FLOPs
counted, no step priced). Each device adds the tokens it holds, so its ``dW_emb`` is a partial sum over every
axis that shards the tokens (the input's dims the table has not: ``B``, ``T``), laid out in ``D`` as the input
is (``dW_emb{U_X}[V, D]``). Like every weight's gradient it must end in the table's own layout (sharded as the
table under FSDP, whole under DP): the planner plans that reduction (AllReduce, or ReduceScatter to a sharded
table), as :class:`shardalg.models.zerostep` replans it under a ZeRO stage. It is part of the step outside the
repeated layer (once), of its backward, on the pipeline's stage 0 (:mod:`.stages`: the table is on the
embedding side). With no axis on the tokens (one device; model parallelism alone) there is nothing to reduce.

A tied embedding (the head's unembedding reads the table) has a gradient derived from that product too. Where its
plan reduces a partial sum over token axes (``AllReduce_X(dW_emb[V, D]{U_X})``), the lookup's scatter-add adds
into it before that one reduction: nothing more over those axes. Where the planner gathered the head's
activations instead (fewer bytes at a small batch: ``AllGather_X(Xf)``, no partial sum), the lookup's partial
sum is the only one, reduced by its own plan. A program that writes its lookup as a product before the layer
(``OneHot · W_emb -> In``) has its gradient derived from that product, and nothing is planned here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from shardalg.notation.plan import Plan
from shardalg.notation.syntax import Arrow, Role, Tensor
from shardalg.planning.forward import grad_name
from shardalg.planning.planner import plan

from .program import ModelProgram, Value

__all__ = ["LookupGradient", "analysis_lookup", "lookup_gradients", "lookup_table"]


@dataclass(frozen=True)
class LookupGradient:
    """The lookup's gradient of one table: the table, the layer input it makes, the gradient as each device
    adds it (a partial sum over the token axes) and the plan to the table's layout (empty: nothing to reduce)."""

    table: Value
    input: str
    partial: Tensor
    plan: Plan


def lookup_table(m: ModelProgram) -> tuple[Value, str] | None:
    """(the embedding table, the layer's input it makes) when the program does not write the lookup: an
    ``embeddings`` tensor of two dims declared before the layer and read by no statement before it, one of its
    dims the layer input's (``D``) and the other not (``V``), the input's other dims (the tokens) none of the
    table's; one no statement reads first (untied: ``W_emb``, not the head's ``W_unemb``)."""
    start = m.layer_start
    declared = {r for s in m.statements if s.kind == "declaration" and s.index < start for r in s.reads}
    read_before = {r for s in m.statements if s.kind != "declaration" and s.index < start for r in s.reads}
    read = {r for s in m.statements if s.kind != "declaration" for r in s.reads}
    found: list[tuple[Value, str]] = []
    for x in m.layer_inputs:
        held = m.values[x].tensor.dim_names
        for v in m.with_role(Role.EMBEDDINGS):
            dims = v.tensor.dim_names
            shared = [d for d in dims if d in held]
            if (
                v.name in declared
                and v.name not in read_before
                and len(dims) == 2
                and len(shared) == 1 < len(held)
            ):
                found.append((v, x))
    found.sort(key=lambda f: f[0].name in read)
    return found[0] if found else None


def lookup_gradients(
    m: ModelProgram, derived: Iterable[tuple[str | None, Plan]] = ()
) -> list[LookupGradient]:
    """The lookup's gradient and the plan that reduces it into the table's layout (:func:`lookup_table`):
    over the axes that shard the tokens, but those that the table's derived gradient (``derived``: each
    gradient's parameter and plan; a tied table's, from the head) reduces already, the lookup's part added
    into it first. Empty when the program writes no such table or no axis is left to reduce over."""
    found = lookup_table(m)
    if found is None:
        return []
    table, x = found
    reduced = {
        a
        for name, p in derived
        if name is not None and m.aliases.get(name, name) == table.name
        for s in p.steps
        if s.op.communicates
        for a in set(s.inputs[0].unreduced) - set(s.output.unreduced)
    }
    held = m.values[x].tensor
    own = set(table.tensor.dim_names)
    tokens = tuple(
        a
        for d in held.dims
        if d.label not in own
        for a in d.axes
        if a not in reduced and m.mesh.size_expr(a) != 1
    )
    if not tokens:
        return []
    dims = tuple(
        d.with_axes(held.axes_of(d.label) if d.label in held.dim_names else ()) for d in table.tensor.dims
    )
    name = grad_name(table.name)
    partial = replace(table.tensor, name=name, dims=dims, unreduced=tokens, invariant=(), span=None)
    whole = replace(table.tensor, name=name, unreduced=(), invariant=(), span=None)
    return [LookupGradient(table, x, partial, plan(Arrow(partial, whole), m.mesh, m.sizes))]


def analysis_lookup(a: Any) -> list[LookupGradient]:
    """:func:`lookup_gradients` of a training step's :class:`~.analysis.Analysis` (which reads this module: not
    imported here), with its derived gradients (none in inference)."""
    if a.mode != "train":
        return []
    grads = a.backward.grads if a.backward is not None else []
    return lookup_gradients(a.model, ((g.of, p) for g, (_, p) in zip(grads, a.grad_plans, strict=True)))
