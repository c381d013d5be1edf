"""The strategy map of a program: the book's named strategies built as shardings of it, costed by the engine,
and handed to the region engine.

    >>> m = program_map("params W_in, W_out\\nIn[B, D] * W_in[D, F] -> Tmp[B, F]\\n"
    ...                 "Tmp[B, F] * W_out[F, D] -> Out[B, D]")            # doctest: +SKIP

The program declares its parameters (``params``); its first product reads the layer's input. From them:
the batch dim (a dim of the input that no parameter has), the model dim(s) (those the input shares with the
parameters) and the hidden dims (the parameters' other dims). The strategies are the book's (seed 002 §4.1),
on a data axis X and a model axis Y with X·Y = N devices:

- DP: activations ``B=X``, parameters whole; X -> N.
- FSDP: activations ``B=X``, parameters ``D=X`` (gathered before use); X -> N.
- TP: activations ``D=Y, F=Y``, parameters ``F=Y`` (Megatron); Y -> N.
- FSDP+TP: activations ``B=X, D=Y, F=Y``, parameters ``D=X, F=Y``; Y -> N/X, at its best X in [1, N].

Each sharded program is read by :mod:`shardalg.models` (forward plans, the derived backward, rematerialised
forward) and its plans priced by :func:`shardalg.costs.plancost.plan_cost` under the overlap policy, bandwidth
terms only, each axis's link count the symbol M_X. No formula is typed here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
from sympy import Expr

from shardalg.algebra.mesh import Mesh, a_mesh_or_none
from shardalg.algebra.symbols import axis_size, device_count, dim_size, links, quantity
from shardalg.costs.chipspec import as_chip_text
from shardalg.costs.costmodel import CostModel
from shardalg.costs.phases import PhasedCost, priced_by_phase
from shardalg.costs.schedule import OverlapPolicy
from shardalg.errors import UsageError
from shardalg.models.analysis import analyze
from shardalg.models.expand import shard
from shardalg.models.memory import model_memory
from shardalg.models.program import ModelProgram, model_program
from shardalg.notation.parse import parse
from shardalg.notation.plan import Plan
from shardalg.notation.syntax import Arrow, Product, Program, Tensor

from .candidates import Candidate, price
from .logspace import mono_of
from .minimize import Minimize
from .monotext import parameter

__all__ = [
    "Strategy",
    "STRATEGY_NAMES",
    "PASSES",
    "strategies_of",
    "candidates_of",
    "coordinates_for",
    "H",
    "state_parameter",
    "keep_notes",
    "choice_notes",
]

X, Y, N = axis_size("X"), axis_size("Y"), device_count()
M_X, M_Y = links("X"), links("Y")
C, W = quantity("C"), quantity("W_ici")
H = quantity("H")  # the memory cap per device, bytes
STATE = ("params", "grads", "optimizer")  # the parts of memory the cap bounds
STRATEGY_NAMES = ("DP", "FSDP", "TP", "FSDP+TP")
PASSES = ("step", "forward", "backward")
# Parameters added to the map, in this order, while its costs depend on more than ``over`` covers.
EXTRAS = (C / W, M_X, M_Y, N)


@dataclass(frozen=True)
class Strategy:
    """One named strategy: its sharded program, mesh axes, the engine's cost of the chosen passes, and how
    its axes meet the N devices (``substitute``, ``minimize``)."""

    name: str
    program: Program
    axes: tuple[str, ...]
    cost: PhasedCost
    parts: dict[str, Expr]
    substitute: dict[sympy.Symbol, Expr]
    minimize: Minimize | None = None
    notes: tuple[tuple[str, str], ...] = field(default=())
    state: Expr = sympy.Integer(0)  # bytes per device of the parts in STATE, from the models layer
    kept: Expr | None = (
        None  # bytes per device of the gathered copies the backward keeps (None: gathers again)
    )
    book: str = ""  # the book's strategy this is ("FSDP+TP" for "FSDP+TP kept"); empty: the name

    @property
    def strategy(self) -> str:
        """The book's strategy (``FSDP+TP``), whether the backward keeps its gathered copies or not."""
        return self.book or self.name

    def held(self) -> Expr:
        """What the cap H holds: the state, and the kept copies when the backward keeps them. Over a split
        that is minimized (FSDP+TP's X) each term of the copies is taken at its largest over the range."""
        if not self.kept:
            return self.state
        copies = sympy.expand(self.kept.subs(self.substitute))
        if self.minimize is not None and self.minimize.over in copies.free_symbols:
            x, lo, hi = self.minimize.over, self.minimize.lower, self.minimize.upper
            copies = sympy.Add(
                *(sympy.Max(t.subs(x, lo), t.subs(x, hi)) for t in sympy.Add.make_args(copies))
            )
        return self.state + copies

    def capped(self) -> tuple[sympy.Basic, ...]:
        """The cap on what it holds. With kept copies that is a sum of k terms, whose boundary is no half-space
        of the map: each term is held to H/k, so the sum fits wherever the map keeps them (it may gather
        again where they would just fit, within a factor k; said in the notes)."""
        if not self.kept:
            return (sympy.LessThan(self.state, H, evaluate=False),)
        terms = sympy.Add.make_args(self.held())
        return tuple(sympy.LessThan(len(terms) * t, H, evaluate=False) for t in terms)

    def candidate(self, capped: bool = False) -> Candidate:
        constraints = self.capped() if capped else ()
        return Candidate(
            self.name,
            self.cost.total,
            parts=self.parts,
            substitute=self.substitute,
            minimize=self.minimize,
            constraints=constraints,
        )


