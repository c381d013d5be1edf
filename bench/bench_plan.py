"""Benchmark of the planner: parse + every plan for each of the seeds' matmuls, median per expression.

    python bench/bench_plan.py [--repeat N] [--json]

Two columns per expression: *warm* (grammar loaded, the planner's memo tables hot: the same expression
planned again, as in a notebook; also its minimum, which a loaded machine distorts least) and *fresh* (the memo tables of redistribute cleared before every run, so
each run searches its layouts anew; only the grammar and imports are warm). Target: under 1 ms warm.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from shardalg.algebra.mesh import Mesh  # noqa: E402
from shardalg.notation.parse import parse  # noqa: E402
from shardalg.planning.planner import plans  # noqa: E402

# the module (the package's lazy attribute of that name is the function)
rd = importlib.import_module("shardalg.planning.redistribute")

# (expression, mesh): seed 000's matmuls and questions 4 and 6, seed 004's column and row partitions
SEED_MATMULS: tuple[tuple[str, str], ...] = (
    ("A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]", "X=4,Y=2"),
    ("A[I_X, J] · B[J, K_Y] -> C[I, K]", "X=4,Y=2"),
    ("A[I, J_X] · B[J, K] -> C[I, K]", "X=4,Y=2"),
    ("A[I_X, J] · B[J, K] -> C[I, K]", "X=4,Y=2"),
    ("A[I, J_X] · B[J_X, K] -> C[I, K]", "X=4,Y=2"),
    ("A[I, J_X] · B[J_X, K] -> C[I, K_X]", "X=4,Y=2"),
    ("A[I, J_X] · B[J_X, K]", "X=4,Y=2"),
    ("A[I_X, J] · B[J, K_X]", "X=4,Y=2"),
    ("A[I, J_X] · B[J_Y, K] -> C[I, K]", "X=2,Y=2"),
    ("X[B, D] ·_D Y[D_X, F] -> Z[B, F]", "X=4,Y=2"),
    ("A[I_X, J_Y] ·_J B[J_Y, K] -> C[I_X, K]", "X=4,Y=4"),
    ("x[B, D] · W[D, F_X] -> y[B, F_X]", "X=4,Y=2"),
    ("x[B, D_X] · W[D_X, F] -> y[B, F]", "X=4,Y=2"),
)


def _clear() -> None:
    rd.best_sequences.cache_clear()
    rd._space.cache_clear()


def measure(repeat: int) -> list[dict[str, object]]:
    rows = []
    for expr, mesh_text in SEED_MATMULS:
        mesh = Mesh.parse(mesh_text)
        plans(parse(expr), mesh=mesh)  # load the grammar, warm the caches
        warm, fresh = [], []
        for _ in range(repeat):
            t = time.perf_counter()
            found = plans(parse(expr), mesh=mesh)
            warm.append(time.perf_counter() - t)
        for _ in range(repeat):
            _clear()
            t = time.perf_counter()
            plans(parse(expr), mesh=mesh)
            fresh.append(time.perf_counter() - t)
        rows.append({"expr": expr, "mesh": mesh_text, "plans": len(found),
                     "warm_ms": statistics.median(warm) * 1e3, "warm_min_ms": min(warm) * 1e3,
                     "fresh_ms": statistics.median(fresh) * 1e3})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = measure(args.repeat)
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    print(f"{'expression':44} {'mesh':8} {'plans':>5} {'warm ms':>8} {'(min)':>6} {'fresh ms':>9}")
    for r in rows:
        print(
            f"{r['expr']:44} {r['mesh']:8} {r['plans']:>5} {r['warm_ms']:8.2f} {r['warm_min_ms']:6.2f} "
            f"{r['fresh_ms']:9.2f}"
        )
    print(f"median over expressions: warm {statistics.median(r['warm_ms'] for r in rows):.2f} ms, "
          f"fresh {statistics.median(r['fresh_ms'] for r in rows):.2f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
