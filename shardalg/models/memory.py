"""Memory per device by part, from each tensor's sharding, and the fit against a chip's HBM.

    >>> program = "params W\\nIn[B_X, D] * W[D_X, F] -> Out[B_X, F]"
    >>> r = memory(program, mesh="X=4", sizes="B=1024,D=1024,F=4096", hw="tpu-v5p")
    >>> r.parts["params"], r.parts["optimizer"]  # W sharded over X: D*F/4 a device, bf16 (2 B), Adam (8 B)
    (2097152, 8388608)

The sizes are needed: the transients and kept activations are those of each statement's cheapest plan, which
here depends on B, D and F, and no plan is chosen by a made-up size (:func:`memory` raises NeedsSizes).

The parts (each per device, each tensor at its local shape, repeated ``layers`` times unless it is outside
the repeated layer):

``params``       every ``params`` and ``embeddings`` tensor, in its dtype (bf16 when it has none);
``grads``        the gradient of each, in the parameter's dtype and sharding (the backward's target: DESIGN.md
                 section 4); ``grads="none"`` leaves them out (applied as they are made, as the book's
                 "10 bytes per parameter" counts);
``optimizer``    the optimizer's state bytes per parameter (:mod:`.optimizers`), sharded like the parameter;
``activations``  what the backward keeps under the remat policy (:mod:`.analysis`);
``kv_cache``     every ``kvcache`` tensor;
``transient``    the weights one layer gathers and holds while it runs (FSDP), once, not per layer (a copy
                 the backward keeps, ``keep_gathered``, is one buffer: counted with the activations), and under
                 a remat policy the activations the backward makes again for that layer, held beside them
                 while its backward runs (:func:`rerun_held`).

Inference (``mode="infer"``, the default when the program declares a KV cache) counts no gradients, optimizer
state or saved activations. Every default the user did not choose is in ``notes`` and in the output.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import sympy
from sympy import Expr, Integer, Rational

from shardalg.costs.chipspec import as_chip_text
from shardalg.costs.hardware import Chip
from shardalg.errors import UsageError
from shardalg.notation.printing.display import Shown, Table, bytes_both
from shardalg.planning import symbolic

from .analysis import Analysis, Remat, analyze
from .conventions import memory_conventions
from .head import Logits, check_chunks, head_outputs
from .offload import Offload, host_link
from .optimizers import Optimizer
from .precision import Precision
from .program import ModelProgram, model_program
from .quantities import as_json, as_text, bytes_text, local_elements
from .trainstate import GRADS, TrainState
from .unplanned import dtype_width, held_rows, param_rows
from .zero import Zero, check_zero, computed_with, shard_axes, shard_count
from .zerostep import microbatch

__all__ = [
    "MemoryReport",
    "memory",
    "model_memory",
    "memory_with",
    "PARTS",
    "GRADS",
    "RERUN",
    "rerun_held",
]

# the label of a transient row of an activation the backward makes again (:func:`rerun_held`)
RERUN = "rerun "
PARTS: tuple[str, ...] = ("params", "grads", "optimizer", "activations", "kv_cache", "transient")


@dataclass(repr=False)
class MemoryReport(Shown):
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
    choices: TrainState = field(default_factory=TrainState)
    host: dict[str, Expr] = field(default_factory=dict)  # part -> bytes per device kept in host memory
    transfers: list[tuple[str, str, Expr, str]] = field(default_factory=list)  # (part, direction, bytes, why)
    micro: tuple[Analysis, dict] | None = None  # one microbatch's analysis, and the batch's substitution

    @property
    def precision(self) -> Precision:
        return self.choices.recipe

    @property
    def zero(self) -> Zero:
        return self.choices.stage

    @property
    def offload(self) -> Offload:
        return self.choices.place

    @property
    def host_total(self) -> Expr:
        return sympy.Add(*self.host.values()) if self.host else Integer(0)

    def pcie(self) -> dict[str, Any] | None:
        """The PCIe traffic per step each way and its time on the host link (None without offload)."""
        if not self.choices.place:
            return None
        ways = {
            d: sympy.Add(*(b for _, w, b, _ in self.transfers if w == d)) for d in ("to host", "to device")
        }
        bw, source = host_link(self.chip.name if self.chip else None, self.choices.host_link)
        worst = sympy.Max(*ways.values())
        seconds = None if bw is None or worst.free_symbols else float(worst) / bw
        return {"bytes": ways, "bandwidth": bw, "source": source, "seconds": seconds}

    def again(self, analysis: Analysis) -> MemoryReport:
        """The report of ``analysis`` under the same chip and choices (the same defaults stated)."""
        return memory_with(analysis, self.chip, self.choices)

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
            "optimizer": (
                {**self.optimizer.to_json(), "state_bytes_under_precision": as_json(self._state())}
                if self.analysis.mode == "train"
                else None
            ),
            "grads": self.grads if self.analysis.mode == "train" else None,
            **(self.choices.to_json() if self.analysis.mode == "train" else {}),
            "host_bytes": self._host_json(),
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
            "conventions": [{"key": k, "value": v} for k, v in memory_conventions(self)],
        }

    def _state(self) -> Expr:
        return Rational(self.optimizer.state_under(self.precision))

    def _host_json(self) -> dict[str, Any] | None:
        p = self.pcie()
        if p is None:
            return None
        return {
            **{k: as_json(v) for k, v in self.host.items()},
            "total": as_json(self.host_total),
            "pcie_bytes_per_step": {k.replace(" ", "_"): as_json(v) for k, v in p["bytes"].items()},
            "pcie_transfers": [
                {"part": part, "direction": d, "bytes": as_json(b), "why": why}
                for part, d, b, why in self.transfers
            ],
            "host_link_bytes_per_s": p["bandwidth"],
            "host_link_source": p["source"],
            "pcie_seconds": p["seconds"],
        }

    def _mesh_text(self) -> str:
        return ", ".join(f"{a.name}={a.size if a.size is not None else a.name}" for a in self.model.mesh.axes)

    def _fit_text(self) -> str:
        if self.chip is None:
            return "no chip"
        if self.fits is None:
            return f"HBM {bytes_both(self.hbm)}; fits unknown (a size is unbound)"
        verdict = "fits" if self.fits else "does NOT fit"
        return f"{verdict} in HBM {bytes_both(self.hbm)} on {self.chip.name}"

    def summary(self) -> str:
        """``70,553,706,496 parameters on X=64: 21.8 GB (20.3 GiB) per device, fits in HBM 96 GB ...``."""
        return (
            f"{as_text(self.params)} parameters on {self._mesh_text()} ({self.analysis.mode}): "
            f"{_amount(self.total)} per device, {self._fit_text()}"
        )

    def table(self) -> Table:
        """Bytes per device by part, the total and the fit, in bytes and in GB and GiB."""
        rows = [(k.replace("_", " "), as_text(v), _both(v)) for k, v in self.parts.items()]
        rows.append(("total", as_text(self.total), _both(self.total)))
        if self.chip is not None:
            rows.append((f"HBM ({self.chip.name})", as_text(sympy.Float(self.hbm)), bytes_both(self.hbm)))
            if self.headroom is not None and not self.headroom.free_symbols:
                rows.append(("headroom", as_text(self.headroom), _both(self.headroom)))
        caption = (
            f"memory per device: {as_text(self.params)} parameters on {self._mesh_text()}, "
            f"{self.analysis.mode}; {self._fit_text()}"
        )
        return Table(
            ("part", "bytes per device", "GB (GiB)"),
            tuple(rows),
            caption,
            notes=tuple(f"note: {k}: {v}" for k, v in self.notes),
        )

    def __str__(self) -> str:
        m = self.model
        head = [
            (
                "parameters",
                f"{as_text(self.params)} ({as_text(m.layers)} layer{'' if m.layers == 1 else 's'})",
            ),
            ("mesh", f"{self._mesh_text()} ({as_text(m.devices)} device{'' if m.devices == 1 else 's'})"),
            ("mode", self.analysis.mode),
        ]
        if self.analysis.mode == "train":
            head.append(("optimizer", f"{self.optimizer.name} ({self.optimizer.describe(self.precision)})"))
            head.append(("precision", f"{self.precision.name} ({self.precision.describe()})"))
            head.append(("zero", self.zero.describe()))
            if self.offload:
                head.append(("offload", self.offload.describe()))
            if self.choices.micro > 1:
                head.append(("microbatches", f"{self.choices.micro} per step"))
            if self.choices.head.chosen:
                head.append(("logits", self.choices.head.describe()))
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
        lines += self._host_lines()
        for k, v in self.notes:
            lines.append(f"note: {k}: {v}")
        for k, v in memory_conventions(self):
            lines.append(f"convention: {k}: {v}")
        return "\n".join(lines)

    def _host_lines(self) -> list[str]:
        p = self.pcie()
        if p is None:
            return []
        lines = ["", f"{'host part':<12} bytes per device in host memory"]
        lines += [f"{k:<12} {bytes_text(v)}" for k, v in self.host.items()]
        lines.append(f"{'host total':<12} {bytes_text(self.host_total)}")
        for part, d, b, why in self.transfers:
            lines.append(f"{'pcie':<12} {part} {d}: {bytes_text(b)} ({why})")
        link = "unknown" if p["bandwidth"] is None else f"{p['bandwidth']:.4g} bytes/s each way"
        time = "" if p["seconds"] is None else f": {p['seconds']:.4g} s per step"
        lines.append(f"{'pcie time':<12} the larger direction over the host link, {link}{time}")
        lines.append(f"note: host link: {p['source']}")
        return lines


def _both(x: Expr) -> str:
    """GB and GiB of a byte count; a formula as ``-`` (its bytes are in the column beside)."""
    value = as_json(x)
    return bytes_both(value) if isinstance(value, int | float) else "-"


def _amount(x: Expr) -> str:
    """GB and GiB of a byte count; a formula with ``bytes``."""
    value = as_json(x)
    return bytes_both(value) if isinstance(value, int | float) else f"{value} bytes"


def _rows(a: Analysis, per_device: bool = True) -> list[tuple[str, str, Expr, Expr]]:
    """(part, tensor, bytes, count) of the saved activations and the KV cache."""
    rows = held_rows(a.model, a.saved, per_device)
    if per_device:  # the forward's gathered copies the backward keeps (keep_gathered): held like activations
        rows += [("activations", f"kept {name}", b, n) for name, b, n in a.kept()]
        rows += [("activations", label, b, n) for label, b, n in a.statistics()]  # norms', softmax's rows
    return rows


def _kept_head(a: Analysis, name: str, per_device: bool, per_micro: Mapping) -> tuple[str, str, Expr, Expr]:
    """The row of a head's logits ``--logits kept`` keeps with the activations (the remat policy would not)."""
    m = a.model
    return (
        "activations",
        name,
        m.bytes_of(m.values[name].tensor, per_device=per_device).subs(per_micro),
        Integer(1),
    )


