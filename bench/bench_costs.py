"""Benchmark of the cost engine: derivation time per condition, and lambdified sweeps vs subs + evalf.

    python bench/bench_costs.py [--repeat N] [--points N] [--slow-points N] [--json]

1. Time to derive each of the book's conditions from its plans (median of N runs, target < 100 ms each):
   D > 2B and D > 2C/W (seed 000 question 4), DP, FSDP, TP, FSDP+TP (with X_opt), decode Y_max, the
   latency-bound buffer size. Plans are parsed once, outside the timing; costing them is inside.
2. One expression (the FSDP+TP plan's total time on v5p, in B, F and N) evaluated over ``--points`` random
   points with :func:`shardalg.costs.sweep.lambdify`, and over ``--slow-points`` points with ``subs`` then ``evalf``
   in a Python loop; the slow loop runs on fewer points and its time is extrapolated per point (printed so).
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

import numpy as np  # noqa: E402
import sympy  # noqa: E402

from shardalg.algebra.mesh import Mesh  # noqa: E402
from shardalg.algebra.symbols import axis_size, device_count, dim_size  # noqa: E402
from shardalg.costs.derive import compare, compute_bound, critical, optimum  # noqa: E402
from shardalg.costs.plancost import cost  # noqa: E402
from shardalg.costs.sweep import lambdify  # noqa: E402
from shardalg.notation.parse import parse  # noqa: E402
from shardalg.notation.syntax import Op  # noqa: E402

GATHER = "AllGather_X(Y[D_X, F]) -> Y[D, F]; X[B, D] · Y[D, F] -> Z[B, F]"
LOCAL = "X[B, D_X] ·_LOCAL Y[D_X, F] -> Z[B, F]{U_X}; AllReduce_X(Z[B, F]{U_X}) -> Z[B, F]"
DP = ("dOut[B_X, F] · W[D, F] -> dIn[B_X, D]; In[B_X, D] · dOut[B_X, F] -> dW[D, F]{U_X}; "
      "AllReduce_X(dW[D, F]{U_X}) -> dW[D, F]")  # fmt: skip
FSDP = ("AllGather_X(W[D_X, F]) -> W[D, F]; In[B_X, D] · W[D, F] -> Tmp[B_X, F]; "
        "AllGather_X(W[D_X, F]) -> W[D, F]; dTmp[B_X, F] · W[D, F] -> dIn[B_X, D]; "
        "In[B_X, D] · dTmp[B_X, F] -> dW[D, F]{U_X}; ReduceScatter_{X,D}(dW[D, F]{U_X}) -> dW[D_X, F]")  # fmt: skip
TP = ("AllGather_Y(In[B, D_Y]) -> In[B, D]; In[B, D] · W_in[D, F_Y] -> Tmp[B, F_Y]; "
      "Tmp[B, F_Y] · W_out[F_Y, D] -> Out[B, D]{U_Y}; ReduceScatter_{Y,D}(Out[B, D]{U_Y}) -> Out[B, D_Y]")  # fmt: skip
FSDP_TP = ("AllGather_X(W_in[D_X, F_Y]) -> W_in[D, F_Y]; AllGather_Y(In[B_X, D_Y]) -> In[B_X, D]; "
           "In[B_X, D] · W_in[D, F_Y] -> Tmp[B_X, F_Y]; AllGather_X(W_out[F_Y, D_X]) -> W_out[F_Y, D]; "
           "Tmp[B_X, F_Y] · W_out[F_Y, D] -> Out[B_X, D]{U_Y}; "
           "ReduceScatter_{Y,D}(Out[B_X, D]{U_Y}) -> Out[B_X, D_Y]")  # fmt: skip
SYM = {"symbolic_links": True, "overlap": "steady"}  # the book's derivations are layer-level
X, Y, N = axis_size("X"), axis_size("Y"), device_count()


def _fsdp_tp_x_opt(p) -> sympy.Basic:
    pc = cost(p, Mesh(X=None, Y=None), latency=False, **SYM)
    return optimum(pc, over="X", subject_to=sympy.Eq(X * Y, N)).result


def _fsdp_tp(p) -> sympy.Basic:
    """Both derivations in a row: the bound at X_opt needs X_opt first."""
    pc = cost(p, Mesh(X=None, Y=None), latency=False, **SYM)
    x_opt = optimum(pc, over="X", subject_to=sympy.Eq(X * Y, N)).result
    return compute_bound(pc, "B", substitute={X: x_opt, Y: N / x_opt}).result


def conditions() -> dict[str, tuple[object, ...]]:
    """name -> (function, parsed plans...): each derives one condition from its plans."""
    g, lo, dp, fsdp, tp, ft = (parse(t) for t in (GATHER, LOCAL, DP, FSDP, TP, FSDP_TP))
    return {
        "D > 2B (both comms-bound)": (lambda: compare(lo, g, "D", mesh=Mesh(X=4)).result,),
        "D > 2C/W (large batch)": (lambda: compare(lo, g, "D", "compute", mesh=Mesh(X=4)).result,),
        "DP: B/X > C/(W M_X)": (lambda: compute_bound(dp, "B", mesh=Mesh(X=None), **SYM).result,),
        "FSDP: B/X > C/(W M_X)": (lambda: compute_bound(fsdp, "B", mesh=Mesh(X=None), **SYM).result,),
        "TP: Y < F M_Y W/C": (lambda: compute_bound(tp, "Y", mesh=Mesh(Y=None), **SYM).result,),
        "FSDP+TP: X_opt": (lambda: _fsdp_tp_x_opt(ft),),
        "FSDP+TP: X_opt, then B/N bound": (lambda: _fsdp_tp(ft),),
        "decode: Y_max = F/(B beta)": (lambda: compute_bound(tp, "Y", bound="memory", hbm=("W_in", "W_out"),
                                                              mesh=Mesh(Y=None), **SYM).result,),  # fmt: skip
        "latency-bound buffer (v5e)": (lambda: critical(Op.ALL_GATHER, ("X",), hw="tpu-v5e").result,),
    }


def time_conditions(repeat: int) -> list[dict[str, object]]:
    rows = []
    for name, (fn,) in conditions().items():
        result = fn()  # warm sympy's caches once, as a notebook session would be
        runs = []
        for _ in range(repeat):
            sympy.core.cache.clear_cache()  # time the derivation itself, not a cache hit
            t0 = time.perf_counter()
            fn()
            runs.append(time.perf_counter() - t0)
        rows.append({"condition": name, "result": str(result), "median_ms": 1e3 * statistics.median(runs)})
    return rows


def time_sweep(points: int, slow_points: int) -> dict[str, object]:
    pc = cost(parse(FSDP_TP), Mesh(X=None, Y=None), hw="tpu-v5p", latency=False, overlap="steady")
    x_opt = optimum(pc, over="X", subject_to=sympy.Eq(X * Y, N)).result
    expr = pc.total.subs({X: x_opt, Y: N / x_opt, dim_size("D"): 8192})
    rng = np.random.default_rng(0)
    grid = {"B": rng.uniform(1e3, 1e6, points), "F": rng.uniform(1e4, 1e5, points), "N": rng.uniform(8, 8192, points)}
    compiled = lambdify(expr, pc.values)
    t0 = time.perf_counter()
    fast = compiled(**grid)
    t_fast = time.perf_counter() - t0
    closed = expr.subs(pc.values)
    symbols = {s.name: s for s in closed.free_symbols}
    t0 = time.perf_counter()
    slow = [float(closed.subs({symbols[k]: grid[k][i] for k in symbols}).evalf()) for i in range(slow_points)]
    t_slow = time.perf_counter() - t0
    assert np.allclose(fast[:slow_points], slow, rtol=1e-9), "lambdify and subs+evalf disagree"
    per_fast, per_slow = t_fast / points, t_slow / slow_points
    return {
        "expression": str(closed), "points": points, "lambdify_s": t_fast, "lambdify_per_point_s": per_fast,
        "slow_points": slow_points, "subs_evalf_s": t_slow, "subs_evalf_per_point_s": per_slow,
        "subs_evalf_extrapolated_s": per_slow * points, "ratio": per_slow / per_fast,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--slow-points", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows, sweep = time_conditions(args.repeat), time_sweep(args.points, args.slow_points)
    if args.json:
        print(json.dumps({"derivations": rows, "sweep": sweep}, indent=2))
        return 0
    print(f"derivation time, median of {args.repeat} (sympy cache cleared before each run; target < 100 ms)")
    for r in rows:
        flag = "" if r["median_ms"] < 100 else "  (over target)"
        print(f"  {r['condition']:<30} {r['median_ms']:8.1f} ms   {r['result']}{flag}")
    print(f"\nsweep of the FSDP+TP total time at X_opt on v5p: {sweep['expression']}")
    print(f"  lambdify:      {sweep['points']:>9,} points in {sweep['lambdify_s']:.3f} s "
          f"({sweep['lambdify_per_point_s'] * 1e9:.1f} ns/point)")  # fmt: skip
    print(f"  subs + evalf:  {sweep['slow_points']:>9,} points in {sweep['subs_evalf_s']:.3f} s "
          f"({sweep['subs_evalf_per_point_s'] * 1e6:.1f} us/point), extrapolated to {sweep['points']:,}: "
          f"{sweep['subs_evalf_extrapolated_s']:.0f} s")  # fmt: skip
    print(f"  ratio: lambdify is {sweep['ratio']:,.0f}x faster per point")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
