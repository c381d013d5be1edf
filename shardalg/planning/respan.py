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
from operator import is_

from shardalg.errors import Span
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Arrow, Dim, Node, Product, Tensor

__all__ = ["respanned", "written_tensors"]


def written_tensors(*nodes: object) -> tuple[Tensor, ...]:
    """The tensors written in ``nodes`` (statements, expressions, tensors; None skipped), in order."""
    out: list[Tensor] = []

    def walk(x: object) -> None:
        if isinstance(x, Tensor):
            out.append(x)
        elif isinstance(x, Arrow):  # a statement and a product, as their args would give them, read directly
            walk(x.expr)
            walk(x.result)
        elif isinstance(x, Product):
            walk(x.left)
            walk(x.right)
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
        if same is t:  # that very tensor: it points where it was written
            self.made[id(t)] = t
            return t
        if same is not None:
            dims = tuple([self.of_dim(t.name, d, w) for d, w in zip(t.dims, same.dims, strict=True)])
            span = None if t.span is None else same.span
        else:  # of_dim's answer for each dim, read here: most dims keep their span, or have none
            by_dim, by_label, name, out = self.dim, self.label, t.name, []
            for d in t.dims:
                if d.span is not None:
                    label = d.label
                    key = (name, label)
                    span = by_dim[key] if key in by_dim else by_label.get(label)
                    if d.span is not span:
                        d = Dim(d.name, d.axes, d.size, span=span)
                out.append(d)
            dims = tuple(out)
            span = None if t.span is None else self.tensor.get(t.name)
        if span is t.span and all(map(is_, dims, t.dims)):
            got = t
        else:
            got = Tensor(t.name, dims, t.unreduced, t.invariant, t.dtype, span=span)
        self.made[id(t)] = got
        return got

    def step(self, s: Step) -> Step:
        inputs = tuple([self.of(t) for t in s.inputs])
        output = self.of(s.output)
        if output is s.output and all(map(is_, inputs, s.inputs)):
            return s
        return replace(s, inputs=inputs, output=output)  # every other field (flags, offset, ...) kept

    def plan(self, p: Plan) -> Plan:
        inputs = tuple([self.of(t) for t in p.inputs])
        steps = tuple([self.step(s) for s in p.steps])
        output = self.of(p.output)
        same = output is p.output and all(map(is_, inputs, p.inputs))
        if same and all(map(is_, steps, p.steps)):
            return p
        return Plan(inputs, steps, output, p.cases, note=p.note)


def respanned(plans: Sequence[Plan], written: Iterable[Tensor]) -> list[Plan]:
    """``plans`` with the spans of the ``written`` tensors (the caller's statement's, see the module's
    docstring); a plan whose tensors point there already is handed back as it is.

    The plans of one answer share their tensors (each operand's layouts, the product, the result): each
    distinct tensor is looked at once, and when every one points where it should (a query answered from the
    pieces of the statement the caller wrote) the plans are handed back without a walk over their steps. When
    neither the caller's tensors nor the plans point anywhere (a search's span-free statements, answered from
    the memos again and again), nothing is looked at: each plan knows whether it points anywhere
    (:attr:`~shardalg.notation.plan.Plan.located`, worked out once)."""
    written = tuple(written)
    if not any(t.located for t in written):
        if not any(p.located for p in plans):
            return list(plans)
    spans = _Spans(written)
    tensors = {id(t): t for p in plans for s in p.steps for t in (*s.inputs, s.output)}
    tensors.update((id(t), t) for p in plans for t in (*p.inputs, p.output))
    of = spans.of
    if all([of(t) is t for t in tensors.values()]):
        return list(plans)
    return [spans.plan(p) for p in plans]
