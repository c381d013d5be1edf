"""The ring shift's cost (``Shift_{X,k}``, JAX's ``ppermute i -> i + k``): one shard per device, one axis.

Shift by k along an axis of n devices (k' = k mod n; each shard goes whole, the short way round):

- ``ici``, on a ring: ``max(T_min·h, h·S/(rate/2))`` with ``h = min(k', n − k')``, the hops of a shard and
  the shards the busiest link carries; on a line the shards that wrap go back across it, so the path is
  ``max(k', n − k')`` hops while the busiest link still carries ``min(k', n − k')`` shards; over DCN one
  message a device, ``S / W_dcn``;
- ``alpha-beta`` and ``alpha-beta-rd``: one message, ``α + S/β``.

A ``Send_{X,k}`` (slice x to x + k, no wrap-around) goes ``|k|`` hops the direct way, and the busiest link
carries ``min(|k|, n − |k|)`` blocks (the sends that cross it); over DCN one message a device; with the
alpha-beta models one message. An offset as long as the axis moves nothing.

A whole turn (k' = 0) moves nothing. With a symbolic axis size the offset is taken as smaller than the axis
(k' = k, or n + k for k < 0) and ``min``/``max`` stay in the formula, so substituting a size gives the
numeric case exactly. The formula is worked out for one byte and kept whole where it has a ``min``.
"""

from __future__ import annotations

import sympy
from sympy import Expr, Integer

from . import terms as tm
from .commcost import AxisLink, CommCost, ab_permute
from .fromsympy import from_sympy

__all__ = ["shift_hops", "shift_unit", "send_hops", "send_unit"]


def shift_hops(link: AxisLink, offset: int) -> tuple[Expr, Expr]:
    """(the longest path in hops, the shards the busiest link carries) of a shift by ``offset``."""
    n = link.size.sympy()
    k = Integer(offset % int(n)) if n.is_number else (Integer(offset) if offset > 0 else n + offset)
    if k == 0:
        return Integer(0), Integer(0)
    near, far = sympy.Min(k, n - k), sympy.Max(k, n - k)
    return (near if link.wraps else far), near


def shift_unit(model: str, link: AxisLink, offset: int, t_min: tm.Term, one_way: tm.Term) -> CommCost | None:
    """The cost of shifting one byte per device by ``offset`` along ``link`` (None when nothing moves)."""
    return _unit(shift_hops(link, offset), model, link, t_min, one_way)


def send_hops(link: AxisLink, offset: int) -> tuple[Expr, Expr]:
    """(the path in hops, the blocks the busiest link carries) of a send by ``offset`` (no wrap-around)."""
    n, k = link.size.sympy(), Integer(abs(offset))
    if n.is_number and k >= n:
        return Integer(0), Integer(0)
    return k, (sympy.Min(k, n - k) if k != 0 else Integer(0))


def send_unit(model: str, link: AxisLink, offset: int, t_min: tm.Term, one_way: tm.Term) -> CommCost | None:
    """The cost of sending one byte per device by ``offset`` along ``link`` (None when nothing moves)."""
    return _unit(send_hops(link, offset), model, link, t_min, one_way)


def _unit(
    hops: tuple[Expr, Expr], model: str, link: AxisLink, t_min: tm.Term, one_way: tm.Term
) -> CommCost | None:
    """The cost of one byte per device moved along ``link`` on a path of ``hops`` (the path in hops, the blocks
    the busiest link carries); None when nothing moves."""
    path, load = hops
    if load == 0:
        return None
    if model != "ici":
        return ab_permute(tm.ONE, (link,))
    if link.dcn:
        return CommCost(((tm.ZERO, tm.ONE / link.rate),), True)
    moved = from_sympy(load)
    return CommCost(((t_min * from_sympy(path), moved / (link.rate * one_way)),), True, ((link.name, moved),))
