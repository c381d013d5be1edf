"""The numeric strategy search: every assignment of the space (:mod:`.space`) priced (:mod:`.price`), the
fastest that fits the memory cap, the best of each named strategy, and why each other one lost.

    >>> r = search("params W_in, W_out\\nIn[B, D] * W_in[D, F] -> Tmp[B, F]\\nTmp[B, F] * W_out[F, D] -> Out[B, D]",
    ...            mesh="X=2,Y=2", sizes="B=128,D=8192,F=32768", hw="tpu-v5e", memory="300MB", mode="infer")
    >>> r.winner.strategy, r.winner.assignment.params_text
    ('TP', 'F=XY')

Ranking: fitting candidates by seconds, then communication seconds, then bytes per device, then the order
of the space (deterministic). Every assignment in the space is either priced or dropped for a reason that is
counted (symmetric, illegal, equivalent, over the cap before pricing), so the winner is the optimum over
the whole space: the tests check it against a brute force over all assignments. Each printed row that lost
says what it pays beyond the winner: the collectives of its plans the winner's do not run (:mod:`.paid`,
worked out for the printed rows once the search is done).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from shardalg.algebra.context import context_for, tensors_of
from shardalg.algebra.mesh import Mesh, a_mesh_or_none, as_mesh
from shardalg.costs.chipspec import as_chip_text
from shardalg.costs.schedule import OverlapPolicy
from shardalg.errors import UsageError
from shardalg.models.analysis import MODES
from shardalg.models.program import derived_sizes
from shardalg.models.source import program_source
from shardalg.models.step import DEFAULT_POLICY
from shardalg.models.trainstate import TrainState
from shardalg.notation.parse import parse
from shardalg.notation.printing import text
from shardalg.notation.printing.display import Shown, Table
from shardalg.notation.printing.symbology import latex_escape_text
from shardalg.notation.syntax import Program
from shardalg.planning import symbolic

from .branchbound import Bounds, price_bounded
from .paid import Move, against, attach, beyond_text, paid, pays_json
from .pieces import StatementPricer, pricer_for
from .price import Entry, Pricer, Settings, size_text, time_text
from .space import STRATEGIES, Assignment, Pruned, Space, enumerate_space, space_of, wider_note

__all__ = ["SearchResult", "search", "parse_bytes", "Progress"]

Progress = Callable[[int, int], None]  # (assignments done, assignments in the space)

_UNITS = {
    "": 1,
    "B": 1,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "TB": 1e12,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
}


def parse_bytes(text: str | float | int) -> float:
    """``300MB``, ``16GiB``, ``3e8`` to bytes (decimal MB, binary MiB)."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        try:
            value = float(text)
        except OverflowError:  # an int past the largest float: refused below as not finite
            value = float("inf")
    else:
        s = str(text).strip().upper().replace(" ", "")
        head = s.rstrip("KMGTIB")
        unit = s[len(head) :]
        try:
            value = float(head) * _UNITS[unit]
        except (ValueError, KeyError):
            raise UsageError(
                f"a memory cap is a number of bytes with a unit (B, KB, MB, GB, MiB, GiB), not {text!r}",
                fix="e.g. --memory 300MB",
            ) from None
    if not value > 0:
        raise UsageError(f"the memory cap must be positive, not {text!r}")
    if value == float("inf"):
        raise UsageError(
            f"the memory cap must be a finite number of bytes, not {text!r} (over 1.8e308 bytes)",
            fix="leave --memory out for the chip's HBM, or give a size, e.g. --memory 96GB",
        )
    return value


def _mfu_text(mfu: float | None, short: bool = False) -> str:
    """The MFU a candidate reaches; where it rounds to 1.00 it is the chip's peak, said in words (the step is
    priced at the cost model's efficiencies, peak unless given or carried by the chip)."""
    if mfu is None:
        return "-"
    if round(mfu, 2) >= 1:
        return "peak" if short else "1.00 (peak: the step is priced at the chip's peak FLOP/s)"
    return f"{mfu:.2f}"


