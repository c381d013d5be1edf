"""Chip presets: the numbers a cost formula is evaluated with, each with the source it comes from.

    >>> from shardalg import hardware
    >>> chip = hardware.get("tpu-v5e")
    >>> chip.ici_bandwidth.value, chip.ici_bandwidth.source
    (90000000000.0, 'seed 000 (How To Scale Your Model ch. 3): one-way ICI 4.5e10 B/s per axis, so 9e10 bidirectional')

Numbers are data here and nowhere else: the cost model (:mod:`shardalg.costs.stepcost`) builds formulas over the
positive symbols of :mod:`shardalg.algebra.symbols` (``W_ici``, ``T_min``, ``C``, ``W_hbm``, ``alpha``, ``beta``,
``W_dcn``) and :meth:`Chip.values` maps those symbols to a chip's numbers.

A TPU preset knows its wraparound rule (when a mesh axis of a given length is a ring rather than a line):
v5e and v6e get wraparound links only on an axis of length 16; v4p and v5p on axes made of full cubes of 4.
GPUs sit on an NVLink switch, so every group is all-to-all connected and the alpha-beta model is the default.
A user can define a chip with :class:`Chip` (and :class:`Sourced` numbers) and pass it wherever ``hw=`` is taken.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from shardalg.algebra.symbols import quantity
from shardalg.errors import UsageError

__all__ = ["Sourced", "WrapRule", "Chip", "PRESETS", "get", "names", "as_chip"]

MODELS: tuple[str, ...] = ("ici", "alpha-beta", "alpha-beta-rd")


@dataclass(frozen=True)
class Sourced:
    """A number and where it comes from."""

    value: float
    source: str

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, int | float) or not self.value > 0:
            raise UsageError(f"a hardware number must be positive, not {self.value!r}")
        object.__setattr__(self, "value", float(self.value))


@dataclass(frozen=True)
class WrapRule:
    """When a mesh axis of known length has wraparound links (a ring) rather than being a line.

    ``lengths``: the axis wraps when its length is one of these (v5e, v6e: 16); ``multiple``: the axis
    wraps when its length is a positive multiple of this per physical axis (v4p, v5p: full cubes of 4).
    ``always``: every axis wraps (a switch, or a user's chip). ``source`` says where the rule is stated.
    """

    lengths: tuple[int, ...] = ()
    multiple: int | None = None
    always: bool = False
    source: str = ""

    def wraps(self, size: int, links: int = 1) -> bool:
        if self.always:
            return True
        if size in self.lengths:
            return True
        if self.multiple is not None:
            # an axis standing on `links` physical axes spans size ** (1 / links) chips on each
            per_axis = round(size ** (1 / links))
            return per_axis ** links == size and per_axis % self.multiple == 0
        return False


@dataclass(frozen=True)
class Chip:
    """One accelerator. Rates are bytes/s or FLOP/s; times are seconds.

    ``ici_bandwidth`` is the book's W_ici: bidirectional bandwidth of one link along one mesh axis
    (for GPUs: NVLink bidirectional per GPU); ``hop_latency`` is T_min; ``alpha`` and ``link_bandwidth``
    (one-way, per GPU) are the alpha-beta model's; ``dcn_bandwidth`` is the scale-out bandwidth per chip.
    """

    name: str
    description: str
    flops: Sourced
    hbm_bandwidth: Sourced
    hbm_capacity: Sourced
    ici_bandwidth: Sourced
    hop_latency: Sourced
    model: str = "ici"
    alpha: Sourced | None = None
    link_bandwidth: Sourced | None = None
    dcn_bandwidth: Sourced | None = None
    wrap: WrapRule = field(default_factory=lambda: WrapRule(always=True))

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise UsageError(f"unknown communication model {self.model!r}; known: {', '.join(MODELS)}")

    def numbers(self) -> dict[str, Sourced]:
        """Symbol name -> sourced number, for every number the chip has."""
        table = {
            "C": self.flops,
            "W_hbm": self.hbm_bandwidth,
            "W_ici": self.ici_bandwidth,
            "T_min": self.hop_latency,
            "alpha": self.alpha,
            "beta": self.link_bandwidth,
            "W_dcn": self.dcn_bandwidth,
        }
        return {k: v for k, v in table.items() if v is not None}

    def values(self) -> dict[sympy.Symbol, float]:
        """The substitution map from the cost symbols to this chip's numbers."""
        return {quantity(k): v.value for k, v in self.numbers().items()}

    def wraps(self, size: int, links: int = 1) -> bool:
        return self.wrap.wraps(size, links)

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "description": self.description,
            "model": self.model,
            "hbm_capacity": {"value": self.hbm_capacity.value, "source": self.hbm_capacity.source},
            "numbers": {k: {"value": v.value, "source": v.source} for k, v in self.numbers().items()},
            "wraparound": _wrap_text(self.wrap),
        }

    def __str__(self) -> str:
        rows = [f"{self.name}: {self.description} (default model: {self.model})"]
        for k, v in self.numbers().items():
            rows.append(f"  {k:<6} = {v.value:<10.4g} {v.source}")
        rows.append(f"  HBM    = {self.hbm_capacity.value:<10.4g} bytes; {self.hbm_capacity.source}")
        rows.append(f"  wraparound: {_wrap_text(self.wrap)}")
        return "\n".join(rows)

    def __repr__(self) -> str:
        from shardalg.notation.printing.display import short

        return short("Chip", f"{self.name}: {self.description}, {self.flops.value:.3g} FLOP/s, "
                     f"W_ici {self.ici_bandwidth.value:.3g} B/s, model {self.model}")  # fmt: skip

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        from shardalg.notation.printing.display import pretty_text

        pretty_text(self, p, cycle)

    def _repr_html_(self) -> str:
        return table([self])


