"""One arithmetic of a cost (issue 25, item 4): a plan's cost built and evaluated three ways, on the book's four
cases and a 4-axis query, next to the issue's targets; symengine's import time; and how many of the golden
queries' totals print the same text through each route.

    python -m bench arithmetic [--rounds N] [--no-golden] [--golden-every N] [--imports N]

Routes (the planner's part, ``shardalg.plans``, is the same for all and timed once per run):

- ``light`` (today): ``plan_cost`` builds light terms (:mod:`shardalg.costs.terms`); the symbolic total is
  ``.total`` (a sympy expression made from the tree, memoized by tree), the seconds ``.seconds`` (the tree
  evaluated at the chip's numbers without sympy).
- ``sympy``: each step's duration and the plan's schedule built with sympy's own arithmetic (``Mul``, ``Add``,
  an evaluated ``Max``); the seconds by ``sympy.lambdify`` of the total (compiled once per distinct total, a
  piece cache kept warm), or by ``xreplace`` of the chip's numbers.
- ``symengine``: the same with symengine's arithmetic (``symengine.Max`` does not know the symbols are
  positive); the seconds by ``symengine.Lambdify`` (compiled once per distinct total) or by ``subs``.

A route's step durations come from the step's light duration term (:class:`shardalg.costs.steps.StepCost`),
rebuilt node by node with the route's arithmetic: the same operations as writing the step formulas in that
arithmetic, and memoized per step value (as today's step memo is) in warm runs. In fresh runs the light step
term is built first and counted: an upper bound for the other routes by the light step build (shown as
"light steps" in the fresh column's note). Times are CPU (``time.process_time``), medians of interleaved
rounds: per round each route runs fresh (every cache cleared, sympy's too) then warm (whole-query caches
cleared, pieces kept), in turn. The targets: warm >= 100x and fresh >= 10x faster than XLA's compile of the
same matmul (measured when jax is installed; else the issue's figure for this machine, 110 ms, the fastest
of its 110-240 ms).
"""

from __future__ import annotations

import argparse
import operator
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

from bench.common import find_caches, have_jax, table, verdict
from bench.plans import BOOK_CASES, BOOK_MESH, HW, SIZES, axes_cases

XLA_FLOOR_MS = 110.0  # the fastest XLA compile on this machine, used when jax is not installed
WARM_VS_XLA, FRESH_VS_XLA = 100.0, 10.0


# ---------------------------------------------------------------- two arithmetics besides the light terms


@dataclass
class Arithmetic:
    """The operations a cost is built with, in one representation."""

    name: str
    number: Callable[[object], Any]
    atom: Callable[[Any], Any]
    add: Callable[..., Any]
    mul: Callable[..., Any]
    pow: Callable[[Any, Any], Any]
    max: Callable[..., Any]
    zero: Any
    memo: dict = field(default_factory=dict)  # step duration (a light term, by value) -> expression

    def of_term(self, t: Any) -> Any:
        """A light term rebuilt with this arithmetic (each node an operation of the representation)."""
        from shardalg.costs.terms import Max, Mono, Sum

        if type(t) is Mono:
            c = self.number(t.coeff)
            if not t.powers:
                return c
            return self.mul(c, *[self.pow(self.atom(a), self.number(k)) for a, k in t.factors()])
        if type(t) is Sum:
            return self.add(*[self.of_term(a) for a in t.args])
        if type(t) is Max:
            return self.max(*[self.of_term(a) for a in t.args])
        raise TypeError(type(t))

    def step(self, t: Any) -> Any:
        got = self.memo.get(t)
        if got is None:
            got = self.memo[t] = self.of_term(t)
        return got


def sympy_arithmetic() -> Arithmetic:
    from fractions import Fraction

    import sympy

    def number(c: object) -> Any:
        if type(c) is Fraction:
            return sympy.Rational(c.numerator, c.denominator)
        return sympy.Float(c) if isinstance(c, float) else sympy.Integer(c)  # type: ignore[arg-type]

    def pow_(a: Any, k: Any) -> Any:
        return a if k == 1 else sympy.Pow(a, k)

    def max_(*args: Any) -> Any:
        args = tuple(a for a in args if a != 0)
        return args[0] if len(args) == 1 else sympy.Max(*args) if args else sympy.Integer(0)

    return Arithmetic("sympy", number, lambda a: a, sympy.Add, sympy.Mul, pow_, max_, sympy.Integer(0))


