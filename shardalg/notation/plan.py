"""Plans: straight-line sequences of rule applications, each with the tensors it reads and writes.

A Step is one rule applied: a collective (or slice or permute) to one tensor, or a local einsum of two.
Tensors are referred to by value (name, dims with their sharding, unreduced and invariant sets, dtype), so
a step's inputs are exactly the values some earlier step (or the plan's inputs) produced.

The planner (:mod:`shardalg.planning.planner`) makes plans; the executor runs them on numbers; the cost model
prices them; the printers print them (a plan prints as a program in the notation, reasons as comments).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .syntax import Arrow, Collective, Op, Product, Statement, Tensor

__all__ = ["Step", "Plan"]


@dataclass(frozen=True)
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

    def __post_init__(self) -> None:
        if (self.offset is not None) != self.op.takes_offset:
            raise ValueError("a Shift step has an offset and no other step has one")

    @property
    def communicates(self) -> bool:
        return self.op not in (Op.EINSUM, Op.SLICE)

    def statement(self) -> Statement:
        """The step in the notation: ``AllGather_X(A[I_X, J]) -> A[I, J]`` or ``A · B -> C``."""
        if self.op is Op.EINSUM:
            left, right = self.inputs
            return Arrow(Product(left, right, self.contract or None, self.local), self.output)
        (arg,) = self.inputs
        return Arrow(Collective(self.op, self.axes, arg, self.dim, self.offset), self.output)


@dataclass(frozen=True)
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
        return tuple(s for s in self.steps if s.op is not Op.EINSUM)

    @property
    def signature(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The ops and their axes in order, e.g. ``(("AllGather", ("X",)), ("Einsum", ()))``."""
        return tuple((s.op.value, s.axes) for s in self.steps)

    def __str__(self) -> str:
        """The plan as a program in the notation, one step a line, each with its reason as a comment."""
        from shardalg.notation.printing import text

        return text(self)

    def latex(self) -> str:
        """The plan as an aligned LaTeX block."""
        from shardalg.notation.printing import latex

        return latex(self)

    def _repr_latex_(self) -> str:
        return f"$${self.latex()}$$"
