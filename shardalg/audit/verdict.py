"""The verdict: XLA's plan of each statement against shardalg's plans, priced under one ``CostModel``, and
XLA's backward collectives against the transposes of its forward ones and shardalg's derived backward.

Per statement: shardalg's plans (the planner's, ranked by seconds on the chip), which of them is XLA's (the
same collectives on the same tensors over the same axes; a free Slice is invisible in HLO, so a plan that
differs from XLA's only by slices counts as XLA's), XLA's bytes and seconds against the best plan's, and a
flag with the ratio where XLA's costs more. A step XLA runs over a sub-axis (``Y:(1)2``) is written in
Shardy's spelling and priced like the rest (a collective-permute that renames several axes is the notation's
``Permute_{X,Y:(1)2,Y:(2)2}``); shardalg's plans of that statement are then searched on the mesh with the cut
axes declared factored (``Y=2x2``), the same sub-axes XLA used. Seconds are priced on the mesh placed into a
GPU chip's nodes where it is flat and larger than one (:func:`in_nodes`), as ``shardalg cost`` prices it.
A statement is a product or an elementwise op of two tensors (``+``, ``-``, ``.*``), planned alike. XLA's
plan as read whose local op does not meet (a collective of XLA's for it was not attached: listed apart) is
incomplete: it is not priced (pricing it would price shardalg's cheapest plan in its place), and the
verdict says why.

Backward (``jax.grad``): each backward collective is paired with a forward collective whose transpose it is
(the op records' ``transpose``: AllGather ⇄ ReduceScatter, AllReduce ⇄ AllReduce, ...; same axes, same
shard bytes), a product's or an elementwise statement's alike (the pairing reads collectives, not which
statement they serve); the rest are listed. Beside them, the collectives of shardalg's derived backward of
the whole program (its elementwise statements too), or why it derives none.

Imports: :mod:`shardalg.api`, :mod:`shardalg.costs`, :mod:`shardalg.planning` and :mod:`.program`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.registry import RECORDS
from shardalg.algebra.traffic import Sizes
from shardalg.api import plans as all_plans
from shardalg.costs.costmodel import CostModel
from shardalg.costs.nodes import place_in_nodes
from shardalg.costs.plancost import costed
from shardalg.costs.programplan import REPLANNED, program_plan
from shardalg.errors import ShardalgError
from shardalg.notation.parse import parse
from shardalg.notation.syntax import Op
from shardalg.planning.backward import backward as derive_backward
from shardalg.planning.order import plan_bytes

from .groups import refinement
from .hlo import HloCollective, collectives
from .placing import group_axes
from .records import AuditProgram, Statement, XlaStep

__all__ = ["StatementVerdict", "BackwardPair", "BackwardVerdict", "in_nodes", "judge", "judge_backward"]

FLAG = 1.0 + 1e-9  # XLA's plan costs more when its seconds exceed the best plan's by more than rounding


@dataclass
class StatementVerdict:
    """One statement: XLA's plan, its cost, shardalg's best plan and where XLA's is among all plans."""

    statement: Statement
    xla_plan: str
    xla_bytes: float | None
    xla_seconds: float | None
    best_plan: str
    best_bytes: float | None
    best_seconds: float | None
    rank: int | None  # 1-based position of XLA's plan among shardalg's plans; None: not among them
    plans: int
    problem: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        if self.xla_seconds is None or not self.best_seconds:
            return None
        return self.xla_seconds / self.best_seconds

    @property
    def flagged(self) -> bool:
        r = self.ratio
        return r is not None and r > FLAG


COLLECTIVES = frozenset({"AllGather", "ReduceScatter", "AllReduce", "AllToAll", "Permute", "Shift", "Send"})


def _signature_of_steps(steps: Sequence[Any]) -> Counter:
    """The communicating steps (op, axes, tensor): the local product or elementwise op and free slices aside."""
    out: Counter = Counter()
    for s in steps:
        op = s.op if isinstance(s.op, str) else s.op.value
        if op not in COLLECTIVES:
            continue
        name = s.before.name if isinstance(s, XlaStep) else s.inputs[0].name
        out[(op, frozenset(s.axes), name)] += 1
    return out


def _number(x: Any) -> float | None:
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def _factored(prog: AuditProgram, st: Statement) -> tuple[Mesh, str]:
    """The mesh shardalg plans ``st`` on: ``prog``'s, with every axis XLA's steps cut into sub-axes declared
    factored (``Y=2x2``), so that shardalg's plans range over the same sub-axes as XLA's; and a note saying
    so ("" when no axis is cut)."""
    cut = refinement(prog.mesh, [a for s in st.steps for a in s.sub_axes])
    if not cut:
        return Mesh(prog.mesh), ""

    def size(f: str) -> str:
        return f.rsplit(")", 1)[1]

    text = ",".join(
        f"{k}={'x'.join(size(f) for f in cut[k])}" if k in cut else f"{k}={n}" for k, n in prog.mesh.items()
    )
    return Mesh(text), f"XLA's steps use sub-axes, so shardalg's plans are searched on --mesh {text}"


