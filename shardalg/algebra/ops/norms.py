"""Softmax and the norms over a named dim, one record each: ``softmax_S``, ``rmsnorm_D``, ``layernorm_D``. Each
keeps its operand's layout. Over a dim sharded on axes A a step computes per-row statistics on its block and
all-reduces them over A (softmax: the row max, then the row sum of exponentials; rmsnorm: the sum of squares;
layernorm: the sum and the sum of squares), a few fp32 values per row; the planner's other way is to gather
the dim first. Norms divide by ``sqrt(statistic + EPS)`` and carry no weight (multiply by one with ``⊙``)."""

from __future__ import annotations

from collections.abc import Sequence

from shardalg.notation.syntax import Op

from .function import Kind, function_record, np

__all__ = ["SOFTMAX", "RMSNORM", "LAYERNORM", "RECORDS", "EPS"]

EPS = 1e-6  # the norms' epsilon under the square root


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _softmax_grouped(blocks: Sequence[np.ndarray], axis: int, n: int) -> list[np.ndarray]:
    m = np.maximum.reduce([b.max(axis=axis, keepdims=True) for b in blocks])  # AllReduce (max) of row maxima
    e = [np.exp(b - m) for b in blocks]
    s = sum(x.sum(axis=axis, keepdims=True) for x in e)  # AllReduce (sum) of row sums
    return [x / s for x in e]


def _rmsnorm(x: np.ndarray, axis: int) -> np.ndarray:
    return x / np.sqrt((x * x).mean(axis=axis, keepdims=True) + EPS)


def _rms_grouped(blocks: Sequence[np.ndarray], axis: int, n: int) -> list[np.ndarray]:
    ss = sum((b * b).sum(axis=axis, keepdims=True) for b in blocks)  # AllReduce of sums of squares
    return [b / np.sqrt(ss / n + EPS) for b in blocks]


def _layernorm(x: np.ndarray, axis: int) -> np.ndarray:
    mu = x.mean(axis=axis, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axis, keepdims=True)
    return (x - mu) / np.sqrt(var + EPS)


def _ln_grouped(blocks: Sequence[np.ndarray], axis: int, n: int) -> list[np.ndarray]:
    s1 = sum(b.sum(axis=axis, keepdims=True) for b in blocks)  # one AllReduce of (sum, sum of squares)
    s2 = sum((b * b).sum(axis=axis, keepdims=True) for b in blocks)
    mu = s1 / n
    var = s2 / n - mu * mu
    return [(b - mu) / np.sqrt(var + EPS) for b in blocks]


_STATS = "the statistics' cotangents, all-reduced over the same axes as the forward's statistics"

SOFTMAX = function_record(
    Op.SOFTMAX,
    "softmax_S: [.., S_A, ..] -> [.., S_A, ..]   over a sharded S: AllReduce_A of the row max, then of the row sum",
    shape=Kind.COMPOSITE,
    dense=lambda xs, axis, c: _softmax(xs[0], axis),
    statistics=("max", "sum"),
    stat_reduce="max,sum",
    grouped=_softmax_grouped,
    vector_flops=5,
    transpose_note="dX = P ⊙ (dP - sum_{dim}(dP ⊙ P)): " + _STATS,
)
RMSNORM = function_record(
    Op.RMSNORM,
    "rmsnorm_D: [.., D_A, ..] -> [.., D_A, ..]   over a sharded D: AllReduce_A of the row sum of squares",
    shape=Kind.COMPOSITE,
    dense=lambda xs, axis, c: _rmsnorm(xs[0], axis),
    statistics=("sum of squares",),
    grouped=_rms_grouped,
    vector_flops=4,
    transpose_note=_STATS,
)
LAYERNORM = function_record(
    Op.LAYERNORM,
    "layernorm_D: [.., D_A, ..] -> [.., D_A, ..]  over a sharded D: AllReduce_A of the row sum and sum of squares",
    shape=Kind.COMPOSITE,
    dense=lambda xs, axis, c: _layernorm(xs[0], axis),
    statistics=("sum", "sum of squares"),
    grouped=_ln_grouped,
    vector_flops=7,
    transpose_note=_STATS,
)

RECORDS = (SOFTMAX, RMSNORM, LAYERNORM)
