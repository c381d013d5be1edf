"""Where each mesh axis may sit in each operand before a local einsum, and why (the planner's choices).

For ``left · right -> out`` and one mesh axis, an operand may keep the axis where it is, or:

- gather it (a sharded axis), when keeping it blocks the product or the requested result (case 2, case 4,
  a mismatched contraction, a batch dim sharded on one side only, a result dim the result does not shard);
- sum it first (an unreduced axis), when the other operand uses the axis or the result is not unreduced
  over it;
- move, reduce-scatter or slice it onto a dim: where the other operand shards a shared dim over it (to
  match), where the requested result shards a kept dim over it, or onto a contracted dim when the result
  is requested unreduced over the axis (both operands then shard that dim over it, and the local product
  is the partial sums: case 3).

:func:`pair_is_local` then says, per axis, whether a pair of placements can be multiplied locally (an exact
test of the einsum rules that concern one axis), so the planner only combines pairs that can.
"""

from __future__ import annotations

from typing import NamedTuple

from shardalg.algebra.einsum import Role, Spec
from shardalg.algebra.layout import subscript
from shardalg.notation.syntax import Tensor

__all__ = ["Place", "R", "U", "Option", "AxisChoices", "place_of", "pair_is_local"]

# an axis's placement in an operand: ("S", dim label) / ("U", "") / ("R", "")
Place = tuple[str, str]
R: Place = ("R", "")
U: Place = ("U", "")


def place_of(t: Tensor, axis: str) -> Place:
    for d in t.dims:
        if axis in d.axes:
            return ("S", d.label)
    return U if axis in t.unreduced else R


class Option(NamedTuple):
    """One operand's new placement of one axis, and why ("" when the axis stays where it is)."""

    place: Place
    reason: str


def pair_is_local(spec: Spec, left: Place, right: Place) -> bool:
    """Whether an axis placed ``left`` in the left operand and ``right`` in the right one allows a local
    product: not unreduced on one side and used on the other, a shared dim sharded over it on both sides or
    neither, and not on a free dim of each (case 4)."""
    if left == U or right == U:
        return (left == U and right == R) or (right == U and left == R)
    ls = left[1] if left[0] == "S" else None
    rs = right[1] if right[0] == "S" else None
    shared = spec.contracted + spec.batch
    if (ls in shared or rs in shared) and ls != rs:
        return False
    return not (
        ls is not None and rs is not None and spec.role(ls) is Role.LEFT and spec.role(rs) is Role.RIGHT
    )


class AxisChoices:
    """The options of each operand for each axis, with their reasons (module docstring)."""

    def __init__(self, left: Tensor, right: Tensor, spec: Spec, target: Tensor | None, local: bool):
        self.left, self.right, self.spec, self.target, self.local = left, right, spec, target, local

    def name(self, t: Tensor) -> str:
        """How reasons call an operand: its name, else which side it is."""
        if t.name is not None:
            return t.name
        return "the left operand" if t is self.left else "the right operand"

    def options(self, t: Tensor, other: Tensor, axis: str) -> list[Option]:
        cur = place_of(t, axis)
        opts = [Option(cur, "")]
        if self.local:
            return opts
        other_place = place_of(other, axis)
        name = self.name(t)
        if cur[0] == "S":
            why = self._gather_reason(t, other, axis, cur[1], other_place)
            if why:
                opts.append(Option(R, why))
        elif cur == U:
            if other_place != R:
                opts.append(
                    Option(
                        R, f"{name} is unreduced over {axis} and {self.name(other)} uses {axis}; sum it first"
                    )
                )
            elif self.target is not None and axis not in self.target.unreduced:
                opts.append(
                    Option(R, f"the result is not unreduced over {axis}; sum {name}'s partials first")
                )
        for d, why in self._dims_for(t, other, axis, cur):
            if ("S", d) != cur:
                verb = {"S": "move", "U": "reduce-scatter", "R": "slice"}[cur[0]]
                opts.append(Option(("S", d), f"{verb} {name}'s {d} over {axis}: {why}"))
        return opts

    def _dims_for(self, t: Tensor, other: Tensor, axis: str, cur: Place) -> list[tuple[str, str]]:
        """Dims of ``t`` the axis may be moved onto, with the reason: where the other operand has it on a
        shared dim (to match), where the requested result has it on a dim t keeps, or a contracted dim
        when the result is requested unreduced over it (and ``t`` is not already unreduced over it)."""
        out = []
        target = self.target
        other_names = other.dim_names
        target_names = target.dim_names if target is not None else ()
        wants_sum = target is not None and axis in target.unreduced and cur != U
        for d in t.dim_names:
            if d in other_names and axis in other.axes_of(d):
                out.append((d, f"{self.name(other)} shards {d} over {axis}; match it"))
            elif (
                target is not None
                and d not in self.spec.contracted
                and d in target_names
                and axis in target.axes_of(d)
            ):
                out.append((d, f"the result {target} shards {d} over {axis}"))
            elif wants_sum and d in self.spec.contracted:
                out.append(
                    (
                        d,
                        f"the result {target} is unreduced over {axis}, and a product leaves partial sums "
                        f"over the axes that shard a contracted dim in both operands (case 3)",
                    )
                )
        return out

    def _gather_reason(self, t: Tensor, other: Tensor, axis: str, d: str, other_place: Place) -> str:
        spec, name = self.spec, self.name(t)
        if d in spec.contracted:
            if other_place == ("S", d):
                return f"case 3 alternative: gather {d} over {axis} in both operands instead of reducing the product"
            if axis in other.axes_of(d) or not other.axes_of(d):
                return f"case 2: {d} is contracted and sharded over {axis} in {name} only; gather it"
            return (
                f"mismatched: {d} is contracted and sharded over {subscript(t.axes_of(d))} in {name} but "
                f"{subscript(other.axes_of(d))} in {self.name(other)}; gather {name}'s"
            )
        if other_place not in (R, ("S", d)):
            if other_place[0] == "S" and spec.role(other_place[1]).name in ("LEFT", "RIGHT"):
                return (
                    f"case 4: {d} of {name} and {other_place[1]} of {self.name(other)} are both sharded over "
                    f"{axis}; gather {name}'s"
                )
            where = "unreduced" if other_place == U else "on " + other_place[1]
            return f"{self.name(other)} uses {axis} ({where}); gather {name}'s {d}"
        if d in spec.batch and other_place != ("S", d):
            return f"batch dim {d} must be sharded alike in both operands; gather {name}'s"
        if self.target is not None and axis not in self.target.axes_of(d):
            return f"the result {self.target} does not shard {d} over {axis}; gather {name}'s {d} before the product"
        return ""
