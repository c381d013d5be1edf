"""A step's communication on a real slice, per mesh axis: how much of it is bandwidth and how much latency,
with the hops of each torus axis under the mesh axis (:mod:`shardalg.costs.topology`).

    >>> from shardalg.models.step import step_time
    >>> from shardalg.costs.topology import slice_topology
    >>> layout = slice_topology("v5e-256").layout("X=x*y")
    >>> report = step_time("params W\\nIn[B_X, D] * W[D_X, F] -> Out[B_X, F]", layout.mesh,
    ...                    "B=256,D=4096,F=4096", "tpu-v5e")
    >>> [(c.axes, c.hops) for c in slice_comms(report, layout)[0].axes]
    [(('X',), (('x', 8), ('y', 8)))]

Each collective's cost has a latency part (``T_min`` times its hops on the torus, ``α`` per level on a GPU
network) and a bandwidth part (bytes over the links' rate); this module sums both per mesh-axis group over the
collectives of each part of the step, in seconds on the report's chip. The part's own comms figure (under
its overlap policy) is the step report's; this is its breakdown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shardalg.costs.fromsympy import from_sympy
from shardalg.costs.terms import Term
from shardalg.costs.topology import Layout
from shardalg.errors import UsageError
from shardalg.notation.syntax import Op

from .quantities import time_text
from .step import StepReport

__all__ = ["AxisComms", "PartComms", "slice_comms", "slice_lines"]


@dataclass(frozen=True)
class AxisComms:
    """The collectives of one part over one group of mesh axes: how many, and their latency and bandwidth
    parts summed (seconds), with the hops of each torus axis under the group."""

    axes: tuple[str, ...]
    count: int
    latency: float
    bandwidth: float
    hops: tuple[tuple[str, int], ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "axes": list(self.axes),
            "collectives": self.count,
            "latency": self.latency,
            "bandwidth": self.bandwidth,
            "hops": dict(self.hops),
        }


@dataclass(frozen=True)
class PartComms:
    """One part of the step (``layer`` or ``outside``) and its collectives by axis group."""

    part: str
    axes: tuple[AxisComms, ...]


def slice_comms(report: StepReport, layout: Layout) -> list[PartComms]:
    """Each part's collectives by mesh-axis group, in seconds on the report's chip."""
    if report.chip is None:
        raise UsageError("a slice's communication in seconds needs a chip: pass hw='tpu-v5p'")
    out: list[PartComms] = []
    for part in report.parts:
        cost = part.cost
        groups: dict[tuple[str, ...], list[float]] = {}
        for sc in cost.steps:
            if sc.step.op is Op.EINSUM or not sc.step.communicates:
                continue
            comm = sc.comm
            lat = sum(_seconds(cost, lt) for lt, _ in comm.parts)
            bw = sum(_seconds(cost, b) for _, b in comm.parts)
            got = groups.setdefault(tuple(sc.step.axes), [0, 0.0, 0.0])
            got[0] += 1
            got[1] += lat
            got[2] += bw
        axes = tuple(
            AxisComms(k, int(v[0]), v[1], v[2], tuple(h for a in k for h in layout.hops(a)))
            for k, v in groups.items()
        )
        out.append(PartComms(part.name, axes))
    return out


def _seconds(cost: Any, term: Any) -> float:
    got = cost.evaluate(term if isinstance(term, Term) else from_sympy(term))
    if got is None:
        raise UsageError(
            "a slice's communication in seconds needs every size bound", fix="bind them: --sizes"
        )
    return got


def slice_lines(report: StepReport, layout: Layout) -> list[str]:
    """The slice, its logical mesh and each part's communication as text lines."""
    t = layout.topology
    lines = [f"{'slice':<12} {t.name}: {t.devices} chips of {t.chip}; " + "; ".join(layout.lines())]
    for part in slice_comms(report, layout):
        for c in part.axes:
            hops = (
                " (hops per collective: " + " + ".join(f"{n} {h}" for n, h in c.hops) + ")" if c.hops else ""
            )
            lines.append(
                f"{part.part + ' comms':<12} {'_'.join(c.axes) or '-'}: {c.count} collective{'' if c.count == 1 else 's'}, bandwidth "
                f"{time_text(c.bandwidth)}, latency {time_text(c.latency)}{hops}"
            )
    return lines
