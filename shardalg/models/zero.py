"""ZeRO stages as data: which parts of a training step's state are sharded over the data axes.

    >>> from shardalg.models.program import model_program
    >>> m = model_program("params W\\nIn[B_X, D] * W[D, F] -> Out[B_X, F]", mesh="X=4")
    >>> data_axes(m), shard_count(m, m.values["W"], zero_named(2), "grads")
    (('X',), 4)

Stage 1 shards the optimizer state over the data axes, stage 2 the gradients too, stage 3 the parameters too
(Rajbhandari et al. 2019, section 5: P_os, P_os+g, P_os+g+p). Stage 0 is what the program writes: gradients and
optimizer state follow each parameter's sharding, so a parameter written sharded over a data axis (FSDP,
``W[D_X, F]``) is ZeRO-3 as written.

The data axes are the mesh axes that shard the repeated layer's input activations (``In[B_X, T, D]``: X). A
part is sharded over the data axes its parameter does not already use; the count is elements divided by
their sizes (DeepSpeed partitions flat, padded buffers: the padding is not counted). Stages 1 and 2 keep the
parameters whole over the data axes, so a program that shards one there asks for stage 3 (an error says so).
Their communication (stage 1 and 2): the gradients are reduce-scattered over the data axes and the updated
parameters all-gathered once per step, the volume of data parallelism's AllReduce; stage 3 gathers each
layer's parameters before its forward and again before its backward (the transient it holds).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy
from sympy import Expr, Integer

from shardalg.errors import UsageError

from .lookup import lookup_table
from .program import ModelProgram, Value

__all__ = [
    "Zero",
    "ZERO_STAGES",
    "zero_named",
    "data_axes",
    "shard_axes",
    "shard_count",
    "check_zero",
    "computed_with",
]

ZERO_SOURCE = (
    "Rajbhandari et al. 2019, ZeRO: Memory Optimizations Toward Training Trillion Parameter Models, "
    "section 5.1 and figure 1: P_os (optimizer state), P_os+g (and gradients), P_os+g+p (and parameters)"
)

# part -> the first stage that shards it over the data axes
_SHARDED_FROM: dict[str, int] = {"optimizer": 1, "grads": 2, "params": 3}


@dataclass(frozen=True)
class Zero:
    """A ZeRO stage (0: as the program writes it) and whether the user chose it."""

    stage: int
    chosen: bool = True

    def shards(self, part: str) -> bool:
        """Whether this stage shards ``part`` (params, grads, optimizer) over the data axes."""
        return self.stage >= _SHARDED_FROM.get(part, 4)

    def describe(self) -> str:
        if self.stage == 0:
            return "none (gradients and optimizer state sharded as each parameter is written)"
        sharded = [p for p in ("optimizer", "grads", "params") if self.shards(p)]
        return (
            f"ZeRO-{self.stage}: {', '.join('optimizer state' if p == 'optimizer' else p for p in sharded)} "
            "sharded over the data axes"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "stage": self.stage,
            "sharded": [p for p in ("params", "grads", "optimizer") if self.shards(p)],
            "description": self.describe(),
            "source": ZERO_SOURCE,
        }


ZERO_STAGES: tuple[int, ...] = (0, 1, 2, 3)


def zero_named(spec: int | str | Zero | None) -> Zero:
    """A stage: 0 (default: as written), 1, 2 or 3."""
    if isinstance(spec, Zero):
        return spec
    if spec is None:
        return Zero(0, chosen=False)
    text = str(spec).strip()
    if isinstance(spec, bool) or text not in {str(s) for s in ZERO_STAGES}:
        raise UsageError(
            f"the ZeRO stage is 0, 1, 2 or 3, not {spec!r}",
            fix="e.g. --zero 1 (optimizer state sharded over the data axes)",
        )
    return Zero(int(text))


def data_axes(model: ModelProgram) -> tuple[str, ...]:
    """The mesh axes that shard the repeated layer's input activations, in the mesh's order."""
    used = {a for n in model.layer_inputs for a in model.values[n].tensor.used_axes}
    return tuple(a.name for a in model.mesh.axes if a.name in used)


def shard_axes(model: ModelProgram, value: Value) -> tuple[str, ...]:
    """The data axes ``value`` (a parameter) is not already sharded over: those ZeRO shards it over."""
    own = set(value.tensor.used_axes)
    return tuple(a for a in data_axes(model) if a not in own)


def shard_count(model: ModelProgram, value: Value, zero: Zero, part: str) -> Expr:
    """How many ways ``zero`` splits ``part`` of ``value`` beyond its own sharding (1 when it does not)."""
    if not zero.shards(part):
        return Integer(1)
    return sympy.Mul(*(model.mesh.size_expr(a) for a in shard_axes(model, value)))


def computed_with(model: ModelProgram) -> set[str]:
    """The parameters the step reads to compute: those a statement that computes reads (a product, or a
    function: a norm's gain, an elementwise operand) and the table of the embedding lookup the program does not
    write (:func:`.lookup.lookup_table`). ZeRO-3 gathers each before the forward and again before the backward
    (an offload of the parameters fetches each): the one set the step's time (:mod:`.zerostep`) and its
    memory (:mod:`.memory`, the transient that holds the gathered copies) both read. A parameter the program
    declares and no statement reads is not gathered."""
    read = {r for s in model.computing_statements() for r in s.reads if model.values[r].is_param}
    found = lookup_table(model)
    return read | {found[0].name} if found is not None else read


def check_zero(model: ModelProgram, zero: Zero, require_axes: bool = True) -> list[tuple[str, str]]:
    """Refuse a stage the program contradicts; the notes a stage brings (its data axes). With
    ``require_axes`` False (a search's candidates) a program without data axes is no error: ZeRO shards
    nothing there."""
    if zero.stage == 0:
        return []
    axes = data_axes(model)
    if not axes and not require_axes:
        return []
    if not axes:
        raise UsageError(
            f"--zero {zero.stage} shards over the data axes, and no mesh axis shards the layer's input "
            f"({', '.join(model.layer_inputs) or 'none'})",
            fix="shard the batch over an axis, e.g. In[B_X, T, D] (model show --activations B=X)",
        )
    if zero.stage < 3:
        for v in model.params:
            clash = [a for a in v.tensor.used_axes if a in axes]
            if clash:
                raise UsageError(
                    f"--zero {zero.stage} keeps the parameters whole over the data axes, and the program "
                    f"shards {v.name} over {', '.join(clash)} (FSDP: ZeRO-3 as written)",
                    fix=f"use --zero 3, or write {v.name} unsharded over {', '.join(clash)}",
                )
    inputs = ", ".join(model.layer_inputs)
    return [("zero", f"data axes {', '.join(axes)} (the axes that shard the layer's input {inputs})")]
