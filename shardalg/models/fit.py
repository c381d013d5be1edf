"""Fit and size questions as derivations, each step recorded (as :func:`shardalg.costs.derive.compare` does):

- :func:`largest` — the largest value of a dim (a batch) whose memory per device fits in HBM;
- :func:`fewest_devices` — the fewest devices whose HBM together holds the model, each tensor once;
- :func:`smallest_slice` — the smallest of a chip's allowed slice shapes with that many devices;
- :func:`largest_params` — the largest parameter count the bytes per parameter allow (pure DP: all of them
  on every device).

    >>> from shardalg.models.memory import memory
    >>> d = largest(memory("params W\\nIn[B, D] * W[D, F] -> Out[B, F] where D=1024, F=1024", mesh="X=1",
    ...                    hw="base=tpu-v5e,hbm=1e9"), "B")
    >>> d.result                  # (1e9 - 12 bytes a parameter) / (the backward keeps In: 2*1024 bytes a row)
    482137

Each answer comes out of the memory report of :mod:`.memory` (itself from the program's shardings); nothing is
typed in. A dim sharded over mesh axes must stay a multiple of their sizes, so the largest value is the
largest such multiple.
"""

from __future__ import annotations

from fractions import Fraction
from math import lcm
from typing import Any

import sympy
from sympy import Expr, Integer

from shardalg.algebra.symbols import dim_size
from shardalg.costs.derive import Derivation
from shardalg.errors import UsageError
from shardalg.planning import atpoint, symbolic

from .analysis import analyze
from .memory import MemoryReport, global_bytes
from .program import ModelProgram, resized
from .slices import Slice, slice_shapes

__all__ = ["largest", "fewest_devices", "smallest_slice", "largest_params", "shard_group"]

_SEARCH_LIMIT = 1 << 62  # a batch beyond this is not a question about HBM


def _hbm(report: MemoryReport) -> Expr:
    if report.chip is None:
        raise UsageError("a fit needs a chip for its HBM: pass hw='tpu-v5e' (CLI: --hw tpu-v5e)")
    value = report.chip.hbm_capacity.value
    return Integer(int(value)) if float(value).is_integer() else sympy.Float(value)


def shard_group(report: MemoryReport, dim: str) -> int:
    """The number ``dim`` must be a multiple of: the lcm over the program's tensors of the product of the
    sizes of the axes that shard it (1 when no tensor shards it)."""
    m = report.model
    group = 1
    for v in m.values.values():
        for d in v.tensor.dims:
            if d.label == dim and d.axes:
                sizes = [m.mesh[a].size for a in d.axes]
                if any(s is None for s in sizes):
                    raise UsageError(f"{dim} is sharded over a symbolic axis; give the mesh sizes")
                group = lcm(group, int(sympy.Mul(*sizes)))
    return group


def _first_token_dim(report: MemoryReport) -> str | None:
    """The dim microbatches split (the first ``tokens`` dim), or None without a declaration."""
    tokens = report.model.roles.tokens
    return tokens[0] if tokens else None


def _numeric(expr: Expr, what: str) -> Expr:
    if expr.free_symbols:
        names = ", ".join(sorted(str(s) for s in expr.free_symbols))
        raise UsageError(
            f"{what} still depend{'' if what.endswith('s') else 's'} on {names}",
            fix=f"bind them: --sizes {names.split(', ')[0]}=...",
        )
    return expr


