"""Parse + legality + shape of the seed's expressions, warm.

    python -m bench notation [--repeat N]

The grammar is loaded once, then each expression is parsed, checked on the mesh X=4, Y=2, Z=2 and, when it
is one tensor, measured; the median of N runs is printed per expression. The baseline, timed in the same
loop: lark's own LALR parse of the same text into its parse tree (no AST, no checks). (The cold start of the README's
commands is ``python -m bench cold``.)
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.common import ratio, table

MESH = "X=4,Y=2,Z=2"
SIZES = {"I": 1024, "J": 4096, "K": 2048, "B": 256, "D": 1024, "F": 4096}

# Quoted from seeds/000_*.txt as they are written there (LaTeX included), plus the quick questions.
EXPRESSIONS: tuple[str, ...] = (
    r"A[I_X, J_Y]",
    r"A[I_{XY}, J]",
    r"A: fp32[I_XY, J] where I=1024, J=4096",
    r"A: int8[I_XY, J] where I=128, J=2048",
    r"A[I_X, J] \cdot B[J, K_Y] \to C[I_X, K_Y]",
    r"A[I_X, J] \cdot B[J, K_Y] \to C[I, K]",
    r"A[I_X, J_Y] \cdot_J B[J_Y, K] \to C[I_X, K]",
    r"X[B, D_X] \cdot_D Y[D_X, F] \to Z[B, F] \{U_X\}",
    r"X[B, D] \cdot_D Y[D_X, F] \to Z[B, F]",
    r"In[B, D] \cdot W_\text{in}[D, F] \cdot W_\text{out}[F, D]",
    r"\text{AllGather}_{XY}([B_X, D_Y])",
    r"\text{AllGather}_{X}(A'[I_X]) \to A'[I]",
    r"\text{ReduceScatter}_X(A[I] \{U_X\}) \to A[I_X]",
    r"\text{AllReduce}_Z([B_X, D_Y] \{U_Z \})",
    r"[B_X, D_Y] \to [B_{XZ}, D_Y]",
    r"A[I_{XY}, J] \rightarrow A[I_Y, J]",
    r"A[I_X, J_X]",
)


def _median_us(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times) / 1000


def warm(repeat: int) -> list[tuple[str, float, float, float, float, str]]:
    from shardalg.algebra.legality import check
    from shardalg.algebra.shape import shape
    from shardalg.notation.grammar import lalr_parser
    from shardalg.notation.parse import parse
    from shardalg.notation.syntax import Tensor

    lark = lalr_parser()

    parse("A[I_X, J]")  # load the grammar once
    rows = []
    for expr in EXPRESSIONS:
        program = parse(expr)
        found = check(program, MESH, SIZES)
        one_tensor = len(program.statements) == 1 and isinstance(program.statements[0], Tensor) and not found
        t_lark = _median_us(lambda e=expr: lark.parse(e, start="start"), repeat)
        t_parse = _median_us(lambda e=expr: parse(e), repeat)
        t_check = _median_us(lambda p=program: check(p, MESH, SIZES), repeat)
        t_shape = _median_us(lambda p=program: shape(p, MESH, SIZES), repeat) if one_tensor else 0.0
        verdict = "legal" if not found else found[0].rule
        rows.append((expr, t_lark, t_parse, t_check, t_shape, verdict))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench notation", description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200, help="runs per expression (median)")
    args = ap.parse_args(argv)

    rows = warm(args.repeat)
    print(f"warm, median of {args.repeat} runs, mesh {MESH} (µs); baseline: lark's parse of the same text")
    out = []
    for expr, lark, p, c, s, verdict in rows:
        out.append(
            [
                expr,
                f"{lark:.1f}",
                f"{p:.1f}",
                ratio(p, lark),
                f"{c:.1f}",
                f"{s:.1f}" if s else "-",
                f"{p + c + s:.1f}",
                ratio(p + c + s, lark),
                verdict,
            ]
        )
    totals = [p + c + s for _, _, p, c, s, _ in rows]
    print(
        table(
            ["expression", "lark parse", "parse", "vs lark", "check", "shape", "total", "vs lark", "verdict"],
            out,
            right=range(1, 8),
        )
    )
    print(f"median total per expression {statistics.median(totals):.1f} µs, worst {max(totals):.1f} µs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
