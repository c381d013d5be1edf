"""Shapes and memory of a sharded tensor on a mesh: global and local shape, bytes, replication.

    >>> info = shape("A: fp32[I_XY, J] where I=1024, J=4096", "X=8,Y=2")
    >>> info.local_shape, info.bytes_per_device
    ((64, 4096), 1048576)

A dim sharded over axes (X, Y) has local size |dim| / (|X|·|Y|). Bytes per device is the local element count
times the dtype's bytes (int4 is half a byte); total bytes is that times the number of devices, so a tensor
replicated over an axis is counted once per copy. The replication factor is the product of the sizes of the
mesh axes that shard no dim: replicated, unreduced (partial sums take the same memory) and invariant alike.

A tensor written without a dtype is taken as **bf16**, the book's default; ``dtype_default`` says so.

Sizes come from literal dims (``fp32[1024, 4096]``), the program's ``where`` clause and the ``sizes``
argument (which wins). Unbound sizes, and mesh axes without a size, stay positive sympy symbols and the
answers are expressions; when everything is bound the answers are plain Python ints (sympy is not imported).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from math import prod
from typing import Any

from shardalg.errors import UsageError
from shardalg.notation.parse import parse
from shardalg.notation.printing import text, unicode
from shardalg.notation.printing.display import pretty_text, short
from shardalg.notation.syntax import DType, Node, Program, Tensor

from .context import context_for, say_replaced
from .factors import is_subaxis
from .legality import check_or_raise
from .mesh import Mesh, as_mesh
from .subaxes import refine
from .traffic import DEFAULT_DTYPE

__all__ = ["ShapeInfo", "shape", "format_bytes"]

# A size is an int, a Fraction (int4 bytes of an odd count) or a sympy expression.
Size = Any


@dataclass(frozen=True)
class ShapeInfo:
    """What one sharded tensor costs in memory on a mesh. Sizes are ints or sympy expressions."""

    tensor: Tensor
    mesh: Mesh
    dtype: DType
    dtype_default: bool
    global_shape: tuple[Size, ...]
    local_shape: tuple[Size, ...]
    bytes_per_device: Size
    total_bytes: Size
    replication: Size
    devices: Size

    @property
    def is_numeric(self) -> bool:
        return all(isinstance(v, int | Fraction) for v in (self.bytes_per_device, self.total_bytes))

    def to_json(self) -> dict[str, object]:
        """The stable JSON form (README, "shape JSON"): ints where numeric, strings where symbolic."""
        return {
            "tensor": text(self.tensor),
            "mesh": {a.name: a.size for a in self.mesh.axes},
            "dtype": self.dtype.value,
            "dtype_default": self.dtype_default,
            "bits_per_element": int(self.dtype.bytes * 8),
            "global_shape": [_json_number(v) for v in self.global_shape],
            "local_shape": [_json_number(v) for v in self.local_shape],
            "bytes_per_device": _json_number(self.bytes_per_device),
            "total_bytes": _json_number(self.total_bytes),
            "replication": _json_number(self.replication),
            "devices": _json_number(self.devices),
        }

    def __repr__(self) -> str:
        local = ", ".join(str(v) for v in self.local_shape)
        mesh = ", ".join(f"{a.name}={a.size}" for a in self.mesh.axes)
        return short(
            "ShapeInfo",
            f"{unicode(self.tensor)} on {mesh}: local {self.dtype.value}[{local}], "
            f"{self.bytes_per_device} bytes per device",
        )

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        pretty_text(self, p, cycle)

    def __str__(self) -> str:
        dtype = self.dtype.value + (" (default)" if self.dtype_default else "")
        mesh = ", ".join(f"{a.name}={a.size if a.size is not None else a.name}" for a in self.mesh.axes)
        rows = [
            ("tensor", text(self.tensor)),
            ("mesh", f"{mesh} ({_str(self.devices)} device{'' if self.devices == 1 else 's'})"),
            ("dtype", dtype),
            ("global shape", _shape_text(self.dtype, self.global_shape)),
            ("local shape", _shape_text(self.dtype, self.local_shape)),
            ("bytes per device", format_bytes(self.bytes_per_device)),
            ("total bytes", format_bytes(self.total_bytes)),
            ("replication", _str(self.replication)),
        ]
        return "\n".join(f"{k:<17} {v}" for k, v in rows)


def _str(v: Size) -> str:
    if isinstance(v, Fraction):
        return str(v.numerator) if v.denominator == 1 else f"{v.numerator}/{v.denominator}"
    return str(v)


def _json_number(v: Size) -> int | str:
    if isinstance(v, int):
        return v
    if isinstance(v, Fraction):
        return v.numerator if v.denominator == 1 else _str(v)
    if getattr(v, "is_Integer", False):
        return int(v)
    return str(v)


def _shape_text(dtype: DType, dims: tuple[Size, ...]) -> str:
    return f"{dtype.value}[{', '.join(_str(d) for d in dims)}]"


# The one unit policy: a byte count is given exactly, then in decimal units (GB = 10^9 bytes, as chips' HBM and
# memory caps are written) and in binary ones (GiB = 2^30 bytes, as allocators report), each labelled.
_DECIMAL = (("PB", 10**15), ("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3))
_BINARY = (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def _scaled(n: int, units: tuple[tuple[str, int], ...]) -> str | None:
    for unit, scale in units:
        if abs(n) >= scale:
            v = n / scale  # 1,000 to 1,023 of a binary unit (under the next one) is written out, not 1.02e+03
            return f"{v:.3g} {unit}" if abs(v) < 1000 else f"{v:,.0f} {unit}"
    return None


def format_bytes(n: Size) -> str:
    """``1,048,576 bytes (1.05 MB, 1 MiB)``: exact, then in GB-style (10^3) and GiB-style (2^10) units, each
    labelled (a negative count too); symbolic sizes print as their expression with ``bytes``."""
    if isinstance(n, Fraction) and n.denominator != 1:
        return f"{_str(n)} bytes"
    if not isinstance(n, int | Fraction):
        return f"{n} bytes"
    n = int(n)
    units = [u for u in (_scaled(n, _DECIMAL), _scaled(n, _BINARY)) if u is not None]
    return f"{n:,} bytes" + (f" ({', '.join(units)})" if units else "")


def _normalize(v: Size) -> Size:
    if isinstance(v, Fraction) and v.denominator == 1:
        return v.numerator
    return v


def _sympy_value(v: Size) -> Any:
    import sympy

    from .symbols import as_expr

    return sympy.Rational(v.numerator, v.denominator) if isinstance(v, Fraction) else as_expr(v)


def _the_tensor(node: Node) -> Tensor:
    if isinstance(node, Tensor):
        return node
    if isinstance(node, Program) and len(node.statements) == 1 and isinstance(node.statements[0], Tensor):
        return node.statements[0]
    raise UsageError("shape takes one tensor, e.g. 'A: fp32[I_XY, J] where I=1024, J=4096'")


def shape(
    tensor_or_text: Tensor | Program | str,
    mesh: Mesh | Mapping[str, int | None] | str | None = None,
    sizes: Mapping[str, int] | str | None = None,
) -> ShapeInfo:
    """The global and local shape, bytes per device, total bytes and replication of a tensor on ``mesh``.

    ``tensor_or_text`` is a Tensor, a one-tensor Program, or text (``"A: int8[I_XY, J] where I=128"``).
    ``mesh`` may be omitted when the text declares one (``mesh X=4, Y=2``); one given in place of the
    text's, or a size in place of its ``where``, is said (a :class:`~shardalg.errors.NoteWarning`). Raises
    the tensor's first legality violation (an axis used twice, not in the mesh, an indivisible dim) before
    measuring.
    """
    if isinstance(tensor_or_text, str):
        node: Node = parse(tensor_or_text)
    else:
        node = tensor_or_text
    tensor = _the_tensor(node)
    ctx = context_for(node, as_mesh(mesh), sizes)
    if ctx.mesh is None:
        raise UsageError(
            "shape needs a mesh: pass mesh='X=4,Y=2' (CLI: --mesh X=4,Y=2) or write 'mesh X=4, Y=2'"
        )
    say_replaced(ctx.replaced)
    check_or_raise(node, ctx.mesh, ctx.sizes)
    m = ctx.mesh

    def axis(a: str) -> Size:
        return m.size_expr(a) if m[a].size is None else m[a].size

    def dim(d) -> Size:
        if d.size is not None:
            return d.size
        if d.label in ctx.sizes:
            return ctx.sizes[d.label]
        from .symbols import dim_size

        return dim_size(d.label)

    global_shape = tuple(dim(d) for d in tensor.dims)
    groups = tuple(prod((axis(a) for a in d.axes), start=1) for d in tensor.dims)
    symbolic = not all(isinstance(v, int) for v in global_shape + groups) or not m.is_numeric
    if symbolic:
        local = tuple(_sympy_value(g) / n for g, n in zip(global_shape, groups, strict=True))
    else:
        local = tuple(g // n for g, n in zip(global_shape, groups, strict=True))
    dtype = tensor.dtype or DEFAULT_DTYPE
    width = _sympy_value(dtype.bytes) if symbolic else dtype.bytes
    per_device = _normalize(prod(local, start=1) * width)
    devices = prod((axis(a.name) for a in m.axes), start=1)
    fine = refine(m, [a for a in tensor.used_axes if is_subaxis(a)])  # a sub-axis shards part of an axis
    shards = fine.expand_axes(tensor.sharded_axes)
    replication = prod((axis(a) for a in fine.expand_axes(m.names) if a not in shards), start=1)
    return ShapeInfo(
        tensor=tensor,
        mesh=m,
        dtype=dtype,
        dtype_default=tensor.dtype is None,
        global_shape=global_shape,
        local_shape=local,
        bytes_per_device=per_device,
        total_bytes=_normalize(per_device * devices),
        replication=replication,
        devices=devices,
    )
