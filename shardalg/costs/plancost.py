"""Whole plans: a plan's cost as a schedule of its steps, a program in the notation as a plan, and the
per-step seconds that rank plans on a chip.

    >>> from shardalg import Mesh
    >>> cost("AllGather_X(A[I_X, J])", Mesh(X=4), sizes="I=1024,J=512").total
    Max(2*T_min, 1048576/W_ici)

Each step's cost comes from :mod:`shardalg.costs.steps` (the communication models of :mod:`.stepcost`, an
einsum's compute and HBM traffic); :mod:`shardalg.costs.schedule` puts them on the mesh axes and the compute under an overlap
policy (``overlap="schedule"``, the default: dependencies respected; ``"steady"``: the book's layer-level
max(compute, max over axes); ``"serial"``: the sum). Costs are light terms (:mod:`shardalg.costs.terms`)
until a formula is asked for: ``seconds`` evaluates without sympy, ``total`` and the other formulas are
sympy expressions made on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import sympy
from sympy import Expr

from shardalg.algebra.context import context_for
from shardalg.algebra.mesh import Mesh, a_mesh, as_mesh
from shardalg.algebra.symbols import latex_names
from shardalg.algebra.traffic import moves_nothing
from shardalg.errors import UsageError
from shardalg.lazy import cached
from shardalg.notation.parse import parse
from shardalg.notation.plan import Plan, Step
from shardalg.notation.printing import text, unicode
from shardalg.notation.printing.display import html_table, pretty_text, seconds_text, short
from shardalg.notation.syntax import Node, Op, Tensor
from shardalg.planning import symbolic

from . import schedule as sched
from .commcost import NOTHING, CommCost
from .costmodel import CostModel
from .gantt import gantt, schedule_json
from .programplan import plan_of, program_plan
from .schedule import OverlapPolicy
from .stepcost import Options, _collective
from .steps import StepCost, fast_seconds, numeric, step_cost, step_weights
from .terms import ZERO, Point, Term, add, maximum, point
from .totals import TERMS, CostTotals

__all__ = [
    "PlanCost",
    "plan_cost",
    "joined",
    "priced",
    "plan_of",
    "cost",
    "costed",
    "step_seconds",
    "fast_seconds",
    "collective_cost",
]


class PlanCost(CostTotals):
    """A plan's cost: per-step breakdown and totals under an overlap policy.

    ``overlap`` is the policy (``schedule``, ``steady`` or ``serial``, see :mod:`shardalg.costs.schedule`):
    ``total`` is the plan's time under it and ``comms`` the same with compute taken as free (under
    ``steady``: the max over mesh axes of each axis's collectives; ``serial``: their sum). ``compute`` adds
    up the einsums, ``memory`` (HBM time) is reported separately. Each is a sympy expression made on first
    use; :meth:`light` gives the light term. ``values`` maps symbols to the chip's numbers; ``seconds`` is
    ``total`` then. ``notes`` say what was done that the input did not spell out (a statement priced by its
    cheapest plan). ``costs`` is the :class:`~shardalg.costs.costmodel.CostModel` it was priced under;
    ``overlap``, ``model``, ``exact`` and ``ring`` are its.
    """

    def __init__(
        self,
        steps: tuple[StepCost, ...],
        costs: CostModel,
        values: Mapping[sympy.Symbol, float],
        notes: tuple[str, ...] = (),
        *,
        at: Point | None = None,
        producers: tuple[tuple[int, ...], ...] | None = None,
    ):
        self.steps = steps
        self._producers = producers  # the plan's (Plan.producers); else worked out from the steps
        if at is not None:  # ``values`` already keyed for evaluating terms (an Options' point)
            self._point = at
        self.costs = costs
        self.overlap, self.model, self.exact, self.ring = costs.overlap, costs.model, costs.exact, costs.ring
        self.values = values
        self.notes = notes
        self._light: dict[str, Term] = {}

    def under(self, overlap: object) -> PlanCost:
        """The same steps under another overlap policy."""
        costs = self.costs.under(overlap)
        if costs is self.costs:
            return self
        return PlanCost(self.steps, costs, self.values, self.notes, at=self._point, producers=self._producers)

    @cached
    def _point(self):
        return point(self.values)

    @cached
    def _shape(self) -> tuple[tuple[tuple[str, ...], ...], tuple[tuple[int, ...], ...]]:
        deps = self._producers
        if deps is None:
            deps = sched.dependencies([s.step for s in self.steps])
        return tuple([s.lanes for s in self.steps]), deps

    def schedule_of(self, overlap: object = None, *, compute: bool = True) -> sched.Schedule:
        """The steps on their resources under ``overlap`` (default: this cost's policy); with
        ``compute=False`` the einsums take no time (the schedule of communication alone)."""
        lanes, deps = self._shape
        durations = [s.duration if compute or s.step.op is not Op.EINSUM else ZERO for s in self.steps]
        return sched.build(durations, lanes, deps, OverlapPolicy.of(overlap, self.overlap))

    @cached
    def schedule(self) -> sched.Schedule:
        return self.schedule_of()

    def light(self, name: str) -> Term:
        """``comms``, ``compute``, ``memory``, ``total`` or ``flops`` as a light term."""
        got = self._light.get(name)
        if got is not None:
            return got
        if name == "compute":
            got = add(*(s.compute for s in self.steps))
        elif name == "memory":
            got = add(*(s.memory for s in self.steps))
        elif name == "flops":
            got = add(*(s.flops for s in self.steps))
        elif name == "comms":
            if self.overlap is OverlapPolicy.SERIAL:
                got = add(*(s.comms for s in self.steps))
            else:
                got = sched.total([s.comms for s in self.steps], *self._shape, self.overlap)
        elif name == "total":
            if self.overlap is OverlapPolicy.STEADY:
                got = maximum(self.light("compute"), self.light("comms"))
            elif self.overlap is OverlapPolicy.SERIAL:
                got = add(self.light("compute"), self.light("comms"))
            else:
                got = sched.total([s.duration for s in self.steps], *self._shape, self.overlap)
        else:
            raise UsageError(f"a plan cost has {', '.join(TERMS)}, not {name!r}")
        self._light[name] = got
        return got

    @property
    def comms_serial(self) -> Expr:
        return add(*(s.comms for s in self.steps)).sympy()

    def evaluate(self, expr: object) -> float | None:
        """A term or sympy expression at the chip's numbers; None while a symbol is unbound."""
        if isinstance(expr, Term):
            got = expr.evaluate(self._point)
            return None if got is None else float(got)
        return numeric(expr, self.values)

    def latex(self) -> str:
        return sympy.latex(self.total, symbol_names=latex_names())

    def _repr_latex_(self) -> str:
        return f"${self.latex()}$"

    def __repr__(self) -> str:
        """``<PlanCost Max(...) = 46.6 µs; 2 steps, schedule, model ici>``: the total, its seconds on a chip,
        the overlap policy, one line."""
        at = f" = {seconds_text(self.seconds)}" if self.seconds is not None else ""
        return short(
            "PlanCost", f"{self.total}{at}; {len(self.steps)} steps, {self.overlap}, model {self.model}"
        )

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        pretty_text(self, p, cycle)

    def _repr_html_(self) -> str:
        """The cost breakdown as a table: each step's bytes, communication and compute time, then the totals
        (with seconds on a chip when every size is bound)."""

        def num(term: Term) -> str:
            v = self.evaluate(term)
            return str(term) if v is None else f"{term}  ({v:.3g})" if term.symbols() else f"{v:.3g}"

        rows = [[unicode(s.step.statement()), str(s.bytes), num(s.comms), num(s.compute)] for s in self.steps]
        rows.append([f"total ({self.overlap})", "", num(self.light("comms")), num(self.light("compute"))])
        at = seconds_text(self.seconds) if self.seconds is not None else "symbolic"
        caption = f"cost by step, model {self.model}: {self.total} = {at}"
        return html_table(["step", "bytes", "communication (s)", "compute (s)"], rows, caption, code=(0,))

    def __str__(self) -> str:
        """Each step with its comms and compute terms, then the total and (on a chip) the seconds."""
        lines = [f"note: {n}" for n in self.notes]
        lines += [
            f"{text(s.step.statement())}\n    comms {s.comms}   compute {s.compute}" for s in self.steps
        ]
        lines.append(
            f"overlap: {self.overlap}"
            + (", exact ring bytes" if self.exact else "")
            + (", one-way rings" if self.ring == "uni" else "")
        )
        lines.append(f"total: {self.total}")
        if self.seconds is not None:
            lines.append(f"seconds: {self.seconds:.6g}")
        return "\n".join(lines)

    def gantt(self, width: int = 32) -> str:
        """The schedule as text: a row per step (a row per axis under ``steady``), with its start and end
        and, when the numbers are known, a bar."""
        return gantt(self, width)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "model": self.model,
            "overlap": self.overlap.value,
            "exact": self.exact,
            "ring": self.ring,
            "formula": str(self.total),
            "latex": self.latex(),
            "seconds": self.seconds,
            "notes": list(self.notes),
        }
        for key in ("comms", "compute", "memory"):
            out[key] = {"formula": str(getattr(self, key)), "seconds": self.evaluate(self.light(key))}
        out["steps"] = [s.to_json(self.values) for s in self.steps]
        out["schedule"] = schedule_json(self)
        return out


