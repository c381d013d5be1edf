"""The strategy map: regions of the parameter space where each candidate is fastest, and the cells where
each term of each candidate's cost binds, with printers (text, LaTeX ``cases``, JSON) and point location.

A :class:`Region` is a union of open polyhedra in log space, each printed as solved inequalities
(``B/N > C/(M_X*W_ici)``). Output is deterministic: candidates in the order given, terms in normal-form
order, facets in the order they were derived, no set or dict order anywhere.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import sympy
from sympy import Expr

from shardalg.algebra.symbols import latex_names
from shardalg.costs.derive import Derivation
from shardalg.errors import UsageError
from shardalg.notation.printing.display import Shown, Table
from shardalg.notation.printing.symbology import latex_escape_text

from . import polyhedra
from .candidates import Priced
from .conditions import Atom, Coordinates
from .logspace import Term, to_expr

__all__ = ["Region", "StrategyMap"]


@dataclass(frozen=True)
class Region:
    """Where ``winner`` is the fastest candidate and ``term`` binds its cost (a region of the map), or,
    for a cell, where ``term`` is the largest term of ``winner``'s cost.

    ``conditions`` has one tuple of solved inequalities per polyhedron (the region is their union);
    ``bracket`` > 1 says some boundary compares sums and is only bracketed within that factor;
    ``cost_bracket`` > 1 says the cost there is a sum: between ``term`` and that many times it.
    ``ties`` names later candidates whose cost equals the winner's throughout (the first listed is shown).
    """

    winner: str
    parent: str
    term: Term
    cost: Expr
    polyhedra: tuple[tuple[Atom, ...], ...]
    conditions: tuple[tuple[sympy.Basic, ...], ...]
    bracket: int = 1
    cost_bracket: int = 1
    ties: tuple[str, ...] = ()
    derivation: Derivation = field(default_factory=lambda: Derivation(""), compare=False)

    @property
    def condition(self) -> sympy.Basic:
        """The region as one sympy formula: a union (Or) of conjunctions (And) of solved inequalities."""
        return sympy.Or(*(sympy.And(*c, evaluate=False) for c in self.conditions), evaluate=False)

    def factored(self) -> tuple[tuple[sympy.Basic, ...], tuple[tuple[sympy.Basic, ...], ...]]:
        """(the inequalities every polyhedron shares, each polyhedron's others): how the printers show a
        union, ``common ∧ (rest_1 ∨ rest_2 ...)``. The same region, only written shorter."""
        if len(self.conditions) == 1:
            return self.conditions[0], ()
        common = tuple(c for c in self.conditions[0] if all(c in conj for conj in self.conditions[1:]))
        return common, tuple(tuple(c for c in conj if c not in common) for conj in self.conditions)

    def margin(self, y: tuple[float, ...]) -> float:
        """How deep the point y (log-coordinates) lies inside (positive: inside, in log units)."""
        return max(min((a.margin(y) for a in conj), default=float("inf")) for conj in self.polyhedra)

    @property
    def setting(self) -> tuple[tuple[sympy.Symbol, Expr], ...]:
        return self.term.setting

    def headline(self) -> str:
        what = self.term.label or "its cost"
        extra = "".join(f", {s} = {sympy.sstr(v)}" for s, v in self.setting)
        bracket = f" (within a factor {self.cost_bracket})" if self.cost_bracket > 1 else ""
        tie = f"; tied with {', '.join(self.ties)}" if self.ties else ""
        return f"{self.winner}, {what} binds{extra}: cost {sympy.sstr(self.cost)}{bracket}{tie}"

    def to_json(self) -> dict[str, object]:
        names = latex_names()
        return {
            "candidate": self.winner,
            "parent": self.parent,
            "term": self.term.label,
            "binding": sympy.sstr(self.term.expr()),
            "cost": sympy.sstr(self.cost),
            "setting": {str(s): sympy.sstr(v) for s, v in self.setting},
            "conditions": [
                [{"relation": sympy.sstr(r), "latex": sympy.latex(r, symbol_names=names)} for r in conj]
                for conj in self.conditions
            ],
            "bracket": self.bracket,
            "cost_bracket": self.cost_bracket,
            "ties": list(self.ties),
        }


def _fits(e: Priced, at: Mapping[sympy.Symbol, Expr]) -> bool | None:
    """Whether the entry's constraints hold at the point (each ``lhs <= rhs``, or ``<`` when strict); None
    when the signs of a symbol the point does not give leave it undecided."""
    holds: bool | None = True
    for c in e.constraints:
        room = to_expr(c.rhs).subs(at) - to_expr(c.lhs).subs(at)
        ok = room.is_positive if c.strict else room.is_nonnegative
        if ok is False:
            return False
        holds = None if ok is None else holds
    return holds


def _text_conditions(r: Region, indent: str) -> list[str]:
    common, rest = r.factored()
    lines = [f"{indent}  {sympy.sstr(c)}" for c in common]
    if rest:
        lines.append(f"{indent}  and one of:" if common else f"{indent}  one of:")
        for i, conj in enumerate(rest):
            lines += ([f"{indent}  or"] if i else []) + [f"{indent}    {sympy.sstr(c)}" for c in conj]
    return lines or [f"{indent}  everywhere in the domain"]


def _latex_text(text: str) -> str:
    return r"\text{" + latex_escape_text(text) + "}"


def _latex_condition(r: Region) -> str:
    names = latex_names()

    def conj(cs) -> str:
        return r" \land ".join(sympy.latex(c, symbol_names=names) for c in cs)

    common, rest = r.factored()
    parts = [conj(common)] if common else []
    if rest:
        alts = r" \lor ".join(rf"\left({conj(c)}\right)" if len(c) > 1 else conj(c) for c in rest)
        parts.append(rf"\left({alts}\right)" if common else alts)
    return r" \land ".join(parts) or r"\text{always}"


def _minimum_json(e: Priced) -> dict[str, object] | None:
    m = e.minimum
    if m is None:
        return None
    return {
        "over": str(m.x),
        "kind": m.kind,
        "bracket": m.bracket,
        "lower": None if m.lower is None else sympy.sstr(m.lower),
        "upper": None if m.upper is None else sympy.sstr(m.upper),
        "optima": [{"where": where, "value": sympy.sstr(v)} for where, v in m.optima],
    }


@dataclass(frozen=True, repr=False)
class StrategyMap(Shown):
    """Which candidate is fastest where. ``regions``: (candidate, binding term) pieces of the winner map;
    ``cells``: for each candidate, where each term of its cost binds (its compute- or comms-bound
    conditions); ``notes``: every approximation, tie rule and substitution made (nothing silent)."""

    parameters: tuple[Expr, ...]
    domain: tuple[sympy.Basic, ...]
    entries: tuple[Priced, ...]
    cells: tuple[Region, ...]
    regions: tuple[Region, ...]
    notes: tuple[str, ...]
    coords: Coordinates = field(compare=False, repr=False)
    domain_atoms: tuple[Atom, ...] = field(default=(), compare=False, repr=False)

    @property
    def exact(self) -> bool:
        """Whether every boundary between winners is exact (no bracketed comparison of sums)."""
        return all(r.bracket == 1 for r in self.regions)

    def cells_of(self, name: str) -> tuple[Region, ...]:
        return tuple(c for c in self.cells if c.winner == name or c.parent == name)

    def regions_of(self, name: str) -> tuple[Region, ...]:
        return tuple(r for r in self.regions if r.winner == name or r.parent == name)

    def locate(self, values: Mapping[sympy.Symbol, float]) -> Region | None:
        """The region that holds the point (symbol values), or None outside the domain. Regions are open: on
        a boundary (within 1e-9 in log space of the deepest region's depth) every region there is a choice,
        and the one whose winner fits at the point and is fastest there (its region's cost at the point) is
        returned (where they tie, the candidate listed first). The deepest alone would name a candidate that
        is slower on the boundary of a faster one's memory cap: at ``1/(P^2*Q^2) <= 1`` the capped candidate
        fits, and wins."""
        y = self.coords.logs(dict(values))
        depths = [r.margin(y) for r in self.regions]
        deepest = max(depths, default=-float("inf"))
        if deepest <= -1e-9:
            return None
        there = [r for r, d in zip(self.regions, depths, strict=True) if d >= deepest - 1e-9]
        if len(there) == 1:
            return there[0]
        entries = {e.name: e for e in self.entries}
        at = {k: sympy.Float(v) for k, v in values.items()}
        deepest_region = self.regions[depths.index(deepest)]  # where it is undecided (the first listed)
        fits = [_fits(entries[r.winner], at) for r in there]
        if None in fits:
            return deepest_region
        costs = [r.cost.subs(at) for r in there]
        listed = list(entries)
        fit = sorted((i for i, f in enumerate(fits) if f), key=lambda i: listed.index(there[i].winner))
        for i in fit:  # a symbol the point does not give (a factor of every cost) is compared by its sign
            if all((costs[j] - costs[i]).is_nonnegative for j in fit):
                return there[i]
        return deepest_region

    def example(self, region: Region) -> tuple[float, ...]:
        """A point (log of each parameter) inside the region's first polyhedron and the domain, with every
        coordinate within 20 (then 100, then the LPs' box) where the region reaches that far."""
        atoms, dims = region.polyhedra[0] + self.domain_atoms, len(self.parameters)
        y = polyhedra.interior_point(atoms, dims, (20.0, 100.0, polyhedra.BOX))
        assert y is not None, "a region is kept only when its LP finds an interior"
        return tuple(y)

    def winner(self, values: Mapping[sympy.Symbol, float]) -> str | None:
        r = self.locate(values)
        return r.winner if r is not None else None

    # ---- printers ---------------------------------------------------------------------------------------
    def __str__(self) -> str:
        lines = [f"strategy map over {', '.join(sympy.sstr(p) for p in self.parameters)}"]
        if self.domain:
            lines.append(f"domain: {', '.join(sympy.sstr(d) for d in self.domain)}")
        lines.append("candidates:")
        lines += [f"  {e.name}: {sympy.sstr(e.expr)}" for e in self.entries]
        lines.append("regions (the fastest candidate; where costs tie, the one listed first):")
        for r in self.regions:
            lines.append(f"  {r.headline()}")
            lines += _text_conditions(r, "    ")
        lines.append("cells (where each term of a candidate's cost binds):")
        for c in self.cells:
            lines.append(f"  {c.headline()}")
            lines += _text_conditions(c, "    ")
        if self.notes:
            lines.append("notes:")
            lines += [f"  - {n}" for n in self.notes]
        return "\n".join(lines)

    def latex(self, which: str = "regions") -> str:
        """A ``cases`` block: the winner of each region (``which="regions"``) or each cell's binding term
        (``which="cells"``), with its cost and the conditions. KaTeX renders it."""
        if which not in ("regions", "cells"):
            raise UsageError(f"latex(which=...) is 'regions' or 'cells', not {which!r}")
        names = latex_names()
        rows = []
        for r in self.regions if which == "regions" else self.cells:
            label = _latex_text(r.winner + (f" ({r.term.label})" if r.term.label else ""))
            cost = sympy.latex(r.cost, symbol_names=names)
            rows.append(rf"{label}\colon\ {cost} & \text{{if }} {_latex_condition(r)}")
        return "\\begin{cases}\n" + " \\\\\n".join(rows) + "\n\\end{cases}"

    def _repr_latex_(self) -> str:
        return f"$${self.latex()}$$"

    def summary(self) -> str:
        """``over B/N, F: DP, FSDP+TP win (5 regions, 9 cells)``."""
        winners = ", ".join(dict.fromkeys(r.winner for r in self.regions)) or "none"
        return (
            f"over {', '.join(sympy.sstr(p) for p in self.parameters)}: {winners} win "
            f"({len(self.regions)} regions, {len(self.cells)} cells)"
        )

    def table(self) -> Table:
        """One row a region: the fastest candidate, the term that binds, its cost, where it holds."""
        rows = tuple(
            (
                r.winner,
                r.term.label or "its cost",
                sympy.sstr(r.cost),
                "; ".join(" ".join(line.split()) for line in _text_conditions(r, "")),
            )
            for r in self.regions
        )
        return Table(
            ("fastest", "binds", "cost", "where"),
            rows,
            f"strategy map: {self.summary()}",
            code=(2, 3),
            notes=tuple(f"note: {n}" for n in self.notes),
        )

    def to_json(self) -> dict[str, object]:
        return {
            "parameters": [sympy.sstr(p) for p in self.parameters],
            "domain": [sympy.sstr(d) for d in self.domain],
            "candidates": [
                {
                    "name": e.name,
                    "parent": e.parent,
                    "cost": sympy.sstr(e.expr),
                    "setting": {str(s): sympy.sstr(v) for s, v in e.setting},
                    "constraints": [k.text for k in e.constraints],
                    "minimum": _minimum_json(e),
                }
                for e in self.entries
            ],
            "regions": [r.to_json() for r in self.regions],
            "cells": [c.to_json() for c in self.cells],
            "exact": self.exact,
            "notes": list(self.notes),
        }

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2)
