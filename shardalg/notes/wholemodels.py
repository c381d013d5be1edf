"""The notes' chapters on whole models: the parallel strategies of a transformer's MLP block, with the strategy
map, its picture and its conditions, and a search table (the book's chapter 5); a LLaMA 3 70B training step's
memory by part and its time (chapter 6); the search for a serving layout (chapter 7).

Every number comes from the package's reports (strategy map, region picture, search, memory, step); this
module chooses the examples, states the setting of each and arranges them.
"""

from __future__ import annotations

from pathlib import Path

import sympy

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.traffic import SEARCH_AXIS, SEARCH_DIM
from shardalg.costs import hardware
from shardalg.models.analysis import analyze
from shardalg.models.expand import expand, shard
from shardalg.models.memory import memory
from shardalg.models.program import model_program
from shardalg.models.step import step_time
from shardalg.notation.printing import text
from shardalg.notation.printing.display import bytes_both
from shardalg.numeric.proofs import sym_latex
from shardalg.pictures.regionmap import region_map
from shardalg.planning.planner import plans
from shardalg.planning.symbolic import summary
from shardalg.search.numeric import search
from shardalg.search.price import time_text
from shardalg.search.programresult import ProgramMap, strategy_map

from .document import Code, Display, Figure, Math, Prose, Section, Table, ragged
from .mathtext import number_latex

__all__ = ["training_strategies", "llama_step", "inference_search", "MAP_FIGURE", "MAP_WEB_FIGURE"]

# The plans-taken table's columns: the statement, the plan and the other cheapest plans wrap, so the table fits
# the text width (written on one line each it ran 169pt past it).
PLANS_TAKEN_COLUMNS = (
    "l" + ragged(r"0.24\linewidth") + ragged(r"0.22\linewidth") + "l" + ragged(r"0.23\linewidth")
)

MLP = "params W_in, W_out\nIn[B, D] * W_in[D, F] -> Tmp[B, F]\nTmp[B, F] * W_out[F, D] -> Out[B, D]"
STRATEGIES = ("DP", "FSDP", "TP", "FSDP+TP")
# the book's chapter 5 setting: a TPU v5p 4x4x4 and the MLP block of its example
MAP_ON = {"mesh": "X=4,Y=4,Z=4", "hw": "tpu-v5p", "sizes": {"B": 48000, "D": 8192, "F": 32768}}
MAP_FIGURE, MAP_WEB_FIGURE = "strategy-map.pdf", "strategy-map.svg"
TRAIN_SEARCH_ON = {"mesh": "X=2,Y=2", "sizes": "B=128,D=8192,F=32768", "hw": "tpu-v5e"}
# chapter 6: LLaMA 3 70B with FSDP over X and the MLP and heads over Y, on 64 TPU v5p
LLAMA = "llama-3-70b"
LLAMA_SHARDING = {"params": "D=X,F=Y,K=Y", "activations": "B=X,F=Y,K=Y"}
LLAMA_ON = {"mesh": "X=16,Y=4", "sizes": {"B": 64, "T": 4096}, "hw": "tpu-v5p", "remat": "block"}
# chapter 7: the MLP block served on four TPU v5e under a 300 MB cap
INFER_ON = {"mesh": "X=2,Y=2", "sizes": "B=128,D=8192,F=32768", "hw": "tpu-v5e", "memory": "300MB"}

# the symbols of these chapters, defined before they are used
SYMBOLS: tuple[tuple[str, str], ...] = (
    ("B", "the batch in tokens"),
    ("D, F", "the model and hidden widths of the MLP block, in elements"),
    ("N", "the number of devices"),
    ("C", "the chip's peak bf16 FLOP/s"),
    (r"W_{\text{ici}}", "the bidirectional ICI bandwidth per axis, bytes per second"),
    (r"M_X, M_Y", "the number of mesh axes (of the torus) that make up X and Y"),
    ("H", "the memory cap per device, in bytes (the chip's HBM)"),
    (r"X_{\text{opt}}", "the FSDP+TP split over X that communicates least"),
)


def _relations(conds: tuple[sympy.Basic, ...]) -> str:
    return r" \;\wedge\; ".join(sym_latex(c) for c in conds)


def _chip_name(name: str) -> str:
    return hardware.get(name).description.split(" (")[0]


def _placed(text: str) -> str:
    """An assignment as the table shows it: ``F=XY``, or "replicated" for none."""
    return "replicated" if text in ("", "-") else text


def _sizes_text(sizes: dict[str, int]) -> str:
    return ", ".join(f"{k} = {v:,}" for k, v in sizes.items())


