"""Each assignment of the search space priced by what exists: the sharded program
(:func:`shardalg.models.expand.shard`: FSDP's gathers written in), its forward plans and derived backward
(:mod:`shardalg.models.analysis`), its step in seconds under the overlap policy
(:func:`shardalg.models.step.step_seconds`: compute, each mesh axis's collectives, HBM) and its memory per
device by part (:func:`shardalg.models.memory.model_memory`).

Nothing is priced twice: an assignment whose sharded program is another's is *equivalent* and dropped, and one
whose parameters (with gradients and optimizer state when training) exceed the cap is rejected before its
plans are made (*over the cap before pricing*), its reason in numbers all the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from shardalg.algebra.legality import check_or_raise
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.subaxes import names_subaxes
from shardalg.costs.hardware import Chip
from shardalg.costs.schedule import OverlapPolicy
from shardalg.errors import IllegalSharding, UsageError
from shardalg.models.analysis import analyze
from shardalg.models.expand import shard
from shardalg.models.memory import PARTS, model_memory
from shardalg.models.program import model_program
from shardalg.models.step import step_seconds
from shardalg.models.trainstate import TrainState
from shardalg.models.unplanned import unplanned_bytes
from shardalg.models.zero import check_zero
from shardalg.models.zerostep import check_zero_divides
from shardalg.notation.plan import Op
from shardalg.notation.printing.display import short
from shardalg.notation.syntax import Program, Statement, without_spans

from .space import Assignment, Pruned, Space

__all__ = [
    "Settings",
    "KeepChoice",
    "Admitted",
    "Entry",
    "Pricer",
    "size_text",
    "time_text",
    "activation_gathers",
    "rank_key",
    "strategy_firsts",
]

TIE = 1e-12  # seconds equal to this, relative, are a tie (the keep choice)


def size_text(b: float) -> str:
    """Bytes for a table: ``1.07 GB`` (decimal units, as a memory cap is written)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.0f} B"


