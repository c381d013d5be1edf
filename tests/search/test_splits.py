"""Integer axis sizes next to the continuous optimum: the book's worked example of FSDP+TP on a TPU v5p
4x4x4 slice (N = 64, F = 32768, B = 48000, X spanning two cube axes and Y one: M_X = 2, M_Y = 1).

X_opt = sqrt(B·M_X·N/(F·M_Y)) = sqrt(187.5) ≈ 13.69 here (the book's text rounds it to about 13.9); the
divisors of 64 around it are 8 and 16, and both the divisors and the torus's whole-axis splits, priced with
the engine's cost on the chip's numbers, put X = 16, Y = 4 first, the book's choice."""

from __future__ import annotations

import math

import pytest
import sympy

from shardalg.errors import UsageError
from shardalg.search import axis_splits, divisors, minimize, torus_splits

from .mlp import M_X, M_Y, B, D, F, N, X, Y, parts, priced

BOOK = {B: 48000, F: 32768, D: 8192, N: 64, M_X: 2, M_Y: 1}


def _fsdp_tp():
    pc = priced("FSDP+TP", "forward", "steady", "tpu-v5p")
    return pc, minimize(pc.total, X, 1, N, parts=parts(pc), substitute={Y: N / X})


def test_continuous_optimum_and_the_divisors_around_it():
    pc, m = _fsdp_tp()
    assert sympy.simplify(m.optimum - sympy.sqrt(B * M_X * N / (F * M_Y))) == 0
    values = {**pc.values, **BOOK}
    splits = [{X: d, Y: 64 // d} for d in divisors(64)]
    s = axis_splits(pc.total, X, 64, values, optimum=m, splits=splits, then=pc.comms)
    assert s.continuous == pytest.approx(math.sqrt(48000 * 2 * 64 / 32768))
    assert (s.below, s.above) == (8, 16)
    # at this batch X = 8, 16 and 32 are all compute-bound (equal time); the least communication breaks the
    # tie, and that is X = 16, next to X_opt, where FSDP's and TP's communication are closest to balanced
    assert [sp.values[0][1] for sp in s.ranked[:3]] == [16, 8, 32]
    assert s.ranked[0].cost == pytest.approx(s.ranked[2].cost, rel=1e-12)
    assert s.best.values == ((X, 16), (Y, 4))
    by_comms = axis_splits(pc.comms, X, 64, values, splits=splits)
    assert by_comms.best.values == ((X, 16), (Y, 4))
    assert "continuous optimum: X_opt = " in str(s) and s.to_json()["ranked"][0]["values"] == {
        "X": 16,
        "Y": 4,
    }


def test_the_torus_splits_by_whole_axes_agree():
    pc, m = _fsdp_tp()
    splits = torus_splits((4, 4, 4), X, Y, M_X, M_Y)
    assert splits == ({X: 4, Y: 16, M_X: 1, M_Y: 2}, {X: 16, Y: 4, M_X: 2, M_Y: 1})
    s = axis_splits(pc.total, X, 64, {**pc.values, **BOOK}, optimum=m, splits=splits, then=pc.comms)
    assert s.best.values == ((X, 16), (Y, 4), (M_X, 2), (M_Y, 1))
    assert s.ranked[1].cost == s.ranked[0].cost and s.ranked[1].then > s.ranked[0].then  # both compute-bound


def test_divisors_and_refusals():
    assert divisors(64) == (1, 2, 4, 8, 16, 32, 64)
    assert divisors(12) == (1, 2, 3, 4, 6, 12)
    with pytest.raises(UsageError, match="a device count is a positive integer"):
        divisors(0)
    with pytest.raises(UsageError, match="is refused"):
        divisors(10**13)
    with pytest.raises(UsageError, match="a torus shape is two or more axis lengths"):
        torus_splits((4,), X, Y, M_X, M_Y)
    pc, _ = _fsdp_tp()
    with pytest.raises(
        UsageError, match="the cost at {X: 1} needs values for B, C, D, F, M_X, M_Y, W_ici, Y"
    ):
        axis_splits(pc.total, X, 64, {N: 64})
