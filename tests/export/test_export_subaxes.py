"""Plans over sub-axes exported to JAX on the mesh reshaped into factors, run on 8 CPU devices; and XLA's own
plans for the same reshardings, read from its compiled HLO, to compare (issue 26 item 6).

Each runs in a subprocess with ``XLA_FLAGS=--xla_force_host_platform_device_count=8`` (this process's jax,
if any, is untouched)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from shardalg.algebra.mesh import Mesh
from shardalg.planning.planner import plans

pytest.importorskip("jax", reason="jax is not installed (pip install 'shardalg[jax]'); CI installs it")

from shardalg.export.jax import check_jax, export_jax  # noqa: E402

MESH = Mesh(X=2, Y=4)
SIZES = {"I": 16, "J": 8}

# XLA's plan for a resharding on a 2x4 mesh: the collectives of the compiled HLO and their group sizes
_XLA = textwrap.dedent(
    """
    import json, re, sys
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("X", "Y"))
    out = {}
    for name, src, dst in [("X->Y", P("X", None), P("Y", None)), ("Y->X", P("Y", None), P("X", None))]:
        f = jax.jit(lambda a: a, in_shardings=NamedSharding(mesh, src), out_shardings=NamedSharding(mesh, dst))
        hlo = f.lower(jnp.zeros((16, 8), jnp.float32)).compile().as_text()
        ops = []
        for line in hlo.splitlines():
            m = re.search(r"= \\S+ (all-gather|all-to-all|collective-permute|all-reduce|reduce-scatter)\\(", line)
            if m:
                g = re.search(r"replica_groups=\\[(\\d+),(\\d+)\\]", line)
                ops.append([m[1], int(g[2]) if g else None])
        out[name] = ops
    print(json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def xla() -> dict[str, list[list[object]]]:
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu"}
    run = subprocess.run(
        [sys.executable, "-c", _XLA], capture_output=True, text=True, env=env, timeout=300, check=True
    )
    return json.loads(run.stdout)


def test_xla_reshards_x_to_y_as_the_first_plan_does(xla: dict) -> None:
    """[I_X] -> [I_Y]: XLA slices and permutes, no gather: our first plan, Slice_{Y:(2)2} then
    Permute_{X,Y:(1)2}."""
    assert [op for op, _ in xla["X->Y"]] == ["collective-permute"]
    best = plans("A[I_X, J] -> A[I_Y, J]", MESH, SIZES)[0]
    assert [s.op.value for s in best.steps if s.communicates] == ["Permute"]


def test_xla_gathers_over_a_subaxis_for_y_to_x(xla: dict) -> None:
    """[I_Y] -> [I_X]: XLA permutes, then gathers in groups of 2 devices (Y:(1)2: iota [2,2,2]T(0,2,1)).
    Our planner lists sub-axis plans that tie with the whole-axis one (a shard of V/8 permuted, then V/2
    gathered over Y's 4 devices: 5V/8 in the book's model); XLA's own (V/4 permuted, V/2 gathered over Y:(1)2:
    3V/4) it does not list, since a Permute here keeps which axes replicate the tensor."""
    assert [op for op, _ in xla["Y->X"]] == ["collective-permute", "all-gather"]
    assert xla["Y->X"][1][1] == 2
    found = plans("A[I_Y, J] -> A[I_X, J]", MESH, SIZES)
    assert any(":" in a for p in found for s in p.steps for a in s.axes)


def test_plans_over_subaxes_run_in_jax_on_the_reshaped_mesh() -> None:
    jobs = [p for p in plans("A[I_X, J] -> A[I_Y, J]", MESH, SIZES)[:2]]
    jobs += [
        p
        for p in plans("A[I_Y, J] -> A[I_X, J]", MESH, SIZES)
        if any(":" in a for s in p.steps for a in s.axes)
    ][:2]
    jobs.append(plans("A[I, J_{Y:(2)2}] · B[J_Y, K] -> C[I, K]", MESH, {**SIZES, "K": 8})[0])
    src = export_jax(jobs[0], MESH)
    assert "MESH_AXES = ('X', 'Y:(1)2', 'Y:(2)2')" in src and "MESH_SHAPE = (2, 2, 2)" in src
    for r in check_jax(jobs, MESH, sizes={**SIZES, "K": 8}):
        assert r.ok, r.message