def symengine_arithmetic() -> Arithmetic:
    from fractions import Fraction

    import symengine as se

    atoms: dict = {}

    def number(c: object) -> Any:
        if type(c) is Fraction:
            return se.Rational(c.numerator, c.denominator)
        return se.RealDouble(c) if isinstance(c, float) else se.Integer(c)

    def atom(a: Any) -> Any:
        got = atoms.get(a)
        if got is None:
            got = atoms[a] = se.sympify(a)
        return got

    def pow_(a: Any, k: Any) -> Any:
        return a if k == 1 else a**k

    def mul(*args: Any) -> Any:
        return reduce(operator.mul, args)

    def max_(*args: Any) -> Any:
        args = tuple(a for a in args if a != 0)
        return args[0] if len(args) == 1 else se.Max(*args) if args else se.Integer(0)

    return Arithmetic("symengine", number, atom, se.Add, mul, pow_, max_, se.Integer(0))


def to_sympy(expr: Any) -> Any:
    """A symengine expression as sympy, with shardalg's (positive) symbols back in place of the plain ones."""
    import sympy

    from shardalg.algebra import symbols as sy

    got = sympy.sympify(expr)
    names = {s.name: s for s in sy.__dict__.values() if isinstance(s, sympy.Symbol)}
    back = {}
    for s in got.free_symbols:
        match = _SYMBOLS.get(s.name) or names.get(s.name)
        if match is not None:
            back[s] = match
    return got.xreplace(back)


_SYMBOLS: dict = {}  # name -> shardalg's sympy symbol, filled as atoms are converted


def plan_total(
    steps: Sequence[Any],
    lanes: Sequence[tuple[str, ...]],
    deps: Sequence[tuple[int, ...]],
    policy: str,
    ar: Arithmetic,
) -> Any:
    """:meth:`shardalg.costs.plancost.PlanCost.light` ("total") with ``ar``'s arithmetic: the same
    recurrence as :mod:`shardalg.costs.schedule`, over the steps' durations in that representation."""
    from shardalg.costs import schedule as sched
    from shardalg.notation.syntax import Op

    for s in steps:
        for a in s.duration.symbols():
            _SYMBOLS.setdefault(a.name, a)
    if policy == "serial":
        return ar.add(*[ar.step(s.compute) for s in steps], *[ar.step(s.comms) for s in steps])
    if policy == "steady":
        clocks: dict[str, Any] = {}
        for i, s in enumerate(steps):
            c = ar.step(s.comms)
            for lane in lanes[i]:
                clocks[lane] = ar.add(clocks.get(lane, ar.zero), c)
        compute = ar.add(*[ar.step(s.compute) for s in steps if s.step.op is Op.EINSUM])
        return ar.max(compute, ar.max(*clocks.values()) if clocks else ar.zero)
    durations = [ar.step(s.duration) for s in steps]
    waits, chain = sched._waits_of(tuple(lanes), tuple(deps))
    if chain:
        return ar.add(*durations)
    ends: list[Any] = []
    waited = 0
    for i, direct in enumerate(waits):
        start = (
            ar.zero
            if not direct
            else ends[direct[0]]
            if len(direct) == 1
            else ar.max(*(ends[p] for p in direct))
        )
        for p in direct:
            waited |= 1 << p
        ends.append(ar.add(start, durations[i]))
    return ar.max(*(e for i, e in enumerate(ends) if not waited >> i & 1))


def total_of(pc: Any, ar: Arithmetic) -> Any:
    """The total of a :class:`~shardalg.costs.plancost.PlanCost`'s steps built with ``ar``."""
    lanes, deps = pc._shape
    return plan_total(pc.steps, lanes, deps, pc.overlap, ar)


# ---------------------------------------------------------------- evaluation


class Evaluators:
    """The seconds of an expression at the chip's numbers, per route; compiled functions kept by expression."""

    def __init__(self, values: dict) -> None:
        self.values = values
        self.compiled: dict = {}

    def sympy_lambdify(self, expr: Any) -> float:
        import sympy

        got = self.compiled.get(expr)
        if got is None:
            syms = sorted(expr.free_symbols, key=lambda s: s.name)
            fn = sympy.lambdify(syms, expr, modules=[{"Max": max, "Min": min}, "math"])
            got = self.compiled[expr] = (fn, [self.values[s] for s in syms])
        return float(got[0](*got[1]))

    def sympy_xreplace(self, expr: Any) -> float:
        import sympy

        return float(expr.xreplace({k: sympy.Float(v) for k, v in self.values.items()}))

    def symengine_lambdify(self, expr: Any) -> float:
        import symengine as se

        got = self.compiled.get(expr)
        if got is None:
            syms = sorted(expr.free_symbols, key=lambda s: s.name)
            fn = se.Lambdify(syms, expr, real=True)
            by_name = {k.name: v for k, v in self.values.items()}
            got = self.compiled[expr] = (fn, [by_name[s.name] for s in syms])
        return float(got[0](*got[1])) if got[1] else float(expr)

    def symengine_subs(self, expr: Any) -> float:
        import symengine as se

        pts = self.compiled.get("se-point")
        if pts is None:
            pts = self.compiled["se-point"] = {se.Symbol(k.name): v for k, v in self.values.items()}
        return float(expr.subs(pts))


