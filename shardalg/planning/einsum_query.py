"""One einsum to plan, as a frozen record: what :class:`~.einsum_plans.EinsumPlanner` was asked and what
:func:`~.optimum.cheapest_plan` reads of it (the operands, the requested result, the einsum, the mesh, the sizes,
the limits and the case lines every plan carries). Below both, so the optimum needs no planner."""

from __future__ import annotations

from dataclasses import dataclass

from shardalg.algebra.einsum import Spec
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.traffic import Sizes
from shardalg.lazy import cached
from shardalg.notation.plan import Step
from shardalg.notation.syntax import Tensor

from .planset import Limits
from .reasons import product_step

__all__ = ["EinsumQuery"]


@dataclass(frozen=True)
class EinsumQuery:
    """``left · right -> target`` on ``mesh`` (``target`` None: no result requested; ``local``: a local
    product; ``contract``: the dims written under the dot, else None); ``name`` is the result's name."""

    left: Tensor
    right: Tensor
    target: Tensor | None
    contract: tuple[str, ...] | None
    local: bool
    spec: Spec
    name: str
    mesh: Mesh
    sizes: Sizes
    limits: Limits
    cases: tuple[str, ...]

    @cached
    def brought(self) -> frozenset[str]:
        """The axes the operands bring in unreduced."""
        return frozenset(self.left.unreduced) | frozenset(self.right.unreduced)

    def product_step(self, left: Tensor, right: Tensor, out: Tensor) -> Step:
        """The local product of two compute layouts, with its reason (:func:`.reasons.product_step`)."""
        return product_step(
            self.spec, self.spec.contracted if self.contract is not None else (), left, right, out
        )
