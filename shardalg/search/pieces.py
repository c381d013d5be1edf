"""Statements priced once: a candidate's step and memory assembled from its statements' prices.

The whole-program search (:mod:`.numeric`) prices each assignment by planning its whole sharded program
again (forward plans, derived backward, step, memory): most of that work repeats, since two assignments that
shard one statement alike give that statement the same plans. Here each sharded statement (a product with
the statements written before it: FSDP's gathers, a norm, a residual add; an attention core's two products
with its softmax and the renames of K and V, so a causal mask that halves both is seen) is a *piece*: a one-product program
analysed alone, its forward plans and derived backward priced under the search's
:class:`~shardalg.costs.costmodel.CostModel`, once per search and per way the backward treats the forward's
gathered copies (kept or gathered again); how a program is cut into them is :mod:`.groups`. A candidate's
price is assembled from its pieces:

- seconds, per part of the step (the repeated layer, priced once and multiplied by the layer count; the part
  outside it once) and per phase (forward, backward): compute and HBM time add up, each lane's collectives
  (a mesh axis, or the chip for a function's statistics) add up on that lane; under ``steady`` each phase
  takes max(its compute, its busiest lane) and the part the sum of its phases (:mod:`shardalg.costs.phases`),
  under ``serial`` compute plus every collective; inference: each op's roofline
  (:func:`shardalg.models.inference.inference_ops`), the part their sum;
- memory: parameters, gradients and optimizer state by parameter, saved activations by value (the whole
  program's saved list, which does not depend on the sharding), the kept gathered copies and the functions'
  statistics by piece, the transient gathered weights as
  :meth:`shardalg.models.analysis.Analysis.transient` combines them.

Where a step is not a sum of its statements, :func:`pricer_for` keeps the whole-program
:class:`.price.Pricer` and says why: overlap ``schedule`` (steps as their dependencies allow), a remat policy
other than ``none`` (which statements rerun depends on the whole layer), a ZeRO stage, a precision recipe or
microbatches (priced over the whole step), an inference step that reads a KV cache (the attention core is one
op over several statements). A value read by a function and by a statement of another piece (the residual
stream: a norm and a residual add) has its gradient's parts added in a step of the backward's own, which no piece
writes: those additions are found on the unsharded program and priced at each candidate's sharding. A
training candidate with Megatron SP is priced by *blocks*: the layer's statements cut only where the
residual stream is written (the attention block, the MLP block). Its backward hands cotangents between
statements in layouts other than the forward's (the core's backward gathers the scores' cotangent, and Q's
projection reads a whole ``dQ``): with Q's, K's and V's projections one piece and the core another, 28 of the
causal layer's 89 Megatron SP candidates on 2x2 came out wrong. A layer without a core does it too: priced
product by product, 18 of the 110 candidates of an MLP of two products and a residual add (B=512, T=256,
D=F=4096) on 2x2 differed from their whole programs (``params D=Y; activations D=Y; megatron-sp Y``: the
backward's communication), and the best Megatron SP one on 2x4 without the add was 2% slow (the property
against the brute force found it).
In inference a candidate is the sum of its pieces.

Each piece is of one part of the step, as the whole program counts its statements: Megatron SP's last block
ends where the layer does (run on into the head, the head was counted once a layer: LLaMA-3 8B's best
Megatron SP on 2x2 came to 660 ms against its whole program's 221 ms), a piece of the head is priced with each
of its values once (alone, the head's final norm is a layer of its own program, nothing written before it),
and where a piece would hold statements of both parts (a head with no product of its own joins the layer's
last piece) the candidates are priced whole.

A piece is priced for its own axes, never looked up as another piece with interchangeable axes renamed: the
planner breaks a tie between plans of equal bytes by their text, which names the axes, so a renamed piece may
take the other plan and put a collective on another axis (on ``X=2,Y=2,Z=2``, 2 us of a norm's scale gathered
moved between Y and Z in 6 of 547 candidates sampled; pricing every piece of an axis orbit costs about 10% more
CPU on the causal layer there).

The test ``tests/search/test_pieces.py`` checks candidates of the search's programs against the
whole-program price: the same seconds, communication, FLOPs, bytes by part and keep choice (a spread of each
layer's candidates; every one under the long profile, docs/testing.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import sympy
from sympy import Expr, Integer

from shardalg.algebra.legality import check_or_raise
from shardalg.algebra.mesh import Mesh
from shardalg.costs.phases import PHASES
from shardalg.costs.schedule import OverlapPolicy, lanes_of
from shardalg.costs.terms import point
from shardalg.models.analysis import Analysis, analyze
from shardalg.models.inference import inference_ops
from shardalg.models.lookup import lookup_gradients, lookup_table
from shardalg.models.memory import PARTS, model_memory
from shardalg.models.program import model_program
from shardalg.models.step import _cost_model, _part_cost  # the step's own cost model and part pricing
from shardalg.models.trainstate import TrainState
from shardalg.notation.plan import Op, Plan
from shardalg.notation.syntax import Program, Tensor

from .groups import (
    Pieces,
    Split,
    blocks,
    is_product,
    join_program,
    joined,
    joins_of,
    split_statements,
    sub_program,
)
from .price import Entry, Pricer, Settings, activation_gathers
from .space import Assignment, Pruned, Space

__all__ = [
    "Piece",
    "Seconds",
    "StatementPricer",
    "phase_comms",
    "phase_of",
    "phase_seconds",
    "price_piece",
    "pricer_for",
]

PARAM_PARTS = ("params", "grads", "optimizer")
Check = Callable[[Program, Mesh, dict[str, int]], object]  # a program's legality check (model_program's)


@dataclass
class Seconds:
    """One phase's plans in seconds: compute, HBM, every collective's sum, each lane's sum (a mesh axis, or
    the chip for a function's statistics: what ``steady`` takes the busiest of) and each axis's sum as a step
    reports it (:func:`shardalg.models.step.step_seconds`); in inference, its ops' rooflines summed."""

    compute: float = 0.0
    hbm: float = 0.0
    comms: float = 0.0
    lanes: dict[str, float] = field(default_factory=dict)
    axes: dict[str, float] = field(default_factory=dict)
    ops: float = 0.0  # inference: the sum of its ops' rooflines
    ops_comms: float = 0.0  # inference: the sum of its ops' unhidden communication

    def add(self, other: Seconds) -> None:
        self.compute += other.compute
        self.hbm += other.hbm
        self.comms += other.comms
        self.ops += other.ops
        self.ops_comms += other.ops_comms
        for mine, theirs in ((self.lanes, other.lanes), (self.axes, other.axes)):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0.0) + v

    @property
    def empty(self) -> bool:
        return not (self.compute or self.hbm or self.comms or self.lanes or self.axes or self.ops)