def _program(program: Any) -> Program:
    if isinstance(program, ModelProgram):
        return program.program
    if isinstance(program, str):
        return parse(program)
    if isinstance(program, Program):
        return program
    raise UsageError(
        f"a strategy map takes a program (notation text or a Program), not {type(program).__name__}"
    )


def _dims(prog: Program) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """(batch dim, model dims, hidden dims) read off the roles and the first product."""
    roles = prog.roles
    params = set(roles.params) if roles is not None else set()
    if not params:
        raise UsageError(
            "the strategy map needs the program's parameters: declare them, e.g. 'params W_in, W_out'",
            rule="parameters",
        )
    products = [
        s
        for s in prog.statements
        if isinstance(s, Arrow)
        and isinstance(s.expr, Product)
        and isinstance(s.expr.left, Tensor)
        and isinstance(s.expr.right, Tensor)
    ]
    if not products:
        raise UsageError("the program has no product of two tensors to shard", rule="parameters")
    tensors = [t for s in products for t in (s.expr.left, s.expr.right, s.result)]
    if any(d.axes for t in tensors for d in t.dims):
        raise UsageError(
            "write the program without shardings: the strategy map shards it in each strategy's way",
            fix="drop the _X subscripts",
        )
    first = products[0].expr
    inputs = [t for t in (first.left, first.right) if t.name not in params]
    if len(inputs) != 1:
        raise UsageError("the first product must read one parameter and the layer's input", rule="parameters")
    pdims = {d.label for t in tensors if t.name in params for d in t.dims}
    batch = [d.label for d in inputs[0].dims if d.label not in pdims]
    model = tuple(d.label for d in inputs[0].dims if d.label in pdims)
    hidden = tuple(sorted(pdims - set(model)))
    if len(batch) != 1 or not model or not hidden:
        raise UsageError(
            f"the strategy map takes a block whose input has one batch dim and model dims its weights "
            f"share, and weights with hidden dims (found batch {batch}, model {list(model)}, hidden "
            f"{list(hidden)})",
            rule="parameters",
            fix="e.g. In[B, D] * W_in[D, F] -> Tmp[B, F]",
        )
    clash = {"X", "Y", "N"} & (pdims | set(batch))
    if clash:
        raise UsageError(
            f"the dims {', '.join(sorted(clash))} share a name with the strategies' axes X, Y or the "
            "device count N",
            rule="parameters",
            fix="rename the dim",
        )
    return batch[0], model, hidden


