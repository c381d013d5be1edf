"""``python -m tests.fuzz --inputs N``: the long stage fuzz, with a memory cap, printing its figures.

The inputs run as consecutive hypothesis runs of ``--chunk`` examples (each with its own seed, derived from
``--seed``), so hypothesis's record of the examples it has tried stays bounded under the memory cap however long
the run. The garbage collector never runs inside a stage: automatic collection is off for the run, and the
harness collects between inputs (the young generations when they are due, everything every ``--full-gc``
inputs and after each chunk), timing those collections apart from every stage; after each chunk the package's
caches are cleared (bounded by entries, not bytes, they would fill the cap), and after each chunk and each
progress line the figures so far are written to ``--json`` (``"complete":
false`` until the end), and SIGINT or SIGTERM stops the run with its figures written, so a run stopped early
still says how far it got.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import signal
import sys
import time
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    ap.add_argument("--inputs", type=int, default=5000, help="how many inputs (hypothesis examples)")
    ap.add_argument("--memory-mb", type=int, default=3072, help="the address-space cap (RLIMIT_AS), in MiB")
    ap.add_argument(
        "--seed", type=int, default=0, help="hypothesis's random seed (chunk i runs seed*100003+i)"
    )
    ap.add_argument("--chunk", type=int, default=5000, help="examples per hypothesis run")
    ap.add_argument(
        "--json", type=Path, help="write the figures here as JSON (after each chunk, and at the end)"
    )
    ap.add_argument("--progress", type=int, default=1000, help="print a line every this many inputs")
    ap.add_argument(
        "--full-gc", type=int, default=500, help="a full garbage collection every this many inputs"
    )
    args = ap.parse_args(argv)
    cap = args.memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    from hypothesis import HealthCheck, Phase, given, seed, settings
    from hypothesis import strategies as st

    from shardalg.cache import clear_caches
    from tests.fuzz.inputs import chip_files, sources
    from tests.fuzz.inputs import settings as mesh_and_sizes
    from tests.fuzz.stages import Tally, run_stages

    tally = Tally()
    start = time.perf_counter()
    between = {"collections": 0, "cpu_seconds": 0.0, "most_cpu_seconds": 0.0}

    def collect(generation: int) -> None:
        """A collection between inputs, outside every stage's timing (and counted apart)."""
        cpu0 = time.process_time()
        gc.collect(generation)
        cpu = time.process_time() - cpu0
        between["collections"] += 1
        between["cpu_seconds"] += cpu
        between["most_cpu_seconds"] = max(between["most_cpu_seconds"], cpu)

    def done() -> int:
        return sum(tally.inputs.values())

    def figures(complete: bool) -> dict[str, Any]:
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return {
            **tally.summary(),
            "complete": complete,
            "seconds": round(time.perf_counter() - start, 1),
            "memory_mb": args.memory_mb,
            "peak_rss_mb": round(peak_mb),
            "seed": args.seed,
            "chunk": args.chunk,
            "caches_cleared": "after each chunk",
            "gc_between_inputs": {k: round(v, 3) if isinstance(v, float) else v for k, v in between.items()},
        }

    def write(complete: bool) -> str:
        out = json.dumps(figures(complete), indent=2, ensure_ascii=False)
        if args.json:
            args.json.write_text(out + "\n", encoding="utf-8")
        return out

    # the process-wide settings the run changes are put back when it ends: a test runs it inside pytest's
    # worker, whose later tests need the collector on and whose own SIGTERM must not raise KeyboardInterrupt
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # kill PID stops the run like Ctrl-C
    collecting = gc.isenabled()
    try:
        # The modules and tables imported so far live as long as the process: out of the collector's way.
        # Automatic collection is off: a collection fired inside a stage scans the whole run's heap
        # (hypothesis's record of the chunk: a 2.58 s collection was billed to a backward that takes 0.06 s),
        # which says nothing of the stage. The harness collects between inputs instead; a stage that makes
        # unbounded garbage still meets the memory cap.
        gc.collect()
        gc.freeze()
        gc.disable()
        thresholds = gc.get_threshold()
        chunk = 0
        while done() < args.inputs:
            quota = min(args.chunk, args.inputs - done())  # hypothesis may run a few more: all are counted

            @seed(args.seed * 100_003 + chunk)
            @settings(
                max_examples=quota,
                database=None,
                deadline=None,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(st.data())
            def one(data: st.DataObject) -> None:
                kind, source = data.draw(sources())
                run_stages(
                    source,
                    kind,
                    lambda program: data.draw(mesh_and_sizes(program)),
                    tally,
                    chip_file=data.draw(chip_files()),
                )
                n = done()
                if args.full_gc and n % args.full_gc == 0:
                    collect(2)
                elif gc.get_count()[0] > thresholds[0]:
                    collect(1)
                if args.progress and n % args.progress == 0:
                    write(complete=False)
                    print(
                        f"{n} inputs, {time.perf_counter() - start:.0f} s, failures {dict(tally.failure_kinds)}",
                        file=sys.stderr,
                        flush=True,
                    )

            before = done()
            try:
                one()
            except KeyboardInterrupt:  # stopped (SIGINT or SIGTERM): the figures so far, marked incomplete
                print(f"stopped after {done()} inputs", file=sys.stderr, flush=True)
                break
            chunk += 1
            # the package's caches are bounded by entries, not bytes (SHARDALG_CACHE_SIZE each): the random
            # layers fill them with large plans faster than a session does (1,500 of them held 1.85 GB), so
            # each chunk starts them again, as a fresh process would
            clear_caches()
            # hypothesis's record of the chunk is garbage now (a 3.07 s collection was measured here)
            collect(2)
            write(complete=False)
            if done() == before:
                break  # hypothesis found nothing new to try: stop rather than loop
        out = write(complete=done() >= args.inputs)
        print(out)
        return 1 if tally.failure_kinds or done() < args.inputs else 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        gc.unfreeze()
        if collecting:
            gc.enable()


if __name__ == "__main__":
    raise SystemExit(main())
