"""Ranking by seconds: the planner's ranking under a cost model, the key of finished plans, and reshardings
ranked by seconds on a chip.

    >>> redistribute(parse_tensor("A[I_X, J]"), parse_tensor("A[I, J_X]"), "X=4", {"I": 512, "J": 512},
    ...              hw="tpu-v5p")                                                    # doctest: +SKIP

The planner knows bytes only; it takes another ranking as a value implementing its
:class:`~shardalg.planning.ranking.Ranking` protocol: :class:`BySeconds`, which ranks by a
:class:`~shardalg.costs.costmodel.CostModel` (``shardalg.plans(..., hw=...)`` builds one from its keyword
options and calls the planner's one ``plans`` with it). This module keeps the keyword forms of the pieces too:
:func:`redistribute` weighs each step of a resharding's search by its seconds, and :func:`seconds_key` is
:class:`BySeconds`' key of finished plans.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from shardalg.algebra.mesh import Mesh, as_mesh
from shardalg.algebra.traffic import Sizes
from shardalg.errors import UsageError
from shardalg.notation.plan import Plan
from shardalg.notation.printing.display import seconds_text
from shardalg.notation.syntax import Tensor
from shardalg.planning import redistribute as resharding
from shardalg.planning.order import HeadKey, default_key
from shardalg.planning.overlap import OverlapPolicy
from shardalg.planning.planset import Overlap
from shardalg.planning.ranking import Key, Ranked

from .costmodel import CostModel
from .plancost import step_seconds
from .schedule import lanes_of
from .stepcost import Options
from .steps import fast_seconds, step_weights

__all__ = ["BySeconds", "redistribute", "reshardings", "seconds_key"]


@dataclass(frozen=True)
class BySeconds:
    """The planner's ranking by seconds under ``costs`` (on its chip, under its overlap policy): a value
    implementing :class:`~shardalg.planning.ranking.Ranking`, equal and hashed by its cost model."""

    costs: CostModel

    def seconds_key(
        self, mesh: Mesh, sizes: Sizes, seconds: Callable[[Plan], float | None] | None = None
    ) -> Key:
        """Rank plans by their seconds under the cost model; plans whose cost stays symbolic (unbound sizes)
        rank after the numeric ones, by bytes. ``seconds`` is the caller's :func:`~.steps.fast_seconds` of
        this model, when it has one (its times are shared)."""
        by_bytes = default_key(mesh, sizes)
        if seconds is None:
            seconds = fast_seconds(Options.of(self.costs, mesh, sizes.known), self.costs.overlap)

        def head(p: Plan) -> tuple[Any, ...]:
            t = seconds(p)
            return (t is None, t or 0.0, *by_bytes.head(p))

        return HeadKey(head)  # the steps' text is built only for plans that tie on the rest

    def ranking(self, mesh: Mesh, sizes: Sizes) -> Ranked:
        """The planner's ranking by seconds on the model's chip under its overlap policy (every size bound):
        the key of finished plans, each step's seconds as a search's weight, how steps overlap (none under
        ``serial``, where a plan's time is the sum of its steps'), and the table's column of seconds."""
        costs = self.costs
        time = fast_seconds(Options.of(costs, mesh, sizes.known), costs.overlap)
        overlap = None if costs.overlap is OverlapPolicy.SERIAL else Overlap(costs.overlap, time, lanes_of)

        def seconds(q: Plan) -> str:
            t = time(q)
            return "symbolic" if t is None else seconds_text(t)

        column = f"time on {getattr(costs.chip, 'name', costs.chip)} ({costs.overlap})"
        weigh = step_weights(mesh, sizes.known, costs)
        return Ranked(self.seconds_key(mesh, sizes, time), weigh, overlap, {column: seconds})


def seconds_key(
    mesh: Mesh,
    sizes: Sizes,
    hw: Any,
    model: str | None = None,
    overlap: object = None,
    *,
    seconds: Callable[[Plan], float | None] | None = None,
    **options,
) -> Key:
    """Rank plans by their seconds on ``hw`` under ``overlap``; plans whose cost stays symbolic (unbound
    sizes) rank after the numeric ones, by bytes (:meth:`BySeconds.seconds_key`). ``seconds`` is the
    caller's :func:`~shardalg.costs.steps.fast_seconds` of the same chip and policy, when it has one (its
    times are shared); ``options`` are :class:`~shardalg.costs.costmodel.CostModel`'s."""
    return BySeconds(CostModel.of(hw, model, overlap, **options)).seconds_key(mesh, sizes, seconds)


def redistribute(
    src: Tensor,
    dst: Tensor,
    mesh: Mesh | Mapping[str, int] | str,
    sizes: Mapping[str, int] | None = None,
    *,
    limit: int = 6,
    key: Key | None = None,
    hw: Any = None,
    model: str | None = None,
) -> list[Plan]:
    """The best sequences of rules from ``src`` to ``dst`` (:func:`shardalg.planning.redistribute.
    redistribute`). With ``hw`` (a chip or preset name; every size bound) the search weighs each step by its
    seconds on that chip (serial time, ``model`` as in :mod:`shardalg.costs.stepcost`) and the plans come
    fastest first."""
    return reshardings(src, mesh, sizes, hw=hw, model=model).to(dst, limit=limit, key=key)


def reshardings(
    src: Tensor,
    mesh: Mesh | Mapping[str, int] | str,
    sizes: Mapping[str, int] | None = None,
    *,
    hw: Any = None,
    model: str | None = None,
) -> resharding.Reshardings:
    """The reshardings of ``src`` to any number of targets, one search of its layout space shared by them
    (:class:`shardalg.planning.redistribute.Reshardings`); ``hw`` and ``model`` weigh each step as
    :func:`redistribute`'s do."""
    m = as_mesh(mesh)
    if m is None:
        raise UsageError("redistribute needs a mesh, e.g. X=4,Y=2")
    weigh = step_seconds(m, sizes, hw, model) if hw is not None else None
    return resharding.Reshardings(src, m, sizes, weigh=weigh)
