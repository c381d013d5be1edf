"""``shardalg.audit(fn, *args)``: the in-process form, on the devices this process's jax has. Run in a fresh
Python with 8 CPU devices (this test process's jax, if any, keeps its own)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("jax", reason="jax is not installed (pip install 'shardalg[jax]'); CI installs it")

SCRIPT = textwrap.dedent(
    """
    import jax, jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P
    import shardalg as sa
    from shardalg.audit.report import report_json

    mesh = jax.make_mesh((2, 4), ("X", "Y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    a = jax.ShapeDtypeStruct((64, 128), jnp.float32, sharding=NamedSharding(mesh, P(None, "X")))
    b = jax.ShapeDtypeStruct((128, 32), jnp.float32, sharding=NamedSharding(mesh, P("X", None)))
    audit = sa.audit(lambda a, b: a @ b, a, b, names=["A", "B"])
    print(report_json(audit)["program"])
    print(audit.verdicts[0].xla_plan.replace(chr(10), " / "))
    print(audit.verdicts[0].rank is not None)
    try:
        sa.audit(lambda a, b: a @ b, jnp.ones((6, 128)), b)
    except sa.ShardalgError as err:
        print("error:", err.message)
    """
)


def test_audit_a_function_in_this_process():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [
        "['A: fp32[B, D_X] · B: fp32[D_X, F] -> Out: fp32[B, F]']",
        "A: fp32[B, D_X] *_LOCAL B: fp32[D_X, F] -> Out: fp32[B, F]{U_X} / "
        "AllReduce_X(Out: fp32[B, F]{U_X}) -> Out: fp32[B, F]",
        "True",
        "error: input 0 has SingleDeviceSharding, not a NamedSharding: an audit needs each input's "
        "NamedSharding on one mesh",
    ]
