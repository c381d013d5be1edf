"""The input embedding's gradient: the token lookup the program does not write, reduced or gathered.

    >>> from shardalg.models.program import model_program
    >>> text = "params W; embeddings E; tokens B; layers L\\nE[V, D]\\nIn[B_X, D] * W[D, F] -> Out[B_X, F]"
    >>> [(g.table.name, [s.op.value for s in g.plan.steps]) for g in lookup_gradients(model_program(text, mesh="X=4"))]
    [('E', ['AllReduce'])]
    >>> small = model_program(text, mesh="X=4", sizes={"B": 8, "D": 16, "F": 16, "V": 100})
    >>> [(s.op.value, s.inputs[0].name) for g in lookup_gradients(small) for s in g.plan.steps]
    [('AllGather', 'dIn')]

A model's first layer reads its input (``In[B, T, D]``) made by looking up each token's row of the embedding
table (``W_emb[V, D]``), a step the notation does not write: the table is declared and read by no statement.
The backward still differentiates it: ``dW_emb`` is the cotangent of the layer stack's input ``dIn[B, T, D]``
scatter-added into the rows of the tokens' ids (negligible compute, one add per element of ``dIn``: no FLOPs
counted, no step priced). Each device adds the tokens it holds, so its ``dW_emb`` is a partial sum over every
axis that shards the tokens (the input's dims the table has not: ``B``, ``T``), laid out in ``D`` as the input
is (``dW_emb{U_X}[V, D]``). Like every weight's gradient it must end in the table's own layout (sharded as the
table under FSDP, whole under DP). Two ways get it there, and the one that communicates fewer bytes (the
planner's ranking) is taken, its plan's note saying which and the bytes of both:

- reduce the table: the planner's plan of ``dW_emb{U_X}[V, D] -> dW_emb[V, D]`` (AllReduce, or ReduceScatter
  to a sharded table), ``V·D`` elements whatever the batch;
- gather the tokens: ``AllGather_X(dIn[B_X, T, D]) -> dIn[B, T, D]`` (``B·T·D`` elements), then every device
  adds every token's row (the whole sum, no partial left) and keeps its own block of the table's layout (a
  slice, free; or whatever the planner plans from ``dW_emb[V, D]`` as the input lays out ``D``). Cheaper at
  a small batch (as the planner gathers a head's activations there): by the planner's bytes, when
  ``B·T < 2·V`` against an AllReduce, ``B·T < V`` against a ReduceScatter. The tokens' ids, ``B·T``
  integers, go with ``dIn``: not counted (a ``D``-th of its elements).

:class:`shardalg.models.zerostep` chooses again under a ZeRO stage (a reduction to the gradient's ZeRO shard,
which may run once a step, against a gather of each microbatch's ``dIn``). It is part of the step outside the
repeated layer (once), of its backward, on the pipeline's stage 0 (:mod:`.stages`: the table is on the
embedding side), where it runs among the devices of stage 0 alone: the other stages hold no table
(:func:`.stages.stage_analysis` plans a stage on the mesh without the pipeline axis). With no axis on the
tokens (one device; model parallelism alone) there is nothing to reduce. The lookup reads the table: under
ZeRO-3, which shards it, the table is gathered before the forward and again before the backward, as every
parameter (:mod:`.zerostep`).

A tied embedding (the head's unembedding reads the table) has a gradient derived from that product too. Where its
plan reduces a partial sum over token axes (``AllReduce_X(dW_emb[V, D]{U_X})``), the lookup's scatter-add adds
into it before that one reduction: nothing more over those axes. Where the planner gathered the head's
activations instead (fewer bytes at a small batch: ``AllGather_X(Xf)``, no partial sum), the lookup's partial
sum is the only one, reduced or gathered by its own plan (either way the head's whole gradient and the
lookup's whole sum are added on each device). A program that writes its lookup as a product before the layer
(``OneHot · W_emb -> In``) has its gradient derived from that product, and nothing is planned here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from shardalg.algebra.traffic import Bytes, Sizes
from shardalg.notation.plan import Plan
from shardalg.notation.syntax import Arrow, Role, Tensor
from shardalg.planning.forward import grad_name
from shardalg.planning.order import plan_bytes
from shardalg.planning.planner import plan
from shardalg.planning.symbolic import beaten_everywhere

from .program import ModelProgram, Value

__all__ = [
    "LookupGradient",
    "analysis_lookup",
    "lookup_gradients",
    "lookup_table",
    "rechosen",
]


@dataclass(frozen=True)
class LookupGradient:
    """The lookup's gradient of one table: the table, the layer input it makes, the gradient as each device
    adds its own tokens (a partial sum over the token axes) and the plan to the table's layout: the reduction
    of that partial sum, or (``gathered``) the gather of the input's cotangent over the token axes, after which
    each device adds every token (the plan's inputs are then the cotangent and the whole sum it adds)."""

    table: Value
    input: str
    partial: Tensor
    plan: Plan
    gathered: bool = False


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
    """The lookup's gradient and the plan that makes it in the table's layout (:func:`lookup_table`): over the
    axes that shard the tokens, but those that the table's derived gradient (``derived``: each gradient's
    parameter and plan; a tied table's, from the head) reduces already, the lookup's part added into it
    first; the fewer bytes of reducing the table and gathering the tokens (see the module). Empty when the
    program writes no such table or no axis is left to reduce over."""
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
    g = LookupGradient(table, x, partial, Plan((partial,), (), whole))
    return [rechosen(m, g, whole)]


def _bytes_text(b: Bytes, times: int) -> str:
    """``b`` as a number (or its formula in the sizes), with how many times a step it is paid when not once."""
    text = f"{float(b.number):.4g}" if b.is_number else str(b.sympy())
    return f"{text} bytes" + (f" ({times} times a step)" if times != 1 else "")


def rechosen(
    m: ModelProgram, g: LookupGradient, target: Tensor, gathers: int = 1, reductions: int = 1
) -> LookupGradient:
    """``g`` made in ``target`` (the table's layout, or its ZeRO shard) the cheaper way, by the bytes a step
    communicates: the reduction of its partial sum, run ``reductions`` times a step, or the gather of the
    input's cotangent, ``gathers`` times (once a microbatch: each pass has its own tokens). The reduction stays
    when the bytes are symbolic and the gather's are not fewer at every size (the note says so)."""
    mesh, sizes = m.mesh, Sizes(m.sizes)
    partial, tokens = g.partial, g.partial.unreduced
    reduce = plan(Arrow(partial, target), mesh, m.sizes)
    held = m.values[g.input].tensor
    d_in = replace(held, name=grad_name(g.input), unreduced=(), invariant=(), span=None)
    every = tuple(d.with_axes(tuple(a for a in d.axes if a not in tokens)) for d in d_in.dims)
    gather = plan(Arrow(d_in, replace(d_in, dims=every)), mesh, m.sizes)
    added = replace(partial, unreduced=())  # each device's sum of every token's rows: the whole sum
    keep = plan(Arrow(added, target), mesh, m.sizes)  # its block of the table's layout (a slice: free)
    by_reducing = plan_bytes(reduce, mesh, sizes).scale(reductions)
    by_gathering = (plan_bytes(gather, mesh, sizes) + plan_bytes(keep, mesh, sizes)).scale(gathers)
    over = "".join(tokens)
    both = (
        f"reducing {partial.name} over {over}: {_bytes_text(by_reducing, reductions)}, "
        f"gathering {d_in.name} over {over}: {_bytes_text(by_gathering, gathers)}"
    )
    kept = ""
    if by_reducing.is_number and by_gathering.is_number:
        gathered = by_gathering.number < by_reducing.number
    else:
        gathered = beaten_everywhere(by_reducing, by_gathering)
        if not gathered and not beaten_everywhere(by_gathering, by_reducing):
            kept = "; which is fewer depends on sizes not given: the reduction kept"
    if gathered:
        note = (
            f"the lookup's gradient gathered: each device adds every token's row of {d_in.name}, fewer bytes "
            f"({both})"
        )
        made = Plan((d_in, added), gather.steps + keep.steps, target, note=note)
    else:
        note = f"the lookup's gradient reduced: {partial.name}'s partial sums ({both}){kept}"
        made = replace(reduce, note=note)
    return replace(g, plan=made, gathered=gathered)


def analysis_lookup(a: Any) -> list[LookupGradient]:
    """:func:`lookup_gradients` of a training step's :class:`~.analysis.Analysis` (which reads this module: not
    imported here), with its derived gradients (none in inference)."""
    if a.mode != "train":
        return []
    grads = a.backward.grads if a.backward is not None else []
    return lookup_gradients(a.model, ((g.of, p) for g, (_, p) in zip(grads, a.grad_plans, strict=True)))
