"""The book's two derivations from plans the planner writes: D > 2B (seed 000, question 4) and FSDP+TP's X_opt
(seed 002, section 4.3), warm and fresh.

    python -m bench derive [--repeat N] [--json]

D > 2B: every plan of ``X[B, D] · Y[D_X, F] -> Z[B, F]`` on a mesh with |X| symbolic, then ``compare`` of the
plan that all-reduces partial products with the plan that gathers the weights, solved for D. X_opt: each
statement of the MLP block planned, the plans' steps costed as one program (bandwidth terms, link counts
as symbols, the book's steady overlap), then ``optimum`` over |X| subject to |X||Y| = N. Both are timed whole (planning included);
the expression is parsed outside. Each result is checked against the book's before the timing.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from bench.common import find_caches, median_ms, table, timed, verdict

TARGET_MS = 30.0
STEADY = "steady"  # the book's layer-level overlap (the X and Y links and the compute overlap); a truthy
# overlap on engines whose overlap is a flag
CASE_2 = "X[B, D] · Y[D_X, F] -> Z[B, F]"
MLP = "In[B_X, D_Y] · W_in[D_X, F_Y] -> Tmp[B_X, F_Y]; Tmp[B_X, F_Y] · W_out[F_Y, D_X] -> Out[B_X, D_Y]"


def d_over_2b() -> tuple[Any, Any]:
    """The derivation and the book's answer."""
    import sympy

    import shardalg as sa
    from shardalg.algebra.symbols import dim_size

    stmt = sa.parse(CASE_2).statements[0]
    mesh = sa.Mesh(X=None)

    def derive() -> Any:
        found = sa.plans(stmt, mesh)
        ops = [{s.op.value for s in p.steps} for p in found]
        local = next(p for p, o in zip(found, ops, strict=True) if "AllReduce" in o)
        gather = next(p for p, o in zip(found, ops, strict=True) if "AllGather" in o)
        return sa.compare(local, gather, "D", mesh=mesh).result

    return derive, sympy.StrictGreaterThan(dim_size("D"), 2 * dim_size("B"))


def x_opt() -> tuple[Any, Any]:
    import sympy

    import shardalg as sa
    from shardalg.algebra.symbols import axis_size, device_count, dim_size, links
    from shardalg.notation.syntax import Program

    statements = sa.parse(MLP).statements
    mesh = sa.Mesh(X=None, Y=None)
    X, Y, N = axis_size("X"), axis_size("Y"), device_count()

    def derive() -> Any:
        steps = [s.statement() for st in statements for s in sa.plan(st, mesh).steps]
        pc = sa.cost(Program(tuple(steps)), mesh, latency=False, symbolic_links=True, overlap=STEADY)
        return sa.optimum(pc, over="X", subject_to=sympy.Eq(X * Y, N)).result

    book = sympy.sqrt(dim_size("B") * links("X") * N / (dim_size("F") * links("Y")))
    return derive, book


def _same(a: Any, b: Any) -> bool:
    import sympy

    if isinstance(a, sympy.Rel) and isinstance(b, sympy.Rel):
        return (
            type(a) is type(b) and sympy.simplify(a.lhs - b.lhs) == 0 and sympy.simplify(a.rhs - b.rhs) == 0
        )
    return sympy.simplify(a - b) == 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench derive", description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15, help="runs of each (median)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    caches = find_caches()
    rows = []
    for name, make in (
        ("D > 2B from the plans of case 2", d_over_2b),
        ("X_opt of FSDP+TP from planned MLP", x_opt),
    ):
        fn, book = make()
        got = fn()  # warm-up, and the check
        if not _same(got, book):
            raise SystemExit(f"{name}: derived {got}, the book says {book}")
        warm, fresh = [], []
        for _ in range(args.repeat):
            caches.clear_warm()
            warm.append(timed(fn)[0])
            caches.clear_fresh()
            fresh.append(timed(fn)[0])
        rows.append(
            {"derivation": name, "result": str(got), "warm_ms": median_ms(warm), "fresh_ms": median_ms(fresh)}
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"derivations from plans, median of {args.repeat} (ms); each result equals the book's")
    print(caches.describe())
    print(
        table(
            ["derivation", "result", "warm", "fresh", f"warm <= {TARGET_MS:.0f} ms"],
            [
                [
                    r["derivation"],
                    r["result"],
                    f"{r['warm_ms']:.1f}",
                    f"{r['fresh_ms']:.1f}",
                    verdict(r["warm_ms"] <= TARGET_MS),
                ]
                for r in rows
            ],
            right=(2, 3),
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
