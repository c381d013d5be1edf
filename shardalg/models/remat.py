"""A rematerialisation policy, as a step's memory and FLOPs read it: ``none``, ``block``, or the names of the
activations it keeps, parsed from ``--remat`` and said in every output. What each policy keeps and reruns is
:class:`.analysis.Analysis`'s (``saved``, ``recomputed``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from shardalg.errors import UsageError

from .program import ModelProgram

__all__ = ["Remat", "remat_named"]


@dataclass(frozen=True)
class Remat:
    """A rematerialisation policy: ``none``, ``block``, or ``names`` with the tensors it keeps."""

    policy: str
    names: tuple[str, ...] = ()
    chosen: bool = True  # False when it is the default (stated in every output)

    def describe(self) -> str:
        if self.policy == "names":
            return "keep " + ", ".join(self.names)
        return {
            "none": "none: keep every activation the backward reads",
            "block": "block: keep the layer's input, recompute the rest",
        }[self.policy]


def remat_named(spec: str | Iterable[str] | Remat | None, model: ModelProgram) -> Remat:
    """``none``, ``block``, ``saved`` (the program's ``saved`` list), or tensor names (``"G,U,Out"``).
    Without a choice: the program's ``saved`` list when it declares one, else ``none``."""
    if isinstance(spec, Remat):
        return spec
    if spec is None:
        if model.roles.saved:
            return Remat("names", model.roles.saved, chosen=False)
        return Remat("none", chosen=False)
    names = [n.strip() for n in spec.split(",")] if isinstance(spec, str) else list(spec)
    if names in (["none"], ["block"]):
        return Remat(names[0])
    if names == ["saved"]:
        if not model.roles.saved:
            raise UsageError(
                "--remat saved uses the program's 'saved' declaration, and the program has none",
                fix="declare the kept activations, e.g. 'saved G, U, Out', or list them: --remat G,U,Out",
            )
        return Remat("names", model.roles.saved)
    for n in names:
        v = model.values.get(n)
        if v is None or not v.is_activation:
            acts = ", ".join(a.name for a in model.activations)
            raise UsageError(
                f"--remat takes none, block, saved or activations of the program, not {n!r}",
                fix=f"its activations: {acts}",
            )
    return Remat("names", tuple(dict.fromkeys(names)))
