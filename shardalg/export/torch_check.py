"""Running generated torch code: one gloo process per device (forked from one subprocess that imports torch
once), each running the module on its blocks (or, for the DTensor form, on DTensors built from the global
inputs), the outputs reassembled and compared with the dense einsum.

Imports: the export package's siblings and the layers below (the executor cuts and reassembles blocks).
"""

from __future__ import annotations

import itertools
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from shardalg.algebra.mesh import Mesh, a_mesh
from shardalg.errors import UsageError
from shardalg.numeric.execute import ExecutionError, shard, unshard

from .harness import CheckResult, check_inputs, compare, dense_outputs, dense_value, require_extra, run_driver
from .torch_export import export_torch

__all__ = ["check_torch"]

_DRIVER = r"""
import datetime, importlib.util, json, multiprocessing as mp, os, sys, traceback, warnings
import numpy as np
import torch
import torch.distributed as dist

def load(path):
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

def work(rank, world, store, jobs):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    for job in jobs:
        try:
            mod = load(job["module"])
            mesh = mod.make_mesh()
            data = np.load(job["inputs"].format(rank=rank))
            args = [torch.from_numpy(data[f"arg{i}"]) for i in range(job["n_inputs"])]
            if job["dtensor"]:
                res = mod.forward(*mod.distribute(*args, mesh=mesh))
                res = res if isinstance(res, tuple) else (res,)
                res = [r.full_tensor() for r in res]
            else:
                res = mod.forward(*args, mesh)
                res = res if isinstance(res, tuple) else (res,)
            np.savez(job["outputs"].format(rank=rank), **{f"out{i}": r.numpy() for i, r in enumerate(res)})
        except Exception:
            with open(job["outputs"].format(rank=rank) + ".err", "w") as f:
                f.write(traceback.format_exc(limit=4))
    dist.destroy_process_group()

if __name__ == "__main__":
    jobs, world, store = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3]
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=work, args=(r, world, store, jobs)) for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    print("SHARDALG-EXIT " + json.dumps([p.exitcode for p in procs]))
"""


def check_torch(
    plans: object | Sequence[object],
    mesh: Mesh,
    *,
    sizes: Mapping[str, int] | None = None,
    seed: int = 0,
    timeout: float = 600.0,
    dtensor: bool = False,
) -> list[CheckResult]:
    """Run the generated torch code of each plan on ``mesh.devices`` gloo processes and compare the
    reassembled outputs with the dense einsum. With ``dtensor``, the DTensor form: every rank gets the global
    inputs, ``distribute`` places them, and the outputs come back through ``full_tensor()``."""
    require_extra("torch", "torch", "the torch check")
    m = a_mesh(mesh, "check_torch")
    coords = list(itertools.product(*(range(n) for n in m.shape)))
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="shardalg-torch-") as tmp:
        work = Path(tmp)
        flows, expected, jobs = [], [], []
        meshes: list[tuple[Mesh, list[tuple[int, ...]]]] = []  # per flow: its mesh (reshaped for sub-axes)
        for k, flow, arrays in check_inputs(plans, m, sizes, seed):
            on = flow.mesh_on(m)  # the same devices in the same order: only the coordinates differ
            coords = list(itertools.product(*(range(n) for n in on.shape)))
            meshes.append((on, coords))
            (work / f"plan{k}.py").write_text(export_torch(flow, m, dtensor=dtensor))
            if dtensor:  # the global values, the same on every rank
                glob = {
                    f"arg{i}": dense_value(t, a).astype(np.float32)
                    for i, (t, a) in enumerate(zip(flow.inputs, arrays, strict=True))
                }
                for r in range(len(coords)):
                    np.savez(work / f"in{k}_{r}.npz", **glob)
            else:
                rng = np.random.default_rng(seed + k)
                blocks = [
                    shard(dense_value(t, a), t, on, rng) for t, a in zip(flow.inputs, arrays, strict=True)
                ]
                for r, c in enumerate(coords):
                    np.savez(
                        work / f"in{k}_{r}.npz",
                        **{f"arg{i}": b[c].astype(np.float32) for i, b in enumerate(blocks)},
                    )
            jobs.append(
                {
                    "module": str(work / f"plan{k}.py"),
                    "inputs": str(work / f"in{k}_{{rank}}.npz"),
                    "outputs": str(work / f"out{k}_{{rank}}.npz"),
                    "n_inputs": len(arrays),
                    "dtensor": dtensor,
                }
            )
            flows.append(flow)
            expected.append(dense_outputs(flow, arrays, on))
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
        proc = run_driver(work, _DRIVER, jobs, str(m.devices), str(work / "store"), env=env, timeout=timeout)
        if "SHARDALG-EXIT" not in proc.stdout:
            raise UsageError(f"the torch check did not run (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        seconds = time.perf_counter() - start
        results = []
        for k, flow in enumerate(flows):
            errs = sorted(work.glob(f"out{k}_*.npz.err"))
            if errs:
                results.append(CheckResult(False, float("inf"), errs[0].read_text(), seconds))
                continue
            try:
                got = []
                on, coords = meshes[k]
                for i, t in enumerate(flow.outputs):
                    if dtensor:
                        value = np.load(work / f"out{k}_0.npz")[f"out{i}"]
                    else:
                        bufs = {c: np.load(work / f"out{k}_{r}.npz")[f"out{i}"] for r, c in enumerate(coords)}
                        value = unshard(bufs, t, on)
                    got.append(value[None] if t.unreduced else value)
                results.append(compare(flow, expected[k], got, seconds))
            except (ExecutionError, FileNotFoundError) as err:
                results.append(CheckResult(False, float("inf"), str(err), seconds))
    return results