def _plans_taken(m: ProgramMap) -> list[tuple[str, str, str, str, str]]:
    """Each forward plan of the map's strategies that sizes not given decide: (strategy, statement, the plan
    the map prices, the sizes that decide, the other plans that are the cheapest at some sizes)."""
    out = []
    for s in m.strategies:
        mesh = Mesh({ax: None for ax in s.axes})
        model = model_program(s.program, mesh, {})
        taken = analyze(model, "train").forward_plans
        for info in model.statements:
            if info.index not in taken:
                continue
            choice = plans(info.statement, mesh).choice
            if choice is None or choice.decided:
                continue
            chosen = taken[info.index]
            others = "; ".join(summary(p.plan) for p in choice.contenders if p.plan != chosen)
            out.append((s.name, text(info.statement), summary(chosen), ", ".join(choice.symbols), others))
    return out


def training_strategies(out_dir: Path | None = None) -> Section:
    """Chapter 5: the strategies, where each is compute-bound, X_opt, the strategy map and a search."""
    m = strategy_map(MLP, passes="forward", memory="hbm", **MAP_ON)
    chip = _chip_name(MAP_ON["hw"])
    rows = []
    for name in STRATEGIES:
        conds = m.conditions(name, "compute")
        cells = [c for c in conds if c]
        rows.append(
            (
                name,
                Math(
                    r" \;\vee\; ".join(
                        f"({_relations(c)})" if len(cells) > 1 else _relations(c) for c in cells
                    )
                )
                if cells
                else "always: the forward pass communicates nothing",
            )
        )
    blocks: list = [
        Prose.of(
            "The MLP block of a transformer, one product after the other, with its two weight matrices declared "
            "as parameters:"
        ),
        Prose.of(Code(MLP.replace("\n", "; "))),
        Table(
            ("symbol", "meaning"),
            tuple((Math(s), what) for s, what in SYMBOLS),
            caption="The symbols of the training and inference sections.",
        ),
        Prose.of(
            "Data parallelism (DP) shards the batch; fully sharded data parallelism (FSDP) also shards the "
            "weights and gathers them before each product; tensor parallelism (TP) shards the hidden width; "
            "FSDP+TP does both on two axes. Where each strategy's forward pass is compute-bound, solved from "
            "its cost:"
        ),
        Table(
            ("strategy", "compute-bound when"),
            tuple(rows),
            caption="Solved from each strategy's forward cost on the mesh's axes, no number substituted.",
        ),
    ]
    taken = _plans_taken(m)
    if taken:
        blocks.append(
            Table(
                ("strategy", "statement", "plan the map prices", "depends on", "also the cheapest somewhere"),
                tuple((name, Code(stmt), plan, names, others) for name, stmt, plan, names, others in taken),
                caption="Where sizes not given decide a forward plan, the map prices the plan ranked first with "
                f"unknown dims counted as {SEARCH_DIM} and unknown axes as {SEARCH_AXIS}, "
                "not the cheapest plan in each region of the map.",
                columns=PLANS_TAKEN_COLUMNS,
            )
        )
    if m.x_opt is not None:
        value = m.x_opt.subs(m.values)
        blocks.append(
            Display(
                r"X_{\text{opt}} = " + sym_latex(m.x_opt),
                "FSDP+TP communicates least when its two communication times are equal, at",
            )
        )
        if not value.free_symbols:
            blocks.append(
                Prose.of(
                    f"On the {chip} 4x4x4 with {_sizes_text(MAP_ON['sizes'])}: ",
                    Math(r"X_{\text{opt}} = " + number_latex(float(value))),
                    " devices.",
                )
            )
    if out_dir is not None:
        figure = _draw_map(m, out_dir)
        if figure is not None:
            blocks.append(figure)
    blocks += _search_table()
    return Section("Training: the parallel strategies (the book's chapter 5)", tuple(blocks))


def _draw_map(m: object, out_dir: Path) -> Figure | None:
    try:
        import matplotlib  # noqa: F401
    except ModuleNotFoundError:  # the optional [plot] extra: the notes go without the picture
        return None
    pic = region_map(m, out_dir / MAP_FIGURE)
    region_map(m, out_dir / MAP_WEB_FIGURE)
    v = m.values  # type: ignore[attr-defined]
    names = {s.name: x for s, x in v.items()}
    sizes = _sizes_text(MAP_ON["sizes"])
    shares = ", ".join(f"{k} {100 * s:.0f}%" for k, s in pic.shares.items())
    caption = (
        f"The fastest strategy of the MLP block's forward pass over B/N (tokens per device) and F (elements), "
        f"the other parameters held at the point marked: chip {_chip_name(MAP_ON['hw'])}, mesh "
        f"{MAP_ON['mesh'].replace(',', ', ')} (N = {names['N']:,} devices), {sizes}, memory cap "
        f"H = {bytes_both(float(names['H']))} per device on parameters, gradients and optimizer state. "
        f"Share of the picture: {shares}."
    )
    return Figure(MAP_FIGURE, MAP_WEB_FIGURE, caption, width="0.7")


