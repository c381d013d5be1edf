"""A ranking over symbols: which plans can be the cheapest when sizes are unknown, and where.

The planner ranks plans by the bytes they communicate (:mod:`shardalg.algebra.traffic`). With every size
known those are numbers and the cheapest plan is decided. With unknown sizes (a dim or an axis left as a
symbol) a plan's bytes are a polynomial in them, and no size is made up to rank them: :func:`choose` is the
one place that decides.

- A plan is *beaten everywhere* by another when the other's bytes are no more at every size: their
  difference has no negative coefficient (each term is a positive size's monomial). Plans of equal bytes tie
  and are ordered by steps, then by their steps' text (no size enters).
- The plans beaten by none are the *contenders*. One contender: the choice is decided at every size.
- Several contenders whose bytes differ in one unknown size ``s`` (the others known): the choice is exact
  and piecewise in ``s``. The crossings are the positive roots of the differences; between two crossings
  one plan is the cheapest (compared at a point inside, to 50 digits); neighbouring intervals of one plan
  merge. Each :class:`Piece` holds its plan and its interval of ``s``.
- Several contenders over two or more unknown sizes: the choice needs sizes. The answer names them and
  the contenders; it does not claim where each is cheapest.

A piecewise answer is made by :func:`piecewise`: it runs a query, and when the query needs one plan whose
choice is piecewise in one size, runs it again under each piece's interval (:func:`assuming`: within it the
choice is decided, or splits again), so each piece of the answer holds its condition and its result.

Before deciding which sizes matter, the factors common to the contenders' bytes are cancelled (they are
positive, so the order stays): ``2*B*D`` against ``4*B`` is decided by D alone.

Under :func:`strict` (what the commands ``plan``, ``backward``, ``cost``, ``step``, ``compare``, ``optimum``,
``memory``, ``fit`` and ``search`` run under, the public ``plan``, ``backward``, ``cost`` and ``compare`` of
:mod:`shardalg.api`, ``memory``, ``step_time`` and ``search``, and :func:`piecewise`), an answer that needs one plan (:func:`shardalg.planning.
planner.plan`, a backward's gradient plans, a program's costs: :func:`first`) raises :class:`NeedsSizes`
when the choice is not decided, and the ``plans`` listing comes in an order that makes up no size with its
:class:`Choice`, which says which plans are the cheapest where, or which sizes it needs. Outside it (the
library's other callers: the strategy map, which the notes' chapter 5 says) the first plan of the planner's own
order is taken, as before; ``Plans.choice`` says whether that order was decided.

Within :func:`.atpoint.deciding_at` (a fit's plannings), a choice between contenders whose bytes depend on
the point's one size alone is decided at that size's value (the cheapest there leads) and recorded: no
crossing is solved while planning, and the interval where the plans hold is read from the recorded choices.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from shardalg.algebra.traffic import Bytes
from shardalg.errors import UsageError
from shardalg.notation.plan import Plan
from shardalg.notation.printing.text import axes_subscript

from . import atpoint
from .order import plan_text_key

__all__ = [
    "Piece",
    "Choice",
    "NeedsSizes",
    "choose",
    "beaten_everywhere",
    "symbols_of",
    "summary",
    "assuming",
    "assumed_range",
    "piecewise",
    "first",
    "strict",
    "is_strict",
]

T = TypeVar("T")

Factor = tuple[str, str]  # ("dim", name) or ("axis", name), as traffic's monomials name them
DIGITS = 50  # the precision of a comparison at a point strictly between two crossings


def beaten_everywhere(a: Bytes, b: Bytes) -> bool:
    """Whether ``b`` is no more than ``a`` at every size and less somewhere: ``a - b`` has terms, none negative."""
    diff = a + b.scale(-1)
    return bool(diff.terms) and all(c > 0 for _, c in diff.terms)


def symbols_of(b: Bytes) -> tuple[Factor, ...]:
    """The unknown sizes ``b`` depends on, sorted."""
    return tuple(sorted({f for m, _ in b.terms for f, _e in m}))


def summary(plan: Plan) -> str:
    """A plan in one line: its collectives in order (``AllReduce_XYZ(dW)``), or "no communication"."""
    moves = [
        f"{s.op.value}{axes_subscript(s.axes, one_item=s.op.takes_dim)}({s.inputs[0].name})"
        for s in plan.collectives
    ]
    return ", ".join(moves) or "no communication"


def _name(f: Factor) -> str:
    return f[1] if f[0] == "dim" else f"|{f[1]}|"


@dataclass(frozen=True)
class Piece:
    """A contender and, for a choice piecewise in one size, the open interval of that size where it is the
    cheapest (``low`` None: from 0; ``high`` None: without bound). Bounds are exact sympy numbers."""

    plan: Plan
    cost: Bytes
    low: Any = None
    high: Any = None

    def condition(self, symbol: str | None) -> str:
        """The interval as text (``B > 4096``, ``2048 < B < 4096``), or "" when it is the whole range."""
        return interval_text(symbol, self.low, self.high)


def interval_text(symbol: str | None, lo: Any, hi: Any) -> str:
    """``lo < s < hi`` as text, either bound None when absent; "" for the whole range."""
    if symbol is None:
        return ""
    if lo is not None and hi is not None:
        return f"{lo} < {symbol} < {hi}"
    if lo is not None:
        return f"{symbol} > {lo}"
    if hi is not None:
        return f"{symbol} < {hi}"
    return ""


@dataclass(frozen=True)
class Choice:
    """What the planner can say about the cheapest plan when sizes are unknown.

    ``contenders``: the plans no other plan beats at every size, one per distinct cost, each a
    :class:`Piece`. ``symbols``: the unknown sizes their bytes differ in. ``piecewise``: the contenders'
    pieces are exact intervals of the one size in ``symbols``. ``decided``: one plan is the cheapest at every
    size."""

    contenders: tuple[Piece, ...]
    symbols: tuple[str, ...]
    piecewise: bool
    factor: Factor | None = None  # the one size of a piecewise choice, as traffic names it

    @property
    def decided(self) -> bool:
        return len(self.contenders) == 1

    @property
    def symbol(self) -> str | None:
        return self.symbols[0] if self.piecewise else None

    def lines(self, show: Callable[[Plan], str] | None = None) -> list[str]:
        """The choice in words: one line for the verdict, one per contender."""
        show = show or summary
        if self.decided:
            return []
        names = ", ".join(self.symbols)
        if self.piecewise:
            out = [f"the cheapest plan depends on {names}: each plan below is the cheapest where it says"]
        else:
            out = [
                f"the cheapest plan depends on {names}: {len(self.contenders)} plans are not beaten at every "
                f"size by another; give {names} to choose"
            ]
        for piece in self.contenders:
            where = piece.condition(self.symbol)
            out.append(f"  {where + ': ' if where else ''}{show(piece.plan)} ({piece.cost} bytes)")
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "decided": self.decided,
            "needs": [] if self.decided or self.piecewise else list(self.symbols),
            "depends_on": list(self.symbols),
            "pieces": [
                {
                    "plan": summary(p.plan),
                    "bytes": p.cost.json(),
                    "where": p.condition(self.symbol) or None,
                }
                for p in self.contenders
            ],
        }


class NeedsSizes(UsageError):
    """An answer needs one plan, and which plan is the cheapest depends on sizes that were not given."""

    rule = "needs-sizes"

    def __init__(self, what: str, choice: Choice) -> None:
        names = ", ".join(choice.symbols)
        example = ",".join(f"{s}=..." for s in choice.symbols if not s.startswith("|"))
        listed = "\n".join(choice.lines()[1:])
        where = (
            "where each plan is the cheapest" if choice.piecewise else "the plans not beaten at every size"
        )
        super().__init__(
            f"{what}: the cheapest plan depends on sizes not given ({names}); no size is assumed",
            fix=f"give {names}"
            + (f" (--sizes {example})" if example else " (in --mesh)")
            + f"; {where}:\n{listed}",
        )
        self.choice = choice


# Whether an undecided choice raises NeedsSizes (see the module docstring): set by strict() and piecewise().
_STRICT: ContextVar[bool] = ContextVar("shardalg_strict", default=False)


def is_strict() -> bool:
    return _STRICT.get()


@contextmanager
def strict() -> Iterator[None]:
    """Within the block, no plan is chosen where the choice depends on sizes not given: :func:`first`
    raises :class:`NeedsSizes`, and plan lists come in an order that makes up no size."""
    token = _STRICT.set(True)
    try:
        yield
    finally:
        _STRICT.reset(token)


def first(found: Sequence[Plan], what: str) -> Plan:
    """The cheapest of ``found`` (a :class:`~.planset.Plans` list, cheapest first); under :func:`strict`,
    :class:`NeedsSizes` when its :class:`Choice` is not decided (``what`` names the statement)."""
    if _STRICT.get():
        choice = getattr(found, "choice", None)
        if choice is not None and not choice.decided:
            raise NeedsSizes(what, choice)
    return found[0]


def choose(plans: Sequence[Plan], cost: Callable[[Plan], Bytes]) -> tuple[list[Plan], Choice | None]:
    """The plans in an order that makes up no size, and the :class:`Choice` when some cost is symbolic
    (None when every cost is a number: the caller's numeric ranking decides)."""
    costs = [cost(p) for p in plans]
    if all(c.is_number for c in costs):
        return list(plans), None
    base = sorted(range(len(plans)), key=lambda i: (len(plans[i].steps), plan_text_key(plans[i])))
    first: dict[Bytes, int] = {}
    for i in base:
        first.setdefault(costs[i], i)
    distinct = list(first)
    beaten = {c: sum(beaten_everywhere(c, o) for o in distinct) for c in distinct}
    kept = [c for c in distinct if not beaten[c]]
    at = atpoint.decide(kept) if len(kept) > 1 else None
    if at is not None:  # decided at a point of the one size the bytes depend on (a fit's run)
        winner = plans[first[kept[at]]]
        ordered = sorted(base, key=lambda i: (plans[i] is not winner, beaten[costs[i]], len(plans[i].steps)))
        names = tuple(sorted({_name(f) for c in kept for f in symbols_of(c)}))
        return [plans[i] for i in ordered], Choice((Piece(winner, kept[at]),), names, False)
    exprs, named = _cancelled(kept)
    factors = sorted({named[x] for a in exprs for b in exprs for x in (a - b).free_symbols})
    pieces = _pieces(kept, exprs, factors[0], named, *_range(factors[0])) if len(factors) == 1 else None
    if pieces is None:
        contenders = tuple(Piece(plans[first[c]], c) for c in kept)
    else:
        contenders = tuple(Piece(plans[first[c]], c, lo, hi) for c, lo, hi in pieces)
        if len(contenders) == 1:
            contenders = (Piece(contenders[0].plan, contenders[0].cost),)
    lead = {id(p.plan): n for n, p in enumerate(contenders)}
    ordered = sorted(
        base,
        key=lambda i: (lead.get(id(plans[i]), len(lead)), beaten[costs[i]], len(plans[i].steps)),
    )
    split = pieces is not None and len(contenders) > 1
    choice = Choice(contenders, tuple(_name(f) for f in factors), split, factors[0] if split else None)
    return [plans[i] for i in ordered], choice


def _cancelled(costs: list[Bytes]) -> tuple[list[Any], dict[Any, Factor]]:
    """The costs as sympy, with every factor common to all of them cancelled (it is positive, so the order
    stays), and the sizes' symbols named as traffic names them: ``2*B*D`` against ``4*B`` is ``D`` against
    ``2``, decided by D alone. A common factor that could be negative (a coefficient below 0) is kept."""
    import sympy

    from shardalg.algebra.symbols import axis_size, dim_size

    named = {(dim_size(f[1]) if f[0] == "dim" else axis_size(f[1])): f for c in costs for f in symbols_of(c)}
    exprs = [c.sympy() for c in costs]
    if not named or len(exprs) < 2:
        return exprs, named
    gens = sorted(named, key=str)

    def positive(e: Any) -> bool:
        if e.is_number:
            return bool(e > 0)
        return all(k > 0 for k in sympy.Poly(e, *gens).coeffs())

    over = sympy.lcm_list([sympy.fraction(sympy.together(e))[1] for e in exprs])
    if not positive(over):
        return exprs, named
    polys = [sympy.expand(sympy.cancel(e * over)) for e in exprs]
    common = sympy.gcd_list(polys)
    if common == 0 or not positive(common):
        return exprs, named
    return [sympy.expand(sympy.cancel(q / common)) for q in polys], named


def _pieces(
    costs: list[Bytes], exprs: list[Any], factor: Factor, named: dict[Any, Factor], low: Any, high: Any
) -> list[tuple[Bytes, Any, Any]] | None:
    """The intervals of ``factor`` within (``low``, ``high``) where each cost is the least (exact crossings;
    ``exprs`` are the costs with their common factors cancelled); None when a cost depends on another
    unknown size too (the differences cancel it, but the values do not)."""
    import sympy

    if any(named[x] != factor for e in exprs for x in e.free_symbols):
        return None
    s = next(x for x, f in named.items() if f == factor)
    roots: set[Any] = set()
    for i, a in enumerate(exprs):
        for b in exprs[i + 1 :]:
            num = sympy.numer(sympy.together(a - b))
            for r in sympy.Poly(num, s).real_roots():
                if r.is_positive and (low is None or r > low) and (high is None or r < high):
                    roots.add(r)
    cuts = sorted(roots, key=lambda r: sympy.N(r, DIGITS))
    bounds = [low, *cuts, high]
    out: list[tuple[Bytes, Any, Any]] = []
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        point = _inside(lo, hi)
        values = [sympy.N(e.subs(s, point), DIGITS) for e in exprs]
        best = min(range(len(costs)), key=lambda k: (values[k], k))
        if out and out[-1][0] == costs[best]:
            out[-1] = (costs[best], out[-1][1], hi)
        else:
            out.append((costs[best], lo, hi))
    return out


def _inside(lo: Any, hi: Any) -> Any:
    """A point strictly inside the open interval (lo, hi) of positive numbers (None: 0 or no bound)."""
    import sympy

    if lo is None and hi is None:
        return sympy.Integer(1)
    if lo is None:
        return hi / 2
    if hi is None:
        return lo * 2
    return (lo + hi) / 2


# The intervals assumed of unknown sizes while a piecewise answer runs a query again under one piece:
# ((factor, low, high), ...); :func:`choose` decides within them.
_ASSUMED: ContextVar[tuple[tuple[Factor, Any, Any], ...]] = ContextVar("shardalg_assumed", default=())


def assumed_range(factor: Factor) -> tuple[Any, Any]:
    """The open interval of ``factor`` (``("dim", "B")``) assumed now, within a piece of :func:`piecewise`
    (None, None: every positive value; either bound None when absent)."""
    return _range(factor)


def _range(factor: Factor) -> tuple[Any, Any]:
    """The interval of ``factor`` assumed now (None, None: every positive value)."""
    lo = hi = None
    for f, a, b in _ASSUMED.get():
        if f == factor:
            lo = a if lo is None or (a is not None and a > lo) else lo
            hi = b if hi is None or (b is not None and b < hi) else hi
    return lo, hi


@contextmanager
def assuming(factor: Factor, low: Any, high: Any) -> Iterator[None]:
    """Within the block, ``factor`` lies in the open interval (``low``, ``high``) (None: no bound): a
    choice piecewise in it is made within that interval."""
    token = _ASSUMED.set((*_ASSUMED.get(), (factor, low, high)))
    try:
        yield
    finally:
        _ASSUMED.reset(token)


MAX_PIECES = 16  # pieces one piecewise answer may split into (each runs the query once more)


def piecewise(run: Callable[[], T]) -> list[tuple[str, T]]:
    """``run()``'s answer, as pieces: [("", answer)] when every plan it needs is decided; else, when a choice
    is piecewise in one size, ``run()`` under each piece's interval, each answer with its condition
    (``B > 32768/5``). A choice that needs sizes (two or more unknown ones) raises its :class:`NeedsSizes`."""
    out: list[tuple[str, T]] = []
    with strict():
        _split(run, out)
    return out


def _split(run: Callable[[], T], out: list[tuple[str, T]]) -> None:
    try:
        answer = run()
    except NeedsSizes as err:
        choice = err.choice
        if not choice.piecewise or choice.factor is None or len(out) + len(choice.contenders) > MAX_PIECES:
            raise
        for piece in choice.contenders:
            with assuming(choice.factor, piece.low, piece.high):
                _split(run, out)
        return
    where = [interval_text(_name(f), *_range(f)) for f in dict.fromkeys(f for f, _a, _b in _ASSUMED.get())]
    out.append((" and ".join(w for w in where if w), answer))