# ---------------------------------------------------------------- the timed query


@dataclass
class Times:
    plans: list[float] = field(default_factory=list)
    build: list[float] = field(default_factory=list)
    evaluate: list[float] = field(default_factory=list)
    printed: list[float] = field(default_factory=list)

    def add(self, p: float, b: float, e: float, t: float) -> None:
        self.plans.append(p)
        self.build.append(b)
        self.evaluate.append(e)
        self.printed.append(t)

    def medians(self) -> tuple[float, ...]:
        """Plans, build, evaluate, their sum, print (the total as sympy text), in ms."""
        totals = [a + b + c for a, b, c in zip(self.plans, self.build, self.evaluate, strict=True)]
        cols = (self.plans, self.build, self.evaluate, totals, self.printed)
        return tuple(statistics.median(x) * 1e3 for x in cols)


ROUTES = ("light", "sympy+lambdify", "sympy+xreplace", "symengine+Lambdify", "symengine+subs")


class Case:
    """One einsum on one mesh: its plans, priced by each route."""

    def __init__(self, label: str, expr: str, mesh: str) -> None:
        import shardalg as sa

        self.label, self.expr, self.mesh_text = label, expr, mesh
        self.mesh = sa.Mesh.parse(mesh)
        self.statement = sa.parse(expr).statements[0]
        self._plans, self._plan_cost = sa.plans, sa.plan_cost

    def run(
        self, route: str, ars: dict[str, Arithmetic], ev: Evaluators
    ) -> tuple[float, float, float, float, list]:
        from shardalg.costs import schedule as sched
        from shardalg.costs.steps import step_cost
        from shardalg.planning.overlap import OverlapPolicy

        clock = time.process_time
        t0 = clock()
        found = self._plans(self.statement, self.mesh, SIZES)
        t1 = clock()
        out = []
        if route == "light":
            costs = [self._plan_cost(p, self.mesh, SIZES, hw=HW) for p in found]
            totals = [pc.total for pc in costs]
            t2 = clock()
            out = [pc.seconds for pc in costs]
            t3 = clock()
            texts = [str(e) for e in totals]
            return t1 - t0, t2 - t1, t3 - t2, clock() - t3, list(zip(texts, out, strict=True))
        ar = ars[route.split("+")[0]]
        opts = _opts(self.mesh)
        policy = OverlapPolicy.SCHEDULE
        totals = []
        for p in found:
            steps = [step_cost(s, opts) for s in p.steps]
            lanes = [sched.lanes_of(s) for s in p.steps]
            totals.append(plan_total(steps, lanes, p.producers, policy, ar))
        t2 = clock()
        evaluate = getattr(ev, route.replace("+", "_").lower())
        out = [evaluate(e) for e in totals]
        t3 = clock()
        texts = [str(e) if ar.name == "sympy" else str(to_sympy(e)) for e in totals]
        return t1 - t0, t2 - t1, t3 - t2, clock() - t3, list(zip(texts, out, strict=True))


