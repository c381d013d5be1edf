"""What a step may do, or the error that says why not: the local product's typing rule (``einsum_rule``,
the four cases read per device) and the error every op of :mod:`shardalg.numeric.movement` raises."""

from __future__ import annotations

import string

from shardalg.errors import IllegalSharding, ShapeMismatch, UsageError
from shardalg.notation.plan import Step
from shardalg.notation.printing import text
from shardalg.notation.syntax import Tensor

__all__ = ["Layout", "einsum_rule", "step_error"]

Layout = tuple[tuple[tuple[str, ...], ...], frozenset[str]]  # axes per dim, unreduced axes


def step_error(step: Step, why: str, rule: str = "collective-precondition") -> IllegalSharding:
    head = step.op.value + ("_{" + ",".join(step.axes) + "}" if step.axes else "")
    return IllegalSharding(f"{head}({', '.join(text(t) for t in step.inputs)}): {why}", rule=rule)


def einsum_rule(step: Step) -> tuple[str, Layout]:
    """The einsum subscripts and the output layout the case rules give, or the error that forbids it."""
    left, right = step.inputs
    letters: dict[str, str] = {}

    def sub(t: Tensor) -> str:
        if len(set(t.dim_names)) != len(t.dim_names):
            raise ShapeMismatch(f"{text(t)} names a dim twice")
        if len(letters | dict.fromkeys(t.dim_names)) > len(string.ascii_letters):
            raise UsageError(f"an einsum of more than {len(string.ascii_letters)} distinct dims")
        return "".join(letters.setdefault(n, string.ascii_letters[len(letters)]) for n in t.dim_names)

    spec = f"{sub(left)},{sub(right)}->"
    out_names = step.output.dim_names
    if any(n not in letters for n in out_names) or len(set(out_names)) != len(out_names):
        raise ShapeMismatch(
            f"the result {text(step.output)} has a dim that is not an operand's, or one twice"
        )
    spec += "".join(letters[n] for n in out_names)
    both = set(left.unreduced) & set(right.unreduced)
    if both:
        raise step_error(
            step,
            f"both operands are unreduced over {', '.join(sorted(both))}: reduce one first",
            rule="unreduced-product",
        )
    for t, other in ((left, right), (right, left)):
        clash = set(t.unreduced) & set(other.sharded_axes)
        if clash:
            raise step_error(
                step,
                f"{text(t)} is unreduced over {', '.join(sorted(clash))}, which shards "
                f"{text(other)}: reduce it first",
                rule="unreduced-product",
            )
    axes_l = {d.label: d.axes for d in left.dims}
    axes_r = {d.label: d.axes for d in right.dims}
    unred = set(left.unreduced) | set(right.unreduced)
    for name in letters:
        keep = name in out_names
        if name in axes_l and name in axes_r and axes_l[name] != axes_r[name]:
            if keep:
                raise step_error(
                    step, f"batch dim {name} is sharded differently in the operands", "batch-dim-mismatch"
                )
            raise step_error(
                step,
                f"contracted dim {name} is sharded over {''.join(axes_l[name]) or 'nothing'} on "
                f"the left and {''.join(axes_r[name]) or 'nothing'} on the right: not a local product; "
                "gather or slice one side first",
                rule="einsum-not-local",
            )
        if not keep:  # summed on each device: a sharded sum leaves partial sums
            unred |= set(axes_l.get(name, ()) or axes_r.get(name, ()))
    dims = tuple(axes_l[n] if n in axes_l else axes_r[n] for n in out_names)
    flat = [a for d in dims for a in d]
    if len(set(flat)) != len(flat):
        raise step_error(
            step,
            "two result dims would be sharded over one axis (case 4): gather one operand first",
            rule="case-4",
        )
    if set(flat) & unred:
        raise step_error(
            step,
            f"axis {', '.join(sorted(set(flat) & unred))} would both shard and be unreduced",
            rule="axis-used-twice",
        )
    return spec, (dims, frozenset(unred))
