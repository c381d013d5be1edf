"""An inference step (prefill or decode) as a sum of per-op rooflines.

    >>> ops = inference_ops(analyze(model, "infer"), once=False, costs=costs)     # doctest: +SKIP
    >>> [op.name for op in ops]                                                   # doctest: +SKIP
    ['In[B, D] * W_q[...] -> Q[...]', ..., 'attention (KV-cache read: Kc, Vc)', ...]

The ops of an inference step run one after another, so each is its own roofline and the step is their sum
(:attr:`Roofline.PER_OP`, the default): an op's time is the largest of its compute (its einsums' FLOPs over
``C``), its HBM time (the bytes it reads of the parameters and the KV cache, over ``W_hbm``) and its
communication, which under the overlap policy is hidden behind the op's own work (``steady``: the op is
max(compute, HBM, comms), a collective matmul), added to it (``serial``: max(compute, HBM) + comms), or
scheduled with it as their dependencies allow (``schedule``: each einsum lasts max(compute, HBM)).

An op is one statement of the program with its plan (the collectives the planner puts around its product),
except the attention: the products that read a value of the ``kvcache`` role (``Q·Kc`` and ``P·Vc`` of a
decode program) are one op, the attention core, whose HBM time is the KV-cache read; the softmax of the
scores between them (``softmax_S(Sc) -> P``, when the program writes it; else ``P`` enters as an input) is
part of that op too: the three are priced as one fused op, as an attention kernel runs them. A KV cache that the program declares but no product reads is read by that op
all the same: its local bytes, from the role, over ``W_hbm`` (a note says so).

A causal core (``softmax_{S,causal}``: the preset's prefill, its prompt's keys after each query masked) does
half of its (T, S) pairs, and its two products' FLOPs and compute count that half (:mod:`shardalg.costs.steps`
halves a ``causal`` step: T·S/2, the training core's convention, the diagonal's T/2 not counted); its HBM bytes
are the whole K/V read (a causal kernel still reads every K/V block). That holds where the keys are the
queries' own, S = T (a whole prompt); a cache of another length is refused (:func:`causal_keys_are_queries`).
A decode core is not causal (its one query sees the whole cache): every pair counted.

:attr:`Roofline.WHOLE_STEP` keeps the older accounting: one max over the whole part (all compute, all HBM
reads, all communication) under ``steady``, their sum under ``serial``.

Terms here are light terms at peak rates (:mod:`shardalg.costs.terms`); the caller applies the cost model's
efficiencies (:meth:`~shardalg.costs.efficiency.Efficiencies.scaling` on a formula,
:meth:`~shardalg.costs.efficiency.Efficiencies.effective` on the numbers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

import sympy

from shardalg.costs import schedule as sched
from shardalg.costs.costmodel import CostModel
from shardalg.costs.fromsympy import from_sympy
from shardalg.costs.plancost import PlanCost, priced
from shardalg.costs.schedule import OverlapPolicy
from shardalg.costs.stepcost import W_HBM
from shardalg.costs.terms import ZERO, Term, add, maximum
from shardalg.errors import UsageError
from shardalg.notation.plan import Plan
from shardalg.notation.printing import text
from shardalg.notation.syntax import Apply, Arrow, Op, Product, Tensor

from .analysis import Analysis
from .quantities import tensor_bytes

__all__ = ["Roofline", "OpRoofline", "inference_ops", "causal_keys_are_queries", "ATTENTION"]

ATTENTION = "attention"


class Roofline(Enum):
    """How an inference step's roofline is taken: per op and summed, or once over the whole step."""

    PER_OP = "per-op"
    WHOLE_STEP = "whole-step"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, x: object) -> Roofline:
        """A Roofline from itself or its name (None: per-op)."""
        if x is None:
            return cls.PER_OP
        if isinstance(x, cls):
            return x
        for r in cls:
            if r.value == x:
                return r
        raise UsageError(
            f"the inference roofline is one of {', '.join(r.value for r in cls)}, not {x!r}",
            fix="per-op (each op its own max, summed) or whole-step (one max over the step)",
        )