def measure(cases: list[Case], rounds: int) -> dict[tuple[str, str], dict[str, Times]]:
    """Interleaved rounds: per round, per case, each route fresh then warm."""
    caches = find_caches()
    ars = {"sympy": sympy_arithmetic(), "symengine": symengine_arithmetic()}
    values = dict(_opts(cases[0].mesh).values)
    evs = {r: Evaluators(values) for r in ROUTES}
    res: dict[tuple[str, str], dict[str, Times]] = {}
    for c in cases:  # imports, the parser's and the compilers' first use, not counted
        for r in ROUTES:
            c.run(r, ars, evs[r])
    check: dict[str, list] = {}
    for _ in range(rounds):
        for c in cases:
            for r in ROUTES:
                caches.clear_fresh()
                for ar in ars.values():
                    ar.memo.clear()
                evs[r].compiled.clear()
                slot = res.setdefault((c.label, r), {"fresh": Times(), "warm": Times()})
                p, b, e, t, got = c.run(r, ars, evs[r])
                slot["fresh"].add(p, b, e, t)
                caches.clear_warm()
                p, b, e, t, got = c.run(r, ars, evs[r])
                slot["warm"].add(p, b, e, t)
                check.setdefault(c.label, []).append((r, [s for _, s in got]))
    for label, runs in check.items():  # every route gives the same seconds
        base = runs[0][1]
        for r, secs in runs:
            if len(secs) != len(base) or any(
                abs(a - b) > 1e-9 * max(abs(a), 1e-30) for a, b in zip(secs, base, strict=True)
            ):
                print(f"WARNING: {label}: {r} seconds {secs} differ from light's {base}", file=sys.stderr)
    return res


# ---------------------------------------------------------------- the float path (ranking)


RANKERS = ("float (fast_seconds)", "light (plan_cost .seconds)", "symengine+subs")


def ranking(cases: list[Case], rounds: int) -> list[list[str]]:
    """The seconds of every plan of a case, no symbolic total (what a ranking needs), per route: the float
    path (:func:`shardalg.costs.plancost.fast_seconds`), the light terms evaluated, symengine built and
    ``subs``; CPU ms, median of fresh (every cache cleared) and of warm runs, plans found outside the timing."""
    from shardalg.costs import schedule as sched
    from shardalg.costs.plancost import fast_seconds, plan_cost
    from shardalg.costs.steps import step_cost
    from shardalg.planning.overlap import OverlapPolicy

    caches = find_caches()
    ar = symengine_arithmetic()
    values = dict(_opts(cases[0].mesh).values)
    ev = Evaluators(values)
    policy = OverlapPolicy.SCHEDULE

    def run(route: str, c: Case, found: list) -> float:
        t0 = time.process_time()
        if route.startswith("float"):
            secs = fast_seconds(_opts(c.mesh), policy)
            [secs(p) for p in found]
        elif route.startswith("light"):
            [plan_cost(p, c.mesh, SIZES, hw=HW).seconds for p in found]
        else:
            opts = _opts(c.mesh)
            for p in found:
                steps = [step_cost(s, opts) for s in p.steps]
                lanes = [sched.lanes_of(s) for s in p.steps]
                ev.symengine_subs(plan_total(steps, lanes, p.producers, policy, ar))
        return time.process_time() - t0

    times: dict[tuple[str, str, str], list[float]] = {}
    plans = {c.label: list(c._plans(c.statement, c.mesh, SIZES)) for c in cases}
    for _ in range(rounds):
        for c in cases:
            for r in RANKERS:
                caches.clear_fresh()
                ar.memo.clear()
                times.setdefault((c.label, r, "fresh"), []).append(run(r, c, plans[c.label]))
                times.setdefault((c.label, r, "warm"), []).append(run(r, c, plans[c.label]))
    return [
        [
            c.label,
            str(len(plans[c.label])),
            r,
            f"{statistics.median(times[(c.label, r, 'warm')]) * 1e3:.3f}",
            f"{statistics.median(times[(c.label, r, 'fresh')]) * 1e3:.3f}",
        ]
        for c in cases
        for r in RANKERS
    ]


def _opts(mesh: Any) -> Any:
    """The step-level options the routes price under: the bench's chip, its default model and policy."""
    from shardalg.algebra.mesh import as_mesh
    from shardalg.costs.costmodel import CostModel
    from shardalg.costs.stepcost import Options

    return Options.of(CostModel.of(HW), as_mesh(mesh), SIZES)


def light_seconds_of(step: Any, opts: Any) -> float | None:
    """A step's seconds from its light duration term: what :func:`shardalg.costs.steps.seconds_of` would be
    without its float arithmetic (bytes and unit costs as numbers)."""
    from shardalg.costs.steps import step_cost

    got = step_cost(step, opts).duration.evaluate(opts.point)
    return None if got is None else float(got)


