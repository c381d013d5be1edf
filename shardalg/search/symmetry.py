"""The search's mesh symmetry: mesh axes that price alike, and a program's axes renamed among them.

Two mesh axes are *interchangeable* when everything a price reads of them is equal: their size (a number),
links, wraparound, nodes, leaf groups, torus sides, strides and DCN (the :class:`~shardalg.algebra.mesh.Axis`
fields apart from its name), and neither is declared factored. The cost model prices an axis by those
fields alone, so a program and the same program with interchangeable axes permuted (``D_X`` for ``D_Y`` and
``D_Y`` for ``D_X`` everywhere) have the same plans up to the renaming and the same price: the same seconds,
bytes and FLOPs, each axis's collectives on the renamed axis. On ``X=2,Y=2,Z=2`` every candidate belongs to
an orbit of up to 3! = 6 programs, and a search prices one of each (:class:`.pieces.StatementPricer`: its
statements, and the candidates it prices whole); ``tests/search/test_symmetry.py`` checks on numbers that a
renamed program's price is the original's renamed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, is_dataclass, replace
from itertools import permutations, product
from typing import Any

from shardalg.algebra.mesh import Axis, Mesh
from shardalg.notation.syntax import Collective, Dim, MeshDecl, Node, Tensor

__all__ = ["interchangeable", "renamings", "rename_axes", "rename_keys"]

Renaming = Mapping[str, str]


def _class_key(a: Axis) -> tuple[Any, ...]:
    return tuple(getattr(a, f.name) for f in fields(a) if f.name != "name")


def interchangeable(mesh: Mesh) -> tuple[tuple[str, ...], ...]:
    """The classes of interchangeable axes of ``mesh`` with two axes or more, each in mesh order."""
    classes: dict[tuple[Any, ...], list[str]] = {}
    for a in mesh.axes:
        if isinstance(a.size, int) and not a.factors and ":" not in a.name:
            classes.setdefault(_class_key(a), []).append(a.name)
    return tuple(tuple(c) for c in classes.values() if len(c) > 1)


def renamings(mesh: Mesh) -> tuple[dict[str, str], ...]:
    """Every permutation of ``mesh``'s axes within their classes (:func:`interchangeable`), the identity
    first, each as old name -> new name (the axes it moves only)."""
    per_class = [[dict(zip(c, p, strict=True)) for p in permutations(c)] for c in interchangeable(mesh)]
    out = []
    for choice in product(*per_class):
        m = {k: v for part in choice for k, v in part.items() if k != v}
        out.append(m)
    return tuple(out) if out else ({},)


def _axis(name: str, m: Renaming) -> str:
    if ":" in name:  # a sub-axis Y:(1)2 of a (factored, so never renamed) parent
        parent, rest = name.split(":", 1)
        return f"{m.get(parent, parent)}:{rest}"
    return m.get(name, name)


def _axes(names: tuple[str, ...], m: Renaming) -> tuple[str, ...]:
    return tuple(_axis(n, m) for n in names)


def rename_axes(node: Any, m: Renaming) -> Any:
    """``node`` (a program, a statement, a tensor, or tuples of them) with its mesh axes renamed by ``m``:
    each dim's sharding, a tensor's unreduced and invariant axes (kept sorted), a collective's axes and a
    mesh declaration's names. The same node when ``m`` is empty."""
    if not m:
        return node
    if isinstance(node, tuple):
        got = tuple(rename_axes(x, m) for x in node)
        return node if all(a is b for a, b in zip(got, node, strict=True)) else got
    if isinstance(node, Dim):
        return node.with_axes(_axes(node.axes, m)) if node.axes else node
    if isinstance(node, Tensor):
        return Tensor(
            node.name,
            tuple(rename_axes(d, m) for d in node.dims),
            tuple(sorted(_axes(node.unreduced, m))),
            tuple(sorted(_axes(node.invariant, m))),
            node.dtype,
            span=node.span,
        )
    if isinstance(node, MeshDecl):
        return replace(node, axes=tuple((_axis(n, m), s) for n, s in node.axes))
    if isinstance(node, Node) and is_dataclass(node):
        changes = {}
        for f in fields(node):
            if f.name == "span":
                continue
            v = getattr(node, f.name)
            w = _axes(v, m) if isinstance(node, Collective) and f.name == "axes" else rename_axes(v, m)
            if w is not v:
                changes[f.name] = w
        return replace(node, **changes) if changes else node
    return node


def rename_keys(d: Mapping[str, Any], m: Renaming) -> dict[str, Any]:
    """A dict keyed by axis names (or a lane: ``compute``), its keys renamed by ``m``, in the same order."""
    return {_axis(k, m): v for k, v in d.items()}