def _priced(plan: Plan, opts: Options, costs: CostModel, notes: tuple[str, ...] = ()) -> PlanCost:
    steps = tuple([step_cost(s, opts) for s in plan.steps])
    return PlanCost(steps, costs, dict(opts.values), notes, at=opts.point, producers=plan.producers)


def joined(plan: Plan, parts: Sequence[PlanCost]) -> PlanCost:
    """The cost of ``plan``, whose steps are ``parts``' steps in order, each part priced already under one
    cost model, mesh and sizes: no step is priced again; the schedule is ``plan``'s (a step may wait for a
    step of an earlier part)."""
    if not parts:
        raise ValueError("a joined cost needs at least one part")
    first = parts[0]
    if any(p.costs != first.costs or p.values != first.values for p in parts[1:]):
        raise ValueError("the parts of a joined cost are priced under one cost model and one set of sizes")
    steps = tuple(s for p in parts for s in p.steps)
    if tuple(s.step for s in steps) != plan.steps:
        raise ValueError("the parts' steps must be the plan's, in order")
    notes = tuple(n for p in parts for n in p.notes)
    return PlanCost(steps, first.costs, first.values, notes, at=first._point, producers=plan.producers)


def plan_cost(
    plan: Plan, mesh, sizes=None, hw=None, model=None, overlap: object = None, **options
) -> PlanCost:
    """The cost of every step of ``plan`` and its totals.

    ``hw``: a Chip or preset name, whose numbers give ``seconds`` and whose wraparound rule and default model
    apply; ``model``: ``"ici"``, ``"alpha-beta"`` or ``"alpha-beta-rd"``; ``overlap``: ``"schedule"``
    (default), ``"steady"`` or ``"serial"`` (True and False are the old spellings of the last two);
    ``options``: ``latency``, ``symbolic_links``, ``dcn_axes``, ``hbm``, ``exact`` and ``ring``, as
    :class:`~shardalg.costs.costmodel.CostModel` has them (``hbm`` restricts HBM traffic to the named tensors,
    e.g. the weights, in the book's decode accounting). They are folded into one CostModel here.
    """
    return priced(plan, as_mesh(mesh), sizes, CostModel.of(hw, model, overlap, **options))


