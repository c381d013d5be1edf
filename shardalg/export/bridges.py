"""The top-level bridges to JAX and PyTorch: real library objects when the library is installed.

    >>> import shardalg as sa
    >>> sa.to_partition_spec("A[I_XY, J]")               # jax installed: PartitionSpec(('X', 'Y'), None)
    >>> sa.to_torch_placements("A[I_X, J]{U_Y}", "X=4,Y=2")   # [Shard(dim=0), Partial(sum)]
    >>> sa.from_torch_placements([Shard(0), Partial()], mesh, ["I", "J"], name="A")   # A[I_X, J]{U_Y}

Without jax, :func:`to_partition_spec` gives the spec's positional entries as a tuple (which has no place for
unreduced axes, and says so); without torch, :func:`to_torch_placements` raises a UsageError that says how to
install it. The torch-free placement values are :func:`shardalg.export.specs.to_placements`.

Imports: the export package's specs and the layers below; jax and torch only inside the functions.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any

from shardalg.algebra.mesh import Mesh
from shardalg.errors import UsageError
from shardalg.notation.parse import parse_tensor
from shardalg.notation.syntax import DType, Tensor

from . import specs

__all__ = ["to_partition_spec", "to_torch_placements", "from_torch_placements"]


def _tensor(tensor: Tensor | str) -> Tensor:
    if isinstance(tensor, Tensor):
        return tensor
    return parse_tensor(tensor)


def to_partition_spec(tensor: Tensor | str) -> Any:
    """``jax.sharding.PartitionSpec`` of the tensor when jax is installed (``unreduced=`` for partial sums);
    without jax, the spec's positional entries as a tuple (``('X', None)``)."""
    t = _tensor(tensor)
    if importlib.util.find_spec("jax") is None:
        return specs.to_partition_spec(t)
    return specs.to_jax_partition_spec(t)


def _torch_placements() -> tuple[Any, Any, Any]:
    try:
        from torch.distributed.tensor import Partial, Replicate, Shard
    except ImportError:
        raise UsageError(
            "DTensor placements need torch (torch.distributed.tensor)",
            fix="pip install 'shardalg[torch]', or use shardalg.export.specs.to_placements for torch-free values",
        ) from None
    return Shard, Replicate, Partial


def _mesh(mesh: Any) -> Any:
    """A torch ``DeviceMesh`` as a shardalg mesh (its dim names and shape); any other mesh as given, which
    the placements' functions read (:func:`.specs.to_placements`)."""
    names = getattr(mesh, "mesh_dim_names", None)
    if names is not None and hasattr(mesh, "shape"):
        return Mesh({str(n): int(s) for n, s in zip(names, tuple(mesh.shape), strict=True)})
    if mesh is None:
        raise UsageError("placements need a mesh, e.g. 'X=4,Y=2'")
    return mesh


def to_torch_placements(tensor: Tensor | str, mesh: Any) -> list[Any]:
    """One ``torch.distributed.tensor`` placement per mesh axis, in mesh order: ``Shard(d)``, ``Replicate()``
    or ``Partial()``. ``mesh`` may be a torch ``DeviceMesh`` with dim names."""
    shard, replicate, partial = _torch_placements()
    out: list[Any] = []
    for p in specs.to_placements(_tensor(tensor), _mesh(mesh)):
        out.append(
            shard(p.dim)
            if isinstance(p, specs.Shard)
            else partial()
            if isinstance(p, specs.Partial)
            else replicate()
        )
    return out


def from_torch_placements(
    placements: Sequence[Any],
    mesh: Any,
    dim_names: Sequence[str],
    *,
    name: str | None = None,
    dtype: DType | None = None,
) -> Tensor:
    """The tensor that torch placements (one per mesh dim, in mesh order) describe on ``mesh`` (ours, text,
    or a torch ``DeviceMesh``); also takes shardalg's own placement values and the letters S(0), R, P."""
    return specs.from_placements(placements, _mesh(mesh), dim_names, name=name, dtype=dtype)
