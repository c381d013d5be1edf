"""The slice shapes a chip comes in, as data with their source: what ``fit --solve-for slice`` chooses from.

    >>> [s.text for s in slice_shapes("tpu-v5e")][:3]
    ['1x1', '2x2', '2x4']

A chip without a table (a GPU, a user's chip) takes its shapes from the user (``--slices 2x2,4x4``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import prod

from shardalg.costs.slicedata import SHAPES
from shardalg.errors import UsageError

__all__ = ["Slice", "SLICES", "slice_shapes", "parse_slices"]


@dataclass(frozen=True)
class Slice:
    """One slice shape: chips along each axis (``4x4``), and where the shape is listed."""

    shape: tuple[int, ...]
    source: str

    @property
    def devices(self) -> int:
        return prod(self.shape)

    @property
    def text(self) -> str:
        return "x".join(map(str, self.shape))


# The shapes are data in one place (shardalg.costs.slicedata, with their sources); a chip's pod is its largest.
SLICES: dict[str, tuple[Slice, ...]] = {
    chip: tuple(Slice(shape, source) for shape, source in shapes) for chip, shapes in SHAPES.items()
}

_SHAPE = re.compile(r"[1-9][0-9]*(?:x[1-9][0-9]*)*")


def parse_slices(text: str) -> tuple[Slice, ...]:
    """``"2x2,4x4,8"``: shapes the user allows, each a product of positive integers."""
    out: list[Slice] = []
    for part in (p.strip() for p in text.split(",")):
        if not _SHAPE.fullmatch(part):
            raise UsageError(f"bad slice shape {part!r}: write chips per axis joined by x, e.g. 2x2,4x4,8x8")
        out.append(Slice(tuple(int(n) for n in part.split("x")), "given by the user"))
    return tuple(sorted(out, key=lambda s: (s.devices, s.shape)))


def slice_shapes(chip_name: str) -> tuple[Slice, ...]:
    """The shapes a preset comes in, fewest chips first; a UsageError says how to give them otherwise."""
    base = chip_name.rstrip("*")  # a preset with numbers changed keeps the preset's shapes
    if base not in SLICES:
        raise UsageError(
            f"no slice shapes are known for {chip_name} (known for {', '.join(SLICES)})",
            fix="give the shapes: --slices 1x1,2x2,2x4,4x4",
        )
    return tuple(sorted(SLICES[base], key=lambda s: (s.devices, s.shape)))