def ranked(cases: list[Case], rounds: int) -> list[list[str]]:
    """``shardalg.plans(..., hw=HW)`` (plans ranked by seconds on the chip: the resharding search weighs each
    step by :func:`~shardalg.costs.plancost.step_seconds`, plans by :func:`~shardalg.costs.plancost.fast_seconds`)
    with the float path as it is, and with each step's seconds from its light term instead (``seconds_of``
    replaced in :mod:`shardalg.costs.steps` for the run); interleaved, CPU ms, medians. Fewer rounds (3) for
    a case over 100 ms."""
    import shardalg as sa
    from shardalg.costs import steps as costed_steps

    caches = find_caches()
    floats = costed_steps.seconds_of
    paths = {"float": floats, "light": light_seconds_of}
    rows = []
    for c in cases:
        times: dict[tuple[str, str], list[float]] = {}
        n = 0
        for i in range(rounds):
            for name, fn in paths.items():
                costed_steps.seconds_of = fn  # type: ignore[assignment]
                try:
                    for kind in ("fresh", "warm"):
                        (caches.clear_fresh if kind == "fresh" else caches.clear_warm)()
                        t0 = time.process_time()
                        n = len(sa.plans(c.statement, c.mesh, SIZES, hw=HW))
                        times.setdefault((name, kind), []).append(time.process_time() - t0)
                finally:
                    costed_steps.seconds_of = floats  # type: ignore[assignment]
            if i >= 2 and statistics.median(times[("light", "fresh")]) > 0.1:
                break
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        rows.append(
            [
                c.label,
                str(n),
                str(len(times[("float", "fresh")])),
                f"{med[('float', 'warm')]:.3f}",
                f"{med[('light', 'warm')]:.3f}",
                f"{med[('light', 'warm')] / med[('float', 'warm')]:.2f}x",
                f"{med[('float', 'fresh')]:.2f}",
                f"{med[('light', 'fresh')]:.2f}",
                f"{med[('light', 'fresh')] / med[('float', 'fresh')]:.2f}x",
            ]
        )
    return rows


# ---------------------------------------------------------------- imports


def imports(runs: int) -> list[list[str]]:
    """``import X`` as a process, interleaved, CPU (user + system of the child) and wall; medians in ms."""
    import resource

    stmts = {
        "import sympy": "import sympy",
        "import symengine": "import symengine",
        "import sympy, symengine": "import sympy, symengine",
        "import numpy": "import numpy",
        "import sympy, numpy": "import sympy, numpy",
    }
    wall: dict[str, list[float]] = {k: [] for k in stmts}
    cpu: dict[str, list[float]] = {k: [] for k in stmts}
    for i in range(runs + 1):
        for k, code in stmts.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            t1 = time.perf_counter()
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if i:  # the first round warms the file cache
                wall[k].append(t1 - t0)
                cpu[k].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    base = statistics.median(cpu["import sympy"])
    return [
        [
            k,
            f"{statistics.median(wall[k]) * 1e3:.0f}",
            f"{statistics.median(cpu[k]) * 1e3:.0f}",
            f"{statistics.median(cpu[k]) / base:.2f}x",
        ]
        for k in stmts
    ]


# ---------------------------------------------------------------- the golden queries' totals as text


def golden_texts(every: int) -> dict[str, int]:
    """Run the golden queries (every ``every``-th), record every plan cost whose total is read, and count the
    totals whose text is the same when built by each route (symengine's converted to sympy to print)."""
    import contextlib
    import io

    from shardalg.costs import plancost
    from tests.golden.capture import run
    from tests.golden.queries import QUERIES

    seen: dict[int, Any] = {}
    prop = plancost.PlanCost.total

    def recording(self: Any) -> Any:
        seen.setdefault(id(self), self)
        return prop.fget(self)  # type: ignore[attr-defined]

    plancost.PlanCost.total = property(recording)  # type: ignore[method-assign, assignment]
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            for q in QUERIES[::every]:
                run(q)
    finally:
        plancost.PlanCost.total = prop  # type: ignore[method-assign]
    ars = {"sympy": sympy_arithmetic(), "symengine": symengine_arithmetic()}
    out = {"totals": 0, "queries": len(QUERIES[::every])}
    for pc in seen.values():
        today = str(pc.total)
        out["totals"] += 1
        for name, ar in ars.items():
            try:
                e = total_of(pc, ar)
                text = str(e if name == "sympy" else to_sympy(e))
            except Exception:  # noqa: BLE001 - counted as a difference
                text = None
            key = f"{name}: same text"
            out[key] = out.get(key, 0) + (text == today)
            if text is None:
                out[f"{name}: failed"] = out.get(f"{name}: failed", 0) + 1
            if name == "symengine" and text is not None:
                raw = str(e)
                out["symengine: own printer same"] = out.get("symengine: own printer same", 0) + (
                    raw == today
                )
    return out


# ---------------------------------------------------------------- main


