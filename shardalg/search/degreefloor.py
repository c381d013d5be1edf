"""The memory floor of the degrees search's dimension maps: the bytes per device of the parameters, their
gradients and optimizer state (over the pipeline's stages), from a map's parameter dims alone, so a map that
cannot fit is pruned before its program is written and priced, and the limit on maps counts the survivors.

    >>> floor = Floor(base, mesh, sizes, optimizer=None, stages=1)     # doctest: +SKIP
    >>> floor.bytes(assignment)                                        # doctest: +SKIP

The floor is the same number the search refuses a written program by (:func:`shardalg.models.unplanned.param_bytes`
of the sharded model, over the stages), computed without writing it: each parameter's bytes unsharded
(:func:`shardalg.models.unplanned.param_bytes_each` of the unsharded model on the point's mesh), divided by the
sizes of the axes :func:`shardalg.models.expand.shard` would shard it over
(:func:`shardalg.models.expand.param_axes`). Exact with ZeRO's stage 0 (the degrees search takes no
``--zero``): a map is pruned exactly when its written program's parameters alone pass the cap, and the
memory of what is priced, activations and all, is never below it. A test checks both on every map of a
small case, and that the pruned search's table is the unpruned one's.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from math import prod
from typing import Any

import sympy

from shardalg.errors import UsageError
from shardalg.models.expand import param_axes
from shardalg.models.program import model_program
from shardalg.models.unplanned import param_bytes_each
from shardalg.notation.syntax import Program

from .space import Assignment

__all__ = ["Floor"]


def _exact(value: Any, name: str) -> Fraction:
    """A parameter's bytes as an exact fraction (every size is bound by then)."""
    if not (isinstance(value, sympy.Basic) and value.is_Rational):
        raise UsageError(
            f"the bytes of {name} are not a number ({value}): the degrees search needs every size bound"
        )
    return Fraction(int(value.p), int(value.q))


class Floor:
    """The floor of one degree point: each parameter's bytes unsharded on its mesh, the mesh's axis sizes
    and the stages the parameters are spread over."""

    def __init__(
        self, base: Program, mesh: Any, sizes: Mapping[str, int] | str | None, optimizer: Any, stages: int
    ) -> None:
        model = model_program(base, mesh, sizes)
        self.base = base
        self.full = {n: _exact(b, n) for n, b in param_bytes_each(model, "train", optimizer).items()}
        self.size = {a.name: int(a.size) for a in mesh.axes}
        self.stages = stages

    def bytes(self, a: Assignment) -> float:
        """Bytes per device of the parameters, gradients and optimizer state of the map ``a`` (over the
        stages), as the search's check before any plan computes them on the written program."""
        axes = param_axes(self.base, a.param_map)
        total = sum(b / prod(self.size[x] for x in axes.get(n, ())) for n, b in self.full.items())
        return float(total) / self.stages
