"""``python -m bench``: every benchmark, one after the other.

    python -m bench                 notation (bench/run.py), plans (bench/bench_plan.py), costs (bench/bench_costs.py),
                                    search (bench/bench_search.py), strategy (bench/bench_strategy.py)
    python -m bench notation|plans|costs|search|strategy [ARGS...]   one of them, with its own options (--help)
"""

import sys

from bench import bench_costs, bench_plan, bench_search, bench_strategy, run

SUITES = {"notation": run.main, "plans": bench_plan.main, "costs": bench_costs.main, "search": bench_search.main,
          "strategy": bench_strategy.main}

if len(sys.argv) > 1 and sys.argv[1] in SUITES:
    raise SystemExit(SUITES[sys.argv[1]](sys.argv[2:]))
status = 0
for name, main in SUITES.items():
    print(f"== {name} ==", flush=True)
    status |= main([])
    print()
raise SystemExit(status)
