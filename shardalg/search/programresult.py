"""``program_map``: the strategy map of a program (see :mod:`.programmap`) with the point the sizes, mesh and
chip give, the integer splits of FSDP+TP next to its X_opt, and printers (text, LaTeX ``cases``, JSON).

The map's parameters are ``over`` plus whatever the costs need beyond it (C/W_ici, M_X, M_Y, N, in that
order), so its conditions stay the book's symbolic ones; sizes, mesh and chip only place the current point.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
from sympy import Expr

from shardalg.algebra.context import chosen_mesh, merged_sizes
from shardalg.algebra.mesh import as_mesh
from shardalg.algebra.symbols import latex_names
from shardalg.costs.schedule import OverlapPolicy
from shardalg.errors import UsageError
from shardalg.models.program import replaced_notes
from shardalg.notation.printing.display import Shown, Table

from . import polyhedra
from .candidates import Candidate
from .conditions import Coordinates
from .logspace import mono_of
from .programmap import (
    EXTRAS,
    M_X,
    M_Y,
    STRATEGY_NAMES,
    H,
    N,
    Strategy,
    X,
    Y,
    _program,
    candidates_of,
    chip_values,
    choice_notes,
    coordinates_for,
    dim_symbols,
    keep_notes,
    known_symbols,
    mesh_devices,
    parameters,
    state_parameter,
)
from .regions import strategy_map as engine_map
from .splits import AxisSplits, axis_splits, divisors, torus_splits
from .strategymap import Region, StrategyMap
from .zerofamily import cap_notes, family_strategies

__all__ = ["ProgramMap", "program_map", "strategy_map"]


def _ge(a, b) -> sympy.Basic:
    return sympy.GreaterThan(a, b, evaluate=False)


@dataclass(repr=False)
class ProgramMap(Shown):
    """The strategy map of a program: ``map`` (the regions, cells and their derivations), the strategies as
    sharded and costed, the current ``point`` (symbol values) and the region holding it, FSDP+TP's integer
    ``splits``, the LPs solved, and every default and approximation in ``notes``."""

    map: StrategyMap
    strategies: tuple[Strategy, ...]
    over: tuple[Expr, ...]
    added: tuple[Expr, ...]
    overlap: OverlapPolicy
    passes: str
    values: dict[sympy.Symbol, float]
    here: Region | None
    splits: AxisSplits | None
    lps: int
    notes: list[str] = field(default_factory=list)

    @property
    def parameters(self) -> tuple[Expr, ...]:
        return self.map.parameters

    def point(self) -> tuple[float, ...] | None:
        """The current point in the map's log coordinates, or None when some value is missing."""
        needed = self.map.coords.symbols
        if any(s not in self.values for s in needed):
            return None
        return self.map.coords.logs(self.values)

    def conditions(self, name: str, term: str | None = None) -> tuple[tuple[sympy.Basic, ...], ...]:
        """The solved conditions of ``name``'s regions (its winner regions), or of its cell where ``term``
        (``"compute"``, ``"comms X"``) binds."""
        if term is None:
            return tuple(c for r in self.map.regions_of(name) for c in r.conditions)
        return tuple(c for r in self.map.cells_of(name) if r.term.label == term for c in r.conditions)

    @property
    def x_opt(self) -> Expr | None:
        """FSDP+TP's continuous optimum X_opt (keeping the gathered copies when the map places it both ways):
        None without FSDP+TP, or when its cost has no single stationary point (:attr:`x_opt_note` says how
        many)."""
        e = self._fsdp_tp()
        return e.minimum.optimum if e is not None and len(e.minimum.optima) == 1 else None

    @property
    def x_opt_note(self) -> str | None:
        """Why FSDP+TP has no X_opt when its cost has several stationary points (as under ``schedule``)."""
        e = self._fsdp_tp()
        if e is None or len(e.minimum.optima) == 1:
            return None
        return f"FSDP+TP has no single X_opt: its cost has {len(e.minimum.optima)} stationary points in {e.minimum.x}"

    def _fsdp_tp(self, name: str | None = None) -> Any:
        """FSDP+TP's minimized entry: keeping the gathered copies when the map places it both ways."""
        names = (name,) if name else ("FSDP+TP kept", "FSDP+TP")
        for n in names:
            e = next((e for e in self.map.entries if e.parent == n and e.minimum is not None), None)
            if e is not None:
                return e
        return None

    def _x_opt_lines(self) -> list[str]:
        """``FSDP+TP X_opt = ...`` for each way FSDP+TP is placed, or why it has none."""
        out = []
        for n in ("FSDP+TP", "FSDP+TP kept"):
            e = self._fsdp_tp(n)
            if e is None:
                continue
            if len(e.minimum.optima) == 1:
                out.append(f"{n} X_opt = {sympy.sstr(e.minimum.optimum)}")
            else:
                out.append(
                    f"{n} has no single X_opt: its cost has {len(e.minimum.optima)} stationary points in "
                    f"{e.minimum.x}"
                )
        return out

    # ---- printers ---------------------------------------------------------------------------------------
    def _point_text(self) -> list[str]:
        out = []
        if self.values:
            out.append(
                "values: "
                + ", ".join(
                    f"{s} = {v:.6g}" for s, v in sorted(self.values.items(), key=lambda kv: kv[0].name)
                )
            )
        y = self.point()
        if y is not None:
            coords = ", ".join(
                f"{sympy.sstr(p)} = {sympy.exp(v).evalf(6)}" for p, v in zip(self.parameters, y, strict=True)
            )
            out.append(f"current point: {coords}")
            out.append(
                f"  fastest there: {self.here.headline() if self.here else 'none (outside every region)'}"
            )
        return out

    def __str__(self) -> str:
        lines = [
            f"strategy map of the program ({self.passes}, overlap {self.overlap}); strategies: "
            + ", ".join(s.name for s in self.strategies)
        ]
        for s in self.strategies:
            lines.append(
                f"  {s.name}: {'; '.join(str(st) for st in s.program.statements if 'params' not in str(st))}"
            )
        lines.append(str(self.map))
        lines += self._x_opt_lines()
        lines += self._point_text()
        if self.splits is not None:
            lines.append(str(self.splits))
        lines.append(f"linear programs solved: {self.lps}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def latex(self) -> str:
        out = self.map.latex()
        if self.x_opt is not None:
            out += "\n\\qquad X_{\\mathrm{opt}} = " + sympy.latex(self.x_opt, symbol_names=latex_names())
        return out

    def _repr_latex_(self) -> str:
        return f"$${self.latex()}$$"

    def summary(self) -> str:
        """``DP, FSDP, TP, FSDP+TP (forward + backward, steady); fastest here: FSDP+TP ...``."""
        here = f"; fastest here: {self.here.winner}" if self.here is not None else ""
        names = ", ".join(s.name for s in self.strategies)
        return f"{names} ({self.passes}, overlap {self.overlap}): {self.map.summary()}{here}"

    def table(self) -> Table:
        """The map's regions, with the current point and FSDP+TP's splits under it."""
        t = self.map.table()
        extra = [*self._point_text()]
        extra += [x for x in self._x_opt_lines() if "X_opt =" in x]
        if self.splits is not None:
            extra.append(" ".join(str(self.splits).split()))
        return Table(
            t.headers,
            t.rows,
            f"strategy map of the program ({self.passes}, overlap {self.overlap})",
            t.code,
            (*extra, *t.notes, *(f"note: {n}" for n in self.notes)),
        )

    def to_json(self) -> dict[str, Any]:
        y = self.point()
        return {
            "passes": self.passes,
            "overlap": self.overlap.value,
            "over": [sympy.sstr(p) for p in self.over],
            "added": [sympy.sstr(p) for p in self.added],
            "strategies": [
                {
                    "name": s.name,
                    "program": "\n".join(str(st) for st in s.program.statements),
                    "cost": sympy.sstr(s.cost.total),
                    "substitute": {str(k): sympy.sstr(v) for k, v in s.substitute.items()},
                    "kept_gathered": None if s.kept is None else sympy.sstr(s.kept),
                    "strategy": s.strategy,
                }
                for s in self.strategies
            ],
            "map": self.map.to_json(),
            "x_opt": None if self.x_opt is None else sympy.sstr(self.x_opt),
            "x_opts": {
                n: (None if len(e.minimum.optima) != 1 else sympy.sstr(e.minimum.optimum))
                for n in ("FSDP+TP", "FSDP+TP kept")
                if (e := self._fsdp_tp(n)) is not None
            },
            "values": {str(k): v for k, v in sorted(self.values.items(), key=lambda kv: kv[0].name)},
            "point": None
            if y is None
            else {sympy.sstr(p): float(sympy.exp(v)) for p, v in zip(self.parameters, y, strict=True)},
            "fastest": None if self.here is None else self.here.to_json(),
            "splits": None if self.splits is None else self.splits.to_json(),
            "lps": self.lps,
            "notes": list(self.notes),
        }

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False)