def _sum(rows: Iterable[tuple[str, str, Expr, Expr]], part: str) -> Expr:
    return sympy.Add(*(b * n for p, _, b, n in rows if p == part))


def _heads(
    a: Analysis, c: TrainState, notes: list[tuple[str, str]]
) -> tuple[TrainState, tuple[str, ...], tuple[str, ...]]:
    """The state with the head's logits' policy in effect: as ``--logits`` says, else as the remat policy does
    (kept when it keeps them, recomputed when it makes them again; stated); the logits not kept (held as a
    transient while the head runs instead), and those kept that the remat policy would make again."""
    names = head_outputs(a.model) if a.mode == "train" else ()
    if not names:
        return c, (), ()
    again = tuple(n for n in names if n not in a.saved)
    if c.head.chosen:
        return c, (() if c.head.policy == "kept" else names), (again if c.head.policy == "kept" else ())
    head = Logits("recomputed" if again else "kept", chosen=False)
    notes.append(
        (
            "logits",
            f"{head.policy} (default: as the remat policy, {a.remat.describe()}: {', '.join(names)} "
            f"{head.describe()})",
        )
    )
    return replace(c, logits=head), again, ()


def _transient(
    a: Analysis, extra: list[tuple[str, Expr, bool]], width: Mapping[str, Expr]
) -> tuple[Expr, list[tuple[str, Expr]]]:
    """What one layer holds while it runs: the plans' gathered weights and ``extra`` (ZeRO-3's and offload's
    fetches of parameters the plans do not gather, the head's logits, the activations a remat policy makes
    again), the larger of the repeated layer and the part outside;
    ``width`` rescales a parameter the recipe counts in another dtype than the plans (its ratio)."""
    have = {name for name, _, _ in a.gathered()}
    groups: dict[bool, dict[str, Expr]] = {False: {}, True: {}}
    for name, step, once in a.gathered():
        size = a.model.bytes_of(step.output) * width.get(name, 1)
        held = groups[once].get(name)
        groups[once][name] = size if held is None else sympy.Max(held, size)
    for name, size, once in extra:
        if name not in have:
            groups[once][name] = size
    sums = {once: sympy.Add(*g.values()) for once, g in groups.items()}
    if not groups[True] and not groups[False]:
        return Integer(0), []
    total = sympy.Max(sums[False], sums[True]) if groups[True] and groups[False] else sums[bool(groups[True])]
    return total, [(n, b) for g in groups.values() for n, b in g.items()]