def _plans(
    prog: Program, axes: tuple[str, ...], passes: str, remat: Any, optimizer: Any, keep: bool = False
) -> tuple[list[tuple[str, list[Plan]]], list[tuple[str, str]], Expr, Expr]:
    """The plans of the chosen passes by phase (forward; backward: the recomputed forward, then the
    gradients), the models layer's notes, the bytes per device of STATE, and of the forward's gathered
    copies the backward reads (``keep``: it keeps them instead of gathering again; 0: there are none)."""
    a = analyze(model_program(prog, Mesh({ax: None for ax in axes}), {}), "train", remat, keep)
    fwd = list(a.forward_plans.values())
    bwd = [a.forward_plans[i] for i in a.recomputed] + [p for _, p in a.grad_plans]
    grads = [p for _, p in a.grad_plans]
    chosen = {
        "step": [("forward", fwd), ("backward", bwd)],
        "forward": [("forward", fwd)],
        "backward": [("backward", grads)],
    }[passes]
    report = model_memory(a, None, optimizer)
    state = sympy.Add(*(report.parts[p] for p in STATE))
    copies = sympy.Add(*(b * n for _, b, n in a.gathered_copies()))
    return chosen, [(k, v) for k, v in report.notes if k not in ("layers", "mode")], state, copies


def _cost(
    phases: list[tuple[str, list[Plan]]], axes: tuple[str, ...], costs: CostModel
) -> tuple[PhasedCost, dict[str, Expr]]:
    """The passes priced by phase (:mod:`shardalg.costs.phases`: under ``steady`` each collective overlaps
    its own phase's compute), and the parts that name its terms."""
    pc = priced_by_phase("step", phases, Mesh({ax: None for ax in axes}), {}, costs)
    if pc is None:
        raise UsageError("the strategy's passes have no step to price", rule="parameters")
    parts: dict[str, Expr] = {"compute": pc.compute}
    for s in pc.steps:
        if s.step.communicates:
            for ax in s.step.axes:
                parts[f"comms {ax}"] = parts.get(f"comms {ax}", sympy.Integer(0)) + s.comms
    return pc, parts


def strategies_of(
    program: Any,
    overlap: object = OverlapPolicy.STEADY,
    passes: str = "step",
    remat: Any = None,
    names: Sequence[str] = STRATEGY_NAMES,
    optimizer: Any = None,
    keep_gathered: bool | None = None,
) -> tuple[Strategy, ...]:
    """The named strategies of ``program``, each sharded, planned and costed by the engine. The backward
    gathers again what the forward gathered (``keep_gathered=False``: time; FSDP frees its gathered weights),
    or reads the forward's copies (``True``: memory, their bytes in ``kept``, said in the notes); ``None``
    (default): both, a strategy whose backward reads gathered copies is placed twice, gathering again under
    its name and keeping them as ``NAME kept``, and the map says where each wins."""
    costs = CostModel(
        overlap=OverlapPolicy.of(overlap), latency=False, symbolic_links=True
    )  # the book's symbols
    if passes not in PASSES:
        raise UsageError(f"passes is one of {', '.join(PASSES)}, not {passes!r}", rule="parameters")
    unknown = [n for n in names if n not in STRATEGY_NAMES]
    if unknown or not names:
        raise UsageError(
            f"unknown strategies {unknown}; known: {', '.join(STRATEGY_NAMES)}", rule="parameters"
        )
    prog = _program(program)
    b, model, hidden = _dims(prog)
    d_x = {d: ("X",) for d in model}
    f_y = {f: ("Y",) for f in hidden}
    table = {
        "DP": ({}, {b: ("X",)}, ("X",), {X: N}, None),
        "FSDP": (d_x, {b: ("X",)}, ("X",), {X: N}, None),
        "TP": (f_y, {**{d: ("Y",) for d in model}, **f_y}, ("Y",), {Y: N}, None),
        "FSDP+TP": (
            {**d_x, **f_y},
            {b: ("X",), **{d: ("Y",) for d in model}, **f_y},
            ("X", "Y"),
            {Y: N / X},
            Minimize(X, 1, N),
        ),
    }
    out = []
    for name in names:
        params, acts, axes, subs, mini = table[name]
        sharded = shard(prog, params=params, activations=acts)
        ways = [bool(keep_gathered)]
        if keep_gathered is None and passes != "forward":  # the forward alone is the same either way
            ways = [False, True]
        for keep in ways:
            plans, notes, state, copies = _plans(sharded, axes, passes, remat, optimizer, keep)
            pc, parts = _cost(plans, axes, costs)
            label = f"{name} kept" if keep and len(ways) > 1 else name
            out.append(
                Strategy(
                    label,
                    sharded,
                    axes,
                    pc,
                    parts,
                    subs,
                    mini,
                    tuple(notes),
                    state,
                    copies if keep else None,
                    name,
                )
            )
            if not copies:
                break  # the backward reads nothing the forward gathered: one way only
    return tuple(out)