def _cap(memory: float | str | None, chip: Any) -> float | bool | None:
    """The cap in bytes (True: symbolic, no value), or None for no cap."""
    if memory is None:
        return None
    if memory == "hbm":
        if chip is None:
            raise UsageError("memory='hbm' needs a chip", rule="parameters", fix="give hw='tpu-v5p' (--hw)")
        return _finite(chip.hbm_capacity.value, f"the HBM of {getattr(chip, 'name', 'the chip')}")
    if memory == "symbolic":
        return True
    given = memory
    if isinstance(memory, str):
        try:
            memory = float(memory)
        except ValueError:
            raise UsageError(
                f"the memory cap is bytes (e.g. 95e9), 'hbm' or 'symbolic', not {memory!r}", rule="parameters"
            ) from None
    if isinstance(memory, bool) or not isinstance(memory, int | float) or not 0 < memory:
        raise UsageError(f"the memory cap is a positive number of bytes, not {memory!r}", rule="parameters")
    return _finite(memory, "the memory cap", given)


def _finite(value: Any, what: str, given: Any = None) -> float:
    """``value`` as a float of bytes; a UsageError when it is beyond a float's range (an int of 400 digits,
    ``1e400``): no cap that large can be compared with a byte count, and rounding it to infinity would be
    silent."""
    try:
        out = float(value)
    except OverflowError:
        out = float("inf")
    if out != out or out == float("inf"):
        shown = str(given if given is not None else value)
        shown = shown if len(shown) <= 40 else f"{shown[:20]}... ({len(shown)} characters)"
        raise UsageError(
            f"{what} is a finite number of bytes (at most {sys.float_info.max:.3g}), not {shown}",
            rule="parameters",
        )
    return out