def rerun_held(a: Analysis) -> list[tuple[str, Expr, bool]]:
    """The activations the backward makes again under the remat policy, held while the rerun part's backward
    runs (beside that part's gathered weights): what the backward reads that the policy does not keep, but the
    head's logits (their own policy holds them) and a fused core's scores (on chip): (``rerun NAME``, bytes per
    device of one copy, outside the repeated layer). One layer's at a time, so counted once in the transient:
    under ``block`` a layer's rerun holds what ``none`` would keep of that layer."""
    if not a.recomputed:
        return []
    m = a.model
    skip = set(a.saved) | set(a.on_chip) | set(head_outputs(m))
    return [
        (f"{RERUN}{n}", m.bytes_of(m.kept_tensor(n)), m.values[n].once) for n in a.needed if n not in skip
    ]


def memory_with(analysis: Analysis, chip: Chip | None, state: TrainState, **override: Any) -> MemoryReport:
    """``analysis``'s memory under the choices of ``state`` (its optimizer, gradients, precision, ZeRO, offload,
    microbatches, host link, logits), but those named in ``override``."""
    kw: dict[str, Any] = {
        name: getattr(state, name)
        for name in ("precision", "zero", "offload", "microbatches", "host_link", "logits")
    }
    kw.update(override)
    return model_memory(analysis, chip, state.optimizer, state.grads, **kw)