def keep_notes(strategies: Sequence[Strategy], capped: bool = False) -> list[str]:
    """What each strategy's backward does with the forward's gathered copies it keeps."""
    under = (
        "under the memory cap with the state (each term at its largest over the split it is minimized over; "
        "the state and each term of the copies held to H/k, k the number of terms, so that their sum fits)"
        if capped
        else "not under a memory cap"
    )
    return [
        f"{s.name}: the backward keeps the forward's gathered copies (keep_gathered): {sympy.sstr(s.kept)} "
        f"bytes per device a layer, held from the forward to the backward, {under}"
        for s in strategies
        if s.kept
    ]


def choice_notes(strategies: Sequence[Strategy], winners: Sequence[str], capped: bool) -> list[str]:
    """Where keeping the gathered copies wins, for each strategy placed both ways (``winners``: the names
    that win a region of the map)."""
    out = []
    for s in strategies:
        if s.name == s.strategy:
            continue
        where = (
            f"keeping its gathered copies wins where '{s.name}' wins (its backward moves less); "
            f"elsewhere '{s.strategy}' gathers again at no more cost"
            + (", or the cap H leaves no room for the copies" if capped else "")
            if s.name in winners
            else f"keeping its gathered copies wins nowhere on the map ('{s.name}' is never faster)"
        )
        out.append(f"{s.strategy}: {where}")
    return out


def candidates_of(strategies: Sequence[Strategy], capped: bool = False) -> list[Candidate]:
    return [s.candidate(capped) for s in strategies]


def _exponents(candidates: Sequence[Candidate]) -> tuple[list[sympy.Symbol], list[list[sympy.Rational]]]:
    """The exponent vectors whose ratios the map compares: every term of every cost against the first, and
    each constraint's terms against its bound (after substitution and minimization)."""
    pairs = []
    first = None
    for c in candidates:
        for e in price(c, {})[0]:
            for t in e.terms():
                first = first or t.mono
                pairs.append((t.mono, first))
            for k in e.constraints:
                bound = [t.mono for piece in k.rhs for t in piece]
                pairs += [(t.mono, b) for piece in k.lhs for t in piece for b in bound]
    syms = sorted({s for a, b in pairs for s in (*a.powers, *b.powers)}, key=lambda s: s.name)
    rows = [tuple(a.powers.get(s, 0) - b.powers.get(s, 0) for s in syms) for a, b in pairs]
    return syms, [list(r) for r in dict.fromkeys(rows)]  # each distinct ratio once: the rank is the same


