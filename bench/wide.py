"""A product with many untouched dims: ``A[D0, ..., D{n-1}, I_X, J] · B[J, K_X]`` on X=4,Y=2,Z=2, planned
(``shardalg.plans``) with n = 4, 8, 16 and 24 dims that no axis shards and no other operand shares (issue 31).

    python -m bench wide [--dims 4,8,16,24] [--budget S] [--json]

Each size runs in a child process of its own: it plans a product without the extra dims first (imports and
tables out of the timing), clears the caches, then plans the wide product once and reports its CPU seconds
(``time.process_time``) and the number of plans. A child over ``--budget`` seconds is stopped (reported so).
Target (issue 31): the 24-dim product within 2x the CPU seconds of the 4-dim one.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any

from bench.common import ROOT, table, verdict

MESH = "X=4,Y=2,Z=2"
TARGET_RATIO = 2.0  # 24 dims within 2x of 4 dims


def expression(n: int) -> str:
    return "A[" + "".join(f"D{i}, " for i in range(n)) + "I_X, J] · B[J, K_X]"


def _child(n: int) -> None:
    import shardalg

    shardalg.plans(expression(0), mesh=MESH)  # imports, tables and the grammar, outside the timing
    shardalg.clear_caches()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    found = shardalg.plans(expression(n), mesh=MESH)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    print(json.dumps({"dims": n, "cpu_s": cpu, "wall_s": wall, "plans": len(found)}), flush=True)


def in_child(n: int, budget: float) -> dict[str, Any]:
    """One size in a new process, stopped after ``budget`` seconds."""
    cmd = [sys.executable, "-m", "bench.wide", "--child", str(n)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=budget, check=False)
    except subprocess.TimeoutExpired:
        return {"dims": n, "cpu_s": None, "wall_s": None, "plans": None, "stopped": True}
    if done.returncode != 0 or not done.stdout.strip():
        raise SystemExit(f"the {n}-dim child failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "stopped": False}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench wide", description=__doc__)
    ap.add_argument("--dims", default="4,8,16,24", help="the numbers of untouched dims, comma separated")
    ap.add_argument(
        "--budget", type=float, default=180.0, help="seconds per size before its child is stopped"
    )
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.dims.split(",")]
    rows = [in_child(n, args.budget) for n in sizes]
    base = next((r["cpu_s"] for r in rows if r["dims"] == min(sizes)), None)
    widest = max(rows, key=lambda r: r["dims"])
    ok = None if base is None else widest["cpu_s"] is not None and widest["cpu_s"] <= TARGET_RATIO * base
    if args.json:
        print(json.dumps({"mesh": MESH, "rows": rows, "target_ratio": TARGET_RATIO, "meets": ok}, indent=2))
        return 0
    print(f"plans of A[D0, ..., I_X, J] · B[J, K_X] on {MESH}, CPU seconds, one fresh run per size")
    shown = [
        [
            str(r["dims"]),
            f"> {args.budget:.0f} s (stopped)" if r["stopped"] else f"{r['cpu_s']:.2f}",
            "-" if r["stopped"] else f"{r['cpu_s'] / base:.1f}x" if base else "-",
            "-" if r["plans"] is None else str(r["plans"]),
        ]
        for r in rows
    ]
    print(table(["untouched dims", "CPU s", f"vs {min(sizes)} dims", "plans"], shown, right=(1, 2, 3)))
    print(f"target: {widest['dims']} dims within {TARGET_RATIO:.0f}x of {min(sizes)} dims: {verdict(ok)}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        _child(int(sys.argv[2]))
    else:
        raise SystemExit(main())
