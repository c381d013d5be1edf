"""Offload to host memory: what moves to the host, the host bytes, the PCIe traffic per step and its time.

    >>> offload_named("optimizer,params").parts
    ('optimizer', 'params')

``optimizer`` keeps the optimizer state (master copy and moments) in host memory and runs the update there
(ZeRO-Offload: Ren et al. 2021, section 4): each step sends the device's share of the gradients to the host
and brings its share of the updated parameters back. ``params`` keeps the parameters in host memory
(ZeRO-Infinity: Rajbhandari et al. 2021, section 5): the forward and the backward each fetch them; with the
optimizer on the device the update also reads them and writes them back. A device holds the parameters of the
layer it runs (the transient). The traffic rules are :data:`TRANSFERS`; the host link's bandwidth per
direction is :data:`HOST_LINKS` (data, with sources), and the PCIe time of a step is the larger direction's
bytes over it (the link is full duplex).
"""

from __future__ import annotations

from dataclasses import dataclass

from shardalg.errors import UsageError

__all__ = ["Offload", "offload_named", "HOST_LINKS", "host_link", "TRANSFERS", "OFFLOADABLE"]

OFFLOADABLE: tuple[str, ...] = ("optimizer", "params")

_PCIE5 = "PCIe Gen5 x16: 128 GB/s in both directions together, 64 GB/s each way"

# chip preset -> (bytes per second per direction between one device and its host, source)
HOST_LINKS: dict[str, tuple[float, str]] = {
    "h100": (64e9, f"NVIDIA H100 Tensor Core GPU datasheet (SXM): 'PCIe Gen5: 128GB/s'; {_PCIE5}"),
    "h200": (64e9, f"NVIDIA H200 Tensor Core GPU datasheet (SXM): 'PCIe Gen5: 128GB/s'; {_PCIE5}"),
    "b200": (64e9, f"NVIDIA HGX B200 datasheet: 'PCIe Gen5: 128GB/s' per GPU; {_PCIE5}"),
}

# (what is offloaded, also offloaded or not, part moved, direction, times, per, why)
# "also": None = always; ("optimizer", False) = only when the optimizer stays on the device;
# "per": "step" (once a step) or "microbatch" (each microbatch's forward and backward)
TRANSFERS: tuple[tuple[str, tuple[str, bool] | None, str, str, int, str, str], ...] = (
    ("optimizer", None, "grads", "to host", 1, "step", "the device's share of the gradients, for the update on the host"),
    ("optimizer", None, "params", "to device", 1, "step", "the device's share of the updated parameters"),
    ("params", None, "params", "to device", 2, "microbatch", "the parameters, fetched for the forward and for the backward"),
    ("params", ("optimizer", False), "params", "to device", 1, "step", "the parameters, read by the update"),
    ("params", ("optimizer", False), "params", "to host", 1, "step", "the updated parameters, written back"),
)  # fmt: skip


@dataclass(frozen=True)
class Offload:
    """The parts kept in host memory (empty: none)."""

    parts: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.parts)

    def transfers(self, microbatches: int = 1) -> list[tuple[str, str, str, int, str]]:
        """(part offloaded, part moved, direction, times per step, why) of each PCIe transfer a step of
        ``microbatches`` makes."""
        out = []
        for what, also, part, direction, times, per, why in TRANSFERS:
            if what not in self.parts:
                continue
            if also is not None and (also[0] in self.parts) != also[1]:
                continue
            if per == "microbatch" and microbatches > 1:
                times, why = times * microbatches, f"{why}, in each of {microbatches} microbatches"
            out.append((what, part, direction, times, why))
        return out

    def describe(self) -> str:
        if not self.parts:
            return "none"
        names = {"optimizer": "optimizer state (the update runs on the host)", "params": "parameters"}
        return ", ".join(names[p] for p in self.parts) + " in host memory"


def offload_named(spec: str | Offload | None) -> Offload:
    """``optimizer``, ``params``, both (``optimizer,params``), or ``none``."""
    if isinstance(spec, Offload):
        return spec
    if spec is None:
        return Offload()
    words = [w.strip().lower() for w in str(spec).split(",") if w.strip()]
    if words == ["none"]:
        return Offload()
    bad = [w for w in words if w not in OFFLOADABLE]
    if bad or not words or len(set(words)) != len(words):
        raise UsageError(
            f"--offload takes {', '.join(OFFLOADABLE)} (or both, comma-separated) or none, not {spec!r}",
            fix="e.g. --offload optimizer",
        )
    return Offload(tuple(p for p in OFFLOADABLE if p in words))


def host_link(chip_name: str | None, given: float | None) -> tuple[float | None, str]:
    """The host link's bytes per second per direction and its source: ``given``, else the chip's row of
    :data:`HOST_LINKS` (a chip file or NAME=VALUE chip keeps its base's name with a ``*``)."""
    if given is not None:
        if not given > 0:
            raise UsageError(f"the host link bandwidth is a positive number of bytes/s, not {given}")
        return float(given), "given by the user"
    base = (chip_name or "").rstrip("*")
    if base in HOST_LINKS:
        return HOST_LINKS[base]
    known = ", ".join(HOST_LINKS)
    return None, f"unknown for {chip_name or 'no chip'} (known: {known}); give --host-link BYTES_PER_S"
