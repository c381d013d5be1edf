"""Shardings as JAX PartitionSpecs and as PyTorch DTensor placements, both ways: pure data conversion.

JAX names, for each array dim, the mesh axes that shard it (``P('X', None)``, ``P(('X', 'Y'), None)``,
the first axis of a tuple major, as in ``I_XY``); shardalg's tensor ``A[I_X, J]`` is ``P('X', None)``::

    >>> to_partition_spec(Tensor("A", (Dim("I", ("X",)), Dim("J"))))
    ('X', None)

PyTorch names, for each mesh dim, what it does to the tensor: ``Shard(d)``, ``Replicate()`` or
``Partial()``. ``A[I_X, J]{U_Y}`` on ``Mesh(X=4, Y=2)`` is ``(Shard(0), Partial())``. A dim sharded over
several axes is ``Shard(d)`` on each of them; DTensor cuts such a dim by mesh dim order (mesh dim 0
major, checked against ``compute_local_shape_and_global_offset`` of torch 2.13), so ``I_XY`` is
representable on the mesh ``(X, Y)`` but ``I_YX`` is not and raises a UsageError that says so.

Unreduced axes: JAX's PartitionSpec carries them as ``P(..., unreduced={'Y'})`` (jax >= 0.7); the plain
tuple of :func:`to_partition_spec` cannot, and refuses. Invariant marks (``{I_X}``) place data like
replication and have no spelling in either library: they are dropped on the way out and can be given
back with ``invariant=`` on the way in.

The torch-free placement values here (:class:`Shard`, :class:`Replicate`, :class:`Partial`) print as the
letters spmd_types uses; :func:`to_torch_placements` turns them into ``torch.distributed.tensor`` objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from shardalg.algebra.mesh import Mesh, as_mesh
from shardalg.errors import AxisUsedTwice, UnknownAxis, UsageError
from shardalg.notation.syntax import Dim, DType, Tensor

__all__ = [
    "Shard",
    "Replicate",
    "Partial",
    "Placement",
    "SpecEntry",
    "to_partition_spec",
    "partition_spec_source",
    "from_partition_spec",
    "to_jax_partition_spec",
    "to_named_sharding",
    "from_named_sharding",
    "to_placements",
    "from_placements",
    "to_torch_placements",
    "placements_source",
]

SpecEntry = None | str | tuple[str, ...]


# ------------------------------------------------------------------------------------ placement values
@dataclass(frozen=True)
class Shard:
    """The mesh dim shards tensor dim ``dim`` (DTensor's ``Shard(dim)``)."""

    dim: int

    def __repr__(self) -> str:
        return f"S({self.dim})"


@dataclass(frozen=True)
class Replicate:
    """The mesh dim holds copies (DTensor's ``Replicate()``); also shardalg's invariant."""

    def __repr__(self) -> str:
        return "R"


@dataclass(frozen=True)
class Partial:
    """The mesh dim holds partial sums (DTensor's ``Partial('sum')``; shardalg's ``{U_X}``)."""

    def __repr__(self) -> str:
        return "P"


Placement = Shard | Replicate | Partial


# ------------------------------------------------------------------------------------ checks
def _check_axes(tensor: Tensor, mesh: Mesh | None) -> None:
    """The tensor uses each axis once, and (given a mesh) only axes of the mesh."""
    seen: set[str] = set()
    for axis in tensor.sharded_axes + tensor.unreduced:
        if axis in seen:
            raise AxisUsedTwice(f"mesh axis {axis} is used twice by {_brief(tensor)}")
        seen.add(axis)
    if mesh is not None:
        for axis in tensor.used_axes:
            if axis not in mesh:
                raise UnknownAxis(
                    f"{_brief(tensor)} uses axis {axis}, which the mesh ({', '.join(mesh.names)}) lacks"
                )


def _brief(t: Tensor) -> str:
    dims = ", ".join(d.label + ("_" + "".join(d.axes) if d.axes else "") for d in t.dims)
    extra = ", ".join([f"U_{a}" for a in t.unreduced] + [f"I_{a}" for a in t.invariant])
    return f"{t.name or ''}[{dims}]" + (f"{{{extra}}}" if extra else "")


def _entry(axes: tuple[str, ...]) -> SpecEntry:
    if not axes:
        return None
    return axes[0] if len(axes) == 1 else tuple(axes)


# ------------------------------------------------------------------------------------ JAX
def to_partition_spec(tensor: Tensor) -> tuple[SpecEntry, ...]:
    """The positional entries of the tensor's PartitionSpec: ``None``, ``"X"`` or ``("X", "Y")`` per dim.

    Usable as ``PartitionSpec(*to_partition_spec(t))``. An unreduced tensor raises a UsageError: a plain
    tuple has no place for partial sums; :func:`to_jax_partition_spec` spells them ``unreduced=``.
    """
    _check_axes(tensor, None)
    if tensor.unreduced:
        raise UsageError(
            f"{_brief(tensor)} is unreduced over {', '.join(tensor.unreduced)}: a PartitionSpec's positional "
            "entries only say which dims are sharded",
            fix="with jax installed, shardalg.to_partition_spec(t) returns a jax PartitionSpec with unreduced={...}; "
            "or reduce the tensor first (AllReduce / ReduceScatter)",
        )
    return tuple(_entry(d.axes) for d in tensor.dims)


def partition_spec_source(tensor: Tensor, alias: str = "P") -> str:
    """Python source for the tensor's spec, e.g. ``P('X', None)`` or ``P(None, unreduced={'Y'})``."""
    _check_axes(tensor, None)
    parts = [repr(_entry(d.axes)) for d in tensor.dims]
    if tensor.unreduced:
        parts.append("unreduced={" + ", ".join(repr(a) for a in tensor.unreduced) + "}")
    return f"{alias}({', '.join(parts)})"


def _spec_entries(spec: Any) -> tuple[tuple[SpecEntry, ...], frozenset[str]]:
    """The entries of a tuple or of a ``jax.sharding.PartitionSpec``, and its unreduced axes."""
    unreduced = frozenset(getattr(spec, "unreduced", ()) or ())
    if isinstance(spec, str) or not isinstance(spec, Iterable):
        raise UsageError(f"a partition spec is a tuple of None, axis names or tuples of them, not {spec!r}")
    partitions = getattr(spec, "partitions", None)  # jax's PartitionSpec refuses *spec when unreduced
    return tuple(spec if partitions is None else partitions), unreduced


def _entry_axes(entry: object, position: int) -> tuple[str, ...]:
    if entry is None:
        return ()
    if isinstance(entry, str):
        return (entry,)
    if isinstance(entry, tuple | list) and all(isinstance(a, str) for a in entry):
        return tuple(entry)
    raise UsageError(
        f"entry {position} of the partition spec is {entry!r}: write None, an axis name or a tuple of axis names"
    )


def from_partition_spec(
    spec: Any,
    dim_names: Sequence[str],
    *,
    name: str | None = None,
    unreduced: Iterable[str] = (),
    invariant: Iterable[str] = (),
    dtype: DType | None = None,
    mesh: Mesh | None = None,
) -> Tensor:
    """The tensor with dims ``dim_names`` sharded as ``spec`` says (a tuple or a jax PartitionSpec; a spec
    shorter than the dims leaves the rest replicated, as in JAX). Unreduced axes come from ``unreduced=``
    and from the spec's own ``unreduced`` set."""
    entries, spec_unreduced = _spec_entries(spec)
    names = list(dim_names)
    if len(entries) > len(names):
        raise UsageError(
            f"the partition spec has {len(entries)} entries for {len(names)} dims ({', '.join(names)})"
        )
    axes = [_entry_axes(e, i) for i, e in enumerate(entries)] + [()] * (len(names) - len(entries))
    dims = tuple(Dim(n, a) for n, a in zip(names, axes, strict=True))
    t = Tensor(name, dims, tuple(set(unreduced) | spec_unreduced), tuple(invariant), dtype)
    _check_axes(t, as_mesh(mesh))
    return t


def to_jax_partition_spec(tensor: Tensor) -> Any:
    """A ``jax.sharding.PartitionSpec`` (jax imported here), with ``unreduced=`` when the tensor has it."""
    from jax.sharding import PartitionSpec

    entries = tuple(_entry(d.axes) for d in tensor.dims)
    _check_axes(tensor, None)
    if not tensor.unreduced:
        return PartitionSpec(*entries)
    try:
        return PartitionSpec(*entries, unreduced=set(tensor.unreduced))
    except TypeError:
        raise UsageError(
            f"{_brief(tensor)} is unreduced, and the installed jax's PartitionSpec has no unreduced= "
            "(jax >= 0.7 has it)",
            fix="upgrade jax, or reduce the tensor first",
        ) from None


def to_named_sharding(tensor: Tensor, jax_mesh: Any) -> Any:
    """``NamedSharding(jax_mesh, spec)``; the tensor's axes must be axis names of ``jax_mesh``."""
    from jax.sharding import NamedSharding

    names = tuple(jax_mesh.axis_names)
    for axis in tensor.used_axes:
        if axis not in names:
            raise UnknownAxis(
                f"{_brief(tensor)} uses axis {axis}, which the jax mesh ({', '.join(names)}) lacks"
            )
    return NamedSharding(jax_mesh, to_jax_partition_spec(tensor))


def from_named_sharding(sharding: Any, dim_names: Sequence[str], *, name: str | None = None) -> Tensor:
    """The tensor a ``NamedSharding`` describes (its spec, and its mesh's axis names checked)."""
    mesh = Mesh({str(n): int(s) for n, s in sharding.mesh.shape.items()})
    return from_partition_spec(sharding.spec, dim_names, name=name, mesh=mesh)


# ------------------------------------------------------------------------------------ PyTorch DTensor
def to_placements(tensor: Tensor, mesh: Mesh | str) -> tuple[Placement, ...]:
    """One placement per mesh axis, in mesh order: ``Shard(d)``, ``Replicate()`` or ``Partial()``.

    A dim sharded over several axes must list them in mesh order (DTensor cuts mesh dim 0 major);
    otherwise a UsageError names the mesh order that would work.
    """
    m = as_mesh(mesh)
    assert m is not None
    _check_axes(tensor, m)
    order = {a: i for i, a in enumerate(m.names)}
    out: dict[str, Placement] = {a: Replicate() for a in m.names}
    for d_index, d in enumerate(tensor.dims):
        if list(d.axes) != sorted(d.axes, key=order.__getitem__):
            raise UsageError(
                f"{_brief(tensor)} shards {d.label} over {''.join(d.axes)} ({d.axes[0]} major), but DTensor cuts "
                f"a dim shared by several mesh dims in mesh order ({', '.join(m.names)})",
                fix=f"declare the mesh with {', '.join(d.axes)} in that order, or shard {d.label} in mesh order",
            )
        for a in d.axes:
            out[a] = Shard(d_index)
    for a in tensor.unreduced:
        out[a] = Partial()
    return tuple(out[a] for a in m.names)


def _placement_kind(p: object) -> Placement:
    """Our placement value for ours or a torch ``Placement`` (duck-typed: torch is not imported)."""
    if isinstance(p, Shard | Replicate | Partial):
        return p
    if type(p).__name__ == "_StridedShard":
        raise UsageError(f"{p!r} (a strided shard) has no shardalg spelling")
    if hasattr(p, "is_shard") and p.is_shard():
        return Shard(int(p.dim))
    if hasattr(p, "is_replicate") and p.is_replicate():
        return Replicate()
    if hasattr(p, "is_partial") and p.is_partial():
        op = getattr(p, "reduce_op", "sum")
        if op != "sum":
            raise UsageError(f"Partial({op!r}) is not a sum; shardalg's unreduced values add up")
        return Partial()
    if isinstance(p, str):
        return _PLACEMENT_LETTERS.get(p) or _letter_shard(p)
    raise UsageError(f"{p!r} is not a placement: Shard(d), Replicate() or Partial()")


_PLACEMENT_LETTERS: dict[str, Placement] = {"R": Replicate(), "P": Partial(), "U": Partial()}


def _letter_shard(text: str) -> Placement:
    if text.startswith("S(") and text.endswith(")") and text[2:-1].isdigit():
        return Shard(int(text[2:-1]))
    raise UsageError(f"{text!r} is not a placement: write S(d), R or P")


def from_placements(
    placements: Sequence[object],
    mesh: Mesh | str,
    dim_names: Sequence[str],
    *,
    name: str | None = None,
    dtype: DType | None = None,
) -> Tensor:
    """The tensor that ``placements`` (one per mesh axis, in mesh order) describe. Accepts our values,
    torch's ``Shard``/``Replicate``/``Partial``, or the letters ``S(0)``, ``R``, ``P``."""
    m = as_mesh(mesh)
    assert m is not None
    if len(placements) != len(m):
        raise UsageError(f"{len(placements)} placements for a mesh of {len(m)} axes ({', '.join(m.names)})")
    names = list(dim_names)
    axes: list[list[str]] = [[] for _ in names]
    unreduced: list[str] = []
    for axis, p in zip(m.names, placements, strict=True):
        kind = _placement_kind(p)
        if isinstance(kind, Shard):
            d = kind.dim + len(names) if kind.dim < 0 else kind.dim
            if not 0 <= d < len(names):
                raise UsageError(f"Shard({kind.dim}) on mesh axis {axis}: the tensor has {len(names)} dims")
            axes[d].append(axis)
        elif isinstance(kind, Partial):
            unreduced.append(axis)
    dims = tuple(Dim(n, tuple(a)) for n, a in zip(names, axes, strict=True))
    return Tensor(name, dims, tuple(unreduced), (), dtype)


def to_torch_placements(tensor: Tensor, mesh: Mesh | str) -> list[Any]:
    """The placements as ``torch.distributed.tensor`` objects (torch imported here)."""
    from torch.distributed.tensor import Partial as TPartial
    from torch.distributed.tensor import Replicate as TReplicate
    from torch.distributed.tensor import Shard as TShard

    out: list[Any] = []
    for p in to_placements(tensor, mesh):
        if isinstance(p, Shard):
            out.append(TShard(p.dim))
        elif isinstance(p, Partial):
            out.append(TPartial())
        else:
            out.append(TReplicate())
    return out


def placements_source(tensor: Tensor, mesh: Mesh | str) -> str:
    """Python source for the placements: ``[Shard(0), Partial()]``."""
    parts = []
    for p in to_placements(tensor, mesh):
        parts.append(
            f"Shard({p.dim})"
            if isinstance(p, Shard)
            else "Partial()"
            if isinstance(p, Partial)
            else "Replicate()"
        )
    return "[" + ", ".join(parts) + "]"
