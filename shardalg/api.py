"""The public ``plans`` and ``plan``: the planner's, with the keyword options of a call (``hw``, ``model``,
``overlap``, ``exact``, ...) folded once into the :class:`~shardalg.costs.costmodel.CostModel` it ranks by
(strings become values here, at the edge).

Imports: :mod:`shardalg.costs` and :mod:`shardalg.planning`; nothing below imports it (``shardalg`` loads it on
first use of ``shardalg.plans``, so ``import shardalg`` stays cheap).
"""

from __future__ import annotations

from typing import Any

from .costs.costmodel import CostModel
from .costs.ranking import BySeconds
from .planning import planner
from .planning.planset import DEFAULT_LIMITS

__all__ = ["plans", "plan"]


def plans(
    expr: Any,
    mesh: Any = None,
    sizes: Any = None,
    target: Any = None,
    *,
    key: Any = None,
    hw: Any = None,
    model: str | None = None,
    overlap: object = None,
    limits: Any = None,
    **options: Any,
) -> Any:
    """Every legal plan for a statement, cheapest first: the planner's
    :func:`~shardalg.planning.planner.plans`, as a :class:`~shardalg.planning.planset.Plans` list
    (``complete`` and ``note``; a table in a notebook: bytes, and seconds with ``hw``); ``limits`` are its
    budgets.

    Ranking: ``key`` when given; else with ``hw`` (a chip or preset name) by seconds on that chip under
    ``overlap`` (``schedule``, ``steady`` or ``serial``), where every size is bound; else by bytes
    communicated, then steps. ``hw``, ``model``, ``overlap`` and ``options`` (``exact``, ``ring``, ...) are
    folded here, once, into the :class:`~shardalg.costs.costmodel.CostModel` the planner ranks by."""
    rank = None if hw is None else BySeconds(CostModel.of(hw, model, overlap, **options))
    return planner.plans(expr, mesh, sizes, target, key=key, rank=rank, limits=limits or DEFAULT_LIMITS)


def plan(
    expr: Any,
    mesh: Any = None,
    sizes: Any = None,
    target: Any = None,
    *,
    key: Any = None,
    hw: Any = None,
    model: str | None = None,
    overlap: object = None,
    **options: Any,
) -> Any:
    """The default (first) of :func:`plans`."""
    return plans(expr, mesh, sizes, target, key=key, hw=hw, model=model, overlap=overlap, **options)[0]
