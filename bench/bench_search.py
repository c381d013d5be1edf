"""Benchmark of the strategy map's engine: time to map the book's four MLP strategies, per overlap policy;
and the program path end to end (``shardalg strategy-map`` on the MLP block, a fresh process each run,
against ``python -c pass`` in the same run).

    python bench/bench_search.py [--repeat N] [--json]      (or: python -m bench map)

The four programs are planned, differentiated and costed once, outside the timing; that costing is also timed
(median of N, the baseline of the same run), and the map is timed on top of it: normal forms, the minimum over
the FSDP+TP split, cells and regions with their LPs, solved facets. sympy's cache is cleared before each run.
The LP count is the number of HiGHS calls per map (scipy imported once, before the timing).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import scipy.optimize  # noqa: E402,F401  -- imported before the timing: the map imports it lazily
import sympy  # noqa: E402

from shardalg.search import polyhedra, strategy_map  # noqa: E402
from tests.search import mlp  # noqa: E402

NAMES = ("DP", "FSDP", "TP", "FSDP+TP")


def _median_ms(fn, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        sympy.core.cache.clear_cache()
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(runs)


def _cost_all(policy: str) -> None:
    for n in NAMES:
        mlp.priced.__wrapped__(n, "step", policy).total  # noqa: B018 -- uncached: the costing itself


def _lp_calls(fn) -> int:
    count = 0
    real = polyhedra._linprog

    def counting(*a, **k):
        nonlocal count
        count += 1
        return real(*a, **k)

    polyhedra._linprog = counting
    try:
        fn()
    finally:
        polyhedra._linprog = real
    return count


def rows(repeat: int) -> list[dict[str, object]]:
    out = []
    for policy in ("steady", "serial"):
        for memory in (False, True):
            cands = [mlp.candidate(n, "step", policy, memory=memory) for n in NAMES]
            over = mlp.OVER + ((mlp.D * mlp.F / mlp.H,) if memory else ())

            def build(cands=cands, over=over):
                return strategy_map(cands, over=over, domain=mlp.DOMAIN)

            m = build()
            out.append(
                {
                    "policy": policy,
                    "memory cap": memory,
                    "regions": len(m.regions),
                    "cells": len(m.cells),
                    "lp_calls": _lp_calls(build),
                    "map_ms": _median_ms(build, repeat),
                    "costing_ms": _median_ms(lambda p=policy: _cost_all(p), repeat),
                }
            )
    return out


MLP = "params W_in, W_out; In[B, D] * W_in[D, F] -> Tmp[B, F]; Tmp[B, F] * W_out[F, D] -> Out[B, D]"
CLI = [
    "-m",
    "shardalg",
    "strategy-map",
    MLP,
    "--mesh",
    "X=4,Y=4,Z=4",
    "--hw",
    "tpu-v5p",
    "--sizes",
    "B=48000,D=8192,F=32768",
    "--format",
    "json",
]


def _process_ms(args: list[str], repeat: int) -> tuple[float, str]:
    import subprocess

    runs, out = [], ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = subprocess.run(
            [sys.executable, *args], capture_output=True, text=True, check=True, cwd=ROOT
        ).stdout
        runs.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(runs), out


def cli_rows(repeat: int) -> list[dict[str, object]]:
    out = []
    base, _ = _process_ms(["-c", "pass"], repeat)
    for memory in (False, True):
        ms, text = _process_ms(CLI + (["--memory", "hbm"] if memory else []), repeat)
        data = json.loads(text)
        out.append(
            {
                "memory cap": memory,
                "cli_ms": ms,
                "python_ms": base,
                "lp_calls": data["lps"],
                "regions": len(data["map"]["regions"]),
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    table = rows(args.repeat)
    cli = cli_rows(args.repeat)
    if args.json:
        print(json.dumps({"engine": table, "cli": cli}, indent=2))
        return 0
    print(
        f"strategy map of DP, FSDP, TP, FSDP+TP (MLP, whole step), median of {args.repeat}, sympy cache cleared"
    )
    print(
        f"  {'policy':<8} {'memory cap':<11} {'regions':>7} {'cells':>6} {'LPs':>5} {'map ms':>9} "
        f"{'costing ms':>11} {'ratio':>6}"
    )
    for r in table:
        print(
            f"  {r['policy']:<8} {str(r['memory cap']):<11} {r['regions']:>7} {r['cells']:>6} {r['lp_calls']:>5} "
            f"{r['map_ms']:>9.1f} {r['costing_ms']:>11.1f} {r['map_ms'] / r['costing_ms']:>6.2f}"
        )
    print(
        f"shardalg strategy-map on the MLP block (v5p 4x4x4 point), a fresh process, median of {args.repeat}"
    )
    print(
        f"  {'memory cap':<11} {'regions':>7} {'LPs':>5} {'cli ms':>9} {'python -c pass ms':>18} {'ratio':>6}"
    )
    for r in cli:
        print(
            f"  {str(r['memory cap']):<11} {r['regions']:>7} {r['lp_calls']:>5} {r['cli_ms']:>9.1f} "
            f"{r['python_ms']:>18.1f} {r['cli_ms'] / r['python_ms']:>6.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
