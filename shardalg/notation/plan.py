"""Plans: straight-line sequences of rule applications, each with the tensors it reads and writes.

A Step is one rule applied: a collective (or slice or permute) to one tensor, a local einsum of two, or a
function of the notation (elementwise, a reduction, softmax or a norm) to its operands.
Tensors are referred to by value (name, dims with their sharding, unreduced and invariant sets, dtype), so
a step's inputs are exactly the values some earlier step (or the plan's inputs) produced.

The planner (:mod:`shardalg.planning.planner`) makes plans; the executor runs them on numbers; the cost model
prices them; the printers print them (a plan prints as a program in the notation, reasons as comments).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from shardalg.cache import Kind, memoized
from shardalg.lazy import cached, hashed_once

from . import printing
from .op import ROUTES
from .printing import display
from .syntax import Apply, Arrow, Collective, Op, Product, Statement, Tensor

__all__ = ["Step", "Plan", "Plans", "chained_plan", "producers_of"]


@hashed_once  # the memos of a step's cost, spare axes and reasons each hash it
@dataclass(frozen=True, repr=False)
class Step:
    """One rule application. ``inputs`` has one tensor for a collective and two for an einsum.

    For an einsum, ``contract`` lists the contracted dims and ``local`` is True when the product is taken
    on local shards with the sum left unreduced (``·_LOCAL``); a Shift's ``offset`` is its signed step. ``reason`` is one line that names the rule
    or the case ("case 3: both operands shard J over X, so the local product is C{U_X}").
    """

    op: Op
    inputs: tuple[Tensor, ...]
    output: Tensor
    axes: tuple[str, ...] = ()
    dim: str | None = None
    contract: tuple[str, ...] = ()
    local: bool = False
    reason: str = field(default="", compare=False)
    offset: int | None = None  # a Shift's signed step (device x sends to x + offset); None for other ops
    factor: Fraction | None = None  # a scale's factor; None for other ops
    flags: tuple[str, ...] = ()  # a softmax's or a block of attention's (``causal``, ``flash``)

    def __post_init__(self) -> None:
        if (self.offset is not None) != self.op.takes_offset:
            raise ValueError("a Shift step has an offset and no other step has one")
        if (self.factor is not None) != (self.op is Op.SCALE or self.op in ROUTES):
            raise ValueError("a scale step has a factor, a routing its capacity factor, no other step one")

    @property
    def to(self) -> str | None:
        """A rename's new name for its dim (its one flag; None for other steps)."""
        return self.flags[0] if self.op is Op.RENAME else None

    @cached
    def signature(self) -> tuple[Any, ...]:
        """The step as plain values, cheap to hash: op, axes, dim and the layouts it reads and writes (equal
        within one einsum's plans only when the steps are equal: names, dims and dtypes are fixed there)."""
        return (
            self.op,
            self.axes,
            self.dim,
            tuple([t.layout() for t in self.inputs]),
            self.output.layout(),
            self.flags,
        )

    @property
    def communicates(self) -> bool:
        """Whether the step moves data: a collective's op does; a function's step does when it names axes (a
        reduction or norm over a sharded dim whose statistics are all-reduced over them)."""
        return self.op.communicates or (self.op.function and bool(self.axes))

    def statement(self) -> Statement:
        """The step in the notation: ``AllGather_X(A[I_X, J]) -> A[I, J]`` or ``A · B -> C``."""
        if self.op is Op.EINSUM:
            left, right = self.inputs
            return Arrow(Product(left, right, self.contract or None, self.local), self.output)
        if self.op.function:
            return Arrow(
                Apply(self.op, self.inputs, self.dim, self.factor, self.flags, self.offset), self.output
            )
        (arg,) = self.inputs
        return Arrow(Collective(self.op, self.axes, arg, self.dim, self.offset), self.output)

    def __repr__(self) -> str:
        """``<Step AllGather_X(A[I_X, J]) → A[I, J]>``."""
        return display.short("Step", printing.unicode(self.statement()))

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        display.pretty_text(self, p, cycle)


