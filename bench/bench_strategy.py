"""Benchmark of the numeric strategy search: the book's question 7 and one transformer layer.

    python bench/bench_strategy.py [--repeat N] [--layer-repeat N] [--train-mesh M] [--core-mesh M] [--json]
    (or: python -m bench strategy)

In process: ``sa.search`` on question 7 (MLP, TPU v5e 2x2, 300 MB, forward) and on one transformer layer
(attention + MLP, 2x2x2, forward, the chip's HBM), median of N runs each, with sympy's cache and the
planner's whole-query caches (a statement's plans, an einsum's optimum: ``bench.common``'s warm clearing)
cleared before each run, next to the baseline of the same run: planning the question's two statements once.
With ``--train-mesh`` (e.g. ``X=2,Y=2``): the layer in training on that mesh, in CPU seconds, by the numeric
search (every assignment of its space enumerated and priced, from its statements' prices where they sum: the
baseline) and by the per-statement graph search (:mod:`shardalg.search.graph`: each statement's choices priced
once and combined freely, solved by the tree DP or the ILP; its space is larger, so its step may be faster).
With ``--core-mesh`` (e.g. ``X=2,Y=2``; the issue's case is ``X=2,Y=2,Z=2``): the layer with its attention core,
norms and residuals (``TRANSFORMER_FN``, ``LAYER_TRAIN``'s sizes) in training on that mesh, in CPU seconds, its
candidates priced from their statements under the branch and bound (:mod:`shardalg.search.branchbound`) against the
baseline of the same run: every candidate's whole program priced (the brute force); the two winners must be one.
Cold: ``shardalg search`` on question 7 in a new process, median of N, next to ``python -c pass``.
With ``--degrees``: LLaMA-3 70B in training on ``v5p-8960`` (B=1280, T=4096, remat block, the chip's HBM) by
the degrees search (:mod:`shardalg.search.degrees`), in CPU seconds (target < 60 s), next to the baseline of the
same run: pricing its winner once (``model_step`` and ``model_memory``), which the search does per candidate.
With ``--moe``: Mixtral 8x7B in training on ``v5e-64`` (B=16, T=4096, remat block, the chip's HBM) by the degrees
search, in CPU seconds, with the maps its memory floor pruned, its winner priced once (the baseline) and its best
expert-parallel candidate against the winner; and on ``v5p-8`` the maps before and after the floor.
"""

from __future__ import annotations

import argparse
import json
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

import sympy  # noqa: E402

from bench.common import find_caches  # noqa: E402
from shardalg.planning import planner  # noqa: E402
from shardalg.search.graph import search_graph  # noqa: E402
from shardalg.search.numeric import search  # noqa: E402
from tests.search.programs import LAYER, LAYER_TRAIN, MLP, Q7, TRANSFORMER, TRANSFORMER_FN  # noqa: E402

_CACHES = find_caches()


def _clear() -> None:
    sympy.core.cache.clear_cache()
    _CACHES.clear_warm()