def _wrap_text(rule: WrapRule) -> str:
    if rule.always:
        text = "every axis (switch or full ring)"
    elif rule.lengths:
        text = "an axis wraps only at length " + " or ".join(map(str, rule.lengths))
    else:
        text = f"an axis wraps when it spans full cubes of {rule.multiple}"
    return f"{text}; {rule.source}" if rule.source else text


_SEED000 = "How To Scale Your Model, ch. 3"
_SEED002 = "How To Scale Your Model (its reference numbers)"
_SEED003 = "CS349E lecture 4 (the alpha-beta model)"
_T_MIN = Sourced(1e-6, f"{_SEED000}: per-hop ICI overhead 'about 1 us'")
_V5E_WRAP = WrapRule(lengths=(16,), source=f"{_SEED000}: v5e has wraparound only when the axis has size 16")
_CUBE_WRAP = WrapRule(multiple=4, source=f"{_SEED000}: a full 4x4x4 v4p cube has wraparound on every axis")
_SWITCH = WrapRule(always=True, source="NVLink switch: every GPU pair is one hop apart")
_CX7 = Sourced(5e10, "vendor spec sheet: one ConnectX-7 400 Gb/s NIC per GPU (DGX), 5e10 B/s")

# The presets, as data. Seed numbers where the seeds give them; vendor spec sheets otherwise.
PRESETS: dict[str, Chip] = {
    c.name: c
    for c in (
        Chip(
            "tpu-v4p", "Google TPU v4 (4x4x4 cubes, 3D torus)",
            flops=Sourced(2.75e14, "vendor spec sheet: 275 TFLOP/s bf16 per chip"),
            hbm_bandwidth=Sourced(1.2e12, "vendor spec sheet: 1200 GB/s HBM2 per chip"),
            hbm_capacity=Sourced(32 * 2**30, "vendor spec sheet: 32 GiB HBM per chip"),
            ici_bandwidth=Sourced(9e10, f"{_SEED000}, problem 2: v4p bidirectional ICI 9e10 B/s"),
            hop_latency=_T_MIN,
            wrap=_CUBE_WRAP,
        ),
        Chip(
            "tpu-v5e", "Google TPU v5e (16x16 pod, 2D torus)",
            flops=Sourced(1.97e14, "vendor spec sheet: 197 TFLOP/s bf16 per chip"),
            hbm_bandwidth=Sourced(8.1e11, "vendor spec sheet: 819 GB/s HBM2 per chip"),
            hbm_capacity=Sourced(16e9, "vendor spec sheet: 16 GB HBM2 per chip"),
            ici_bandwidth=Sourced(9e10, f"{_SEED000}: one-way ICI 4.5e10 B/s per axis, so 9e10 bidirectional"),
            hop_latency=_T_MIN,
            dcn_bandwidth=Sourced(3.125e9, "vendor spec sheet: 6.4 Tb/s DCN per 256-chip pod = 25 Gb/s per chip"),
            wrap=_V5E_WRAP,
        ),
        Chip(
            "tpu-v5p", "Google TPU v5p (4x4x4 cubes, 3D torus)",
            flops=Sourced(4.59e14, "vendor spec sheet: 459 TFLOP/s bf16 per chip"),
            hbm_bandwidth=Sourced(2.765e12, "vendor spec sheet: 2765 GB/s HBM per chip"),
            hbm_capacity=Sourced(95 * 2**30, "vendor spec sheet: 95 GiB HBM per chip"),
            ici_bandwidth=Sourced(1.8e11, f"{_SEED000} and {_SEED002}: C/W_ici = 2550 with C = 4.59e14"),
            hop_latency=_T_MIN,
            dcn_bandwidth=Sourced(6.25e9, f"vendor spec sheet: 50 Gb/s DCN per chip; {_SEED002}: C/W_dcn = 73,440"),
            wrap=WrapRule(multiple=4, source="like v4p: full 4x4x4 cubes have wraparound"),
        ),
        Chip(
            "tpu-v6e", "Google TPU v6e Trillium (16x16 pod, 2D torus)",
            flops=Sourced(9.18e14, "vendor spec sheet: 918 TFLOP/s bf16 per chip"),
            hbm_bandwidth=Sourced(1.64e12, "vendor spec sheet: 1640 GB/s HBM per chip"),
            hbm_capacity=Sourced(32e9, "vendor spec sheet: 32 GB HBM per chip"),
            ici_bandwidth=Sourced(1.8e11, "vendor spec sheet: 3584 Gb/s ICI per chip over 4 ports; the book's 1.8e11 per link"),
            hop_latency=_T_MIN,
            dcn_bandwidth=Sourced(1.25e10, "vendor spec sheet: 25.6 Tb/s DCN per 256-chip pod = 100 Gb/s per chip"),
            wrap=WrapRule(lengths=(16,), source="like v5e: wraparound only on an axis of size 16"),
        ),
        Chip(
            "h100", "NVIDIA H100 SXM (8 GPUs on NVLink 4 / NVSwitch)",
            flops=Sourced(9.89e14, "vendor spec sheet: 989 TFLOP/s dense bf16 (1979 with sparsity)"),
            hbm_bandwidth=Sourced(3.35e12, "vendor spec sheet: 3.35 TB/s HBM3"),
            hbm_capacity=Sourced(80e9, "vendor spec sheet: 80 GB HBM3"),
            ici_bandwidth=Sourced(9e11, f"{_SEED003}: NVLink 450 GB/s per GPU one way, 900 GB/s bidirectional"),
            hop_latency=Sourced(2e-6, f"{_SEED003}: alpha = 2 us per message (an order-of-magnitude assumption)"),
            model="alpha-beta",
            alpha=Sourced(2e-6, f"{_SEED003}: alpha = 2 us per message (an order-of-magnitude assumption)"),
            link_bandwidth=Sourced(4.5e11, f"{_SEED003}: NVLink 4, 450 GB/s per GPU one way"),
            dcn_bandwidth=_CX7,
            wrap=_SWITCH,
        ),
        Chip(
            "h200", "NVIDIA H200 SXM (8 GPUs on NVLink 4 / NVSwitch)",
            flops=Sourced(9.89e14, "vendor spec sheet: 989 TFLOP/s dense bf16 (same compute as H100)"),
            hbm_bandwidth=Sourced(4.8e12, "vendor spec sheet: 4.8 TB/s HBM3e"),
            hbm_capacity=Sourced(141e9, "vendor spec sheet: 141 GB HBM3e"),
            ici_bandwidth=Sourced(9e11, "vendor spec sheet: NVLink 4, 900 GB/s bidirectional per GPU"),
            hop_latency=Sourced(2e-6, f"assumed equal to H100's alpha ({_SEED003}); same NVLink 4 fabric"),
            model="alpha-beta",
            alpha=Sourced(2e-6, f"assumed equal to H100's alpha ({_SEED003}); same NVLink 4 fabric"),
            link_bandwidth=Sourced(4.5e11, "vendor spec sheet: NVLink 4, 450 GB/s per GPU one way"),
            dcn_bandwidth=_CX7,
            wrap=_SWITCH,
        ),
        Chip(
            "b200", "NVIDIA B200 HGX (8 GPUs on NVLink 5 / NVSwitch)",
            flops=Sourced(2.25e15, "vendor spec sheet (HGX B200): 2.25 PFLOP/s dense bf16 (4.5 with sparsity)"),
            hbm_bandwidth=Sourced(8e12, "vendor spec sheet: 8 TB/s HBM3e"),
            hbm_capacity=Sourced(180e9, "vendor spec sheet: 180 GB HBM3e (HGX B200)"),
            ici_bandwidth=Sourced(1.8e12, "vendor spec sheet: NVLink 5, 1.8 TB/s bidirectional per GPU"),
            hop_latency=Sourced(2e-6, f"assumed equal to H100's alpha ({_SEED003}); no seed number for NVLink 5"),
            model="alpha-beta",
            alpha=Sourced(2e-6, f"assumed equal to H100's alpha ({_SEED003}); no seed number for NVLink 5"),
            link_bandwidth=Sourced(9e11, "vendor spec sheet: NVLink 5, 900 GB/s per GPU one way"),
            dcn_bandwidth=_CX7,
            wrap=_SWITCH,
        ),
    )
}  # fmt: skip