def largest(report: MemoryReport, dim: str) -> Derivation:
    """The largest value of ``dim`` for which the memory per device fits in HBM (every other size bound).
    ``report`` may have ``dim`` bound (to any value) or not: it is rebuilt with ``dim`` free.

    No plan is chosen by a made-up value of ``dim``: where the cheapest plan of a statement (a transient, a
    kept activation) changes with ``dim``, the memory is a formula per interval of ``dim`` (:func:`_intervals`:
    one planning per interval, with ``dim`` a symbol and each choice it decides made at a point of the
    interval, from the interval of the first legal value up), each interval is solved on its own formula, and
    the largest fitting value of any interval is the answer; it is then confirmed on the model planned at that
    value and the next (:func:`_check`)."""
    free = resized(report.model, {}, free=(dim,))
    x = dim_size(dim)
    if not any(d.label == dim for v in free.values.values() for d in v.tensor.dims):
        raise UsageError(
            f"the memory per device does not depend on {dim}",
            fix="solve for a dim of the activations or the KV cache, e.g. B",
        )
    group = shards = shard_group(report, dim)
    a = report.analysis
    micro = report.choices.micro if a.mode == "train" and dim == _first_token_dim(report) else 1
    if micro > 1:  # each microbatch is a whole multiple of the shard group
        group *= micro
    pieces = _intervals(report, free, dim, group)
    if pieces is None:  # more intervals than a piecewise answer holds: plan at each value tried
        pieces = []
    again = pieces[0][0] if pieces else report
    hbm = _hbm(again)
    d = Derivation(f"the largest {dim} whose memory per device fits in HBM ({again.chip.name})")
    for _, total, _ in pieces:
        if x not in total.free_symbols:
            raise UsageError(
                f"the memory per device does not depend on {dim}",
                fix="solve for a dim of the activations or the KV cache, e.g. B",
            )
        _numeric(total.subs(x, 1), f"the memory per device besides {dim}")
    legal = [p for p in pieces if _holds_a_multiple(group, *p[2])]
    pieces = _merged(legal or pieces[:1])  # an interval with no legal value of dim (B < 1/1024) is no answer
    if len(pieces) > 1:
        d.add(
            f"the plans change with {dim}: the memory is one formula per interval of {dim} (intervals)",
            Integer(len(pieces)),
        )
    elif pieces:
        d.add("bytes per device", pieces[0][1])
        d.add("fits in HBM", sympy.LessThan(pieces[0][1], hbm, evaluate=False))
    if micro > 1:
        d.add(f"{micro} microbatches of {dim}/{micro}, each a multiple of {group // micro}", Integer(group))
    best = 0
    for _, total, (lo, hi) in pieces:
        where = symbolic.interval_text(dim, lo, hi) if len(pieces) > 1 else ""
        label = f"where {where}: " if where else ""
        if where:
            d.add(f"{label}bytes per device", total)
        there = _largest_in(total, x, hbm, group, lo, hi, d, label)
        if where:
            d.add(f"{label}the largest multiple of {group} there that fits (0: none)", Integer(there))
        best = max(best, there)
    if not pieces:
        d.add(
            f"the plans change with {dim} in more than {symbolic.MAX_PIECES} intervals: planned at each "
            f"value tried",
            x,
        )
    if shards > 1 and micro == 1:
        d.add(f"{dim} is sharded over {group} devices: a multiple of {group}", Integer(group))
    best = _check(again, dim, best, group, hbm, d)
    d.result = Integer(best)
    d.add("result", d.result)
    return d


Leaf = tuple[MemoryReport, Expr, tuple[Any, Any]]


def _intervals(report: MemoryReport, free: ModelProgram, dim: str, start: int) -> list[Leaf] | None:
    """The memory of ``free`` (every size bound but ``dim``) as a formula per interval of ``dim``, from the
    interval holding ``start`` up (below the first multiple of the shard group no value is legal): each
    interval found by one planning at a point of it, every plan choice ``dim`` decides made at that point
    (:func:`shardalg.planning.atpoint.deciding_at`); the interval is where none of those choices changes.
    Each item: the report, its total expanded, and its open interval (None: no bound). None when there are
    more than :data:`~shardalg.planning.symbolic.MAX_PIECES` intervals."""
    a = report.analysis
    factor = ("dim", dim)

    def run(at: Fraction) -> tuple[MemoryReport, list[atpoint.Crossing]]:
        with symbolic.strict(), atpoint.deciding_at(factor, at) as made:
            again = report.again(analyze(free, a.mode if a.mode_chosen else None, a.remat))
        return again, made

    out: list[Leaf] = []
    ahead: list[tuple[Leaf, list[atpoint.Crossing], tuple[Any, Any]]] = []  # found past a gap
    point, edge, cap = Fraction(start), None, None  # edge: where the next interval starts
    for _ in range(4 * symbolic.MAX_PIECES):
        again, made = run(point)
        span = atpoint.around(made, point)
        if span is None:  # the point is a crossing: try between it and the next one
            point = _between(point, _least(atpoint.after(made, point), cap))
            continue
        leaf = (again, sympy.expand(again.total), _exact(span))
        if edge is not None and not _same(span[0], edge):  # an interval lies between: look there first
            ahead.append((leaf, made, span))
            cap = span[0]
            point = _between(edge, cap)
            continue
        while True:
            out.append(leaf)
            if len(out) > symbolic.MAX_PIECES:
                return None
            edge = span[1]
            follows = [n for n in ahead if edge is not None and _same(n[2][0], edge)]
            if not follows:
                break
            ahead.remove(follows[0])
            leaf, made, span = follows[0]
        if edge is None:
            return out
        cap = None
        for n in ahead:
            cap = _least(cap, n[2][0])
        point = _between(edge, _least(atpoint.after(made, edge), cap))
    return None


def _same(a: Any, b: Any) -> bool:
    """Whether two bounds are the same number (exact sympy roots compared to 50 digits)."""
    if a is None or b is None:
        return a is b
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a == b
    return bool(sympy.N(_number(a) - _number(b), 50) == 0)


def _least(a: Any, b: Any) -> Any:
    """The smaller of two bounds (None: no bound)."""
    if a is None or b is None:
        return b if a is None else a
    return a if bool(a < b) else b


