"""The region engine: candidates' costs in, the strategy map out.

    >>> m = strategy_map([Candidate("DP", dp), Candidate("TP", tp)], over=[B / N, C / W, F])   # doctest: +SKIP
    >>> print(m.regions[0].condition)
    B/N > C/(M_X*W_ici)

1. Each candidate's cost is put in normal form (a maximum of sums of monomials), substituted, and minimized
   over its split variable if asked (:mod:`.candidates`, :mod:`.minimize`).
2. Cells: for each candidate and each term of its cost, the polyhedron where that term is the largest
   (``compute`` binds: the compute-bound condition), kept when an LP finds it non-empty.
3. Regions: a candidate wins where it meets its constraints and, against every other candidate, is
   faster or the other breaks a constraint. ``max_i a_i < max_j b_j`` is "some b_j exceeds every a_i", so
   each comparison is a union of polyhedra; intersected cell by cell with LP pruning, the region is a union
   of polyhedra, each reduced to the facets that bound it. Equal costs go to the candidate listed first.
4. Each facet is solved for the first parameter of ``solve_for`` it involves, with its derivation.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import sympy
from sympy import Expr

from shardalg.costs.derive import Derivation
from shardalg.errors import UsageError

from . import polyhedra as lp
from .candidates import Candidate, Constraint, Priced, price
from .conditions import (
    All,
    Atom,
    Coordinates,
    Formula,
    both,
    brackets,
    conjunction,
    cost_less,
    either,
    less,
    negate,
)
from .logspace import Term, normal_form, substitute
from .prover import Prover
from .strategymap import Region, StrategyMap

__all__ = ["strategy_map"]

Poly = tuple[Atom, ...]
Piece = tuple[Poly, int]  # a polyhedron and the bracket factor of the comparisons that made it
MAX_POLYHEDRA = 20000  # polyhedra one region may split into while it is refined (bounded work)
MAX_TERMS = 200  # terms over all candidates: each term is a cell, each cell an LP per competitor's clause


class _Space:
    """The coordinates, the domain and the solve order shared by every step of one map."""

    def __init__(self, coords: Coordinates, domain: Poly, order: tuple[int, ...]) -> None:
        self.coords, self.domain, self.order, self.dims = coords, domain, order, len(coords.params)
        self._points: dict[Poly, tuple[float, ...] | None] = {}
        self._implies: dict[tuple[Poly, Atom], bool] = {}
        self._solved: dict[Atom, sympy.Basic] = {}
        self.prover = Prover(self.dims)

    def nonempty(self, poly: Poly, hint: Poly | None = None) -> bool:
        """Whether the polyhedron (within the domain) has an interior. A point found inside ``hint`` (a
        polyhedron that contains this one's other facets) that also clears the new facets settles it
        without an LP; otherwise the LP's own point is kept for the next question."""
        if poly not in self._points:
            seed = self._points.get(hint) if hint is not None else None
            if seed is not None and all(a.margin(seed) > lp.TOL for a in poly):
                self._points[poly] = seed
            else:
                self._points[poly] = self.prover.interior(self.domain + poly)
        return self._points[poly] is not None

    def implied(self, poly: Poly, conj: Poly) -> bool:
        """Whether the polyhedron (within the domain) lies inside every atom of ``conj`` (memoized: the
        same question recurs across cells and competitors). A known inside point that breaks an atom
        answers no without an LP."""
        point = self._points.get(poly)
        for a in conj:
            key = (poly, a)
            if key not in self._implies:
                if a in poly:
                    self._implies[key] = True
                elif point is not None and a.margin(point) < -lp.TOL:
                    self._implies[key] = False
                else:
                    self._implies[key] = self.prover.implies(self.domain + poly, a)
            if not self._implies[key]:
                return False
        return True

    def tidy(self, pieces: Sequence[Piece]) -> tuple[tuple[Poly, ...], int]:
        """The polyhedra without redundant facets, those inside another dropped; and the largest bracket
        factor among the pieces kept (a dropped piece's points are claimed by the one that holds it)."""
        simple = [(self.prover.simplify(p, keep=self.domain), b) for p, b in pieces]
        out: list[Piece] = []
        for i, (p, b) in enumerate(simple):
            inside = any(
                self.implied(p, q) and (j < i or not self.implied(q, p))
                for j, (q, _) in enumerate(simple)
                if j != i and q != p
            )
            if not inside and p not in [x for x, _ in out]:
                out.append((p, b))
        return tuple(p for p, _ in out), max((b for _, b in out), default=1)

    def holds(self, poly: Poly, f: Formula) -> bool:
        """Whether ``f`` holds throughout the polyhedron (sufficient test: a disjunction holds when one of
        its parts does)."""
        if isinstance(f, bool):
            return f
        if isinstance(f, Atom):
            return self.implied(poly, (f,))
        if isinstance(f, All):
            return all(self.holds(poly, g) for g in f.parts)
        return any(self.holds(poly, g) for g in f.parts)

    def refine(self, polys: list[Piece], f: Formula) -> list[Piece]:
        """Each polyhedron intersected with the formula, part by part: an atom is a new facet (kept when the
        polyhedron stays non-empty), a conjunction refines in turn, a disjunction leaves a polyhedron
        unchanged where one of its parts holds throughout and otherwise splits it into the non-empty
        intersections with each part. Empty pieces are dropped at every step, so nothing is expanded
        that the LP has not found room for. Each piece carries the largest bracket factor of the
        comparisons it relied on (1: all exact)."""
        if f is True or not polys:
            return polys
        if f is False:
            return []
        if isinstance(f, Atom):
            return [
                (q, max(b, f.bracket)) for p, b in polys if self.nonempty(q := p if f in p else p + (f,), p)
            ]
        if isinstance(f, All):
            for g in f.parts:
                polys = self.refine(polys, g)
            return polys
        out: list[Piece] = []
        exact = [g for g in f.parts if brackets(g) == 1]
        outside = negate(either(*exact)) if exact else True  # where no exact part holds
        by_bracket = sorted(f.parts, key=brackets)  # the first part that holds has the least bracket
        for p, b in polys:
            holding = next((brackets(g) for g in by_bracket if self.holds(p, g)), None)
            if holding is not None:
                pieces = [(p, max(b, holding))]
            else:
                pieces = []
                for g in f.parts:
                    got = self.refine([(p, b)], g)
                    if brackets(g) > 1:  # an approximate part matters only where no exact part holds
                        got = [(q, qb if self.refine([(q, 1)], outside) else b) for q, qb in got]
                    pieces += got
                pieces = self.outermost(pieces)
            out += [x for x in pieces if x not in out]
            if len(out) > MAX_POLYHEDRA:
                raise UsageError(
                    f"a region splits into more than {MAX_POLYHEDRA} polyhedra",
                    rule="search-limit",
                    fix="map fewer candidates or parameters at once",
                )
        return out

    def outermost(self, pieces: list[Piece]) -> list[Piece]:
        """The pieces one polyhedron split into, without those inside another of them (no more exact than
        it): their union is the same, and what a later formula splits they no longer multiply. Of two equal
        pieces the first stays."""
        return [
            (q, b)
            for k, (q, b) in enumerate(pieces)
            if not any(
                m != k and c <= b and self.implied(q, r) and (m < k or not self.implied(r, q))
                for m, (r, c) in enumerate(pieces)
            )
        ]

    def solve(self, a: Atom) -> sympy.Basic:
        if a not in self._solved:
            self._solved[a] = a.solved(self.coords, self.order)
        return self._solved[a]

    def solved(self, polys: Sequence[Poly]) -> tuple[tuple[sympy.Basic, ...], ...]:
        return tuple(tuple(self.solve(a) for a in p) for p in polys)


def _feasible(e: Priced, space: _Space) -> Formula:
    def one(k: Constraint) -> Formula:
        why = f"{e.name} within {k.text}"
        if k.strict:
            return cost_less(k.lhs, k.rhs, space.coords, why=why)
        return negate(cost_less(k.rhs, k.lhs, space.coords, why=why))

    return both(*(one(k) for k in e.constraints))


def _infeasible(e: Priced, space: _Space) -> Formula:
    """Where ``e`` breaks one of its constraints (``lhs <= rhs`` broken is ``rhs < lhs``)."""

    def one(k: Constraint) -> Formula:
        why = f"{e.name} breaks {k.text}"
        if k.strict:
            return negate(cost_less(k.lhs, k.rhs, space.coords, why=why))
        return cost_less(k.rhs, k.lhs, space.coords, why=why)

    return either(*(one(k) for k in e.constraints)) if e.constraints else False


def _derivation(title: str, e: Priced, polys: Sequence[Poly], space: _Space) -> Derivation:
    """The steps: the cost, then each facet as first written and solved; the facets every polyhedron shares
    first, then each polyhedron's own, numbered, when the region is a union."""
    d = Derivation(title)
    d.add(f"cost of {e.name}", e.expr)
    common = [a for a in polys[0] if all(a in p for p in polys[1:])] if polys else []
    groups = [("", common)] + [
        (f"({k}) " if len(polys) > 1 else "", [a for a in p if a not in common])
        for k, p in enumerate(polys, 1)
    ]
    for prefix, atoms in groups:
        for a in atoms:
            d.add(prefix + (a.why or "condition"), a.relation())
            k = next((i for i in space.order if a.lam[i] != 0), None)
            param = space.coords.params[k] if k is not None else None
            d.add(
                prefix + (f"solve for {sympy.sstr(param)}" if param is not None else "in the parameters"),
                space.solve(a),
            )
    return d


def _cells(e: Priced, space: _Space) -> list[Region]:
    """Where each term binds: its sum (a piece of the cost's maximum) is above every other sum (like terms
    cancelled first, so a step of phases, ``c + Max(a, b)``, compares ``a`` with ``b`` exactly) and the term is
    the largest of its sum. A maximum of monomials has one term a sum; a single sum compares its terms."""
    out = []
    for piece in e.cost:
        others = [q for q in e.cost if q is not piece]
        labels = list(dict.fromkeys(x.name for x in piece))
        where: list[Piece] = [((), 1)]  # where the sum binds, shared by its terms
        for q in (
            others
        ):  # one comparison at a time: a sum that binds nowhere stops at the first that rules it out
            where = space.refine(
                where, less(q, piece, space.coords, why=f"{_sum_name(piece)} above {_sum_name(q)}")
            )
            if not where:
                break
        for t in piece:
            f = both(
                *(
                    cost_less(((o,),), ((t,),), space.coords, why=f"{t.name} above {o.name}")
                    for o in piece
                    if o is not t
                ),
            )
            pieces = space.refine(where, f)
            if not pieces:
                continue
            polys_t, _ = space.tidy(pieces)
            d = _derivation(f"where {t.name} binds the cost of {e.name}", e, polys_t, space)
            d.result = sympy.Or(*(sympy.And(*c) for c in space.solved(polys_t)))
            named = t
            if others and len(labels) > 1:  # a sum of phases: say what the binding term is added to
                named = Term(t.mono, f"{t.name} (in {' + '.join(labels)})", t.setting)
            out.append(
                Region(
                    e.name,
                    e.parent,
                    named,
                    sympy.Add(*(x.expr() for x in piece)),
                    polys_t,
                    space.solved(polys_t),
                    1,
                    len(piece) * _minimum_bracket(e),
                    (),
                    d,
                )
            )
    return out


def _minimum_bracket(e: Priced) -> int:
    """The factor ``e``'s cost is known within: a minimum over a split with no closed form is its largest
    term's minimum, the true one between that and this factor times it (:mod:`.minimize`); 1 otherwise."""
    return e.minimum.bracket if e.minimum is not None else 1


def _sum_name(piece: tuple[Term, ...]) -> str:
    return " + ".join(t.name for t in piece)


def _ties(
    i: int, cell: Region, polys: Sequence[Poly], entries: Sequence[Priced], space: _Space
) -> tuple[str, ...]:
    """Later candidates whose cost equals the winner's there: throughout the region, or in part of it (where
    the same sum binds them too: for a maximum of monomials, the same term)."""
    e, out = entries[i], []
    piece = _binding(e, cell)
    monos = sorted((x.mono for x in piece), key=str)
    for f in entries[i + 1 :]:
        if f.cost == e.cost:
            out.append(f.name)
            continue
        same = [q for q in f.cost if sorted((x.mono for x in q), key=str) == monos]
        if not same or len(piece) > 1 and len(f.cost) == 1:
            continue
        below = both(*(less(q, same[0], space.coords) for q in f.cost if q is not same[0]))
        if below is False:
            continue
        if all(space.holds(p, below) for p in polys):
            out.append(f.name)
        elif space.refine([(p, 1) for p in polys], below):
            out.append(f"{f.name} where its {cell.term.name} binds too")
    return tuple(out)


def _clauses(
    i: int,
    piece: tuple[Term, ...],
    entries: Sequence[Priced],
    space: _Space,
    ways: _Ways,
    made: list[Formula],
) -> Iterator[Formula]:
    """Where ``entries[i]`` meets its constraints and beats each other entry (or the other breaks one of
    its own), within a cell of its cost where the sum ``piece`` binds: there its cost is that sum, so each
    comparison reads the one sum, not the maximum of all (``max_P P <= Q`` would be a conjunction over the
    sums P, each a disjunction over the other's sums, split polyhedron by polyhedron). Each clause is written
    when first asked for (a cell found empty asks no further) and kept in ``made`` for the piece's next cell."""
    e = entries[i]
    mine = (piece,)
    yield ways.feasible[i]
    others = [j for j in range(len(entries)) if j != i]
    for k, j in enumerate(others):
        if k == len(made):
            f = entries[j]
            why = f"{e.name} faster than {f.name}"
            beats = (
                cost_less(mine, f.cost, space.coords, why=why)
                if j < i
                else negate(cost_less(f.cost, mine, space.coords, why=why))
            )
            made.append(either(beats, ways.infeasible[j]))
        yield made[k]


def _binding(e: Priced, cell: Region) -> tuple[Term, ...]:
    """The sum of ``e``'s cost that binds in ``cell``."""
    return next(p for p in e.cost if sympy.Add(*(x.expr() for x in p)) == cell.cost)


class _Ways:
    """Where each entry meets its constraints and where it breaks one, written once for every comparison."""

    def __init__(self, entries: Sequence[Priced], space: _Space) -> None:
        self.feasible = [_feasible(e, space) for e in entries]
        self.infeasible = [_infeasible(e, space) for e in entries]


def _regions(
    i: int, entries: Sequence[Priced], cells: Sequence[Region], space: _Space, ways: _Ways
) -> list[Region]:
    e = entries[i]
    by_piece: dict[tuple[Term, ...], list[Formula]] = {}
    out = []
    for cell in cells:
        piece = _binding(e, cell)
        pieces = [(p, 1) for p in cell.polyhedra]
        for clause in _clauses(i, piece, entries, space, ways, by_piece.setdefault(piece, [])):
            pieces = space.refine(pieces, clause)
            if not pieces:
                break
        if not pieces:
            continue
        polys_t, bracket = space.tidy(pieces)
        # where e's cost is only bracketed (its minimum over a split), it may win here by its largest term's
        # minimum yet be up to that factor slower than another candidate
        bracket *= _minimum_bracket(e)
        d = _derivation(f"where {e.name} is fastest and {cell.term.name} binds", e, polys_t, space)
        d.result = sympy.Or(*(sympy.And(*c) for c in space.solved(polys_t)))
        ties = _ties(i, cell, polys_t, entries, space)
        out.append(
            Region(
                e.name,
                e.parent,
                cell.term,
                cell.cost,
                polys_t,
                space.solved(polys_t),
                bracket,
                cell.cost_bracket,
                ties,
                d,
            )
        )
    return out


def _domain(domain: Sequence[sympy.Basic], common: Mapping, coords: Coordinates) -> Poly:
    atoms: list[Atom] = []
    for r in domain:
        if r is sympy.true or r is sympy.false:
            raise UsageError(
                f"a domain condition evaluated to {r} before it reached the map (sympy decides "
                "M_X >= 1 for a positive integer M_X)",
                rule="parameters",
                fix="write it unevaluated: sympy.Ge(M_X, 1, evaluate=False)",
            )
        if isinstance(r, sympy.GreaterThan | sympy.StrictGreaterThan):
            lhs, rhs = r.rhs, r.lhs
        elif isinstance(r, sympy.LessThan | sympy.StrictLessThan):
            lhs, rhs = r.lhs, r.rhs
        else:
            raise UsageError(
                f"a domain condition is an inequality such as N >= 1, not {r!r}", rule="parameters"
            )
        f = cost_less(
            substitute(normal_form(lhs), common),
            substitute(normal_form(rhs), common),
            coords,
            why=f"domain: {sympy.sstr(r)}",
        )
        if f is False:
            raise UsageError(f"the domain condition {sympy.sstr(r)} never holds", rule="parameters")
        conj = conjunction(f)
        if conj is None:
            raise UsageError(
                f"the domain condition {sympy.sstr(r)} is a union of regions; give comparisons of monomials",
                rule="parameters",
            )
        atoms += [a for a in conj if a not in atoms]
    if atoms and not lp.nonempty(atoms, len(coords.params)):
        raise UsageError("the domain is empty: its conditions contradict each other", rule="parameters")
    return tuple(atoms)


def strategy_map(
    candidates: Sequence[Candidate],
    over: Sequence[Expr],
    *,
    substitute: Mapping | None = None,
    domain: Sequence[sympy.Basic] = (),
    solve_for: Sequence[Expr] | None = None,
) -> StrategyMap:
    """The strategy map of ``candidates`` over the parameters ``over`` (monomials such as ``B/N``).

    ``substitute`` applies to every candidate (a tie such as ``{Y: N/X}``, see :func:`.candidates.eliminate`);
    ``domain`` restricts the parameters (``N >= 1``, ``M_X >= 1``); each facet is solved for the first of
    ``solve_for`` (default: ``over``, in order) that it involves.
    """
    if not candidates:
        raise UsageError("a strategy map needs at least one candidate")
    coords = Coordinates(over)
    common = dict(substitute or {})
    entries: list[Priced] = []
    notes: list[str] = []
    for c in candidates:
        if not isinstance(c, Candidate):
            raise UsageError(f"candidates are Candidate(name, cost, ...), not {type(c).__name__}")
        priced, n = price(c, common)
        entries += priced
        notes += n
    terms = sum(len(e.terms()) for e in entries)
    if terms > MAX_TERMS:
        raise UsageError(
            f"the candidates' costs have {terms} terms in all; a map takes at most {MAX_TERMS}",
            rule="search-limit",
            fix="map fewer candidates at once, or simplify their costs",
        )
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        raise UsageError(f"candidate names must differ: {', '.join(names)}")
    solve = list(solve_for or over)
    unknown = [sympy.sstr(s) for s in solve if s not in coords.params]
    if unknown:
        raise UsageError(
            f"solve_for names {', '.join(unknown)}, which are not among the parameters", rule="parameters"
        )
    order = tuple(coords.params.index(s) for s in solve) + tuple(range(len(coords.params)))
    space = _Space(coords, _domain(domain, common, coords), order)
    cells = {e.name: _cells(e, space) for e in entries}
    ways = _Ways(entries, space)
    regions = [r for i, e in enumerate(entries) for r in _regions(i, entries, cells[e.name], space, ways)]
    notes += _notes(entries, regions, common)
    return StrategyMap(
        tuple(over),
        tuple(domain),
        tuple(entries),
        tuple(c for e in entries for c in cells[e.name]),
        tuple(regions),
        tuple(notes),
        coords,
        space.domain,
    )


def _notes(entries: Sequence[Priced], regions: Sequence[Region], common: Mapping) -> list[str]:
    notes = []
    if common:
        notes.append(
            "substituted in every cost: " + ", ".join(f"{k} -> {sympy.sstr(v)}" for k, v in common.items())
        )
    for e in entries:
        if e.bracket > 1:
            notes.append(
                f"{e.name}: its cost has a sum of up to {e.bracket} terms, so in each of its cells the "
                f"cost lies between the binding term and {e.bracket} times it"
            )
    if any(r.bracket > 1 for r in regions):
        notes.append(
            "some boundaries compare sums that do not cancel to one monomial a side: they compare the "
            "largest terms and are bracketed within the factor given per region"
        )
    if any(r.ties for r in regions):
        notes.append(
            "where costs are equal the candidate listed first is shown; each region names the tied ones"
        )
    notes.append(
        "regions are open polyhedra in log space; on a boundary (measure zero) no candidate is named"
    )
    return notes