@dataclass
class Piece:
    """One sharded statement priced alone: its seconds by phase (forward, backward), its FLOPs (forward +
    backward, in all), its memory rows (``(part, name) -> bytes per device``: parameters, gradients,
    optimizer state, KV cache, kept gathered copies, functions' statistics), the bytes of each value as the
    piece first writes it and as a collective other than an AllGather last rewrites it there (``held``), the
    weights its plans gather (name -> bytes) and the bytes of the gathered copies its backward reads."""

    phases: tuple[Seconds, ...]
    flops: Expr
    rows: dict[tuple[str, str | Tensor], Expr]  # a kept gathered copy's row by its tensor
    values: dict[str, Expr]
    held: dict[str, Expr]
    gathered: dict[str, Expr]
    copies: float
    gathers: tuple[str, ...] = ()  # the values (not parameters) its forward gathers


def phase_comms(s: Seconds, policy: OverlapPolicy) -> float:
    """A training phase's communication as a step counts it: under ``serial`` every collective, under
    ``steady`` its busiest lane (the others overlap it)."""
    if policy is OverlapPolicy.SERIAL:
        return s.comms
    return max(s.lanes.values(), default=0.0)


def phase_seconds(s: Seconds, policy: OverlapPolicy) -> float:
    """A training phase's seconds: under ``serial`` its compute plus every collective, under ``steady`` max(its
    compute, its busiest lane) (:mod:`shardalg.costs.phases`)."""
    if policy is OverlapPolicy.SERIAL:
        return s.compute + phase_comms(s, policy)
    return max(s.compute, phase_comms(s, policy))