@dataclass(frozen=True, repr=False)
class Plan:
    """A way to compute ``output`` from ``inputs``: the steps in order.

    ``cases`` holds one line per dim classification of the einsum being planned (empty for a pure
    redistribution); ``note`` says what distinguishes this plan from its siblings.
    """

    inputs: tuple[Tensor, ...]
    steps: tuple[Step, ...]
    output: Tensor
    cases: tuple[str, ...] = ()
    note: str = field(default="", compare=False)

    @property
    def collectives(self) -> tuple[Step, ...]:
        """The steps that move data or name mesh axes: collectives, and functions whose statistics are
        all-reduced over a sharded dim."""
        return tuple(s for s in self.steps if s.op is not Op.EINSUM and (not s.op.function or s.axes))

    @cached
    def located(self) -> bool:
        """Whether a tensor of the plan, or a dim of one, points into a source text (has a span); worked out
        once (:func:`shardalg.planning.respan.respanned` hands a plan that points nowhere to a caller that wrote
        nowhere as it is)."""
        return any(t.located for t in (*self.inputs, self.output)) or any(
            t.located for s in self.steps for t in (*s.inputs, s.output)
        )

    @cached
    def producers(self) -> tuple[tuple[int, ...], ...]:
        """For each step, the earlier steps whose outputs it reads (see :func:`producers_of`); made once."""
        return producers_of(self.steps, self.inputs)

    @property
    def signature(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The ops and their axes in order, e.g. ``(("AllGather", ("X",)), ("Einsum", ()))``."""
        return tuple((s.op.value, s.axes) for s in self.steps)

    def __str__(self) -> str:
        """The plan as a program in the notation, one step a line, each with its reason as a comment."""
        return printing.text(self)

    def latex(self) -> str:
        """The plan as an aligned LaTeX block."""
        return printing.latex(self)

    def _repr_latex_(self) -> str:
        return f"$${self.latex()}$$"

    def problem(self) -> str:
        """What the plan computes, in the notation: ``A[I_X, J] · B[J, K] → C[I_X, K]`` (or ``A → A'``)."""
        source = " · ".join(printing.unicode(t) for t in self.inputs)
        return f"{source} → {printing.unicode(self.output)}"

    def __repr__(self) -> str:
        """``<Plan AllGather_X(B); A[I_X, J] · B[J, K] → C[I_X, K]>``: what distinguishes it, and what it computes."""
        what = self.note or ("no communication" if not self.collectives else "")
        return display.short("Plan", f"{what}; {self.problem()}" if what else self.problem())

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        """IPython: the one-line repr, then the steps, one a line."""
        if cycle:
            p.text("<Plan ...>")
            return
        p.text(repr(self))
        for s in self.steps:
            p.break_()
            p.text("    " + printing.unicode(s.statement()))


def chained_plan(
    inputs: tuple[Tensor, Tensor],
    left: tuple[Step, ...],
    right: tuple[Step, ...],
    product: Step,
    finish: tuple[Step, ...],
    cases: tuple[str, ...] = (),
    note: str = "",
) -> Plan:
    """The plan ``left + right + (product,) + finish``: a chain of steps from each input (each step reading the
    one before it, the first reading the input itself), the product of the two chains' ends, then a chain from
    the product. Its producers follow from the three lengths (the planner's plans are all of this form), so
    they are not worked out step by step; a test checks them against :func:`producers_of`."""
    steps = left + right + (product,) + finish
    plan = Plan(inputs, steps, steps[-1].output, cases, note=note)
    plan.__dict__["producers"] = _chained(len(left), len(right), len(finish))  # as `cached` keeps it
    return plan


@memoized(Kind.PIECE)
def _chained(left: int, right: int, finish: int) -> tuple[tuple[int, ...], ...]:
    def chain(start: int, n: int) -> list[tuple[int, ...]]:
        return [(start + i - 1,) if i else () for i in range(n)]

    ends = tuple([end for n, end in ((left, left - 1), (right, left + right - 1)) if n])
    after = left + right  # the product's index
    return tuple([*chain(0, left), *chain(left, right), ends, *[(after + i,) for i in range(finish)]])


def producers_of(steps: Iterable[Step], given: Iterable[object] = ()) -> tuple[tuple[int, ...], ...]:
    """For each step, the earlier steps that produced its inputs (the latest producer of each value), in
    order. A value passed on as the same object is found by identity (the planner's plans pass values on so);
    a tensor of ``given`` (a plan's inputs: there from the start) that no step made, read as that very object,
    waits for nothing; any other input waits for the latest step that made an equal value (a program writes
    a value again)."""
    start = {id(t) for t in given}
    outputs: list[object] = []
    latest: dict[int, int] = {}  # id of an output -> the last step that made that object (kept in outputs)
    out = []
    for s in steps:
        found: list[int] = []
        for t in s.inputs:
            hit = latest.get(id(t), -1)
            if hit < 0 and id(t) not in start:
                for j in range(len(outputs) - 1, -1, -1):
                    if outputs[j] == t:
                        hit = j
                        break
            if hit >= 0 and hit not in found:
                found.append(hit)
        out.append(tuple(sorted(found)))
        latest[id(s.output)] = len(outputs)
        outputs.append(s.output)
    return tuple(out)


class Plans(list):
    """A ranked list of plans (cheapest first): a list, that shows itself as a table in a notebook.

    ``columns`` maps a column title to a function of a plan (bytes communicated, seconds on a chip), given
    by whoever ranked the plans and evaluated only when the table is drawn.
    """

    def __init__(
        self, plans: Iterable[Plan] = (), columns: Mapping[str, Callable[[Plan], object]] | None = None
    ):
        super().__init__(plans)
        self.columns: dict[str, Callable[[Plan], object]] = dict(columns or {})

    # repr shows this many plans and counts the rest, so a long list stays within a screen
    SHOWN = 10

    def __repr__(self) -> str:
        if not self:
            return "[]"
        shown = [repr(p) for p in self[: self.SHOWN]]
        if len(self) > self.SHOWN:
            shown.append(f"... and {len(self) - self.SHOWN} more (all {len(self)} in the list)")
        return "[" + ",\n ".join(shown) + "]"

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        p.text(repr(self) if not cycle else "[...]")

    def _repr_html_(self) -> str:
        headers = ["#", "collectives", *self.columns, "steps"]
        rows = []
        for n, plan in enumerate(self, 1):
            what = plan.note or ("no communication" if not plan.collectives else "")
            steps = "; ".join(printing.unicode(s.statement()) for s in plan.steps)
            rows.append([n, what, *(f(plan) for f in self.columns.values()), steps])
        caption = f"{len(self)} plans for {self[0].problem()}, cheapest first" if self else "no plans"
        return display.html_table(headers, rows, caption, code=(1, len(headers) - 1))
