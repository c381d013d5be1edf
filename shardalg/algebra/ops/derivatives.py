"""The functions' derivatives, one record each: the statements a backward writes for a nonlinear function or a
reduction (issue 26 item 4). ``f'(X, dY) -> dX`` is the vector-Jacobian product of ``f`` at its operand ``X``
applied to the cotangent ``dY`` of its result; it has ``X``'s dims and layout (``dY`` broadcast along the dim a
reduction removed), and what it reads is what the forward keeps for it:

- **elementwise** ``gelu'``, ``silu'``, ``exp'``, ``relu'``: ``dY ⊙ f'(X)`` on each device's block, in the
  layout the two meet in (no communication); the forward's operand ``X`` is kept.
- **reductions** ``sum'_D``, ``mean'_D``: the transpose of a sum is a broadcast of ``dY`` along D (divided by
  |D| for a mean); over a sharded D each device writes its own block, no communication (``X`` is read for its
  shape only). ``max'_D``: the cotangent routed to the position of the maximum (split evenly among ties, as
  JAX does); over a sharded D the row maximum and the count of its ties are all-reduced, as the forward's
  maximum is.
- **softmax** ``softmax'_S(P, dP)``: ``P ⊙ (dP − sum_S(dP ⊙ P))``; it reads the forward's *result* ``P``. Over
  a sharded S the per-row dot product ``sum_S(dP ⊙ P)`` is all-reduced over S's axes (one fp32 per row).
- **norms** ``rmsnorm'_D(X, dY)``, ``layernorm'_D(X, dY)``: from the row statistics of ``X`` and ``dY``
  (rmsnorm: ``sum X²`` and ``sum dY ⊙ X``; layernorm: also ``sum X`` and ``sum dY``), all-reduced over D's
  axes when D is sharded (2 or 4 fp32 per row); the forward's operand ``X`` is kept.

Each record's ``grouped`` evaluates it over the blocks of one group of devices along the dim (each block a
pair: the operand's block and the cotangent's, aligned to the operand's dims): the local statistics, combined
over the group, then applied; ``dense`` is the same on whole arrays (a group of one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from shardalg.notation.syntax import Op

from .elementwise import GELU_C, GELU_K
from .function import Dense, Kind, function_record, np, records
from .norms import EPS

__all__ = [
    "GELU_D",
    "SILU_D",
    "EXP_D",
    "RELU_D",
    "SUM_D",
    "MEAN_D",
    "MAX_D",
    "SOFTMAX_D",
    "RMSNORM_D",
    "LAYERNORM_D",
    "RECORDS",
    "DERIVATIVE",
]

Pairs = Sequence[tuple["np.ndarray", "np.ndarray"]]  # each device's (operand block, aligned cotangent block)


def _total(parts: Sequence[np.ndarray]) -> np.ndarray:
    """A statistic summed over the group: the AllReduce of the devices' per-row values."""
    return sum(parts[1:], parts[0])


# ---- elementwise: the cotangent times the derivative at the operand ---------------------------------------


def _gelu_prime(x: np.ndarray) -> np.ndarray:
    """The derivative of GELU's tanh form (``jax.nn.gelu``'s default)."""
    t = np.tanh(GELU_C * (x + GELU_K * x**3))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3.0 * GELU_K * x * x)


def _silu_prime(x: np.ndarray) -> np.ndarray:
    s = 1.0 / (1.0 + np.exp(-x))
    return s * (1.0 + x * (1.0 - s))


def _pointwise(prime: Callable[[np.ndarray], np.ndarray]) -> Dense:
    return lambda xs, axis, c: xs[1] * prime(xs[0])


_SAME = "a derivative: the backward of the backward is not derived (first-order only)"

# One row per function's derivative: (op, its signature and rule, its dense meaning, its facts); each takes the
# operand and the cotangent, in the layout the two meet in.
_POINTWISE: tuple[tuple[Op, str, Dense, dict[str, object]], ...] = (
    (
        Op.GELU_D,
        "gelu': [..], [..] -> [..]   dY ⊙ gelu'(X), elementwise in the layout X and dY meet in; reads X",
        _pointwise(_gelu_prime),
        {"derivative_of": "gelu", "vector_flops": 14},
    ),
    (
        Op.SILU_D,
        "silu': [..], [..] -> [..]   dY ⊙ σ(X)(1 + X(1 − σ(X))), elementwise; reads X",
        _pointwise(_silu_prime),
        {"derivative_of": "silu", "vector_flops": 7},
    ),
    (
        Op.EXP_D,
        "exp': [..], [..] -> [..]    dY ⊙ exp(X), elementwise; reads X",
        _pointwise(lambda x: np.exp(x)),  # numpy on first use (np is lazy here)
        {"derivative_of": "exp", "vector_flops": 2},
    ),
    (
        Op.RELU_D,
        "relu': [..], [..] -> [..]   dY where X > 0, else 0, elementwise; reads X",
        _pointwise(lambda x: (x > 0).astype(x.dtype)),
        {"derivative_of": "relu", "vector_flops": 1},
    ),
)
GELU_D, SILU_D, EXP_D, RELU_D = records(_POINTWISE, arity=2, transpose_note=_SAME)


# ---- over a dim: evaluated group by group along it ---------------------------------------------------------


def _broadcast(scale_by_n: bool):
    def grouped(pairs: Pairs, axis: int, n: int) -> list[np.ndarray]:
        return [np.broadcast_to(dy / n if scale_by_n else dy, x.shape).copy() for x, dy in pairs]

    return grouped