def phase_of(plans: list[Plan], a: Analysis, costs: Any, at: Any) -> Seconds:
    """``plans`` priced as one phase of ``a``'s step under ``costs`` at the point ``at``, in seconds."""
    cost = _part_cost("piece", [plans], a, costs)
    got = Seconds()
    if cost is None:
        return got
    for sc in cost.steps:
        got.compute += float(sc.compute.evaluate(at) or 0.0)
        got.hbm += float(sc.memory.evaluate(at) or 0.0)
        c = float(sc.comms.evaluate(at) or 0.0)
        got.comms += c
        for lane in lanes_of(sc.step):
            got.lanes[lane] = got.lanes.get(lane, 0.0) + c
        for lane in lanes_of(sc.step) if sc.step.op is not Op.EINSUM else ():
            got.axes[lane] = got.axes.get(lane, 0.0) + c
    return got


def price_piece(
    sub: Program, st: Settings, keep: bool, once: bool = False, check: Check = check_or_raise
) -> Piece:
    """``sub`` (a piece of a candidate's program) priced alone with the backward keeping the forward's gathered
    copies or not; ``once``: the piece is of the part of the step outside the repeated layer (the head), so
    each of its values occurs once, as the whole program holds them (priced alone, the head's final norm is
    a layer of its own: nothing is written before it). ``check``: its legality (a search's checks each
    statement once: its candidates' statements were checked when they were admitted)."""
    if once and sub.roles is not None:
        sub = replace(sub, roles=replace(sub.roles, layers=None))
    model = model_program(sub, st.mesh, st.sizes, check=check)
    a = analyze(model, st.mode, "none" if st.mode == "train" else None, keep_gathered=keep)
    costs = _cost_model(a, st.chip, st.policy)
    at = point(costs.efficiency.effective(st.chip.values()))
    if st.mode == "train":
        phases = (
            phase_of(list(a.forward_plans.values()), a, costs, at),
            phase_of([p for _, p in a.grad_plans], a, costs, at),
        )
    else:
        forward = phase_of(list(a.forward_plans.values()), a, costs, at)
        for once in (False, True):
            for o in inference_ops(a, once, costs):
                forward.ops += float(o.total.evaluate(at) or 0.0)
                forward.ops_comms += float(o.comms.evaluate(at) or 0.0)
        phases = (forward,)
    flops = a.flops()
    report = model_memory(a, st.chip, st.optimizer, strict=False)
    rows = {(part, name): b * n for part, name, b, n in report.rows if part in (*PARAM_PARTS, "kv_cache")}
    # a kept copy's row by its tensor (two pieces keep one copy once)
    copied = [c.tensor for c in a.backward.gathered if c.kept] if a.backward is not None else []
    rows.update({("activations", t): b * n for t, (_, b, n) in zip(copied, a.kept(), strict=True)})
    rows.update({("activations", label): b * n for label, b, n in a.statistics()})
    values = {n: model.bytes_of(v.tensor) * model.factor(v) for n, v in model.values.items()}
    held = {n: model.bytes_of(t) * model.factor(model.values[n]) for n, t in model.held.items()}
    gathered: dict[str, Expr] = {}
    for name, step, _ in a.gathered():
        size = model.bytes_of(step.output)
        gathered[name] = size if name not in gathered else sympy.Max(gathered[name], size)
    copies = float(sum(b * n for _, b, n in a.gathered_copies())) if st.mode == "train" else 0.0
    return Piece(
        phases, flops.forward + flops.backward, rows, values, held, gathered, copies, activation_gathers(a)
    )