def _between(lo: Any, hi: Any) -> Fraction:
    """A rational point strictly inside (``lo``, ``hi``) (``hi`` None: no bound)."""
    if isinstance(lo, Fraction) and (hi is None or isinstance(hi, Fraction)):
        return lo * 2 if hi is None else (lo + hi) / 2
    mid = _number(lo) * 2 if hi is None else (_number(lo) + _number(hi)) / 2
    return Fraction(str(sympy.N(mid, 60)))


def _number(b: Any) -> Any:
    """A bound as a sympy number: a Fraction as its Rational; an exact root (already sympy) as it is."""
    return sympy.Rational(b.numerator, b.denominator) if isinstance(b, Fraction) else b


def _exact(span: tuple[Any, Any]) -> tuple[Any, Any]:
    """An interval's bounds as sympy numbers (a Fraction as its Rational)."""
    return tuple(_number(b) for b in span)  # type: ignore[return-value]


def _holds_a_multiple(group: int, lo: object, hi: object) -> bool:
    """Whether a positive multiple of ``group`` lies strictly inside (``lo``, ``hi``) (None: 0, no bound)."""
    first = group if lo is None else (int(sympy.floor(lo / group)) + 1) * group
    return hi is None or first < hi


def _merged(pieces: list[tuple[MemoryReport, Expr, tuple[object, object]]]) -> list:
    """Neighbouring intervals whose memory is the same formula, as one (their plans differ in time only; an
    interval between them that holds no legal value was left out)."""
    out: list = []
    for again, total, (lo, hi) in pieces:
        if out and out[-1][1] == total:
            out[-1] = (out[-1][0], total, (out[-1][2][0], hi))
        else:
            out.append((again, total, (lo, hi)))
    return out


def _largest_in(
    total: Expr, x: Expr, hbm: Expr, group: int, lo: object, hi: object, d: Derivation, label: str
) -> int:
    """The largest multiple of ``group`` strictly inside (``lo``, ``hi``) (None: 0, no bound) where
    ``total`` fits in ``hbm`` (0 when none does); the linear case's solution is recorded in ``d``."""
    below = None if hi is None else (int(sympy.ceiling(hi / group)) - 1) * group  # the largest multiple < hi
    slope = sympy.diff(total, x)
    base = total.subs(x, 0)
    if not slope.free_symbols and slope > 0 and sympy.expand(total - base - slope * x) == 0:
        bound = (hbm - base) / slope
        d.add(f"{label}solve for {x}", sympy.LessThan(x, bound, evaluate=False))
        d.add(f"{label}that is", sympy.LessThan(x, sympy.Float(bound, 6), evaluate=False))
        best = int(sympy.floor(bound / group)) * group if bound >= 0 else 0
    else:
        best = _search(lambda n: (hi is None or n < hi) and bool(total.subs(x, n) <= hbm), group)
    if below is not None:
        best = min(best, below)
    return best if best > 0 and (lo is None or best > lo) else 0


def _concrete_total(report: MemoryReport, dim: str, value: int) -> Expr:
    """The memory per device with ``dim`` bound to ``value``, the model planned again at that size (a plan the
    planner picks, and so a transient, may depend on the size)."""
    m = report.model
    bound = resized(m, {dim: value})
    a = report.analysis
    return report.again(analyze(bound, a.mode if a.mode_chosen else None, a.remat)).total


def _check(report: MemoryReport, dim: str, best: int, group: int, hbm: Expr, d: Derivation) -> int:
    """Confirm ``best`` on the model planned at that size: it fits and ``best + group`` does not. Where the
    plans (and so the transients) change with the size and the formula is off, search on planned totals:
    gallop from ``best`` to a fitting and a non-fitting multiple of ``group``, then bisect between them."""
    totals: dict[int, Expr] = {}

    def fits(n: int) -> bool:
        if n not in totals:
            if len(totals) >= 48:
                raise UsageError(
                    f"no largest {dim} found in 48 plannings: the plans change with {dim}",
                    fix=f"check values one by one with shardalg memory --sizes {dim}=...",
                )
            totals[n] = _concrete_total(report, dim, n)
        return bool(totals[n] <= hbm)

    best = max(best, group)
    lo, hi = (best, None) if fits(best) else (None, best)
    step = group
    while lo is None:
        n = max(group, hi - step)
        if fits(n):
            lo = n
        elif n == group:
            d.add(
                f"not even {dim} = {group} fits", sympy.StrictGreaterThan(totals[group], hbm, evaluate=False)
            )
            return 0
        else:
            hi, step = n, step * 2
    while hi is None:
        n = lo + step
        if n > _SEARCH_LIMIT:
            raise UsageError(f"the memory per device does not grow with {dim}: every value fits")
        if fits(n):
            lo, step = n, step * 2
        else:
            hi = n
    while hi - lo > group:
        mid = (lo + hi) // 2 // group * group
        if fits(mid):
            lo = mid
        else:
            hi = mid
    if len(totals) > 2:
        d.add(
            f"planned at each size ({len(totals)} sizes tried: the plans change with {dim})",
            Integer(len(totals)),
        )
    d.add(f"at {dim} = {lo}", sympy.LessThan(totals[lo], hbm, evaluate=False))
    d.add(f"at {dim} = {hi}", sympy.StrictGreaterThan(totals[hi], hbm, evaluate=False))
    return lo


