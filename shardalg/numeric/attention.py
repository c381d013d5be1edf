"""The data movement and global meaning of attention's own steps, registered on ``MOVES`` and ``DENSE``
(:mod:`shardalg.numeric.movement`): a causal softmax (``softmax_{S,causal}``: the keys after each query
masked before the softmax) and a block of attention with online rescaling (``attend_{S,k}``, ring attention's
step).

Positions: a device's block of a dim sharded over axes A starts at ``rank(A) × local size`` (the first axis
major, as the executor cuts blocks). The causal mask hides key s from query t when ``s > t + |S| − |T|``
(queries are the last |T| positions: a decode step's one query sees the whole cache). For a softmax the
query dim is the dim just before S (``Sc[B, H, T, S]``). A block of attention on device a holds the keys of
block ``a − k`` (mod the axes' size) after k shifts round the ring; its state is the attention over the
blocks seen so far, normalized, with its rows' log-sum-exp kept beside it on the device (:class:`State`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from shardalg.algebra.registry import RECORDS
from shardalg.errors import ShardalgError
from shardalg.notation.plan import Step
from shardalg.notation.syntax import Op, Tensor

from .devices import Buffers, VirtualMesh
from .functions import _function
from .kernels import freeze
from .movement import DENSE, MOVES, Net
from .steprules import Layout, step_error

__all__ = ["State", "causal_mask", "attend_block", "attend_grad_block"]


class State(np.ndarray):
    """A block of attention's state on one device: the attention over the blocks seen so far (normalized),
    and ``lse``, its rows' log-sum-exp (Q's dims, the head dim of size 1), which stays on the device."""

    lse: np.ndarray

    def __array_finalize__(self, obj: object) -> None:
        self.lse = getattr(obj, "lse", None)  # type: ignore[assignment]


def causal_mask(t_start: int, t_len: int, s_start: int, s_len: int, t_total: int, s_total: int) -> np.ndarray:
    """``[t_len, s_len]``: True where key s is after query t (masked), positions from the blocks' starts."""
    t = np.arange(t_start, t_start + t_len)[:, None]
    s = np.arange(s_start, s_start + s_len)[None, :]
    return s > t + (s_total - t_total)


def _keys_cover_queries(step: Step, t_total: int, s_total: int) -> None:
    """A causal mask over fewer keys than queries leaves the first queries no key to attend to (a softmax
    of nothing): refused, naming the sizes."""
    if s_total < t_total:
        raise step_error(
            step,
            f"a causal mask needs at least as many keys as queries: {step.dim}={s_total} keys against "
            f"{t_total} queries leaves the first {t_total - s_total} queries no key",
            rule="causal-keys",
        )


def _letters(*tensors: Tensor) -> dict[str, str]:
    out: dict[str, str] = {}
    for t in tensors:
        for d in t.dim_names:
            out.setdefault(d, "abcdefghijklmnopqrstuvwxyz"[len(out)])
    return out


def _scores(
    step: Step, q: np.ndarray, k: np.ndarray, starts: tuple[int, int], totals: tuple[int, int]
) -> tuple[np.ndarray, str, str, str]:
    """A block's scores ``Q·K`` (the keys after each query masked to -inf when the step is causal), with the
    einsum letters of Q, of K and of the scores (Q's dims but the head, then the key dim)."""
    qt, kt = step.inputs[0], step.inputs[1]
    head, key = qt.dims[-1].label, step.dim
    query = next(d for d in qt.dim_names if d not in kt.dim_names)
    ltr = _letters(qt, kt)
    qs, ks = "".join(ltr[d] for d in qt.dim_names), "".join(ltr[d] for d in kt.dim_names)
    rows = "".join(ltr[d] for d in qt.dim_names if d != head)
    sk = f"{rows}{ltr[key]}"
    scores = np.einsum(f"{qs},{ks}->{sk}", q, k)
    if "causal" in step.flags:
        _keys_cover_queries(step, *totals)
        mask = causal_mask(
            starts[0],
            q.shape[qt.dim_names.index(query)],
            starts[1],
            k.shape[kt.dim_names.index(key)],
            *totals,
        )
        shape = [1] * scores.ndim
        shape[rows.index(ltr[query])], shape[-1] = mask.shape
        scores = np.where(mask.reshape(shape), -np.inf, scores)
    return scores, qs, ks, sk


