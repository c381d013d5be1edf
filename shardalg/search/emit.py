"""The search's winner as a program file, and why each named strategy lost, in numbers.

``program_file`` writes the winner as a program that ``plan``, ``backward``, ``step``, ``memory`` and
``export`` take as it is: the mesh (``mesh X=2, Y=2``) and sizes (``where B=128, ...``) as lines of the
program, the search's settings (chip, mode, optimizer, remat, overlap, the cap) as comments, with the
command line that prices it as the search did. A mesh axis's links, torus sides or DCN cannot be written in a
``mesh`` line; the file then says which ``--mesh`` to give. The search on one mesh chooses no pipeline: the file
says so (``search --slice NAME --choose-degrees``, :mod:`.degrees`, chooses the pipeline, pods and mesh).

``explain`` is, per named strategy, its best candidate's time and memory against the winner's and the cap:
a ratio of times where it fits, the bytes over the cap where it does not (its time too, when it was priced).

Imports: :mod:`.numeric`'s result (duck-typed: ``settings``, ``best``, ``winner``, ``reason``, ``pays``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from shardalg.notation.printing import text

from .price import Entry, size_text, time_text

__all__ = ["program_file", "explain", "explain_json", "mesh_flag"]


def mesh_flag(mesh: Any) -> str | None:
    """What a ``mesh`` line cannot hold of ``mesh``: the ``--mesh`` text when its axes have links, DCN or
    nodes (``X=4*2``, ``P=2:dcn``, ``X=16:node8``), the mesh's repr when they have torus sides, wraparound,
    leaf groups or factors (a ``--slice`` made them); None when every axis is a size."""
    if any(a.torus or a.wraps is not None or a.leaf is not None or a.factors for a in mesh.axes):
        return repr(mesh)
    parts, extra = [], False
    for a in mesh.axes:
        text = f"{a.name}={a.size}" + (f"*{a.links}" if a.links != 1 else "")
        text += ":dcn" if a.dcn else ""
        text += f":node{a.node}" if a.node is not None else ""
        extra = extra or a.links != 1 or a.dcn or a.node is not None
        parts.append(text)
    return ",".join(parts) if extra else None


def _command(result: Any, path: str) -> str:
    st = result.settings
    words = ["shardalg step", path, "--hw", st.chip.name, "--overlap", str(st.policy)]
    if st.mode == "infer":
        words += ["--mode", "infer"]
    elif st.remat:
        words += ["--remat", st.remat]
    flag = mesh_flag(st.mesh)
    if flag is not None and not flag.startswith("Mesh("):
        words += ["--mesh", flag]
    return " ".join(words)


def program_file(result: Any, path: str = "FILE.sa") -> str:
    """The winner as a program file (mesh and sizes as its lines, the settings as comments); the caller
    refuses a search with no winner."""
    w = result.winner
    st = result.settings
    lines = [
        f"# the winner of shardalg search: {w.strategy}: {w.assignment} -- {time_text(w.seconds)} per step, "
        f"{size_text(w.bytes)} per device (cap {size_text(st.cap)})",
        f"# priced on {st.chip.name}, mode {st.mode}, overlap {st.policy}"
        + (
            f", optimizer {st.optimizer or 'adam'}, remat {st.remat or 'none'}, precision "
            f"{st.state.recipe.name}, ZeRO-{st.state.stage.stage}"
            if st.mode == "train"
            else ""
        ),
        "# no pipeline: a search on one mesh chooses none (search --slice NAME --choose-degrees chooses one)",
        f"# priced as the search did by: {_command(result, path)}",
    ]
    flag = mesh_flag(st.mesh)
    if flag is not None:
        lines.append(f"# the mesh line below holds only sizes; the search's mesh is {flag}: give it again")
    lines.append(st.mesh.text())
    lines.append("where " + ", ".join(f"{k}={v}" for k, v in st.sizes.items()))
    # the program's own mesh and where lines (--mesh and --sizes replaced them) go: the search's say it once
    lines += text(replace(result.winner.program, mesh=None, sizes=(), source=None)).splitlines()
    return "\n".join(lines) + "\n"


def _against(e: Entry, w: Entry | None, cap: float) -> dict[str, Any]:
    out: dict[str, Any] = {
        "strategy": e.strategy,
        "assignment": str(e.assignment),
        "fits": e.fits,
        "seconds": e.seconds,
        "bytes": e.bytes,
        "cap": cap,
        "over_cap": max(0.0, e.bytes - cap),
    }
    if w is not None and e.seconds is not None and w.seconds:
        out["time_ratio"] = e.seconds / w.seconds
    if w is not None and w.bytes:
        out["memory_ratio"] = e.bytes / w.bytes
    out["winner"] = w is not None and e is w
    return out


def explain_json(result: Any) -> list[dict[str, Any]]:
    """Per named strategy: its best candidate's time and memory, against the winner's and the cap, and the
    collectives it runs beyond the winner's (``pays``)."""
    w, cap = result.winner, result.settings.cap
    return [
        {**_against(e, w, cap), "reason": result.reason(e), **result._pays_json(e)}
        for e in result.best.values()
    ]


def explain(result: Any) -> str:
    """Why each named strategy lost, one paragraph each, in numbers."""
    w, cap = result.winner, result.settings.cap
    lines = ["why each strategy lost (its best candidate against the winner and the cap):"]
    for row, e in zip(explain_json(result), result.best.values(), strict=True):
        head = f"{e.strategy}: {e.assignment}"
        if row["winner"]:
            lines.append(
                f"  {head}: the winner, {time_text(e.seconds)} per step, {size_text(e.bytes)} per device "
                f"of {size_text(cap)} ({e.binding_reason()})"  # type: ignore[arg-type]
            )
            continue
        t = "not priced (over the cap before any plan)" if e.seconds is None else time_text(e.seconds)
        vs = f" = {row['time_ratio']:.3g}x the winner's {time_text(w.seconds)}" if "time_ratio" in row else ""
        mem = f"{size_text(e.bytes)} per device"
        if w is not None:
            mem += f" = {row['memory_ratio']:.3g}x the winner's {size_text(w.bytes)}"
        fit = (
            f"fits the cap of {size_text(cap)}"
            if e.fits
            else f"{size_text(row['over_cap'])} over the cap of {size_text(cap)}"
        )
        lines.append(f"  {head}: time {t}{vs}; memory {mem}, {fit}")
        lines.append(f"    lost: {row['reason']}")
    return "\n".join(lines)