class StatementPricer(Pricer):
    """The :class:`.price.Pricer` of a search, its candidates' prices assembled from their statements'
    (each sharded statement priced once per search and per keep choice: ``table``)."""

    def __init__(self, base: Program, space: Space, settings: Settings, pruned: Pruned):
        super().__init__(base, space, settings, pruned)
        base = self.base  # without spans
        self.table: dict[tuple[Program, bool], Piece] = {}
        self.priced = 0  # pieces priced: a piece whose backward reads no gathered copy is priced once, not
        # once per keep choice
        whole = self.unsharded
        part = {info.statement: info.once for info in whole.model.statements if info.computes}
        groups = split_statements(base)
        # each group's part of the step (True: once, outside the repeated layer); None where its statements
        # are in both, or it computes nothing: the candidates are then priced whole (pieces_of)
        parts = [got.pop() if len(got := {part[s] for s in g if s in part}) == 1 else None for g in groups]
        self._once = [p for g, p in zip(groups, parts, strict=True) if any(map(is_product, g))]
        alone = tuple((k,) for k in range(len(groups)))
        self.alone = Split(alone, joins_of(base, whole, settings, alone))
        # Megatron SP in training: whole blocks of the layer (see pieces_of), none across the parts
        runs = blocks(groups, {name for name, _ in self.alone.joins}, parts)
        self.blocks = Split(runs, joins_of(base, whole, settings, runs))
        self.whole = 0  # candidates priced whole (see _priced)

    def piece(self, sub: Program, keep: bool, once: bool) -> Piece:
        """``sub``'s piece with the backward keeping the forward's gathered copies or not (``once``: of the part
        outside the repeated layer): looked up (under the other keep choice too, where its backward reads no
        gathered copy: keeping is moot), else priced."""
        got = self.found(sub, keep)
        if got is None:
            got = price_piece(sub, self.settings, keep, once, self.check)
            self.priced += 1
        self.table[(sub, keep)] = got
        return got

    def once(self, run: tuple[int, ...]) -> bool:
        """Whether a run of groups (:func:`split_statements`'s places) is of the part of the step outside the
        repeated layer (the head)."""
        return bool(self._once[run[0]])

    def pieces_of(self, a: Assignment, program: Program) -> Pieces | None:
        """The sub-programs ``program`` (``a``'s) is priced by: its pieces and its gradients' additions, with
        how it is split (None: it is not split as the search's program is, and is priced whole)."""
        groups = split_statements(program)
        if len(groups) != len(self._once) or None in self._once:
            return None
        # Megatron SP in training: the backward hands a cotangent on in a layout other than its forward's (an
        # attention core gathers dSc, and Q's projection takes a whole dQ with no gather; an MLP with D sharded
        # too); pieces cut between its statements are wrong (CUT_AT_CORE_WRONG in the tests). So its pieces are
        # whole blocks of the layer, cut where the residual stream is written, whose gradient's parts are added
        # in the stream's own layout. Inference: the sum of its pieces
        blocks = self.settings.mode == "train" and a.megatron
        split = self.blocks if blocks else self.alone
        subs = tuple(sub_program(program, g) for g in joined(program, groups, split.runs))
        joins = tuple(join_program(program, name) for name, _ in split.joins)
        return Pieces(split, subs, joins)

    def found(self, sub: Program, keep: bool) -> Piece | None:
        """``sub``'s piece under ``keep`` if priced already (under the other keep choice too, where keeping is
        moot), else None: nothing is priced."""
        got = self.table.get((sub, keep))
        if got is None:
            other = self.table.get((sub, not keep))
            got = other if other is not None and not other.copies else None
        return got

    def priced_backward(
        self, pieces: Pieces, keep: bool
    ) -> dict[bool, tuple[Seconds, list[tuple[int, ...]]]]:
        """Per part of the step (True: once): the backward's seconds of the candidate's pieces and gradients'
        additions priced so far under ``keep`` (a part of its backward), and the runs of groups
        (:func:`split_statements`'s places) whose pieces are not priced yet."""
        got: dict[bool, tuple[Seconds, list[tuple[int, ...]]]] = {
            False: (Seconds(), []),
            True: (Seconds(), []),
        }
        for sub, run in zip(pieces.subs, pieces.split.runs, strict=True):
            p = self.found(sub, keep)
            seconds, unpriced = got[self.once(run)]
            if p is None:
                unpriced.append(run)
            else:
                seconds.add(p.phases[-1])
        for sub, (_, outside) in zip(pieces.joins, pieces.split.joins, strict=True):
            p = self.found(sub, keep)
            if p is not None:
                got[outside][0].add(p.phases[0])  # the addition is a step of the backward
        return got

    def _priced(
        self, a: Assignment, strategy: str, program: Program, model: Any, keep: bool
    ) -> tuple[Entry, float]:
        of = self.pieces_of(a, program)
        if of is None:
            self.whole += 1
            return super()._priced(a, strategy, program, model, keep)
        once = [self.once(run) for run in of.split.runs]
        pieces = [self.piece(sub, keep, o) for sub, o in zip(of.subs, once, strict=True)]
        joins = [
            self.piece(sub, keep, outside) for sub, (_, outside) in zip(of.joins, of.split.joins, strict=True)
        ]
        entry = self._entry(a, strategy, program, model, pieces, once, joins, of.split.joins)
        return entry, sum(p.copies for p in pieces)

    def lookup_seconds(self, model: Any) -> Seconds:
        """The unwritten embedding lookup's gradient, its reduction or its tokens' gather, whichever moves fewer
        bytes (:mod:`shardalg.models.lookup`), a step of the backward outside the layer that no piece writes:
        planned and priced at the candidate's sharding."""
        st = self.settings
        found = lookup_table(model) if st.mode == "train" else None
        if found is None:
            return Seconds()
        a = analyze(model, st.mode, "none", attention_said=False)
        # a tied table's part reduced with its derived gradient where that plan reduces: the whole backward's
        tied = any(found[0].name in s.reads for s in model.statements if s.kind != "declaration")
        grads = a.lookup_grads if tied else lookup_gradients(model)
        if not grads:
            return Seconds()
        costs = _cost_model(a, st.chip, st.policy)
        return phase_of(
            [g.plan for g in grads], a, costs, point(costs.efficiency.effective(st.chip.values()))
        )

    def _entry(
        self,
        a: Assignment,
        strategy: str,
        program: Program,
        model: Any,
        pieces: list[Piece],
        once_of: list[bool],
        joins: list[Piece],
        joined: tuple[tuple[str, bool], ...],
    ) -> Entry:
        st = self.settings
        parts_s = {once: [Seconds() for _ in PHASES] for once in (False, True)}
        rows: dict[tuple[str, str | Tensor], Expr] = {}
        values: dict[str, Expr] = {}
        rewritten: dict[str, Expr] = {}
        gathered: dict[bool, dict[str, Expr]] = {False: {}, True: {}}
        flops: Expr = Integer(0)
        for p, outside in zip(pieces, once_of, strict=True):
            for mine, theirs in zip(parts_s[outside], p.phases, strict=False):
                mine.add(theirs)
            flops += p.flops
            rows.update(p.rows)
            # a value is held as the program first writes it (in the first piece that has it: a later piece
            # may read it gathered, as its own input), or as a collective other than an AllGather last
            # rewrote it (:meth:`shardalg.models.program.ModelProgram.kept_tensor`)
            for name, b in p.values.items():
                values.setdefault(name, b)
            rewritten.update(p.held)
            for name, b in p.gathered.items():
                held = gathered[outside].get(name)
                gathered[outside][name] = b if held is None else sympy.Max(held, b)
        for j, (_, outside) in zip(joins, joined, strict=True):  # a gradient's parts added
            parts_s[outside][-1].add(j.phases[0])
        parts_s[True][-1].add(self.lookup_seconds(model))
        memory = {part: Integer(0) for part in PARTS}
        for (part, _), b in rows.items():
            memory[part] += b
        if st.mode == "train":
            values.update(rewritten)
            memory["activations"] += sympy.Add(*(values[n] for n in self.saved))
        sums = {once: sympy.Add(*d.values()) for once, d in gathered.items()}
        memory["transient"] = sympy.Max(sums[False], sums[True])
        parts = {k: float(memory[k]) for k in PARTS}
        total_bytes = sum(parts.values())
        seconds = compute = comms = hbm = 0.0
        axes: dict[str, float] = {}
        for once, phases in parts_s.items():
            if all(s.empty for s in phases):
                continue
            count = 1.0 if once else float(model.layers)
            if st.mode != "train":
                t, c = phases[0].ops, phases[0].ops_comms
            else:  # the part: its phases' sum (steady: each max(its compute, its busiest lane))
                c = sum(phase_comms(s, st.policy) for s in phases)
                t = sum(phase_seconds(s, st.policy) for s in phases)
            seconds += count * t
            compute += count * sum(s.compute for s in phases)
            comms += count * c
            hbm += count * sum(s.hbm for s in phases)
            for s in phases:
                for ax, v in s.axes.items():
                    axes[ax] = axes.get(ax, 0.0) + count * v
        # each axis's sum, the mesh's axes in mesh order (a lane that is no axis first), whatever order the
        # pieces met them in
        where = {name: i for i, name in enumerate(st.mesh.names)}
        axes = {ax: axes[ax] for ax in sorted(axes, key=lambda ax: where.get(ax, -1))}
        model_flops = float(flops) / float(model.devices)
        peak = st.chip.flops.value
        return Entry(
            a,
            strategy,
            program,
            total_bytes,
            parts,
            total_bytes <= st.cap,
            seconds,
            compute=compute,
            comms=comms,
            hbm=hbm,
            axes=axes,
            flops=model_flops,
            mfu=model_flops / (seconds * peak) if seconds > 0 else None,
            cap=st.cap,
            hbm_counted=st.mode != "train",
            gathers=tuple(dict.fromkeys(n for p in pieces for n in p.gathers)),
        )