def attend_block(
    step: Step,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    state: np.ndarray | None,
    starts: tuple[int, int],
    totals: tuple[int, int],
) -> State:
    """One device's block: its queries (starting at ``starts[0]`` of ``totals[0]``) against its keys and
    values (starting at ``starts[1]`` of ``totals[1]``), merged into ``state`` (or starting one)."""
    scores, qs, ks, sk = _scores(step, q, k, starts, totals)
    m = scores.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(scores - m)
    l_ = e.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        lse = m + np.log(l_)  # -inf for a row whose keys here are all masked
    o = np.einsum(f"{sk},{ks}->{qs}", e / np.where(l_ > 0, l_, 1.0), v)
    # lse: Q's dims with the head dim (Q's last) of size 1, as the rows' dims are Q's but the head
    if state is not None:
        prev = getattr(state, "lse", None)
        if prev is None:
            raise ShardalgError(f"the state {state.shape} of a block of attention has no statistics")
        both = np.logaddexp(prev, lse)
        safe = np.where(np.isfinite(both), both, 0.0)
        o = np.asarray(state) * np.exp(prev - safe) + o * np.exp(lse - safe)
        lse = both
    out = np.ascontiguousarray(o).view(State)
    out.lse = lse
    return out


def _on_devices(
    vm: VirtualMesh, step: Step, bufs: Sequence[Buffers], block: Callable[..., np.ndarray]
) -> tuple[Buffers, Layout]:
    """A block of attention (forward or backward) on each device: ``block(values, starts, totals)`` on the
    device's buffers, its queries starting at its rank × their local size, its keys those of the block
    ``offset`` before it round the ring (or every key, when the key dim is whole)."""
    rec = RECORDS[step.op]
    try:
        made = rec.apply(step.inputs, step.dim, vm.mesh, step.axes, flags=step.flags)
    except ShardalgError as err:
        raise step_error(step, err.message) from None
    qt, kt = step.inputs[0], step.inputs[1]
    query = next(d for d in qt.dim_names if d not in kt.dim_names)
    axes, keys = qt.axes_of(query), kt.axes_of(step.dim)
    n = vm.size(axes) if axes else 1
    nk = vm.size(keys) if keys else 1  # n (paired blocks), or 1 (every device holds every key)
    out: dict = {}
    for c in vm.coords:
        values = [b[c] for b in bufs]
        tl, sl = values[0].shape[qt.dim_names.index(query)], values[1].shape[kt.dim_names.index(step.dim)]
        mine = vm.rank(c, axes) if axes else 0
        theirs = (mine - (step.offset or 0)) % n if keys else 0
        out[c] = freeze(block(values, (mine * tl, theirs * sl), (tl * n, sl * nk)))
    return out, (tuple(d.axes for d in made.dims), frozenset(made.unreduced))


def _attend(vm: VirtualMesh, net: Net, step: Step, *bufs: Buffers) -> tuple[Buffers, Layout]:
    def block(values: list[np.ndarray], starts: tuple[int, int], totals: tuple[int, int]) -> State:
        state = values[3] if len(values) == 4 else None
        return attend_block(step, *values[:3], state, starts, totals)

    return _on_devices(vm, step, bufs, block)


def _block(a: np.ndarray, axis: int, i: int, width: int) -> np.ndarray:
    """Block ``i`` (of ``width``) of ``a`` along ``axis``."""
    return np.take(a, range(i * width, (i + 1) * width), axis=axis)


