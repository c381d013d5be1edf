"""The check harness: random inputs, the dense reference, running a generated module in a subprocess, and
how its outputs fared.

Each check runs the generated code of every job in one subprocess (:func:`run_driver`) on the inputs
:func:`check_inputs` draws, and :func:`compare` holds the outputs against :func:`dense_outputs` of the same
inputs. Unreduced values are stacked: a leading dim of partial sums (see :mod:`shardalg.export`).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shardalg import limits
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.registry import RECORDS
from shardalg.errors import UsageError
from shardalg.notation.syntax import Op, Tensor
from shardalg.numeric.devices import VirtualMesh
from shardalg.numeric.execute import default_sizes, dim_extent
from shardalg.numeric.movement import dense_step

from .emit import einsum_subscripts
from .flow import Flow, as_flow, as_jobs, node_text

__all__ = [
    "CheckResult",
    "check_sizes",
    "global_shape",
    "unreduced_in_mesh_order",
    "random_inputs",
    "dense_value",
    "dense_outputs",
    "compare",
    "check_inputs",
    "run_driver",
]


def check_sizes(flow: Flow, mesh: Mesh, sizes: Mapping[str, int] | None = None) -> dict[str, int]:
    """Sizes for every named dim: the given ones, and small divisible defaults for the rest."""
    tensors = [*flow.inputs, *(s.output for s in flow.steps)]
    out = default_sizes(tensors, mesh)
    out.update(sizes or {})
    return out


def global_shape(t: Tensor, sizes: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(dim_extent(d.label, d.size, sizes) for d in t.dims)


def unreduced_in_mesh_order(t: Tensor, mesh: Mesh) -> tuple[str, ...]:
    return tuple(a for a in mesh.names if a in t.unreduced)


def random_inputs(flow: Flow, mesh: Mesh, sizes: Mapping[str, int], seed: int = 0) -> list[np.ndarray]:
    """One float32 array per input; an unreduced input is stacked (leading dim: its partials)."""
    rng = np.random.default_rng(seed)
    out = []
    for t in flow.inputs:
        shape = global_shape(t, sizes)
        lead = mesh.group_size(unreduced_in_mesh_order(t, mesh))
        arr = rng.standard_normal((lead, *shape) if t.unreduced else shape)
        out.append(arr.astype(np.float32))
    return out


def dense_value(t: Tensor, arr: np.ndarray) -> np.ndarray:
    """The value a (stacked, if unreduced) array stands for."""
    return arr.sum(axis=0) if t.unreduced else arr


def dense_outputs(flow: Flow, arrays: Sequence[np.ndarray], mesh: Mesh | None = None) -> list[np.ndarray]:
    """The dense computation: collectives are the identity on global values, einsums are einsums, an op
    that is not the identity (a Shift rolls the blocks along the dim its axis shards) its registered global
    meaning (``mesh`` is needed only for such an op)."""
    env: dict[Tensor, np.ndarray] = {
        t: dense_value(t, np.asarray(a, dtype=np.float64)) for t, a in zip(flow.inputs, arrays, strict=True)
    }
    for s in flow.steps:
        if s.op is Op.EINSUM:
            left, right = s.inputs
            env[s.output] = np.einsum(einsum_subscripts(left, right, s.output), env[left], env[right])
        elif not RECORDS[s.op].identity_on_values:
            if mesh is None:
                raise UsageError(f"the dense value of a {s.op.value} needs the mesh")
            env[s.output] = dense_step(s, [env[t] for t in s.inputs], VirtualMesh(mesh))
        else:
            env[s.output] = env[s.inputs[0]]
    return [env[t] for t in flow.outputs]


@dataclass(frozen=True)
class CheckResult:
    """How generated code fared against the dense result: ``ok``, the largest relative error, and why not."""

    ok: bool
    max_error: float
    message: str = ""
    seconds: float = 0.0
    backward: tuple[tuple[str, tuple[str, ...]], ...] | None = None  # JAX: the vjp's collectives, when asked

    def __bool__(self) -> bool:
        return self.ok


def compare(
    flow: Flow, expected: Sequence[np.ndarray], got: Sequence[np.ndarray], seconds: float
) -> CheckResult:
    """Relative max-abs error per output against float32 tolerance."""
    worst = 0.0
    for t, e, g in zip(flow.outputs, expected, got, strict=True):
        g = dense_value(t, np.asarray(g, dtype=np.float64))
        if g.shape != e.shape:
            return CheckResult(
                False, float("inf"), f"{node_text(t)}: shape {g.shape}, expected {e.shape}", seconds
            )
        scale = max(1.0, float(np.max(np.abs(e), initial=0.0)))
        worst = max(worst, float(np.max(np.abs(g - e), initial=0.0)) / scale)
    ok = worst < 1e-4
    msg = "" if ok else f"the generated code differs from the dense result by {worst:.3g} (relative)"
    return CheckResult(ok, worst, msg, seconds)


# ------------------------------------------------------------------------------------ running it
def check_inputs(
    plans: object, mesh: Mesh, sizes: Mapping[str, int] | None, seed: int
) -> Iterator[tuple[int, Flow, list[np.ndarray]]]:
    """For each job of a check (:func:`~shardalg.export.flow.as_jobs`), one at a time: its index ``k``, its
    flow, and its random inputs (seed ``seed + k``)."""
    limits.require("devices", mesh.devices, f"the mesh {', '.join(f'{a.name}={a.size}' for a in mesh)}")
    for k, obj in enumerate(as_jobs(plans)):
        flow = as_flow(obj, mesh, sizes)
        on = flow.mesh_on(mesh)
        yield k, flow, random_inputs(flow, on, check_sizes(flow, on, sizes), seed + k)


def require_extra(module: str, extra: str, what: str) -> None:
    """Refuse, in one line, a check whose driver would import ``module`` (an optional extra) that this Python
    lacks: the driver runs with this Python, so its import would fail the same way, with a traceback."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a module set to None in sys.modules, or a broken package
        found = False
    if not found:
        raise UsageError(
            f"{what} needs {module}, an optional extra this Python ({sys.executable}) lacks: "
            f"pip install 'shardalg[{extra}]'"
        )


def run_driver(
    workdir: Path,
    driver: str,
    jobs: list[dict[str, object]],
    *args: str,
    env: Mapping[str, str],
    timeout: float,
) -> subprocess.CompletedProcess[str]:
    """Write ``jobs.json`` and the driver script into ``workdir`` and run the driver with this Python there
    (``driver.py jobs.json *args``), capturing its output."""
    (workdir / "jobs.json").write_text(json.dumps(jobs))
    (workdir / "driver.py").write_text(driver)
    return subprocess.run(
        [sys.executable, str(workdir / "driver.py"), str(workdir / "jobs.json"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=workdir,
    )
