"""What a planning query returns: the plans found, and whether they are all of them.

:class:`Plans` is a list of plans with ``complete`` and ``note``: ``complete`` is False when a budget of
the search was hit (the labels one layout search may settle, or the equally cheap sequences listed for one
resharding), and ``note`` then names the limit and how to lift it. A truncated answer is never silent: the
JSON of ``shardalg plan`` carries ``"complete"`` and the CLI warns on stderr.

:class:`Limits` holds the budgets; the defaults are generous (every matmul on five mesh axes is planned in
full within them), and a query that needs more takes ``limits=Limits(...)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shardalg.notation.plan import Plan
from shardalg.notation.plan import Plans as PlanTable
from shardalg.notation.printing.display import html_escape

from .overlap import OverlapPolicy
from .search import MAX_LABELS, MAX_TIES

__all__ = ["Plans", "Limits", "DEFAULT_LIMITS", "Overlap"]


@dataclass(frozen=True)
class Limits:
    """Budgets of a planning query. ``max_labels``: labels one layout search may settle; ``max_ties``:
    equally cheap sequences listed for one resharding; ``max_layouts``: compute layouts one einsum may
    enumerate."""

    max_labels: int = MAX_LABELS
    max_ties: int = MAX_TIES
    max_layouts: int = 1_000_000


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Overlap:
    """How a plan's steps overlap, as the planner's cheapest-plan search needs it (the cost model's policy,
    handed down by a :class:`~.ranking.Ranking`: BySeconds builds it from its cost model's chip and policy).

    ``policy`` is ``SCHEDULE`` (the two operands are prepared at once; each preparation, and the finish,
    is a chain whose steps add up) or ``STEADY`` (a plan's time is the largest of its resources' sums);
    ``time`` is a plan's time under it, ``lanes`` the resources a step holds (its mesh axes, or the compute).
    Under ``SERIAL`` a plan's time is the sum of its steps' weights: no Overlap is needed."""

    policy: OverlapPolicy
    time: Callable[[Plan], float | None]
    lanes: Callable[[object], tuple[str, ...]]

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "policy", OverlapPolicy.of(self.policy)
        )  # a policy's name is read once, here


class Plans(PlanTable):
    """A list of plans, cheapest first, that says whether it holds every plan (``complete``) and, when it
    does not, which limit cut it and how to lift it (``note``). In a notebook, a table (``columns``: bytes,
    seconds on a chip, as the ranking gave them). ``choice``: when the plans' bytes depend on unknown sizes,
    the :class:`~.symbolic.Choice` that says which plans are the cheapest where, or which sizes it needs
    (the list is then in an order that makes up no size: :func:`~.symbolic.choose`)."""

    complete: bool
    note: str

    def __init__(
        self,
        plans: Iterable[Plan] = (),
        complete: bool = True,
        note: str = "",
        columns: Mapping[str, Callable[[Plan], object]] | None = None,
        choice: Any = None,
    ):
        super().__init__(plans, columns)
        self.complete = complete
        self.note = note
        self._choice = choice  # a Choice, None, or a function that makes it when first asked for

    @property
    def choice(self) -> Any:
        """A :class:`~.symbolic.Choice` when some plan's bytes depend on unknown sizes, else None (made when
        first asked for, outside :func:`~.symbolic.strict`)."""
        if callable(self._choice):
            self._choice = self._choice()
        return self._choice

    @classmethod
    def of(cls, plans: Iterable[Plan], cuts: Iterable[str]) -> Plans:
        """The plans, incomplete when any cut (a limit's note) is given; notes are deduplicated in order."""
        notes = list(dict.fromkeys(c for c in cuts if c))
        return cls(plans, not notes, "; ".join(notes))

    def __repr__(self) -> str:
        if self.complete:
            return super().__repr__()
        return f"{super().__repr__()}  # incomplete: {self.note}"

    def _repr_html_(self) -> str:
        shown = super()._repr_html_()
        return shown if self.complete else shown + f"<p><b>incomplete:</b> {html_escape(self.note)}</p>"
