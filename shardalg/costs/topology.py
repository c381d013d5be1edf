"""Real slices as topologies: the physical axes of a product (``v5p-8960``, ``v5e-256``, ``v4-4096``,
``h100-1024``), each with its source, and the logical mesh a strategy uses as a factoring of them.

    >>> t = slice_topology("v5p-8960")
    >>> [(a.name, a.size, a.wraps) for a in t.axes]
    [('x', 16, True), ('y', 20, True), ('z', 28, True)]
    >>> slice_mesh("v5p-8960", "X=x*y,Y=z")
    Mesh(X=320(links=2, torus=16x20), Y=28(torus=28))

A name is a product and a chip count. The count is chips, as the book counts them ("a full TPU v5p pod with
16x20x28 = 8960 chips"); Google Cloud's accelerator types count TensorCores instead, two a chip on v4 and v5p
(its ``v5p-8`` is 4 chips), and every topology says so. A TPU slice is a torus: one physical axis per side,
each a ring when the chip's wraparound rule gives it one (:class:`shardalg.costs.hardware.WrapRule`), else a
line; a count that is a multiple of the whole pod is that many pods joined over DCN (axis ``pod``). A GPU slice
is a switched network whose levels are data (:class:`Level`: the children a unit joins, each child's link,
the switches of a unit and their radix): the NVLink node (axis ``gpu``), the leaf switches of a scalable unit
(axis ``node``: the nodes under one leaf group) and the spine (axis ``su``: the scalable units it joins).

A logical axis is a product of physical axes (``X=x*y``): on a torus it stands on as many links as it has
physical axes (the book's M), and a collective over it crosses each physical axis's ring in turn, so its
hops are the sum of each side's (``16/2 + 20/2`` for ``x*y`` of a v5p pod), not half its chip count. On a GPU
network its devices per node and per leaf group tell :mod:`.hierarchy` which levels it spans.

A logical axis may also take a factor of a torus axis, in Shardy's spelling: ``z:(k)n`` is the factor of ``n``
chips of ``z`` after a pre-size ``k`` (``X=x*y*z:(4)7,Y=z:(1)4`` splits z=28 into its major 4 and its minor
7). The factors of one physical axis tile it (pre-sizes 1, then each the product before it), each in one
logical axis; factors that follow each other in one logical axis are joined (``z:(1)4*z:(4)7`` is ``z``). A
chip's coordinate along a side of S chips is read row-major, so the factor ``(k)n`` holds chips a stride
``s = S/(k·n)`` apart (the product of the factors minor to it), and it is priced as what it is on the wires:

- a *contiguous* factor (``s = 1``, ``n < S``: ``z:(4)7`` of 28) is a line of ``n`` chips (no wraparound:
  the side's wraparound link joins other groups), ``n − 1`` hops, the line's one-way bandwidth;
- a factor spanning the side (``k = 1``: ``z:(1)4`` of 28, chips 7 apart) is a ring of ``n`` when the side
  wraps (its last step takes the wraparound), else a line; a factor with ``k > 1`` and ``s > 1`` is a line;
- each step of a strided factor crosses ``s`` physical links, so its latency is ``s`` hops a step; and every
  one of the ``s`` interleaved groups of that factor runs the same collective at once (SPMD), crossing the
  same links, so each gets ``1/s`` of a link's bandwidth (the busiest link carries ``s`` groups' steps: a
  link of a ring of stride ``s`` is crossed by exactly ``s`` groups, one step each).

The stride and the physical side are carried on the mesh axis (``Axis.strides``) and priced in
:mod:`.stepcost`; a logical axis of whole physical axes has none and is priced as before. A Shift or Send
along a strided factor is refused (its point-to-point path is not modelled).
Every collective over a product axis is priced as over its torus axes together (a property test checks each);
a Shift along one is refused, since its path depends on where blocks carry from one side to the next.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import prod

from shardalg.algebra.factors import Factor, factor_of
from shardalg.algebra.mesh import Axis, Mesh
from shardalg.errors import UsageError, closest

from .hardware import Chip, get
from .slicedata import CORES_NOTE, DCN_SOURCE, NETWORKS, PODS, SHAPES, Level, Network

SLICE_TEXT = (
    "PRODUCT-CHIPS: v5p-8960 (the 16x20x28 pod), v5p-4096, v5e-256, v5e-512 (two pods over DCN), v4-4096, "
    "v6e-256, h100-1024 (the DGX H100 SuperPod of 128 nodes)"
)
FACTORING_TEXT = (
    "LOGICAL=PHYSICAL*PHYSICAL, comma separated: X=x*y,Y=z (a logical axis is a product of the slice's "
    "physical axes; each physical axis in exactly one), or of factors of a torus axis: X=x*y*z:(4)7,Y=z:(1)4 "
    "(Shardy's spelling: z:(1)4 is z's major factor of 4, z:(4)7 its minor factor of 7)"
)

__all__ = [
    "PhysicalAxis",
    "Level",
    "Topology",
    "Layout",
    "SHAPES",
    "NETWORKS",
    "slice_topology",
    "slice_mesh",
    "slice_names",
    "SLICE_TEXT",
]

# Physical axis names: a torus side per letter, pods over DCN; a GPU network's levels.
_TORUS_NAMES = ("x", "y", "z")
_LEVEL_AXES = {"node": "gpu", "leaf": "node", "spine": "su"}
_KIND = {"gpu": "nvlink", "node": "leaf", "su": "spine"}
_PRODUCTS = {
    "v4": "tpu-v4p",
    "v4p": "tpu-v4p",
    "v5p": "tpu-v5p",
    "v5e": "tpu-v5e",
    "v5litepod": "tpu-v5e",
    "v6e": "tpu-v6e",
    "h100": "h100",
}
_TWO_CORES = {"tpu-v4p": "v4", "tpu-v5p": "v5p"}
_NAME = re.compile(r"([a-z0-9]+?)-([0-9]+)")


@dataclass(frozen=True)
class PhysicalAxis:
    """One physical axis of a slice: a torus side (``kind`` ``torus``; ``wraps``: a ring, else a line),
    the pods over DCN (``dcn``), or a level of a GPU network (``nvlink``, ``leaf``, ``spine``)."""

    name: str
    size: int
    kind: str
    wraps: bool
    source: str

    @property
    def hops(self) -> int | None:
        """The hops a collective crosses this axis in: |X|/2 on a ring, |X| − 1 on a line (a torus side)."""
        if self.kind != "torus":
            return None
        return self.size // 2 if self.wraps else self.size - 1


@dataclass(frozen=True)
class Topology:
    """A product's slice: its chip, its physical axes (major first), the GPU network's levels, and notes (what
    the sources say besides, such as Cloud's naming)."""

    name: str
    chip: str
    axes: tuple[PhysicalAxis, ...]
    network: Network | None = None
    notes: tuple[str, ...] = ()

    @property
    def devices(self) -> int:
        return prod(a.size for a in self.axes)

    def axis(self, name: str) -> PhysicalAxis:
        for a in self.axes:
            if a.name == name:
                return a
        near = closest(name, [a.name for a in self.axes])
        raise UsageError(
            f"the slice {self.name} has no physical axis {name!r}; its axes are "
            f"{', '.join(f'{a.name}={a.size}' for a in self.axes)}",
            fix=f"did you mean {near}?" if near else f"write e.g. {FACTORING_TEXT}",
        )

    def layout(self, factoring: Mapping[str, Sequence[str]] | str | None = None) -> Layout:
        """The logical mesh of ``factoring`` (``"X=x*y,Y=z"`` or ``{"X": ("x", "y"), "Y": ("z",)}``; None: one
        logical axis per physical axis, of the same name)."""
        if factoring is None:
            pieces = {a.name: (a.name,) for a in self.axes}
        elif isinstance(factoring, str):
            pieces = _read_factoring(factoring)
        elif isinstance(factoring, Mapping):
            pieces = {
                str(k): (v,) if isinstance(v, str) else tuple(str(p) for p in v) for k, v in factoring.items()
            }
        else:
            raise UsageError(f"a factoring is text like 'X=x*y,Y=z' or a mapping, not {factoring!r}")
        used: dict[str, list[tuple[Factor | None, str]]] = {}
        for logical, names in pieces.items():
            if not names:
                raise UsageError(f"the logical axis {logical} is made of no physical axis")
            for n in names:
                axis, factor = self._piece(n)
                used.setdefault(axis.name, []).append((factor, logical))
        for name, uses in used.items():
            _tiles(self, name, uses)
        missing = [a.name for a in self.axes if a.name not in used]
        if missing:
            given = ",".join(f"{k}={'*'.join(v)}" for k, v in pieces.items())
            raise UsageError(
                f"the physical axes {', '.join(missing)} of {self.name} are in no logical axis",
                fix=f"put each in one: e.g. {given}*{'*'.join(missing)}",
            )
        axes = [self._logical(k, tuple(self._piece(n) for n in v)) for k, v in pieces.items()]
        return Layout(self, {k: tuple(v) for k, v in pieces.items()}, Mesh(axes))

    def _piece(self, text: str) -> tuple[PhysicalAxis, Factor | None]:
        """One piece of a factoring: a physical axis (``z``) or a factor of a torus axis (``z:(4)7``, Shardy's
        spelling: the factor of 7 chips after a pre-size of 4), checked against the slice."""
        factor = factor_of(text)
        if factor is None:
            if not re.fullmatch(r"[a-z]+", text):
                raise UsageError(
                    f"a logical axis is a product of physical axes or their factors; {text!r} is neither",
                    fix=f"write {FACTORING_TEXT}",
                )
            return self.axis(text), None
        axis = self.axis(factor.parent)
        if axis.kind != "torus":
            raise UsageError(
                f"{text}: factors of {'pods over DCN' if axis.kind == 'dcn' else 'a GPU network level'} "
                f"({axis.name}={axis.size}) are not modelled; only a torus axis may be split",
                fix=f"use {axis.name} whole",
            )
        if factor.size < 2 or factor.pre < 1 or axis.size % (factor.pre * factor.size):
            raise UsageError(
                f"{text} is not a factor of {axis.name}={axis.size}: its pre-size times its size, "
                f"{factor.pre}·{factor.size}, must divide {axis.size} (and its size be at least 2)",
                fix=f"e.g. {axis.name}:(1){_least_factor(axis.size)}",
            )
        return axis, (None if factor.size == axis.size else factor)

    def _logical(self, name: str, parts: tuple[tuple[PhysicalAxis, Factor | None], ...]) -> Axis:
        parts = _merged(parts)
        size = prod(f.size if f is not None else p.size for p, f in parts)
        kinds = {p.kind for p, _ in parts}
        if kinds == {"torus"}:
            sides = tuple(f.size if f is not None else p.size for p, f in parts)
            strides = tuple(_stride(p, f) for p, f in parts) if any(f for _, f in parts) else ()
            return Axis(name, size, len(parts), torus=sides, strides=strides)
        parts_ = tuple(p for p, _ in parts)
        if kinds == {"dcn"}:
            return Axis(name, size, dcn=True)
        if "dcn" in kinds:
            raise UsageError(
                f"the logical axis {name} mixes pods over DCN with ICI axes; a collective over both is not "
                "priced as one",
                fix="make the pods their own logical axis, e.g. P=pod",
            )
        by = {p.kind: p.size for p in parts_}
        if not kinds & {"leaf", "spine"}:  # inside one node: NVLink only
            return Axis(name, size)
        node = by.get("nvlink", 1)
        leaf = node * by.get("leaf", 1) if "spine" in kinds else None
        return Axis(name, size, node=node, leaf=leaf)

    def lines(self) -> list[str]:
        """The topology as text, each axis with its source."""
        chip = get(self.chip)
        out = [f"{self.name}: {self.devices} {chip.description.split(' (')[0]} chips, chip {self.chip}"]
        for a in self.axes:
            what = {
                "torus": f"torus axis, {'ring (wraparound)' if a.wraps else 'line (no wraparound)'}, "
                f"{a.hops} hop{'' if a.hops == 1 else 's'}",
                "dcn": "pods over the data-center network",
                "nvlink": "GPUs of an NVLink node",
                "leaf": "nodes under one leaf switch group (a scalable unit)",
                "spine": "scalable units joined by the spine",
            }[a.kind]
            out.append(f"  {a.name}={a.size}: {what}; {a.source}")
        if self.network is not None:
            for level in self.network.levels:
                out.append(
                    f"  level {level.name}: {level.degree} {level.children}, link {level.link.value:.3g} B/s one "
                    f"way, {level.switches} switches x {level.radix} ports at {level.port.value:.3g} B/s; "
                    f"ring bandwidth {level.collective_bandwidth:.3g} B/s; {level.link.source}"
                )
        out.extend(f"  note: {n}" for n in self.notes)
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "chip": self.chip,
            "devices": self.devices,
            "axes": [
                {
                    "name": a.name,
                    "size": a.size,
                    "kind": a.kind,
                    "wraps": a.wraps,
                    "hops": a.hops,
                    "source": a.source,
                }
                for a in self.axes
            ],
            "levels": [
                {
                    "name": lv.name,
                    "children": lv.children,
                    "degree": lv.degree,
                    "link": {"value": lv.link.value, "source": lv.link.source},
                    "switches": lv.switches,
                    "radix": lv.radix,
                    "port": {"value": lv.port.value, "source": lv.port.source},
                    "collective_bandwidth": lv.collective_bandwidth,
                }
                for lv in (self.network.levels if self.network is not None else ())
            ],
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class Layout:
    """A slice factored into a logical mesh: which physical axes make each logical axis, and the mesh."""

    topology: Topology
    pieces: Mapping[str, tuple[str, ...]]
    mesh: Mesh

    def hops(self, logical: str) -> tuple[tuple[str, int], ...]:
        """The hops of each torus axis under a logical axis (empty off a torus)."""
        out = []
        for axis, factor in _merged(tuple(self.topology._piece(n) for n in self.pieces[logical])):
            if factor is None:
                if axis.hops is not None:
                    out.append((axis.name, axis.hops))
            else:
                out.append((f"{axis.name}:({factor.pre}){factor.size}", _factor_hops(axis, factor)))
        return tuple(out)

    def factors(self, logical: str) -> list[dict[str, object]]:
        """The factors of torus axes under a logical axis, each as priced: a ring or a line, the links a step
        crosses and the groups that share each link (its bandwidth is W_ici over that)."""
        out: list[dict[str, object]] = []
        for axis, f in _merged(tuple(self.topology._piece(n) for n in self.pieces[logical])):
            if f is None:
                continue
            stride, _ = _stride(axis, f)
            ring = f.pre == 1 and axis.wraps
            shape = f"a {'ring' if ring else 'line'} of {f.size}" + (
                f", {stride} links a step, each link shared by {stride} groups (W_ici/{stride})"
                if stride > 1
                else " neighbours"
            )
            piece = f"{axis.name}:({f.pre}){f.size}"
            out.append({"piece": piece, "ring": ring, "stride": stride, "shared_by": stride, "shape": shape})
        return out

    def lines(self) -> list[str]:
        out = []
        for a in self.mesh:
            what = "*".join(self.pieces[a.name])
            hops = self.hops(a.name)
            extra = (
                f", {a.links} link{'s' if a.links > 1 else ''}, hops "
                + " + ".join(f"{n} {h}" for n, h in hops)
                + f" = {sum(h for _, h in hops)}"
                if hops
                else ""
            )
            if a.node is not None:
                extra = f", {a.node} a node" + (f", {a.leaf} a leaf group" if a.leaf is not None else "")
            extra += "".join(f"; {f['piece']} {f['shape']}" for f in self.factors(a.name))
            count = f"{a.size} pods over DCN" if a.dcn else f"{a.size} chips"
            out.append(f"{a.name} = {what} ({count}{extra})")
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "slice": self.topology.name,
            "axes": [
                {
                    "name": a.name,
                    "physical": list(self.pieces[a.name]),
                    "size": a.size,
                    "links": a.links,
                    "hops": dict(self.hops(a.name)),
                    "factors": self.factors(a.name),
                    "dcn": a.dcn,
                    "node": a.node,
                    "leaf": a.leaf,
                }
                for a in self.mesh
            ],
        }


