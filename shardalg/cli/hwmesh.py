"""The ``--hw`` (alias ``--chip``) and ``--mesh`` options every command shares: one reader of chip text
(:mod:`shardalg.costs.chipspec`: a preset, a TOML file, or NAME=VALUE pairs) and one of mesh text
(:meth:`shardalg.algebra.mesh.Mesh.parse`: sizes, ``*M`` links, ``:ring``/``:line``, ``:nodeN``).

Imports: :mod:`shardalg.costs` and :mod:`shardalg.algebra` (lazily, inside the functions).
"""

from __future__ import annotations

import argparse
from typing import Any

HW_HELP = (
    "the chip: a preset (shardalg hw list), a TOML file, or NAME=VALUE pairs, e.g. base=tpu-v5p,hbm=96e9 "
    "or C=4.6e14,W_hbm=2.8e12,hbm=96e9,W_ici=9e10,T_min=1e-6"
)
MESH_HELP = (
    "the mesh: X=4,Y=2; X alone stays symbolic; X=16*2 (2 links), X=4:ring or Y=4:line (wraparound), "
    "X=64:node8 (a GPU axis 8 devices to a node)"
)


def add_hw(p: argparse.ArgumentParser, help: str = HW_HELP, **kw: Any) -> None:
    """``--hw CHIP`` (also spelled ``--chip``)."""
    p.add_argument("--hw", "--chip", dest="hw", metavar="CHIP", help=help, **kw)


def chip(text: str | None) -> Any:
    """The Chip that ``--hw`` names, or None."""
    from shardalg.costs.chipspec import as_chip_text

    return as_chip_text(text)


def mesh(text: str | None) -> Any:
    """The Mesh that ``--mesh`` describes, or None."""
    from shardalg.algebra.mesh import Mesh

    return None if text is None else Mesh.parse(text)
