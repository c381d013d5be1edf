"""Reshardings ranked by seconds on a chip, and the key that ranks plans by seconds (keyword forms).

    >>> redistribute(parse_tensor("A[I_X, J]"), parse_tensor("A[I, J_X]"), "X=4", {"I": 512, "J": 512},
    ...              hw="tpu-v5p")                                                    # doctest: +SKIP

The planner knows bytes only; it takes another ranking as a value implementing its
:class:`~shardalg.planning.ranking.Ranking` protocol: a :class:`~shardalg.costs.costmodel.CostModel`
(``shardalg.plans(..., hw=...)`` builds one from its keyword options and calls the planner's one ``plans``).
This module keeps the keyword forms of the pieces: :func:`redistribute` weighs each step of a resharding's
search by its seconds, and :func:`seconds_key` is the CostModel's key of finished plans.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from shardalg.algebra.mesh import Mesh, as_mesh
from shardalg.algebra.traffic import Sizes
from shardalg.notation.plan import Plan
from shardalg.notation.syntax import Tensor
from shardalg.planning import redistribute as resharding
from shardalg.planning.ranking import Key

from .costmodel import CostModel
from .plancost import step_seconds

__all__ = ["redistribute", "seconds_key"]


def seconds_key(mesh: Mesh, sizes: Sizes, hw: Any, model: str | None = None, overlap: object = None, *,
                seconds: Callable[[Plan], float | None] | None = None, **options) -> Key:  # fmt: skip
    """Rank plans by their seconds on ``hw`` under ``overlap``; plans whose cost stays symbolic (unbound
    sizes) rank after the numeric ones, by bytes (:meth:`CostModel.seconds_key`). ``seconds`` is the
    caller's :func:`~shardalg.costs.steps.fast_seconds` of the same chip and policy, when it has one (its
    times are shared); ``options`` are :class:`~shardalg.costs.costmodel.CostModel`'s."""
    return CostModel.of(hw, model, overlap, **options).seconds_key(mesh, sizes, seconds)


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
    weigh = step_seconds(as_mesh(mesh), sizes, hw, model) if hw is not None else None
    return resharding.redistribute(src, dst, mesh, sizes, limit=limit, key=key, weigh=weigh)