@dataclass(frozen=True)
class OpRoofline:
    """One op of an inference step: its statements, and its compute, HBM, communication and total times as
    light terms at peak rates (``hbm_bytes``: the bytes it reads of parameters and KV cache)."""

    name: str
    statements: tuple[int, ...]
    kv_read: bool  # the attention: the op that reads the KV cache
    compute: Term
    hbm: Term
    hbm_bytes: Term
    comms: Term
    total: Term


def _terms(cost: PlanCost, plan: Plan, policy: OverlapPolicy) -> tuple[Term, Term, Term, Term]:
    """compute, HBM time, communication and the op's total under ``policy``."""
    compute, hbm = cost.light("compute"), cost.light("memory")
    if policy is OverlapPolicy.SERIAL:
        comms = add(*(s.comms for s in cost.steps))
        return compute, hbm, comms, add(maximum(compute, hbm), comms)
    comms = cost.light("comms")
    if policy is OverlapPolicy.STEADY:
        return compute, hbm, comms, maximum(compute, hbm, comms)
    durations = [maximum(s.compute, s.memory) if s.step.op is Op.EINSUM else s.comms for s in cost.steps]
    lanes = [sched.lanes_of(s.step) for s in cost.steps]
    return compute, hbm, comms, sched.total(durations, lanes, plan.producers, policy)


def _hbm_bytes(cost: PlanCost) -> Term:
    """The bytes the op's einsums and functions read and write in HBM (its ``memory`` time's)."""
    return add(*(s.hbm_bytes for s in cost.steps if s.step.op is Op.EINSUM or s.step.op.function))


def inference_ops(
    a: Analysis, once: bool, costs: CostModel, sizes: Mapping[str, int] | None = None
) -> list[OpRoofline]:
    """The ops of one part of an inference step (``once``: outside the repeated layer), in program order, each
    a roofline under ``costs`` (its overlap policy; HBM reads of the tensors ``costs.hbm`` names). ``sizes``
    prices the analysis's plans at other sizes (a dim left out stays a symbol: a decode step's context ``S``,
    evaluated at each length a generation passes through)."""
    m = a.model
    sizes = m.sizes if sizes is None else sizes
    kv_names = {v.name for v in m.kv_cache}
    infos = {s.index: s for s in m.statements}
    groups: list[tuple[str, list[int], bool]] = []
    attention: tuple[str, list[int], bool] | None = None
    made: set[str] = set()  # the values the attention's statements made (its scores, their softmax)
    for i in sorted(a.forward_plans):
        info = infos[i]
        if info.once != once:
            continue
        reads_kv = any(m.aliases.get(r, r) in kv_names for r in info.reads)
        if reads_kv or (attention is not None and _softmax_of(info.statement, made)):
            if attention is None:
                attention = (ATTENTION, [], True)
                groups.append(attention)
            attention[1].append(i)
            if isinstance(info.statement, Arrow) and info.statement.result.name is not None:
                made.add(info.statement.result.name)
        else:
            groups.append((text(info.statement), [i], False))
    # a KV cache the program declares but no product reads: this part's attention reads it all the same
    read = {m.aliases.get(r, r) for s in m.statements if s.kind != "declaration" for r in s.reads}
    unread = [v for v in m.kv_cache if v.name not in read and v.once == once]
    if unread and attention is None:
        attention = (ATTENTION, [], True)
        groups.append(attention)
    causal_keys_are_queries(a, sizes)
    out: list[OpRoofline] = []
    for name, indices, kv in groups:
        steps = tuple(s for i in indices for s in a.forward_plans[i].steps)
        compute = hbm = hbm_bytes = comms = total = ZERO
        if steps:
            plan = Plan((), steps, steps[-1].output, note=name)
            cost = priced(plan, m.mesh, sizes, costs)
            compute, hbm, comms, total = _terms(cost, plan, costs.overlap)
            hbm_bytes = _hbm_bytes(cost)
        if kv and unread:
            extra = from_sympy(sympy.Add(*(tensor_bytes(v.tensor, m.mesh, sizes) for v in unread)))
            hbm_bytes = add(hbm_bytes, extra)
            hbm = add(hbm, extra / from_sympy(W_HBM))
            total = _with_read(total, compute, hbm, comms, costs.overlap)
        if kv:
            shown = sorted(kv_names & read) + [v.name for v in unread]
            name = f"{ATTENTION} (KV-cache read: {', '.join(shown)})"
        out.append(OpRoofline(name, tuple(indices), kv, compute, hbm, hbm_bytes, comms, total))
    return out