def _search(fits, step: int) -> int:
    """The largest multiple of ``step`` for which the non-increasing predicate ``fits`` holds (0 if none)."""
    if not fits(step):
        return 0
    hi = step
    while fits(hi * 2):
        hi *= 2
        if hi > _SEARCH_LIMIT:
            raise UsageError("the memory per device does not grow with this dim: every value fits")
    lo = hi  # fits(lo), not fits(2*hi)
    top = hi * 2
    while top - lo > step:
        mid = (lo + top) // 2 // step * step
        if mid <= lo:
            break
        if fits(mid):
            lo = mid
        else:
            top = mid
    return lo


def fewest_devices(report: MemoryReport) -> Derivation:
    """The fewest devices whose HBM holds the model, each tensor once (parameters, gradients, optimizer state,
    saved activations, KV cache; no replicas and no transients): ``ceil(bytes / HBM)``."""
    hbm = _hbm(report)
    parts = global_bytes(report)
    total = _numeric(sympy.Add(*parts.values()), "the model's bytes")
    d = Derivation(
        f"the fewest {report.chip.name} devices whose HBM holds the model (each tensor once: no replicas, "
        "no transients)"
    )
    for k, v in parts.items():
        if v != 0:
            d.add(f"{k.replace('_', ' ')} (each tensor once)", v)
    d.add("model bytes", total)
    d.add("devices", sympy.GreaterThan(sympy.Symbol("N"), sympy.Float(total / hbm, 6), evaluate=False))
    d.result = Integer(int(sympy.ceiling(total / hbm)))
    d.add("result", d.result)
    return d


def smallest_slice(report: MemoryReport, shapes: tuple[Slice, ...] | None = None) -> tuple[Derivation, Slice]:
    """The smallest allowed slice (``shapes``, default the chip's table) with at least the fewest devices."""
    d = fewest_devices(report)
    need = int(d.result)
    options = shapes if shapes is not None else slice_shapes(report.chip.name)
    fitting = [s for s in options if s.devices >= need]
    if not fitting:
        biggest = max(options, key=lambda s: s.devices)
        raise UsageError(
            f"the model needs {need} devices; the largest slice ({biggest.text}) has {biggest.devices}",
            fix="give larger shapes with --slices, or a smaller model",
        )
    pick = min(fitting, key=lambda s: (s.devices, s.shape))
    d.title = f"the smallest {report.chip.name} slice whose HBM holds the model (each tensor once)"
    d.steps.pop()  # fewest_devices' result step; this derivation ends with the slice
    d.add(f"smallest allowed shape with at least {need} devices: {pick.text}", Integer(pick.devices))
    d.result = Integer(pick.devices)
    return d, pick


def largest_params(report: MemoryReport) -> Derivation:
    """The largest parameter count that fits when a device holds the bytes per parameter the report counts
    (parameters, gradients, optimizer state) for every parameter it keeps; activations, KV cache and transients
    are left out. Under pure DP every device keeps all of them: ``P = HBM / bytes per parameter``."""
    hbm = _hbm(report)
    held = report.parts["params"] + report.parts["grads"] + report.parts["optimizer"]
    per_param = sympy.simplify(held / report.params)
    d = Derivation(
        f"the largest parameter count whose parameters, gradients and optimizer state fit in HBM "
        f"({report.chip.name}; activations, KV cache and transients left out)"
    )
    d.add("parameters", report.params)
    d.add("bytes per device for them", held)
    d.add("bytes per parameter on a device", per_param)
    if per_param.free_symbols:
        raise UsageError(
            f"the bytes per parameter depend on {', '.join(sorted(map(str, per_param.free_symbols)))}: "
            "the parameters are sharded unevenly",
            fix="bind the sizes, or replicate the parameters (pure DP)",
        )
    p = sympy.Symbol("P", positive=True)
    d.add("fits in HBM", sympy.LessThan(per_param * p, hbm, evaluate=False))
    d.add("solve for P", sympy.LessThan(p, sympy.Float(hbm / per_param, 6), evaluate=False))
    d.result = Integer(int(sympy.floor(hbm / per_param)))
    d.add("result", d.result)
    return d