def model_memory(
    analysis: Analysis,
    chip: Chip | str | None = None,
    optimizer: str | Optimizer | None = None,
    grads: str = "param",
    *,
    precision: str | Precision | None = None,
    zero: int | str | Zero | None = None,
    offload: str | Offload | None = None,
    microbatches: int | None = None,
    host_link: float | None = None,
    logits: str | None = None,
    strict: bool = True,
) -> MemoryReport:
    """The memory report of an analysed model (see :func:`memory`); ``strict`` False (a search's
    candidates): a program without data axes is counted without ZeRO instead of refused."""
    a = analysis
    c = TrainState(optimizer, grads, precision, zero, offload, microbatches, host_link, logits)
    notes = list(a.notes)
    if not a.model.params:  # parameters 0 is the program's lack of a declaration, not a small model
        notes.append(
            (
                "params",
                "0: no tensor is declared a parameter ('params W, ...' or 'embeddings E'), so none is counted",
            )
        )
    train = a.mode == "train"
    if a.mode == "infer":
        given = [(k, c.opt.name if k == "optimizer" else v) for k, v in c.training_only() if v is not None]
        ignored = [f"--{k} {v}" for k, v in given]
        notes.append(
            (
                "inference",
                "no gradients, optimizer state or saved activations are counted"
                + (f"; {', '.join(ignored)} ignored" if ignored else ""),
            )
        )
        if c.place:
            raise UsageError("--offload is counted for training steps; the step here is inference")
    else:
        notes += c.default_notes()
        notes += check_zero(a.model, c.stage, require_axes=strict)
    micro, per_micro = microbatch(a, c.micro, notes) if train else (a, {})
    rows = param_rows(a.model, True, c, train)
    c, heads, also = _heads(a, c, notes)
    check_chunks(micro.model, c.head, heads, c.micro > 1)
    rows += [
        (p, n, b.subs(per_micro), k) for p, n, b, k in _rows(micro) if p == "activations" and n not in heads
    ]
    rows += [_kept_head(micro, n, True, per_micro) for n in also]
    rows += [r for r in _rows(a) if r[0] == "kv_cache"]
    read = computed_with(a.model)  # what ZeRO-3 gathers (an offload fetches): the set the step's time gathers
    m = a.model
    ratio = {  # a parameter the recipe counts in another dtype than it declares (fp8: 1 byte, not bf16's 2)
        v.name: dtype_width(c.recipe.param_dtype(v.tensor.dtype)) / dtype_width(v.tensor.dtype)
        for v in m.params
        if train and c.recipe.param_dtype(v.tensor.dtype) != v.tensor.dtype
    }
    ratio = {k: r for k, r in ratio.items() if r != 1}
    fetched = [
        (v.name, m.bytes_of(v.tensor) * ratio.get(v.name, 1), v.once)
        for v in m.params
        if train
        and v.name in read
        and (c.stage.shards("params") and shard_axes(m, v) or "params" in c.place.parts)
    ]
    held = [(n, micro.model.bytes_of(micro.model.values[n].tensor) / c.head.chunks, True) for n in heads]
    held += rerun_held(micro)
    transient, gathered = _transient(micro, fetched + held, ratio)
    transient = transient.subs(per_micro)
    parts = {p: _sum(rows, p) for p in PARTS if p != "transient"}
    parts["transient"] = transient
    rows += [("transient", name, b.subs(per_micro), Integer(1)) for name, b in gathered]
    host = {p: parts[p] for p in c.place.parts}
    for p in host:
        parts[p] = Integer(0)
    params = sympy.Add(*(a.model.elements_of(v.tensor) * a.model.factor(v) for v in a.model.params))
    report = MemoryReport(
        a, as_chip_text(chip), c.opt, grads, params, parts, rows, notes, c, host, micro=(micro, per_micro)
    )
    report.transfers = _transfers(report)
    return report


