"""What a model program runs: each statement's forward plan, the derived backward, what the backward reads,
what a rematerialisation policy keeps and recomputes, the transient gathered weights, and the FLOPs.

    >>> from shardalg.models.program import model_program
    >>> a = analyze(model_program("params W\\nIn[B_X, D] * W[D, F] -> Out[B_X, F]", mesh="X=4"))
    >>> a.flops().total          # forward 2BDF + backward 4BDF: the book's 6 per parameter per token
    6*B*D*F

Forward: every product statement is planned by the planner (fewest bytes, as the derived backward plans its
gradients); a collective written in the program is its own step. Backward (training): the backward program of
:func:`shardalg.planning.backward.backward`, each gradient einsum planned. FLOPs come from the local products of
these plans: per device from the local shapes, in all from the same einsums unsharded; nothing is typed in, so
the backward's 2x the forward comes out of its two gradient einsums per product.

Rematerialisation policies (:class:`Remat`):

``none``
    keep every activation the backward reads: the operands of each product (read by its gradient einsums)
    and the inputs of the steps the notation does not show (:mod:`.program`);
``block``
    keep one checkpoint per layer, the layer's input; the backward recomputes what it reads from it;
names (``G,U,Out``, or the program's ``saved`` list)
    keep those per layer, and what the backward reads besides is recomputed from what is kept; the layer's
    input is the previous layer's output, so a list that names that output keeps it so, and one that does not
    keeps the input as well where the backward reads it (counted, and said in the notes).

Recomputing a value reruns the product that makes it (its FLOPs are counted again) and whatever that product
reads and is not kept; a value made by a step the notation does not show costs the values it is made from.
The policies cover the whole model: outside the repeated layer (``embeddings``, the head) the head is one more
block. ``none`` keeps its logits; ``block`` keeps its input (``Xl``, the last layer's output) as a layer keeps
``In``, and makes the rest again for the backward (the final norm's ``Xfr``, ``Xf``, the logits: the head's
product reruns, its FLOPs counted); a list keeps the logits when it names them and the head's other values.
What the embeddings make is always kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property

import sympy
from sympy import Expr, Integer

from shardalg.algebra.registry import RECORDS
from shardalg.algebra.traffic import Sizes
from shardalg.costs.costmodel import CostModel
from shardalg.costs.plancost import plan_of
from shardalg.costs.stepcost import Options
from shardalg.costs.steps import einsum_flops
from shardalg.errors import UsageError
from shardalg.notation.op import ROUTES
from shardalg.notation.plan import Plan, Step
from shardalg.notation.printing import text
from shardalg.notation.syntax import Apply, Arrow, DType, Op, Product, Program, Tensor, plain_product
from shardalg.planning.accumulate import part_name
from shardalg.planning.backward import backward
from shardalg.planning.forward import grad_name
from shardalg.planning.planner import Problem, plan

from .head import made_again
from .lookup import LookupGradient, analysis_lookup
from .program import ModelProgram, StatementInfo
from .quantities import local_elements
from .remat import Remat, remat_named

__all__ = ["Remat", "remat_named", "Analysis", "analyze", "Flops", "MODES"]

MODES = ("train", "infer")


def _applied(s) -> list[Apply]:
    """The functions a function statement applies, outermost first (``rmsnorm_D(X) ⊙ g``: ⊙, rmsnorm)."""
    out, todo = [], [s.expr if isinstance(s, Arrow) else s]
    while todo:
        e = todo.pop(0)
        if isinstance(e, Apply):
            out.append(e)
            todo.extend(e.operands)
        elif isinstance(e, Product):
            todo.extend((e.left, e.right))
    return out


def _strip(t: Tensor) -> Tensor:
    """The same tensor unsharded (its global shape)."""
    return replace(t, dims=tuple(d.with_axes(()) for d in t.dims), unreduced=(), invariant=(), span=None)


@dataclass(frozen=True)
class Flops:
    """FLOPs of one step of the model, each part in all (``*_total``) and per device (local products)."""

    forward: Expr
    backward: Expr
    recompute: Expr
    forward_per_device: Expr
    backward_per_device: Expr
    recompute_per_device: Expr
    vector: Expr = Integer(0)  # the forward's functions (norms, softmax, ...), apart from the matmul FLOPs
    vector_per_device: Expr = Integer(0)

    @property
    def total(self) -> Expr:
        return self.forward + self.backward + self.recompute

    @property
    def total_per_device(self) -> Expr:
        return self.forward_per_device + self.backward_per_device + self.recompute_per_device


@dataclass
class Analysis:
    """A model program's plans and what follows from them under a mode and a remat policy."""

    model: ModelProgram
    mode: str
    remat: Remat
    mode_chosen: bool = True
    own_notes: list[tuple[str, str]] = field(default_factory=list)
    keep_gathered: bool = False  # the backward reads the forward's gathered copies (memory) or gathers again

    @property
    def notes(self) -> list[tuple[str, str]]:
        """Every default the user did not choose, as (key, what was assumed): stated in each output."""
        return [*self.model.notes, *self.own_notes]

    # ---- plans
    @cached_property
    def forward_plans(self) -> dict[int, Plan]:
        """Statement index -> its forward plan (products planned, collectives as written)."""
        m = self.model
        return {info.index: self.forward_plan(info) for info in m.statements if info.kind != "declaration"}

    def forward_plan(self, info: StatementInfo) -> Plan:
        """One statement's forward plan: its own, whatever the other statements are (a product of a causal
        core flagged ``causal``: :attr:`causal_products`)."""
        m, s = self.model, info.statement
        resharding = isinstance(s, Arrow) and isinstance(s.expr, Tensor)
        if plain_product(s) or resharding:
            # the program was checked when it was read (model_program): its statements are not checked again
            problem = Problem(s, m.mesh, Sizes(m.sizes), None, checked=True)
            return _causal(plan(problem), info.index in self.causal_products)
        return plan_of(Program((s,)), m.mesh, m.sizes, checked=True)

    @cached_property
    def backward(self):  # -> BackwardProgram | None
        """The derived backward program (training only; None when the program has no product)."""
        if self.mode != "train" or not self.model.product_statements():
            return None
        m = self.model
        # every statement the program writes, products and functions (norms, softmax, residual adds: their
        # derivatives ``f'(X, dY)``); a step the notation does not show is an input of the backward
        shown = tuple(m.statements[i].statement for i in self.shown)
        # checked with the whole program when it was read (model_program): not checked again
        return backward(
            Program(shown, source=m.program.source),
            m.mesh,
            m.sizes,
            keep_gathered=self.keep_gathered,
            checked=True,
        )

    def kept(self) -> list[tuple[str, Expr, Expr]]:
        """The forward's gathered copies the backward keeps (``keep_gathered``): (tensor, bytes per device,
        how many per step: one per layer for the repeated layer), held from the forward to the backward."""
        return self.gathered_copies(kept_only=True)

    def gathered_copies(self, kept_only: bool = False) -> list[tuple[str, Expr, Expr]]:
        """The forward's gathered copies the backward reads, kept or gathered again (``kept_only``: the kept
        ones): (tensor, bytes per device, how many per step). Empty: there is nothing to keep."""
        bw = self.backward
        if bw is None:
            return []
        m, out = self.model, []
        for c in bw.gathered:
            if c.kept or not kept_only:
                v = m.value_named(c.source.name)
                count = m.factor(v) if v is not None else Integer(1)
                out.append((text(c.tensor), m.bytes_of(c.tensor), count))
        return out

    @cached_property
    def grad_plans(self) -> list[tuple[StatementInfo, Plan]]:
        """Each gradient einsum's plan, with the forward statement it differentiates."""
        bw = self.backward
        if bw is None:
            return []
        by_index = {s.index: s for s in self.model.statements}
        out = []
        for g in bw.grads:
            i = self.shown[g.einsum]
            out.append((by_index[i], _causal(g.plan, i in self.causal_products)))
        return out

    @cached_property
    def lookup_grads(self) -> list[LookupGradient]:
        """The unwritten embedding lookup's gradient and its reduction, once (training): :mod:`.lookup`."""
        return analysis_lookup(self)

    @cached_property
    def routing_transposes(self) -> list[tuple[StatementInfo, Plan]]:
        """The backward's communication of each MoE routing (training): each collective of its forward plan
        transposed, last first (the cotangent's AllToAll back to the layout it came from: the same bytes); the
        routing's local work is left out of the backward (:attr:`shown`)."""
        if self.mode != "train":
            return []
        m, out = self.model, []
        for info in m.statements:
            if not _routes(info.statement):
                continue
            for step in reversed(self.forward_plans[info.index].steps):
                if step.communicates:
                    dy, dx = (replace(t, name=grad_name(t.name or "")) for t in (step.output, step.inputs[0]))
                    out.append((info, plan(Arrow(dy, dx), m.mesh, m.sizes)))
        return out

    @cached_property
    def shown(self) -> tuple[int, ...]:
        """The program's statement index of each statement of the backward's program (every one it writes,
        products and functions: :attr:`backward`), but a MoE routing: its backward is not derived, its
        transposed communication is counted apart (:attr:`routing_transposes`)."""
        return tuple(info.index for info in self.model.statements if not _routes(info.statement))

    # ---- what the backward keeps
    @cached_property
    def backward_reads(self) -> tuple[str, ...]:
        """Activations the gradients read (each product's other operand, a function's operand or softmax's
        result), in program order."""
        bw = self.backward
        if bw is None:
            return ()
        read: set[str] = set()
        for g in bw.grads:
            for t in g.reads:
                v = self.model.value_named(t.name) if t.name else None
                if v is not None and v.is_activation:
                    read.add(v.name)
        return tuple(n for n in self.model.values if n in read)

    @cached_property
    def needed(self) -> tuple[str, ...]:
        """Everything the backward needs kept or recomputed: what its einsums read and what the steps the
        notation does not show read (policy ``none`` keeps all of it but a fused attention's scores, which its
        kernel recomputes: :attr:`saved`)."""
        if self.mode != "train":
            return ()
        makers = {n for made in self.model.hidden_makers.values() for n in made}
        keep = set(self.backward_reads) | makers | set(self.function_reads)
        return tuple(n for n, v in self.model.values.items() if n in keep and v.is_activation)

    @cached_property
    def function_reads(self) -> tuple[str, ...]:
        """Values the backward of the program's functions reads: a nonlinear function's operands (a norm's
        input, an activation function's input), softmax's result (``P``: its backward reads no scores), both
        factors of an elementwise product;
        a linear one (``+``, ``-``, ``scale``, ``sum``, ``mean``) reads none."""
        if self.mode != "train":
            return ()
        m, read = self.model, []
        for info in m.statements:
            if info.kind != "function":
                continue
            applied = _applied(info.statement)
            if len(applied) == 1 and applied[0].op is Op.SOFTMAX and info.result is not None:
                # softmax's backward reads its result, P ⊙ (dP − sum(dP ⊙ P)), not its scores
                read += [info.result] if info.result not in read else []
            elif not all(RECORDS[f.op].linear for f in applied):
                read += [r for r in info.reads if r not in read]
        return tuple(read)

    @cached_property
    def cores(self) -> tuple[tuple[StatementInfo, Apply, tuple[str, ...]], ...]:
        """Each attention core: its softmax's statement, the softmax, and its scores (the softmax's operand
        made by a product, ``Q·K -> Sc``, and its result read by a product, ``P·V -> O``)."""
        m, out = self.model, []
        readers = {r for info in m.product_statements() for r in info.reads}
        for info in m.statements:
            softmax = [f for f in _applied(info.statement) if f.op is Op.SOFTMAX]
            if info.kind != "function" or not softmax:
                continue
            made = [r for r in info.reads if m.values[r].made_by is not None]
            if made and info.result in readers:
                out.append((info, softmax[0], (*made, info.result)))
        return tuple(out)

    @cached_property
    def scores(self) -> tuple[str, ...]:
        """The attention scores (:attr:`cores`). The one place their memory is decided: kept for the backward
        unless the attention is fused (:attr:`fused_scores`, a flash kernel keeps only each row's statistics
        and recomputes them)."""
        return tuple(dict.fromkeys(n for _, _, names in self.cores for n in names))

    @cached_property
    def fused_scores(self) -> tuple[str, ...]:
        """The scores of the fused attention cores: their softmax says ``flash`` (``softmax_{S,causal,flash}``,
        a property of the attention the program writes), so the scores are never in HBM and not kept."""
        return tuple(dict.fromkeys(n for _, f, names in self.cores if "flash" in f.flags for n in names))

    @property
    def fused_attention(self) -> bool:
        """Whether the program's attention is fused (every core's softmax says ``flash``)."""
        return bool(self.cores) and len(self.fused_scores) == len(self.scores)

    @cached_property
    def causal_products(self) -> frozenset[int]:
        """The statements of the causal cores' two products (``Q·K -> Sc`` and ``P·V -> O`` around a
        ``softmax_{S,causal}``): the keys after each query are masked, so their einsums, forward and
        gradients, skip that half (each step flagged ``causal``: FLOPs and compute halved)."""
        m, out = self.model, set()
        for info, f, _ in self.cores:
            if "causal" not in f.flags:
                continue
            out |= {m.values[r].made_by for r in info.reads if m.values[r].made_by is not None}
            out |= {p.index for p in m.product_statements() if info.result in p.reads}
        return frozenset(out)

    @property
    def on_chip(self) -> tuple[str, ...]:
        """The tensors a step never reads or writes in HBM: in training a fused attention core's scores and their
        cotangents (``Sc``, ``P``, ``dSc``, ``dP``); in inference every core's scores (its attention is one op, as
        a kernel runs it: :mod:`.inference`)."""
        if self.mode != "train":
            return self.scores
        return (*self.fused_scores, *(grad_name(n) for n in self.fused_scores), *self.gradient_parts)

    @cached_property
    def gradient_parts(self) -> tuple[str, ...]:
        """The names the backward plans a gradient's later contributions into before it adds them, ``dX'``
        (:mod:`shardalg.planning.accumulate`), of each value more than one product reads (Q's, K's and V's
        projections of one input): the product that makes a part adds it to the gradient so far as it writes it
        (a matmul's epilogue), so the part stays on chip. A part a function makes (a value a norm and a residual
        add read) is written, and added by an elementwise add of its own, as the backward writes it."""
        reads = Counter(
            n for info in self.model.statements if info.kind == "product" for n in set(info.reads)
        )
        return tuple(part_name(grad_name(n)) for n, k in sorted(reads.items()) if k > 1)

    def attention_note(self) -> tuple[str, str] | None:
        """What the program's attention keeps for the backward (training with an attention core): said."""
        if self.mode != "train" or not self.cores:
            return None
        names = ", ".join(self.scores)
        if self.fused_attention:
            kept = {owner for *_, owner in self.owned_statistics()}  # the memory's rows say which are kept
            stats = (
                "each row's softmax statistics are (fp32)"
                if any(info.result in kept for info, _, _ in self.cores)
                else "nor are each row's softmax statistics (the backward runs the core again under the remat "
                "policy)"
            )
            return (
                "attention",
                f"fused (the softmax says flash): the scores {names} stay on chip (no HBM traffic in a step) "
                f"and are not kept for the backward, {stats}; the FLOPs as materialized"
                + (
                    " (the kernel's recomputation of the scores in the backward not counted)"
                    if self.remat.policy == "none"
                    else ""
                ),
            )
        kept = [n for n in self.scores if n in self.saved]
        where = f"{', '.join(kept)} kept for the backward" if kept else "recomputed under the remat policy"
        return (
            "attention",
            f"materialized: the scores are written to HBM, {where}; a fused (flash) attention "
            "(softmax_{S,flash}, --attention fused) keeps each row's statistics instead",
        )

    def statistics(self) -> list[tuple[str, Expr, Expr]]:
        """:meth:`owned_statistics` without the value each row is of: (label, bytes per device, count)."""
        return [(label, b, n) for label, b, n, _ in self.owned_statistics()]

    def owned_statistics(self) -> list[tuple[str, Expr, Expr, str]]:
        """The per-row statistics the functions' backward reads (a norm's, a fused attention's softmax: fp32,
        one value per statistic a row, as the forward plan's step holds its block's rows), kept for the
        backward like activations when the function's operands are (a fused core's: its products' operands)
        and the backward does not run the function again (under ``block`` remat it reruns the layer's norms,
        remaking their statistics): (label, bytes per device, count, the function's result). A materialized
        softmax keeps its result instead (its backward reads ``P``)."""
        if self.mode != "train":
            return []
        m, out = self.model, []
        fused = {info.index: names for info, f, names in self.cores if "flash" in f.flags}
        for info in m.statements:
            if info.index in fused:  # a flash kernel keeps the statistics alone, with the core's inputs
                made = [m.values[r].made_by for r in info.reads if m.values[r].made_by is not None]
                acts = [r for i in made for r in m.statements[i].reads if m.values[r].is_activation]
            elif any(f.op is Op.SOFTMAX for f in _applied(info.statement)) and info.result in self.saved:
                continue  # its backward reads its result, kept: no statistics
            else:
                acts = [r for r in info.reads if m.values[r].is_activation]
            if info.kind != "function" or not all(r in self.saved for r in acts):
                continue  # recomputed under the remat policy with the operands it is made from
            if info.index in self.recomputed:
                continue  # the backward runs the function again (block remat: its norm), remaking them
            for st in self.forward_plans[info.index].steps:
                rec = RECORDS[st.op] if st.op.function else None
                if rec is None or not rec.statistics or st.dim is None:
                    continue
                t = st.output
                row = replace(
                    t, dims=tuple(d for d in t.dims if d.label != st.dim), unreduced=(), dtype=DType.FP32
                )
                label = (
                    f"{st.op.value}_{st.dim} statistics ({len(rec.statistics)} fp32 a row) of {info.result}"
                )
                out.append((label, m.bytes_of(row) * len(rec.statistics), m.factor(info.once), info.result))
        return out

    @cached_property
    def saved(self) -> tuple[str, ...]:
        """The activations kept for the backward under the policy (names of values)."""
        if self.mode != "train":
            return ()
        if self.remat.policy == "none":  # a fused kernel recomputes its scores in the backward: not kept
            return tuple(n for n in self.needed if n not in self.fused_scores)
        return tuple(dict.fromkeys((*self.unlisted_inputs, *self._kept)))

    @cached_property
    def _kept(self) -> tuple[str, ...]:
        """What a ``block`` or list policy keeps by its own words: the layer's input or the list, and the
        values outside the layer it does not make again."""
        m = self.model
        once = tuple(n for n in self.needed if m.values[n].once and n not in made_again(m, self.remat.policy))
        first = m.layer_inputs if self.remat.policy == "block" else self.remat.names
        return tuple(dict.fromkeys((*first, *once)))

    @cached_property
    def unlisted_inputs(self) -> tuple[str, ...]:
        """Under a list policy that does not name the layer's output: the layer's inputs that the backward
        reads or reruns a statement from. No rerun makes them (each is the previous layer's output), so they
        are kept though the list does not name them: counted in :attr:`saved`, and said (:func:`analyze`)."""
        m = self.model
        if self.mode != "train" or self.remat.policy != "names" or m.layer_output in self.remat.names:
            return ()
        read = set(self.needed) | {r for i in self.recomputed for r in m.statements[i].reads}
        return tuple(n for n in m.layer_inputs if n in read and n not in self.remat.names)

    @cached_property
    def recomputed(self) -> tuple[int, ...]:
        """Indices of the product statements the backward reruns under the policy."""
        if self.mode != "train" or self.remat.policy == "none":
            return ()
        m = self.model
        again = made_again(m, self.remat.policy)
        outside = {n for n, v in m.values.items() if v.once and n not in again}
        # the layer's inputs are kept (:attr:`unlisted_inputs` where a list does not keep them)
        available = set(self._kept) | set(m.layer_inputs) | outside
        todo = [n for n in self.needed if n not in available]
        done: set[str] = set()
        rerun: set[int] = set()
        while todo:
            n = todo.pop()
            if n in available or n in done:
                continue
            done.add(n)
            v = m.values[n]
            if v.made_by is not None:
                rerun.add(v.made_by)
                todo.extend(r for r in m.statements[v.made_by].reads if m.values[r].is_activation)
            else:
                todo.extend(m.hidden_makers.get(n, ()))
        return tuple(sorted(rerun))

    # ---- FLOPs
    @cached_property
    def _opts(self) -> Options:
        return Options.of(CostModel(), self.model.mesh, self.model.sizes)

    def _plan_flops(self, p: Plan) -> tuple[Expr, Expr]:
        """(in all, per device) FLOPs of a plan's local products."""
        total, local = Integer(0), Integer(0)
        for s in p.steps:
            if s.op is Op.EINSUM:
                left, right = s.inputs
                half = sympy.Rational(1, 2) if "causal" in s.flags else 1  # the masked half skipped
                local += half * einsum_flops(left, right, self._opts).sympy()
                total += half * einsum_flops(_strip(left), _strip(right), self._opts).sympy()
        return self.model.tied(total), self.model.tied(local)

    def flops(self) -> Flops:
        """FLOPs of one step: forward, backward (training), recomputed forward (remat), in all and per device."""
        m = self.model
        by_index = {s.index: s for s in m.statements}
        fwd = [Integer(0), Integer(0)]
        for i, p in self.forward_plans.items():
            t, d = self._plan_flops(p)
            fwd[0] += t * m.factor(by_index[i].once)
            fwd[1] += d * m.factor(by_index[i].once)
        bwd = [Integer(0), Integer(0)]
        for info, p in self.grad_plans:
            t, d = self._plan_flops(p)
            bwd[0] += t * m.factor(info.once)
            bwd[1] += d * m.factor(info.once)
        rec = [Integer(0), Integer(0)]
        for i in self.recomputed:
            t, d = self._plan_flops(self.forward_plans[i])
            rec[0] += t * m.factor(by_index[i].once)
            rec[1] += d * m.factor(by_index[i].once)
        vec = [Integer(0), Integer(0)]
        for i, p in self.forward_plans.items():
            for st in p.steps:
                if st.op.function:
                    per = RECORDS[st.op].vector_flops
                    big = max((*st.inputs, st.output), key=lambda t: len(t.dims))
                    vec[0] += per * m.elements_of(_strip(big)) * m.factor(by_index[i].once)
                    vec[1] += per * m.tied(local_elements(big, m.mesh, m.sizes)) * m.factor(by_index[i].once)
        main = (fwd[0], bwd[0], rec[0], fwd[1], bwd[1], rec[1])
        return Flops(*(sympy.expand(x) for x in main), sympy.expand(vec[0]), sympy.expand(vec[1]))

    # ---- transient gathered weights
    def gathered(self) -> list[tuple[str, Step, bool]]:
        """Every AllGather of a parameter in the forward and backward plans: (value name, step, once); but one
        that makes a copy the backward keeps (``keep_gathered``): held from the forward to the backward, that
        one buffer is counted with the activations (:meth:`kept`), not again as a transient."""
        m, bw = self.model, self.backward
        kept = {(m.value_named(c.source.name), c.tensor.dims) for c in bw.gathered if c.kept} if bw else set()
        plans = [(i, p, "forward") for i, p in self.forward_plans.items()]
        plans += [(info.index, p, "backward") for info, p in self.grad_plans]
        plans += [(i, self.forward_plans[i], "recompute") for i in self.recomputed]
        by_index = {s.index: s for s in m.statements}
        out: list[tuple[str, Step, bool]] = []
        for i, p, _ in plans:
            for s in p.steps:
                if s.op is Op.ALL_GATHER:
                    v = m.value_named(s.inputs[0].name)
                    if v is not None and v.is_param and (v, s.output.dims) not in kept:
                        out.append((v.name, s, by_index[i].once))
        return out


