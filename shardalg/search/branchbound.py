"""Branch and bound over a training search's candidates: each one's step bounded below without its backward.

Most of a search's time is the derived backward of each sharded statement (:mod:`.pieces`), and most
candidates can take no place in the result. So, where a step is the sum of its statements
(:func:`.pieces.whole_program_reason` None) in training, each admitted candidate's step is first bounded
below from what needs no backward:

- its forward phase, exact: a forward plan is each statement's own (:attr:`~shardalg.models.analysis.Analysis.
  forward_plans` plans each statement alone), priced as the pieces price it, each sharded statement once per
  search (under a fused attention the cost model reads the backward's tensors, so there the bound derives
  the backward all the same, and saves only the pricing);
- its backward phase at least the backward's compute, and that at least the unsharded program's backward
  compute over the devices (``floor``): a local product's FLOPs are at least its whole FLOPs over the devices
  (no mesh axis splits two dims of one local product), a function's HBM bytes at least its whole bytes over
  the devices, and the backward of every sharding runs the same products and functions.

A phase takes max(its compute, its busiest lane) under ``steady`` and its compute plus every collective
under ``serial``, at least its compute under both, and a part of the step its phases' sum times its count
(the repeated layer's, or once). The candidates are then priced in the order of their bounds; one is left
unpriced when its bound is above every place it could take: the ``top``-th fitting candidate so far, its
strategy's best so far and the best so far with its parameters laid out alike (what :func:`.paid.against`
sets a shown candidate against). Bounds only grow along that order and those places only come down, so a
candidate left unpriced takes none of them: the winner, the ranked rows, each strategy's best and what each
is set against are those of pricing every candidate (``tests/search/test_branchbound.py`` checks both, and that
every bound is at most its candidate's step). The fitting candidates of the result are the priced ones; how
many were left unpriced is said in the result, its JSON and the CLI's summary.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from shardalg.costs.terms import point
from shardalg.models.analysis import analyze
from shardalg.models.program import model_program
from shardalg.models.step import _cost_model  # the step's own cost model
from shardalg.notation.syntax import Program

from .pieces import Seconds, phase_of, phase_seconds
from .price import Admitted, Entry, Pricer, Settings
from .space import Assignment

__all__ = ["Bounds", "price_bounded"]

MARGIN = 1e-9  # relative: a bound this close to a place is priced (the two sums' last bits differ)


@dataclass
class Bounds:
    """What the bound did: how many admitted candidates it left unpriced, and the backward's compute floor
    per part of the step (seconds: the repeated layer's, once)."""

    unpriced: int = 0
    floor_layer: float = 0.0
    floor_once: float = 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "unpriced": self.unpriced,
            "backward_floor_s": {"layer": self.floor_layer, "once": self.floor_once},
        }


def _floor(base: Program, st: Settings) -> dict[bool, float]:
    """The unsharded program's backward compute over the devices, per part (True: once), in seconds."""
    whole = analyze(model_program(base, st.mesh, st.sizes), "train", "none")
    costs = _cost_model(whole, st.chip, st.policy)
    at = point(costs.efficiency.effective(st.chip.values()))
    devices = float(st.mesh.devices)
    return {
        once: phase_of([p for info, p in whole.grad_plans if info.once == once], whole, costs, at).compute
        / devices
        for once in (False, True)
    }


Prices = dict[tuple[object, bool, object], Seconds]  # (statement, causal, cost model) -> its forward's


def lower_bound(admitted: Admitted, st: Settings, floor: dict[bool, float], prices: Prices) -> float:
    """A step ``admitted``'s pricing cannot beat (the module docstring): its forward phase exact, its backward
    at the floor, per part. Each sharded statement's forward is priced once per search (``prices``: the
    candidates of a space share most of their statements), the parts' phases summed from them."""
    model = admitted.model
    a = analyze(model, "train", "none", attention_said=False)
    costs = _cost_model(a, st.chip, st.policy)
    at = point(costs.efficiency.effective(st.chip.values()))
    forward = {False: Seconds(), True: Seconds()}
    for info in model.statements:
        if info.kind == "declaration":
            continue
        key = (info.statement, info.index in a.causal_products, costs)
        got = prices.get(key)
        if got is None:
            got = prices[key] = phase_of([a.forward_plan(info)], a, costs, at)
        forward[info.once].add(got)
    total = 0.0
    for once, phase in forward.items():
        if phase.empty and not floor[once]:
            continue
        count = 1.0 if once else float(model.layers)
        total += count * (phase_seconds(phase, st.policy) + floor[once])
    return total


def price_bounded(
    pricer: Pricer,
    assignments: Iterable[Assignment],
    top: int,
    progress: Callable[[int, int], None] | None,
    total: int,
) -> tuple[list[tuple[Entry, int]], list[Entry], Bounds]:
    """The fitting candidates (each with its place in the space's order) and the rejected ones of a training
    search, the candidates priced in the order of their bounds and left unpriced as the module docstring says;
    ``progress(done, total)`` as assignments are admitted and then as they are priced (the total grows by
    the candidates admitted)."""
    st = pricer.settings
    floor = _floor(pricer.base, st)
    bounds = Bounds(floor_layer=floor[False], floor_once=floor[True])
    rejected: list[tuple[int, Entry]] = []  # in the space's order, as pricing every candidate lists them
    admitted: list[tuple[float, int, Admitted]] = []
    prices: Prices = {}
    for order, a in enumerate(assignments):
        got = pricer.admit(a)
        if isinstance(got, Admitted):
            admitted.append((lower_bound(got, st, floor, prices), order, got))
        elif got is not None:
            rejected.append((order, got))  # over the cap before any plan
        if progress is not None:
            progress(pricer.pruned.visited, total)
    done, total = pricer.pruned.visited, pricer.pruned.visited + len(admitted)
    fitting: list[tuple[Entry, int]] = []
    best: list[float] = []  # the fitting seconds so far, fastest first, ``top`` of them
    of_strategy: dict[str, float] = {}
    of_params: dict[str, float] = {}
    for bound, order, got in sorted(admitted, key=lambda x: x[:2]):
        params = got.assignment.params_text
        place = max(
            best[-1] if len(best) >= top else float("inf"),
            of_strategy.get(got.strategy, float("inf")),
            of_params.get(params, float("inf")),
        )
        done += 1
        if progress is not None:
            progress(done, total)
        if bound > place * (1 + MARGIN):
            bounds.unpriced += 1
            continue
        e = pricer.price(got)
        if not e.fits:
            rejected.append((order, e))
            continue
        fitting.append((e, order))
        seconds = e.seconds if e.seconds is not None else float("inf")
        best = sorted([*best, seconds])[:top]
        of_strategy[got.strategy] = min(of_strategy.get(got.strategy, seconds), seconds)
        of_params[params] = min(of_params.get(params, seconds), seconds)
    return fitting, [e for _, e in sorted(rejected, key=lambda x: x[0])], bounds
