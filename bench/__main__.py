"""``python -m bench``: every benchmark, one after the other; ``python -m bench NAME [ARGS...]``: one of them.

    python -m bench                      all of them, with their defaults (several minutes)
    python -m bench plans [--help]       all plans + symbolic costs, warm and fresh; XLA's compile beside
    python -m bench cold                 the README's plan and compare as processes vs `import sympy`
    python -m bench derive               D > 2B and X_opt from planned plans
    python -m bench sweep                lambdify over 10^6 points vs xreplace + evalf
    python -m bench executor             execute_plan vs dense A @ B, 512^3 and 1024^3 on 8 devices
    python -m bench notation             parse + check + shape vs lark's parse
    python -m bench map                  the strategy map of the MLP block (engine, and the CLI as a process)
    python -m bench strategy             the numeric search: question 7 and a transformer layer, and the CLI
    python -m bench arithmetic           a plan's cost built as light terms, sympy or symengine, and evaluated
    python -m bench wide                 plans of a product with 4, 8, 16 and 24 untouched dims (CPU seconds)
    python -m bench caches               the caches a fresh run clears, and what warm runs keep

Run from the checkout (the directory holding ``bench/``). Each part prints medians and ratios against a
baseline measured in the same run, and its targets (issue 10) with "meets" or "MISSES".
"""

import sys

from bench import (
    arithmetic,
    bench_search,
    bench_strategy,
    cold,
    derive,
    executor,
    notation,
    plans,
    sweep,
    wide,
)
from bench.common import find_caches


def _caches(argv: list[str]) -> int:
    print(find_caches().describe())
    return 0


PARTS = {
    "plans": plans.main,
    "cold": cold.main,
    "derive": derive.main,
    "sweep": sweep.main,
    "executor": executor.main,
    "notation": notation.main,
    "map": bench_search.main,
    "strategy": bench_strategy.main,
    "arithmetic": arithmetic.main,
    "wide": wide.main,
    "caches": _caches,
}

if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    raise SystemExit(0)
if len(sys.argv) > 1:
    if sys.argv[1] not in PARTS:
        raise SystemExit(f"unknown benchmark {sys.argv[1]!r}; known: {', '.join(PARTS)}")
    raise SystemExit(PARTS[sys.argv[1]](sys.argv[2:]))
status = 0
for name, main in PARTS.items():
    if name == "caches":
        continue
    print(f"== {name} ==", flush=True)
    status |= main([])
    print(flush=True)
raise SystemExit(status)
