"""Statements priced once: a candidate's step and memory assembled from its statements' prices.

The whole-program search (:mod:`.numeric`) prices each assignment by planning its whole sharded program
again (forward plans, derived backward, step, memory): most of that work repeats, since two assignments that
shard one statement alike give that statement the same plans. Here each sharded statement (a product with
the collectives written before it, such as FSDP's gathers) is a *piece*: a one-statement program analysed
alone, its forward plans and derived backward priced under the :class:`~shardalg.costs.costmodel.CostModel`
of the search, once per search. A candidate's price is assembled from its pieces:

- seconds, per part of the step (the repeated layer, priced once and multiplied by the layer count; the part
  outside it once): compute and HBM time add up, each mesh axis's collectives add up on that axis; under
  ``steady`` the part takes max(compute, the busiest axis) (inference: and its HBM reads), under ``serial``
  the sum. ``schedule`` (steps as their dependencies allow) is not a sum of pieces: :func:`pricer_for`
  keeps the whole-program :class:`.price.Pricer` then, and says so;
- memory: parameters, gradients and optimizer state by parameter, saved activations by value (the whole
  program's saved list, which does not depend on the sharding), KV cache by value, the transient gathered
  weights as :meth:`shardalg.models.analysis.Analysis.transient` combines them. Under a remat policy other
  than ``none`` the statements a layer reruns depend on the whole layer: :func:`pricer_for` keeps the
  whole-program pricer then too.

The test ``tests/search/test_pieces.py`` checks candidates of the search's programs against the whole-program
price: same seconds, communication, FLOPs and bytes by part. :func:`.numeric.search` does not use it yet: in
its space every activation follows one map, so two candidates rarely shard a statement alike (question 7's
MLP: never, each statement has every dim), and with the planner's own caches warm the whole program costs
less than its pieces (40 layer candidates on 2x2x2 in training: 0.74 s whole, 3.0 s in 190 pieces).
Pricing each statement's options once pays where they are combined freely: :mod:`.graph` does that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy
from sympy import Expr, Integer

from shardalg.costs.schedule import OverlapPolicy, lanes_of
from shardalg.errors import IllegalSharding
from shardalg.models.analysis import Analysis, analyze
from shardalg.models.expand import shard
from shardalg.models.memory import PARTS, model_memory, param_bytes
from shardalg.models.program import ModelProgram, model_program
from shardalg.models.step import _cost_model, _part_cost  # the step's own cost model and part pricing
from shardalg.notation.plan import Op, Plan
from shardalg.notation.syntax import Arrow, Product, Program, Roles

from .price import Entry, Pricer, Settings
from .space import Assignment, Pruned, Space, _tensors

__all__ = ["Piece", "StatementPricer", "pricer_for", "split_statements"]

PARAM_PARTS = ("params", "grads", "optimizer")


@dataclass
class Seconds:
    """One list of plans in seconds: compute, HBM, every collective's sum, and each mesh axis's sum."""

    compute: float = 0.0
    hbm: float = 0.0
    comms: float = 0.0
    axes: dict[str, float] = field(default_factory=dict)

    def add(self, other: Seconds, times: float = 1.0) -> None:
        self.compute += times * other.compute
        self.hbm += times * other.hbm
        self.comms += times * other.comms
        for k, v in other.axes.items():
            self.axes[k] = self.axes.get(k, 0.0) + times * v


@dataclass
class Piece:
    """One sharded statement priced alone: its forward and backward seconds, its FLOPs (forward + backward,
    in all), its memory rows (``(part, name) -> bytes per device``), the bytes of each value it holds, and
    the weights its plans gather (name -> bytes)."""

    forward: Seconds
    backward: Seconds
    flops: Expr
    rows: dict[tuple[str, str], Expr]
    values: dict[str, Expr]
    gathered: dict[str, Expr]


def _is_product(s: object) -> bool:
    return isinstance(s, Arrow) and isinstance(s.expr, Product)


def split_statements(program: Program) -> list[tuple[Any, ...]]:
    """The statements of a sharded program in pieces: each product with the statements written before it
    (its gathers); statements after the last product join it."""
    out: list[tuple[Any, ...]] = []
    run: list[Any] = []
    for s in program.statements:
        run.append(s)
        if _is_product(s):
            out.append(tuple(run))
            run = []
    if run:
        if out:
            out[-1] = out[-1] + tuple(run)
        else:
            out.append(tuple(run))
    return out


def _names(statements: tuple[Any, ...]) -> set[str]:
    return {t.name for s in statements for t in _tensors(s) if t.name is not None}


def _sub_program(program: Program, statements: tuple[Any, ...]) -> Program:
    roles = program.roles or Roles()
    names = _names(statements)
    keep = {k: tuple(n for n in getattr(roles, k) if n in names) for k in ("params", "embeddings", "kvcache")}
    return Program(
        statements, program.mesh, program.sizes, Roles(**keep, tokens=roles.tokens, layers=roles.layers)
    )


def _seconds(plans: list[Plan], a: Analysis, st: Settings) -> Seconds:
    cost = _part_cost("piece", plans, a, _cost_model(a, st.chip, st.policy))
    if cost is None:
        return Seconds()
    got = Seconds(
        float(cost.evaluate(cost.light("compute")) or 0.0), float(cost.evaluate(cost.light("memory")) or 0.0)
    )
    for sc in cost.steps:
        c = float(cost.evaluate(sc.comms) or 0.0)
        got.comms += c
        for lane in lanes_of(sc.step) if sc.step.op is not Op.EINSUM else ():
            got.axes[lane] = got.axes.get(lane, 0.0) + c
    return got


def _price_piece(sub: Program, st: Settings) -> Piece:
    model = model_program(sub, st.mesh, st.sizes)
    a = analyze(model, st.mode, "none" if st.mode == "train" else None)
    forward = _seconds(list(a.forward_plans.values()), a, st)
    backward = _seconds([p for _, p in a.grad_plans], a, st)
    flops = a.flops()
    report = model_memory(a, st.chip, st.optimizer)
    rows = {(part, name): b * n for part, name, b, n in report.rows if part in (*PARAM_PARTS, "kv_cache")}
    values = {n: model.bytes_of(v.tensor) * model.factor(v) for n, v in model.values.items()}
    gathered: dict[str, Expr] = {}
    for name, step, _ in a.gathered():
        size = model.bytes_of(step.output)
        gathered[name] = size if name not in gathered else sympy.Max(gathered[name], size)
    return Piece(forward, backward, flops.forward + flops.backward, rows, values, gathered)


class StatementPricer(Pricer):
    """The :class:`.price.Pricer` of a search, its candidates' prices assembled from their statements'
    (each sharded statement priced once per search: ``table``)."""

    def __init__(self, base: Program, space: Space, settings: Settings, pruned: Pruned):
        super().__init__(base, space, settings, pruned)
        self.table: dict[Program, Piece] = {}
        whole = analyze(model_program(base, settings.mesh, settings.sizes), settings.mode, settings.remat)
        self._saved = whole.saved  # names, the same under every sharding
        self._once = [s.once for s in whole.model.statements if s.kind == "product"]

    def piece(self, sub: Program) -> Piece:
        got = self.table.get(sub)
        if got is None:
            got = self.table[sub] = _price_piece(sub, self.settings)
        return got

    def __call__(self, a: Assignment) -> Entry | None:
        st = self.settings
        try:
            program = shard(self.base, a.param_map, a.activation_map)
            if program in self.seen:
                self.pruned.equivalent += 1
                return None
            self.seen.add(program)
            model = model_program(program, st.mesh, st.sizes)
        except IllegalSharding:
            self.pruned.illegal += 1
            return None
        strategy = self.space.strategy(a)
        lower = float(param_bytes(model, st.mode, st.optimizer))
        if lower > st.cap:
            self.pruned.over_cap += 1
            parts = {"params, grads and optimizer" if st.mode == "train" else "params": lower}
            return Entry(a, strategy, program, lower, parts, False, cap=st.cap)
        groups = split_statements(program)
        if len(groups) != len(self._once):  # pragma: no cover - shard keeps one product per product
            return super().__call__(a)
        pieces = [self.piece(_sub_program(program, g)) for g in groups]
        return self._entry(a, strategy, program, model, pieces)

    def _entry(
        self, a: Assignment, strategy: str, program: Program, model: ModelProgram, pieces: list[Piece]
    ) -> Entry:
        st = self.settings
        parts_s = {False: Seconds(), True: Seconds()}
        rows: dict[tuple[str, str], Expr] = {}
        values: dict[str, Expr] = {}
        gathered: dict[bool, dict[str, Expr]] = {False: {}, True: {}}
        flops: Expr = Integer(0)
        for k, p in enumerate(pieces):
            once = self._once[k]
            parts_s[once].add(p.forward)
            parts_s[once].add(p.backward)
            flops += p.flops
            rows.update(p.rows)
            values.update(p.values)
            for name, b in p.gathered.items():
                held = gathered[once].get(name)
                gathered[once][name] = b if held is None else sympy.Max(held, b)
        memory = {part: Integer(0) for part in PARTS}
        for (part, _), b in rows.items():
            memory[part] += b
        memory["activations"] = sympy.Add(*(values[n] for n in self._saved))
        sums = {once: sympy.Add(*d.values()) for once, d in gathered.items()}
        memory["transient"] = sympy.Max(sums[False], sums[True])
        parts = {k: float(memory[k]) for k in PARTS}
        total_bytes = sum(parts.values())
        layers = float(model.layers)
        seconds = compute = comms = hbm = 0.0
        axes: dict[str, float] = {}
        for once, s in parts_s.items():
            if not (s.compute or s.comms or s.hbm or s.axes):
                continue
            count = 1.0 if once else layers
            busiest = max(s.axes.values(), default=0.0)
            c = s.comms if st.policy is OverlapPolicy.SERIAL else busiest
            if st.policy is OverlapPolicy.SERIAL:
                t = s.compute + c + (s.hbm if st.mode == "infer" else 0.0)
            else:
                t = max(s.compute, c, s.hbm) if st.mode == "infer" else max(s.compute, c)
            seconds += count * t
            compute += count * s.compute
            comms += count * c
            hbm += count * s.hbm
            for ax, v in s.axes.items():
                axes[ax] = axes.get(ax, 0.0) + count * v
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
        )


def pricer_for(
    base: Program, space: Space, settings: Settings, pruned: Pruned, notes: list[tuple[str, str]]
) -> Pricer:
    """The statement pricer, or the whole-program one where a step is not a sum of its statements (overlap
    ``schedule``: steps as their dependencies allow; training under a remat policy other than ``none``:
    which statements rerun depends on the whole layer), with a note saying which."""
    st = settings
    why = None
    if st.policy is OverlapPolicy.SCHEDULE:
        why = "overlap schedule is not a sum of statements"
    elif st.mode == "train":
        policy = analyze(model_program(base, st.mesh, st.sizes), st.mode, st.remat).remat.policy
        if policy != "none":
            why = f"remat {policy} reruns statements by the whole layer"
    if why is not None:
        notes.append(("pricing", f"each candidate's whole program ({why})"))
        return Pricer(base, space, settings, pruned)
    notes.append(("pricing", "each statement's shardings priced once, candidates assembled from them"))
    return StatementPricer(base, space, settings, pruned)
