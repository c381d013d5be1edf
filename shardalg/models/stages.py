"""Which pipeline stage holds what lies outside the repeated layer: the embedding side on stage 0, the head on
the last stage.

    >>> from shardalg.models.program import model_program
    >>> m = model_program("params W; embeddings E, U; layers L\\nE[V, D]\\nIn[B, D] * W[D, F] -> Out[B, F]\\n"
    ...                   "Xl[B, D] * U[D, V] -> Lg[B, V]", mesh="X=4")
    >>> sorted((n, sorted(e.name for e in ends)) for n, ends in outside_ends(m).items())
    [('E', ['FIRST']), ('Lg', ['LAST']), ('U', ['LAST']), ('Xl', ['LAST'])]

A statement outside the repeated layer (:mod:`.program`: it reads an ``embeddings`` tensor or a value such a
statement makes) that comes before the layer's first product or function is on the embedding side, stage 0
(the embedding table, declared or looked up before the layer); one after it is the head, on the last stage,
which reads the last layer's output (the final norm's gain, the unembedding, the logits). Each value outside
the layer is where the statements that read or make it are: a tied embedding, the table declared before the
layer and read by the head's product, is on both (a copy on each, as Megatron-LM keeps it, its gradients
summed between them).

Each stage is its own mesh: the pipeline axis holds the stages, each stage's devices hold its own layers, so
no plan of a stage's statements (forward, backward, a weight's gradient reduced, the lookup's gradient) may
communicate over that axis; only the stage boundary's Send crosses it (:mod:`.pipeline`).
:func:`stage_analysis` plans the program on the mesh without the pipeline axis, the one place this rule lives.

    >>> from shardalg.models.analysis import analyze
    >>> a = analyze(model_program("params W; layers L\\nIn[B_X, D] * W[D, F] -> Out[B_X, F]", mesh="P=4,X=2",
    ...                           sizes={"B": 65536, "D": 256, "F": 1024}), "train")
    >>> [(s.op.value, s.axes) for _, p in a.grad_plans[1:] for s in p.steps if s.op.communicates]
    [('ReduceScatter', ('X',)), ('AllGather', ('P', 'X'))]
    >>> [(s.op.value, s.axes) for _, p in stage_analysis(a, "P").grad_plans[1:] for s in p.steps if s.op.communicates]
    [('AllReduce', ('X',))]
"""

from __future__ import annotations

from dataclasses import replace
from enum import Enum

from shardalg.algebra.mesh import Mesh

from .analysis import Analysis
from .memory import RERUN, rerun_held
from .program import ModelProgram

__all__ = [
    "End",
    "outside_ends",
    "row_owners",
    "stage_analysis",
    "stage_ends",
    "stage_mesh",
    "statement_ends",
]


class End(Enum):
    """An end of the pipeline: the stage that holds a part outside the repeated layer."""

    FIRST = "stage 0"  # the embedding side, before the repeated layer
    LAST = "the last stage"  # the head, after it


def statement_ends(model: ModelProgram) -> dict[int, End]:
    """Each statement outside the repeated layer (its index) and the end of the pipeline that runs it: before
    the layer's first product or function, stage 0; after it, the last stage."""
    start = model.layer_start
    return {s.index: End.FIRST if s.index < start else End.LAST for s in model.statements if s.once}


def outside_ends(model: ModelProgram) -> dict[str, frozenset[End]]:
    """Each value outside the repeated layer (parameter or activation) and the ends of the pipeline holding it."""
    ends: dict[str, set[End]] = {}
    for i, end in statement_ends(model).items():
        s = model.statements[i]
        for name in (*s.reads, *((s.result,) if s.result is not None else ())):
            if model.values[name].once:
                ends.setdefault(name, set()).add(end)
    for name, v in model.values.items():
        if v.once and name not in ends:  # declared outside, touched by no statement: with the embedding
            ends[name] = {End.FIRST}
    return {name: frozenset(e) for name, e in ends.items()}


def row_owners(analysis: Analysis) -> dict[str, str]:
    """The value each memory row not named by its value is of (:func:`.memory.model_memory`'s rows): a norm's
    or a fused softmax's statistics, the function's result; a kept gathered copy (``kept W[D, V]``), its
    parameter; an activation the backward makes again (``rerun Gt``), that activation."""
    a = analysis
    owners = {label: owner for label, _, _, owner in a.owned_statistics()}
    owners.update({label: label.removeprefix(RERUN) for label, _, _ in rerun_held(a)})  # a rerun activation
    bw = a.backward
    if bw is not None:
        copies = [c for c in bw.gathered if c.kept]
        for (label, _, _), c in zip(a.kept(), copies, strict=True):
            v = a.model.value_named(c.source.name)
            if v is not None:
                owners[f"kept {label}"] = v.name  # as model_memory labels the row
    return owners


def stage_ends(stage: int, stages: int) -> frozenset[End]:
    """The ends stage ``stage`` of ``stages`` is: stage 0 the first, the last the last (one stage: both)."""
    return frozenset(e for e, at in ((End.FIRST, stage == 0), (End.LAST, stage == stages - 1)) if at)


def stage_mesh(mesh: Mesh, axis: str) -> Mesh:
    """One pipeline stage's devices: ``mesh`` without the pipeline axis ``axis`` (the other axes as they are:
    sizes, links, wraparound)."""
    return Mesh([a for a in mesh.axes if a.name != axis])


def stage_analysis(a: Analysis, axis: str) -> Analysis:
    """``a`` as one stage of a pipeline over ``axis`` plans it: the same program, mode, remat and options on
    :func:`stage_mesh`, so that every plan (forward, backward, each gradient's reduction, the lookup's) runs
    among the stage's own devices. The program's tensors are sharded over the other axes alone (the pipeline
    checks it), so each holds on a stage's device what it holds on the whole mesh. Made once an axis and kept
    on ``a`` (a search prices each microbatch count on the same analysis), its plans planned once."""
    held: dict[str, Analysis] = a.__dict__.setdefault("_stages", {})
    if axis not in held:
        model = replace(a.model, mesh=stage_mesh(a.model.mesh, axis), notes=list(a.model.notes))
        held[axis] = replace(a, model=model, own_notes=list(a.own_notes))  # planned again, on the stage
    return held[axis]
