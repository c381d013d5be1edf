"""The derived backward of the notation's functions against JAX (issue 26 item 4), on 8 fake CPU devices
(X=2, Y=4): for each function statement, a program mixing products with gelu, softmax, rmsnorm and a residual
add, and a product over a sub-axis, the gradients shardalg's backward computes (its plans run on the
executor's virtual mesh) equal ``jax.vjp`` of the exported forward (``jax.shard_map`` of the generated code,
in float64) for the same inputs and cotangents; and each derived backward, exported itself, runs in JAX and
equals its dense meaning."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jax", reason="jax is not installed (pip install 'shardalg[jax]'); CI installs it")

from shardalg.algebra.mesh import (
    Mesh,
    as_mesh,  # noqa: E402
)
from shardalg.export.flow import as_flow  # noqa: E402
from shardalg.export.harness import run_driver  # noqa: E402
from shardalg.export.jax import check_jax, export_jax  # noqa: E402
from shardalg.notation.parse import parse  # noqa: E402
from shardalg.planning.backward import backward  # noqa: E402
from shardalg.planning.forward import analyze  # noqa: E402
from tests.planning.fnbackward import run_backward, shape_of  # noqa: E402

MESH = Mesh.parse("X=2,Y=4")
SIZES = {"B": 8, "D": 16, "F": 16, "S": 16, "T": 8}
PROGRAMS = {
    "gelu": "gelu(H[B, F_Y]) -> G[B, F_Y]",
    "silu": "silu(H[B_X, F_Y]) -> G[B_X, F_Y]",
    "exp": "exp(A[B_X, T]) -> E[B_X, T]",
    "relu": "relu(A[B_X, T_Y]) -> E[B_X, T_Y]",
    "scale": "scale_{0.125}(S[B_X, T]) -> R[B_X, T]",
    "add": "X[B_X, D] + A[D_Y] -> R[B_X, D_Y]",
    "subtract": "X[B_X, D_Y] - A[D_Y] -> R[B_X, D_Y]",
    "multiply": "G[B, F_Y] .* U[B, F_Y] -> R[B, F_Y]",
    "sum": "sum_D(X[B, D_X]) -> S[B]",
    "mean": "mean_D(X[B_Y, D_X]) -> S[B_Y]",
    "max": "max_D(X[B, D_X]) -> M[B]",
    "softmax": "softmax_S(Sc[B_Y, S_X]) -> P[B_Y, S_X]",
    "rmsnorm": "rmsnorm_D(X[B, D_X]) -> Y[B, D_X]",
    "layernorm": "layernorm_D(X[B_Y, D_X]) -> Y[B_Y, D_X]",
    "program": (
        "X[B_X, D] * W1[D, F_Y] -> H[B_X, F_Y]; gelu(H[B_X, F_Y]) -> G[B_X, F_Y]; "
        "G[B_X, F_Y] * W2[F_Y, D] -> O[B_X, D]; O[B_X, D] + X[B_X, D] -> R[B_X, D]; "
        "rmsnorm_D(R[B_X, D]) -> N[B_X, D]; N[B_X, D] * Wq[D, S_Y] -> Sc[B_X, S_Y]; "
        "softmax_S(Sc[B_X, S_Y]) -> P[B_X, S_Y]"
    ),
    "sub-axis product": "X[B_{Y:(1)2}, D] * W[D, F_X] -> H[B_{Y:(1)2}, F_X]",  # Y's major half (issue 26 item 6)
}

_DRIVER = r"""
import importlib.util, json, sys, traceback
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np

out = []
for job in json.load(open(sys.argv[1])):
    try:
        spec = importlib.util.spec_from_file_location(f"m{len(out)}", job["module"])
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        data = np.load(job["data"])
        args = [data[f"arg{i}"] for i in range(job["n_inputs"])]
        cts = tuple(data[f"ct{i}"] for i in range(job["n_outputs"]))
        fn = jax.shard_map(mod.forward_local, mesh=mod.make_mesh(), in_specs=mod.IN_SPECS,
                           out_specs=mod.OUT_SPECS, check_vma=mod.CHECK_VMA)
        _, pull = jax.vjp(fn, *args)
        grads = pull(cts if len(cts) > 1 else cts[0])
        np.savez(job["grads"], **{f"g{i}": np.asarray(g) for i, g in enumerate(grads)})
        out.append({"ok": True})
    except Exception:
        out.append({"ok": False, "error": traceback.format_exc(limit=4)})
