"""The head's logits in a training step: kept for the backward, recomputed, or made in chunks.

    >>> logits_named("chunked=8").chunks
    8

The logits are the results of the products outside the repeated layer that no statement reads (the
unembedding's ``Logits[B, T, V]``): they feed the loss, a step the notation does not show, whose backward
reads them. Without ``--logits`` the remat policy decides (:mod:`.analysis`: ``none`` keeps them, ``block``
makes them again from the head's input, a list keeps them when it names them). ``kept`` keeps them with the
saved activations. ``recomputed`` frees them after the
loss and makes them again for the backward: they are held only while the head runs (a transient beside the
head's gathered weights), and the head's product runs once more. ``chunked=N`` makes them N chunks of tokens at
a time, each chunk's loss and its gradient at once (a fused cross-entropy, as Liger-Kernel's and
torchtune's chunked losses do): one chunk is held, none kept. The chunks are whole tokens: N must divide the
tokens one device holds (:func:`check_chunks`, refused as ``--microbatches`` is when it does not divide the
batch), checked only where those tokens are a number.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import sympy

from shardalg.errors import UsageError

from .program import ModelProgram
from .quantities import dim_value

__all__ = ["Logits", "logits_named", "check_chunks", "head_outputs", "made_again", "LOGITS_POLICIES"]

LOGITS_POLICIES: tuple[str, ...] = ("kept", "recomputed", "chunked=N")


@dataclass(frozen=True)
class Logits:
    """A policy for the head's logits: ``kept``, ``recomputed`` or ``chunked`` with its chunk count."""

    policy: str = "kept"
    chunks: int = 1
    chosen: bool = True

    def describe(self) -> str:
        again = (
            "memory only: step reruns the head's product only when the remat policy does"
            if self.chosen
            else "the head's product runs again, its FLOPs counted"
        )
        return {
            "kept": "kept for the backward with the saved activations",
            "recomputed": f"freed after the loss and made again for the backward (held while the head runs; {again})",
            "chunked": f"made in {self.chunks} chunks of tokens, each chunk's loss and gradient at once "
            "(one chunk held, none kept)",
        }[self.policy]


def logits_named(spec: str | Logits | None) -> Logits:
    """``kept`` (default), ``recomputed`` or ``chunked=N``."""
    if isinstance(spec, Logits):
        return spec
    if spec is None:
        return Logits(chosen=False)
    text = str(spec).strip().lower()
    if text in ("kept", "recomputed"):
        return Logits(text)
    head, eq, count = text.partition("=")
    if head == "chunked" and eq and count.isdigit() and int(count) >= 1:
        return Logits("chunked", int(count))
    raise UsageError(
        f"--logits takes {', '.join(LOGITS_POLICIES)}, not {spec!r}", fix="e.g. --logits chunked=8"
    )


def check_chunks(model: ModelProgram, logits: Logits, names: Iterable[str], micro: bool = False) -> None:
    """Refuse ``chunked=N`` when N does not divide the tokens one device holds of a logits tensor in ``names``
    (more chunks than tokens included): the ``tokens`` dims at their local sizes, one microbatch's when
    ``micro``. Where those tokens are a formula (a size unbound), or the program declares no ``tokens``, nothing
    is refused: no size is made up."""
    if logits.policy != "chunked":
        return
    n = logits.chunks
    for name in names:
        dims = [d for d in model.values[name].tensor.dims if d.label in model.roles.tokens]
        local = {
            d.label: model.tied(
                dim_value(d, model.sizes) / sympy.Mul(*(model.mesh.size_expr(a) for a in d.axes))
            )
            for d in dims
        }
        tokens = sympy.Mul(*local.values())
        if not dims or not tokens.is_Integer or not tokens % n:
            continue
        held = ", ".join(f"{k} = {v}" for k, v in local.items())
        cut = (
            "into more chunks than tokens"
            if n > tokens
            else f"into equal chunks, and {n} does not divide them"
        )
        raise UsageError(
            f"--logits chunked={n} cuts the {tokens} tokens per device{' in a microbatch' if micro else ''} "
            f"({held} of {name}) {cut}",
            fix=f"pick a divisor of {tokens}, at most {tokens} (one token a chunk)",
        )


def head_outputs(model: ModelProgram) -> tuple[str, ...]:
    """The logits: results of products outside the repeated layer that no statement reads."""
    read = {r for s in model.statements for r in s.reads}
    return tuple(
        s.result for s in model.product_statements(once=True) if s.result is not None and s.result not in read
    )


def made_again(model: ModelProgram, policy: str) -> frozenset[str]:
    """What a remat policy (``none``, ``block``, ``names``) makes again for the backward outside the repeated
    layer, where the head is one more block: ``block`` all that the head makes, its input kept as a layer keeps
    its own (the final norm's ``Xfr``, ``Xf``, the logits: not ``Xl``, nor what the embedding side makes
    before the layer); a list the logits (kept when it names them); ``none`` nothing."""
    if policy == "none":
        return frozenset()
    if policy != "block":
        return frozenset(head_outputs(model))
    start = model.layer_start
    return frozenset(s.result for s in model.computing_statements(once=True) if s.index > start and s.result)
