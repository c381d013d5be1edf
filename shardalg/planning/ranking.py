"""What the planner ranks plans by when it is handed a ranking: the :class:`Ranking` protocol and its
:class:`Ranked` answer.

The planner ranks by bytes communicated on its own. A ranking that measures more (seconds on a chip, under
an overlap policy) is a value from a higher layer that implements :class:`Ranking`: given the mesh and the
sizes of one query, it returns the functions the planner's searches read (:class:`Ranked`). The costs
layer's :class:`~shardalg.costs.ranking.BySeconds` is one, so ``plans(stmt, mesh, sizes,
rank=BySeconds(costs))`` ranks by a cost model's seconds without planning importing the costs layer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.traffic import Sizes
from shardalg.notation.plan import Plan, Step

from .planset import Overlap

__all__ = ["Key", "Weigh", "Ranked", "Ranking"]

Key = Callable[[Plan], Any]  # sorts finished plans, cheapest first
Weigh = Callable[[Step], float]  # one step's additive weight in a search


@dataclass(frozen=True)
class Ranked:
    """A ranking for one mesh and sizes: ``key`` sorts finished plans; ``weigh`` is one step's additive
    weight in a resharding's search (and the cheapest-plan search over every compute layout); ``overlap``
    says how steps overlap under the ranking's policy (None: a plan's weight is the sum of its steps');
    ``columns`` are what a table of the plans shows beside their bytes (a column's name, a plan's cell)."""

    key: Key
    weigh: Weigh | None = None
    overlap: Overlap | None = None
    columns: Mapping[str, Callable[[Plan], object]] = field(default_factory=dict)


@runtime_checkable
class Ranking(Protocol):
    """A value the planner can rank by: :meth:`ranking` gives its functions for one query's mesh and sizes."""

    def ranking(self, mesh: Mesh, sizes: Sizes) -> Ranked: ...
