"""Sub-axis names (Shardy's factored axes): ``Y:(1)2`` is the factor of size 2 of mesh axis Y after a
pre-size of 1, that is Y's major half when |Y| = 4; ``Y:(2)2`` is its minor half.

A device's coordinate along ``Y:(p)n`` is ``(y // (|Y| / (p·n))) % n``: the factors of one axis are the
digits of its coordinate, major first, as Shardy and XLA's replica groups read them (``[2,2,2]T(0,2,1)``).

This module only reads and writes the names (a sub-axis is a string in the AST, as an axis is); the mesh
(:mod:`.mesh`) resolves a name to its size and links, and :mod:`.subaxes` refines a mesh into factors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Factor", "factor_of", "parent_of", "is_subaxis", "SUBAXIS"]

SUBAXIS = re.compile(r"([A-Za-z][A-Za-z0-9]*):\(([0-9]{1,9})\)([0-9]{1,9})\Z")


@dataclass(frozen=True, order=True)
class Factor:
    """The factor of ``size`` devices of axis ``parent`` after a pre-size ``pre`` (the product of the
    sizes of the factors more major than it)."""

    parent: str
    pre: int
    size: int

    @property
    def name(self) -> str:
        """Shardy's spelling, ``Y:(1)2``."""
        return f"{self.parent}:({self.pre}){self.size}"

    @property
    def stop(self) -> int:
        """The pre-size of the factor just minor to this one: ``pre · size``."""
        return self.pre * self.size


def is_subaxis(name: str) -> bool:
    """Whether ``name`` names a factor of an axis (``Y:(1)2``) rather than a whole axis."""
    return ":" in name


def factor_of(name: str) -> Factor | None:
    """The factor ``name`` spells (``Y:(1)2``), or None for a whole axis's name."""
    if ":" not in name:
        return None
    m = SUBAXIS.fullmatch(name)
    if m is None:
        return None
    return Factor(m[1], int(m[2]), int(m[3]))


def parent_of(name: str) -> str:
    """The whole axis a name belongs to: ``Y`` for ``Y:(1)2`` and for ``Y``."""
    return name.partition(":")[0]
