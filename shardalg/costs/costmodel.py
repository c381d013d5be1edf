"""The cost model as one value: what a price depends on besides the plan, its mesh and its sizes.

    >>> from shardalg.costs.costmodel import CostModel
    >>> CostModel.of("tpu-v5e", overlap="steady", latency=False)          # doctest: +SKIP
    CostModel(chip=Chip(name='tpu-v5e', ...), model='ici', overlap=<OverlapPolicy.STEADY: 'steady'>, ...)

A :class:`CostModel` is frozen and hashable: the chip, the communication model, the overlap policy and the
counting options of :mod:`shardalg.costs.stepcost`. The public functions (``cost``, ``plan_cost``,
``step_seconds``, ``plans``, ...) keep their keyword options and fold them into one CostModel at the edge
(:meth:`CostModel.of`, where names become values and bad ones become a UsageError); the layers below take the
value. A CostModel is the planner's ranking by seconds: it implements
:class:`shardalg.planning.ranking.Ranking`, so ``planning.planner.plans(stmt, mesh, sizes, rank=costs)``
ranks by it. Its step-level form for one mesh and sizes is :class:`.stepcost.Options` (:meth:`options`),
which holds it: every memo of a step's cost is keyed by that value, so two cost models that differ in any
field never share an answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.traffic import Sizes
from shardalg.notation.plan import Plan
from shardalg.notation.printing.display import seconds_text
from shardalg.planning.order import HeadKey, default_key
from shardalg.planning.overlap import OverlapPolicy
from shardalg.planning.planset import Overlap
from shardalg.planning.ranking import Key, Ranked

from .hardware import Chip, as_chip
from .schedule import lanes_of
from .stepcost import Options, check_model
from .steps import fast_seconds, step_weights

__all__ = ["CostModel"]


@dataclass(frozen=True)
class CostModel:
    """``chip``: its numbers give seconds, its rule the wraparound (None: symbolic); ``model``: ``ici``,
    ``alpha-beta`` or ``alpha-beta-rd``; ``overlap``: the policy a plan's steps are scheduled under;
    ``latency=False`` keeps only bandwidth terms (the bandwidth-bound regime of the book's derivations);
    ``symbolic_links`` writes each axis's link count as the symbol M_X; ``dcn_axes`` run over DCN; ``hbm``
    restricts HBM traffic to the named tensors (None: every einsum operand and result); ``exact`` keeps the
    ring's (N − 1)/N; ``ring="uni"`` uses each ring one way (see :mod:`shardalg.costs.stepcost`)."""

    chip: Chip | None = None
    model: str = "ici"
    overlap: OverlapPolicy = OverlapPolicy.SCHEDULE
    latency: bool = True
    symbolic_links: bool = False
    dcn_axes: tuple[str, ...] = ()
    hbm: tuple[str, ...] | None = None
    exact: bool = False
    ring: str = "bi"

    def __post_init__(self) -> None:
        check_model(self.model, self.ring)

    @classmethod
    def of(
        cls,
        hw: Chip | str | None = None,
        model: str | None = None,
        overlap: object = None,
        *,
        latency: bool = True,
        symbolic_links: bool = False,
        dcn_axes: Iterable[str] = (),
        hbm: Iterable[str] | None = None,
        exact: bool = False,
        ring: str = "bi",
    ) -> CostModel:
        """The cost model the public functions' arguments name: ``hw`` a Chip or preset name, ``model``
        default the chip's (else ``ici``), ``overlap`` a policy or its name (default ``schedule``)."""
        chip = as_chip(hw)
        return cls(
            chip,
            model or (chip.model if chip is not None else "ici"),
            OverlapPolicy.of(overlap),
            latency,
            symbolic_links,
            tuple(dcn_axes),
            None if hbm is None else tuple(hbm),
            exact,
            ring,
        )

    def under(self, overlap: object) -> CostModel:
        """The same model under another overlap policy (a policy or its name)."""
        policy = OverlapPolicy.of(overlap, self.overlap)
        return self if policy is self.overlap else replace(self, overlap=policy)

    def options(self, mesh: Mesh | None, sizes: object = None) -> Options:
        """The step-level options of this model on ``mesh`` with ``sizes`` (equal calls share one)."""
        return Options.of(self, mesh, sizes)

    def seconds_key(
        self, mesh: Mesh, sizes: Sizes, seconds: Callable[[Plan], float | None] | None = None
    ) -> Key:
        """Rank plans by their seconds under this model; plans whose cost stays symbolic (unbound sizes) rank
        after the numeric ones, by bytes. ``seconds`` is the caller's :func:`~.steps.fast_seconds` of this
        model, when it has one (its times are shared)."""
        by_bytes = default_key(mesh, sizes)
        if seconds is None:
            seconds = fast_seconds(self.options(mesh, sizes.known), self.overlap)

        def head(p: Plan) -> tuple[Any, ...]:
            t = seconds(p)
            return (t is None, t or 0.0, *by_bytes.head(p))

        return HeadKey(head)  # the steps' text is built only for plans that tie on the rest

    def ranking(self, mesh: Mesh, sizes: Sizes) -> Ranked:
        """The planner's ranking by seconds on this model's chip under its overlap policy (every size bound):
        the key of finished plans, each step's seconds as a search's weight, how steps overlap (none under
        ``serial``, where a plan's time is the sum of its steps'), and the table's column of seconds."""
        time = fast_seconds(self.options(mesh, sizes.known), self.overlap)
        overlap = None if self.overlap is OverlapPolicy.SERIAL else Overlap(self.overlap, time, lanes_of)
        fast = fast_seconds(self.options(mesh, sizes.known), self.overlap)

        def seconds(q: Plan) -> str:
            t = fast(q)
            return "symbolic" if t is None else seconds_text(t)

        column = f"time on {getattr(self.chip, 'name', self.chip)} ({self.overlap})"
        weigh = step_weights(mesh, sizes.known, self)
        return Ranked(self.seconds_key(mesh, sizes, time), weigh, overlap, {column: seconds})
