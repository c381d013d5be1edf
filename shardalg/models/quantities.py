"""Sizes of tensors as sympy values, and the one conversion of a quantity to JSON and text.

A quantity is a sympy expression over the dim and axis symbols of :mod:`shardalg.algebra.symbols`; it is a
number once every size is bound. ``as_json`` gives an int (or a float for a fraction) when it is a number and
its sympy text otherwise, which is the stable JSON contract of every ``--json`` of this package.
"""

from __future__ import annotations

from collections.abc import Mapping

import sympy
from sympy import Expr, Integer, Rational

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.shape import format_bytes
from shardalg.algebra.symbols import dim_size
from shardalg.algebra.traffic import DEFAULT_DTYPE
from shardalg.notation.syntax import Dim, Tensor

__all__ = [
    "dim_value",
    "elements",
    "local_elements",
    "tensor_bytes",
    "dtype_bytes",
    "as_json",
    "as_text",
    "bytes_text",
    "time_text",
    "is_number",
]


def dim_value(d: Dim, sizes: Mapping[str, int]) -> Expr:
    """A dim's global size: its literal, its bound size, else its positive integer symbol."""
    if d.size is not None:
        return Integer(d.size)
    if d.label in sizes:
        return Integer(sizes[d.label])
    return dim_size(d.label)


def elements(t: Tensor, sizes: Mapping[str, int]) -> Expr:
    """Global element count of ``t``."""
    return sympy.Mul(*(dim_value(d, sizes) for d in t.dims))


def local_elements(t: Tensor, mesh: Mesh, sizes: Mapping[str, int]) -> Expr:
    """Elements one device holds: each dim divided by the sizes of the axes that shard it."""
    return sympy.Mul(*(dim_value(d, sizes) / sympy.Mul(*(mesh.size_expr(a) for a in d.axes)) for d in t.dims))


def dtype_bytes(t: Tensor) -> Expr:
    """Bytes per element (bf16 when the tensor has no dtype: the book's default)."""
    width = (t.dtype or DEFAULT_DTYPE).bytes
    return Rational(width.numerator, width.denominator)


def tensor_bytes(t: Tensor, mesh: Mesh | None, sizes: Mapping[str, int]) -> Expr:
    """Bytes of ``t`` on one device (``mesh`` given) or in all (``mesh`` None: the tensor once, unsharded)."""
    count = elements(t, sizes) if mesh is None else local_elements(t, mesh, sizes)
    return count * dtype_bytes(t)


def is_number(x: Expr) -> bool:
    return not x.free_symbols if isinstance(x, sympy.Basic) else True


def as_json(x: Expr | int | float | None) -> int | float | str | None:
    """A number when ``x`` is one (an int when integral), else its sympy text."""
    if x is None:
        return None
    if isinstance(x, bool):
        return x
    if isinstance(x, int):
        return x
    if isinstance(x, float):
        return int(x) if x.is_integer() and abs(x) < 2**53 else x
    if x.free_symbols:
        return sympy.sstr(x)
    if x.is_Integer:
        return int(x)
    value = float(x)
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def as_text(x: Expr | int | float) -> str:
    """A count or a rate for people: ``13,015,864,320``, ``4.2e+13``, or the formula."""
    value = as_json(x)
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.4g}"


def time_text(seconds: float) -> str:
    """Seconds for people, to four significant digits in s, ms, us or ns: ``2.5 ms``."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds * 1e9:.4g} ns"


def bytes_text(x: Expr) -> str:
    """Bytes for people: ``1,048,576 bytes (1 MiB)``, or the formula with ``bytes``."""
    value = as_json(x)
    if isinstance(value, int):
        return format_bytes(value)
    if isinstance(value, float):
        return format_bytes(int(round(value))) if value == int(value) else f"{value:.4g} bytes"
    return f"{value} bytes"