def _covered(s: sympy.Symbol, params: Sequence[Expr]) -> bool:
    """Whether the parameters express ``s`` (so a domain condition on it can be placed on the map)."""
    try:
        Coordinates(params).split(mono_of(s))
    except UsageError:
        return False
    return True


def _links(mesh, values: dict, notes: list[str]) -> list[dict] | None:
    """M_X and M_Y at the point, and the integer splits of FSDP+TP to rank (None: no numeric mesh)."""
    names = tuple(a.name for a in mesh.axes)
    n = int(sympy.prod([a.size for a in mesh.axes]))
    if set(names) == {"X", "Y"}:
        values[M_X], values[M_Y] = mesh["X"].links, mesh["Y"].links
        notes.append(
            f"M_X = {mesh['X'].links}, M_Y = {mesh['Y'].links} from the mesh's X and Y, kept for every split"
        )
        return [{X: d, Y: n // d} for d in divisors(n)]
    if len(names) >= 2 and all(a.size >= 2 for a in mesh.axes):
        notes.append(
            f"the mesh {mesh} is read as a torus: FSDP+TP's splits take whole axes, each with its M_X, M_Y"
        )
        return list(torus_splits([a.size for a in mesh.axes], X, Y, M_X, M_Y))
    links = mesh.axes[0].links if len(names) == 1 else 1
    values[M_X] = values[M_Y] = links
    notes.append(
        f"M_X = M_Y = {links}: the mesh has one axis"
        if len(names) == 1
        else "M_X = M_Y = 1: the mesh is neither X, Y nor a torus of axes >= 2"
    )
    return [{X: d, Y: n // d} for d in divisors(n)]


def _splits(
    s: Strategy, m: StrategyMap, values: dict, splits: list[dict], n: int, notes: list[str]
) -> AxisSplits | None:
    needed = s.cost.total.free_symbols - {X, Y, M_X, M_Y}
    missing = sorted(x.name for x in needed if x not in values)
    if missing:
        notes.append(f"FSDP+TP's integer splits need values for {', '.join(missing)}")
        return None
    e = next(e for e in m.entries if e.parent == s.name and e.minimum is not None)
    got = axis_splits(
        s.cost.total,
        X,
        n,
        values,
        splits=splits,
        then=s.cost.comms,
        optimum=e.minimum if M_X in values else None,
    )
    if M_X not in values:  # a torus: the best split's links place the point, and X_opt is read with them
        best = dict(got.best.values)
        values[M_X], values[M_Y] = best[M_X], best[M_Y]
        notes.append(f"the point takes M_X = {best[M_X]}, M_Y = {best[M_Y]} from FSDP+TP's best torus split")
        got = axis_splits(s.cost.total, X, n, values, splits=splits, then=s.cost.comms, optimum=e.minimum)
    return got


def program_map(
    program: Any,
    mesh: Any = None,
    hw: Any = None,
    over: Sequence[Expr | str] = ("B/N", "F"),
    *,
    overlap: object = OverlapPolicy.STEADY,
    passes: str = "step",
    sizes: Mapping[str, int] | None = None,
    remat: Any = None,
    names: Sequence[str] = STRATEGY_NAMES,
    domain: Sequence[sympy.Basic] = (),
    memory: float | str | None = None,
    optimizer: Any = None,
    keep_gathered: bool | None = None,
) -> ProgramMap:
    """The strategy map of ``program`` (an MLP-like block with ``params`` declared) over ``over``.

    ``mesh`` (its device count N, its axes' links), ``hw`` (C, W_ici) and ``sizes`` (B, D, F) place the
    current point; ``passes``: the whole training ``step`` (default), or the ``forward`` or ``backward``
    pass alone (the book reads each strategy's condition off the pass it names); ``domain`` adds conditions
    to N >= 1, M_X >= 1, M_Y >= 1. ``memory``: a cap per device on the parameters, their gradients and the
    optimizer state (the models layer's parts; activations and gathered weights are not counted), in bytes
    or ``"hbm"`` (the chip's); its symbol is H and the map gains the parameter D*F/H. ``keep_gathered``:
    None (default) places each strategy whose backward reads the forward's gathered copies both ways,
    gathering again (its name) and keeping them (``NAME kept``: memory, under the cap when there is one),
    and says where keeping wins; True keeps them, False gathers again. ``names``: the strategies to map, of
    DP, FSDP, TP, FSDP+TP and the ZeRO members of FSDP's family (ZeRO-1, ZeRO-2; ZeRO-3 is FSDP:
    :mod:`.zerofamily`)."""
    before = polyhedra.LP_CALLS[0]
    notes: list[str] = []
    overlap = OverlapPolicy.of(overlap)
    strategies, family = family_strategies(program, overlap, passes, remat, names, optimizer, keep_gathered)
    for k, v in strategies[0].notes:
        notes.append(f"{k}: {v}")
    notes += family
    chip, numbers = chip_values(hw)
    cap = _cap(memory, chip)
    notes += keep_notes(strategies, cap is not None)
    if keep_gathered is None and any(s.name != s.strategy for s in strategies):
        notes.append(
            "gathered copies: each strategy whose backward reads the forward's gathered copies is placed "
            "gathering them again (its name) and keeping them ('NAME kept'), the faster wins (default; "
            "keep_gathered / --keep-gathered or --gather-again forces one)"
        )
    extras = EXTRAS
    if cap is None:
        notes.append(
            "no memory cap: FSDP only saves memory, so it never beats DP here (give memory=... / --memory)"
        )
    else:
        extras = (state_parameter(strategies), *EXTRAS)
        notes.append(
            "memory cap H on the parameters, gradients and optimizer state per device, and the gathered "
            "copies a backward keeps (activations and the forward's transient gathered weights not counted)"
        )
        notes += cap_notes(strategies)
    cands = candidates_of(strategies, capped=cap is not None)
    params, added = coordinates_for(cands, parameters(over, known_symbols(strategies)), extras)
    if added:
        notes.append("also mapped over " + ", ".join(map(sympy.sstr, added)) + " (the costs depend on them)")
    dom = tuple(_ge(s, 1) for s in (N, M_X, M_Y) if _covered(s, params)) + tuple(domain)
    m = engine_map(cands, over=params, domain=dom)
    notes += choice_notes(strategies, [r.parent for r in m.regions], cap is not None)
    values: dict[sympy.Symbol, float] = {}
    dims = dim_symbols(strategies)
    for k, v in dict(sizes or {}).items():
        if k not in dims:
            raise UsageError(
                f"sizes names {k!r}, which is not a dim of the program ({', '.join(dims)})", rule="parameters"
            )
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise UsageError(f"the size of {k} is a positive integer, not {v!r}", rule="parameters")
    # the program's own mesh line and sizes place the point too; what ``mesh`` and ``sizes`` replace is said
    prog = _program(program)
    bound, said = merged_sizes(prog.sizes, sizes)
    chosen, mesh_said = chosen_mesh(prog.mesh, as_mesh(mesh))
    notes[:0] = [f"{k}: {v}" for k, v in replaced_notes((*mesh_said, *said))]
    values.update({dims[k]: v for k, v in bound.items() if k in dims})
    if cap is not None and cap is not True:
        values[H] = cap
    used = set().union(*(s.cost.total.free_symbols for s in strategies))
    values.update({k: v for k, v in numbers.items() if k in used})
    mesh_, n = mesh_devices(chosen)
    splits = None
    if n is not None:
        values[N] = n
        pairs = _links(mesh_, values, notes)
        named = {s.name: s for s in strategies}
        fsdp_tp = named.get("FSDP+TP kept") or named.get("FSDP+TP")
        if fsdp_tp is not None:
            if fsdp_tp.name != "FSDP+TP":
                notes.append("FSDP+TP's integer splits are priced keeping the gathered copies")
            splits = _splits(fsdp_tp, m, values, pairs, n, notes)
    elif mesh_ is not None:
        notes.append("the mesh has a symbolic size: N stays a symbol")
    missing = sorted({s.name for s in m.coords.symbols if s not in values})
    here = None
    if missing:
        notes.append(
            f"no current point: no values for {', '.join(missing)}"
            + ("" if chip is not None else " (give --hw for C and W_ici)")
        )
    else:
        here = m.locate(values)
    return ProgramMap(
        m,
        strategies,
        tuple(params[: len(params) - len(added)]),
        added,
        overlap,
        passes,
        values,
        here,
        splits,
        polyhedra.LP_CALLS[0] - before,
        notes,
    )


def strategy_map(x: Any, *args: Any, **kw: Any) -> StrategyMap | ProgramMap:
    """``strategy_map(program, mesh=..., hw=..., over=("B/N", "F"), overlap="steady")``: the map of a
    program's named strategies (:func:`program_map`); ``strategy_map([Candidate, ...], over=[...])``: the
    map of costs given as expressions (:func:`.regions.strategy_map`)."""
    if isinstance(x, Sequence) and not isinstance(x, str) and x and all(isinstance(c, Candidate) for c in x):
        return engine_map(x, *args, **kw)
    if isinstance(x, Sequence) and not isinstance(x, str) and not x:
        return engine_map(x, *args, **kw)  # refuses: a map needs a candidate
    return program_map(x, *args, **kw)