def _attend_dense(step: Step, values: Sequence[np.ndarray], vm: VirtualMesh) -> np.ndarray:
    """On whole arrays: query block b with block b of K and V, which k shifts round the ring (each rolls
    their global value) filled with the keys of block b − k, for each block b of the query dim's axes."""
    qt, kt = step.inputs[0], step.inputs[1]
    query = next(d for d in qt.dim_names if d not in kt.dim_names)
    axes, keys = qt.axes_of(query), kt.axes_of(step.dim)
    n = vm.size(axes) if axes else 1
    nk = n if keys else 1
    qa, ka = qt.dim_names.index(query), kt.dim_names.index(step.dim)
    q, k, v = values[:3]
    tl, sl = q.shape[qa] // n, k.shape[ka] // nk
    parts, stats = [], []
    for b in range(n):
        kb = (b - (step.offset or 0)) % n if keys else 0
        kpos = b if keys else 0
        state = None
        if len(values) == 4:
            state = _block(values[3], qa, b, tl).view(State)
            state.lse = _block(values[3].lse, qa, b, tl)  # type: ignore[attr-defined]
        got = attend_block(
            step,
            _block(q, qa, b, tl),
            _block(
                k, ka, kpos, sl
            ),  # the shifts rolled K and V's global values: block b holds block kb's keys
            _block(v, ka, kpos, sl),
            state,
            (b * tl, kb * sl),
            (q.shape[qa], k.shape[ka]),
        )
        parts.append(np.asarray(got))
        stats.append(got.lse)
    out = np.concatenate(parts, axis=qa).view(State)
    out.lse = np.concatenate(stats, axis=qa)
    return out


def _masked(step: Step, arr: np.ndarray, starts: tuple[int, int], totals: tuple[int, int]) -> np.ndarray:
    t = step.inputs[0]
    s_axis = t.dim_names.index(step.dim)
    if s_axis == 0:
        raise step_error(step, f"a causal softmax_{step.dim} masks by the query dim just before {step.dim}")
    _keys_cover_queries(step, *totals)
    mask = causal_mask(starts[0], arr.shape[s_axis - 1], starts[1], arr.shape[s_axis], *totals)
    shape = [1] * arr.ndim
    shape[s_axis - 1], shape[s_axis] = mask.shape
    return np.where(mask.reshape(shape), -np.inf, arr)


def _softmax(vm: VirtualMesh, net: Net, step: Step, *bufs: Buffers) -> tuple[Buffers, Layout]:
    if "causal" not in step.flags:
        return _function(vm, net, step, *bufs)
    t = step.inputs[0]
    s_axis = t.dim_names.index(step.dim) if step.dim in t.dim_names else 0
    if s_axis == 0:
        raise step_error(step, f"a causal softmax_{step.dim} masks by the query dim just before {step.dim}")
    query = t.dim_names[s_axis - 1]
    qa, sa = t.axes_of(query), t.axes_of(step.dim)
    masked = {}
    for c, arr in bufs[0].items():
        tl, sl = arr.shape[s_axis - 1], arr.shape[s_axis]
        nq, ns = (vm.size(qa) if qa else 1), (vm.size(sa) if sa else 1)
        starts = ((vm.rank(c, qa) if qa else 0) * tl, (vm.rank(c, sa) if sa else 0) * sl)
        masked[c] = freeze(_masked(step, arr, starts, (tl * nq, sl * ns)))
    return _function(vm, net, step, masked)


def _softmax_dense(step: Step, values: Sequence[np.ndarray], vm: VirtualMesh) -> np.ndarray:
    rec = RECORDS[step.op]
    arr = values[0]
    if "causal" in step.flags:
        s_axis = step.inputs[0].dim_names.index(step.dim)
        arr = _masked(step, arr, (0, 0), (arr.shape[max(0, s_axis - 1)], arr.shape[s_axis]))
    return np.asarray(rec.dense([arr], step.inputs[0].dim_names.index(step.dim), None))