print("RESULT " + json.dumps(out))
"""


def _jax_vjp(
    jobs: list[tuple[str, list[np.ndarray], list[np.ndarray]]], workdir: Path
) -> list[list[np.ndarray]]:
    """jax.vjp of each exported forward (module source, inputs, cotangents), in one subprocess."""
    specs = []
    for k, (src, args, cts) in enumerate(jobs):
        (workdir / f"fw{k}.py").write_text(src)
        arrays = {f"arg{i}": a for i, a in enumerate(args)} | {f"ct{i}": c for i, c in enumerate(cts)}
        np.savez(workdir / f"data{k}.npz", **arrays)
        specs.append(
            {
                "module": str(workdir / f"fw{k}.py"),
                "data": str(workdir / f"data{k}.npz"),
                "grads": str(workdir / f"grads{k}.npz"),
                "n_inputs": len(args),
                "n_outputs": len(cts),
            }
        )
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=8".strip()
    env["JAX_PLATFORMS"] = "cpu"
    proc = run_driver(workdir, _DRIVER, specs, env=env, timeout=600)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    runs = json.loads(line[len("RESULT ") :])
    out = []
    for k, run in enumerate(runs):
        assert run["ok"], run.get("error")
        data = np.load(workdir / f"grads{k}.npz")
        out.append([data[f"g{i}"] for i in range(specs[k]["n_inputs"])])
    return out


@pytest.fixture(scope="module")
def compared() -> dict[str, tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]:
    """For each program: (shardalg's gradients on the executor, jax.vjp's), by input name."""
    mesh = as_mesh(MESH)
    ours, jobs, orders = {}, [], []
    for k, (name, source) in enumerate(PROGRAMS.items()):
        prog = parse(source)
        bw = backward(prog, mesh, SIZES)
        fw = analyze(prog, mesh, dict(SIZES))
        rng = np.random.default_rng(k)
        inputs = {r: rng.standard_normal(shape_of(fw.origin[r], SIZES)) for r in fw.inputs}
        seeds = {r: rng.standard_normal(shape_of(fw.latest[r], SIZES)) for r in fw.outputs}
        ours[name] = run_backward(bw, fw, inputs, seeds, dict(SIZES), rng)
        flow = as_flow(prog, mesh, SIZES)
        assert not any(t.unreduced for t in (*flow.inputs, *flow.outputs))
        ins = [fw.root[t.name] for t in flow.inputs]
        outs = [fw.root[t.name] for t in flow.outputs]
        jobs.append((export_jax(flow, mesh), [inputs[r] for r in ins], [seeds[r] for r in outs]))
        orders.append((name, ins))
    with tempfile.TemporaryDirectory(prefix="shardalg-vjp-") as tmp:
        got = _jax_vjp(jobs, Path(tmp))
    return {
        name: (ours[name], dict(zip(ins, g, strict=True))) for (name, ins), g in zip(orders, got, strict=True)
    }


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_the_derived_backward_equals_jax_vjp_of_the_exported_forward(compared: dict, name: str) -> None:
    ours, theirs = compared[name]
    assert set(ours) == set(theirs)
    for r in ours:
        scale = max(1.0, float(np.abs(theirs[r]).max()))
        assert np.abs(ours[r] - theirs[r]).max() < 1e-9 * scale, (name, r)


def test_the_check_is_not_vacuous(compared: dict) -> None:
    """Gradients of distinct inputs differ, and each is far from zero (the comparison could fail)."""
    ours, _ = compared["program"]
    assert all(float(np.abs(g).max()) > 1e-3 for g in ours.values())


@pytest.mark.parametrize("name", ["softmax", "rmsnorm", "layernorm", "max", "program"])
def test_the_derived_backward_runs_in_jax_and_equals_dense(name: str) -> None:
    bw = backward(PROGRAMS[name], MESH, SIZES)
    (r,) = check_jax([bw], MESH, sizes=SIZES)
    assert r.ok, r.message
    assert r.max_error < 1e-5
