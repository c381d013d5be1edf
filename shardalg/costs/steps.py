"""One step's cost: its collective's time, an einsum's FLOPs and compute time, HBM traffic, as light terms
worked out when asked for; and the same times straight as numbers, for ranking.

The formulas are :mod:`shardalg.costs.stepcost`'s (its constants, such as ``FLOPS_PER_MAC`` and ``W_HBM``,
are read from there at each call). :func:`seconds_of` gives a step's time on a chip without building a
term: the collective's cost for one byte, evaluated once per (op, axes), times the step's bytes as an
integer; an einsum's FLOPs over ``C``.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

import sympy

from shardalg.algebra.registry import RECORDS
from shardalg.algebra.symbols import axis_size, dim_size
from shardalg.errors import UsageError
from shardalg.notation.plan import Step
from shardalg.notation.printing import text
from shardalg.notation.syntax import Op, Tensor

from . import stepcost as sc
from .commcost import NOTHING, CommCost
from .fromsympy import from_sympy
from .stepcost import Options, _collective, _t, group_bytes, local_bytes, moved_share, unit_cost
from .terms import ZERO, Mono, Point, Term, add, atom_id, maximum

__all__ = ["StepCost", "step_cost", "einsum_flops", "numeric", "seconds_of"]


def _local_sizes(left: Tensor, right: Tensor, opts: Options) -> tuple[int, int, dict[int, int]]:
    """The product of the local sizes of every dim of the einsum (each dim counted once) as numerator,
    denominator and powers of the symbols left."""
    seen: set[str] = set()
    num, den = 1, 1
    powers: dict[int, int] = {}
    sizes, mesh = opts.sizes, opts.mesh
    for t in (left, right):
        for d in t.dims:
            label = d.label
            if label in seen:
                continue
            seen.add(label)
            if d.size is not None:
                num *= d.size
            elif label in sizes:
                num *= sizes[label]
            else:
                i = atom_id(dim_size(label))
                powers[i] = powers.get(i, 0) + 1
            for a in d.axes:
                n = mesh[a].size
                if n is not None:
                    den *= n
                else:
                    i = atom_id(axis_size(a))
                    powers[i] = powers.get(i, 0) - 1
    return num, den, powers


def _mono(num: int, den: int, powers: dict[int, int]) -> Mono:
    coeff = num // den if num % den == 0 else Fraction(num, den)
    return Mono(coeff, tuple(sorted((i, k) for i, k in powers.items() if k != 0)))


def einsum_flops(left: Tensor, right: Tensor, opts: Options) -> Term:
    """2 × the product of the local sizes of every dim of the einsum (each dim counted once)."""
    return _t(sc.FLOPS_PER_MAC) * _mono(*_local_sizes(left, right, opts))


def _einsum_time(left: Tensor, right: Tensor, opts: Options) -> Term:
    """The einsum's FLOPs over C, built as one monomial."""
    num, den, powers = _local_sizes(left, right, opts)
    per_mac, rate = sc.FLOPS_PER_MAC, sc.FLOPS
    if type(per_mac) is not int or not isinstance(rate, sympy.Symbol):  # replaced by something else
        return _t(per_mac) * _mono(num, den, powers) / _t(rate)
    c = atom_id(rate)
    powers[c] = powers.get(c, 0) - 1
    return _mono(per_mac * num, den, powers)


TERMS_KEPT = 1 << 14  # step terms memoized per Options before the memo starts again


def _terms(opts: Options) -> dict:
    """The memo of step terms by value on ``opts`` (the plans of one einsum, and the einsums of one search,
    share steps that are equal but not the same objects): a term depends on the op, its axes (and the unit
    cost worked out for them, which the key holds so a replaced model constant is not missed), and the dims and
    dtype of the tensors it reads; not on names or reasons. Bounded: it starts again past TERMS_KEPT."""
    memo = opts._memo.get("terms")
    if memo is None or len(memo) >= TERMS_KEPT:
        memo = opts._memo["terms"] = {}
    return memo


def _shape_key(t: Tensor) -> tuple:
    """What a step's terms read of a tensor, as plain tuples (cheap to hash): its dims' labels (a literal
    size is its own label), their axes, its dtype."""
    return t.dim_names, t.layout()[0], t.dtype


