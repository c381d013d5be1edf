"""The overlap policies: what may run at once when a plan's steps are timed.

One enum, read by the costs layer's schedules (:mod:`shardalg.costs.schedule`, which re-exports it) and by
the planner's cheapest-plan search (:mod:`shardalg.planning.optimum`), so it lives here, in the lowest layer
that dispatches on it. Strings are only at the edges: :meth:`OverlapPolicy.of` turns the name a user wrote
into a policy, once, and the CLI offers :meth:`OverlapPolicy.names`. Imports only :mod:`shardalg.errors`
(the CLI reads it at start).
"""

from __future__ import annotations

from enum import StrEnum

from shardalg.errors import UsageError

__all__ = ["OverlapPolicy"]


class OverlapPolicy(StrEnum):
    """What may run at once in a plan (DESIGN.md section 5; :mod:`shardalg.costs.schedule` builds the
    schedules): ``SCHEDULE`` (a step starts when its inputs exist and its resources are free), ``STEADY``
    (the book's layer-level max(compute, max over axes)) or ``SERIAL`` (everything adds up). Its value is
    the name written at the edges (the CLI's ``--overlap``, the public functions' ``overlap=``)."""

    SCHEDULE = "schedule"
    STEADY = "steady"
    SERIAL = "serial"

    @classmethod
    def of(cls, overlap: object, default: OverlapPolicy | None = None) -> OverlapPolicy:
        """The policy ``overlap`` names: a policy, or its name; True and False are the old spellings of
        ``steady`` and ``serial``; None is ``default`` (else ``schedule``). Anything else is a UsageError
        that names the policies."""
        if isinstance(overlap, cls):
            return overlap
        if overlap is None:
            return cls.SCHEDULE if default is None else default
        if overlap is True:
            return cls.STEADY
        if overlap is False:
            return cls.SERIAL
        if isinstance(overlap, str):
            for policy in cls:
                if policy.value == overlap:
                    return policy
        raise UsageError(
            f"the overlap policy is one of {', '.join(cls.names())}, not {overlap!r}",
            fix="--overlap steady (compute and each axis overlap across layers), serial (they add) or schedule "
            "(the step's dependencies); API: overlap='steady'",
        )

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The policies' names, as the CLI offers them."""
        return tuple(p.value for p in cls)
