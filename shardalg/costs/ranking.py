"""Plans ranked by seconds on a chip: the planner's search (:mod:`shardalg.planning`) with the cost model's
ranking handed to it.

    >>> plans("X[B, D] · Y[D_X, F] -> Z[B, F]", "X=4", {"B": 512, "D": 8192, "F": 16384}, hw="tpu-v5p")

The planner knows bytes only; it takes its ranking as two functions (``key`` for finished plans, ``weigh``
for one step of a resharding search). This module builds them from a chip, so the planner never imports
the costs layer. Without ``hw`` every function here is the planner's own, ranked by bytes. A plan's seconds
are its time under the overlap policy (``overlap="schedule"`` by default: a step waits for its inputs and
its resources; see :mod:`shardalg.costs.schedule`), computed from numbers without building a formula
(:func:`shardalg.costs.plancost.fast_seconds`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from shardalg.algebra.mesh import Mesh, as_mesh
from shardalg.algebra.traffic import Sizes
from shardalg.notation.plan import Plan
from shardalg.notation.printing.display import bytes_text, seconds_text
from shardalg.notation.syntax import Tensor
from shardalg.planning import planner
from shardalg.planning import redistribute as resharding
from shardalg.planning.order import HeadKey
from shardalg.planning.planner import Key
from shardalg.planning.planset import DEFAULT_LIMITS, Limits, Overlap, Plans

from .costmodel import CostModel
from .plancost import fast_seconds, step_seconds, step_weights
from .schedule import OverlapPolicy, lanes_of
from .stepcost import Options

__all__ = ["plans", "plan", "ranked", "redistribute", "seconds_key"]


def seconds_key(mesh: Mesh, sizes: Sizes, hw: Any, model: str | None = None, overlap: object = None, *,
                seconds: Callable[[Plan], float | None] | None = None, **options) -> Key:  # fmt: skip
    """Rank plans by their seconds on ``hw`` under ``overlap``; plans whose cost stays symbolic (unbound
    sizes) rank after the numeric ones, by bytes. ``seconds`` is the caller's :func:`fast_seconds` of the same
    chip and policy, when it has one (its times are shared); ``options`` are
    :class:`~shardalg.costs.costmodel.CostModel`'s."""
    return _seconds_key(mesh, sizes, CostModel.of(hw, model, overlap, **options), seconds)


def _seconds_key(mesh: Mesh, sizes: Sizes, costs: CostModel, seconds: Callable[[Plan], float | None] | None) -> Key:
    by_bytes = resharding.default_key(mesh, sizes)
    if seconds is None:
        seconds = fast_seconds(Options.of(costs, mesh, sizes.known), costs.overlap)

    def head(p: Plan) -> tuple[Any, ...]:
        t = seconds(p)
        return (t is None, t or 0.0, *by_bytes.head(p))

    return HeadKey(head)  # the steps' text is built only for plans that tie on the rest


def plans(
    expr: object,
    mesh: Mesh | Mapping[str, int] | str | None = None,
    sizes: Mapping[str, int] | None = None,
    target: Tensor | str | None = None,
    *,
    key: Key | None = None,
    hw: Any = None,
    model: str | None = None,
    overlap: object = None,
    limits: Limits = DEFAULT_LIMITS,
    **options: Any,
) -> Plans:
    """Every legal plan for a statement (:func:`shardalg.planning.planner.plans`), cheapest first, as the
    planner's :class:`~shardalg.planning.planset.Plans` (``complete`` and ``note``; a table in a notebook:
    bytes, and seconds with ``hw``); ``limits`` are its budgets.

    Ranking: ``key`` when given; else with ``hw`` (a chip or preset name) by seconds on that chip under
    ``overlap`` (``schedule``, ``steady`` or ``serial``), where every size is bound; else by bytes
    communicated, then steps. ``options`` (``exact``, ``ring``, ...) are
    :class:`~shardalg.costs.costmodel.CostModel`'s, read with ``hw``."""
    p = planner.prepare(expr, mesh, sizes, target)
    if hw is None:
        return Plans(*_found(planner.plans(p, key=key, limits=limits)), _columns(p.mesh, p.sizes, None))
    costs = CostModel.of(hw, model, overlap, **options)
    found = ranked(p, costs, key=key, limits=limits)
    return Plans(*_found(found), _columns(p.mesh, p.sizes, costs))


def ranked(p: planner.Problem, costs: CostModel, *, key: Key | None = None, limits: Limits = DEFAULT_LIMITS) -> Plans:
    """The plans of a prepared problem ranked by seconds under ``costs`` (``key`` when given)."""
    weigh = step_weights(p.mesh, p.sizes.known, costs) if key is None else None
    timing = None
    time = fast_seconds(Options.of(costs, p.mesh, p.sizes.known), costs.overlap)
    rank = key or _seconds_key(p.mesh, p.sizes, costs, time)
    # under schedule and steady a plan's time is not the sum of its steps': the optimum's search measures so
    if weigh is not None and costs.overlap is not OverlapPolicy.SERIAL:
        timing = Overlap(costs.overlap, time, lanes_of)
    return planner.plans(p, key=rank, weigh=weigh, limits=limits, overlap=timing)


def _found(found: Plans) -> tuple[Plans, bool, str]:
    return found, found.complete, found.note


def _columns(mesh: Mesh, sizes: Sizes, costs: CostModel | None) -> dict[str, Any]:
    """The columns of the ranked table: bytes communicated, and seconds on the chip (the ranking's own)."""
    columns: dict[str, Any] = {"bytes communicated": lambda q: bytes_text(str(resharding.plan_bytes(q, mesh, sizes)))}
    if costs is not None:
        fast = fast_seconds(Options.of(costs, mesh, sizes.known), costs.overlap)

        def seconds(q: Plan) -> str:
            t = fast(q)
            return "symbolic" if t is None else seconds_text(t)

        columns[f"time on {getattr(costs.chip, 'name', costs.chip)} ({costs.overlap})"] = seconds
    return columns


def plan(
    expr: object,
    mesh: Mesh | Mapping[str, int] | str | None = None,
    sizes: Mapping[str, int] | None = None,
    target: Tensor | str | None = None,
    *,
    key: Key | None = None,
    hw: Any = None,
    model: str | None = None,
    overlap: object = None,
    **options: Any,
) -> Plan:
    """The default (first) of :func:`plans`."""
    return plans(expr, mesh, sizes, target, key=key, hw=hw, model=model, overlap=overlap, **options)[0]


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

