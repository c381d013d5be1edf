"""The numeric search's answer (:func:`.numeric.search`): its ranked candidates, each named strategy's best and
why each one lost, printed as text, a table (the notebook's), LaTeX and JSON."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from shardalg.notation.printing import text
from shardalg.notation.printing.display import Shown, Table
from shardalg.notation.printing.symbology import latex_escape_text
from shardalg.notation.syntax import MeshDecl, Program

from .paid import Move, against, beyond_text, paid, pays_json
from .price import Entry, Settings, size_text, strategy_firsts, time_text
from .space import STRATEGIES, Assignment, Pruned, Space

__all__ = ["SearchResult"]


def _mfu_text(mfu: float | None, short: bool = False) -> str:
    """The MFU a candidate reaches; where it rounds to 1.00 it is the chip's peak, said in words (the step is
    priced at the cost model's efficiencies, peak unless given or carried by the chip)."""
    if mfu is None:
        return "-"
    if round(mfu, 2) >= 1:
        return "peak" if short else "1.00 (peak: the step is priced at the chip's peak FLOP/s)"
    return f"{mfu:.2f}"


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
        firsts = strategy_firsts((*self.ranked, *sorted(self.rejected, key=lambda e: e.bytes)), self.aliases)
        out = {s: self._as[(id(e), s)] if alias else e for s, (e, alias) in firsts.items()}
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
        """The winner as a program in the notation (what ``plan``, ``backward`` and ``export`` take); where
        the program wrote a mesh or sizes of its own, the search's stand there (``--mesh`` and ``--sizes``
        replaced the program's, which are stale)."""
        if self.winner is None:
            return None
        p, st = self.winner.program, self.settings
        mesh = MeshDecl(tuple((a.name, a.size) for a in st.mesh.axes))
        sizes = tuple(st.sizes.items())
        return text(
            replace(p, mesh=mesh if p.mesh is not None else None, sizes=sizes if p.sizes else (), source=None)
        )

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
            + (
                f"{p.undivided:,} left out by ZeRO-{st.state.stage.stage} (a parameter with no unsharded dim "
                "the data axes divide), "
                if p.undivided
                else ""
            )
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


def _solver_text(solver: dict[str, Any]) -> str:
    """``enumerated: optimal over the space; 42 sharded statements priced once``."""
    head = "enumerated: optimal over the space"
    if solver.get("bound", {}).get("unpriced"):
        known = (
            "its forward plans, the backward of its statements priced so far and the least compute of the rest"
            if solver.get("pricing") == "statements"
            else "its forward plans and the least compute of its backward"
        )
        head += (
            f"; branch and bound: {solver['bound']['unpriced']:,} candidates left unpriced ({known} put each "
            "behind the top rows, its strategy's best and the best with its parameters "
            "where a shown candidate has them: in seconds or, on a tie, in communication and bytes)"
        )
    if solver.get("pricing") == "statements":
        whole = solver["priced_whole"]
        return f"{head}; {solver['pieces']:,} sharded statements priced once" + (
            f", {whole:,} candidates priced whole (Megatron SP over a shared input)" if whole else ""
        )
    return f"{head}; whole programs priced: {solver.get('why')}"
