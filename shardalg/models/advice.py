"""What would make a model fit that does not: each change priced by the memory count itself, never guessed.

    >>> import shardalg as sa
    >>> llama = sa.shard(sa.expand("llama-3-70b"), params="D=X", activations="B=X")
    >>> report = sa.memory(llama, mesh="X=8", sizes={"B": 64, "T": 4096}, hw="tpu-v5p")
    >>> [r.change for r in sa.to_fit(report)][:1]
    ['--remat block']

The changes, in the order they are tried: shard the parameters, with their gradients and optimizer state,
over the data-parallel axes (``--zero 3``, training, when it saves bytes); keep only each layer's input for the backward
(``--remat block``, training); a smaller value of each ``tokens`` dim (the largest that fits,
:func:`.fit.largest`); a larger slice (:func:`.fit.smallest_slice`: the fewest devices whose HBM holds each
tensor once, so the program must then shard every tensor over them). Each is priced with the report's own
choices (optimizer, precision, ZeRO stage, ...) but the one it changes. Each :class:`Remedy` says the change,
the bytes per device after it (when the change keeps the mesh), whether it fits, and how much of the run as
asked it changes (:attr:`Remedy.change_factor`); :func:`smallest` picks the one that fits and changes least.

Imports: :mod:`.memory`, :mod:`.analysis`, :mod:`.fit`, :mod:`.program`; the display helpers.
"""

from __future__ import annotations

from dataclasses import dataclass

from shardalg.errors import UsageError
from shardalg.notation.printing.display import bytes_both

from .analysis import analyze
from .fit import largest, smallest_slice
from .memory import MemoryReport, memory_with
from .program import resized
from .quantities import as_json

__all__ = ["Remedy", "to_fit", "smallest"]


@dataclass(frozen=True)
class Remedy:
    """One change: ``change`` (as the CLI writes it), ``what`` it does, the bytes per device after it (None
    when the change needs a new mesh), and whether the model then fits."""

    change: str
    what: str
    bytes: float | None
    fits: bool
    # how much of the run as asked the change gives up: 0 for a change of layout alone (ZeRO, remat: the
    # model, batch and devices stay), 1 - new/old for a smaller size, |new/old - 1| for the devices of another slice
    change_factor: float = 0.0

    def __str__(self) -> str:
        after = f": {bytes_both(self.bytes)} per device" if self.bytes is not None else ""
        verdict = "fits" if self.fits else "still does not fit"
        return f"{self.change} ({self.what}){after}, {verdict}"

    def to_json(self) -> dict[str, object]:
        return {
            "change": self.change,
            "what": self.what,
            "bytes_per_device": self.bytes,
            "fits": self.fits,
            "change_factor": self.change_factor,
        }


def smallest(remedies: list[Remedy]) -> Remedy | None:
    """The remedy that fits and changes least (:attr:`Remedy.change_factor`); among equals, the one that leaves
    the fewest bytes per device. None when none fits."""
    fitting = [r for r in remedies if r.fits]
    if not fitting:
        return None
    return min(fitting, key=lambda r: (r.change_factor, r.bytes if r.bytes is not None else float("inf")))


def _again(report: MemoryReport, analysis: object, **override: object) -> MemoryReport:
    """``report``'s count again on ``analysis`` with its own choices, but those in ``override``."""
    return memory_with(analysis, report.chip, report.choices, **override)


def to_fit(report: MemoryReport) -> list[Remedy]:
    """The changes that would make ``report`` fit in HBM, each priced; empty when it fits already, or when
    the fit is unknown (no chip, or a size unbound)."""
    if report.fits is not False:
        return []
    out: list[Remedy] = []
    a = report.analysis
    if a.mode == "train" and report.zero.stage < 3:
        try:
            sharded = _again(report, a, zero=3)
        except UsageError:
            sharded = None  # no data-parallel axis to shard the parameters over
        if sharded is not None and float(as_json(sharded.total)) < float(as_json(report.total)):  # type: ignore[arg-type]
            out.append(
                Remedy(
                    "--zero 3",
                    "shard the parameters, their gradients and optimizer state over the data-parallel axes",
                    float(as_json(sharded.total)),  # type: ignore[arg-type]
                    bool(sharded.fits),
                )
            )
    if a.mode == "train" and a.remat.policy != "block":
        again = _again(report, analyze(a.model, a.mode if a.mode_chosen else None, "block"))
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
            smaller_model = resized(a.model, {dim: best})
            smaller = _again(report, analyze(smaller_model, a.mode if a.mode_chosen else None, a.remat))
            out.append(
                Remedy(
                    f"--sizes {dim}={best}",
                    f"the largest {dim} that fits, from {a.model.sizes[dim]}",
                    float(as_json(smaller.total)),  # type: ignore[arg-type]
                    bool(smaller.fits),
                    1 - best / a.model.sizes[dim],
                )
            )
    devices = as_json(a.model.devices)
    try:
        d, pick = smallest_slice(report)
        out.append(
            Remedy(
                f"a {pick.text} slice",
                f"{pick.devices} devices, the fewest whose HBM holds each tensor once: shard every tensor over them",
                None,
                True,
                abs(pick.devices / devices - 1) if isinstance(devices, int) and devices > 0 else float("inf"),
            )
        )
    except UsageError:
        pass  # no slice table for this chip, or none large enough
    return out
