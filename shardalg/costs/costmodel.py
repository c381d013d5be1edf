"""The cost model as one value: what a price depends on besides the plan, its mesh and its sizes.

    >>> from shardalg.costs.costmodel import CostModel
    >>> CostModel.of("tpu-v5e", overlap="steady", latency=False)          # doctest: +SKIP
    CostModel(chip=Chip(name='tpu-v5e', ...), model='ici', overlap=<OverlapPolicy.STEADY: 'steady'>, ...)

A :class:`CostModel` is frozen and hashable: the chip, the communication model, the overlap policy and the
counting options of :mod:`shardalg.costs.stepcost`. The public functions (``cost``, ``plan_cost``,
``step_seconds``, ``plans``, ...) keep their keyword options and fold them into one CostModel at the edge
(:meth:`CostModel.of`, where names become values and bad ones become a UsageError); the layers below take the
value. It is a value and nothing more: the modules that price by it import it, never the other way round.
The planner ranks by it through :class:`.ranking.BySeconds` (``planning.planner.plans(stmt, mesh, sizes,
rank=BySeconds(costs))``). Its step-level form for one mesh and sizes is :class:`.stepcost.Options`
(``Options.of(costs, mesh, sizes)``), which holds it: every memo of a step's cost is keyed by that value, so
two cost models that differ in any field never share an answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from shardalg.errors import UsageError
from shardalg.lazy import hashed_once
from shardalg.planning.overlap import OverlapPolicy

from .efficiency import PEAKS, Efficiencies
from .hardware import MODELS, Chip, as_chip

__all__ = ["CostModel", "RINGS", "check_model"]

RINGS = ("bi", "uni")  # a ring carries data both ways (the book's W_ici) or one way only


def check_model(model: str, ring: str) -> None:
    """A UsageError unless ``model`` is a communication model and ``ring`` a ring direction it has."""
    if model not in MODELS:
        raise UsageError(f"unknown communication model {model!r}; known: {', '.join(MODELS)}")
    if ring not in RINGS:
        raise UsageError(f"ring is 'bi' (both ways, the book's W_ici) or 'uni' (one way), not {ring!r}")
    if ring == "uni" and model != "ici":
        raise UsageError(f"ring='uni' counts hops on the ici torus; the {model} model has no rings")


@hashed_once
@dataclass(frozen=True)
class CostModel:
    """``chip``: its numbers give seconds, its rule the wraparound (None: symbolic); ``model``: ``ici``,
    ``alpha-beta`` or ``alpha-beta-rd``; ``overlap``: the policy a plan's steps are scheduled under;
    ``latency=False`` keeps only bandwidth terms (the bandwidth-bound regime of the book's derivations);
    ``symbolic_links`` writes each axis's link count as the symbol M_X; ``dcn_axes`` run over DCN; ``hbm``
    restricts an einsum's HBM traffic to the named tensors (None: every operand and result; a function, elementwise,
    reads and writes its operands whatever), and ``on_chip`` names tensors that never reach HBM (a fused attention's
    scores and their cotangents); ``exact`` keeps the
    ring's (N − 1)/N; ``ring="uni"`` uses each ring one way (see :mod:`shardalg.costs.stepcost`);
    ``efficiency``: the fractions of peak compute (MFU), HBM and network bandwidth a step reaches, each with its
    source (:mod:`shardalg.costs.efficiency`; peak unless given or carried by the chip). The whole-model
    step (:mod:`shardalg.models.step`) applies them; a plan's own cost stays at peak."""

    chip: Chip | None = None
    model: str = "ici"
    overlap: OverlapPolicy = OverlapPolicy.SCHEDULE
    latency: bool = True
    symbolic_links: bool = False
    dcn_axes: tuple[str, ...] = ()
    hbm: tuple[str, ...] | None = None
    exact: bool = False
    ring: str = "bi"
    efficiency: Efficiencies = PEAKS
    on_chip: tuple[str, ...] = ()

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
        efficiency: Efficiencies | None = None,
        on_chip: Iterable[str] = (),
    ) -> CostModel:
        """The cost model the public functions' arguments name: ``hw`` a Chip or preset name, ``model``
        default the chip's (else ``ici``), ``overlap`` a policy or its name (default ``schedule``),
        ``efficiency`` default: the chip's measured ones, else peak."""
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
            efficiency if efficiency is not None else Efficiencies.of(chip),
            tuple(on_chip),
        )

    def under(self, overlap: object) -> CostModel:
        """The same model under another overlap policy (a policy or its name)."""
        policy = OverlapPolicy.of(overlap, self.overlap)
        return self if policy is self.overlap else replace(self, overlap=policy)
