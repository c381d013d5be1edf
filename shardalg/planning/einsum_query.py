"""One einsum to plan, as a frozen record: what :class:`~.einsum_plans.EinsumPlanner` was asked and what
:func:`~.optimum.cheapest_plan` reads of it (the operands, the requested result, the einsum, the mesh, the sizes,
the limits and the case lines every plan carries). Below both, so the optimum needs no planner."""

from __future__ import annotations

from dataclasses import dataclass

from shardalg.algebra.einsum import Spec, case_lines, default_name
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.traffic import Sizes
from shardalg.lazy import cached
from shardalg.notation.plan import Step
from shardalg.notation.syntax import Product, Tensor

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

    @classmethod
    def of(
        cls, body: Product, result: Tensor | None, mesh: Mesh, sizes: Sizes, limits: Limits
    ) -> EinsumQuery:
        """The query of ``body -> result``: its einsum, the result's name (``result``'s, else one new to the
        operands) and dtype (the operands' when the result gives none), and the case lines."""
        left, right = body.left, body.right
        assert isinstance(left, Tensor) and isinstance(right, Tensor)
        spec = Spec.of(left, right, body.contract, result)
        name = (result.name if result is not None else None) or default_name(left.name, right.name)
        dtype = left.dtype or right.dtype
        if result is not None and (result.name is None or (result.dtype is None and dtype is not None)):
            result = result.replace(name=name, dtype=result.dtype or dtype)  # type: ignore[assignment]
        cases = case_lines(left, right, spec)
        return cls(left, right, result, body.contract, body.local, spec, name, mesh, sizes, limits, cases)

    @cached
    def brought(self) -> frozenset[str]:
        """The axes the operands bring in unreduced."""
        return frozenset(self.left.unreduced) | frozenset(self.right.unreduced)

    def product_step(self, left: Tensor, right: Tensor, out: Tensor) -> Step:
        """The local product of two compute layouts, with its reason (:func:`.reasons.product_step`)."""
        return product_step(
            self.spec, self.spec.contracted if self.contract is not None else (), left, right, out
        )