def _median(fn, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        _clear()
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def _cold(argv: list[str], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=os.environ)
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--layer-repeat", type=int, default=1)
    ap.add_argument("--train-mesh", default=None, help="also time the layer in training on this mesh")
    ap.add_argument(
        "--degrees", action="store_true", help="also time LLaMA-3 70B's degrees search on v5p-8960"
    )
    ap.add_argument(
        "--moe",
        action="store_true",
        help="also time Mixtral 8x7B's degrees search on v5e-64 (and count its maps on v5p-8)",
    )
    ap.add_argument(
        "--core-mesh", default=None, help="also time the layer with its attention core in training"
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    def baseline() -> None:
        from shardalg.algebra.mesh import Mesh
        from shardalg.notation.parse import parse

        for s in parse(MLP).statements:
            planner.plan(s, Mesh.parse("X=2,Y=2"), {"B": 128, "D": 8192, "F": 32768})

    out: dict[str, float] = {"baseline_plan_q7_s": _median(baseline, args.repeat)}
    out["q7_search_s"] = _median(lambda: search(MLP, **Q7), args.repeat)
    layer = search(TRANSFORMER, **LAYER)
    out["layer_search_s"] = _median(lambda: search(TRANSFORMER, **LAYER), args.layer_repeat)
    out["layer_priced"] = layer.space.size - sum(layer.pruned.to_json().values())
    exe = shutil.which("shardalg", path=str(Path(sys.executable).parent)) or shutil.which("shardalg")
    if exe is not None:
        out["cold_python_s"] = _cold([sys.executable, "-c", "pass"], args.repeat)
        out["cold_q7_cli_s"] = _cold(
            [
                exe,
                "search",
                MLP,
                "--mesh",
                Q7["mesh"],
                "--sizes",
                Q7["sizes"],
                "--hw",
                Q7["hw"],
                "--memory",
                Q7["memory"],
                "--mode",
                Q7["mode"],
                "--quiet",
            ],
            args.repeat,
        )
    if args.train_mesh is not None:
        on = {**LAYER, "mesh": args.train_mesh, "mode": "train"}

        def cpu(fn):
            _clear()
            t0 = time.process_time()
            got = fn()
            return time.process_time() - t0, got

        out["train_whole_cpu_s"], whole = cpu(lambda: search(TRANSFORMER, **on))
        out["train_graph_cpu_s"], graph = cpu(lambda: search_graph(TRANSFORMER, **on))
        out["train_whole_seconds"] = whole.winner.seconds if whole.winner is not None else None
        out["train_graph_seconds"] = graph.seconds
        out["train_graph_solver"] = f"{graph.solver}, {'optimal' if graph.optimal else 'not proven optimal'}"
    if args.degrees:
        out.update(_degrees())
    if args.moe:
        out.update(_moe())
    if args.core_mesh is not None:
        out.update(_core(args.core_mesh))
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(
            f"question 7 search        {out['q7_search_s'] * 1e3:8.1f} ms  median of {args.repeat} "
            f"(baseline: plan its two statements {out['baseline_plan_q7_s'] * 1e3:.1f} ms, "
            f"ratio {out['q7_search_s'] / out['baseline_plan_q7_s']:.0f}x)"
        )
        print(
            f"transformer layer search {out['layer_search_s']:8.2f} s   median of {args.layer_repeat} "
            f"({out['layer_priced']} priced)"
        )
        if "train_whole_cpu_s" in out:
            print(
                f"layer, training, {args.train_mesh}: numeric search {out['train_whole_cpu_s']:.1f} s CPU "
                f"(winner {out['train_whole_seconds']:.4g} s per step); per-statement graph search "
                f"{out['train_graph_cpu_s']:.1f} s CPU ({out['train_graph_solver']}, "
                f"{out['train_graph_seconds']:.4g} s per step)"
            )
        if "core_pieces_cpu_s" in out:
            print(
                f"layer with its core, training, {args.core_mesh}: from statements {out['core_pieces_cpu_s']:.1f} s "
                f"CPU ({out['core_priced']:,} candidates priced, {out['core_unpriced']:,} left unpriced by the bound, "
                f"{out['core_statements_priced']:,} sharded statements priced), every whole program (baseline) "
                f"{out['core_whole_cpu_s']:.1f} s CPU; winner "
                f"{out['core_winner']} ({'the same' if out['core_same_winner'] else 'NOT the same'})"
            )
        if "cold_q7_cli_s" in out:
            print(
                f"shardalg search (q7)     {out['cold_q7_cli_s']:8.2f} s   new process, median of {args.repeat} "
                f"(python -c pass {out['cold_python_s']:.2f} s)"
            )
        if "degrees_cpu_s" in out:
            print(
                f"LLaMA-3 70B on v5p-8960, degrees search: {out['degrees_cpu_s']:.1f} s CPU (target < 60 s; "
                f"baseline: its winner priced once {out['degrees_baseline_cpu_s']:.2f} s); winner "
                f"{out['degrees_winner']}, {out['degrees_seconds']:.4g} s per step, {out['degrees_bytes'] / 1e9:.3g} GB"
            )
        if "moe_cpu_s" in out:
            print(
                f"Mixtral 8x7B on {MOE_SLICE}, degrees search: {out['moe_cpu_s']:.1f} s CPU, "
                f"{out['moe_maps_priced']:,} maps priced of {out['moe_maps']:,} (the memory floor pruned the rest; "
                f"baseline: its winner priced once {out['moe_baseline_cpu_s']:.2f} s); winner {out['moe_winner']}, "
                f"{out['moe_seconds']:.4g} s per step, {out['moe_bytes'] / 1e9:.3g} GB; the best EP: "
                f"{out['moe_best_ep']}; on v5p-8: {out['moe_v5p8']}"
            )
    return 0


MOE_SLICE, MOE_SIZES = "v5e-64", "B=16,T=4096"


def _moe() -> dict[str, object]:
    """Mixtral 8x7B's degrees search on v5e-64 (training, remat block, the chip's HBM) in CPU seconds, the maps
    the memory floor pruned, its winner priced once again (the baseline) and its best expert-parallel candidate;
    and on v5p-8, the maps before and after the floor (more than MAX_MAPS are left: refused, said)."""
    from shardalg.costs.topology import slice_topology
    from shardalg.errors import UsageError
    from shardalg.models.analysis import analyze
    from shardalg.models.memory import model_memory
    from shardalg.models.program import model_program
    from shardalg.models.step import model_step
    from shardalg.planning.symbolic import strict
    from shardalg.search.degrees import search_degrees

    _clear()
    t0 = time.process_time()
    with strict():
        r = search_degrees("mixtral-8x7b", MOE_SLICE, MOE_SIZES, remat="block")
    cpu = time.process_time() - t0
    w = r.winner
    ep = next((c for c in r.ranked if "EP" in c.strategy.split("+")), None)
    _clear()
    t0 = time.process_time()
    mesh = slice_topology(MOE_SLICE).layout(w.degrees.factoring).mesh
    with strict():
        a = analyze(model_program(w.program, mesh, MOE_SIZES), "train", "block")
        model_step(a, "tpu-v5e", r.policy), model_memory(a, "tpu-v5e")
    baseline = time.process_time() - t0
    try:
        search_degrees("mixtral-8x7b", "v5p-8", MOE_SIZES, remat="block")
        v5p8 = "searched"
    except UsageError as e:
        v5p8 = str(e).splitlines()[0].removeprefix("error: ")
    return {
        "moe_cpu_s": cpu,
        "moe_baseline_cpu_s": baseline,
        "moe_maps": r.floored.maps,
        "moe_maps_priced": r.floored.maps - r.floored.count,
        "moe_winner": w.text(),
        "moe_seconds": w.seconds,
        "moe_bytes": w.bytes,
        "moe_best_ep": (
            f"{ep.text()}, {ep.seconds:.4g} s = {ep.seconds / w.seconds:.3g}x the winner's, compute "
            f"{ep.compute:.4g} s, communication {ep.comms:.4g} s"
            if ep is not None
            else "none fits"
        ),
        "moe_v5p8": v5p8,
    }


def _degrees() -> dict[str, object]:
    """The degrees search's CPU seconds on LLaMA-3 70B, v5p-8960, and its winner priced once again."""
    from shardalg.costs.topology import slice_topology
    from shardalg.models.analysis import analyze
    from shardalg.models.memory import model_memory
    from shardalg.models.program import model_program
    from shardalg.models.step import model_step
    from shardalg.planning.symbolic import strict
    from shardalg.search.degrees import search_degrees

    sizes = "B=1280,T=4096"
    _clear()
    t0 = time.process_time()
    with strict():
        r = search_degrees("llama-3-70b", "v5p-8960", sizes, remat="block")
    cpu = time.process_time() - t0
    w = r.winner
    _clear()
    t0 = time.process_time()
    mesh = slice_topology("v5p-8960").layout(w.degrees.factoring).mesh
    with strict():
        a = analyze(model_program(w.program, mesh, sizes), "train", "block")
        model_step(a, "tpu-v5p", r.policy), model_memory(a, "tpu-v5p")
    return {
        "degrees_cpu_s": cpu,
        "degrees_baseline_cpu_s": time.process_time() - t0,
        "degrees_winner": w.text(),
        "degrees_seconds": w.seconds,
        "degrees_bytes": w.bytes,
        "degrees_points": r.points,
    }


def _core(mesh: str) -> dict[str, object]:
    """The layer with its attention core in training on ``mesh``: CPU seconds priced from statements and with
    every candidate's whole program (the brute force, the baseline), and whether the winners agree."""
    from shardalg.search import numeric
    from shardalg.search.price import Pricer

    on = {**LAYER_TRAIN, "mesh": mesh}
    _clear()
    t0 = time.process_time()
    pieces = numeric.search(TRANSFORMER_FN, **on)
    took = time.process_time() - t0
    whole_pricer, bounded = numeric.pricer_for, numeric.bounded
    numeric.pricer_for = lambda base, space, st, pruned, notes: Pricer(base, space, st, pruned)
    numeric.bounded = lambda st: False  # every candidate priced: the brute force
    try:
        _clear()
        t0 = time.process_time()
        whole = numeric.search(TRANSFORMER_FN, **on)
        brute = time.process_time() - t0
    finally:
        numeric.pricer_for, numeric.bounded = whole_pricer, bounded
    w = pieces.winner
    return {
        "core_pieces_cpu_s": took,
        "core_priced": len(pieces.ranked) + len(pieces.rejected) - pieces.pruned.over_cap,
        "core_unpriced": pieces.solver.get("bound", {}).get("unpriced", 0),
        "core_statements_priced": pieces.solver.get("pieces"),
        "core_whole_cpu_s": brute,
        "core_winner": f"{w.strategy}: {w.assignment}" if w is not None else "none",
        "core_same_winner": (w is None and whole.winner is None)
        or (w is not None and whole.winner is not None and w.assignment == whole.winner.assignment),
    }


if __name__ == "__main__":
    raise SystemExit(main())