def _softmax_of(stmt: object, made: set[str]) -> bool:
    """Whether ``stmt`` is the softmax of scores the attention made (``softmax_S(Sc) -> P`` between ``Q·Kc``
    and ``P·Vc``): part of the attention op, fused with its products as an attention kernel runs it."""
    body = stmt.expr if isinstance(stmt, Arrow) else stmt
    if not isinstance(body, Apply) or body.op is not Op.SOFTMAX:
        return False
    return any(isinstance(t, Tensor) and t.name in made for t in body.operands)


def _with_read(total: Term, compute: Term, hbm: Term, comms: Term, policy: OverlapPolicy) -> Term:
    """The attention's total once the unread cache's bytes are in its HBM time."""
    if policy is OverlapPolicy.SERIAL:
        return add(maximum(compute, hbm), comms)
    return maximum(total, compute, hbm, comms)


def causal_keys_are_queries(a: Analysis, sizes: Mapping[str, int] | None = None) -> None:
    """A UsageError unless each causal core over a KV cache (the prefill's ``Q·Kc -> Sc`` and ``P·Vc -> A``
    around ``softmax_{S,causal}``) has as many keys as queries (``S = T``, a whole prompt), where its
    ``causal`` steps count T·S/2 pairs, the training core's convention. With a prefix already cached (S > T) a
    causal kernel does T·S − T²/2 pairs, which the halved steps (FLOPs and compute) would not count; with fewer
    keys than queries (S < T) the first queries have none. T is the query dim, the one just before S
    (:func:`_query_dim`). Sizes not bound are not checked. A core over keys a statement makes
    (training's ``rename_{T,S}``: S's size is T's) is not here."""
    m = a.model
    sizes = m.sizes if sizes is None else sizes
    kv_names = {v.name for v in m.kv_cache}
    for _, f, names in a.cores:
        if "causal" not in f.flags or f.dim is None:
            continue
        maker = m.values[names[0]].made_by
        stmt = m.statements[maker].statement if maker is not None else None
        expr = stmt.expr if isinstance(stmt, Arrow) else None
        if not isinstance(stmt, Arrow) or not isinstance(expr, Product):
            continue
        keys = [t for t in (expr.left, expr.right) if isinstance(t, Tensor) and f.dim in t.dim_names]
        queries = [t for t in (expr.left, expr.right) if isinstance(t, Tensor) and f.dim not in t.dim_names]
        if len(keys) != 1 or len(queries) != 1 or m.aliases.get(keys[0].name, keys[0].name) not in kv_names:
            continue
        t_dim = _query_dim(stmt.result, f.dim)
        if t_dim is None or t_dim == f.dim or t_dim not in sizes or f.dim not in sizes:
            continue
        t, s = sizes[t_dim], sizes[f.dim]
        if s < t:
            raise UsageError(
                f"a causal core needs at least as many keys as queries: {f.dim}={s} keys against "
                f"{t_dim}={t} queries leaves the first {t - s} queries no key",
                fix=f"bind {f.dim} = {t_dim} (a whole prompt)",
            )
        if s > t:
            raise UsageError(
                f"a causal core over a cache longer than its queries ({f.dim}={s} keys, {t_dim}={t} queries: a "
                f"prefix of {s - t} tokens already cached) does {t_dim}·{f.dim} − {t_dim}²/2 pairs, and its "
                f"halved products would count {t_dim}·{f.dim}/2: not priced",
                fix=f"bind {f.dim} = {t_dim} (a whole prompt), or write softmax_{f.dim} to count every pair",
            )


def _query_dim(scores: Tensor, key_dim: str) -> str | None:
    """The query dim of a causal core's scores: the one just before the softmax's (the notation's rule, as the
    executor and the export mask: ``Sc[B, K, G, T, S]``: T)."""
    dims = scores.dim_names
    at = dims.index(key_dim) if key_dim in dims else 0
    return dims[at - 1] if at > 0 else None
