"""The derived backward of a forward program as a result: each gradient einsum with its chosen plan, the
forward's gathered copies kept or freed, and the program printed as text, Unicode, LaTeX and JSON.

:func:`shardalg.planning.backward.backward` derives it; this module only holds and shows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.traffic import Bytes
from shardalg.errors import UsageError
from shardalg.notation.plan import Plan, Step
from shardalg.notation.printing import latex, text, to_json, unicode
from shardalg.notation.printing.display import pretty_text, short
from shardalg.notation.syntax import Arrow, Program, Tensor

from .forward import grad_name

__all__ = ["BackwardProgram", "GradStep", "GatheredCopy"]


@dataclass(frozen=True, repr=False)
class GradStep:
    """One gradient einsum of the backward: ``dC · B -> dA`` (``of`` = A), with the plan chosen for it."""

    of: str
    einsum: int
    side: str  # "left" or "right": which operand of the forward einsum
    statement: Arrow
    plan: Plan
    accumulate: bool
    reason: str
    reads: tuple[
        Tensor, ...
    ] = ()  # the forward's values it reads (a product's other operand, a function's X)

    def __repr__(self) -> str:
        return short("GradStep", f"d{self.of}: {unicode(self.statement)}")


@dataclass(frozen=True)
class GatheredCopy:
    """A copy an AllGather made in the forward and a gradient einsum reads: ``kept`` when the backward
    reads it (``keep_gathered``), else the backward starts from ``source`` and the copy is freed."""

    tensor: Tensor
    source: Tensor
    bytes_per_device: Bytes
    kept: bool


@dataclass(frozen=True)
class BackwardProgram:
    """The derived backward of a forward program: the planned gradient einsums in order.

    ``seeds`` are the cotangents of the forward's outputs; ``gradients`` maps each global value to its
    final gradient tensor; ``steps`` and ``collectives`` list what the backward runs, in order.
    """

    forward: Program
    mesh: Mesh
    sizes: tuple[tuple[str, int], ...]
    seeds: tuple[Tensor, ...]
    grads: tuple[GradStep, ...]
    gradients: tuple[tuple[str, Tensor], ...]
    forward_plans: tuple[Plan, ...]
    defer_reductions: bool = False
    keep_gathered: bool = False
    gathered: tuple[GatheredCopy, ...] = ()
    note: str = ""  # which forward plan's backward this is, when the forward is planned whole (a core's ring)
    runs_first: tuple[
        Plan, ...
    ] = ()  # forward plans an export runs first: the backward reads their statistics
    inputs: tuple[str, ...] = ()  # the forward's inputs (the values it reads and does not make), in order

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(s for g in self.grads for s in g.plan.steps)

    @property
    def collectives(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The communicating steps in order, as (op name, axes): ``(("AllReduce", ("X",)),)``."""
        return tuple((s.op.value, s.axes) for s in self.steps if s.communicates)

    @property
    def forward_collectives(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The same for the forward: every statement planned by the planner as written (collective
        statements, reshardings and the collectives a product's plan runs), in program order."""
        return tuple((s.op.value, s.axes) for p in self.forward_plans for s in p.steps if s.communicates)

    @property
    def kept_bytes(self) -> Bytes:
        """Bytes per device of the forward's gathered copies the backward keeps (0 unless keep_gathered)."""
        total = Bytes()
        for c in self.gathered:
            if c.kept:
                total = total + c.bytes_per_device
        return total

    def memory_lines(self) -> list[str]:
        """What keeping or freeing the forward's gathered copies means, one line a copy (no comment mark)."""
        lines = []
        for c in self.gathered:
            if c.kept:
                lines.append(
                    f"kept from the forward: {text(c.tensor)}, {c.bytes_per_device} bytes per device"
                )
            else:
                lines.append(
                    f"not kept: the forward's gathered copy {text(c.tensor)} is freed and the backward reads "
                    f"{text(c.source)} (keep_gathered keeps it: {c.bytes_per_device} bytes per device)"
                )
        if any(c.kept for c in self.gathered):
            lines.append(f"kept copies in all: {self.kept_bytes} bytes per device")
        return lines

    def passed_on(self) -> list[str]:
        """The gradients that are another value's cotangent, passed on unchanged (a ``+``'s operands), one line
        each (no comment mark)."""
        return [
            f"d{r} is {text(t)}: the cotangent passed on unchanged"
            for r, t in self.gradients
            if t.name != grad_name(r)
        ]

    def _with_memory(self, body: str, mark: str) -> str:
        lines = [*self.passed_on(), *self.memory_lines()]
        head = [f"{mark} {self.note}"] if self.note else []
        return "\n".join([*head, *([body] if body else []), *(f"{mark} {line}" for line in lines)])

    @property
    def input_gradients(self) -> tuple[tuple[str, Tensor], ...]:
        """Each of the forward's inputs that has a gradient, with it, in the inputs' order: what a caller of
        the backward wants back (an input's gradient may be a cotangent passed on unchanged, which later
        statements also read)."""
        have = dict(self.gradients)
        return tuple((r, have[r]) for r in self.inputs if r in have)

    def gradient(self, name: str) -> Tensor:
        for n, t in self.gradients:
            if n == name:
                return t
        raise UsageError(
            f"no gradient of {name}; the program's values are {', '.join(n for n, _ in self.gradients)}"
        )

    def plan(self) -> Plan:
        """The whole backward as one straight-line plan (for printing and the executor)."""
        inputs: dict[Tensor, None] = dict.fromkeys(self.seeds)
        made: set[Tensor] = set()
        for s in self.steps:
            for t in s.inputs:
                if t not in made:
                    inputs.setdefault(t)
            made.add(s.output)
        last = self.grads[-1].plan.output if self.grads else self.seeds[-1]
        return Plan(tuple(inputs), self.steps, last, note="backward")

    def program(self) -> Program:
        """The backward in the notation: the statements of the chosen plans."""
        return Program(tuple(s.statement() for s in self.steps), self.forward.mesh, self.sizes)

    def __str__(self) -> str:
        return self._with_memory(text(self.plan()), "#")

    def unicode(self) -> str:
        return self._with_memory(unicode(self.plan()), "#")

    def latex(self) -> str:
        out = self._with_memory(latex(self.plan()), "%")
        return (
            out + "\n" if self.memory_lines() or self.passed_on() else out
        )  # a comment ends its line, or it hides what follows ($$)

    def _repr_latex_(self) -> str:
        return f"$${self.latex()}$$"

    def __repr__(self) -> str:
        moves = ", ".join(f"{op}_{''.join(axes)}" for op, axes in self.collectives) or "no collectives"
        forward = "; ".join(unicode(s) for s in self.forward.statements)
        return short("BackwardProgram", f"{len(self.steps)} steps, {moves}; of {forward}")

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        pretty_text(self, p, cycle)

    def to_json(self) -> dict[str, Any]:
        note = {"note": self.note} if self.note else {}  # a core's backward: which forward plan it transposes
        return {
            "kind": "backward",
            **note,
            "defer_reductions": self.defer_reductions,
            "keep_gathered": self.keep_gathered,
            "gathered_copies": [
                {
                    "tensor": text(c.tensor),
                    "source": text(c.source),
                    "kept": c.kept,
                    "bytes_per_device": c.bytes_per_device.json(),
                }
                for c in self.gathered
            ],
            "kept_bytes_per_device": self.kept_bytes.json(),
            "seeds": [text(t) for t in self.seeds],
            "gradients": {n: text(t) for n, t in self.gradients},
            "collectives": [{"op": op, "axes": list(axes)} for op, axes in self.collectives],
            "forward_collectives": [{"op": op, "axes": list(axes)} for op, axes in self.forward_collectives],
            "grads": [
                {
                    "of": g.of,
                    "einsum": g.einsum,
                    "statement": text(g.statement),
                    "accumulate": g.accumulate,
                    "reads": [text(t) for t in g.reads],
                    "reason": g.reason,
                    "steps": [to_json(s) for s in g.plan.steps],
                }
                for g in self.grads
            ],
        }
