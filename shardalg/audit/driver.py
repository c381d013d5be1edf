"""The audit's subprocess: ``python -m shardalg.audit.driver JOBS.json`` traces each job's function with jax
on the CPU devices the parent asked for (``XLA_FLAGS=--xla_force_host_platform_device_count=N``, set by
:func:`shardalg.audit.run.run_jobs`, never in the parent's own jax) and prints one line,
``SHARDALG-AUDIT <json>``: per job, the trace record or the error that stopped it (one line, no traceback).

A job: ``file``, ``function`` (a name in the file), ``mesh`` (``names``, ``sizes``), ``inputs`` (each
``shape``, ``dtype`` and ``spec``: one list of mesh axes per dim) and ``backward``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from shardalg.errors import ShardalgError

from .trace import trace

__all__ = ["load_function", "run_job", "main"]


def load_function(file: str, function: str) -> Any:
    """The object named ``function`` in the Python file ``file`` (the file is run as a module)."""
    path = Path(file)
    if not path.is_file():
        raise ShardalgError(f"no such file: {file}")
    spec = importlib.util.spec_from_file_location(f"shardalg_audit_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ShardalgError(f"{file} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        raise ShardalgError(f"{file} does not import: {type(err).__name__}: {err}") from None
    fn = getattr(module, function, None)
    if fn is None:
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise ShardalgError(f"{file} has no function {function!r} (it has: {', '.join(found) or 'none'})")
    if not callable(fn):
        kind = type(fn).__name__
        raise ShardalgError(f"{function} is {'an' if kind[0] in 'aeiou' else 'a'} {kind}, not a function")
    return fn


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec

    fn = load_function(job["file"], job["function"])
    names, sizes = job["mesh"]["names"], job["mesh"]["sizes"]
    n = 1
    for s in sizes:
        n *= s
    if n > len(jax.devices()):
        raise ShardalgError(f"the mesh has {n} devices, jax here has {len(jax.devices())}")
    auto = (jax.sharding.AxisType.Auto,) * len(names)
    mesh = jax.make_mesh(tuple(sizes), tuple(names), axis_types=auto, devices=jax.devices()[:n])
    args = []
    for x in job["inputs"]:
        spec = PartitionSpec(*[tuple(a) if len(a) > 1 else (a[0] if a else None) for a in x["spec"]])
        args.append(
            jax.ShapeDtypeStruct(tuple(x["shape"]), jnp.dtype(x["dtype"]), sharding=NamedSharding(mesh, spec))
        )
    return trace(fn, args, backward=bool(job.get("backward")))


def main(argv: list[str]) -> None:
    out = []
    for job in json.loads(Path(argv[0]).read_text()):
        try:
            out.append({"ok": True, "record": run_job(job)})
        except ShardalgError as err:
            out.append({"ok": False, "error": getattr(err, "message", str(err))})
        except Exception as err:  # the user's code: one line, the parent raises it as a ShardalgError
            out.append({"ok": False, "error": f"{type(err).__name__}: {err}".splitlines()[0]})
    print("SHARDALG-AUDIT " + json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
