"""``python -m tests.fuzz --inputs N``: the long stage fuzz, with a memory cap, printing its figures."""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    ap.add_argument("--inputs", type=int, default=5000, help="how many inputs (hypothesis examples)")
    ap.add_argument("--memory-mb", type=int, default=3072, help="the address-space cap (RLIMIT_AS), in MiB")
    ap.add_argument("--seed", type=int, default=0, help="hypothesis's random seed")
    ap.add_argument("--json", type=Path, help="write the figures here as JSON")
    ap.add_argument("--progress", type=int, default=1000, help="print a line every this many inputs")
    args = ap.parse_args(argv)
    cap = args.memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    from hypothesis import HealthCheck, Phase, given, seed, settings
    from hypothesis import strategies as st

    from tests.fuzz.inputs import settings as mesh_and_sizes
    from tests.fuzz.inputs import sources
    from tests.fuzz.stages import Tally, run_stages

    tally = Tally()
    start = time.perf_counter()

    @seed(args.seed)
    @settings(max_examples=args.inputs, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(st.data())
    def one(data: st.DataObject) -> None:
        kind, source = data.draw(sources())
        run_stages(source, kind, lambda program: data.draw(mesh_and_sizes(program)), tally)
        n = sum(tally.inputs.values())
        if args.progress and n % args.progress == 0:
            print(f"{n} inputs, {time.perf_counter() - start:.0f} s, failures {dict(tally.failure_kinds)}",
                  file=sys.stderr, flush=True)  # fmt: skip

    one()
    figures = {**tally.summary(), "seconds": round(time.perf_counter() - start, 1), "memory_mb": args.memory_mb}
    out = json.dumps(figures, indent=2, ensure_ascii=False)
    if args.json:
        args.json.write_text(out + "\n", encoding="utf-8")
    print(out)
    return 1 if tally.failure_kinds else 0


if __name__ == "__main__":
    raise SystemExit(main())
