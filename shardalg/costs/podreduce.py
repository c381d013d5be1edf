"""Reducing a gradient across pods over DCN: the hierarchical plan (reduce inside each pod over ICI, across the
pods over DCN, gather back inside the pod) against the flat ones, each a program in the notation priced by the
:class:`~shardalg.costs.costmodel.CostModel`, with its ICI and DCN seconds apart.

The plans, for a gradient ``G[d, ..]{U_PX}`` partial over the pods ``P`` (a DCN axis) and the chips ``X`` of a
pod (ICI):

``hierarchical``  ``ReduceScatter_{X,d}``, then ``AllReduce_P`` of the ``1/|X|`` shard each chip holds, then
                  ``AllGather_X``: DCN carries ``|X|`` times fewer bytes a chip;
``flat ring``     one ring through every chip of both pods: the collective over one axis of ``|P|·|X|`` chips
                  whose ring crosses DCN, so priced at the DCN's bandwidth (the ring's slowest link binds);
``pooled``        the cost model's own ``AllReduce_{PX}``, which counts each axis's links as carrying a share
                  at once (the book's multi-axis collective): a bound, reached by no single ring.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shardalg.algebra.mesh import Mesh
from shardalg.errors import UsageError
from shardalg.notation.parse import parse_tensor
from shardalg.planning.overlap import OverlapPolicy

from .costmodel import CostModel
from .hardware import Chip
from .plancost import costed

__all__ = ["Reduction", "pod_reductions"]


@dataclass(frozen=True)
class Reduction:
    """One plan of the reduction: its program, and its seconds over ICI and over DCN (serial: each phase
    waits for the one before)."""

    name: str
    program: str
    ici: float
    dcn: float
    note: str

    @property
    def seconds(self) -> float:
        return self.ici + self.dcn


def _seconds(text: str, mesh: Any, sizes: Mapping[str, int], costs: CostModel) -> float:
    got = costed(text, mesh, sizes, costs).seconds
    if got is None:
        raise UsageError("a reduction across pods in seconds needs every size bound", fix="bind them: sizes")
    return got


def pod_reductions(
    grad: str, mesh: Mesh, pod: str, inner: str, sizes: Mapping[str, int], hw: Chip | str
) -> list[Reduction]:
    """The hierarchical, flat-ring and pooled reductions of ``grad`` (a tensor such as ``G[D, F]``, its
    first dim the one the pod's chips split) over the pod axis ``pod`` and the in-pod axis ``inner``."""
    t = parse_tensor(grad)
    if not mesh[pod].dcn:
        raise UsageError(f"{pod} is not an axis over DCN", fix="a slice of several pods: --mesh P=pod,...")
    if mesh[inner].dcn:
        raise UsageError(f"{inner} runs over DCN; the reduction inside a pod is over ICI")
    n_pod, n_in = mesh[pod].size, mesh[inner].size
    if n_pod is None or n_in is None:
        raise UsageError("a reduction across pods needs the axes' sizes")
    name, dims = t.name or "G", [d.label for d in t.dims]
    d0, rest = dims[0], dims[1:]
    whole = f"{name}[{', '.join(dims)}]"
    split = f"{name}[{', '.join([f'{d0}_{inner}', *rest])}]"
    costs = CostModel.of(hw, overlap=OverlapPolicy.SERIAL)
    rs = f"ReduceScatter_{{{inner},{d0}}}({whole}{{U_{pod}{inner}}}) -> {split}{{U_{pod}}}"
    ar = f"AllReduce_{pod}({split}{{U_{pod}}}) -> {split}"
    ag = f"AllGather_{inner}({split}) -> {whole}"
    hier = Reduction(
        "hierarchical",
        "\n".join((rs, ar, ag)),
        _seconds(rs, mesh, sizes, costs) + _seconds(ag, mesh, sizes, costs),
        _seconds(ar, mesh, sizes, costs),
        f"DCN carries 1/{n_in} of the gradient a chip",
    )
    ring = f"AllReduce_N({whole}{{U_N}}) -> {whole}"
    flat = Reduction(
        "flat ring",
        ring + f"  # N = {pod}{inner}, {n_pod * n_in} chips in one ring",
        0.0,
        _seconds(
            ring, Mesh(N=n_pod * n_in), sizes, CostModel.of(hw, overlap=OverlapPolicy.SERIAL, dcn_axes=("N",))
        ),
        "one ring through every chip; its DCN crossing binds",
    )
    both = f"AllReduce_{{{pod}{inner}}}({whole}{{U_{pod}{inner}}}) -> {whole}"
    pooled = Reduction(
        "pooled",
        both,
        0.0,
        _seconds(both, mesh, sizes, costs),
        "the cost model's multi-axis formula: ICI and DCN links carry shares at once (a bound, not one ring); "
        "its seconds are ICI and DCN together, counted here under DCN",
    )
    return [hier, flat, pooled]