def in_nodes(mesh: Mesh, costs: CostModel) -> tuple[Mesh, tuple[str, ...]]:
    """``mesh`` as priced on the chip of ``costs``: a flat mesh larger than a GPU chip's node placed into its
    nodes (:func:`shardalg.costs.nodes.place_in_nodes`: ``X=64`` on ``h100`` is ``X=64:node8``), and the
    notes that say so (none where nothing is placed)."""
    done = place_in_nodes(mesh, costs.chip)
    return (mesh if done.mesh is None else done.mesh), done.notes


def judge(prog: AuditProgram, costs: CostModel) -> list[StatementVerdict]:
    """The verdict of every statement of ``prog`` under ``costs``."""
    return [_judge_one(prog, st, costs) for st in prog.statements]


def _judge_one(prog: AuditProgram, st: Statement, costs: CostModel) -> StatementVerdict:
    mesh, factored = _factored(prog, st)
    priced_on, placing = in_nodes(mesh, costs)  # the program's mesh's placement is the audit's note
    ours = all_plans(st.text, priced_on, prog.sizes, hw=costs.chip, overlap=costs.overlap)
    best = ours[0]
    cut = [] if getattr(ours, "complete", True) else [f"shardalg's plan list was cut: {ours.note}"]
    cut += [factored, *placing] if factored else []
    best_cost = costed(best, priced_on, prog.sizes, costs)
    best_bytes = _number(plan_bytes(best, mesh, Sizes(prog.sizes)).json())
    xla_text = st.plan_text()
    unmapped = [s for s in st.steps if s.before is None]
    problem = unmapped[0].problem if unmapped else None
    if problem is None:
        try:
            node = parse(xla_text)
            xla_plan, notes = program_plan(node, mesh, prog.sizes)
            xla_cost = costed(xla_plan, priced_on, prog.sizes, costs)
            incomplete = [n for n in notes if REPLANNED in n]
            if incomplete:  # its local op does not meet: a step of XLA's is missing from it (listed apart)
                problem = f"XLA's plan as read is incomplete: {incomplete[0]}"
        except ShardalgError as err:
            problem = f"XLA's plan is not a legal plan in the notation: {str(err).splitlines()[0]}"
    if problem is not None:
        return StatementVerdict(
            st,
            xla_text,
            None,
            None,
            str(best),
            best_bytes,
            best_cost.seconds,
            None,
            len(ours),
            problem,
            list(cut),
        )
    sig = _signature_of_steps(st.steps)
    rank = next((k + 1 for k, p in enumerate(ours) if _signature_of_steps(p.steps) == sig), None)
    return StatementVerdict(
        st,
        xla_text,
        _number(plan_bytes(xla_plan, mesh, Sizes(prog.sizes)).json()),
        xla_cost.seconds,
        str(best),
        best_bytes,
        best_cost.seconds,
        rank,
        len(ours),
        notes=[*cut, *notes],
    )


@dataclass(frozen=True)
class BackwardPair:
    """A backward collective and the forward one it is the transpose of (None: none is)."""

    op: str
    axes: tuple[str, ...]
    shard_bytes: int
    line: int | None
    forward: XlaStep | None


@dataclass
class BackwardVerdict:
    pairs: list[BackwardPair]
    derived: list[tuple[str, tuple[str, ...]]]
    derived_text: str
    problem: str = ""  # why shardalg derived no backward of the program ("" when it did)

    @property
    def all_paired(self) -> bool:
        return all(p.forward is not None for p in self.pairs)

    @property
    def matches_derived(self) -> bool:
        ours = Counter((op, frozenset(a)) for op, a in self.derived)
        xla = Counter((p.op, frozenset(p.axes)) for p in self.pairs)
        return ours == xla


def _shard_bytes(c: HloCollective) -> int:
    width = {"f32": 4, "bf16": 2, "f16": 2, "f64": 8}.get(c.dtype, 4)
    n_in, n_out = 1, 1
    for d in c.operand:
        n_in *= d
    for d in c.result:
        n_out *= d
    return min(n_in, n_out) * width


def judge_backward(prog: AuditProgram, rec: dict[str, Any]) -> BackwardVerdict:
    """Pair the backward collectives of ``rec["backward_hlo"]`` with the forward steps of ``prog``."""
    forward = [s for st in prog.statements for s in st.steps if s.before is not None]
    free = list(forward)
    pairs = []
    for c in collectives(rec["backward_hlo"]):
        if not c.backward:
            continue
        g = group_axes(c, rec["mesh"])
        axes = g.axes
        want = RECORDS[Op(c.kind)].transpose.op
        match = next(
            (
                f
                for f in free
                if want is not None
                and f.op == want.value
                and frozenset(f.axes) == frozenset(axes)
                and _shard_bytes(f.hlo) == _shard_bytes(c)
            ),
            None,
        )
        if match is not None:
            free.remove(match)
        pairs.append(BackwardPair(c.kind, axes, _shard_bytes(c), c.line, match))
    try:
        derived = derive_backward(parse(prog.text), Mesh(prog.mesh), prog.sizes)
    except ShardalgError as err:
        why = f"shardalg derives no backward of the program: {str(err).splitlines()[0]}"
        return BackwardVerdict(pairs, [], "", why)
    return BackwardVerdict(pairs, [(op, tuple(a)) for op, a in derived.collectives], str(derived))
