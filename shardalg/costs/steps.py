"""One step's cost: its collective's time, an einsum's FLOPs and compute time, HBM traffic, as light terms
worked out when asked for; and the same times straight as numbers, for ranking (a step's, :func:`seconds_of`;
a plan's under an overlap policy, :func:`fast_seconds`; a step's weight in a search, :func:`step_weights`).

The formulas are :mod:`shardalg.costs.stepcost`'s (its constants, such as ``FLOPS_PER_MAC`` and ``W_HBM``,
are read from there). Every memo here goes through the cache layer, keyed by values: the step (or what its
terms read of it) and the :class:`~shardalg.costs.stepcost.Options`, which holds the CostModel. :func:`seconds_of` gives a step's time on a chip without building a
term: the collective's cost for one byte, evaluated once per (op, axes), times the step's bytes as an
integer; an einsum's FLOPs over ``C``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import sympy

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.registry import RECORDS
from shardalg.algebra.traffic import moves_nothing, statistics_of
from shardalg.cache import Kind, memo, memoized
from shardalg.errors import UsageError
from shardalg.notation.plan import Plan, Step
from shardalg.notation.printing import text
from shardalg.notation.syntax import Dim, Op, Tensor
from shardalg.planning.overlap import OverlapPolicy

from . import schedule as sched
from . import stepcost as sc
from .commcost import NOTHING, CommCost
from .costmodel import CostModel
from .fromsympy import from_sympy
from .stepcost import (
    Options,
    _collective,
    _t,
    group_bytes,
    group_view,
    local_bytes,
    local_size,
    moved_share,
    unit_cost,
)
from .terms import ZERO, Term, add, maximum

__all__ = ["StepCost", "step_cost", "einsum_flops", "numeric", "seconds_of", "fast_seconds", "step_weights"]


def _einsum_dims(left: Tensor, right: Tensor) -> list[Dim]:
    """Every dim of the einsum, each label once (where it first appears)."""
    once: dict[str, Dim] = {}
    for d in (*left.dims, *right.dims):
        once.setdefault(d.label, d)
    return list(once.values())


def einsum_flops(left: Tensor, right: Tensor, opts: Options) -> Term:
    """2 × the product of the local sizes of every dim of the einsum (each dim counted once)."""
    return _t(sc.FLOPS_PER_MAC) * local_size(_einsum_dims(left, right), opts)


def _einsum_time(left: Tensor, right: Tensor, opts: Options) -> Term:
    """The einsum's FLOPs over C."""
    return einsum_flops(left, right, opts) / _t(sc.FLOPS)


def _shape_key(t: Tensor) -> tuple:
    """What a step's terms read of a tensor, as plain tuples (cheap to hash): its dims' labels (a literal
    size is its own label), their axes, its dtype."""
    return t.dim_names, t.layout()[0], t.dtype