def _keep_note(keep: bool | None) -> str:
    """What the backward does with the forward's gathered copies, as chosen or by default."""
    if keep is None:
        return (
            "each candidate's backward keeps the forward's gathered copies or gathers them again, the faster "
            "that fits the cap (default; --keep-gathered or --gather-again forces one)"
        )
    return (
        "the backward keeps the forward's gathered copies (forced)"
        if keep
        else ("the backward gathers the forward's gathered copies again (forced)")
    )


def _key(e: Entry, order: int) -> tuple:
    """Seconds, then communication, then bytes, then the space's order; times to 12 significant digits, so a
    tie is a tie however its sum was taken (a candidate priced whole or from its statements)."""
    return (_digits(e.seconds), _digits(e.comms), e.bytes, order)


def _digits(x: float | None) -> float | None:
    return None if x is None else float(f"{x:.12g}")


@dataclass(repr=False)
class SearchResult(Shown):
    """The search's answer: ``ranked`` (fitting candidates, fastest first), ``rejected`` (over the cap),
    ``best`` (the best of each named strategy: fitting, else the one closest to fitting), counts, notes."""

    settings: Settings
    space: Space
    program: Program
    ranked: list[Entry]
    rejected: list[Entry]
    pruned: Pruned
    top: int = 10
    notes: list[tuple[str, str]] = field(default_factory=list)
    solver: dict[str, Any] = field(
        default_factory=dict
    )  # how the winner was found and priced (``solver_of``)
    # a program another strategy's assignment writes too: that strategy's first such assignment
    # (:attr:`.price.Pricer.aliases`)
    aliases: dict[Program, dict[str, Assignment]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # each candidate as the best of a strategy whose assignment writes its program too: made once, so
        # every read of ``best`` gives the same entries
        self._as: dict[tuple[int, str], Entry] = {
            (id(e), s): replace(e, assignment=a, strategy=s, same_as=e, detail=None)
            for e in (*self.ranked, *self.rejected)
            for s, a in self.aliases.get(e.program, {}).items()
        }

    @property
    def winner(self) -> Entry | None:
        return self.ranked[0] if self.ranked else None

    @property
    def best(self) -> dict[str, Entry]:
        """Each named strategy's best candidate: the fastest fitting, else the one nearest to fitting. A
        candidate whose program an assignment of another strategy writes too counts for that strategy as
        well, as that assignment (its entry's ``same_as`` the candidate)."""
        out: dict[str, Entry] = {}
        for e in (*self.ranked, *sorted(self.rejected, key=lambda e: e.bytes)):
            out.setdefault(e.strategy, e)
            for s in self.aliases.get(e.program, {}):
                out.setdefault(s, self._as[(id(e), s)])
        named = [s for s in STRATEGIES if s in out] + sorted(s for s in out if s not in STRATEGIES)
        return {s: out[s] for s in named}

    def reason(self, e: Entry) -> str:
        """Why ``e`` is not the winner, in numbers: its time against the winner's, what binds its step, and the
        collectives it runs beyond the winner's (:meth:`pays`)."""
        if e.same_as is not None:  # another assignment of its program, priced as that one
            src = e.same_as
            why = "the winner" if src is self.winner else self.reason(src)
            return f"the same program as {src.strategy}'s {src.assignment}: {why}"
        if not e.fits:
            return e.memory_reason()
        w = self.winner
        off = e.detail.off_text(e) if e.detail is not None else ""
        if w is None or e is w:
            return e.binding_reason() + off
        ratio = e.seconds / w.seconds  # type: ignore[operator]
        if ratio > 1 + 1e-9:
            than = (  # a ratio that rounds to 1x says its excess instead
                f"{ratio:.3g}x the winner's time"
                if ratio >= 1.005
                else f"{100 * (ratio - 1):.2g}% over the winner's time"
            )
        elif e.comms > w.comms:
            than = "as fast as the winner, more communication"
        elif e.bytes > w.bytes:
            than = "as fast as the winner, more memory"
        else:
            than = "tied with the winner (listed after it in the space's order)"
        return f"{than}; {e.binding_reason()}{off}{self._beyond(e)}"

    def against(self, e: Entry) -> Entry | None:
        """What ``e`` is set against (:func:`.paid.against`: the fastest above it with its parameters laid out
        alike, else the winner)."""
        return against(self.ranked, e)

    def pays(self, e: Entry) -> tuple[Move, ...]:
        """The collectives ``e``'s plans run that those of :meth:`against` do not (:func:`.paid.paid`)."""
        ref = self.against(e)
        return () if ref is None or e.detail is None or ref.detail is None else paid(e.detail, ref.detail)

    def _beyond(self, e: Entry) -> str:
        return beyond_text(self.pays(e), self.against(e), self.winner)

    def _pays_json(self, e: Entry) -> dict[str, Any]:
        if e.same_as is not None:
            src = e.same_as
            a = src.assignment
            same = {
                "strategy": src.strategy,
                "params": a.params_text,
                "activations": a.activations_text,
                "megatron_sp": a.megatron_text if a.megatron else None,
            }
            return {"same_program_as": same, **pays_json(self.pays(src), self.against(src))}
        return pays_json(self.pays(e), self.against(e))

    def shown(self) -> list[Entry]:
        """The entries the printers show: the ranked rows and each strategy's best."""
        out: list[Entry] = []
        for e in [e for _, e in self.rows()] + list(self.best.values()):
            e = e.same_as or e  # another assignment of a candidate's program: the candidate's own rows
            if not any(e is x for x in out):
                out.append(e)
        return out

    @property
    def winner_program(self) -> str | None:
        """The winner as a program in the notation (what ``plan``, ``backward`` and ``export`` take)."""
        return text(self.winner.program) if self.winner is not None else None

    # ---- printers
    def _head(self) -> list[tuple[str, str]]:
        st = self.settings
        mode = st.mode + (
            f" (optimizer {st.optimizer or 'adam'}, remat {st.remat or 'none'}, precision "
            f"{st.state.recipe.name}, ZeRO-{st.state.stage.stage})"
            if st.mode == "train"
            else ""
        )
        p = self.pruned
        counted = (
            f"{self.space.size:,} assignments: {p.symmetric:,} symmetric, {p.illegal:,} illegal "
            f"(a dim not divisible), {p.equivalent:,} equivalent (same program), {p.over_cap:,} over the "
            f"cap before pricing, "
            + (f"{p.zero:,} left out by ZeRO-{st.state.stage.stage} (FSDP), " if p.zero else "")
            + f"{len(self.ranked) + len(self.rejected) - p.over_cap:,} priced"
        )
        return [
            ("mesh", f"{', '.join(f'{a.name}={a.size}' for a in st.mesh.axes)} ({st.mesh.devices} devices)"),
            ("chip", st.chip.name),
            ("mode", mode),
            ("overlap", st.policy),
            ("memory cap", f"{size_text(st.cap)} per device"),
            (
                "dims",
                f"parameters {', '.join(self.space.param_dims)}; batch {', '.join(self.space.batch_dims)}",
            ),
            ("space", f"{counted} ({_solver_text(self.solver)})"),
        ]

    def rows(self) -> list[tuple[str, Entry]]:
        """The ranked table: the top fitting candidates, then the best rejected one of each strategy that
        has no fitting one."""
        out = [(str(i + 1), e) for i, e in enumerate(self.ranked[: self.top])]
        out += [("-", e) for s, e in self.best.items() if not e.fits]
        return out

    def __str__(self) -> str:
        lines = [f"{k:<11} {v}" for k, v in self._head()]
        w = self.winner
        lines.append("")
        if w is None:
            lines.append("winner      none fits: every candidate is over the memory cap")
        else:
            lines.append(
                f"winner      {w.strategy}: {w.assignment} -- {time_text(w.seconds)} per step, "  # type: ignore[arg-type]
                f"{size_text(w.bytes)} per device, MFU {_mfu_text(w.mfu)}"
            )
        lines.append("")
        ws = max([11, *(len(s) + 1 for s in self.best)])  # the widest strategy name sets the column
        lines.append(f"{'strategy':<{ws}} best candidate and why it is not the winner")
        for s, e in self.best.items():
            verdict = "winner" if e is w else self.reason(e)
            lines.append(f"{s:<{ws}} {e.assignment}: {verdict}")
            if e.keep is not None:
                lines.append(f"{'':<{ws}} its backward {e.keep.text()}")
        lines.append("")
        train = self.settings.mode == "train"  # training has a column for the backward's gathered copies
        rows = self.rows()
        w1 = max([9, *(len(e.strategy) for _, e in rows)])  # each column as wide as its widest entry
        w2 = max([10, *(len(e.assignment.params_text) for _, e in rows)])
        w3 = max([12, *(len(e.assignment.activations_text) for _, e in rows)])
        head = f"{'#':>3}  {'strategy':<{w1}} {'params':<{w2}} {'activations':<{w3}} {'time':>9} {'memory':>9} {'MFU':>5}  "
        lines.append(head + ("gathered  " if train else "") + "reason")
        for rank, e in rows:
            t = time_text(e.seconds) if e.seconds is not None else "-"
            mfu = _mfu_text(e.mfu, short=True) if e.mfu is not None else "-"
            lines.append(
                f"{rank:>3}  {e.strategy:<{w1}} {e.assignment.params_text:<{w2}} "
                f"{e.assignment.activations_text:<{w3}} {t:>9} {size_text(e.bytes):>9} {mfu:>5}  "
                + (f"{e.gathered:<8}  " if train else "")
                + self.reason(e)
            )
        if w is not None:
            lines.append("")
            lines.append("the winner's program (shardalg backward | export jax take it):")
            lines += ["  " + line for line in (self.winner_program or "").splitlines()]
        lines += [f"note: {k}: {v}" for k, v in self.notes]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        st = self.settings
        return {
            "mesh": {a.name: a.size for a in st.mesh.axes},
            "chip": st.chip.name,
            "mode": st.mode,
            "optimizer": st.optimizer if st.mode == "train" else None,
            "remat": st.remat if st.mode == "train" else None,
            "precision": st.state.recipe.name if st.mode == "train" else None,
            "zero": st.state.stage.stage if st.mode == "train" else None,
            "overlap": st.policy.value,
            "memory_cap": st.cap,
            "param_dims": list(self.space.param_dims),
            "batch_dims": list(self.space.batch_dims),
            "space": self.space.size,
            "pruned": self.pruned.to_json(),
            "priced": len(self.ranked) + len(self.rejected) - self.pruned.over_cap,
            "solver": dict(self.solver),
            "winner": self.winner.to_json() if self.winner is not None else None,
            "winner_program": self.winner_program,
            "strategies": {
                s: {**e.to_json(), "reason": self.reason(e), **self._pays_json(e)}
                for s, e in self.best.items()
            },
            "ranked": [
                {**e.to_json(), "rank": i + 1, **self._pays_json(e)}
                for i, e in enumerate(self.ranked[: self.top])
            ],
            "fitting": len(self.ranked),
            "rejected": len(self.rejected),
            "defaults": [{"key": k, "value": v} for k, v in self.notes],
        }

    def latex(self) -> str:
        """The ranked table as a LaTeX ``tabular``."""

        train = self.settings.mode == "train"
        lines = [
            r"\begin{tabular}{rlllrrrl" + ("l}" if train else "}"),
            r"\# & strategy & params & activations & time & memory & MFU & "
            + ("gathered & " if train else "")
            + r"reason \\ \hline",
        ]
        for rank, e in self.rows():
            t = time_text(e.seconds) if e.seconds is not None else "--"
            mfu = _mfu_text(e.mfu, short=True) if e.mfu is not None else "--"
            cells = [
                rank if rank != "-" else "--",
                e.strategy,
                e.assignment.params_text,
                e.assignment.activations_text,
                t,
                size_text(e.bytes),
                mfu,
                *([e.gathered] if train else []),
                self.reason(e),
            ]
            lines.append(" & ".join(latex_escape_text(c) for c in cells) + r" \\")
        lines.append(r"\end{tabular}")
        return "\n".join(lines)

    def summary(self) -> str:
        """``winner TP: params F=XY; activations F=XY, 331 us per step, 268 MB per device (64 assignments ...)``."""
        w, st = self.winner, self.settings
        where = f"{st.mesh.devices} {st.chip.name}, {st.mode}, cap {size_text(st.cap)}"
        if w is None:
            return f"none fits ({where}; {self.space.size:,} assignments)"
        return (
            f"winner {w.strategy}: {w.assignment}, {time_text(w.seconds)} per step, "  # type: ignore[arg-type]
            f"{size_text(w.bytes)} per device ({where}; {self.space.size:,} assignments)"
        )

    def table(self) -> Table:
        """The ranked table (the CLI's): the top fitting candidates, then the best rejected one of each
        strategy that has no fitting one, each with the reason it is not the winner."""
        train = self.settings.mode == "train"
        rows = tuple(
            (
                rank,
                e.strategy,
                e.assignment.params_text,
                e.assignment.activations_text,
                time_text(e.seconds) if e.seconds is not None else "-",
                size_text(e.bytes),
                f"{e.mfu:.2f}" if e.mfu is not None else "-",
                *([e.gathered] if train else []),
                self.reason(e),
            )
            for rank, e in self.rows()
        )
        head = "; ".join(f"{k} {v}" for k, v in self._head())
        return Table(
            ("#", "strategy", "params", "activations", "time", "memory", "MFU")
            + (("gathered",) if train else ())
            + ("reason",),
            rows,
            f"search: {head}",
            code=(2, 3),
            notes=tuple(f"note: {k}: {v}" for k, v in self.notes),
        )


def _mode(program: Program, mode: str | None, notes: list[tuple[str, str]]) -> str:
    if mode is None:
        mode = "infer" if program.roles is not None and program.roles.kvcache else "train"
        notes.append(
            (
                "mode",
                f"{mode} (default: {'the program declares a KV cache' if mode == 'infer' else 'training'})",
            )
        )
    if mode not in MODES:
        raise UsageError(f"the mode is train or infer, not {mode!r}")
    return mode


def prepare_search(
    program: Program | str,
    mesh: Mesh | None,
    sizes: Mapping[str, int] | str | None,
    hw: Any,
    memory: str | float | None,
    mode: str | None,
    optimizer: str | None,
    remat: str | None,
    overlap: str | None,
    overlap_default: str,
    state: TrainState | None = None,
) -> tuple[Program, Space, Settings, list[tuple[str, str]]]:
    """What every search checks and defaults first: the program, mesh, chip and sizes (all bound), the mode,
    the memory cap, the overlap policy, the optimizer and remat; each default the user did not choose is a
    note. Returns the program, its whole space, the settings and the notes."""
    prog = parse(program_source(program)) if isinstance(program, str) else program
    if not isinstance(prog, Program):
        raise UsageError("the search takes a program in the notation with its params declared")
    ctx = context_for(prog, a_mesh_or_none(mesh, "the search"), sizes)
    if ctx.mesh is None:
        raise UsageError("a search needs a mesh: --mesh X=2,Y=2 (API: mesh='X=2,Y=2')")
    chip = as_chip_text(hw)
    if chip is None:
        raise UsageError("a search needs a chip for its seconds and HBM: --hw tpu-v5e (API: hw='tpu-v5e')")
    notes: list[tuple[str, str]] = []
    chosen_mode = _mode(prog, mode, notes)
    if memory is None:
        cap = chip.hbm_capacity.value
        notes.append(("memory", f"{size_text(cap)} per device (default: the HBM of {chip.name})"))
    else:
        cap = parse_bytes(memory)
    if overlap is None:
        overlap = DEFAULT_POLICY
        notes.append(("overlap", f"{overlap} (default: {overlap_default})"))
    overlap = OverlapPolicy.of(overlap)
    if chosen_mode == "train":
        if optimizer is None:
            notes.append(("optimizer", "adam (default: fp32 moments, 8 bytes per parameter)"))
        if remat is None:
            notes.append(("remat", "the program's saved list, else none (default)"))
        state = state or TrainState()
        notes += [(k, v) for k, v in state.default_notes() if k != "optimizer"]
        if state.stage.stage in (1, 2):
            notes.append(
                (
                    "zero",
                    f"ZeRO-{state.stage.stage} keeps the parameters whole over the data axes: a candidate "
                    "that shards one over them (FSDP, ZeRO-3) is left out",
                )
            )
    sizes_known = dict(ctx.sizes)
    for dim, (kind, n, said) in derived_sizes(prog.statements, sizes_known).items():
        sizes_known[dim] = n  # a renamed dim's size, a routing's capacity: as the model derives them
        notes.append((kind, said))
    space = space_of(prog, ctx.mesh, sizes_known)
    written = (d for t in tensors_of(prog) for d in t.dim_names)  # a dim only an activation has counts too
    missing = [
        d for d in dict.fromkeys((*space.param_dims, *space.batch_dims, *written)) if d not in sizes_known
    ]
    layers = prog.roles.layers if prog.roles is not None else None
    if isinstance(layers, str) and layers not in sizes_known and layers not in missing:
        missing.append(layers)  # the layer count multiplies every figure: a symbol cannot be ranked or fit
    if missing:
        raise UsageError(
            f"a numeric search needs every size: {', '.join(missing)} unbound",
            fix="bind them with --sizes, e.g. --sizes " + ",".join(f"{d}=1024" for d in missing),
        )
    settings = Settings(
        ctx.mesh, sizes_known, chip, chosen_mode, optimizer, remat, overlap, cap, state or TrainState()
    )
    return prog, space, settings, notes


def search(
    program: Program | str,
    mesh: Any = None,
    sizes: Mapping[str, int] | str | None = None,
    hw: Any = None,
    memory: str | float | None = None,
    mode: str | None = None,
    optimizer: str | None = None,
    remat: str | None = None,
    overlap: object = None,
    top: int = 10,
    progress: Progress | None = None,
    precision: str | None = None,
    zero: int | str | None = None,
    keep_gathered: bool | None = None,
) -> SearchResult:
    """The fastest sharding of ``program`` (unsharded, with ``params`` declared) on ``mesh`` that fits
    ``memory`` per device (default: the chip's HBM), and the best of each named strategy.

    ``mode``: ``train`` (default; forward, derived backward, optimizer state) or ``infer``; ``overlap``:
    ``steady`` (default), ``serial`` or ``schedule``; ``progress(done, total)`` is called as assignments are handled;
    ``precision`` and ``zero``: the training state's recipe and ZeRO stage (:mod:`shardalg.models.trainstate`);
    ``keep_gathered``: training's backward keeps the forward's gathered copies (True) or gathers them again
    (False); None (default): each candidate is priced both ways and takes the faster that fits the cap.

    Every size is bound, so every plan is ranked on numbers: no plan is chosen by a made-up size (a choice
    left undecided raises :class:`~shardalg.planning.symbolic.NeedsSizes`, as ``shardalg search`` does)."""
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise UsageError(f"--top takes a positive number of rows, not {top!r}")
    with symbolic.strict():
        prog, space, settings, notes = prepare_search(
            program,
            as_mesh(mesh),
            sizes,
            hw,
            memory,
            mode,
            optimizer,
            remat,
            overlap,
            "compute and each axis's collectives overlap across layers",
            TrainState(optimizer, precision=precision, zero=zero),
        )
        chosen_mode = settings.mode
        if chosen_mode == "train":
            settings = replace(settings, keep=keep_gathered)
            notes.append(("gathered", _keep_note(keep_gathered)))
        pruned = Pruned()
        assignments = enumerate_space(space, pruned)
        first = next(assignments, None)  # a space over the limit is refused here, before any pricing
        candidates = assignments if first is None else itertools.chain([first], assignments)
        pricer = pricer_for(prog, space, settings, pruned, [])  # said in the result's solver
        bounds: Bounds | None = None
        fitting: list[tuple[Entry, int]] = []
        rejected: list[Entry] = []
        if isinstance(pricer, StatementPricer) and chosen_mode == "train":
            fitting, rejected, bounds = price_bounded(pricer, candidates, top, progress, space.size)
        else:
            for order, a in enumerate(candidates):
                e = pricer(a)
                if e is not None:
                    (fitting.append((e, order)) if e.fits else rejected.append(e))
                if progress is not None:
                    progress(pruned.visited, space.size)
            if progress is not None:
                progress(space.size, space.size)
        ranked = [e for e, _ in sorted(fitting, key=lambda x: _key(*x))]
        notes.append(
            (
                "space",
                "an activation dim is split only over the axes that split it in the parameters, or "
                "when it is a batch dim; a dim split over several axes takes them in mesh order"
                + wider_note(space),
            )
        )
        if chosen_mode == "infer":
            notes.append(
                ("inference", "memory counts parameters, KV cache and gathered weights (no activations)")
            )
        result = SearchResult(
            settings,
            space,
            prog,
            ranked,
            rejected,
            pruned,
            top,
            notes,
            solver_of(pricer, bounds),
            pricer.aliases,
        )
        shown = result.shown() + ([result.winner] if result.winner is not None else [])
        attach(shown + [x for e in shown if (x := result.against(e)) is not None], settings)
        return result


def solver_of(pricer: Pricer, bounds: Bounds | None = None) -> dict[str, Any]:
    """The search's solver: every assignment of the space enumerated (the winner optimal over the space), and
    how each was priced: its statements' prices summed (``statements``: how many pieces were priced, how many
    candidates were priced whole all the same) or its whole program (``why`` not); in training, the
    candidates that the branch and bound left unpriced (:mod:`.branchbound`: ``bound``)."""
    got: dict[str, Any] = {"method": "enumeration", "optimal": True}
    if bounds is not None:
        got["bound"] = bounds.to_json()
    if isinstance(pricer, StatementPricer):
        return {**got, "pricing": "statements", "pieces": pricer.priced, "priced_whole": pricer.whole}
    return {**got, "pricing": "whole program", "why": pricer.why}


def _solver_text(solver: dict[str, Any]) -> str:
    """``enumerated: optimal over the space; 42 sharded statements priced once``."""
    head = "enumerated: optimal over the space"
    if solver.get("bound", {}).get("unpriced"):
        head += (
            f"; branch and bound: {solver['bound']['unpriced']:,} candidates left unpriced (its forward plans, "
            "the backward of its statements priced so far and the least compute of the rest put each above "
            "the top rows, its strategy's best and the best with its parameters)"
        )
    if solver.get("pricing") == "statements":
        whole = solver["priced_whole"]
        return f"{head}; {solver['pieces']:,} sharded statements priced once" + (
            f", {whole:,} candidates priced whole (Megatron SP over a shared input)" if whole else ""
        )
    return f"{head}; whole programs priced: {solver.get('why')}"