def priced(plan: Plan, mesh: Mesh, sizes, costs: CostModel) -> PlanCost:
    """The cost of ``plan`` on ``mesh`` (a :class:`Mesh`; :func:`plan_cost` reads text) with ``sizes`` under the cost model ``costs``."""
    return _priced(plan, Options.of(costs, a_mesh(mesh, "priced"), sizes), costs)


def cost(
    x: Plan | Node | str, mesh=None, sizes=None, hw=None, model=None, overlap: object = None, **options
) -> PlanCost:
    """The cost of a plan, a program, a statement or notation text (``"AllGather_X(bf16[B_X, D_Y])"``).
    The mesh and sizes may come from the program's ``mesh`` line and ``where`` clause. A product whose
    operands do not meet (or whose local product is not the result written) is priced by its cheapest plan
    from the planner, and ``notes`` says so. ``options`` are :class:`~shardalg.costs.costmodel.CostModel`'s."""
    return costed(x, mesh, sizes, CostModel.of(hw, model, overlap, **options))


def costed(x: Plan | Node | str, mesh, sizes, costs: CostModel) -> PlanCost:
    """:func:`cost` under the cost model ``costs``."""
    if isinstance(x, str):
        x = parse(x)
    if isinstance(x, Plan):
        return priced(x, mesh, sizes, costs)
    if not isinstance(x, Node):
        raise UsageError(f"cost takes a plan, a program or notation text, not {type(x).__name__}")
    ctx = context_for(x, mesh, sizes)
    if ctx.mesh is None:
        raise UsageError("a cost needs a mesh: pass mesh='X=4,Y=2' or write 'mesh X=4, Y=2'")
    opts = Options.of(costs, ctx.mesh, ctx.sizes)
    plan, notes = program_plan(x, ctx.mesh, ctx.sizes, _chooser(opts, costs.overlap))
    return _priced(plan, opts, costs, ctx.replaced + notes)  # what the caller's mesh and sizes replaced, said


