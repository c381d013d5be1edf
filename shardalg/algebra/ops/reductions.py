"""The reductions over a named dim, one record each: ``sum_D``, ``mean_D`` (linear: over a sharded dim the result
is a partial sum, ``{U_axes}``, as an einsum's contraction is) and ``max_D`` (not a sum: over a sharded dim its
step all-reduces the per-row maxima, a max instead of a sum, over the dim's axes)."""

from __future__ import annotations

from collections.abc import Sequence

from shardalg.notation.syntax import Op

from .function import Dense, Kind, np, records

__all__ = ["SUM", "MEAN", "MAX", "RECORDS"]


def _max_grouped(blocks: Sequence[np.ndarray], axis: int, n: int) -> list[np.ndarray]:
    local = [b.max(axis=axis) for b in blocks]
    whole = np.maximum.reduce(local)
    return [whole for _ in blocks]


# One row per reduction: (op, its signature and rule, its dense meaning, its facts).
_ROWS: tuple[tuple[Op, str, Dense, dict[str, object]], ...] = (
    (
        Op.SUM,
        "sum_D: [.., D_A, ..]{U_B} -> [..]{U_AB}   over a sharded D a partial sum (no communication)",
        lambda xs, axis, c: xs[0].sum(axis=axis),
        {
            "linear": True,
            "transpose_note": "a broadcast of the cotangent along {dim} (over a sharded {dim}: each device's block)",
        },
    ),
    (
        Op.MAX,
        "max_D: [.., D_A, ..] -> [..]     over a sharded D: local maxima, then AllReduce_A (max) of them",
        lambda xs, axis, c: xs[0].max(axis=axis),
        {
            "statistics": ("max",),
            "stat_reduce": "max",
            "grouped": _max_grouped,
            "transpose_note": "the cotangent to the position of the maximum (same layout as the operand)",
        },
    ),
    (
        Op.MEAN,
        "mean_D: [.., D_A, ..]{U_B} -> [..]{U_AB}  the sum over D divided by |D|: over a sharded D a partial sum",
        lambda xs, axis, c: xs[0].mean(axis=axis),
        {"linear": True, "transpose_note": "a broadcast of the cotangent along {dim}, divided by |{dim}|"},
    ),
)

RECORDS = records(_ROWS, shape=Kind.REDUCTION)
SUM, MAX, MEAN = RECORDS
