"""A cost swept over 10^6 points: compiled (``shardalg.lambdify``, its compile time included) against
``xreplace`` + ``evalf`` on the same expression.

    python -m bench sweep [--points N] [--slow-points N] [--repeat N] [--json]

The expression: the total time on a TPU v5p of the FSDP+TP MLP block as the planner plans it (the book's
steady overlap), at the optimal |X| (so in B, F and N, with D = 8192). The compiled column is one ``lambdify`` (substituting the
chip's numbers and compiling) plus one call on ``--points`` random points, median of ``--repeat``. The
baseline substitutes the chip's numbers once, then per point ``xreplace`` of B, F, N by Floats and ``evalf``;
it runs on ``--slow-points`` points and its time per point is extrapolated to ``--points`` (printed so).
The two agree on the points both evaluate (checked).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from bench.common import median_ms, ratio, table, timed

D_VALUE = 8192


def expression() -> tuple[Any, dict[Any, float]]:
    """The swept cost and the chip's numbers."""
    import sympy

    import shardalg as sa
    from shardalg.algebra.symbols import axis_size, device_count, dim_size
    from shardalg.notation.syntax import Program

    from .derive import MLP, STEADY

    mesh = sa.Mesh(X=None, Y=None)
    X, Y, N = axis_size("X"), axis_size("Y"), device_count()
    steps = [s.statement() for st in sa.parse(MLP).statements for s in sa.plan(st, mesh).steps]
    program = Program(tuple(steps))
    pc = sa.cost(program, mesh, hw="tpu-v5p", latency=False, overlap=STEADY)
    comms = sa.cost(program, mesh, latency=False, overlap=STEADY)
    x_opt = sa.optimum(comms, over="X", subject_to=sympy.Eq(X * Y, N)).result
    expr = pc.total.xreplace({X: x_opt, Y: N / x_opt, dim_size("D"): D_VALUE})
    return expr, dict(pc.values)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench sweep", description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--slow-points", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    import numpy as np
    import sympy

    import shardalg as sa

    expr, values = expression()
    rng = np.random.default_rng(0)
    grid = {
        "B": rng.uniform(1e3, 1e6, args.points),
        "F": rng.uniform(1e4, 1e5, args.points),
        "N": rng.uniform(8, 8192, args.points),
    }

    def compiled() -> Any:
        return sa.lambdify(expr, values)(**grid)

    runs = [timed(compiled) for _ in range(args.repeat)]
    fast = runs[-1][1]

    def slow() -> list[float]:
        closed = expr.xreplace(values)
        symbols = {s.name: s for s in closed.free_symbols}
        return [
            float(closed.xreplace({symbols[k]: sympy.Float(grid[k][i]) for k in symbols}).evalf())
            for i in range(args.slow_points)
        ]

    t_slow, got = timed(slow)
    if not np.allclose(fast[: args.slow_points], got, rtol=1e-9):
        raise SystemExit("lambdify and xreplace + evalf disagree")
    t_fast = median_ms(t for t, _ in runs) / 1e3
    per_slow = t_slow / args.slow_points
    result = {
        "expression": str(expr.xreplace(values)),
        "points": args.points,
        "lambdify_s": t_fast,
        "xreplace_evalf_points": args.slow_points,
        "xreplace_evalf_s": t_slow,
        "xreplace_evalf_per_point_us": per_slow * 1e6,
        "xreplace_evalf_extrapolated_s": per_slow * args.points,
        "speedup": per_slow * args.points / t_fast,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"sweep of the FSDP+TP block's total time on tpu-v5p at X_opt, D = {D_VALUE}: {result['expression']}"
    )
    print(
        table(
            ["method", "points", "seconds", "per point"],
            [
                [
                    f"lambdify (compile included), median of {args.repeat}",
                    f"{args.points:,}",
                    f"{t_fast:.3f}",
                    f"{t_fast / args.points * 1e9:.0f} ns",
                ],
                [
                    "xreplace + evalf, measured",
                    f"{args.slow_points:,}",
                    f"{t_slow:.3f}",
                    f"{per_slow * 1e6:.0f} us",
                ],
                ["xreplace + evalf, extrapolated", f"{args.points:,}", f"{per_slow * args.points:,.0f}", ""],
            ],
            right=(1, 2, 3),
        )
    )
    print(f"compiled is {ratio(per_slow * args.points, t_fast)} faster over {args.points:,} points")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