def _search_table() -> list:
    r = search(MLP, **TRAIN_SEARCH_ON)
    rows = []
    for name in STRATEGIES:
        e = r.best.get(name)
        if e is None:
            continue
        rows.append(
            (
                name,
                _placed(e.assignment.params_text),
                _placed(e.assignment.activations_text),
                time_text(e.seconds).replace("us", "microseconds") if e.seconds else "over the cap",
                bytes_both(e.bytes),
                f"{100 * float(e.mfu):.0f}%" if e.mfu is not None else "",
            )
        )
    chip = _chip_name(TRAIN_SEARCH_ON["hw"])
    return [
        Prose.of(
            f"A search over every assignment of the mesh axes X = 2, Y = 2 to the dims, on {chip} with "
            f"{TRAIN_SEARCH_ON['sizes'].replace(',', ', ').replace('=', ' = ')}, training with Adam: the "
            "fastest of each strategy."
        ),
        Table(
            ("strategy", "weights", "activations", "step time", "memory per device", "MFU"),
            tuple(rows),
            caption=(
                f"The winner: {r.winner.strategy if r.winner else 'none'}. A step's time is the forward and "
                "backward passes; memory is GB = 10^9 bytes and GiB = 2^30 bytes; MFU is the model FLOP/s "
                "over the chip's peak."
            ),
        ),
    ]


def llama_step() -> Section:
    """Chapter 6: a LLaMA 3 70B training step's memory by part and its time."""
    program = shard(expand(LLAMA), **LLAMA_SHARDING)
    mem = memory(program, **LLAMA_ON)
    step = step_time(program, **LLAMA_ON)
    chip = _chip_name(LLAMA_ON["hw"])
    mem_rows = [
        (k.replace("_", " "), f"{int(v):,} bytes", bytes_both(float(v))) for k, v in mem.parts.items()
    ]
    mem_rows.append(("total", f"{int(mem.total):,} bytes", bytes_both(float(mem.total))))
    step_rows = []
    for p in step.parts:
        secs = {k: step.seconds_of(getattr(p, k)) for k in ("compute", "comms", "memory", "total")}
        step_rows.append(
            (
                p.name,
                "once" if p.count == 1 else f"{int(p.count)} times",
                *(time_text(secs[k] or 0.0) for k in secs),
            )
        )
    return Section(
        "Training LLaMA 3 70B (the book's chapter 6)",
        (
            Prose.of(
                f"LLaMA 3 70B ({int(mem.params):,} parameters) with its weights sharded as {LLAMA_SHARDING['params']} "
                f"and its activations as {LLAMA_SHARDING['activations']} on {chip}, mesh "
                f"{LLAMA_ON['mesh'].replace(',', ', ')}, batch B = {LLAMA_ON['sizes']['B']} sequences of "
                f"T = {LLAMA_ON['sizes']['T']:,} tokens, Adam, each layer's input kept and the rest recomputed:"
            ),
            Table(
                ("part", "bytes per device", "GB (GiB)"),
                tuple(mem_rows),
                caption=(
                    f"Memory per device by part; the chip holds {bytes_both(float(mem.hbm))}, so the step "
                    f"{'fits' if mem.fits else 'does not fit'}. GB = 10^9 bytes, GiB = 2^30 bytes."
                ),
            ),
            Table(
                ("part", "repeated", "compute", "communication", "HBM", "time"),
                tuple(step_rows),
                caption=(
                    "Each part's time at the chip's peak: compute, communication and HBM traffic overlap, "
                    "so the largest binds."
                ),
            ),
            Prose.of(
                f"The step takes {time_text(step.seconds or 0.0)}: {step.tokens_per_second:,.0f} tokens per "
                "second."
            ),
        ),
    )


def inference_search() -> Section:
    """Chapter 7: the fastest serving layout of the MLP block under a memory cap."""
    r = search(MLP, mode="infer", **INFER_ON)
    rows = []
    for e in list(r.ranked[:3]) + [x for x in r.best.values() if not x.fits]:
        rows.append(
            (
                e.strategy,
                _placed(e.assignment.params_text),
                time_text(e.seconds).replace("us", "microseconds")
                if e.fits and e.seconds
                else "does not fit",
                bytes_both(e.bytes),
                e.bound if e.fits else "",
            )
        )
    chip = _chip_name(INFER_ON["hw"])
    return Section(
        "Inference: serving under a memory cap (the book's chapter 7)",
        (
            Prose.of(
                f"A decode step of the MLP block on {chip}, mesh X = 2, Y = 2, "
                f"{INFER_ON['sizes'].replace(',', ', ').replace('=', ' = ')}, with at most "
                f"{bytes_both(r.settings.cap)} per device (weights and gathered weights; a decode step keeps no "
                "activations): the fastest layouts, and what binds each."
            ),
            Table(
                ("strategy", "weights", "activations", "time per step", "memory per device", "bound by"),
                tuple(rows),
                caption=(
                    f"The fastest three layouts, then the best of each strategy that does not fit. Winner: "
                    f"{r.winner.strategy if r.winner else 'none'}."
                ),
            ),
        ),
    )
