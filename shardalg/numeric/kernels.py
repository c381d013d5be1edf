"""The executor's arithmetic: every buffer it allocates, and the local product through BLAS.

``allocate`` is the one place the executor (the random inputs, ``shard``, each op's data movement, the local
product and the copies it needs, the dense reference, ``unshard``) asks for new memory: a cap on how many
elements a run may hold goes here. Buffers
the executor makes are read-only once filled (``freeze``), so devices that hold the same block may share
one array: nothing ever writes into a buffer after it is made.

``contract`` is a two-operand einsum as one batched ``matmul`` (BLAS for floats): dims summed in one operand
only are summed first, then each operand is laid out as (batch, free, contracted) and multiplied; the
result comes back as a view in the output's dim order (a copy only when numpy must make one to reshape).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

import numpy as np

__all__ = ["allocate", "freeze", "contract", "readonly_view", "contiguous"]


def allocate(shape: Sequence[int], dtype: np.dtype | type, *, zero: bool = False) -> np.ndarray:
    """A new buffer of ``shape``: uninitialized, or zeros with ``zero``. Every array the executor makes
    comes from here."""
    shape = tuple(int(n) for n in shape)
    return np.zeros(shape, dtype=dtype) if zero else np.empty(shape, dtype=dtype)


def freeze(a: np.ndarray) -> np.ndarray:
    """Mark a buffer the executor made (and filled) read-only; returns it."""
    a.flags.writeable = False
    return a


def readonly_view(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a`` (the caller's array keeps its own flags)."""
    v = a.view()
    v.flags.writeable = False
    return v


def contiguous(a: np.ndarray) -> np.ndarray:
    """``a`` itself when C-contiguous (reshapes are then views), else a copy made through ``allocate``."""
    if a.flags.c_contiguous:
        return a
    out = allocate(a.shape, a.dtype)
    np.copyto(out, a)
    return out


def _sum_alone(a: np.ndarray, letters: str, keep: set[str]) -> tuple[np.ndarray, str]:
    """Sum the dims of ``a`` that no one else needs (not in the other operand, not in the result)."""
    drop = tuple(i for i, x in enumerate(letters) if x not in keep)
    if not drop:
        return a, letters
    rest = "".join(x for x in letters if x in keep)
    out = allocate([a.shape[i] for i, x in enumerate(letters) if x in keep], np.result_type(a))
    np.sum(a, axis=drop, out=out)
    return out, rest


def contract(spec: str, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """``np.einsum(spec, left, right)`` for a spec ``"ab,bc->ac"`` whose letters are distinct within each
    operand and within the result, as one batched matmul."""
    ins, out = spec.split("->")
    la, lb = ins.split(",")
    a, la = _sum_alone(left, la, set(lb) | set(out))
    b, lb = _sum_alone(right, lb, set(la) | set(out))
    batch = [x for x in out if x in la and x in lb]
    contr = [x for x in la if x in lb and x not in out]
    free_a = [x for x in la if x not in lb]
    free_b = [x for x in lb if x not in la]
    ext = {**dict(zip(la, a.shape, strict=True)), **dict(zip(lb, b.shape, strict=True))}
    nb, m, n, k = (prod(ext[x] for x in group) for group in (batch, free_a, free_b, contr))
    a3 = contiguous(a.transpose([la.index(x) for x in (*batch, *free_a, *contr)])).reshape(nb, m, k)
    b3 = contiguous(b.transpose([lb.index(x) for x in (*batch, *contr, *free_b)])).reshape(nb, k, n)
    res = allocate((nb, m, n), np.result_type(a, b))
    np.matmul(a3, b3, out=res)
    order = [*batch, *free_a, *free_b]
    shaped = res.reshape([ext[x] for x in order])
    return shaped.transpose([order.index(x) for x in out])