MOVES.register(Op.ATTEND)(_attend)
DENSE.register(Op.ATTEND)(_attend_dense)
MOVES.register(Op.SOFTMAX)(_softmax)
DENSE.register(Op.SOFTMAX)(_softmax_dense)


def attend_grad_block(
    step: Step,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    o: np.ndarray,
    do: np.ndarray,
    starts: tuple[int, int],
    totals: tuple[int, int],
) -> np.ndarray:
    """One device's block backward (``attend'``): the block's probabilities remade from O's rows' log-sum-exp,
    then the gradient the step's flag names (dq, dk or dv), as flash attention's backward computes it."""
    lse = getattr(o, "lse", None)
    if lse is None:
        raise step_error(
            step,
            "a block's backward reads the rows' log-sum-exp the forward's attend keeps beside O; this O has "
            "none (run the forward's blocks first)",
            rule="attend-statistics",
        )
    scores, qs, ks, sk = _scores(step, q, k, starts, totals)
    p = np.exp(scores - np.asarray(lse))  # lse: Q's dims, the head dim of size 1 (the rows', then 1)
    which = next(f for f in step.flags if f in ("dq", "dk", "dv"))
    if which == "dv":
        return np.einsum(f"{sk},{qs}->{ks}", p, do)
    d = np.sum(np.asarray(do) * np.asarray(o), axis=-1, keepdims=True)
    ds = p * (np.einsum(f"{qs},{ks}->{sk}", do, v) - d)
    if which == "dq":
        return np.einsum(f"{sk},{ks}->{qs}", ds, k)
    return np.einsum(f"{sk},{qs}->{ks}", ds, q)


def _attend_grad(vm: VirtualMesh, net: Net, step: Step, *bufs: Buffers) -> tuple[Buffers, Layout]:
    def block(values: list[np.ndarray], starts: tuple[int, int], totals: tuple[int, int]) -> np.ndarray:
        return attend_grad_block(step, *values, starts, totals)

    return _on_devices(vm, step, bufs, block)


def _attend_grad_dense(step: Step, values: Sequence[np.ndarray], vm: VirtualMesh) -> np.ndarray:
    """On whole arrays, block by block of the query dim's axes as :func:`_attend_dense`: dQ's blocks side by
    side; dK's and dV's side by side when the keys are sharded with the queries (block b is the block the
    device of block b holds), summed when every device holds every key."""
    qt, kt = step.inputs[0], step.inputs[1]
    query = next(d for d in qt.dim_names if d not in kt.dim_names)
    axes, keys = qt.axes_of(query), kt.axes_of(step.dim)
    n = vm.size(axes) if axes else 1
    nk = n if keys else 1
    qa, ka = qt.dim_names.index(query), kt.dim_names.index(step.dim)
    q, k, v, o, do = values
    tl, sl = q.shape[qa] // n, k.shape[ka] // nk
    which = next(f for f in step.flags if f in ("dq", "dk", "dv"))
    parts = []
    for b in range(n):
        kb = (b - (step.offset or 0)) % n if keys else 0
        kpos = b if keys else 0
        ob = _block(o, qa, b, tl).view(State)
        ob.lse = _block(o.lse, qa, b, tl) if getattr(o, "lse", None) is not None else None  # type: ignore[attr-defined]
        parts.append(
            attend_grad_block(
                step,
                _block(q, qa, b, tl),
                _block(k, ka, kpos, sl),
                _block(v, ka, kpos, sl),
                ob,
                _block(do, qa, b, tl),
                (b * tl, kb * sl),
                (q.shape[qa], k.shape[ka]),
            )
        )
    if which == "dq":
        return np.concatenate(parts, axis=qa)
    return np.concatenate(parts, axis=ka) if keys else sum(parts[1:], parts[0])


MOVES.register(Op.ATTEND_D)(_attend_grad)
DENSE.register(Op.ATTEND_D)(_attend_grad_dense)