def _xla_ms(cases: list[Case]) -> dict[str, float | None]:
    if not have_jax():
        return {c.label: None for c in cases}
    from bench.xla import XlaWorker, case_of

    out: dict[str, float | None] = {}
    xla = XlaWorker()
    try:
        for c in cases:
            case = case_of(c.statement, c.mesh, SIZES)
            xla.compile(case)
            out[c.label] = statistics.median([xla.compile(case)[0] for _ in range(5)])
    finally:
        xla.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench arithmetic", description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=11, help="interleaved rounds (median)")
    ap.add_argument("--imports", type=int, default=7, help="interleaved import runs per statement")
    ap.add_argument("--no-golden", action="store_true", help="skip the golden queries' text comparison")
    ap.add_argument("--golden-every", type=int, default=1, metavar="N", help="only every Nth golden query")
    args = ap.parse_args(argv)

    cases = [Case(label, expr, BOOK_MESH) for label, expr in BOOK_CASES]
    four = axes_cases(4)[0]
    cases.append(Case(four[0], four[1], four[2]))
    res = measure(cases, args.rounds)
    xla = _xla_ms(cases[:4])
    floor = min((v for v in xla.values() if v is not None), default=XLA_FLOOR_MS)
    source = (
        "XLA measured here"
        if any(v is not None for v in xla.values())
        else f"jax not installed: the issue's {XLA_FLOOR_MS:.0f} ms"
    )
    warm_limit, fresh_limit = floor / WARM_VS_XLA, floor / FRESH_VS_XLA
    print(
        f"plans + symbolic total + seconds of every plan on {HW}, sizes {SIZES}; CPU ms, median of {args.rounds}"
    )
    print(f"targets ({source}): warm <= {warm_limit:.2f} ms, fresh <= {fresh_limit:.1f} ms (book cases)")
    head = [
        "case",
        "route",
        "warm: plans",
        "build",
        "evaluate",
        "total",
        "print",
        "fresh: plans",
        "build",
        "evaluate",
        "total",
        "print",
        "verdict",
    ]
    rows = []
    worst: dict[str, list[bool]] = {}
    for c in cases:
        for r in ROUTES:
            slot = res[(c.label, r)]
            wp, wb, we, wt, wx = slot["warm"].medians()
            fp, fb, fe, ft, fx = slot["fresh"].medians()
            book = c.mesh_text == BOOK_MESH
            ok = (wt <= warm_limit and ft <= fresh_limit) if book else None
            if book:
                worst.setdefault(r, []).append(bool(ok))
            rows.append(
                [
                    c.label,
                    r,
                    f"{wp:.3f}",
                    f"{wb:.3f}",
                    f"{we:.3f}",
                    f"{wt:.3f}",
                    f"{wx:.3f}",
                    f"{fp:.2f}",
                    f"{fb:.2f}",
                    f"{fe:.2f}",
                    f"{ft:.2f}",
                    f"{fx:.2f}",
                    verdict(ok),
                ]
            )
    print(table(head, rows, right=range(2, len(head) - 1)))
    print(
        "total = plans + build + evaluate (the verdict's figure); print = the totals as sympy text, after it "
        "(symengine's converted to sympy first)"
    )
    print()
    for r, oks in worst.items():
        print(f"  {r}: book cases meeting both targets: {sum(oks)} of {len(oks)}  {verdict(all(oks))}")
    print()
    print(
        "seconds only (a ranking's need: no symbolic total), CPU ms, median; the plans found outside the timing:"
    )
    print(table(["case", "plans", "route", "warm", "fresh"], ranking(cases, args.rounds), right=(1, 3, 4)))
    print()
    print(
        f"plans ranked by seconds on {HW} (shardalg.plans with hw), CPU ms, median: the float path, and the "
        "light terms evaluated in its place:"
    )
    head = [
        "case",
        "plans",
        "runs",
        "warm: float",
        "light",
        "light/float",
        "fresh: float",
        "light",
        "light/float",
    ]
    print(table(head, ranked(cases, args.rounds), right=range(1, len(head))))
    print()
    print("import time, a process each (interleaved; CPU is the child's user + system):")
    print(
        table(
            ["statement", "wall ms", "CPU ms", "CPU vs import sympy"], imports(args.imports), right=(1, 2, 3)
        )
    )
    if not args.no_golden:
        print()
        got = golden_texts(args.golden_every)
        print(
            f"golden queries' totals ({got.pop('queries')} queries, {got.pop('totals')} plan totals read): "
            + ", ".join(f"{k} {v}" for k, v in got.items())
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
