"""Chip presets: the numbers a cost formula is evaluated with, each with the source it comes from.

    >>> from shardalg import hardware
    >>> chip = hardware.get("tpu-v5e")
    >>> chip.ici_bandwidth.value
    90000000000.0
    >>> "scaling-book/tpus" in chip.ici_bandwidth.source  # the book's TPU table, quoted
    True

Numbers are data here and nowhere else: the cost model (:mod:`shardalg.costs.stepcost`) builds formulas over the
positive symbols of :mod:`shardalg.algebra.symbols` (``W_ici``, ``T_min``, ``C``, ``W_hbm``, ``alpha``, ``beta``,
``W_dcn``) and :meth:`Chip.values` maps those symbols to a chip's numbers.

A TPU preset knows its wraparound rule (when a mesh axis of a given length is a ring rather than a line):
v5e and v6e get wraparound links only on an axis of length 16; v4p and v5p on an axis whose every physical
side is a multiple of 4 (full cubes), so a whole v5p pod (16x20x28) wraps however it is written.
GPUs sit on an NVLink switch, so every group is all-to-all connected and the alpha-beta model is the default.
A GPU preset also knows its NVLink domain, ``node`` (8 GPUs in an HGX/DGX node): a flat mesh larger than it is
placed into nodes by :mod:`shardalg.costs.nodes` (``X=64`` on h100 is priced as ``X=64:node8``). TPUs have none.
A user can define a chip with :class:`Chip` (and :class:`Sourced` numbers) and pass it wherever ``hw=`` is taken.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from shardalg.algebra.symbols import quantity
from shardalg.errors import UsageError, closest
from shardalg.lazy import hashed_once
from shardalg.notation.printing.display import html_table, pretty_text, short

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
        """Whether an axis of ``size`` chips standing on ``links`` physical axes is a ring: its chips form a
        ``a_1 x ... x a_links`` block whose every side wraps (each side in ``lengths``, or a multiple of
        ``multiple``). Sides need not be equal: a v5p pod written as one axis of 8960 = 16·20·28 chips on 3
        links wraps, as its 3D torus does; so does ``multiple ** links`` dividing ``size``."""
        if self.always:
            return True
        if self.lengths and _product_of(size, links, self.lengths):
            return True
        return self.multiple is not None and size % self.multiple**links == 0


def _product_of(size: int, k: int, sides: tuple[int, ...]) -> bool:
    """Whether ``size`` is a product of ``k`` numbers from ``sides`` (repeats allowed)."""
    if k == 1:
        return size in sides
    return any(size % s == 0 and _product_of(size // s, k - 1, sides) for s in sides if s > 1)


@hashed_once
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
    mfu: Sourced | None = None  # a measured fraction of peak FLOP/s, with its source
    hbm_efficiency: Sourced | None = None  # a measured fraction of peak HBM bandwidth
    network_efficiency: Sourced | None = None  # a measured fraction of peak network bandwidth
    node: Sourced | None = None  # devices per NVLink domain (a GPU node); None for a TPU

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise UsageError(f"unknown communication model {self.model!r}; known: {', '.join(MODELS)}")
        if self.node is not None and not self.node.value.is_integer():
            raise UsageError(f"the chip's node is a whole number of devices, not {self.node.value:g}")
        for key in ("mfu", "hbm_efficiency", "network_efficiency"):
            e = getattr(self, key)
            if e is not None and not e.value <= 1:
                raise UsageError(f"the chip's {key} is a fraction of peak in (0, 1], not {e.value:g}")

    def efficiencies(self) -> dict[str, Sourced]:
        """The measured efficiencies the chip carries (MFU, HBM, network), each with its source."""
        table = {
            "mfu": self.mfu,
            "hbm_efficiency": self.hbm_efficiency,
            "network_efficiency": self.network_efficiency,
        }
        return {k: v for k, v in table.items() if v is not None}

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

    @property
    def devices_per_node(self) -> int | None:
        """The devices in one NVLink domain (8 for an H100 node), or None (a TPU, or a chip that says none)."""
        return None if self.node is None else int(self.node.value)

    def to_json(self) -> dict[str, object]:
        return (
            {
                "name": self.name,
                "description": self.description,
                "model": self.model,
                "hbm_capacity": {"value": self.hbm_capacity.value, "source": self.hbm_capacity.source},
                "numbers": {k: {"value": v.value, "source": v.source} for k, v in self.numbers().items()},
                "wraparound": _wrap_text(self.wrap),
            }
            | (
                {"node": {"value": self.devices_per_node, "source": self.node.source}}
                if self.node is not None
                else {}
            )
            | (
                {
                    "efficiencies": {
                        k: {"value": v.value, "source": v.source} for k, v in self.efficiencies().items()
                    }
                }
                if self.efficiencies()
                else {}
            )
        )

    def __str__(self) -> str:
        rows = [f"{self.name}: {self.description} (default model: {self.model})"]
        for k, v in self.numbers().items():
            rows.append(f"  {k:<6} = {v.value:<10.4g} {v.source}")
        rows.append(f"  HBM    = {self.hbm_capacity.value:<10.4g} bytes; {self.hbm_capacity.source}")
        rows.append(f"  wraparound: {_wrap_text(self.wrap)}")
        if self.node is not None:
            rows.append(
                f"  node   = {self.devices_per_node:<10} devices per NVLink domain; {self.node.source}"
            )
        for k, v in self.efficiencies().items():
            rows.append(f"  {k} = {v.value:g} of peak (measured); {v.source}")
        return "\n".join(rows)

    def __repr__(self) -> str:
        return short(
            "Chip",
            f"{self.name}: {self.description}, {self.flops.value:.3g} FLOP/s, "
            f"W_ici {self.ici_bandwidth.value:.3g} B/s, model {self.model}",
        )

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        pretty_text(self, p, cycle)

    def _repr_html_(self) -> str:
        return table([self])


def _wrap_text(rule: WrapRule) -> str:
    if rule.always:
        text = "every axis (switch or full ring)"
    elif rule.lengths:
        text = "an axis wraps only when each physical axis under it has length " + " or ".join(
            map(str, rule.lengths)
        )
    else:
        text = f"an axis wraps when each physical axis under it is a multiple of {rule.multiple} (full cubes)"
    return f"{text}; {rule.source}" if rule.source else text


_SEED000 = "How To Scale Your Model, ch. 3"
_SEED002 = "How To Scale Your Model (its reference numbers)"
_SEED003 = "CS349E lecture 4 (the alpha-beta model)"
# Where the numbers come from. TPU presets use the book's chapter 2 table (the book's worked problems and the
# seeds use these numbers); GPU presets use NVIDIA's datasheets. Where the other source says otherwise, the
# source text quotes it too, and marks which one the preset uses: "[used]".
_BOOK_TPU = "How To Scale Your Model ch. 2 'How to Think About TPUs', TPU specs table (https://jax-ml.github.io/scaling-book/tpus/)"
_BOOK_GPU = "How To Scale Your Model ch. 12 'How to Think About GPUs', GPU specs table (https://jax-ml.github.io/scaling-book/gpus/)"
_GC = "Google Cloud TPU {v} docs (https://cloud.google.com/tpu/docs/{v})"
_NV = "NVIDIA {what} datasheet ({url})"
_H100_URL = "https://www.nvidia.com/en-us/data-center/h100/"
_H200_URL = "https://www.nvidia.com/en-us/data-center/h200/"
_B200_URL = "https://www.nvidia.com/en-us/data-center/dgx-b200/"
_BOOK_USED = "not used: the preset follows the book, whose worked numbers use it"
_VENDOR_USED = "not used: the preset follows the datasheet"


def _book(quote: str, vendor: str = "", vendor_quote: str = "", note: str = "") -> str:
    """A TPU number from the book's table, with Google's figure when it differs (or agrees)."""
    text = f"{_BOOK_TPU}: '{quote}' [used]"
    if vendor_quote:
        text += f"; {vendor}: '{vendor_quote}'" + (f" [{note}]" if note else " (the same number)")
    return text


def _nvidia(what: str, url: str, quote: str, derived: str = "", book: str = "") -> str:
    """A GPU number from NVIDIA's datasheet, with how it is derived and the book's figure where it differs."""
    text = f"{_NV.format(what=what, url=url)}: '{quote}' [used]" + (f" {derived}" if derived else "")
    return text + (f"; {_BOOK_GPU}: '{book}' [{_VENDOR_USED}]" if book else "")


_T_MIN = Sourced(1e-6, f"{_BOOK_TPU} and {_SEED000}: per-hop ICI latency 'about 1 us' [used]")
_V5E_WRAP = WrapRule(
    lengths=(16,),
    source=f"{_BOOK_TPU}: 'TPU v5e and Trillium pods consist of a single 16x16 2D torus with wraparounds along any "
    f"axis of size 16'; {_SEED000}: v5e has wraparound only when the axis has size 16",
)
_CUBE_WRAP = WrapRule(
    multiple=4,
    source=f"{_BOOK_TPU}: 'Any multiple of a full cube (e.g. 4x4x4 or 4x4x8) will have wraparounds', a wraparound "
    "on training chips (v*p) 'when we have an axis which is a multiple of 4'; the v4p superpod is 16x16x16, the "
    "v5p pod 16x20x28 (8960 chips), a 3D torus that wraps at its full size",
)
_SWITCH = WrapRule(always=True, source="NVLink switch: every GPU pair is one hop apart")
_CX7 = "one single-port ConnectX-7 per GPU, '400Gb/s' = 5e10 bytes/s"
_NODE_BOOK = (
    f"{_BOOK_GPU}: a node is 8 GPUs joined all-to-all by NVSwitches; beyond it, the scale-out network"
)

# The presets, as data: a test per number checks value, quote and source (tests/costs/test_presets.py).
PRESETS: dict[str, Chip] = {
    c.name: c
    for c in (
        Chip(
            "tpu-v4p",
            "Google TPU v4 (4x4x4 cubes, 3D torus)",
            flops=Sourced(2.75e14, _book("2.75e14", _GC.format(v="v4"), "275 teraflops (bf16 or int8)")),
            hbm_bandwidth=Sourced(1.2e12, _book("1.2e12", _GC.format(v="v4"), "32 GiB, 1200 GBps")),
            hbm_capacity=Sourced(32e9, _book("32GB", _GC.format(v="v4"), "32 GiB, 1200 GBps", _BOOK_USED)),
            ici_bandwidth=Sourced(
                9e10, _book("9e10") + f" bidirectional per link; {_SEED000}, problem 2: 9e10"
            ),
            hop_latency=_T_MIN,
            wrap=_CUBE_WRAP,
        ),
        Chip(
            "tpu-v5e",
            "Google TPU v5e (16x16 pod, 2D torus)",
            flops=Sourced(1.97e14, _book("1.97e14", _GC.format(v="v5e"), "197 TFLOPs")),
            hbm_bandwidth=Sourced(
                8.2e11,
                _book("8.2e11", _GC.format(v="v5e"), "819 GBps", _BOOK_USED)
                + " (the book's current table; its earlier table printed '8.1e11' [not used: revised by the"
                " book to 8.2e11, the preset's figure until then])",
            ),
            hbm_capacity=Sourced(16e9, _book("16GB", _GC.format(v="v5e"), "16 GiB", _BOOK_USED)),
            ici_bandwidth=Sourced(
                9e10,
                _book(
                    "9e10",
                    _GC.format(v="v5e"),
                    "400 GBps",
                    "per chip over 4 ports, 1e11 a port: " + _BOOK_USED,
                )
                + f"; {_SEED000}: one-way ICI '4.5e10' per axis, so 9e10 bidirectional",
            ),
            hop_latency=_T_MIN,
            dcn_bandwidth=Sourced(
                3.125e9,
                _book(
                    "3.125e9",
                    _GC.format(v="v5e"),
                    "6.4 Tbps",
                    "per 256-chip pod = 25 Gb/s = 3.125e9 bytes/s a chip: the same",
                ),
            ),
            wrap=_V5E_WRAP,
        ),
        Chip(
            "tpu-v5p",
            "Google TPU v5p (4x4x4 cubes, 3D torus; pod 16x20x28)",
            flops=Sourced(4.59e14, _book("4.59e14", _GC.format(v="v5p"), "459")),
            hbm_bandwidth=Sourced(2.8e12, _book("2.8e12", _GC.format(v="v5p"), "2765 GBps", _BOOK_USED)),
            hbm_capacity=Sourced(96e9, _book("96GB", _GC.format(v="v5p"), "95 GiB", _BOOK_USED)),
            ici_bandwidth=Sourced(
                1.8e11,
                _book("1.8e11", _GC.format(v="v5p"), "1200 GBps", "per chip over 6 ports: " + _BOOK_USED)
                + f"; {_SEED002}: C/W_ici = 2550 with C = 4.59e14",
            ),
            hop_latency=_T_MIN,
            dcn_bandwidth=Sourced(
                6.25e9,
                _book("6.25e9", _GC.format(v="v5p"), "50 Gbps", "per chip = 6.25e9 bytes/s: the same")
                + f"; {_SEED002}: C/W_dcn = 73,440",
            ),
            wrap=_CUBE_WRAP,
        ),
        Chip(
            "tpu-v6e",
            "Google TPU v6e Trillium (16x16 pod, 2D torus)",
            flops=Sourced(9.2e14, _book("9.20e14", _GC.format(v="v6e"), "918 TFLOPs", _BOOK_USED)),
            hbm_bandwidth=Sourced(1.6e12, _book("1.6e12", _GC.format(v="v6e"), "1638 GBps", _BOOK_USED)),
            hbm_capacity=Sourced(32e9, _book("32GB", _GC.format(v="v6e"), "32 GB")),
            ici_bandwidth=Sourced(
                1.8e11,
                _book(
                    "1.8e11",
                    _GC.format(v="v6e"),
                    "800 GBps",
                    "per chip over 4 ports, 2e11 a port: " + _BOOK_USED,
                ),
            ),
            hop_latency=_T_MIN,
            dcn_bandwidth=Sourced(1.25e10, _book("12.5e9") + " DCN per TPU"),
            wrap=_V5E_WRAP,
        ),
        Chip(
            "h100",
            "NVIDIA H100 SXM (8 GPUs on NVLink 4 / NVSwitch)",
            flops=Sourced(
                9.895e14,
                _nvidia(
                    "H100",
                    _H100_URL,
                    "BFLOAT16 Tensor Core 1,979 teraFLOPS",
                    "with sparsity, half of it dense: 989.5e12",
                    "9.9e14",
                ),
            ),
            hbm_bandwidth=Sourced(
                3.35e12,
                _nvidia("H100", _H100_URL, "GPU Memory Bandwidth 3.35TB/s", "", "3.4e12")
                + f"; {_SEED000} also uses 3.4e12",
            ),
            hbm_capacity=Sourced(
                80e9, _nvidia("H100", _H100_URL, "GPU Memory 80GB") + f"; {_BOOK_GPU}: '80GB'"
            ),
            ici_bandwidth=Sourced(
                9e11,
                _nvidia("H100", _H100_URL, "NVIDIA NVLink: 900GB/s", "bidirectional per GPU")
                + f"; {_SEED003}: NVLink 450 GB/s per GPU one way",
            ),
            hop_latency=Sourced(
                2e-6, f"{_SEED003}: alpha = 2 us per message (an order-of-magnitude assumption)"
            ),
            model="alpha-beta",
            alpha=Sourced(2e-6, f"{_SEED003}: alpha = 2 us per message (an order-of-magnitude assumption)"),
            link_bandwidth=Sourced(
                4.5e11, f"{_SEED003}: NVLink 4, '450 GB/s' per GPU one way (half of the datasheet's 900GB/s)"
            ),
            dcn_bandwidth=Sourced(
                5e10,
                _nvidia("DGX H100", "https://www.nvidia.com/en-us/data-center/dgx-h100/", "400Gb/s", _CX7),
            ),
            wrap=_SWITCH,
            node=Sourced(
                8,
                _nvidia(
                    "DGX H100",
                    "https://www.nvidia.com/en-us/data-center/dgx-h100/",
                    "8x NVIDIA H100 Tensor Core GPUs",
                    "on 4 NVSwitches: one NVLink domain of 8",
                )
                + f"; {_NODE_BOOK}",
            ),
        ),
        Chip(
            "h200",
            "NVIDIA H200 SXM (8 GPUs on NVLink 4 / NVSwitch)",
            flops=Sourced(
                9.895e14,
                _nvidia(
                    "H200",
                    _H200_URL,
                    "BFLOAT16 Tensor Core 1,979 TFLOPS",
                    "with sparsity, half of it dense: 989.5e12",
                    "9.9e14",
                ),
            ),
            hbm_bandwidth=Sourced(
                4.8e12,
                _nvidia("H200", _H200_URL, "GPU Memory Bandwidth 4.8TB/s") + f"; {_BOOK_GPU}: '4.8e12'",
            ),
            hbm_capacity=Sourced(
                141e9, _nvidia("H200", _H200_URL, "GPU Memory 141GB") + f"; {_BOOK_GPU}: '141GB'"
            ),
            ici_bandwidth=Sourced(
                9e11, _nvidia("H200", _H200_URL, "NVIDIA NVLink: 900GB/s", "bidirectional per GPU")
            ),
            hop_latency=Sourced(2e-6, f"assumed equal to H100's alpha ({_SEED003}); same NVLink 4 fabric"),
            model="alpha-beta",
            alpha=Sourced(2e-6, f"assumed equal to H100's alpha ({_SEED003}); same NVLink 4 fabric"),
            link_bandwidth=Sourced(
                4.5e11, _nvidia("H200", _H200_URL, "NVIDIA NVLink: 900GB/s", "bidirectional, 450e9 one way")
            ),
            dcn_bandwidth=Sourced(
                5e10,
                _nvidia("DGX H200", "https://www.nvidia.com/en-us/data-center/dgx-h200/", "400Gb/s", _CX7),
            ),
            wrap=_SWITCH,
            node=Sourced(
                8,
                _nvidia(
                    "DGX H200",
                    "https://www.nvidia.com/en-us/data-center/dgx-h200/",
                    "8x NVIDIA H200 Tensor Core GPUs",
                    "on 4 NVSwitches: one NVLink domain of 8",
                ),
            ),
        ),
        Chip(
            "b200",
            "NVIDIA B200 HGX (8 GPUs on NVLink 5 / NVSwitch)",
            flops=Sourced(
                2.25e15,
                _nvidia(
                    "HGX B200",
                    "https://www.nvidia.com/en-us/data-center/hgx/",
                    "FP16/BF16 Tensor Core 36 PFLOPS",
                    "for 8 GPUs with sparsity: 2.25e15 dense a GPU",
                    "2.3e15",
                ),
            ),
            hbm_bandwidth=Sourced(
                8e12,
                _nvidia("DGX B200", _B200_URL, "64TB/s HBM3e bandwidth", "for 8 GPUs: 8e12 a GPU")
                + f"; {_BOOK_GPU}: '8.0e12'",
            ),
            hbm_capacity=Sourced(
                180e9,
                _nvidia(
                    "DGX B200", _B200_URL, "1,440GB total GPU memory", "for 8 GPUs: 180e9 a GPU", "192GB"
                ),
            ),
            ici_bandwidth=Sourced(
                1.8e12,
                _nvidia(
                    "DGX B200",
                    _B200_URL,
                    "14.4TB/s aggregate bandwidth",
                    "of NVLink 5 for 8 GPUs: 1.8e12 bidirectional a GPU",
                ),
            ),
            hop_latency=Sourced(
                2e-6, f"assumed equal to H100's alpha ({_SEED003}); no number in the lecture for NVLink 5"
            ),
            model="alpha-beta",
            alpha=Sourced(
                2e-6, f"assumed equal to H100's alpha ({_SEED003}); no number in the lecture for NVLink 5"
            ),
            link_bandwidth=Sourced(
                9e11,
                _nvidia(
                    "DGX B200",
                    _B200_URL,
                    "14.4TB/s aggregate bandwidth",
                    "of NVLink 5 for 8 GPUs: 1.8e12 a GPU, 9e11 one way",
                ),
            ),
            dcn_bandwidth=Sourced(5e10, _nvidia("DGX B200", _B200_URL, "400Gb/s", _CX7)),
            wrap=_SWITCH,
            node=Sourced(
                8,
                _nvidia(
                    "DGX B200",
                    _B200_URL,
                    "8x NVIDIA Blackwell GPUs",
                    "on 2 NVSwitches: one NVLink domain of 8 (an HGX B200 board is 8 GPUs too)",
                )
                + f"; {_NODE_BOOK}",
            ),
        ),
    )
}


class ChipTable(tuple):
    """Chips, shown as a table in a notebook (``hardware.table()``)."""

    def _repr_html_(self) -> str:
        keys = ("C", "W_hbm", "W_ici", "T_min", "alpha", "beta", "W_dcn")
        rows = []
        for c in self:
            nums = c.numbers()
            rows.append(
                [
                    c.name,
                    c.description,
                    c.model,
                    *(f"{nums[k].value:.3g}" if k in nums else "" for k in keys),
                    f"{c.hbm_capacity.value:.3g}",
                ]
            )
        headers = [
            "chip",
            "description",
            "model",
            "C (FLOP/s)",
            "W_hbm (B/s)",
            "W_ici (B/s)",
            "T_min (s)",
            "alpha (s)",
            "beta (B/s)",
            "W_dcn (B/s)",
            "HBM (bytes)",
        ]
        return html_table(
            headers, rows, "hardware presets (shardalg hw show NAME gives each number's source)"
        )


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
        near = closest(name, names()) if isinstance(name, str) else None
        raise UsageError(
            f"unknown hardware {name!r}; known: {', '.join(names())}",
            fix=f"did you mean {near}?" if near else None,
        ) from None


def as_chip(hw: Chip | str | None) -> Chip | None:
    """Normalize what the API accepts as hardware: a Chip, a preset name, or None (stay symbolic)."""
    if hw is None or isinstance(hw, Chip):
        return hw
    if isinstance(hw, str):
        return get(hw)
    raise UsageError(f"hardware is a Chip or a preset name ({', '.join(names())}), not {hw!r}")