def coordinates_for(
    candidates: Sequence[Candidate], over: Sequence[Expr], extras: Sequence[Expr] = EXTRAS
) -> tuple[tuple[Expr, ...], tuple[Expr, ...]]:
    """(the map's parameters, the ones added to ``over``): EXTRAS, then single symbols, are added in order while
    some ratio of two terms is not a product of powers of the parameters (the engine needs every comparison
    covered)."""
    syms, vecs = _exponents(candidates)
    diffs = sympy.Matrix(vecs) if vecs else sympy.zeros(0, len(syms))

    def row(p: Expr) -> list:
        m = mono_of(p)
        return [m.powers.get(s, 0) if m is not None else 0 for s in syms]

    def covered(ps: Sequence[Expr]) -> bool:
        if diffs.rows == 0:
            return True
        basis = sympy.Matrix([row(p) for p in ps]) if ps else sympy.zeros(0, len(syms))
        return sympy.Matrix.vstack(basis, diffs).rank() == basis.rank()

    params = list(over)
    added = []
    for extra in (*extras, *syms):  # the book's parameters first, then single symbols (F, B, ...)
        if covered(params):
            break
        base = sympy.Matrix([row(p) for p in params]) if params else sympy.zeros(0, len(syms))
        grown = sympy.Matrix.vstack(base, sympy.Matrix([row(extra)]))
        if any(row(extra)) and grown.rank() > base.rank():
            params.append(extra)
            added.append(extra)
    return tuple(params), tuple(added)


def parameters(over: Sequence[Expr | str], known: Mapping[str, sympy.Symbol]) -> tuple[Expr, ...]:
    """``over`` as monomials: text (``"B/N"``, ``"C/W_ici"``) read against the symbols the costs use."""
    out = []
    for p in over:
        if isinstance(p, str):
            out.append(parameter(p, known))  # read by our own monomial reader, never by sympify
        elif isinstance(p, sympy.Expr):
            out.append(p)
        else:
            raise UsageError(
                f"over takes text like 'B/N' or sympy expressions, not {type(p).__name__}", rule="parameters"
            )
        if out[-1] in out[:-1]:
            raise UsageError(f"{p} is named twice in over", rule="parameters")
    return tuple(out)


def known_symbols(strategies: Sequence[Strategy]) -> dict[str, sympy.Symbol]:
    """Names a user may write in ``over``: every symbol of the costs, plus N, and W for W_ici."""
    out: dict[str, sympy.Symbol] = {"N": N, "W": W, "W_ici": W, "C": C, "M_X": M_X, "M_Y": M_Y, "H": H}
    for s in strategies:
        for sym in s.cost.total.free_symbols:
            if sym not in (X, Y):
                out.setdefault(sym.name, sym)
    return out


def dim_symbols(strategies: Sequence[Strategy]) -> dict[str, sympy.Symbol]:
    names = {
        d.label
        for s in strategies[:1]
        for st in s.program.statements
        if isinstance(st, Arrow) and isinstance(st.expr, Product)
        for t in (st.expr.left, st.expr.right, st.result)
        if isinstance(t, Tensor)
        for d in t.dims
    }
    return {n: dim_size(n) for n in sorted(names)}


def mesh_devices(mesh: Mesh | None) -> tuple[Mesh | None, int | None]:
    m = a_mesh_or_none(mesh, "the strategy map")
    if m is None:
        return None, None
    sizes = [a.size for a in m.axes]
    return m, (None if any(s is None for s in sizes) else int(sympy.prod(sizes)))


def chip_values(hw: Any) -> tuple[Any, dict[sympy.Symbol, float]]:
    chip = as_chip_text(hw)
    return chip, (chip.values() if chip is not None else {})


def state_parameter(strategies: Sequence[Strategy]) -> Expr:
    """The map parameter a memory cap adds: the state's monomial over H (``D*F/H`` for the MLP block)."""
    for s in strategies:
        for term in sympy.Add.make_args(sympy.expand(s.state)):
            m = mono_of(term)
            if m is not None and m.exps:
                return sympy.Mul(*(x**k for x, k in m.exps if x not in (X, Y, N))) / H
    raise UsageError("the program's parameters hold no bytes to cap", rule="parameters")
