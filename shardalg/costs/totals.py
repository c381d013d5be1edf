"""What every cost of a plan answers, defined once over its light terms: ``compute``, ``comms``, ``memory``,
``total`` and ``flops`` as sympy expressions, ``term(name)`` by name, ``seconds`` on the chip.

A cost supplies :meth:`CostTotals.light` (one of :data:`TERMS` as a light term, :mod:`shardalg.costs.terms`)
and :meth:`CostTotals.evaluate` (a term at the chip's numbers); :class:`~shardalg.costs.plancost.PlanCost`
(one plan) and :class:`~shardalg.costs.phases.PhasedCost` (a step priced by phase) are the two.
"""

from __future__ import annotations

from sympy import Expr

from shardalg.errors import UsageError

from .terms import Term

__all__ = ["TERMS", "REGIMES", "CostTotals"]

TERMS = ("comms", "compute", "memory", "total", "flops")  # what light() answers
REGIMES = ("comms", "compute", "memory", "total")  # what term() answers (the derivations' regimes)


class CostTotals:
    """The totals of a cost, each a sympy expression made from :meth:`light` on use."""

    def light(self, name: str) -> Term:
        """``comms``, ``compute``, ``memory``, ``total`` or ``flops`` as a light term."""
        raise NotImplementedError

    def evaluate(self, expr: object) -> float | None:
        """A term or sympy expression at the chip's numbers; None while a symbol is unbound."""
        raise NotImplementedError

    @property
    def compute(self) -> Expr:
        return self.light("compute").sympy()

    @property
    def comms(self) -> Expr:
        return self.light("comms").sympy()

    @property
    def memory(self) -> Expr:
        return self.light("memory").sympy()

    @property
    def total(self) -> Expr:
        return self.light("total").sympy()

    @property
    def flops(self) -> Expr:
        return self.light("flops").sympy()

    def term(self, name: str) -> Expr:
        """One of ``comms``, ``compute``, ``memory``, ``total`` by name (the derivations' regimes)."""
        if name not in REGIMES:
            raise UsageError(f"a plan cost has comms, compute, memory and total, not {name!r}")
        return self.light(name).sympy()

    @property
    def seconds(self) -> float | None:
        """``total`` at the chip's numbers; None while a symbol is unbound."""
        return self.evaluate(self.light("total"))