class StepCost:
    """One step's share as light terms (:mod:`shardalg.costs.terms`; ``str`` and ``.sympy()`` give the
    formula): bytes V its collective moves, its CommCost, FLOPs and HBM bytes, and times. Each is worked out
    when first asked for (a ranking needs only the times)."""

    __slots__ = ("step", "opts", "_unit", "_comm", "_comms", "_flops", "_compute", "_hbm")

    def __init__(self, step: Step, opts: Options):
        self.step, self.opts = step, opts
        # the collective's cost for one byte (or None): working it out now raises a model's refusal now
        self._unit = None if step.op is Op.EINSUM else unit_cost(step.op, step.axes, opts, step.offset)
        self._comm: CommCost | None = None
        self._comms: Term | None = None
        self._flops: Term | None = None
        self._compute: Term | None = None
        self._hbm: Term | None = None

    @property
    def comm(self) -> CommCost:
        if self._comm is None:
            s = self.step
            self._comm = NOTHING if s.op is Op.EINSUM else _collective(s.op, s.inputs[0], s.axes, self.opts, s.offset)
        return self._comm

    @property
    def bytes(self) -> Term:
        """V, the array's bytes as the group sees it; with ``exact``, the (N − 1)/N of it a ring moves."""
        s = self.step
        if not s.communicates:
            return ZERO
        return group_bytes(s.op, s.inputs[0], s.axes, self.opts) * moved_share(s.op, s.axes, self.opts)

    @property
    def comms(self) -> Term:
        if self._comms is None:
            s = self.step
            unit = self._unit
            if unit is None:
                self._comms = ZERO
            elif self._comm is None and unit.overlapped and unit.light_parts:
                # the common case, without building the step's CommCost: each phase's bandwidth times V
                t = s.inputs[0]
                key = ("comms", id(unit), s.op, s.axes, _shape_key(t))
                terms = _terms(self.opts)
                got = terms.get(key)
                if got is None or got[0] is not unit:  # the unit is kept beside the term: its id is not reused
                    v = group_bytes(s.op, t, s.axes, self.opts)
                    if self.opts.latency:
                        term = add(*(maximum(lat, b * v) for lat, b in unit.parts))
                    else:
                        term = add(*(b * v for _, b in unit.parts))
                    got = terms[key] = (unit, term)
                self._comms = got[1]
            else:
                self._comms = self.comm.term(self.opts.latency)
        return self._comms

    @property
    def flops(self) -> Term:
        if self._flops is None:
            s = self.step
            self._flops = einsum_flops(s.inputs[0], s.inputs[1], self.opts) if s.op is Op.EINSUM else ZERO
        return self._flops

    @property
    def compute(self) -> Term:
        if self._compute is None:
            s = self.step
            if s.op is Op.EINSUM:
                left, right = s.inputs
                key = ("compute", _shape_key(left), _shape_key(right), sc.FLOPS_PER_MAC, sc.FLOPS)
                terms = _terms(self.opts)
                got = terms.get(key)
                if got is None:
                    got = terms[key] = _einsum_time(left, right, self.opts)
                self._compute = got
            else:
                self._compute = ZERO
        return self._compute

    @property
    def hbm_bytes(self) -> Term:
        if self._hbm is None:
            s, hbm = self.step, self.opts.hbm
            moved = (*s.inputs, s.output) if s.op is Op.EINSUM else ()
            self._hbm = add(*(local_bytes(t, self.opts) for t in moved if hbm is None or t.name in hbm))
        return self._hbm

    @property
    def memory(self) -> Term:
        return self.hbm_bytes / _t(sc.W_HBM) if self.step.op is Op.EINSUM else ZERO

    @property
    def duration(self) -> Term:
        """Its time on its resource: the collective's, or the local einsum's compute."""
        return self.compute if self.step.op is Op.EINSUM else self.comms

    def to_json(self, values: Mapping[sympy.Symbol, float]) -> dict[str, object]:
        out: dict[str, object] = {"step": text(self.step.statement()), "op": self.step.op.value,
                                  "axes": list(self.step.axes)}  # fmt: skip
        for key in ("bytes", "flops", "comms", "compute", "memory"):
            expr = getattr(self, key)
            out[key] = str(expr)
            out[key + "_value"] = numeric(expr, values)
        if self.comm.axis_bytes:
            out["axis_bytes"] = {a: {"formula": str(b), "value": numeric(b, values)} for a, b in self.comm.axis_bytes}
        return out


STEPS_KEPT = 1 << 14  # step costs kept per Options before the memo starts again