class StepCost:
    """One step's share as light terms (:mod:`shardalg.costs.terms`; ``str`` and ``.sympy()`` give the
    formula): bytes V its collective moves, its CommCost, FLOPs and HBM bytes, and times. Each is worked out
    when first asked for (a ranking needs only the times)."""

    __slots__ = (
        "step",
        "opts",
        "lanes",
        "_unit",
        "_comm",
        "_comms",
        "_flops",
        "_compute",
        "_hbm",
        "_duration",
    )

    def __init__(self, step: Step, opts: Options):
        self.step, self.opts = step, opts
        self.lanes = sched.lanes_of(step)  # the resources it holds, read by every schedule of a plan with it
        # the collective's cost for one byte (or None): working it out now raises a model's refusal now
        self._unit = None if step.op is Op.EINSUM else unit_cost(step.op, step.axes, opts, step.offset)
        if self._unit is not None and _idle(step, opts):
            self._unit = None
        self._comm: CommCost | None = None
        self._comms: Term | None = None
        self._flops: Term | None = None
        self._compute: Term | None = None
        self._hbm: Term | None = None
        self._duration: Term | None = None

    @property
    def comm(self) -> CommCost:
        if self._comm is None:
            s = self.step
            if s.op.function:  # its statistics, all-reduced over the axes of the dim it works along
                self._comm = (
                    NOTHING
                    if self._unit is None
                    else self._unit.scaled(group_bytes(Op.ALL_REDUCE, _statistics(s), s.axes, self.opts))
                )
            else:  # None for an einsum, and a step that moves nothing
                self._comm = (
                    NOTHING
                    if self._unit is None
                    else _collective(s.op, s.inputs[0], s.axes, self.opts, s.offset)
                )
        return self._comm

    @property
    def bytes(self) -> Term:
        """V, the array's bytes as the group sees it; with ``exact``, the (N − 1)/N of it a ring moves (a
        function's: its statistics', all-reduced)."""
        s = self.step
        if not s.communicates or self._unit is None:
            return ZERO
        if s.op.function:
            ar = Op.ALL_REDUCE
            return group_bytes(ar, _statistics(s), s.axes, self.opts) * moved_share(ar, s.axes, self.opts)
        return group_bytes(s.op, s.inputs[0], s.axes, self.opts) * moved_share(s.op, s.axes, self.opts)

    @property
    def comms(self) -> Term:
        if self._comms is None:
            s = self.step
            unit = self._unit
            if unit is None:
                self._comms = ZERO
            elif self._comm is None and unit.overlapped and unit.light_parts and not s.op.function:
                # the common case, without building the step's CommCost: each phase's bandwidth times V
                self._comms = _comms_term(
                    s.op, s.axes, s.offset, _shape_key(s.inputs[0]), s.inputs[0], self.opts
                )
            else:
                self._comms = self.comm.term(self.opts.costs.latency)
        return self._comms

    @property
    def flops(self) -> Term:
        if self._flops is None:
            s = self.step
            products = _products(s)
            flops = einsum_flops(s.inputs[0], s.inputs[1], self.opts) if products else ZERO
            self._flops = flops * _t(products) if products not in (0, 1) else flops
        return self._flops

    @property
    def compute(self) -> Term:
        if self._compute is None:
            s = self.step
            products = _products(s)
            if products:
                left, right = s.inputs[:2]
                matmul = _compute_term(_shape_key(left), _shape_key(right), left, right, self.opts)
                matmul = matmul if products == 1 else matmul * _t(products)
                # a block of attention is fused (flash): its compute or its HBM traffic, whichever is longer
                self._compute = matmul if s.op is Op.EINSUM else maximum(matmul, self.memory)
            elif s.op.function and not _epilogue(s, self.opts.costs.on_chip):
                # HBM-bound: its bytes read and written at W_hbm (its FLOPs: vector_flops)
                self._compute = self.memory
            else:
                self._compute = ZERO
        return self._compute

    @property
    def hbm_bytes(self) -> Term:
        if self._hbm is None:
            s, hbm, on_chip = self.step, self.opts.costs.hbm, self.opts.costs.on_chip
            moved = (*s.inputs, s.output) if s.op is Op.EINSUM or s.op.function else ()
            if s.op.function and RECORDS[s.op].shape_only:  # a broadcast reads its first operand's shape only
                moved = moved[1:]
            if s.op is Op.RENAME:  # the same blocks under another name: nothing read or written
                moved = ()
            if s.op.function and s.inputs and all(t.name in on_chip for t in s.inputs):
                moved = ()  # it runs in the kernel that holds its operands (a fused softmax's statistics)
            # ``hbm`` names the tensors an einsum reads from HBM (inference: parameters and KV cache); a function
            # is elementwise, HBM-bound: it reads and writes its operands whatever they are
            moved = tuple(
                t for t in moved if (hbm is None or s.op.function or t.name in hbm) and t.name not in on_chip
            )
            self._hbm = add(*(local_bytes(t, self.opts) for t in moved))
        return self._hbm

    @property
    def memory(self) -> Term:
        s = self.step
        return self.hbm_bytes / _t(sc.W_HBM) if s.op is Op.EINSUM or s.op.function else ZERO

    @property
    def vector_flops(self) -> Term:
        """A function's FLOPs (elementwise, reductions, softmax, norms), counted apart from matmul FLOPs: its
        record's FLOPs per element times the local elements of its largest operand or result."""
        s = self.step
        if not s.op.function:
            return ZERO
        per = RECORDS[s.op].vector_flops
        biggest = max((*s.inputs, s.output), key=lambda t: len(t.dims))
        return _t(per) * local_size(biggest.dims, self.opts)

    @property
    def duration(self) -> Term:
        """Its time on its resource: the collective's, the local einsum's compute, or a function's HBM time
        and then its statistics' AllReduce (between its two passes over the block)."""
        got = self._duration
        if got is None:  # every schedule of a plan with this step reads it
            s = self.step
            if s.op.function:
                got = add(self.compute, self.comms)
            else:
                got = self.compute if s.op is Op.EINSUM else self.comms
            self._duration = got
        return got

    def to_json(self, values: Mapping[sympy.Symbol, float]) -> dict[str, object]:
        out: dict[str, object] = {
            "step": text(self.step.statement()),
            "op": self.step.op.value,
            "axes": list(self.step.axes),
        }
        for key in ("bytes", "flops", "comms", "compute", "memory"):
            expr = getattr(self, key)
            out[key] = str(expr)
            out[key + "_value"] = numeric(expr, values)
        if self.comm.axis_bytes:
            out["axis_bytes"] = {
                a: {"formula": str(b), "value": numeric(b, values)} for a, b in self.comm.axis_bytes
            }
        return out