def _transfers(report: MemoryReport) -> list[tuple[str, str, Expr, str]]:
    """(part, direction, bytes per step, why) of each PCIe transfer the offload makes: the offloaded part's
    share on this device (the optimizer's shard for the update, the parameters' for the passes)."""
    c, m = report.choices, report.model
    out: list[tuple[str, str, Expr, str]] = []
    for what, part, direction, times, why in c.place.transfers(
        c.micro if report.analysis.mode == "train" else 1
    ):
        total = Integer(0)
        for v in m.params:
            share = local_elements(v.tensor, m.mesh, m.sizes) / shard_count(m, v, c.stage, what)
            dtype = c.recipe.param_dtype(v.tensor.dtype)
            width = dtype_width(c.recipe.grad_dtype(dtype) if part == "grads" else dtype)
            total += share * width * m.factor(v)
        out.append((part, direction, times * total, why))
    return out


def memory(
    program: Any,
    mesh: Any = None,
    sizes: Mapping[str, int] | str | None = None,
    hw: Chip | str | None = None,
    optimizer: str | Optimizer | None = None,
    remat: str | Iterable[str] | Remat | None = None,
    grads: str = "param",
    mode: str | None = None,
    keep_gathered: bool = False,
    **choices: Any,
) -> MemoryReport:
    """Bytes per device by part for ``program`` (text, a Program or a :class:`ModelProgram`) on ``mesh``.

    ``hw``: a chip (preset, TOML file, NAME=VALUE pairs, or a Chip) for the HBM fit; ``optimizer``: a name of
    :data:`shardalg.models.optimizers.OPTIMIZERS` or bytes per parameter (default adam); ``remat``: ``none``,
    ``block``, ``saved`` or names (default: the program's ``saved`` list, else none); ``grads``: ``param`` or
    ``none``; ``mode``: ``train`` or ``infer`` (default: infer when the program declares a KV cache).
    ``choices``: ``precision`` (a recipe of :mod:`.precision`, default book), ``zero`` (stage 0-3, default 0:
    as written), ``offload`` (``optimizer``, ``params``), ``microbatches`` (default 1), ``host_link`` (bytes/s
    per direction). ``keep_gathered``: training's backward keeps the forward's gathered copies (counted with
    the activations) instead of gathering them again.

    No plan is chosen by a made-up size: where the cheapest plan of a statement (a transient, a kept
    activation) depends on sizes not given, :class:`~shardalg.planning.symbolic.NeedsSizes` is raised, as
    ``shardalg memory`` asks for them (its ``choice`` says which plan is the cheapest where)."""
    with symbolic.strict():
        model = program if isinstance(program, ModelProgram) else model_program(program, mesh, sizes)
        return model_memory(analyze(model, mode, remat, keep_gathered), hw, optimizer, grads, **choices)


def global_bytes(report: MemoryReport) -> dict[str, Expr]:
    """The model's bytes in all, by part, each tensor once and unsharded (no replicas, no transients): what
    a set of devices must hold between them (:func:`shardalg.models.fit.fewest_devices`). Offloaded parts
    are in host memory and not counted."""
    a, c = report.analysis, report.choices
    micro, per_micro = report.micro or (a, {})
    rows = param_rows(a.model, False, c, a.mode == "train")
    train = a.mode == "train"
    heads = head_outputs(a.model) if train else ()
    dropped = () if c.head.policy == "kept" else heads
    rows += [
        (p, n, b.subs(per_micro), k)
        for p, n, b, k in _rows(micro, False)
        if p == "activations" and n not in dropped
    ]
    if c.head.policy == "kept":  # kept by --logits although the remat policy makes them again
        rows += [_kept_head(micro, n, False, per_micro) for n in heads if n not in a.saved]
    rows += [r for r in _rows(a, False) if r[0] == "kv_cache"]
    return {p: Integer(0) if p in c.place.parts else _sum(rows, p) for p in PARTS if p != "transient"}
