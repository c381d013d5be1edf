"""Memory per device by part, from each tensor's sharding, and the fit against a chip's HBM.

    >>> r = memory("params W\\nIn[B_X, D] * W[D_X, F] -> Out[B_X, F]", mesh="X=4", hw="tpu-v5p")
    >>> r.parts["params"], r.parts["optimizer"]         # W sharded over X: a quarter on each device
    (D*F/2, 2*D*F)

The parts (each per device, each tensor at its local shape, repeated ``layers`` times unless it is outside
the repeated layer):

``params``       every ``params`` and ``embeddings`` tensor, in its dtype (bf16 when it has none);
``grads``        the gradient of each, in the parameter's dtype and sharding (the backward's target: DESIGN.md
                 section 4); ``grads="none"`` leaves them out (applied as they are made, as the book's
                 "10 bytes per parameter" counts);
``optimizer``    the optimizer's state bytes per parameter (:mod:`.optimizers`), sharded like the parameter;
``activations``  what the backward keeps under the remat policy (:mod:`.analysis`);
``kv_cache``     every ``kvcache`` tensor;
``transient``    the weights one layer gathers and holds while it runs (FSDP), once, not per layer.

Inference (``mode="infer"``, the default when the program declares a KV cache) counts no gradients, optimizer
state or saved activations. Every default the user did not choose is in ``notes`` and in the output.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import sympy
from sympy import Expr, Integer

from shardalg.costs.chipspec import as_chip_text
from shardalg.costs.hardware import Chip
from shardalg.errors import UsageError

from .analysis import Analysis, Remat, analyze
from .optimizers import Optimizer, optimizer_named
from .program import ModelProgram, model_program
from .quantities import as_json, as_text, bytes_text, local_elements

__all__ = ["MemoryReport", "memory", "model_memory", "param_bytes", "PARTS", "GRADS"]

PARTS: tuple[str, ...] = ("params", "grads", "optimizer", "activations", "kv_cache", "transient")
GRADS: tuple[str, ...] = ("param", "none")


@dataclass
class MemoryReport:
    """Bytes per device by part (sympy values: numbers when every size is bound), the parameter count, and
    the fit on ``chip``. ``rows`` lists (part, tensor, bytes per device, count) behind each part."""

    analysis: Analysis
    chip: Chip | None
    optimizer: Optimizer
    grads: str
    params: Expr
    parts: dict[str, Expr]
    rows: list[tuple[str, str, Expr, Expr]]
    notes: list[tuple[str, str]] = field(default_factory=list)

    @property
    def model(self) -> ModelProgram:
        return self.analysis.model

    @property
    def total(self) -> Expr:
        return sympy.Add(*self.parts.values())

    @property
    def hbm(self) -> float | None:
        return self.chip.hbm_capacity.value if self.chip is not None else None

    @property
    def headroom(self) -> Expr | None:
        return None if self.hbm is None else sympy.Float(self.hbm) - self.total

    @property
    def fits(self) -> bool | None:
        """Whether the total fits in HBM; None without a chip or while a size is unbound."""
        if self.hbm is None or self.total.free_symbols:
            return None
        return bool(self.total <= self.hbm)

    def to_json(self) -> dict[str, Any]:
        """The documented JSON (README, "JSON of shardalg memory")."""
        m = self.model
        return {
            "params": as_json(self.params),
            "bytes_per_device": {
                **{k: as_json(v) for k, v in self.parts.items()},
                "total": as_json(self.total),
            },
            "hbm_bytes": as_json(self.hbm),
            "fits": self.fits,
            "headroom": as_json(self.headroom),
            "chip": self.chip.name if self.chip is not None else None,
            "mesh": {a.name: a.size for a in m.mesh.axes},
            "devices": as_json(m.devices),
            "layers": as_json(m.layers),
            "mode": self.analysis.mode,
            "optimizer": self.optimizer.to_json() if self.analysis.mode == "train" else None,
            "grads": self.grads if self.analysis.mode == "train" else None,
            "remat": (
                {
                    "policy": self.analysis.remat.policy,
                    "saved": list(self.analysis.saved),
                    "recomputed": [self.model.statements[i].result for i in self.analysis.recomputed],
                }
                if self.analysis.mode == "train"
                else None
            ),
            "tensors": [
                {"part": part, "tensor": name, "bytes_per_device": as_json(b), "count": as_json(n)}
                for part, name, b, n in self.rows
            ],
            "defaults": [{"key": k, "value": v} for k, v in self.notes],
        }

    def __str__(self) -> str:
        m = self.model
        mesh = ", ".join(f"{a.name}={a.size if a.size is not None else a.name}" for a in m.mesh.axes)
        head = [
            ("parameters", f"{as_text(self.params)} ({as_text(m.layers)} layers)"),
            ("mesh", f"{mesh} ({as_text(m.devices)} devices)"),
            ("mode", self.analysis.mode),
        ]
        if self.analysis.mode == "train":
            head.append(("optimizer", f"{self.optimizer.name} ({self.optimizer.description})"))
            head.append(("remat", self.analysis.remat.describe()))
        if self.chip is not None:
            head.append(("chip", f"{self.chip.name} (HBM {bytes_text(sympy.Float(self.hbm))})"))
        lines = [f"{k:<12} {v}" for k, v in head]
        lines.append("")
        lines.append(f"{'part':<12} bytes per device")
        lines += [f"{k.replace('_', ' '):<12} {bytes_text(v)}" for k, v in self.parts.items()]
        lines.append(f"{'total':<12} {bytes_text(self.total)}")
        if self.chip is not None:
            fits = {True: "yes", False: "NO", None: "unknown (a size is unbound)"}[self.fits]
            room = "" if self.fits is None else f"; headroom {bytes_text(self.headroom)}"
            lines.append(f"{'fits':<12} {fits}{room}")
        for k, v in self.notes:
            lines.append(f"note: {k}: {v}")
        return "\n".join(lines)


def _param_rows(
    model: ModelProgram, per_device: bool, grads: str, optimizer: Optimizer, train: bool
) -> list[tuple[str, str, Expr, Expr]]:
    """(part, tensor, bytes, count) of the parameters, their gradients and their optimizer state."""
    rows = [
        ("params", v.name, model.bytes_of(v.tensor, per_device=per_device), model.factor(v))
        for v in model.params
    ]
    if not train:
        return rows
    if grads == "param":
        rows += [
            ("grads", v.name, model.bytes_of(v.tensor, per_device=per_device), model.factor(v))
            for v in model.params
        ]
    state = sympy.Rational(optimizer.state_bytes)
    if state:
        for v in model.params:
            count = (
                local_elements(v.tensor, model.mesh, model.sizes)
                if per_device
                else model.elements_of(v.tensor)
            )
            rows.append(("optimizer", v.name, count * state, model.factor(v)))
    return rows


def _rows(
    a: Analysis, per_device: bool, grads: str, optimizer: Optimizer
) -> list[tuple[str, str, Expr, Expr]]:
    m = a.model
    train = a.mode == "train"
    rows = _param_rows(m, per_device, grads, optimizer, train)
    for name in a.saved:
        v = m.values[name]
        rows.append(("activations", name, m.bytes_of(v.tensor, per_device=per_device), m.factor(v)))
    for v in m.kv_cache:
        rows.append(("kv_cache", v.name, m.bytes_of(v.tensor, per_device=per_device), m.factor(v)))
    if per_device:  # the forward's gathered copies the backward keeps (keep_gathered): held like activations
        rows += [("activations", f"kept {name}", b, n) for name, b, n in a.kept()]
    return rows


def _sum(rows: Iterable[tuple[str, str, Expr, Expr]], part: str) -> Expr:
    return sympy.Add(*(b * n for p, _, b, n in rows if p == part)) if rows else Integer(0)


def model_memory(
    analysis: Analysis,
    chip: Chip | str | None = None,
    optimizer: str | Optimizer | None = None,
    grads: str = "param",
) -> MemoryReport:
    """The memory report of an analysed model (see :func:`memory`)."""
    a = analysis
    notes = list(a.notes)
    if grads not in GRADS:
        raise UsageError(f"grads is one of {', '.join(GRADS)}, not {grads!r}")
    opt = optimizer_named(optimizer)
    if a.mode == "train" and optimizer is None:
        notes.append(
            ("optimizer", f"{opt.name} (default: {opt.description}, {opt.state_bytes} bytes per parameter)")
        )
    if a.mode == "infer":
        notes.append(
            (
                "inference",
                "no gradients, optimizer state or saved activations are counted"
                + (f"; --optimizer {opt.name} ignored" if optimizer is not None else ""),
            )
        )
    rows = _rows(a, True, grads, opt)
    transient, gathered = a.transient()
    parts = {p: _sum(rows, p) for p in PARTS if p != "transient"}
    parts["transient"] = transient
    rows += [("transient", name, b, Integer(1)) for name, b in gathered]
    params = sympy.Add(*(a.model.elements_of(v.tensor) * a.model.factor(v) for v in a.model.params))
    return MemoryReport(a, as_chip_text(chip), opt, grads, params, parts, rows, notes)


def memory(
    program: Any,
    mesh: Any = None,
    sizes: Mapping[str, int] | str | None = None,
    hw: Chip | str | None = None,
    optimizer: str | Optimizer | None = None,
    remat: str | Iterable[str] | Remat | None = None,
    grads: str = "param",
    mode: str | None = None,
) -> MemoryReport:
    """Bytes per device by part for ``program`` (text, a Program or a :class:`ModelProgram`) on ``mesh``.

    ``hw``: a chip (preset, TOML file, NAME=VALUE pairs, or a Chip) for the HBM fit; ``optimizer``: a name of
    :data:`shardalg.models.optimizers.OPTIMIZERS` or bytes per parameter (default adam); ``remat``: ``none``,
    ``block``, ``saved`` or names (default: the program's ``saved`` list, else none); ``grads``: ``param`` or
    ``none``; ``mode``: ``train`` or ``infer`` (default: infer when the program declares a KV cache)."""
    model = program if isinstance(program, ModelProgram) else model_program(program, mesh, sizes)
    return model_memory(analyze(model, mode, remat), hw, optimizer, grads)


def param_bytes(
    model: ModelProgram, mode: str, optimizer: str | Optimizer | None = None, grads: str = "param"
) -> Expr:
    """Bytes per device of the parameters, their gradients and optimizer state (training; the parameters
    alone in inference): the part of :func:`model_memory`'s total that needs no plan, a lower bound of it."""
    rows = _param_rows(model, True, grads, optimizer_named(optimizer), mode == "train")
    return sympy.Add(*(b * n for _, _, b, n in rows))


def global_bytes(report: MemoryReport) -> dict[str, Expr]:
    """The model's bytes in all, by part, each tensor once and unsharded (no replicas, no transients): what
    a set of devices must hold between them (:func:`shardalg.models.fit.fewest_devices`)."""
    rows = _rows(report.analysis, False, report.grads, report.optimizer)
    return {p: _sum(rows, p) for p in PARTS if p != "transient"}
