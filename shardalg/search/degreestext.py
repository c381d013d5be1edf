"""The degrees search's result as text and JSON, its winner as a program file with the commands that price it
(``shardalg step`` and ``shardalg memory`` with ``--slice``, ``--mesh``, ``--pipeline`` and ``--microbatches``),
and why the runner-up lost, in numbers: a pipeline against no pipeline is its bubble against the time the
smaller stage mesh saves (``seconds = m x tick + bubble``, so the pipeline loses exactly when its bubble costs
more than the no-pipeline step less its ``m`` ticks).

Imports: :mod:`.degrees`'s result (duck-typed).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from shardalg.notation.printing import text

from .price import size_text, time_text

__all__ = ["result_text", "result_json", "explain_lines", "bubble_against", "program_file", "commands"]


def _sizes_flag(result: Any) -> str:
    return ",".join(f"{k}={v}" for k, v in result.given.items())


def commands(result: Any, path: str = "FILE.sa") -> list[str]:
    """``shardalg step`` and ``shardalg memory`` of the winner, with the flags the search priced it under."""
    w = result.winner
    words = [path, "--slice", result.slice, "--mesh", w.degrees.mesh_text, "--hw", result.chip.name]
    if result.given:
        words += ["--sizes", _sizes_flag(result)]
    if result.remat:
        words += ["--remat", result.remat]
    if w.pipeline is not None:
        words += ["--pipeline", w.pipeline.axis, "--microbatches", str(w.microbatches)]
    tail = " ".join(words)
    state = f" --optimizer {result.optimizer}" if result.optimizer else ""  # memory's alone: step has none
    return [f"shardalg step {tail} --overlap {result.policy}", f"shardalg memory {tail}{state}"]


def winner_text(result: Any, whole: bool) -> str:
    """The winner in the notation with no mesh line (``--slice`` and ``--mesh`` give the mesh: the program's
    own is stale) and the sizes the search used as its ``where`` line: always (``whole``: the file the
    commands price) or where the program wrote one."""
    p = result.winner.program
    sizes = tuple(result.sizes.items()) if whole or p.sizes else ()
    return text(replace(p, mesh=None, sizes=sizes, source=None))


def program_file(result: Any, path: str = "FILE.sa") -> str:
    """The winner as a program file: its sharded program, with its degrees and the commands as comments."""
    w = result.winner
    pipe = (
        f"pipeline over {w.pipeline.axis} = {'*'.join(w.degrees.pipeline)}: {w.stages} stages, "
        f"{w.microbatches} microbatches, schedule {w.pipeline.schedule.name}"
        if w.pipeline is not None
        else "no pipeline"
    )
    lines = [
        f"# the winner of shardalg search --choose-degrees on {result.slice}: {w.text()}",
        f"# {time_text(w.seconds)} per step, {size_text(w.bytes)} per device (cap {size_text(result.cap)}); {pipe}",
        "# the mesh is the slice factored as below (a mesh line cannot hold torus sides): priced by",
        *(f"#   {c}" for c in commands(result, path)),
        winner_text(result, whole=True),
    ]
    return "\n".join(lines) + "\n"


def bubble_against(result: Any) -> dict[str, Any] | None:
    """The best pipeline against the best candidate without one: its bubble and the time its stage mesh saves
    (the no-pipeline step less the pipeline's ``m`` ticks); None without both."""
    pipe, flat = result.best_pipeline(), result.best_without_pipeline()
    if pipe is None or flat is None:
        return None
    r = pipe.pipeline
    busy = r.microbatches * r.tick_seconds
    return {
        "pipeline": pipe.text(),
        "no_pipeline": flat.text(),
        "bubble": str(r.bubble),
        "bubble_seconds": r.bubble_seconds,
        "saved_seconds": flat.seconds - busy,
        "outside_seconds": r.outside_seconds,
        "pipeline_seconds": pipe.seconds,
        "no_pipeline_seconds": flat.seconds,
        "pipeline_wins": pipe.seconds < flat.seconds,
    }


def best_per_strategy(result: Any) -> list[dict[str, Any]]:
    """Each strategy the search met other than the winner's (DP, FSDP, TP, Megatron TP and SP, SP, EP and their
    sums), by its fastest fitting candidate against the winner, fastest first; then each of which none fits, by its least memory
    (a map the memory floor pruned counts by its floor)."""
    w = result.winner
    best: dict[str, Any] = {}
    for c in result.ranked[1:]:
        if c.strategy != w.strategy:
            best.setdefault(c.strategy, c)
    over: dict[str, Any] = {}
    least = [result.floored.least] if result.floored.least is not None else []
    for c in sorted([*result.refused, *least], key=lambda c: c.bytes):
        if c.strategy not in best and c.strategy != w.strategy:
            over.setdefault(c.strategy, c)
    out = []
    for c in [*best.values(), *over.values()]:
        row = {"strategy": c.strategy, "candidate": c.text(), "fits": c.fits, "bytes": c.bytes}
        if c.fits:
            row |= {"seconds": c.seconds, "against_winner": c.seconds / w.seconds}
            if c.pipeline is None:
                row |= {"compute_seconds": c.compute, "comms_seconds": c.comms}
        else:
            row["refused"] = c.refused
        out.append(row)
    return out


def _strategy_lines(result: Any) -> list[str]:
    rows = best_per_strategy(result)
    if not rows:
        return []
    out = [f"  the best of each strategy against the winner's {result.winner.strategy}:"]
    for r in rows:
        if not r["fits"]:
            out.append(f"    {r['strategy']}: none fits; the least memory: {r['candidate']}: {r['refused']}")
            continue
        parts = (
            f"; compute {time_text(r['compute_seconds'])}, communication {time_text(r['comms_seconds'])}"
            if "compute_seconds" in r
            else ""
        )
        out.append(
            f"    {r['strategy']}: {time_text(r['seconds'])} = {r['against_winner']:.4g}x, "
            f"{size_text(r['bytes'])} per device{parts}: {r['candidate']}"
        )
    return out


def explain_lines(result: Any) -> list[str]:
    """Why the runner-up (the best of other degrees) lost, and the best pipeline against no pipeline."""
    w, ru = result.winner, result.runner_up()
    out = ["why the runner-up lost:"]
    if w is None:
        return out + ["  no candidate fits the cap: no winner"]
    if ru is None:
        out.append("  no other degrees fit the cap")
    else:
        out.append(
            f"  {ru.text()}: {time_text(ru.seconds)} = {ru.seconds / w.seconds:.4g}x the winner's "
            f"{time_text(w.seconds)}; {size_text(ru.bytes)} per device against {size_text(w.bytes)}"
        )
    b = bubble_against(result)
    if b is not None:
        verdict = "the pipeline wins" if b["pipeline_wins"] else "no pipeline wins"
        saved = b["saved_seconds"]
        saves = (
            f"its stages save {time_text(saved)}"
            if saved >= 0
            else f"its stages save nothing: its ticks take {time_text(-saved)} more than the step without it"
        )
        if b["outside_seconds"]:
            saves += f" (of its ticks, the part outside the repeated layer, on the last stage: {time_text(b['outside_seconds'])})"
        out.append(
            f"  the best pipeline against none: the bubble {b['bubble']} costs {time_text(b['bubble_seconds'])}, "
            f"{saves} ({time_text(b['no_pipeline_seconds'])} without a pipeline, "
            f"{time_text(b['pipeline_seconds'])} with): {verdict}"
        )
    elif result.best_pipeline() is None:
        out.append("  no pipeline fits the cap (or divides the layers)")
    else:
        out.append("  nothing fits the cap without a pipeline")
    return out + _strategy_lines(result)


def _dropped_text(dropped: dict[str, int]) -> str:
    return "; ".join(f"{n:,} {why}" for why, n in sorted(dropped.items())) or "none"


def result_text(result: Any, top: int = 10, explain: bool = False) -> str:
    """The result as the CLI prints it."""
    w = result.winner
    chips = result.chip.name
    lines = [
        f"{'slice':<11} {result.slice} ({chips}), training, cap {size_text(result.cap)} per device",
        f"{'degrees':<11} {result.points} points (pipeline x pods x factoring x microbatches); "
        f"{len(result.ranked):,} candidates fit, {len(result.refused):,} over the cap; "
        f"{result.floored.count:,} of {result.floored.maps:,} maps pruned by the memory floor; dropped: "
        f"{_dropped_text(result.dropped)}",
        f"{'solver':<11} enumerated: optimal over the degree points and the dimension maps inside each",
        "",
    ]
    if w is None:
        lines.append("winner      none fits: every candidate is over the memory cap")
    else:
        lines.append(
            f"winner      {w.text()} -- {time_text(w.seconds)} per step, {size_text(w.bytes)} per device"
        )
        if w.pipeline is not None:
            lines += ["  " + line for line in w.pipeline.lines()]
            if w.pipeline.hbm != result.cap:  # the lines above compare with the HBM, the search with its cap
                lines.append(
                    f"  {'cap':<12} {size_text(w.bytes)} of the search's cap of {size_text(result.cap)}"
                )
    lines.append("")
    lines.append(
        f"{'#':>3}  {'mesh':<22} {'stages':>6} {'micro':>5}  {'strategy':<8} {'time':>9} {'memory':>9}  map"
    )
    for i, c in enumerate(result.ranked[:top]):
        lines.append(
            f"{i + 1:>3}  {c.degrees.mesh_text:<22} {c.stages:>6} {c.microbatches or '-':>5}  {c.strategy:<8} "
            f"{time_text(c.seconds):>9} {size_text(c.bytes):>9}  {c.assignment}"
        )
    least = [result.floored.least] if result.floored.least is not None else []
    best_refused = min([*result.refused, *least], key=lambda c: c.bytes, default=None)
    if best_refused is not None:
        lines.append(f"  -  the least memory over the cap: {best_refused.text()}: {best_refused.refused}")
    if explain:
        lines += ["", *explain_lines(result)]
    if w is not None:
        lines += ["", "the winner's program, priced again by:", *(f"  {c}" for c in commands(result))]
    lines += [f"note: {k}: {v}" for k, v in result.notes]
    return "\n".join(lines)


def result_json(result: Any, top: int = 10, explain: bool = False) -> dict[str, Any]:
    w = result.winner
    out: dict[str, Any] = {
        "slice": result.slice,
        "chip": result.chip.name,
        "memory_cap": result.cap,
        "points": result.points,
        "fitting": len(result.ranked),
        "over_cap": len(result.refused),
        "floor": result.floored.to_json(),
        "dropped": dict(sorted(result.dropped.items())),
        "winner": w.to_json() if w is not None else None,
        "winner_program": winner_text(result, whole=False) if w is not None else None,
        "commands": commands(result) if w is not None else [],
        "ranked": [{**c.to_json(), "rank": i + 1} for i, c in enumerate(result.ranked[:top])],
        "pipeline_against_none": bubble_against(result),
        "defaults": [{"key": k, "value": v} for k, v in result.notes],
    }
    if explain:
        out["explain"] = explain_lines(result)[1:]
        out["best_per_strategy"] = best_per_strategy(result) if w is not None else []
    return out
