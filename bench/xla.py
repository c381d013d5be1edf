"""XLA's compile of a sharded matmul on 8 CPU devices, in a worker process (the device count is an XLA flag,
read when jax starts, so it must be set before jax is imported: here, in the worker's environment).

    with XlaWorker() as xla:
        ms = xla.compile(case)      # one jax.jit(...).lower(...).compile(), caches cleared first

A case is JSON: the mesh (axis names and sizes), each operand's shape and partition spec (a list of the
axes of each dim), the result's spec, the einsum subscripts and the dtype. The worker warms jax up once
(a trivial compile) so backend start-up is not counted; each timed compile starts from
``jax.clear_caches()`` and a new ``jax.jit``, so nothing of an earlier compile is reused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

DEVICES = 8


def case_of(stmt: Any, mesh: Any, sizes: dict[str, int], dtype: str = "bfloat16") -> dict[str, Any]:
    """The XLA case of a shardalg product statement ``A[..] · B[..] -> C[..]`` on a numeric mesh."""
    left, right = stmt.expr.left, stmt.expr.right
    out = stmt.result
    letters: dict[str, str] = {}

    def sub(t: Any) -> str:
        return "".join(
            letters.setdefault(d.label, "abcdefghijklmnopqrstuvwxyz"[len(letters)]) for d in t.dims
        )

    spec = f"{sub(left)},{sub(right)}->{sub(out)}"
    return {
        "mesh": [[a.name, a.size] for a in mesh],
        "a": {"shape": [sizes[d.label] for d in left.dims], "spec": [list(d.axes) for d in left.dims]},
        "b": {"shape": [sizes[d.label] for d in right.dims], "spec": [list(d.axes) for d in right.dims]},
        "out": [list(d.axes) for d in out.dims],
        "einsum": spec,
        "dtype": dtype,
    }


class XlaWorker:
    """A jax process that compiles cases on request and reports the milliseconds of each compile."""

    def __init__(self) -> None:
        env = dict(
            os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={DEVICES}", JAX_PLATFORMS="cpu"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.xla", "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        )
        hello = self._read()
        self.version = hello.get("jax", "?")

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the XLA worker stopped (see its stderr above)")
        return json.loads(line)

    def compile(self, case: dict[str, Any]) -> tuple[float, list[str]]:
        """Milliseconds of one compile, and the collectives XLA put in the program."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()
        got = self._read()
        if "error" in got:
            raise RuntimeError(f"XLA could not compile {case['einsum']}: {got['error']}")
        return got["ms"], got["collectives"]

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=60)

    def __enter__(self) -> XlaWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _serve() -> None:  # pragma: no cover - runs in the worker process
    import time

    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    jax.jit(lambda x: x + 1).lower(jnp.zeros(4)).compile()  # backend start-up, not counted
    print(json.dumps({"jax": jax.__version__, "devices": len(jax.devices())}), flush=True)

    def pspec(spec: list[list[str]]) -> P:
        return P(*(None if not a else a[0] if len(a) == 1 else tuple(a) for a in spec))

    for line in sys.stdin:
        case = json.loads(line)
        try:
            names = tuple(n for n, _ in case["mesh"])
            shape = tuple(s for _, s in case["mesh"])
            auto = (jax.sharding.AxisType.Auto,) * len(names)
            mesh = jax.make_mesh(
                shape, names, axis_types=auto, devices=jax.devices()[: int(jnp.prod(jnp.array(shape)))]
            )
            dtype = jnp.dtype(case["dtype"])
            sa, sb, so = (
                NamedSharding(mesh, pspec(s)) for s in (case["a"]["spec"], case["b"]["spec"], case["out"])
            )
            a = jax.ShapeDtypeStruct(tuple(case["a"]["shape"]), dtype, sharding=sa)
            b = jax.ShapeDtypeStruct(tuple(case["b"]["shape"]), dtype, sharding=sb)
            subscripts = case["einsum"]
            jax.clear_caches()
            t0 = time.perf_counter()
            fn = jax.jit(
                lambda x, y, s=subscripts: jnp.einsum(s, x, y), in_shardings=(sa, sb), out_shardings=so
            )
            compiled = fn.lower(a, b).compile()
            ms = (time.perf_counter() - t0) * 1e3
            text = compiled.as_text()
            ops = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute")
            print(json.dumps({"ms": ms, "collectives": [o for o in ops if o in text]}), flush=True)
        except Exception as err:  # noqa: BLE001 - reported to the parent, which says which case failed
            print(json.dumps({"error": f"{type(err).__name__}: {err}"}), flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        _serve()
    else:
        raise SystemExit("bench.xla is a worker of `python -m bench plans`; it runs with --serve")
