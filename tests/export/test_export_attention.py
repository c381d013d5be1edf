"""The attention core's plans exported as jax.shard_map code and run on 8 fake CPU devices (X=4, Y=2) against
the dense result: the ring (attend blocks with their online rescaling, Shift_{X,+1} as ppermute), the gathered
plan and the causal softmax's mask, from each device's axis_index (issue 26 item 3, the export's share)."""

from __future__ import annotations

import pytest

import shardalg

pytest.importorskip("jax", reason="jax is not installed (pip install 'shardalg[jax]'); CI installs it")

from shardalg.algebra.mesh import Mesh
from shardalg.export.jax import check_jax  # noqa: E402

MESH = Mesh.parse("X=4,Y=2")
SIZES = {"B": 2, "T": 8, "S": 8, "H": 2, "E": 4}


def core(flags: str) -> str:
    sub = "S" if not flags else "{S," + flags + "}"
    return (
        "Q[B, T_X, H_Y, E] · K[B, S_X, H_Y, E] -> Sc[B, H_Y, T_X, S]; "
        f"softmax_{sub}(Sc[B, H_Y, T_X, S]) -> P[B, H_Y, T_X, S]; "
        "P[B, H_Y, T_X, S] · V[B, S_X, H_Y, E] -> O[B, T_X, H_Y, E]"
    )


def test_every_plan_of_the_core_runs_in_jax_and_equals_dense() -> None:
    plans = [
        p
        for flags in ("", "causal", "causal,flash")
        for p in shardalg.plans(core(flags), mesh=MESH, sizes=SIZES)
    ]
    assert sum(p.note.startswith("ring") for p in plans) == 3
    results = check_jax(plans, MESH, sizes=SIZES)
    for p, r in zip(plans, results, strict=True):
        assert r.ok and r.max_error < 1e-5, (p.note, r.message)


def test_a_causal_softmax_over_a_sharded_dim_masks_by_each_devices_positions() -> None:
    plans = [
        shardalg.plans("softmax_{S,causal}(Sc[B, T_Y, S_X]) -> P[B, T_Y, S_X]", mesh=MESH, sizes=SIZES)[0]
    ]
    (r,) = check_jax(plans, MESH, sizes=SIZES)
    assert r.ok and r.max_error < 1e-5, r.message
