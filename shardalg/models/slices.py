"""The slice shapes a chip comes in, as data with their source: what ``fit --solve-for slice`` chooses from.

    >>> [s.text for s in slice_shapes("tpu-v5e")][:3]
    ['1x1', '2x2', '2x4']

A chip without a table (a GPU, a user's chip) takes its shapes from the user (``--slices 2x2,4x4``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import prod

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


_V5E = "Cloud TPU docs, 'TPU v5e', Configurations: v5e supports the 2D slice shapes 1x1 ... 16x16"
_V5P = (
    "Cloud TPU docs, 'Supported TPU configurations', v5p: the most common single-slice shapes "
    "(2x2x1 ... 16x16x24)"
)

SLICES: dict[str, tuple[Slice, ...]] = {
    "tpu-v5e": tuple(
        Slice(s, _V5E) for s in ((1, 1), (2, 2), (2, 4), (4, 4), (4, 8), (8, 8), (8, 16), (16, 16))
    ),
    "tpu-v5p": tuple(
        Slice(s, _V5P)
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
