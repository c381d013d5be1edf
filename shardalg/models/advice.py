"""What would make a model fit that does not: each change priced by the memory count itself, never guessed.

    >>> import shardalg as sa
    >>> llama = sa.shard(sa.expand("llama-3-70b"), params="D=X", activations="B=X")
    >>> report = sa.memory(llama, mesh="X=8", sizes={"B": 64, "T": 4096}, hw="tpu-v5p")
    >>> [r.change for r in sa.to_fit(report)][:1]
    ['--remat block']

The changes, in the order they are tried (the cheapest to make first): keep only each layer's input for the
backward (``--remat block``, training); a smaller value of each ``tokens`` dim (the largest that fits,
:func:`.fit.largest`); a larger slice (:func:`.fit.smallest_slice`: the fewest devices whose HBM holds each
tensor once, so the program must then shard every tensor over them). Each :class:`Remedy` says the change,
the bytes per device after it (when the change keeps the mesh) and whether it fits.

Imports: :mod:`.memory`, :mod:`.analysis`, :mod:`.fit`, :mod:`.program`; the display helpers.
"""

from __future__ import annotations

from dataclasses import dataclass

from shardalg.errors import UsageError
from shardalg.notation.printing.display import bytes_both

from .analysis import analyze
from .fit import largest, smallest_slice
from .memory import MemoryReport, model_memory
from .program import model_program
from .quantities import as_json

__all__ = ["Remedy", "to_fit"]


@dataclass(frozen=True)
class Remedy:
    """One change: ``change`` (as the CLI writes it), ``what`` it does, the bytes per device after it (None
    when the change needs a new mesh), and whether the model then fits."""

    change: str
    what: str
    bytes: float | None
    fits: bool

    def __str__(self) -> str:
        after = f": {bytes_both(self.bytes)} per device" if self.bytes is not None else ""
        verdict = "fits" if self.fits else "still does not fit"
        return f"{self.change} ({self.what}){after}, {verdict}"

    def to_json(self) -> dict[str, object]:
        return {"change": self.change, "what": self.what, "bytes_per_device": self.bytes, "fits": self.fits}


def to_fit(report: MemoryReport) -> list[Remedy]:
    """The changes that would make ``report`` fit in HBM, each priced; empty when it fits already, or when
    the fit is unknown (no chip, or a size unbound)."""
    if report.fits is not False:
        return []
    out: list[Remedy] = []
    a = report.analysis
    if a.mode == "train" and a.remat.policy != "block":
        again = model_memory(
            analyze(a.model, a.mode if a.mode_chosen else None, "block"),
            report.chip,
            report.optimizer,
            report.grads,
        )
        out.append(
            Remedy(
                "--remat block",
                "keep each layer's input, recompute the rest",
                float(as_json(again.total)),  # type: ignore[arg-type]
                bool(again.fits),
            )
        )
    for dim in a.model.roles.tokens if a.model.roles is not None else ():
        if dim not in a.model.sizes:
            continue
        try:
            best = int(largest(report, dim).result)  # type: ignore[arg-type]
        except UsageError:
            continue  # the memory does not depend on it, or nothing else is bound
        if 0 < best < a.model.sizes[dim]:
            resized = model_program(a.model.program, a.model.mesh, {**a.model.sizes, dim: best})
            smaller = model_memory(
                analyze(resized, a.mode if a.mode_chosen else None, a.remat),
                report.chip,
                report.optimizer,
                report.grads,
            )
            out.append(
                Remedy(
                    f"--sizes {dim}={best}",
                    f"the largest {dim} that fits, from {a.model.sizes[dim]}",
                    float(as_json(smaller.total)),  # type: ignore[arg-type]
                    bool(smaller.fits),
                )
            )
    try:
        d, pick = smallest_slice(report)
        out.append(
            Remedy(
                f"a {pick.text} slice",
                f"{pick.devices} devices, the fewest whose HBM holds each tensor once: shard every tensor over them",
                None,
                True,
            )
        )
    except UsageError:
        pass  # no slice table for this chip, or none large enough
    return out
