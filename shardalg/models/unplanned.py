"""Memory per device that follows from a program alone, without a plan: the rows of the parameters, their
gradients and optimizer state (sharded as written, and over the data axes as the ZeRO stage says), of the
activations the backward keeps as the program holds them, and of the KV cache; and their sums, the lower
bounds a search refuses a candidate by before it plans anything (:func:`unplanned_bytes`).
:func:`shardalg.models.memory.model_memory` builds its report from these rows and adds what the plans hold
(the gathered weights, the copies the backward keeps, the functions' statistics, a head's logits by their
policy)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sympy
from sympy import Expr, Integer, Rational

from shardalg.algebra.traffic import DEFAULT_DTYPE
from shardalg.notation.syntax import DType

from .head import head_outputs
from .optimizers import Optimizer
from .program import ModelProgram
from .quantities import local_elements
from .trainstate import TrainState
from .zero import shard_count

__all__ = ["dtype_width", "param_rows", "held_rows", "param_bytes", "param_bytes_each", "unplanned_bytes"]

Row = tuple[str, str, Expr, Expr]  # (part, tensor, bytes per device or in all, how many per step)


def dtype_width(dtype: DType | None) -> Expr:
    """Bytes per element of ``dtype`` (bf16 when None: the book's default)."""
    w = (dtype or DEFAULT_DTYPE).bytes
    return Rational(w.numerator, w.denominator)


def param_rows(model: ModelProgram, per_device: bool, c: TrainState, train: bool) -> list[Row]:
    """(part, tensor, bytes, count) of the parameters, their gradients and their optimizer state: each in the
    recipe's dtype, sharded like the parameter and further over the data axes as the ZeRO stage says."""
    rows: list[Row] = []
    opt, rec, zero = c.opt, c.recipe, c.stage
    state = Rational(opt.state_under(rec)) if train else Integer(0)
    for part in ("params", "grads", "optimizer"):
        if not train and part != "params" or part == "grads" and c.grads == "none":
            continue
        if part == "optimizer" and not state:
            continue
        for v in model.params:
            count = (
                local_elements(v.tensor, model.mesh, model.sizes) / shard_count(model, v, zero, part)
                if per_device
                else model.elements_of(v.tensor)
            )
            dtype = rec.param_dtype(v.tensor.dtype) if train else v.tensor.dtype
            width = {
                "params": dtype_width(dtype),
                "grads": dtype_width(rec.grad_dtype(dtype)),
                "optimizer": state,
            }[part]
            rows.append((part, v.name, count * width, model.factor(v)))
    return rows


def held_rows(m: ModelProgram, saved: Iterable[str], per_device: bool = True) -> list[Row]:
    """(part, tensor, bytes, count) of the activations ``saved`` names, as the program holds them, and of the
    KV cache: the rows that follow from the program without a plan."""
    rows = [
        ("activations", n, m.bytes_of(m.kept_tensor(n), per_device=per_device), m.factor(m.values[n]))
        for n in saved
    ]
    rows += [
        ("kv_cache", v.name, m.bytes_of(v.tensor, per_device=per_device), m.factor(v)) for v in m.kv_cache
    ]
    return rows


def param_bytes(
    model: ModelProgram,
    mode: str,
    optimizer: str | Optimizer | None = None,
    grads: str = "param",
    **choices: Any,
) -> Expr:
    """Bytes per device of the parameters, their gradients and optimizer state (training; the parameters
    alone in inference): the part of :func:`~shardalg.models.memory.model_memory`'s total that needs no plan
    and no activation, a lower bound of it."""
    return sympy.Add(*param_bytes_each(model, mode, optimizer, grads, **choices).values())


def param_bytes_each(
    model: ModelProgram,
    mode: str,
    optimizer: str | Optimizer | None = None,
    grads: str = "param",
    **choices: Any,
) -> dict[str, Expr]:
    """:func:`param_bytes` by parameter (its name), in the model's order: with ZeRO's stage 0 each is its
    tensor's local elements times the bytes an element takes (and times the layers), so dividing an unsharded
    parameter's by the sizes of the axes that shard it gives the sharded one's."""
    c = TrainState(optimizer, grads, **choices)
    out: dict[str, Expr] = {}
    for p, name, b, n in param_rows(model, True, c, mode == "train"):
        if p not in c.place.parts:
            out[name] = out.get(name, Integer(0)) + b * n
    return out


def unplanned_bytes(
    model: ModelProgram,
    mode: str,
    saved: Iterable[str],
    optimizer: str | Optimizer | None = None,
    grads: str = "param",
    **choices: Any,
) -> dict[str, Expr]:
    """The bytes per device of :func:`~shardalg.models.memory.model_memory`'s total that follow from the
    program without a plan, by part: the parameters with their gradients and optimizer state
    (:func:`param_bytes`; ``params`` alone in inference), the activations of ``saved`` (values the backward
    keeps: the names of an analysis of the program, or of the same program unsharded, whose names are the
    same) as the program holds them, and the KV cache. A lower bound of the total: the activations count in
    training with one microbatch and not offloaded, as the report counts them; the rest of the total is the
    plans' (the gathered weights, the copies the backward keeps, the functions' statistics). A name ``model``
    lacks, or a head's logits (whose rows the logits policy sets), counts nothing."""
    c = TrainState(optimizer, grads, **choices)
    parts = {
        "params, grads and optimizer" if mode == "train" else "params": param_bytes(
            model, mode, optimizer, grads, **choices
        )
    }
    train_acts = mode == "train" and c.micro == 1 and "activations" not in c.place.parts
    heads = set(head_outputs(model))
    names = [n for n in saved if train_acts and n in model.values and n not in heads]
    for part, _, b, n in held_rows(model, names):
        if part not in c.place.parts:
            parts[part] = parts.get(part, Integer(0)) + b * n
    return parts