def whole_program_reason(base: Program, settings: Settings) -> str | None:
    """Why a step of ``base`` under ``settings`` is not a sum of its statements' prices (None: it is)."""
    st = settings
    if st.policy is OverlapPolicy.SCHEDULE:
        return "overlap schedule is not a sum of statements"
    whole = analyze(model_program(base, st.mesh, st.sizes), st.mode, st.remat)
    if st.mode == "train":
        if whole.remat.policy != "none":
            return f"remat {whole.remat.policy} reruns statements by the whole layer"
        if st.state.stage.stage != 0 or st.state.recipe != TrainState().recipe or st.state.micro != 1:
            return "a ZeRO stage, a precision recipe or microbatches are priced over the whole step"
    elif whole.model.kv_cache:
        return "the attention core that reads the KV cache is one op over several statements"
    return None


def pricer_for(
    base: Program, space: Space, settings: Settings, pruned: Pruned, notes: list[tuple[str, str]]
) -> Pricer:
    """The statement pricer, or the whole-program one where a step is not a sum of its statements
    (:func:`whole_program_reason`), with a note saying which."""
    why = whole_program_reason(base, settings)
    if why is not None:
        notes.append(("pricing", f"each candidate's whole program ({why})"))
        whole = Pricer(base, space, settings, pruned)
        whole.why = why
        return whole
    notes.append(("pricing", "each statement's shardings priced once, candidates assembled from them"))
    return StatementPricer(base, space, settings, pruned)
