"""What a plan of the derived backward need not run: collectives whose output the backward holds already.

A gradient's plan is chosen alone (:mod:`.gradients`, :mod:`.fngrads`), from the cotangent as it stands; once
chosen, :func:`reuse` drops what an earlier plan of the backward made already (by the same step, or, within one
forward statement's gradients, by another route), so the backward runs each collective once.
"""

from __future__ import annotations

from dataclasses import replace

from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Op, Tensor

from .held import Held

__all__ = ["reuse"]


def reuse(
    p: Plan, made: set[Step], held: Held, ours: set[Tensor], keep: frozenset[Tensor] = frozenset()
) -> Plan:
    """Drop collectives whose output the backward holds already; their outputs become inputs of the plan.

    - A step an earlier gradient einsum already ran (the same op on the same value: a gathered ``dOut`` serves
      both gradients of a product). Only steps before a plan's einsum are shared: they read primals and
      complete cotangents, so equal tensors are equal values (a finishing step reads one contribution of a
      gradient that may be summed with others), until a step writes one of them again (a gradient added to, a
      function's plan having no einsum): what read or made it is then dropped from ``made``.
    - A collective before the einsum whose output, with no partial sums, is held (``held``: the backward so
      far, :mod:`.held`), made by another route by a gradient of the same forward statement (``ours``) or by
      this plan. The steps that only led to it are then dropped too, but those making a tensor of ``keep`` (a
      version of the cotangent the other gradient of the product reads). A layout another statement's
      gradient made is not read: the search prices each statement's backward alone
      (:mod:`shardalg.search.pieces`), and a candidate's step must equal the sum of its statements' prices.
    """
    kept, reused = [], []
    held, ours = held.copy(), set(ours)
    prep = True  # only steps before the einsum: they read inputs; those after it finish this contribution
    for s in p.steps:
        prep = prep and s.op is not Op.EINSUM
        if prep and s in made:
            reused.append(s.output)
            continue
        out = s.output
        # a layout this statement's gradients made by another route, and still held
        if (
            prep
            and not s.op.computes
            and not out.unreduced
            and out in ours
            and out in held.layouts(out.name or "")
        ):
            reused.append(out)
            continue
        kept.append(s)
        held.ran(s)
        ours.add(s.output)
        if prep:
            made.add(s)
        # a step that writes a tensor again (a gradient added to): a step that read it, or wrote it before,
        # no longer stands for its value (the second ``dV0 + dV1 -> dV0`` of ``V0 + V0`` is not the first)
        made.difference_update([m for m in made if s.output in m.inputs or (m.output == s.output and m != s)])
    if not reused:
        return p
    live = _live(kept, {p.output, *keep})
    made.difference_update(s for s in kept if s not in live)  # never run: no later plan may reuse them
    steps = tuple(s for s in kept if s in live)
    read = {t for s in steps for t in s.inputs} | {p.output, *keep}
    inputs = tuple(t for t in dict.fromkeys((*p.inputs, *reused)) if t in read)
    return replace(p, inputs=inputs, steps=steps)


def _live(steps: list[Step], outputs: set[Tensor]) -> set[Step]:
    """The steps ``outputs`` need: each collective whose output a later needed step reads or is one of them;
    an einsum or a function always (it computes a value)."""
    needed, live = set(outputs), set()
    for s in reversed(steps):
        if s.op.computes or s.output in needed:
            live.add(s)
            needed.update(s.inputs)
    return live