def _idle(step: Step, opts: Options) -> bool:
    """Whether the step moves nothing though its group has several devices (:func:`moves_nothing`)."""
    t = step.inputs[0]
    return moves_nothing(step.op, step.axes, t.layout()[0], t.unreduced, opts.mesh, step.offset)


def _epilogue(step: Step, on_chip: tuple[str, ...]) -> bool:
    """Whether ``step`` adds a value that stays on chip (a gradient's part ``dX'``:
    :attr:`shardalg.models.analysis.Analysis.gradient_parts`): the epilogue of the op that makes it, as a matmul
    accumulating into its output runs it. It takes no time of its own; its HBM bytes are counted."""
    return step.op is Op.ADD and any(t.name in on_chip for t in step.inputs)


def _products(step: Step) -> object:
    """How many einsums the size of its first two operands' a step takes (0: none): an einsum one; a block of
    attention two (Q·Kᵀ and P·V span the same dims), its backward 2 (dv) or 3 (dq, dk); halved when ``causal`` (the masked keys' half is
    skipped)."""
    n = 1 if step.op is Op.EINSUM else 2 if step.op is Op.ATTEND else 0
    if (
        step.op is Op.ATTEND_D
    ):  # a block's backward: the scores again, then Pᵀ·dO (dv) or dO·Vᵀ and dS's product
        n = 2 if "dv" in step.flags else 3
    return sympy.Rational(n, 2) if n and "causal" in step.flags else n


def _statistics(step: Step) -> Tensor:
    """The per-row statistics a function's step all-reduces, laid out as they are on the devices."""
    got = statistics_of(step.op, step.axes, step.inputs[0], step.inputs[0].layout()[0])
    if got is None:
        raise UsageError(f"{text(step.statement())} all-reduces no statistics")
    t, lay = got
    return Tensor(t.name, tuple(d.with_axes(a) for d, a in zip(t.dims, lay, strict=True)), (), (), t.dtype)


@memoized(Kind.PIECE)
def step_cost(step: Step, opts: Options) -> StepCost:
    """The cost of one step (its terms worked out when asked for), memoized by the step's value and the
    options (the plans of one einsum share steps, and so do the queries on it)."""
    return StepCost(step, opts)


# step terms by what they read (op, axes, offset, the tensors' shapes, the options), not by the tensors: the
# plans of one einsum, and the einsums of one search, share terms of steps that are equal but for names
_TERMS = memo(f"{__name__}._TERMS", Kind.PIECE)


def _comms_term(
    op: Op, axes: tuple[str, ...], offset: int | None, shape: tuple, t: Tensor, opts: Options
) -> Term:
    """A collective's time for a tensor of ``shape`` (its dims, layout and dtype; not its name): each
    phase's bandwidth times V, with the latency floor unless ``latency=False``."""
    key = ("comms", op, axes, offset, shape, opts)
    got = _TERMS.get(key)
    if got is None:
        unit = unit_cost(op, axes, opts, offset)
        v = group_bytes(op, t, axes, opts)
        if opts.costs.latency:
            got = add(*(maximum(lat, b * v) for lat, b in unit.parts))
        else:
            got = add(*(b * v for _, b in unit.parts))
        _TERMS.keep(key, got)
    return got


def _compute_term(left_shape: tuple, right_shape: tuple, left: Tensor, right: Tensor, opts: Options) -> Term:
    """An einsum's FLOPs over C for operands of these shapes."""
    key = ("compute", left_shape, right_shape, opts)
    got = _TERMS.get(key)
    if got is None:
        got = _TERMS.keep(key, _einsum_time(left, right, opts))
    return got


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


@memoized(Kind.PIECE)
def _unit_numbers(op: Op, axes: tuple[str, ...], opts: Options, offset: int | None = None) -> tuple:
    """(latency, seconds per byte) of each phase of ``op`` over ``axes`` (a Shift's ``offset``) at the
    chip's numbers of ``opts`` (None when it communicates nothing), and whether they overlap."""
    unit = unit_cost(op, axes, opts, offset)
    if unit is None:
        return None, True
    at = opts.point
    return tuple(
        (lat.evaluate(at), b.evaluate(at)) for lat, b in ((_t(x), _t(y)) for x, y in unit.parts)
    ), unit.overlapped


