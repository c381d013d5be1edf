"""The ``--hw`` (alias ``--chip``) and ``--mesh`` options every command shares: one reader of chip text
(:mod:`shardalg.costs.chipspec`: a preset, a TOML file, or NAME=VALUE pairs) and one of mesh text
(:meth:`shardalg.algebra.mesh.Mesh.parse`: sizes, ``*M`` links, ``:ring``/``:line``, ``:nodeN``); and
``--slice`` (:mod:`shardalg.costs.topology`: a real slice, whose physical axes ``--mesh`` then factors into
logical axes, and whose chip is the default ``--hw``). :func:`chip_and_mesh` is where a command that prices
meets chip and mesh: a flat mesh larger than a GPU chip's node is placed into nodes there
(:mod:`shardalg.costs.nodes`), and said in a note; without ``--mesh``, the mesh line of the program priced
(``mesh X=64``) is placed the same way.

Imports: :mod:`shardalg.costs` and :mod:`shardalg.algebra` (lazily, inside the functions).
"""

from __future__ import annotations

import argparse
import warnings
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


SLICE_HELP = (
    "a real slice: v5p-8960 (the 16x20x28 pod), v5e-256, v4-4096, h100-1024 (128 nodes of 8); its physical "
    "axes are the mesh (x, y, z on a torus, pod over DCN; gpu, node, su on a GPU network), or --mesh factors "
    "them into logical axes: X=x*y,Y=z, or with factors of a torus axis: X=x*y*z:(1)7,Y=z:(7)4; its chip is "
    "the default --hw"
)


def add_slice(p: argparse.ArgumentParser) -> None:
    """``--slice NAME``."""
    p.add_argument("--slice", metavar="NAME", help=SLICE_HELP)


def slice_layout(args: argparse.Namespace) -> Any:
    """The Layout of ``--slice`` factored by ``--mesh`` (None without ``--slice``)."""
    if not getattr(args, "slice", None):
        return None
    from shardalg.costs.topology import slice_topology

    return slice_topology(args.slice).layout(args.mesh)


def slice_words(args: argparse.Namespace) -> str | None:
    """What the user typed for the mesh when ``--slice`` gives it (``--slice v5e-8``, with the ``--mesh`` that
    factors it), for the note on what it replaces of a program's mesh line; None without ``--slice``."""
    name = getattr(args, "slice", None)
    if not name:
        return None
    factored = getattr(args, "mesh", None)
    return f"--slice {name}" + (f" --mesh {factored}" if factored else "")


def slice_chip(args: argparse.Namespace, layout: Any) -> tuple[Any, list[tuple[str, str]]]:
    """The chip of ``--hw``, or the slice's when ``--hw`` is not given (said in a note); a UsageError when
    ``--hw`` names another product than the slice's."""
    if layout is None:
        return chip(args.hw), []
    topo = layout.topology
    notes = [("slice", f"{topo.name}: {'; '.join(layout.lines())}")]
    notes += [("slice note", n) for n in topo.notes]
    if args.hw is None:
        notes.append(("chip", f"{topo.chip} (the slice's)"))
        return chip(topo.chip), notes
    got = chip(args.hw)
    if got.name.rstrip("*") != topo.chip:
        from shardalg.errors import UsageError

        raise UsageError(
            f"the slice {topo.name} is made of {topo.chip} chips, not {got.name}",
            fix=f"drop --hw (the slice gives {topo.chip}) or use base={topo.chip},... to change its numbers",
        )
    return got, notes


def placed(
    the_mesh: Any, hw: Any, dcn: str | None = None, programs: tuple[Any, ...] = ()
) -> tuple[Any, list[tuple[str, str]]]:
    """``the_mesh`` placed into the nodes of the chip ``hw`` (:func:`shardalg.costs.nodes.place_in_nodes`;
    ``dcn``: ``--dcn``'s axes, outside the node; an axis whose sub-axes ``programs`` name is left whole; None:
    the ``mesh`` line of ``programs``), and the notes that say so, as ``(key, text)`` pairs."""
    from shardalg.costs.nodes import place_in_nodes

    dcn_axes = tuple(a for a in (dcn or "").split(",") if a)
    done = place_in_nodes(the_mesh, hw, dcn_axes, programs)
    return done.mesh, done.pairs()


def chip_and_mesh(
    args: argparse.Namespace, layout: Any = None, *programs: Any
) -> tuple[Any, Any, list[tuple[str, str]]]:
    """The chip and the mesh a command prices ``programs`` on, with its notes: ``--slice``'s (its layout's
    mesh, its chip unless ``--hw`` names one: :func:`slice_chip`), else ``--hw`` and ``--mesh`` (without it,
    the programs' own ``mesh`` line), a flat mesh larger than the chip's node placed into nodes
    (:func:`placed`); the mesh is None when no ``--mesh`` is given and nothing of the mesh line is placed."""
    hw, notes = slice_chip(args, layout)
    if layout is not None:  # a slice places its axes in nodes itself
        return hw, layout.mesh, notes
    the_mesh, more = placed(mesh(getattr(args, "mesh", None)), hw, getattr(args, "dcn", None), programs)
    return hw, the_mesh, notes + more


def say(notes: list[tuple[str, str]]) -> None:
    """The mesh's notes of :func:`placed` on stderr (as :class:`~shardalg.errors.NoteWarning`, which the CLI
    prints as ``shardalg: note: ...``), for a command whose result carries them too."""
    from shardalg.errors import NoteWarning

    for k, v in notes:
        if k == "mesh":
            warnings.warn(f"{k}: {v}", NoteWarning, stacklevel=2)


def priced_mesh(text: str | None, hw: Any, *programs: Any) -> Any:
    """The Mesh of ``--mesh`` (without it, the programs' own ``mesh`` line, or None where nothing of it is
    placed) as priced on the chip ``hw`` for ``programs``: placed into its nodes (:func:`placed`), each
    placement said on stderr; for a command whose result has no notes."""
    the_mesh, notes = placed(mesh(text), hw, None, programs)
    say(notes)
    return the_mesh