def time_text(s: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


def activation_gathers(analysis: Any) -> tuple[str, ...]:
    """The values (not parameters) the forward's plans gather, named by the statement that gathers them: a
    sequence split over an axis gathers the keys and values before the attention core (``K``, ``V``)."""
    m = analysis.model
    by_index = {s.index: s for s in m.statements}
    out: list[str] = []
    for i, plan in analysis.forward_plans.items():
        for step in plan.steps:
            v = m.value_named(step.inputs[0].name) if step.op is Op.ALL_GATHER else None
            if step.op is Op.ALL_GATHER and (v is None or not v.is_param):
                name = by_index[i].statement.result.name
                if name not in out:
                    out.append(name)
    return tuple(out)


@dataclass(frozen=True)
class Settings:
    """What every candidate is priced under: the mesh, sizes and chip, training or inference, the optimizer
    and remat policy (training), the overlap policy, and the memory cap in bytes per device."""

    mesh: Mesh
    sizes: dict[str, int]
    chip: Chip
    mode: str
    optimizer: str | None
    remat: str | None
    policy: OverlapPolicy
    cap: float
    state: TrainState = field(default_factory=TrainState)  # precision recipe and ZeRO stage (training)
    keep: bool | None = None  # the backward keeps the forward's gathered copies (True), gathers again
    # (False), or each candidate takes the faster of the two that fits the cap (None)


@dataclass(frozen=True)
class KeepChoice:
    """What a training candidate's backward does with the tensors the forward gathered: ``kept`` (memory:
    ``copies`` bytes per device held from the forward to the backward) or gathered again (time). ``forced``
    when the user chose; else the faster of the two that fits the cap, ``again`` and ``keep`` their
    seconds (None: not priced), ``keep_fits`` whether keeping fits the cap (None: not priced)."""

    kept: bool
    forced: bool
    copies: float
    again: float | None = None
    keep: float | None = None
    keep_fits: bool | None = None
    keep_bytes: float | None = None

    def text(self) -> str:
        """``keeps the gathered copies (268 MB): 1.2 ms against 1.5 ms gathering again``."""
        held = f"the gathered copies ({size_text(self.copies)})"
        if self.forced:
            return f"keeps {held} (forced)" if self.kept else f"gathers again, not keeping {held} (forced)"
        if self.kept:
            return f"keeps {held}: {time_text(self.keep or 0.0)} against {time_text(self.again or 0.0)} gathering again"
        if self.keep_fits is False:
            return (
                f"gathers again: keeping {held} goes over the cap "
                f"({size_text(self.keep_bytes or 0.0)} per device)"
            )
        return f"gathers again: keeping {held} saves no time"

    def to_json(self) -> dict[str, Any]:
        return {
            "kept": self.kept,
            "forced": self.forced,
            "copies_bytes": self.copies,
            "seconds_gathering_again": self.again,
            "seconds_keeping": self.keep,
            "keeping_fits": self.keep_fits,
            "bytes_keeping": self.keep_bytes,
            "reason": self.text(),
        }


class Admitted(NamedTuple):
    """A candidate that passed the checks made before any plan (:meth:`Pricer.admit`): its sharded program,
    that program's model and the bytes per device counted before any plan (at most its priced bytes)."""

    assignment: Assignment
    strategy: str
    program: Program
    model: Any
    lower: float = 0.0


@dataclass
class Entry:
    """One priced candidate. ``seconds`` is None when it was rejected before pricing (``fits`` False)."""

    assignment: Assignment
    strategy: str
    program: Program
    bytes: float  # per device: the total, or (rejected before pricing) the parameters' lower bound
    parts: dict[str, float]
    fits: bool
    seconds: float | None = None
    compute: float = 0.0
    comms: float = 0.0
    hbm: float = 0.0
    axes: dict[str, float] = field(default_factory=dict)
    flops: float = 0.0  # model FLOPs per device per step (forward + backward, no recompute)
    mfu: float | None = None
    cap: float = 0.0
    hbm_counted: bool = (
        True  # whether the step's time counts HBM (inference's rooflines; a training step does not)
    )
    keep: KeepChoice | None = None  # training: the backward's gathered copies kept or gathered again
    gathers: tuple[str, ...] = ()  # the values (not parameters) its forward gathers (activation_gathers)
    detail: Any = None  # its step by phase and its collectives (:class:`.paid.Breakdown`), for a printed row
    # the candidate priced for this entry's program, written by another strategy's assignment (this entry is
    # that candidate as this assignment: :attr:`.searchresult.SearchResult.best`); None: priced as itself
    same_as: Entry | None = None

    @property
    def gathered(self) -> str:
        """``kept``, ``again`` (the backward's gathered copies), or ``-`` (it gathers nothing)."""
        return "-" if self.keep is None else "kept" if self.keep.kept else "again"

    @property
    def bound(self) -> str | None:
        """The term that binds the step: ``compute``, ``HBM`` or ``comms X`` (the busiest axis)."""
        if self.seconds is None:
            return None
        terms = {"compute": self.compute, "HBM": self.hbm} if self.hbm_counted else {"compute": self.compute}
        for a, s in self.axes.items():
            terms[f"comms {a}"] = s
        return max(terms, key=lambda k: (terms[k], k))

    def memory_reason(self) -> str:
        """``1.34 GB per device > 300 MB (transient 1.07 GB, params 268 MB)``: the largest parts first."""
        parts = sorted(((v, k) for k, v in self.parts.items() if v > 0), reverse=True)
        shown = ", ".join(f"{k.replace('_', ' ')} {size_text(v)}" for v, k in parts[:3])
        before = "" if self.seconds is not None else " before any plan"
        return f"{size_text(self.bytes)} per device > {size_text(self.cap)}{before} ({shown})"

    def binding_reason(self) -> str:
        """Why the step takes its time, its figure the step: ``HBM-bound: 331 us (compute 70 us, comms 0)``; a
        training step with its phases worked out (``detail``) phase by phase (:meth:`.paid.Breakdown.bound_text`);
        a step that is not its binding term's total (inference's ops each at its roofline) says so."""
        phased = self.detail.bound_text(self) if self.detail is not None else None
        if phased is not None:
            return phased
        bound = self.bound
        rest = {"compute": self.compute, "HBM": self.hbm, "comms": self.comms}
        name = bound.split()[0] if bound else "compute"
        others = ", ".join(
            f"{k} {time_text(v) if v else '0'}{'' if k != 'HBM' or self.hbm_counted else ' not counted in training'}"
            for k, v in rest.items()
            if k != name
        )
        what = {"compute": self.compute, "HBM": self.hbm}.get(
            bound or "", self.axes.get((bound or " ").split()[-1], 0)
        )
        if (
            self.seconds is not None and abs(what - self.seconds) > 1e-9 * self.seconds
        ):  # its figure, the step
            how = "its ops' rooflines summed" if self.hbm_counted else "its phases summed"
            unsaid = "" if self.hbm_counted else " not counted in training"
            every = ", ".join(
                f"{k} {time_text(v) if v else '0'}{unsaid if k == 'HBM' else ''}" for k, v in rest.items()
            )
            return f"{bound}-bound, {how}: {time_text(self.seconds)} ({every})"
        return f"{bound}-bound: {time_text(what)} ({others})"

    def __repr__(self) -> str:
        """``<Entry TP: params F=XY; activations F=XY -- 331 us, 268 MB per device, fits>``."""
        t = time_text(self.seconds) if self.seconds is not None else "not priced"
        fits = "fits" if self.fits else f"over the cap {size_text(self.cap)}"
        return short(
            "Entry", f"{self.strategy}: {self.assignment} -- {t}, {size_text(self.bytes)} per device, {fits}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "params": self.assignment.params_text,
            "activations": self.assignment.activations_text,
            "megatron_sp": self.assignment.megatron_text if self.assignment.megatron else None,
            "fits": self.fits,
            "bytes_per_device": self.bytes,
            "memory": {k: v for k, v in self.parts.items()},
            "seconds": self.seconds,
            "compute": self.compute if self.seconds is not None else None,
            "comms": self.comms if self.seconds is not None else None,
            "hbm": self.hbm if self.seconds is not None else None,
            "comms_by_axis": dict(self.axes),
            "mfu": self.mfu,
            "bound": self.bound,
            "reason": self.binding_reason() if self.fits else self.memory_reason(),
            "gathered": None if self.keep is None else self.keep.to_json(),
            "gathers": list(self.gathers),
        }


def rank_key(e: Entry, order: int) -> tuple:
    """A fitting candidate's place in the ranked table: seconds, then communication, then bytes, then the
    space's order (``order``); times to 12 significant digits, so a tie is a tie however its sum was taken (a
    candidate priced whole or from its statements)."""
    return (digits(e.seconds), digits(e.comms), e.bytes, order)


def digits(x: float | None) -> float | None:
    """``x`` to 12 significant digits (:func:`rank_key`'s times); monotone: ``x <= y`` gives
    ``digits(x) <= digits(y)``."""
    return None if x is None else float(f"{x:.12g}")


def strategy_firsts(
    entries: Iterable[Entry], aliases: Mapping[Program, Mapping[str, Assignment]]
) -> dict[str, tuple[Entry, bool]]:
    """Each strategy's first entry of ``entries`` (in the order given), and whether it counts for that
    strategy as another strategy's assignment writing its program (``aliases``: :attr:`Pricer.aliases`)."""
    out: dict[str, tuple[Entry, bool]] = {}
    for e in entries:
        out.setdefault(e.strategy, (e, False))
        for s in aliases.get(e.program, {}):
            out.setdefault(s, (e, True))
    return out


class Pricer:
    """Prices assignments of one space under one set of settings; remembers the programs seen (equivalent
    assignments are priced once) and counts what it drops in ``pruned``. ``why``: why a search prices each
    candidate's whole program rather than summing its statements (:func:`.pieces.pricer_for`)."""

    why: str | None = None

    def __init__(self, base: Program, space: Space, settings: Settings, pruned: Pruned):
        # priced without source spans: a candidate's plans are never shown against the text, and with no
        # span on its tensors the planner has none to settle on each answer (planning.respan)
        self.base = without_spans(base)
        self.space = space
        self.settings = settings
        self.pruned = pruned
        self.seen: dict[Program, str] = {}  # each program admitted, by its first assignment's strategy
        # the first assignment of each other strategy that writes an admitted program again: one candidate,
        # priced once, the best of those strategies too (:attr:`.searchresult.SearchResult.best`)
        self.aliases: dict[Program, dict[str, Assignment]] = {}
        # the statements that passed the legality rules, with the sizes they were checked under: the candidates
        # of a space share most of their statements, each checked once per search (:meth:`check`)
        self.legal: set[tuple[Statement, tuple[tuple[str, int], ...]]] = set()
        # the program analysed unsharded, once: the activations the backward keeps are the same values under
        # every sharding (``saved``), so a candidate's bytes of them are counted before any plan (:meth:`admit`)
        self.unsharded = analyze(
            model_program(self.base, settings.mesh, settings.sizes), settings.mode, settings.remat
        )
        self.saved = self.unsharded.saved

    def __call__(self, a: Assignment) -> Entry | None:
        got = self.admit(a)
        return self.price(got) if isinstance(got, Admitted) else got

    def admit(self, a: Assignment) -> Admitted | Entry | None:
        """``a`` sharded and checked before any plan: its program and strategy (``Admitted``), or None when it
        is dropped (a program seen already, an illegal sharding, left out by the ZeRO stage), or its rejected
        entry when what needs no plan exceeds the cap: its parameters with their gradients and optimizer state,
        the activations the backward keeps and the KV cache (:func:`~shardalg.models.unplanned.unplanned_bytes`;
        each counted in ``pruned``)."""
        st = self.settings
        strategy = self.space.strategy(a)
        try:
            program = shard(self.base, a.param_map, a.activation_map, sequence=a.megatron)
            first = self.seen.get(program)
            if first is not None:
                self.pruned.equivalent += 1
                if strategy != first:
                    self.aliases.setdefault(program, {}).setdefault(strategy, a)
                return None
            self.seen[program] = strategy
            model = model_program(program, st.mesh, st.sizes, check=self.check)
        except IllegalSharding:
            self.pruned.illegal += 1
            return None
        state = {"precision": st.state.precision, "zero": st.state.zero}
        if st.mode == "train":
            try:  # ZeRO-1/2 keep the parameters whole over the data axes: an FSDP candidate is ZeRO-3
                check_zero(model, st.state.stage, require_axes=False)
            except UsageError:
                self.pruned.zero += 1
                return None
            try:  # ZeRO shards each parameter (and its gradient) over the data axes on a dim they divide
                check_zero_divides(model, st.state.stage)
            except UsageError:
                self.pruned.undivided += 1
                return None
        # what needs no plan: the parameters, their gradients and optimizer state, the activations the backward
        # keeps as the program holds them, the KV cache
        parts = {
            k: float(v) for k, v in unplanned_bytes(model, st.mode, self.saved, st.optimizer, **state).items()
        }
        lower = sum(parts.values())
        if lower > st.cap:
            self.pruned.over_cap += 1
            return Entry(a, strategy, program, lower, parts, False, cap=st.cap)
        return Admitted(a, strategy, program, model, lower)

    def check(self, program: Program, mesh: Mesh, sizes: dict[str, int]) -> None:
        """:func:`~shardalg.algebra.legality.check_or_raise` on ``program``, statement by statement, each
        statement once per search and sizes: the rules run at each site of a statement in the program's mesh
        and sizes, so a program passes when each of its statements does, and the first violation raised is the
        program's first. A program that names sub-axes is checked whole (its mesh is refined by all of them)."""
        if names_subaxes(program):
            check_or_raise(program, mesh, sizes)
            return
        bound = tuple(sorted(sizes.items()))
        for s in program.statements:
            if (s, bound) not in self.legal:
                check_or_raise(s, mesh, sizes)
                self.legal.add((s, bound))

    def price(self, admitted: Admitted) -> Entry:
        """An admitted candidate priced: in training with the backward's gathered copies kept or gathered again
        as the settings say, else the faster of the two that fits the cap."""
        st = self.settings
        a, strategy, program, model, _ = admitted
        entry, copies = self._priced(a, strategy, program, model, bool(st.keep))
        if not copies:
            return entry  # inference, or a backward that reads no copy the forward gathered: nothing to keep
        if st.keep is not None:
            entry.keep = KeepChoice(st.keep, True, copies)
            return entry
        kept, _ = self._priced(a, strategy, program, model, True)  # the other way: keeping them
        # keeping wins when faster by more than TIE: a tie goes to gathering again, whichever way the
        # seconds were summed (whole, or from statements: their last bits differ)
        wins = kept.fits and kept.seconds < entry.seconds * (1 - TIE)  # type: ignore[operator]
        chosen = kept if wins else entry
        chosen.keep = KeepChoice(wins, False, copies, entry.seconds, kept.seconds, kept.fits, kept.bytes)
        return chosen

    def _priced(
        self, a: Assignment, strategy: str, program: Program, model: Any, keep: bool
    ) -> tuple[Entry, float]:
        """The entry of one assignment with the backward keeping the forward's gathered copies or gathering
        them again, and the bytes per device those copies hold (0: the backward reads none)."""
        st = self.settings
        state = {"precision": st.state.precision, "zero": st.state.zero}
        analysis = analyze(model, st.mode, st.remat, keep_gathered=keep)
        report = model_memory(analysis, st.chip, st.optimizer, **state, strict=False)
        parts = {k: float(report.parts[k]) for k in PARTS}
        total = sum(parts.values())
        steps = step_seconds(analysis, st.chip, st.policy, state=st.state if st.mode == "train" else None)
        seconds = sum(p.count * p.total for p in steps)
        axes: dict[str, float] = {}
        for p in steps:
            for ax, s in p.axes:
                axes[ax] = axes.get(ax, 0.0) + p.count * s
        flops = analysis.flops()
        model_flops = float(flops.forward + flops.backward) / float(model.devices)
        peak = st.chip.flops.value
        entry = Entry(
            a,
            strategy,
            program,
            total,
            parts,
            total <= st.cap,
            seconds,
            compute=sum(p.count * p.compute for p in steps),
            comms=sum(p.count * p.comms for p in steps),
            hbm=sum(p.count * p.hbm for p in steps),
            axes=axes,
            flops=model_flops,
            mfu=model_flops / (seconds * peak) if seconds > 0 else None,
            cap=st.cap,
            hbm_counted=st.mode != "train",
            gathers=activation_gathers(analysis),
        )
        copies = float(sum(b * n for _, b, n in analysis.gathered_copies())) if st.mode == "train" else 0.0
        return entry, copies