def step_cost(step: Step, opts: Options, constants: tuple | None = None) -> StepCost:
    """The cost of one step (its terms worked out when asked for), kept on ``opts`` by the step object (the
    plans of one einsum share steps, and so do the queries on it); made again when a model constant it reads
    was replaced (``constants``: :func:`model_constants`, read once by a caller pricing many steps)."""
    memo = opts._memo.get("steps")
    if memo is None or len(memo) >= STEPS_KEPT:
        memo = opts._memo["steps"] = {}
    consts = model_constants(opts) if constants is None else constants
    got = memo.get(id(step))
    if got is not None and got[0] is step and got[1] == consts:
        return got[2]  # type: ignore[no-any-return]
    cost = StepCost(step, opts)
    memo[id(step)] = (step, consts, cost)
    return cost


def model_constants(opts: Options) -> tuple:
    """Every module constant and formula a step's cost reads (so a kept cost is made again when a test or a
    user replaces one): the FLOP, HBM and dtype constants and the ring's, and the model's formulas."""
    return (sc.FLOPS_PER_MAC, sc.FLOPS, sc.W_HBM, sc.DEFAULT_DTYPE, sc.RING_HOPS, sc.ONE_WAY, sc.ALL_TO_ALL_SHARE,
            sc.UNI_ALL_TO_ALL_SHARE, sc.W_ICI, sc.W_DCN, sc.T_MIN, sc.ALPHA, sc.BETA,
            tuple(sc.FORMULAS[opts.model].items()))  # fmt: skip


def numeric(expr: object, values: Mapping[sympy.Symbol, float]) -> float | None:
    """``expr`` (a term or a sympy expression) as a float at ``values``; None while any symbol is left."""
    if not isinstance(expr, Term | sympy.Basic):
        raise UsageError(f"not a cost: {expr!r}")
    got = from_sympy(expr).evaluate(values)
    return None if got is None else float(got)


# ---- numbers without terms: the ranking's path -----------------------------------------------------------
def _bytes_number(t: Tensor, opts: Options, full: tuple[str, ...]) -> float | None:
    width = (t.dtype or sc.DEFAULT_DTYPE).bytes
    n, d = width.numerator, width.denominator
    sizes, mesh = opts.sizes, opts.mesh
    for dim in t.dims:
        size = dim.size if dim.size is not None else sizes.get(dim.label)
        if size is None:
            return None
        n *= size
        for a in dim.axes:
            if a not in full:
                k = mesh[a].size
                if k is None:
                    return None
                d *= k
    return n / d


def _unit_numbers(op: Op, axes: tuple[str, ...], opts: Options, at: Point, offset: int | None = None) -> tuple | None:
    """(latency, seconds per byte) of each phase of ``op`` over ``axes`` (a Shift's ``offset``) at ``at``,
    whether they overlap; memoized per point."""
    unit = unit_cost(op, axes, opts, offset)
    key = ("unitnum", op, axes, offset, id(at))
    got = opts._memo.get(key)
    if got is None or got[0] is not unit or got[1] is not at:
        parts = None
        if unit is not None:
            parts = tuple((lat.evaluate(at), b.evaluate(at)) for lat, b in ((_t(x), _t(y)) for x, y in unit.parts))
        got = opts._memo[key] = (unit, at, parts, unit.overlapped if unit is not None else True)
    return got[2:]


def seconds_of(step: Step, opts: Options, at: Point) -> float | None:
    """The step's time at ``at`` (a chip's numbers) as a float, without building its terms; None while a
    size or a number is unknown."""
    op = step.op
    if op is Op.EINSUM:
        flops = 1
        seen: set[str] = set()
        for t in step.inputs:
            for dim in t.dims:
                if dim.label in seen:
                    continue
                seen.add(dim.label)
                size = dim.size if dim.size is not None else opts.sizes.get(dim.label)
                if size is None:
                    return None
                flops *= size
                for a in dim.axes:
                    k = opts.mesh[a].size
                    if k is None:
                        return None
                    flops /= k
        c = _t(sc.FLOPS).evaluate(at)
        return None if c is None else float(_t(sc.FLOPS_PER_MAC).evaluate(at) or 0) * flops / c
    parts, overlapped = _unit_numbers(op, step.axes, opts, at, step.offset)
    if parts is None:
        return 0.0
    v = _bytes_number(step.inputs[0], opts, step.axes if RECORDS[op].group_view else ())
    if v is None or any(lat is None or b is None for lat, b in parts):
        return None
    if not opts.latency:
        return float(sum(b * v for _, b in parts))
    if overlapped:
        return float(sum(max(lat, b * v) for lat, b in parts))
    return float(sum(lat + b * v for lat, b in parts))