def _stride(axis: PhysicalAxis, factor: Factor | None) -> tuple[int, int]:
    """(the physical links one step along a piece crosses, the physical side it is a factor of). The factor
    ``(pre)size`` of a side of S chips, in Shardy's row-major order, holds the chips ``size`` apart by the
    product of the factors minor to it, ``S/(pre·size)``: ``z:(1)4`` of z=28 steps 7 links, ``z:(4)7`` 1."""
    if factor is None:
        return 1, axis.size
    return axis.size // (factor.pre * factor.size), axis.size


def _factor_hops(axis: PhysicalAxis, factor: Factor) -> int:
    """The hops a collective crosses a factor of a torus axis in, counted in physical links: a ring of
    ``size`` (it spans the side, pre-size 1, and the side wraps) takes size/2 steps, else a line size − 1;
    each step crosses ``stride`` links."""
    stride, _ = _stride(axis, factor)
    ring = factor.pre == 1 and axis.wraps
    return (factor.size // 2 if ring else factor.size - 1) * stride


def _merged(
    parts: tuple[tuple[PhysicalAxis, Factor | None], ...],
) -> tuple[tuple[PhysicalAxis, Factor | None], ...]:
    """The pieces of one logical axis with the factors of one physical axis that follow each other (each
    pre-size the end of the one before) joined into one: ``z:(1)4*z:(4)7`` is the group of ``z`` itself, and
    is priced as it."""
    out: list[tuple[PhysicalAxis, Factor | None]] = []
    for axis, f in parts:
        i = next((j for j, (a, g) in enumerate(out) if a.name == axis.name and g is not None), None)
        if f is not None and i is not None:
            g = out[i][1]
            assert g is not None
            lo, hi = sorted((g, f), key=lambda h: h.pre)
            if lo.pre * lo.size == hi.pre:
                size = lo.size * hi.size
                out[i] = (axis, None if size == axis.size else Factor(axis.name, lo.pre, size))
                continue
        out.append((axis, f))
    return tuple(out)


def _least_factor(n: int) -> int:
    return next(d for d in range(2, n + 1) if n % d == 0)


def _tiles(topology: Topology, name: str, uses: list[tuple[Factor | None, str]]) -> None:
    """The pieces of physical axis ``name`` across the logical axes: the whole axis once, or factors that
    tile it (pre-sizes 1, then each the product before it, up to the side), each in one logical axis."""
    side = topology.axis(name).size
    if any(f is None for f, _ in uses):
        if len(uses) > 1:
            where = sorted({logical for _, logical in uses})
            raise UsageError(
                f"the physical axis {name} of {topology.name} is in both {where[0]} and {where[-1]}"
                if len(where) > 1
                else f"the physical axis {name} of {topology.name} is used twice in {where[0]}",
                fix="each physical axis goes into exactly one logical axis (or its factors, e.g. z:(1)4 and "
                "z:(4)7, into one each)",
            )
        return
    at = 1
    for f, _ in sorted(uses, key=lambda u: u[0].pre):  # type: ignore[union-attr]
        assert f is not None
        if f.pre != at:
            raise UsageError(
                f"the factors of {name}={side} ({', '.join(f'{name}:({g.pre}){g.size}' for g, _ in uses)}) "
                f"{'overlap' if f.pre < at else 'leave a gap'} at pre-size {min(f.pre, at)}",
                fix=f"factors that tile {name}: each pre-size the product of the sizes before it, e.g. "
                f"{name}:(1){_least_factor(side)} and {name}:({_least_factor(side)}){side // _least_factor(side)}",
            )
        at = f.pre * f.size
    if at != side:
        raise UsageError(
            f"the factors of {name}={side} cover {at} of its {side} chips",
            fix=f"add {name}:({at}){side // at}",
        )


def _read_factoring(text: str) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for part in (p.strip() for p in text.split(",")):
        m = re.fullmatch(r"([A-Za-z][A-Za-z0-9]*)=([^=]+)", part)
        if m is None:
            raise UsageError(f"bad logical axis {part!r} of a slice: write {FACTORING_TEXT}")
        if m[1] in out:
            raise UsageError(f"the logical axis {m[1]} is given twice")
        out[m[1]] = tuple(p.strip() for p in m[2].split("*"))
    return out


def _tpu_axes(chip: Chip, count: int) -> tuple[tuple[PhysicalAxis, ...], str]:
    pod = PODS[chip.name]
    rule = chip.wrap.source
    for shape, source in ((pod.sides, pod.source), *SHAPES.get(chip.name, ())):
        if prod(shape) == count:
            axes = tuple(
                PhysicalAxis(n, s, "torus", chip.wraps(s), f"{source}; wraparound: {rule}")
                for n, s in zip(_TORUS_NAMES, shape, strict=False)
                if s > 1
            )
            return axes, ("x".join(map(str, shape)))
    whole = prod(pod.sides)
    if count % whole == 0:
        pods = count // whole
        axes = tuple(
            PhysicalAxis(n, s, "torus", chip.wraps(s), f"{pod.source}; wraparound: {rule}")
            for n, s in zip(_TORUS_NAMES, pod.sides, strict=False)
        )
        return (*axes, PhysicalAxis("pod", pods, "dcn", False, DCN_SOURCE)), f"{pods} pods of " + "x".join(
            map(str, pod.sides)
        )
    known = sorted({prod(s) for s, _ in SHAPES.get(chip.name, ())} | {whole})
    raise UsageError(
        f"no {chip.name} slice has {count} chips: the known counts are {', '.join(map(str, known))}, "
        f"or a multiple of the {whole}-chip pod (pods over DCN)",
        fix=f"e.g. --slice {_short(chip.name)}-{whole}",
    )


def _gpu_axes(chip: Chip, net: Network, count: int) -> tuple[PhysicalAxis, ...]:
    """The levels a slice of ``count`` GPUs fills, from the node up: each full but the last."""
    _check_network(chip, net)
    sizes: list[int] = []
    left = count
    for level in net.levels:
        if left == 1:
            break
        take = min(left, level.degree)
        if left % take:
            left = 0  # not a whole number of units of this level
            break
        sizes.append(take)
        left //= take
    if left != 1:
        raise UsageError(
            f"no {chip.name} slice has {count} GPUs: a slice fills the levels from the node up "
            f"({' x '.join(f'{lv.degree} {lv.children}' for lv in net.levels)}, at most {net.most})",
            fix=f"e.g. --slice {chip.name}-{net.most}",
        )
    return tuple(
        PhysicalAxis(_LEVEL_AXES[lv.name], n, _KIND[_LEVEL_AXES[lv.name]], False, lv.source)
        for lv, n in zip(net.levels, sizes, strict=False)
        if n > 1
    )


def _check_network(chip: Chip, net: Network) -> None:
    """The levels priced by :mod:`.hierarchy` form a full-bisection fat tree: the node level's link is the
    chip's NVLink (beta), each level above carries every NIC below it at ``W_dcn``."""
    node = net.levels[0]
    if (
        chip.link_bandwidth is None
        or chip.dcn_bandwidth is None
        or node.link.value != chip.link_bandwidth.value
    ):
        raise UsageError(f"the {chip.name} network's node link is not the chip's NVLink (beta)")
    nics = node.degree
    for level in net.levels[1:]:
        if abs(level.link.value - nics * chip.dcn_bandwidth.value) > 1e-6 * level.link.value:
            raise UsageError(
                f"the {chip.name} network's {level.name} level is oversubscribed ({level.link.value:.3g} B/s a "
                f"child for {nics} NICs of {chip.dcn_bandwidth.value:.3g}); only full-bisection trees are priced"
            )
        nics *= level.degree


def _short(chip: str) -> str:
    return next(k for k, v in _PRODUCTS.items() if v == chip)


def slice_names() -> tuple[str, ...]:
    """One example name per product (each pod, and the largest GPU network)."""
    return tuple(f"{_short(c)}-{prod(p.sides)}" for c, p in PODS.items()) + tuple(
        f"{c}-{n.most}" for c, n in NETWORKS.items()
    )


def slice_topology(name: str) -> Topology:
    """The topology of ``name`` (``"v5p-8960"``); a UsageError says what names there are."""
    m = _NAME.fullmatch(name.strip().lower()) if isinstance(name, str) else None
    chip_name = _PRODUCTS.get(m[1]) if m else None
    if m is None or chip_name is None:
        raise UsageError(f"unknown slice {name!r}: write {SLICE_TEXT}")
    count = int(m[2])
    if count < 2:
        raise UsageError(
            f"a slice of {count} chip{'' if count == 1 else 's'} has no mesh axis to shard over",
            fix=f"take at least 2 chips, e.g. {m[1]}-8",
        )
    chip = get(chip_name)
    notes: list[str] = []
    if chip_name in NETWORKS:
        net = NETWORKS[chip_name]
        return Topology(f"{m[1]}-{count}", chip_name, _gpu_axes(chip, net, count), net, ())
    axes, shape = _tpu_axes(chip, count)
    pod = PODS[chip_name]
    if shape == "x".join(map(str, pod.sides)) and pod.note:
        notes.append(pod.note)
    if chip_name in _TWO_CORES:
        v = _TWO_CORES[chip_name]
        notes.append(CORES_NOTE.format(v=v, cores=2 * count))
    return Topology(f"{m[1]}-{count}", chip_name, axes, None, tuple(notes))


def slice_mesh(
    name: str, factoring: Mapping[str, Sequence[str]] | str | None = None, /, **axes: str | Sequence[str]
) -> Mesh:
    """The logical mesh of slice ``name``: ``slice_mesh("v5p-8960")`` (one logical axis per physical one),
    ``slice_mesh("v5p-8960", "X=x*y,Y=z")`` or ``slice_mesh("v5p-8960", X="x*y", Y="z")``."""
    if axes:
        if factoring is not None:
            raise UsageError("give the factoring as text or as keywords, not both")
        factoring = {k: tuple(v.split("*")) if isinstance(v, str) else tuple(v) for k, v in axes.items()}
    return slice_topology(name).layout(factoring).mesh
