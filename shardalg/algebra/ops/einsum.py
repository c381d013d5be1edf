"""The local einsum (``A ·_LOCAL B``): its record, whose rule is the typing of
:mod:`shardalg.algebra.einsum`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

from shardalg.notation.syntax import Op, Tensor

from ..einsum import Spec, local_output
from ..mesh import Mesh
from ..traffic import Volume
from .record import DimMap, OpRecord, Transpose

__all__ = ["EinsumRule", "LOCAL_EINSUM", "RECORD"]


@dataclass(frozen=True, kw_only=True)
class EinsumRule(OpRecord):
    """The local einsum's record: its rule takes two operands and a :class:`Spec`."""

    operands: ClassVar[int] = 2

    def check(self, left: Tensor, right: Tensor, spec: Spec, mesh: Mesh) -> None:
        local_output(left, right, spec, mesh)

    def apply(self, left: Tensor, right: Tensor, spec: Spec, mesh: Mesh, name: str | None = None) -> Tensor:
        return local_output(left, right, spec, mesh, name)


RECORD = LOCAL_EINSUM = EinsumRule(
    op=Op.EINSUM,
    doc="""A[.., J_A, ..] ·_LOCAL B[.., J_A, ..] -> C[..]{U_A}     local product of the shards, no communication
    case 1 (J unsharded): device x: A_x · B_x is its block of C
    case 3 (J_X on both): device x: A[:, J_x] · B[J_x, :] is a partial sum; C{U_X} = sum over x
    free dims keep their axes; batch dims must match; case 4 and mismatched contractions are refused
    backward: two einsums, dA = dC·Bᵀ and dB = Aᵀ·dC, each planned (DESIGN.md section 4)""",
    volume=Volume.NONE,
    factor=Fraction(0),
    group_view=False,
    identity_on_values=False,
    transpose=Transpose(
        None, DimMap.NONE, "two einsums", "dA = dC·Bᵀ, dB = Aᵀ·dC, each planned by the planner"
    ),
)
