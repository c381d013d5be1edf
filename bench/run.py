"""First benchmark: parse + legality + shape of the seed's expressions, and the CLI's cold start.

    python -m bench            (or: python bench/run.py)   [--repeat N] [--cold-runs N]

Warm: the grammar is loaded once, then each expression is parsed, checked on the mesh X=4, Y=2, Z=2 and,
when it is one tensor, measured; the median of N runs is printed per expression. Cold: the wall time of
``shardalg parse 'A[I_X, J]'`` in a new process, median of several runs, next to ``python -c pass``
measured in the same run as the baseline.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

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


def warm(repeat: int) -> list[tuple[str, float, float, float, str]]:
    from shardalg.algebra.legality import check
    from shardalg.algebra.shape import shape
    from shardalg.notation.parse import parse
    from shardalg.notation.syntax import Tensor

    parse("A[I_X, J]")  # load the grammar once
    rows = []
    for expr in EXPRESSIONS:
        program = parse(expr)
        found = check(program, MESH, SIZES)
        one_tensor = len(program.statements) == 1 and isinstance(program.statements[0], Tensor) and not found
        t_parse = _median_us(lambda e=expr: parse(e), repeat)
        t_check = _median_us(lambda p=program: check(p, MESH, SIZES), repeat)
        t_shape = _median_us(lambda p=program: shape(p, MESH, SIZES), repeat) if one_tensor else 0.0
        verdict = "legal" if not found else found[0].rule
        rows.append((expr, t_parse, t_check, t_shape, verdict))
    return rows


def _cli_command() -> list[str]:
    exe = shutil.which("shardalg")
    if exe:
        return [exe]
    return [sys.executable, "-c", "from shardalg.cli import run; run()"]


def _wall_ms(cmd: list[str], runs: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=ROOT)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def cold(runs: int) -> tuple[float, float, str]:
    cli = _cli_command()
    _wall_ms(cli + ["parse", "A[I_X, J]"], 1)  # warm the OS file cache and the bytecode
    baseline = _wall_ms([sys.executable, "-c", "pass"], runs)
    start = _wall_ms(cli + ["parse", "A[I_X, J]"], runs)
    return baseline, start, " ".join(Path(c).name if i == 0 else c for i, c in enumerate(cli))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200, help="runs per expression (median)")
    ap.add_argument("--cold-runs", type=int, default=7, help="process starts per command (median)")
    args = ap.parse_args(argv)

    rows = warm(args.repeat)
    width = max(len(r[0]) for r in rows)
    print(f"warm, median of {args.repeat} runs, mesh {MESH} (µs)")
    print(f"{'expression':<{width}}  {'parse':>7}  {'check':>7}  {'shape':>7}  {'total':>7}  verdict")
    for expr, p, c, s, verdict in rows:
        shown = f"{s:7.1f}" if s else f"{'-':>7}"
        print(f"{expr:<{width}}  {p:7.1f}  {c:7.1f}  {shown}  {p + c + s:7.1f}  {verdict}")
    totals = [p + c + s for _, p, c, s, _ in rows]
    print(f"{'median per expression':<{width}}  {'':>7}  {'':>7}  {'':>7}  {statistics.median(totals):7.1f}")
    print(f"{'worst expression':<{width}}  {'':>7}  {'':>7}  {'':>7}  {max(totals):7.1f}")

    baseline, start, shown_cli = cold(args.cold_runs)
    print()
    print(f"cold start, median of {args.cold_runs} runs (ms)")
    print(f"{'python -c pass':<40}  {baseline:7.1f}")
    print(f"{shown_cli + ' parse A[I_X, J]':<40}  {start:7.1f}")
    print(f"{'difference (shardalg import + parse)':<40}  {start - baseline:7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