def _max_grouped(pairs: Pairs, axis: int, n: int) -> list[np.ndarray]:
    m = np.maximum.reduce([x.max(axis=axis, keepdims=True) for x, _ in pairs])  # AllReduce (max)
    hits = [(x == m).astype(x.dtype) for x, _ in pairs]
    count = _total([h.sum(axis=axis, keepdims=True) for h in hits])  # AllReduce (sum) of the ties
    return [h * dy / count for h, (_, dy) in zip(hits, pairs, strict=True)]


def _softmax_grouped(pairs: Pairs, axis: int, n: int) -> list[np.ndarray]:
    dot = _total([(dp * p).sum(axis=axis, keepdims=True) for p, dp in pairs])  # AllReduce of sum_S(dP ⊙ P)
    return [p * (dp - dot) for p, dp in pairs]


def _rms_grouped(pairs: Pairs, axis: int, n: int) -> list[np.ndarray]:
    ss = _total([(x * x).sum(axis=axis, keepdims=True) for x, _ in pairs])  # one AllReduce of the pair
    dot = _total([(dy * x).sum(axis=axis, keepdims=True) for x, dy in pairs])
    r = np.sqrt(ss / n + EPS)
    return [dy / r - x * dot / (n * r**3) for x, dy in pairs]


def _ln_grouped(pairs: Pairs, axis: int, n: int) -> list[np.ndarray]:
    s1 = _total([x.sum(axis=axis, keepdims=True) for x, _ in pairs])  # one AllReduce of the four
    s2 = _total([(x * x).sum(axis=axis, keepdims=True) for x, _ in pairs])
    g1 = _total([dy.sum(axis=axis, keepdims=True) for _, dy in pairs])
    g2 = _total([(dy * x).sum(axis=axis, keepdims=True) for x, dy in pairs])
    mu = s1 / n
    sigma = np.sqrt(s2 / n - mu * mu + EPS)
    dy_y = (g2 - mu * g1) / (n * sigma)  # mean_D(dY ⊙ Y), Y = (X − μ)/σ
    return [(dy - g1 / n - (x - mu) / sigma * dy_y) / sigma for x, dy in pairs]


def _whole(grouped):
    """The function on whole arrays: the group of one device."""
    return lambda xs, axis, c: grouped([(xs[0], xs[1])], axis, xs[0].shape[axis])[0]


def _over_dim(op: Op, doc: str, grouped, flops: int, statistics: tuple[str, ...] = (), **facts: object):
    return function_record(
        op,
        doc,
        derivative_of=op.value[:-1],
        arity=2,
        shape=Kind.DERIVATIVE,
        dense=_whole(grouped),
        grouped=grouped,
        statistics=statistics,
        vector_flops=flops,
        transpose_note=_SAME,
        **facts,
    )


SUM_D = _over_dim(
    Op.SUM_D,
    "sum'_D: [.., D_A, ..], [..] -> [.., D_A, ..]   the transpose of a sum: dY broadcast along D (each "
    "device its block, no communication); X read for its shape",
    _broadcast(False),
    1,
    drops_dim=True,
    shape_only=True,
)
MEAN_D = _over_dim(
    Op.MEAN_D,
    "mean'_D: [.., D_A, ..], [..] -> [.., D_A, ..]  dY broadcast along D, divided by |D|; X read for its shape",
    _broadcast(True),
    1,
    drops_dim=True,
    shape_only=True,
)
MAX_D = _over_dim(
    Op.MAX_D,
    "max'_D: [.., D_A, ..], [..] -> [.., D_A, ..]   dY to the maximum's position (ties split); over a sharded "
    "D: AllReduce_A of the row max, then of the count of its ties; reads X",
    _max_grouped,
    3,
    ("max", "count"),
    stat_reduce="max,sum",
    drops_dim=True,
)
SOFTMAX_D = _over_dim(
    Op.SOFTMAX_D,
    "softmax'_S: [.., S_A, ..], [.., S_A, ..] -> [.., S_A, ..]   P ⊙ (dP − sum_S(dP ⊙ P)); over a sharded S: "
    "AllReduce_A of the row dot product; reads the forward's result P",
    _softmax_grouped,
    4,
    ("dot",),
)
RMSNORM_D = _over_dim(
    Op.RMSNORM_D,
    "rmsnorm'_D: [.., D_A, ..], [.., D_A, ..] -> [.., D_A, ..]   over a sharded D: AllReduce_A of the row sum "
    "of squares and dot product sum_D(dY ⊙ X); reads X",
    _rms_grouped,
    7,
    ("sum of squares", "dot"),
)
LAYERNORM_D = _over_dim(
    Op.LAYERNORM_D,
    "layernorm'_D: [.., D_A, ..], [.., D_A, ..] -> [.., D_A, ..]  over a sharded D: AllReduce_A of the row "
    "sums of X, X², dY and dY ⊙ X; reads X",
    _ln_grouped,
    11,
    ("sum", "sum of squares", "sum of cotangents", "dot"),
)

RECORDS = (GELU_D, SILU_D, EXP_D, RELU_D, SUM_D, MAX_D, MEAN_D, SOFTMAX_D, RMSNORM_D, LAYERNORM_D)

# the derivative of each nonlinear function and reduction: what the backward writes for it
DERIVATIVE: dict[Op, Op] = {
    Op.GELU: Op.GELU_D,
    Op.SILU: Op.SILU_D,
    Op.EXP: Op.EXP_D,
    Op.RELU: Op.RELU_D,
    Op.SUM: Op.SUM_D,
    Op.MAX: Op.MAX_D,
    Op.MEAN: Op.MEAN_D,
    Op.SOFTMAX: Op.SOFTMAX_D,
    Op.RMSNORM: Op.RMSNORM_D,
    Op.LAYERNORM: Op.LAYERNORM_D,
}