def _chooser(opts: Options, policy: OverlapPolicy):
    """The cheapest of a statement's plans: by seconds on the chip when every size is bound, else the
    planner's first (by bytes communicated)."""
    seconds = fast_seconds(opts, policy) if opts.costs.chip is not None else None

    def choose(found: list[Plan]) -> tuple[Plan, str]:
        if seconds is not None:
            timed = [(seconds(p), n) for n, p in enumerate(found)]
            if all(t is not None for t, _ in timed):
                _, best = min(timed)  # type: ignore[type-var]
                return found[best], f"by seconds on {opts.costs.chip.name} under overlap {policy}"  # type: ignore[union-attr]
        return symbolic.first(found, "a statement to price"), "by bytes communicated"

    return choose


def step_seconds(mesh, sizes=None, hw=None, model=None, **options) -> Callable[[Step], float]:
    """A function giving one step's seconds on ``hw``: a collective's communication, a local einsum's compute
    (a slice is free). The edge weight of a cost-ranked redistribute search (a resharding is a chain: its
    steps add up under every policy), and the product's weight when the planner looks for the cheapest plan
    over every compute layout (a compute layout that shards more computes less). Memoized per step; a
    symbol left unbound is an error. ``options`` are :class:`~shardalg.costs.costmodel.CostModel`'s."""
    return step_weights(a_mesh(mesh, "step_seconds"), sizes, CostModel.of(hw, model, **options))


def collective_cost(
    op: Op,
    tensor: Tensor,
    axes: Iterable[str],
    mesh,
    sizes=None,
    hw=None,
    model=None,
    offset: int | None = None,
    **options,
) -> CommCost:
    """The cost of ``op`` over ``axes`` applied to ``tensor`` (its input) on ``mesh``; a Shift's ``offset``.
    ``hw``, ``model`` and ``options`` are :class:`~shardalg.costs.costmodel.CostModel`'s."""
    opts = Options.of(CostModel.of(hw, model, **options), a_mesh(mesh, "collective_cost"), sizes)
    if moves_nothing(op, tuple(axes), tensor.layout()[0], tensor.unreduced, opts.mesh, offset):
        return NOTHING  # a group of one device, a Permute that relabels an axis of size 1, a whole turn
    return _collective(op, tensor, tuple(axes), opts, offset)
