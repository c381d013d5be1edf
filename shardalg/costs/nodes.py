"""Placing a flat mesh's axes into a GPU chip's nodes: ``--hw h100 --mesh X=64`` is 8 nodes of 8, not one
NVLink domain of 64.

    >>> from shardalg.algebra.mesh import Mesh
    >>> from shardalg.costs.hardware import get
    >>> placed = place_in_nodes(Mesh.parse("X=8,Y=8"), get("h100"))
    >>> placed.mesh
    Mesh(X=8(node=1), Y=8)
    >>> print(placed.notes[0])
    mesh: X=8,Y=8 spans 8 h100 nodes of 8 GPUs; priced as X=8:node1,Y=8 (the last axis innermost); write :nodeN to place it yourself

A chip that knows its NVLink domain (:attr:`~shardalg.costs.hardware.Chip.node`: 8 GPUs in an HGX/DGX node)
meets a mesh whose devices exceed one node: its axes are placed into nodes as ``torch``'s ``init_device_mesh``
and ``jax.make_mesh`` order devices, the last axis varying fastest. The last axis fills the node first, then
the one before it: an axis whose devices fit in what is left of the node stays inside it (no ``:node``); an
axis that spans nodes gets ``:nodeK``, K its devices per node (1 once the inner axes fill the node). Axes over
DCN (``:dcn``, ``dcn_axes``) are not in the node. The mesh is left as written, with a note, when it already
places itself (some axis has ``:node``), when an axis size is symbolic, or when an axis that would span nodes
has sub-axes, declared (``X=2x4``) or named by the program (``X:(1)8``: :func:`subaxis_parents`), which a
node-spanning axis cannot have; and when it fits in one node,
silently. Sizes that do not tile the node (3 on a node of 8) are a UsageError: the user writes ``:nodeN``.

Without a mesh, the mesh is the programs' own ``mesh`` line (:func:`written_mesh`), placed the same way:
``mesh X=64`` on ``h100`` is priced as ``X=64:node8``, as ``--mesh X=64`` is, with the same note. Where that
line fits one node (or the chip has no node) nothing is placed and the mesh stays None, so the program's line
is used as written downstream. Programs whose mesh lines differ are not placed (one mesh is placed, not two),
with a note when one of them spans nodes.

Imports: :mod:`shardalg.algebra`, :mod:`shardalg.notation` (to read a program's mesh line) and :mod:`.hardware`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from math import gcd, prod

from shardalg.algebra.factors import is_subaxis, parent_of
from shardalg.algebra.mesh import Axis, Mesh
from shardalg.algebra.subaxes import axes_in
from shardalg.errors import ShardalgError, Span, UsageError
from shardalg.notation.parse import parse
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Apply, Arrow, Collective, Product, Program, Tensor

from .hardware import Chip

__all__ = ["Placed", "place_in_nodes", "subaxis_parents", "written_mesh"]

_HOW = "(the last axis innermost); write :nodeN to place it yourself"


def subaxis_parents(*programs: object) -> frozenset[str]:
    """The axes whose factors (``X:(1)8``) the programs name: each a program, a statement or expression, a
    plan, a step or notation text (parsed as a program). Read from the axes their tensors and collectives
    name, not from their printed text, so LaTeX's ``X{:}(1)8`` names X and a comment that spells a sub-axis
    names none. Text that does not parse names none: its error is the pricing's to raise, where it is
    located."""
    return frozenset(parent_of(a) for p in programs for a in _axes_named(p) if is_subaxis(a))


def _axes_named(node: object) -> Iterator[str]:
    """Every axis name ``node`` mentions, with repeats (:func:`shardalg.algebra.subaxes.axes_in`): of notation
    text parsed (none where it does not parse), of each item of a list (the planner's plans) and of each step
    of a plan's cost (nothing for None or any other object)."""
    if isinstance(node, str):
        try:
            node = parse(node)
        except ShardalgError:
            return
    if isinstance(node, Tensor | Program | Arrow | Product | Collective | Apply | Step | Plan):
        yield from axes_in(node)
    elif isinstance(node, list | tuple):  # plans (the planner's list)
        for item in node:
            yield from _axes_named(item)
    else:  # a plan's cost (PlanCost): each step's cost holds its step
        for cost in getattr(node, "steps", ()):
            yield from _axes_named(getattr(cost, "step", None))


def _declaring(program: object) -> Program | None:
    """``program`` as a :class:`Program` with its own ``mesh`` line (notation text parsed; its span and
    source kept, so an error about the line can point at it); None for anything else (a plan, a tensor, a
    program without one, text that does not parse: its error is the pricing's to raise, where it is
    located)."""
    if isinstance(program, str):
        try:
            program = parse(program)
        except ShardalgError:
            return None
    if isinstance(program, Program) and program.mesh is not None:
        return program
    return None


def _mesh_line(program: object) -> Mesh | None:
    """The mesh of ``program``'s own ``mesh`` line: a :class:`Program`'s, or that of notation text that
    parses as a program with one; None for anything else (see :func:`_declaring`)."""
    declaring = _declaring(program)
    if declaring is None or declaring.mesh is None:
        return None
    return Mesh(dict(declaring.mesh.axes))


def written_mesh(*programs: object) -> tuple[Mesh | None, tuple[Mesh, ...]]:
    """The mesh the programs' own ``mesh`` lines give (None when none has one, or when they differ), and
    every distinct mesh they write, in order."""
    found: list[Mesh] = []
    for p in programs:
        m = _mesh_line(p)
        if m is not None and all(m.text() != f.text() for f in found):
            found.append(m)
    return (found[0] if len(found) == 1 else None), tuple(found)


@dataclass(frozen=True)
class Placed:
    """A mesh as priced on a chip's nodes, and the notes that say what was placed (empty when nothing was)."""

    mesh: Mesh | None
    notes: tuple[str, ...] = ()

    def pairs(self) -> list[tuple[str, str]]:
        """The notes as ``(key, text)`` pairs (``("mesh", "X=64 spans ...")``), as results list their notes."""
        return [(k, v) for k, _, v in (n.partition(": ") for n in self.notes)]


def _text(axes: Iterable[Axis]) -> str:
    """``X=8:node1,Y=8``: the axes as mesh text, with the node split (their other options are unchanged)."""
    return ",".join(f"{a.name}={a.size}" + (f":node{a.node}" if a.node is not None else "") for a in axes)


def place_in_nodes(
    mesh: Mesh | None, chip: Chip | None, dcn_axes: Iterable[str] = (), programs: Iterable[object] = ()
) -> Placed:
    """``mesh`` with each axis that spans ``chip``'s nodes given ``:nodeK`` (the last axis innermost), and a
    note per placement; ``mesh`` unchanged where the chip has no node, the mesh fits one node or places itself
    (see the module docstring). ``programs``: what is priced on it, whose named sub-axes
    (:func:`subaxis_parents`) leave their axis whole, and whose own ``mesh`` line is the mesh when ``mesh`` is
    None (:func:`written_mesh`; the result's mesh stays None where nothing of that line is placed)."""
    if mesh is None and chip is not None and chip.devices_per_node is not None:
        return _place_written(chip, tuple(dcn_axes), tuple(programs))
    if mesh is None or chip is None or chip.devices_per_node is None or any(a.node is not None for a in mesh):
        return Placed(mesh)
    per_node = chip.devices_per_node
    over_dcn = set(dcn_axes)
    inside = [a for a in mesh.axes if not a.dcn and a.name not in over_dcn]
    symbolic = [a.name for a in inside if a.size is None]
    if symbolic:
        return Placed(
            mesh,
            (
                f"mesh: {', '.join(symbolic)} {'has no size' if len(symbolic) == 1 else 'have no sizes'}: "
                f"whether the mesh spans {chip.name} nodes of {per_node} GPUs is not known, so it is priced "
                "as one NVLink domain; write :nodeN to place it in nodes",
            ),
        )
    sizes = {a.name: a.size for a in inside if a.size is not None}
    devices = prod(sizes.values())
    if devices <= per_node:
        return Placed(mesh)
    left = per_node  # devices of the node not yet taken by the axes after this one
    node: dict[str, int] = {}
    for a in reversed(inside):
        size = sizes[a.name]
        if left % size == 0:
            left //= size
        elif size % left == 0:
            node[a.name] = left
            left = 1
        else:
            raise UsageError(
                f"the mesh {_text(inside)} does not tile {chip.name} nodes of {per_node} GPUs: axis {a.name}={size} "
                f"neither divides the {left} devices of a node the axes after it leave, nor is a multiple of them",
                fix=f"write :nodeN yourself, N the devices of {a.name} in one node, e.g. {a.name}={size}:node{gcd(size, left)}",
            )
    nodes = devices // per_node
    where = f"{_text(inside)} spans {nodes} {chip.name} nodes of {per_node} GPUs"
    named = subaxis_parents(*programs)
    split = [a.name for a in inside if a.name in node and (a.factors or a.name in named)]
    if split:
        return Placed(
            mesh,
            (
                f"mesh: {where}, but {', '.join(split)} {'has' if len(split) == 1 else 'have'} sub-axes (declared "
                "X=AxB, or named X:(k)n) and an axis that spans nodes has none: priced as one NVLink domain, the "
                "node split not priced; write :nodeN (and no sub-axes of it) to price it",
            ),
        )
    placed = Mesh([replace(a, node=node[a.name]) if a.name in node else a for a in mesh.axes])
    shown = [placed[a.name] for a in inside]
    return Placed(placed, (f"mesh: {where}; priced as {_text(shown)} {_HOW}",))


def _place_written(chip: Chip, dcn_axes: tuple[str, ...], programs: tuple[object, ...]) -> Placed:
    """:func:`place_in_nodes` of the programs' own ``mesh`` line, when no mesh is given: that line placed
    as ``--mesh`` with its text is; None as the mesh where nothing is placed (the program's line then applies
    as written), with the notes that say why. A line whose sizes do not tile the node is refused as
    ``--mesh`` is, the fix saying to give the mesh as ``--mesh`` (a mesh line takes no ``:nodeN``), the error
    pointing at the line in its source (:func:`_where_written`), as errors about the source do."""
    mesh, written = written_mesh(*programs)
    if mesh is None:
        if not any(_spans(m, chip, dcn_axes) for m in written):
            return Placed(None)
        lines = "; ".join(m.text().removeprefix("mesh ") for m in written)
        return Placed(
            None,
            (
                f"mesh: the programs' mesh lines differ ({lines}), so none is placed into {chip.name} nodes of "
                f"{chip.devices_per_node} GPUs: each is priced as one NVLink domain; give --mesh (with :nodeN) "
                "to place it",
            ),
        )
    try:
        done = place_in_nodes(mesh, chip, dcn_axes, programs)
    except UsageError as err:
        err.fix = f"a mesh line takes no :nodeN: give the mesh as --mesh (API: mesh=...) and {err.fix}"
        if err.span is None:
            err.span, err.source = _where_written(mesh, programs)
        raise
    return done if done.mesh is not mesh else Placed(None, done.notes)


def _where_written(mesh: Mesh, programs: tuple[object, ...]) -> tuple[Span | None, str | None]:
    """The span of the first ``mesh`` line among ``programs`` that writes ``mesh``, and the source text it
    lies in, for an error's caret under that line; (None, None) where no such line points into a text (a
    program made in code, without a source)."""
    for p in programs:
        declaring = _declaring(p)
        if (
            declaring is None
            or declaring.mesh is None
            or declaring.mesh.span is None
            or declaring.source is None
        ):
            continue
        if Mesh(dict(declaring.mesh.axes)).text() == mesh.text():
            return declaring.mesh.span, declaring.source
    return None, None


def _spans(mesh: Mesh, chip: Chip, dcn_axes: tuple[str, ...]) -> bool:
    """Whether ``mesh`` outside ``dcn_axes`` has more devices than ``chip``'s node."""
    inside = [a.size for a in mesh.axes if not a.dcn and a.name not in dcn_axes]
    return chip.devices_per_node is not None and prod(n or 1 for n in inside) > chip.devices_per_node
