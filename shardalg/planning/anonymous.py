"""Tensors under stand-in names, and what was planned for them renamed back.

The planner does not read the tensors' names: the plans of a statement renamed are its plans renamed, in the
same order, their reasons naming the new names where they named the old (``tests/planning/test_names.py``).
So a query may be planned under stand-ins (``⟨0⟩``, ``⟨1⟩``, ... in the order the names are first met) and
its answer renamed back: two queries that differ only by their names then meet in the planner's memo as one.
:func:`.planner.plan` plans a product so (Q's, K's and V's projections of one input, sharded alike, as every
candidate of a strategy search shards them), and :func:`.gradients.choose` a product's two gradients.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Tensor

__all__ = ["Renaming"]

OPEN, CLOSE = "⟨", "⟩"  # the stand-ins' brackets, which no name the notation parses holds


class Renaming:
    """Stand-ins for the names of ``tensors`` (``to``), and back (``tensor``, ``step``, ``plan``: every name
    and every text of a plan: its steps' reasons, its cases and its note). ``usable`` is False when a tensor
    has no name or a name holds a stand-in's bracket: those are planned as written."""

    def __init__(self, tensors: Iterable[Tensor]):
        names: dict[str, str] = {}
        self.usable = True
        for t in tensors:
            if t.name is None or OPEN in t.name:
                self.usable = False
            else:
                names.setdefault(t.name, f"{OPEN}{len(names)}{CLOSE}")
        self.names = names
        self.back = {v: k for k, v in names.items()}
        self._back: dict[int, Tensor] = {}  # each tensor renamed back once (the plans share tensors)

    def to(self, t: Tensor) -> Tensor:
        """``t`` under its stand-in (as it is when its name has none)."""
        name = self.names.get(t.name) if t.name is not None else None
        return t if name is None else t.replace(name=name)  # type: ignore[return-value]

    def to_step(self, s: Step) -> Step:
        """A step of tensors under their stand-ins (as it is when none of them has one)."""
        if not any(t.name in self.names for t in (*s.inputs, s.output)):
            return s
        return replace(s, inputs=tuple([self.to(t) for t in s.inputs]), output=self.to(s.output))

    def text(self, s: str) -> str:
        """A text with its stand-ins renamed back."""
        if OPEN not in s:
            return s
        for stand_in, name in self.back.items():
            s = s.replace(stand_in, name)
        return s

    def tensor(self, t: Tensor) -> Tensor:
        """``t`` renamed back."""
        got = self._back.get(id(t))
        if got is None:
            name = self.back.get(t.name) if t.name is not None else None
            got = t if name is None else t.replace(name=name)  # type: ignore[assignment]
            self._back[id(t)] = got  # type: ignore[assignment]
        return got  # type: ignore[return-value]

    def step(self, s: Step) -> Step:
        """``s`` renamed back, its reason too."""
        inputs = tuple([self.tensor(t) for t in s.inputs])
        return replace(s, inputs=inputs, output=self.tensor(s.output), reason=self.text(s.reason))

    def plan(self, p: Plan) -> Plan:
        """``p`` renamed back: its tensors, its steps' reasons, its cases and its note."""
        return Plan(
            tuple([self.tensor(t) for t in p.inputs]),
            tuple([self.step(s) for s in p.steps]),
            self.tensor(p.output),
            tuple([self.text(c) for c in p.cases]),
            note=self.text(p.note),
        )
