"""The caller's source spans on a planner's answer, put there in one place.

The planner's memos (:mod:`shardalg.cache`) are keyed by value, and a span takes no part in ``==``: an answer,
or a piece of one, made for an equal statement written elsewhere (another text, extra spaces, or built in
code) holds tensors that carry that statement's positions. :func:`respanned` points every located tensor of
the plans into the statement the caller wrote, whatever made it: a tensor equal to one the caller wrote takes
its spans (its own and its dims'); another tensor with a span, named as one of the statement's tensors,
takes that tensor's span (any other tensor none), and each dim with a span the span of the dim with the same
label in the statement's tensor of that name, else in the first of the statement's tensors that has one
(else none); what has no span keeps none (a tensor the planner made, not read from
the text). A warm answer then points where a fresh one does. Values passed on by identity stay so (one new
tensor for each). The planner's :func:`~.planner.plans` and :func:`~.redistribute.redistribute` (which
``check_program``, the search and the functions' planner call directly) run it on what they hand back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from shardalg.errors import Span
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Dim, Node, Tensor

__all__ = ["respanned", "written_tensors"]


def written_tensors(*nodes: object) -> tuple[Tensor, ...]:
    """The tensors written in ``nodes`` (statements, expressions, tensors; None skipped), in order."""
    out: list[Tensor] = []

    def walk(x: object) -> None:
        if isinstance(x, Tensor):
            out.append(x)
        elif isinstance(x, Node):
            for a in x.args:
                walk(a)
        elif isinstance(x, tuple):
            for a in x:
                walk(a)

    for n in nodes:
        walk(n)
    return tuple(out)


class _Spans:
    """Where the caller wrote each tensor and dim, and the answer's tensors re-made to point there."""

    def __init__(self, written: Iterable[Tensor]):
        self.tensor: dict[str | None, Span | None] = {}
        self.dim: dict[tuple[str | None, str], Span | None] = {}
        self.label: dict[str, Span | None] = {}
        self.exact: dict[Tensor, Tensor] = {}
        for t in written:
            self.exact.setdefault(t, t)
            self.tensor.setdefault(t.name, t.span)
            for d in t.dims:
                self.dim.setdefault((t.name, d.label), d.span)
                self.label.setdefault(d.label, d.span)
        self.made: dict[int, Tensor] = {}

    def of_dim(self, name: str | None, d: Dim, written: Dim | None = None) -> Dim:
        if d.span is None:
            return d
        if written is not None:
            span = written.span
        else:
            key = (name, d.label)
            span = self.dim[key] if key in self.dim else self.label.get(d.label)
        return d if d.span is span else Dim(d.name, d.axes, d.size, span=span)

    def of(self, t: Tensor) -> Tensor:
        got = self.made.get(id(t))
        if got is not None:
            return got
        same = self.exact.get(t)  # one of the written tensors (==): its own spans
        if same is not None:
            dims = tuple([self.of_dim(t.name, d, w) for d, w in zip(t.dims, same.dims, strict=True)])
            span = None if t.span is None else same.span
        else:
            dims = tuple([self.of_dim(t.name, d) for d in t.dims])
            span = None if t.span is None else self.tensor.get(t.name)
        if span is t.span and all(a is b for a, b in zip(dims, t.dims, strict=True)):
            got = t
        else:
            got = Tensor(t.name, dims, t.unreduced, t.invariant, t.dtype, span=span)
        self.made[id(t)] = got
        return got

    def step(self, s: Step) -> Step:
        inputs = tuple([self.of(t) for t in s.inputs])
        output = self.of(s.output)
        if output is s.output and all(a is b for a, b in zip(inputs, s.inputs, strict=True)):
            return s
        return replace(s, inputs=inputs, output=output)  # every other field (flags, offset, ...) kept

    def plan(self, p: Plan) -> Plan:
        inputs = tuple([self.of(t) for t in p.inputs])
        steps = tuple([self.step(s) for s in p.steps])
        output = self.of(p.output)
        same = output is p.output and all(a is b for a, b in zip(inputs, p.inputs, strict=True))
        if same and all(a is b for a, b in zip(steps, p.steps, strict=True)):
            return p
        return Plan(inputs, steps, output, p.cases, note=p.note)


def respanned(plans: Sequence[Plan], written: Iterable[Tensor]) -> list[Plan]:
    """``plans`` with the spans of the ``written`` tensors (the caller's statement's, see the module's
    docstring); a plan whose tensors point there already is handed back as it is."""
    spans = _Spans(written)
    return [spans.plan(p) for p in plans]
