"""The public ``plans``, ``plan``, ``backward``, ``cost``, ``compare``, ``compute_bound`` and ``latex``. ``plans`` and ``plan`` are the planner's, with the keyword options of a call (``hw``, ``model``,
``overlap``, ``exact``, ...) folded once into the :class:`~shardalg.costs.costmodel.CostModel` it ranks by
(strings become values here, at the edge).

Imports: :mod:`shardalg.costs` and :mod:`shardalg.planning`; nothing below imports it (``shardalg`` loads it on
first use of ``shardalg.plans``, so ``import shardalg`` stays cheap).

``plan``, ``backward``, ``cost``, ``compare`` and ``compute_bound`` choose no plan by a made-up size: where the cheapest plan of a statement
depends on sizes not given, they raise :class:`~shardalg.planning.symbolic.NeedsSizes` (its ``choice`` holds the
contenders; ``shardalg.piecewise`` answers per interval where one unknown size decides).

A flat mesh larger than a GPU chip's node (``mesh="X=64", hw="h100"``) is placed into nodes here, once, for
every function that takes ``hw`` (:func:`shardalg.costs.nodes.place_in_nodes`: ``X=64`` priced as
``X=64:node8``; without ``mesh``, the program's own ``mesh X=64`` line is placed the same way): a cost or
derivation says so in its ``notes``; ``plans`` and ``plan``, which have none, as a
:class:`~shardalg.errors.NoteWarning`.

``latex`` prints whatever the package returns: notation (a tensor, a statement, a program), a sympy value (a
cost's total, with the book's symbol names, ``Max`` included), or a result that has its own ``latex()``.
"""

from __future__ import annotations

import warnings
from typing import Any

import sympy

from .algebra.mesh import as_mesh
from .algebra.symbols import latex_names
from .costs.costmodel import CostModel
from .costs.derive import compare as derive_compare
from .costs.derive import compute_bound as derive_bound
from .costs.hardware import as_chip
from .costs.nodes import place_in_nodes
from .costs.plancost import cost as price
from .costs.ranking import BySeconds
from .errors import NoteWarning, UsageError
from .notation import printing
from .planning import planner
from .planning.backward import backward as derive
from .planning.planset import DEFAULT_LIMITS
from .planning.symbolic import strict

__all__ = ["plans", "plan", "backward", "cost", "compare", "compute_bound", "latex"]


def latex(x: Any, **settings: Any) -> str:
    """LaTeX of ``x`` (math, no ``$``): a sympy expression or relation with the book's symbol names
    (``T_{\\min}``, ``W_{\\text{ici}}``); a result with a ``latex()`` method (a plan, a plan's cost, a
    derivation, a backward program, a strategy map) through it; notation through the notation's printer, which
    takes ``settings`` (``bold_names``, ...)."""
    if isinstance(x, sympy.Basic):
        if settings:
            raise UsageError(f"a sympy value takes no printer settings ({', '.join(sorted(settings))})")
        return sympy.latex(x, symbol_names=latex_names(x))
    own = getattr(type(x), "latex", None)
    if callable(own) and not settings:
        return own(x)
    return printing.latex(x, **settings)


def _in_nodes(mesh: Any, hw: Any, options: dict[str, Any], *programs: Any) -> tuple[Any, tuple[str, ...]]:
    """``mesh`` (text, a mapping or a Mesh; None: the programs' own ``mesh`` line) as priced on ``hw`` for
    ``programs``: placed into the chip's nodes, and the notes that say so
    (:func:`~shardalg.costs.nodes.place_in_nodes`; ``options``' ``dcn_axes`` stay outside; an axis whose
    sub-axes a program names is left whole)."""
    done = place_in_nodes(as_mesh(mesh), as_chip(hw), options.get("dcn_axes") or (), programs)
    return done.mesh, done.notes


def _say(notes: tuple[str, ...]) -> None:
    for n in notes:
        warnings.warn(n, NoteWarning, stacklevel=3)


def _noted(result: Any, notes: tuple[str, ...]) -> Any:
    """``result`` (a plan's cost, a derivation) with ``notes`` before its own."""
    if notes:
        result.notes = (*notes, *result.notes)
    return result


