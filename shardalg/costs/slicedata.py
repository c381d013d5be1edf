"""The slice data of each product, as data with sources: TPU pods (torus sides), the slice shapes smaller than
a pod, and GPU networks as levels (the children a unit joins, each child's link, switches and their radix).
:mod:`.topology` turns a name such as ``v5p-8960`` into physical axes from these tables, and
:mod:`shardalg.models.slices` offers the shapes to ``fit --solve-for slice``.

    >>> PODS["tpu-v5p"].sides
    (16, 20, 28)
    >>> [lv.degree for lv in NETWORKS["h100"].levels]
    [8, 32, 4]
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from .hardware import Sourced

__all__ = ["Pod", "PODS", "SHAPES", "Level", "Network", "NETWORKS", "DCN_SOURCE", "CORES_NOTE"]

_BOOK_TPU = (
    "How To Scale Your Model ch. 2 'How to Think About TPUs' (https://jax-ml.github.io/scaling-book/tpus/)"
)
_BOOK_GPU = (
    "How To Scale Your Model ch. 12 'How to Think About GPUs' (https://jax-ml.github.io/scaling-book/gpus/)"
)
_CLOUD = "Google Cloud TPU {v} docs, {what} (https://cloud.google.com/tpu/docs/{v})"
CORES_NOTE = (
    "the count is chips, as the book counts them; Google Cloud's accelerator type counts TensorCores, "
    "2 a chip on {v} (its {v}-8 is 4 chips), so Cloud calls this slice {v}-{cores}"
)


@dataclass(frozen=True)
class Pod:
    """The largest ICI-connected unit of a TPU product: its torus sides and where they are stated."""

    sides: tuple[int, ...]
    source: str
    note: str = ""  # what else the sources say of it


# The pods, as the book's TPU chapter gives them.
PODS: dict[str, Pod] = {
    "tpu-v5p": Pod(
        (16, 20, 28),
        f"{_BOOK_TPU}: 'the maximum pod size (called a superpod) is 16x16x16 for TPU v4 and 16x20x28 for TPU "
        "v5p'; ch. 6 trains LLaMA-3 'on a full TPU v5p pod with 16x20x28 = 8960 chips'",
        "Google Cloud schedules at most 16x16x24 (6144 chips) as one slice "
        f"({_CLOUD.format(v='v5p', what='Configurations')}); the book's worked problems use the whole pod",
    ),
    "tpu-v4p": Pod(
        (16, 16, 16),
        f"{_BOOK_TPU}: 'the maximum pod size (called a superpod) is 16x16x16 for TPU v4'",
    ),
    "tpu-v5e": Pod(
        (16, 16), f"{_BOOK_TPU}: 'For TPU v5e and Trillium we have pods which consist of a 16x16 2D torus'"
    ),
    "tpu-v6e": Pod(
        (16, 16), f"{_BOOK_TPU}: 'For TPU v5e and Trillium we have pods which consist of a 16x16 2D torus'"
    ),
}
DCN_SOURCE = (
    f"{_BOOK_TPU}: 'Different slices can be connected between each other using DCN, for instance to link slices "
    "on different pods'; v5e and v6e pods 'cannot expand beyond a 16x16 torus but pods can still communicate "
    "with standard Data Center Networking (DCN)'"
)

# Slice shapes smaller than a pod: (shape, source), fewest chips first within each product.
_V5E_SHAPES = "Cloud TPU docs, 'TPU v5e', Configurations: v5e supports the 2D slice shapes 1x1 ... 16x16"
_V5P_SHAPES = (
    "Cloud TPU docs, 'Supported TPU configurations', v5p: the most common single-slice shapes "
    "(2x2x1 ... 16x16x24)"
)
_V4_SHAPES = (
    f"{_BOOK_TPU}: 'Smaller topologies (e.g. 2x2x1, 2x2x2) can also be requested'; 'a 4x4x4 or 4x4x8 will still "
    "have wraparounds'; pods 'composed of reconfigurable cubes of 4x4x4 chips'"
)
SHAPES: dict[str, tuple[tuple[tuple[int, ...], str], ...]] = {
    "tpu-v5e": tuple(
        (s, _V5E_SHAPES) for s in ((1, 1), (2, 2), (2, 4), (4, 4), (4, 8), (8, 8), (8, 16), (16, 16))
    ),
    "tpu-v5p": tuple(
        (s, _V5P_SHAPES)
        for s in (
            (2, 2, 1),
            (2, 2, 2),
            (2, 4, 4),
            (4, 4, 4),
            (4, 4, 8),
            (4, 8, 8),
            (8, 8, 8),
            (8, 8, 16),
            (8, 16, 16),
            (16, 16, 16),
            (16, 16, 24),
        )
    ),
    "tpu-v4p": tuple((s, _V4_SHAPES) for s in ((2, 2, 1), (2, 2, 2), (4, 4, 4), (4, 4, 8))),
}


@dataclass(frozen=True)
class Level:
    """One level of a switched GPU network: a unit of it joins ``degree`` children (GPUs, nodes, scalable
    units), each over a link of ``link`` bytes/s one way; the unit has ``switches`` switches of ``radix``
    ports at ``port`` bytes/s each."""

    name: str
    children: str
    degree: int
    link: Sourced
    switches: int
    radix: int
    port: Sourced
    source: str

    @property
    def collective_bandwidth(self) -> float:
        """The bandwidth of a ring over a full unit of this level: ``D·W/(D − 1)`` (the book's table)."""
        return self.degree * self.link.value / (self.degree - 1)


@dataclass(frozen=True)
class Network:
    """A GPU product's network: its levels from the node up, and the most GPUs it joins."""

    levels: tuple[Level, ...]
    source: str

    @property
    def most(self) -> int:
        return prod(level.degree for level in self.levels)


_SUPERPOD = (
    f"{_BOOK_GPU}, 'Beyond the node level': the reference 1024-GPU DGX H100 SuperPod (NVIDIA's reference "
    "architecture, https://docs.nvidia.com/dgx-superpod/reference-architecture-scalable-infrastructure-h100/"
    "latest/network-fabrics.html)"
)
NETWORKS: dict[str, Network] = {
    "h100": Network(
        (
            Level(
                "node",
                "GPUs",
                8,
                Sourced(
                    4.5e11, f"{_BOOK_GPU}: NVLink 4, '18 * 25=450GB/s of full-duplex bandwidth from each GPU'"
                ),
                4,
                64,
                Sourced(
                    2.5e10, f"{_BOOK_GPU}: 'The H100 node has 4 NVSwitches ... with 25GB/s links', 64 ports"
                ),
                f"{_BOOK_GPU}: an 8xH100 node, 4 NVSwitches of up to 64 NVLink ports",
            ),
            Level(
                "leaf",
                "nodes",
                32,
                Sourced(4e11, f"{_SUPERPOD}: 'each node 8 * 400 / 8 = 400 GB/s of bandwidth to the leaf'"),
                8,
                64,
                Sourced(5e10, f"{_SUPERPOD}: '64-port NDR IB switches (also 50GB/s per port)'"),
                f"{_SUPERPOD}: 'Each set of 32 nodes is called a Scalable Unit (or SU), under a single set of 8 "
                "leaf InfiniBand switches'",
            ),
            Level(
                "spine",
                "scalable units",
                4,
                Sourced(
                    1.28e13,
                    f"{_SUPERPOD}: '8 * 16 * 2 400Gbps NDR IB cables connecting each SU to the spine', 12.8 TB/s",
                ),
                16,
                64,
                Sourced(5e10, f"{_SUPERPOD}: 16 spine IB switches of 64 NDR ports (50GB/s each)"),
                f"{_SUPERPOD}: 'The overall SuperPod then connects 4 of these SUs with 16 top level spine IB "
                "switches'; 4096 GPUs need a fourth level ('core switches'), not described here",
            ),
        ),
        _SUPERPOD,
    ),
}