class ChipTable(tuple):
    """Chips, shown as a table in a notebook (``hardware.table()``)."""

    def _repr_html_(self) -> str:
        from shardalg.notation.printing.display import html_table

        keys = ("C", "W_hbm", "W_ici", "T_min", "alpha", "beta", "W_dcn")
        rows = []
        for c in self:
            nums = c.numbers()
            rows.append([c.name, c.description, c.model, *(f"{nums[k].value:.3g}" if k in nums else "" for k in keys),
                         f"{c.hbm_capacity.value:.3g}"])  # fmt: skip
        headers = ["chip", "description", "model", "C (FLOP/s)", "W_hbm (B/s)", "W_ici (B/s)", "T_min (s)",
                   "alpha (s)", "beta (B/s)", "W_dcn (B/s)", "HBM (bytes)"]  # fmt: skip
        return html_table(headers, rows, "hardware presets (shardalg hw show NAME gives each number's source)")


def table(chips: tuple[Chip, ...] | list[Chip] | None = None) -> str:
    """The chips (default: every preset) as an HTML table."""
    return ChipTable(chips if chips is not None else [get(n) for n in names()])._repr_html_()


def names() -> tuple[str, ...]:
    """The preset names, in table order."""
    return tuple(PRESETS)


def get(name: str) -> Chip:
    """The preset called ``name`` (``"tpu-v5e"``); a UsageError lists the known ones."""
    try:
        return PRESETS[name.lower()]
    except (KeyError, AttributeError):
        raise UsageError(f"unknown hardware {name!r}; known: {', '.join(names())}") from None


def as_chip(hw: Chip | str | None) -> Chip | None:
    """Normalize what the API accepts as hardware: a Chip, a preset name, or None (stay symbolic)."""
    if hw is None or isinstance(hw, Chip):
        return hw
    if isinstance(hw, str):
        return get(hw)
    raise UsageError(f"hardware is a Chip or a preset name ({', '.join(names())}), not {hw!r}")