def plans(
    expr: Any,
    mesh: Any = None,
    sizes: Any = None,
    target: Any = None,
    *,
    key: Any = None,
    hw: Any = None,
    model: str | None = None,
    overlap: object = None,
    limits: Any = None,
    **options: Any,
) -> Any:
    """Every legal plan for a statement, cheapest first: the planner's
    :func:`~shardalg.planning.planner.plans`, as a :class:`~shardalg.planning.planset.Plans` list
    (``complete`` and ``note``; a table in a notebook: bytes, and seconds with ``hw``); ``limits`` are its
    budgets.

    Ranking: ``key`` when given; else with ``hw`` (a chip or preset name) by seconds on that chip under
    ``overlap`` (``schedule``, ``steady`` or ``serial``), where every size is bound; else by bytes
    communicated, then steps. ``hw``, ``model``, ``overlap`` and ``options`` (``exact``, ``ring``, ...) are
    folded here, once, into the :class:`~shardalg.costs.costmodel.CostModel` the planner ranks by."""
    rank = None if hw is None else BySeconds(CostModel.of(hw, model, overlap, **options))
    mesh, notes = _in_nodes(mesh, hw, options, expr, target)
    _say(notes)
    return planner.plans(expr, mesh, sizes, target, key=key, rank=rank, limits=limits or DEFAULT_LIMITS)


def plan(
    expr: Any,
    mesh: Any = None,
    sizes: Any = None,
    target: Any = None,
    *,
    key: Any = None,
    hw: Any = None,
    model: str | None = None,
    overlap: object = None,
    **options: Any,
) -> Any:
    """The default (first) of :func:`plans` (the planner's :func:`~shardalg.planning.planner.plan`: a
    :class:`~shardalg.planning.symbolic.NeedsSizes` error when the cheapest plan depends on sizes not given)."""
    rank = None if hw is None else BySeconds(CostModel.of(hw, model, overlap, **options))
    mesh, notes = _in_nodes(mesh, hw, options, expr, target)
    _say(notes)
    with strict():
        return planner.plan(expr, mesh, sizes, target, key=key, rank=rank)


def backward(
    program: Any,
    mesh: Any = None,
    sizes: Any = None,
    defer_reductions: bool = False,
    keep_gathered: bool = False,
) -> Any:
    """The backward program of ``program``: :func:`shardalg.planning.backward.backward`, with no plan chosen
    by a made-up size (:class:`~shardalg.planning.symbolic.NeedsSizes` where sizes not given decide a
    forward or gradient plan)."""
    with strict():
        return derive(program, mesh, sizes, defer_reductions, keep_gathered)


def cost(
    x: Any,
    mesh: Any = None,
    sizes: Any = None,
    hw: Any = None,
    model: Any = None,
    overlap: object = None,
    **options: Any,
) -> Any:
    """The cost of a plan, a program, a statement or notation text: :func:`shardalg.costs.plancost.cost`,
    with no plan chosen by a made-up size (:class:`~shardalg.planning.symbolic.NeedsSizes` where sizes not
    given decide a statement's plan)."""
    mesh, notes = _in_nodes(mesh, hw, options, x)
    with strict():
        return _noted(price(x, mesh, sizes, hw, model, overlap, **options), notes)


def compare(plan_a: Any, plan_b: Any, solve_for: Any = None, regime: str = "comms", **options: Any) -> Any:
    """The condition under which plan a is faster than plan b: :func:`shardalg.costs.derive.compare` (its
    keyword ``options``: ``mesh``, ``sizes``, ``hw``, ...), with no plan of a statement given as text chosen
    by a made-up size (:class:`~shardalg.planning.symbolic.NeedsSizes` where sizes not given decide it), as
    ``shardalg compare`` asks for them."""
    options["mesh"], notes = _in_nodes(options.get("mesh"), options.get("hw"), options, plan_a, plan_b)
    with strict():
        return _noted(derive_compare(plan_a, plan_b, solve_for, regime, **options), notes)


def compute_bound(plan: Any, solve_for: Any = None, **options: Any) -> Any:
    """The condition for compute (or HBM time) to dominate a plan's communication:
    :func:`shardalg.costs.derive.compute_bound` (its keyword ``options``: ``bound``, ``mesh``, ``sizes``, ``hw``,
    ...), with no plan of a statement given as text chosen by a made-up size (:class:`~shardalg.planning.symbolic.
    NeedsSizes` where sizes not given decide it), as ``shardalg bound`` asks for them."""
    options["mesh"], notes = _in_nodes(options.get("mesh"), options.get("hw"), options, plan)
    with strict():
        return _noted(derive_bound(plan, solve_for, **options), notes)