def analyze(
    model: ModelProgram,
    mode: str | None = None,
    remat: str | Iterable[str] | Remat | None = None,
    keep_gathered: bool = False,
    *,
    attention_said: bool = True,
) -> Analysis:
    """The analysis of ``model`` in ``mode`` (``train``, or ``infer``; default: ``infer`` when the program
    declares a KV cache, else ``train``) under a remat policy (training only; see :func:`remat_named`);
    ``keep_gathered``: the backward reads the forward's gathered copies instead of gathering them again;
    ``attention_said``: what an attention core keeps for the backward is a note (:meth:`Analysis.attention_note`:
    it derives the backward; False where only the forward is wanted)."""
    chosen = mode is not None
    notes: list[tuple[str, str]] = []
    if mode is None:
        mode = "infer" if model.kv_cache else "train"
        why = "the program declares a KV cache" if model.kv_cache else "the program declares no KV cache"
        notes.append(("mode", f"{mode} ({why})"))
    if mode not in MODES:
        raise UsageError(f"the mode is train or infer, not {mode!r}")
    policy = remat_named(remat, model) if mode == "train" else Remat("none", chosen=remat is not None)
    if mode == "train" and not policy.chosen:
        notes.append(
            (
                "remat",
                policy.describe() + (" (the program's saved list)" if model.roles.saved else " (default)"),
            )
        )
    a = Analysis(model, mode, policy, chosen, notes, keep_gathered)
    if a.unlisted_inputs:
        inputs = ", ".join(a.unlisted_inputs)
        notes.append(
            (
                "remat",
                f"{policy.describe()}, and the layer's input {inputs}: the backward reads it, and the list does "
                f"not name the layer's output {model.layer_output}, which the next layer reads as its input",
            )
        )
    said = a.attention_note() if attention_said else None
    if said is not None:
        notes.append(said)
    return a


def _causal(p: Plan, causal: bool) -> Plan:
    """``p`` with its einsum steps flagged ``causal`` (a causal core's product: its FLOPs and compute
    halved, the masked half skipped), or ``p`` itself."""
    if not causal:
        return p
    steps = tuple(
        replace(s, flags=("causal",), reason=f"{s.reason}; causal: the masked half skipped")
        if s.op is Op.EINSUM
        else s
        for s in p.steps
    )
    return replace(p, steps=steps)


def _routes(s: object) -> bool:
    """Whether statement ``s`` is a MoE routing (dispatch or combine)."""
    expr = s.expr if isinstance(s, Arrow) else s
    return isinstance(expr, Apply) and expr.op in ROUTES