def seconds_of(step: Step, opts: Options) -> float | None:
    """The step's time at the chip's numbers of ``opts`` as a float, without building its terms; None while a
    size or a number is unknown."""
    op = step.op
    if op.function:  # HBM time and the statistics' AllReduce, from its terms
        got = step_cost(step, opts).duration.evaluate(opts.point)
        return None if got is None else float(got)
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
        at = opts.point
        c = _t(sc.FLOPS).evaluate(at)
        if c is None:
            return None
        return float(_t(sc.FLOPS_PER_MAC).evaluate(at) or 0) * flops * float(_products(step)) / c
    parts, overlapped = _unit_numbers(op, step.axes, opts, step.offset)
    if parts is None or _idle(step, opts):
        return 0.0
    t, full = (
        group_view(step.inputs[0], step.axes, opts.mesh) if RECORDS[op].group_view else (step.inputs[0], ())
    )
    v = _bytes_number(t, opts, full)
    if v is None or any(lat is None or b is None for lat, b in parts):
        return None
    if not opts.costs.latency:
        return float(sum(b * v for _, b in parts))
    if overlapped:
        return float(sum(max(lat, b * v) for lat, b in parts))
    return float(sum(lat + b * v for lat, b in parts))


# ---- a plan's and a step's seconds, the rankings' measures ------------------------------------------------
PLANS_TIMED = 4096  # plans whose time one fast_seconds keeps before it starts again


def fast_seconds(opts: Options, policy: OverlapPolicy) -> Callable[[Plan], float | None]:
    """A plan's seconds under ``policy`` on ``opts``'s chip, straight from numbers (no formula is built):
    the ranking's key. Each step's time is memoized; None while a size is unbound."""
    memo: dict[Step, float | None] = {}  # by step value: plans share steps, and equal ones
    plans: dict[Plan, float | None] = {}  # by plan value: a ranking asks again for the same plan

    def seconds(plan: Plan) -> float | None:
        got = plans.get(plan, plans)
        if got is plans:
            if len(plans) >= PLANS_TIMED:
                plans.clear()
            got = plans[plan] = _seconds(plan)
        return got  # type: ignore[return-value]

    def _seconds(plan: Plan) -> float | None:
        durations = []
        for s in plan.steps:
            got = memo.get(s, memo)
            if got is memo:
                got = memo[s] = seconds_of(s, opts)
            if got is None:
                return None
            durations.append(got)
        lanes = [sched.lanes_of(s) for s in plan.steps]
        return sched.seconds(durations, lanes, plan.producers, policy)

    return seconds


def step_weights(mesh: Mesh, sizes, costs: CostModel) -> Callable[[Step], float]:
    """One step's seconds under the cost model ``costs`` (:func:`shardalg.costs.plancost.step_seconds` is its
    keyword form): a collective's communication, a local einsum's compute, a slice's nothing. Memoized per
    step; a symbol left unbound is an error."""
    opts = Options.of(costs, mesh, sizes)
    if opts.costs.chip is None:
        raise UsageError("ranking by seconds needs a chip: pass hw='tpu-v5e' (CLI: --hw tpu-v5e)")
    memo: dict[Step, float] = {}

    def seconds(step: Step) -> float:
        got = memo.get(step)
        if got is None:
            local = step.op is Op.EINSUM or step.op.function
            value = seconds_of(step, opts) if step.communicates or local else 0.0
            if value is None:
                raise UsageError(_why_symbolic(step, opts))
            got = memo[step] = value
        return got

    return seconds


def _why_symbolic(step: Step, opts: Options) -> str:
    """Why a step has no seconds: the symbols its time keeps that neither the sizes nor the chip bind (a chip
    without a model's numbers, such as alpha and beta on a TPU, is not an unbound size). Sizes are integer
    symbols and a chip's numbers real ones (:mod:`shardalg.algebra.symbols`), which tells them apart."""
    unbound = sorted((x for x in step_cost(step, opts).duration.symbols() if x not in opts.values), key=str)
    chip = opts.costs.chip
    numbers = [str(x) for x in unbound if not x.is_integer]
    if numbers and chip is not None:
        return (
            f"ranking by seconds on {chip.name} under the {opts.costs.model} model needs {', '.join(numbers)}, "
            f"which {chip.name} does not give: {step.statement()} stays symbolic (give the chip those numbers, "
            f"or rank under the model the chip has, {chip.model})"
        )
    names = ", ".join(str(x) for x in unbound)
    return f"ranking by seconds needs every size bound: {step.statement()} is symbolic in {names}"
