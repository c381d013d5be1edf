"""Branch and bound over a training search's candidates: each one's step bounded below without its backward.

Most of a search's time is the derived backward of each sharded statement (:mod:`.pieces`), and most
candidates can take no place in the result. So, in training (:func:`bounded`), each admitted candidate's step
is first bounded below from what needs no backward:

- its forward phase, exact: a forward plan is each statement's own (:attr:`~shardalg.models.analysis.Analysis.
  forward_plans` plans each statement alone), priced as the pieces price it, each sharded statement once per
  search (the cost model needs no backward: a fused attention's scores are named on chip,
  :attr:`~shardalg.models.analysis.Analysis.on_chip`);
- its backward phase at least the backward's compute, and that at least the unsharded program's backward
  compute over the devices (``floor``): a local product's FLOPs are at least its whole FLOPs over the devices
  (no mesh axis splits two dims of one local product), a function's HBM bytes at least its whole bytes over
  the devices, and the backward of every sharding runs the same products and functions.

A phase takes max(its compute, its busiest lane) under ``steady`` and its compute plus every collective
under ``serial``, at least its compute under both, and a part of the step its phases' sum times its count
(the repeated layer's, or once). The candidates are then priced in the order of their bounds, in two rounds.
In the first, one is put aside when its bound is above every place in the table it could take: the
``top``-th fitting candidate so far and its strategy's best so far (and that of each other strategy whose
assignment writes the same program: :attr:`.price.Pricer.aliases`). That fixes what the result shows (the
top rows and each strategy's best: :func:`shown_params`). In the second, a candidate put aside is wanted
only as the best with its parameters laid out alike, which :func:`.paid.against` sets a shown candidate
against: it is left unpriced when no shown candidate has its parameters, or when its bound is above the
best with them so far. (Before the two rounds, every layout's best was priced: on ``X=2,Y=2,Z=2`` the causal
layer's search priced 538 candidates and 2,820 pieces; with them, 418 and 2,598.)

A place is a rank key (:func:`.price.rank_key`: the seconds to 12 digits, then the communication, then the
bytes, then the space's order), and a candidate is compared with it by the least key it can have
(:func:`low_key`): its bound, its communication at least (its forward's lanes, exact, and those of its
backward's pieces priced so far: :func:`comms_of`) and its bytes counted before any plan, each lowered by
:data:`EPS` for the float sums' last bits. Where steps tie, as a compute-bound step does under many shardings
(its FLOPs over the devices at the chip's peak), the communication decides the rows, and now the bound too:
compared by seconds alone, the causal layer's search on ``X=2,Y=2`` priced 106 candidates, 29 of them shown or
set against a shown one, and the others, those sampled, within a microsecond of the place they were priced
for; compared by key it prices 67. On ``X=2,Y=2,Z=2``: 152 candidates and 2,285 pieces, not 418 and 2,598
(155 and 2,286 before a gradient's partial sums were added before one reduction).

Candidates share pieces, so as pieces are priced a waiting candidate's bound is raised before it is priced:
its backward phase holds the backward of each of its pieces (and additions of a gradient's parts) priced so
far, exactly, and each other piece's compute at least that piece unsharded over the devices (the floor above,
piece by piece: :func:`group_floors`); its bound is the least over the keep choices it may take. A candidate
whose bound so raised is above the next one's waits its turn again. A candidate at the head of the queue is
priced one piece at a time: of the keep choice that gives its bound, the piece not priced yet whose floor is
the largest (the one most likely to raise it), then it is bounded again and waits its turn again; so a
candidate whose first pieces put it above its places is left with the rest of them unpriced (on
``X=2,Y=2,Z=2`` the causal layer's search priced 1,725 pieces, not 2,436, when this landed; the space has
since kept candidates it had dropped as symmetric). With every piece of a
candidate priced, its bound is the least step of its keep choices. The most a better bound on the pieces not
priced yet could save: with the backward of each of them known exactly (a first run's prices), the causal
layer's search on ``X=2,Y=2,Z=2`` prices 797 pieces, not its 2,285 (on ``X=2,Y=2``: 384, not 568), with the same
result; the candidates priced in full use 779 of them. And the most pricing fewer candidates could save, with the
places cut down (measured on ``X=2,Y=2,Z=2``, one run after another): admitting the 3,660 candidates and
pricing their forward phases takes about 32 s of CPU before any backward is priced; with the winner its only
place (no other row, no strategy's best) the search prices 164 pieces in 37.5 to 41.6 s (two runs); with the
ten rows its only places, 790 pieces in 65.7 s; with every place the result shows, 2,285 pieces in 98.0 s (on
``X=2,Y=2``: 4 pieces in 2.6 s, 239 in 6.2 s, 568 in 8.1 s).

Where a step is not the sum of its statements because of remat, a ZeRO stage or a precision recipe
(:func:`bounded`), candidates are priced whole, and bounded the same way but for pieces: the forward runs the
same plans (ZeRO-3 gathers the parameters before them), and remat and ZeRO add work to the phases, which more
work never shortens. The README's search (LLaMA-3 70B on v5p-512, ``--remat block``) prices 134 of its 252 admitted
candidates so; LLaMA-3 8B on ``X=2,Y=2`` with ``--zero 3`` 269 of 779.

Bounds only grow and the places only come down, so a candidate put aside or left unpriced takes none of
them: the winner, the ranked rows, each strategy's best and what each is set against are those of pricing
every candidate (``tests/search/test_branchbound.py`` checks both, and that every bound, first or raised, is
at most its candidate's step). The fitting candidates of the result are the priced ones; how many were left
unpriced is said in the result, its JSON and the CLI's summary.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from shardalg.costs.schedule import OverlapPolicy
from shardalg.costs.terms import point
from shardalg.models.analysis import analyze
from shardalg.models.program import model_program
from shardalg.models.step import _cost_model  # the step's own cost model
from shardalg.notation.syntax import Program

from .groups import Pieces, split_statements, sub_program
from .pieces import Seconds, StatementPricer, phase_comms, phase_of, phase_seconds, price_piece
from .price import Admitted, Entry, Pricer, Settings, digits, rank_key, strategy_firsts
from .space import Assignment

__all__ = ["Bounds", "price_bounded", "shown_params"]

# relative: how far a bound's float sums may fall above the priced ones, which add the same terms in another
# order (their last bits differ); a bound is lowered by it before it is compared with a place
EPS = 1e-13
INF: tuple = (float("inf"),)  # a place no candidate holds yet: above every key


def bounded(st: Settings) -> bool:
    """Whether a search's candidates are bounded below before they are priced: in training, with its steps in
    phases (``steady`` or ``serial``: under ``schedule`` steps run as their dependencies allow) and one pass a
    step. Priced from statements or whole (:func:`.pieces.whole_program_reason`): a remat policy adds the
    statements it reruns to the backward phase; a ZeRO stage adds collectives (the parameters gathered: stage 3
    before the forward and the backward, stages 1 and 2 once after the update) and reduces the gradients onto
    shards (:mod:`shardalg.models.zerostep`) in the backward, whose collectives the bound does not read; a
    precision recipe changes the bytes held, not the seconds (a step prices the program's own dtypes). None
    changes the forward's plans or lowers the backward's compute."""
    return st.mode == "train" and st.policy is not OverlapPolicy.SCHEDULE and st.state.micro == 1


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


def forward_phase(admitted: Admitted, st: Settings, prices: Prices) -> dict[bool, Seconds]:
    """``admitted``'s forward phase per part of the step (True: once), exact. Each sharded statement's forward
    is priced once per search (``prices``: the candidates of a space share most of their statements)."""
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
    return forward


Known = dict[bool, tuple[Seconds, float]]  # per part: the backward's seconds priced, the floor of the rest


def bound_of(
    forward: dict[bool, Seconds], known: Known, layers: float, st: Settings, floor: dict[bool, float]
) -> float:
    """A step whose forward phase is ``forward`` per part (True: once), whose backward phase holds the pieces
    priced so far (``known``: their seconds, and the compute floor of the pieces not priced yet) and takes at
    least ``floor``'s compute, cannot be faster than this: the backward is the priced pieces' phase with its
    compute raised to at least the floor and at least the priced compute plus the others' floors, taken as a
    phase is (:func:`.pieces.phase_seconds`: more compute or more on a lane never makes it shorter)."""
    total = 0.0
    for once, phase in forward.items():
        priced, rest = known[once]
        if phase.empty and priced.empty and not floor[once]:
            continue
        back = replace(priced, compute=max(floor[once], priced.compute + rest))
        total += (1.0 if once else layers) * (
            phase_seconds(phase, st.policy) + phase_seconds(back, st.policy)
        )
    return total


NOTHING: Known = {False: (Seconds(), 0.0), True: (Seconds(), 0.0)}  # no piece priced: the floor alone


@dataclass
class _Candidate:
    """An admitted candidate waiting to be priced: its place in the space's order, its forward per part and
    its pieces (found when first bounded again)."""

    order: int
    admitted: Admitted
    forward: dict[bool, Seconds]
    pieces: Pieces | None = None


def comms_of(forward: dict[bool, Seconds], known: Known, layers: float, st: Settings) -> float:
    """The communication of a step whose forward phase is ``forward`` per part and whose backward holds the
    pieces priced so far (``known``) is at least this, counted as an entry counts it
    (:meth:`.pieces.StatementPricer._entry`): per phase its busiest lane under ``steady`` (a lane's sum only
    grows as the other pieces are added), every collective under ``serial``; a part's phases times its count."""
    total = 0.0
    for once, phase in forward.items():
        priced, _ = known[once]
        total += (1.0 if once else layers) * (phase_comms(phase, st.policy) + phase_comms(priced, st.policy))
    return total


def low_key(c: _Candidate, bound: float, comms: float) -> tuple:
    """The least :func:`.price.rank_key` ``c`` can have, its step at least ``bound``, its communication at
    least ``comms`` and its bytes at least those counted before any plan: each lowered by :data:`EPS` and
    taken to 12 digits as the key takes them (rounding is monotone), so each is at most the key's own and the
    tuple at most the key in their order."""
    low = 1 - EPS
    return (digits(bound * low), digits(comms * low), c.admitted.lower * low, c.order)


def lower_bound(c: _Candidate, st: Settings, floor: dict[bool, float]) -> float:
    """A step ``c``'s pricing cannot beat before any of its backward is priced (the module docstring): its
    forward phase exact, its backward at the floor, per part."""
    return bound_of(c.forward, NOTHING, float(c.admitted.model.layers), st, floor)


def group_floors(pricer: StatementPricer) -> list[float]:
    """Each group of the search's program (:func:`.pieces.split_statements`'s places) unsharded, its
    backward's compute over the devices, in seconds: what any sharding of it takes at least (the module
    docstring's floor, piece by piece)."""
    st = pricer.settings
    devices = float(st.mesh.devices)
    return [
        price_piece(sub_program(pricer.base, g), st, False).phases[-1].compute / devices
        for g in split_statements(pricer.base)
    ]


def bound_again(pricer: Pricer, c: _Candidate, floor: dict[bool, float], floors: list[float]) -> float:
    """``c``'s bound with the backward of its pieces priced so far, each other piece at its floor
    (``floors``: :func:`group_floors`): the least over the keep choices it may take (the settings' own, or
    either)."""
    return _bound_and_next(pricer, c, floor, floors)[0]


def comms_again(pricer: Pricer, c: _Candidate, floor: dict[bool, float], floors: list[float]) -> float:
    """``c``'s communication at least (:func:`comms_of`), with the backward of its pieces priced so far: the
    least over the keep choices it may take."""
    return _bound_and_next(pricer, c, floor, floors)[1]


Next = tuple[Program, bool, bool]  # a piece not priced yet, the keep choice it is priced under, its part


def _bound_and_next(
    pricer: Pricer, c: _Candidate, floor: dict[bool, float], floors: list[float]
) -> tuple[float, float, Next | None]:
    """:func:`bound_again`, :func:`comms_again`, and the piece to price next to raise them: of the keep choice
    that gives the least bound and communication (keeping on a tie: a backward that reads the kept copies is
    the cheaper to plan), the unpriced piece whose floor is the largest (None: every piece of that choice is
    priced, or the candidate is priced whole)."""
    st = pricer.settings
    layers = float(c.admitted.model.layers)
    if c.pieces is None and isinstance(pricer, StatementPricer):
        c.pieces = pricer.pieces_of(c.admitted.assignment, c.admitted.program)
    if c.pieces is None:  # priced whole: nothing of it is known before
        return lower_bound(c, st, floor), comms_of(c.forward, NOTHING, layers, st), None
    keeps = (st.keep,) if st.keep is not None else (True, False)
    out = []
    for keep in keeps:
        got = pricer.priced_backward(c.pieces, keep)
        known = {once: (s, sum(floors[k] for run in rest for k in run)) for once, (s, rest) in got.items()}
        rest = [run for _, runs in got.values() for run in runs]
        out.append(
            (
                bound_of(c.forward, known, layers, st, floor),
                comms_of(c.forward, known, layers, st),
                keep,
                rest,
            )
        )
    # each keep choice's step and communication at least these: the candidate's, whichever it takes, at
    # least their least each
    bound, comms = min(x[0] for x in out), min(x[1] for x in out)
    _, _, keep, rest = min(out, key=lambda x: x[:2])  # the first of a tie: keeping
    if not rest:
        return bound, comms, None
    run = max(rest, key=lambda r: sum(floors[k] for k in r))
    return bound, comms, (c.pieces.subs[c.pieces.split.runs.index(run)], bool(keep), pricer.once(run))


def shown_params(
    fitting: list[tuple[Entry, int]], top: int, aliases: dict[Program, dict[str, Assignment]]
) -> set[str]:
    """The parameters' layouts of the candidates a result shows (:meth:`.searchresult.SearchResult.shown`):
    its ``top`` fastest fitting ones and each strategy's fastest (a candidate counts for each strategy whose
    assignment writes its program too), ``fitting`` with their places in the space's order."""
    ranked = [e for e, _ in sorted(fitting, key=lambda x: rank_key(*x))]
    bests = [e for e, _ in strategy_firsts(ranked, aliases).values()]
    return {e.assignment.params_text for e in (*ranked[:top], *bests)}


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
    floors = group_floors(pricer) if isinstance(pricer, StatementPricer) else []
    bounds = Bounds(floor_layer=floor[False], floor_once=floor[True])
    rejected: list[tuple[int, Entry]] = []  # in the space's order, as pricing every candidate lists them
    waiting: list[_Candidate] = []
    heap: list[tuple[float, int]] = []  # (bound, place in ``waiting``), the least first
    prices: Prices = {}
    for order, a in enumerate(assignments):
        got = pricer.admit(a)
        if isinstance(got, Admitted):
            c = _Candidate(order, got, forward_phase(got, st, prices))
            heap.append((lower_bound(c, st, floor), len(waiting)))
            waiting.append(c)
        elif got is not None:
            rejected.append((order, got))  # over the cap before any plan
        if progress is not None:
            progress(pricer.pruned.visited, total)
    heapq.heapify(heap)
    done, total = pricer.pruned.visited, pricer.pruned.visited + len(waiting)
    fitting: list[tuple[Entry, int]] = []
    # the places, as rank keys (:func:`.price.rank_key`): the ``top`` fitting keys so far, least first, and
    # each strategy's and each parameter layout's least so far
    best: list[tuple] = []
    of_strategy: dict[str, tuple] = {}
    of_params: dict[str, tuple] = {}
    later: list[tuple[float, int]] = []  # above its table places: wanted only as its parameters' best
    # the first round: the rows and each strategy's best; the second: the parameters' bests they are set against
    for second in (False, True):
        while heap:
            bound, k = heapq.heappop(heap)
            c = waiting[k]
            params = c.admitted.assignment.params_text
            # its strategy's best, and that of each strategy another assignment writing its program is of
            strategies = (c.admitted.strategy, *pricer.aliases.get(c.admitted.program, {}))
            if second:
                place = of_params.get(params, INF)
            else:
                place = max(
                    best[-1] if len(best) >= top else INF, *(of_strategy.get(s, INF) for s in strategies)
                )
            low = low_key(c, bound, 0.0)
            if low <= place:
                # the pieces priced since it was bounded may raise its bound: then it waits its turn again
                again, comms, missing = _bound_and_next(pricer, c, floor, floors)
                again = max(bound, again)
                if again > bound and heap and again > heap[0][0]:
                    heapq.heappush(heap, (again, k))
                    continue
                bound = again
                low = low_key(c, bound, comms)
                if missing is not None and low <= place:
                    # one more of its pieces priced, then bounded again: it may fall behind another one, or
                    # above its places, before the rest of it is priced
                    pricer.piece(*missing)
                    heapq.heappush(heap, (bound, k))
                    continue
            if low > place and not second:
                later.append((bound, k))
                continue
            done += 1
            if progress is not None:
                progress(done, total)
            if low > place:
                bounds.unpriced += 1
                continue
            e = pricer.price(c.admitted)
            if not e.fits:
                rejected.append((c.order, e))
                continue
            fitting.append((e, c.order))
            key = rank_key(e, c.order)
            best = sorted([*best, key])[:top]
            for s in strategies:
                of_strategy[s] = min(of_strategy.get(s, key), key)
            of_params[params] = min(of_params.get(params, key), key)
        if not second:
            shown = shown_params(fitting, top, pricer.aliases)
            heap = [x for x in later if waiting[x[1]].admitted.assignment.params_text in shown]
            heapq.heapify(heap)
            bounds.unpriced += len(later) - len(heap)
            done += len(later) - len(heap)
            if progress is not None:
                progress(done, total)
    return fitting, [e for _, e in sorted(rejected, key=lambda x: x[0])], bounds
