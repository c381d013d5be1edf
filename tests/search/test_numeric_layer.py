"""The numeric search on one transformer layer (attention + MLP) on a 3-axis mesh: its winner is a program
that plan, backward and export accept, and exported to JAX it runs on 8 CPU devices and equals the dense
program. The search's time is measured in bench/bench_strategy.py, not here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from shardalg.algebra.mesh import Mesh
from shardalg.notation.parse import parse
from shardalg.planning.backward import backward
from shardalg.planning.planner import plan
from shardalg.search.numeric import search
from tests.search.programs import LAYER, TRANSFORMER

SMALL = "B=8,T=8,D=16,N=16,F=32"  # every dim a multiple of 8: any split over the 2x2x2 mesh divides it


@pytest.fixture(scope="module")
def layer():
    seen: list[tuple[int, int]] = []
    r = search(TRANSFORMER, progress=lambda d, t: seen.append((d, t)), **LAYER)
    return r, seen


def test_the_layer_search_covers_the_space_and_reports_progress(layer):
    r, seen = layer
    assert seen[-1] == (r.space.size, r.space.size)
    assert r.space.param_dims == ("D", "N", "F") and r.space.batch_dims == ("B", "T")
    assert r.winner is not None and r.winner.fits
    assert all(r.winner.seconds <= e.seconds for e in r.ranked)
    # the strategies the book names are all in the space and priced
    assert {"DP", "FSDP", "TP", "FSDP+TP", "DP+SP"} <= set(r.best)


def test_the_winner_is_accepted_by_plan_backward_and_export(layer):
    r, _ = layer
    program = parse(r.winner_program)
    mesh = Mesh.parse(LAYER["mesh"])
    sizes = dict(kv.split("=") for kv in SMALL.split(","))
    sizes = {k: int(v) for k, v in sizes.items()}
    for s in program.statements:
        plan(s, mesh, sizes)
    backward(program, mesh, sizes)


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "shardalg", *argv],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )


def test_the_winner_exported_to_jax_equals_dense_on_8_cpu_devices(layer):
    pytest.importorskip("jax", reason="jax is not installed (pip install 'shardalg[jax]'); CI installs it")
    r, _ = layer
    done = _cli("export", "jax", r.winner_program, "--mesh", LAYER["mesh"], "--sizes", SMALL, "--check")
    assert done.returncode == 0, done.stderr
    assert "check: ok on 8 CPU devices" in done.stdout + done.stderr


def test_the_winner_exports_to_torch(layer):
    r, _ = layer
    done = _cli("export", "torch", r.winner_program, "--mesh", LAYER["mesh"], "--sizes", SMALL)
    assert done.returncode == 0, done.stderr
    assert "torch.distributed" in done.stdout


def test_cli_search_json_is_quiet_off_a_terminal():
    done = _cli(
        "search",
        "params W\nIn[B, D] * W[D, F] -> O[B, F]",
        "--mesh",
        "X=2",
        "--sizes",
        "B=8,D=8,F=8",
        "--hw",
        "tpu-v5e",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["winner"]["fits"] and data["space"] == 8
    assert "search:" not in done.stderr  # no progress line off a terminal
    assert "note: mode: train" in done.stderr  # defaults said on stderr with --json


def test_cli_search_takes_every_policy():
    """--overlap schedule (a layer's steps as their dependencies allow) is offered as the API takes it."""
    done = _cli(
        "search",
        "params W\nIn[B, D] * W[D, F] -> O[B, F]",
        "--mesh",
        "X=2",
        "--sizes",
        "B=8,D=8,F=8",
        "--hw",
        "tpu-v5e",
        "--json",
        "--overlap",
        "schedule",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["overlap"] == "schedule"


def test_cli_search_errors_without_traceback():
    done = _cli(
        "search",
        "In[B, D] * W[D, F] -> O[B, F]",
        "--mesh",
        "X=2",
        "--sizes",
        "B=8,D=8,F=8",
        "--hw",
        "tpu-v5e",
    )
    assert done.returncode == 2
    assert "declares no parameters" in done.stderr and "Traceback" not in done.stderr
