"""A hand-written backward's gradients of functions, read against the derived backward's (:mod:`.verify`).

A statement ``rmsnorm'_D(In[B_X, D], dN[B_X, D]) -> dIn[B_X, D]`` (or ``dH .* G -> dN``, ``sum_B``,
``scale_{-1}``) is the derived step of the same function into the same gradient, and reads what it reads: the
forward's operands (as the forward held them, or a resharding the program made) and the same cotangents. It is
a local function of the shards, so it reads its cotangent whole (a partial one only where the function is linear
and its result stays partial), and a function with statistics over a sharded dim reads the dim sharded. A ``+``
passes its cotangent on: each value gets it as often as the function reads the value with no derived step of
its own (``X + X`` twice, ``X - X`` once), added to a gradient the program writes otherwise, or copied
into the gradient by a collective (``Slice_{X,B}(dO[B, F]) -> dH[B_X, F]``: the cotangent, resharded) before
anything else writes it; that copy is then the cotangent, to add to another gradient, while nothing adds to it."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from shardalg.algebra.layout import Layout, subscript, tensor_with
from shardalg.algebra.registry import RECORDS
from shardalg.errors import ShardalgError, Span, UsageError
from shardalg.notation.printing import text
from shardalg.notation.syntax import Apply, Arrow, Op, Tensor

from .accumulate import whole_name
from .backward import GradStep
from .findings import ERROR
from .forward import Call, grad_name
from .verify_ends import GradientEnds, shown

__all__ = ["FunctionGradients"]


def _derived_fix(steps: list[GradStep], result: Tensor) -> str | None:
    """The derived statements that write ``result``'s gradient, as the fix of a statement that is none."""
    mine = [g for g in steps if whole_name(g.statement.result.name) == whole_name(result.name)]
    if not mine:
        return None
    return "the derived backward writes " + "; ".join(text(g.statement) for g in mine)


def _reads(later: GradStep, g: GradStep) -> bool:
    """Whether a function's gradient step reads the result of an earlier one (``sum_B(dG')`` reads ``dG'``)."""
    return any(t.name == g.statement.result.name for t in later.statement.expr.operands)  # type: ignore[union-attr]


class FunctionGradients(GradientEnds):
    """What :class:`.verify._Checker` reads of the functions' gradients (see the module docstring)."""

    # ---- a function's gradients, read against the derived backward's --------------------------------

    def _functions_from_derived(self) -> None:
        """What the derived backward writes for the forward's functions (the reference): each operand's
        gradient statements (``f'(X, dY) -> dX``, ``dY .* G -> dN``, ``sum_B``, ``scale_{-1}``), the last
        one a contribution; an operand with none is passed the cotangent unchanged (``+``'s operands)."""
        self.dgrad: dict[str, Tensor] = dict(self.derived.gradients)
        # a value's gradient may be named by another value's cotangent the derived backward passed on (dH is dOut)
        self.alias = {grad_name(r): t.name or "" for r, t in self.dgrad.items() if t.name != grad_name(r)}
        self.calls = {c.index: c for c in self.fw.calls}
        self.fn_steps: list[GradStep] = [
            g
            for g in self.derived.grads
            if g.side == "operand"
            and isinstance(g.statement.expr, Apply)
            and g.statement.expr.op is not Op.ADD
        ]
        # the steps whose result is a contribution (no later step of the same gradient reads it: ``dG'`` is
        # summed into ``dG``); a value read twice by one function (``X .* X``) has two
        self.fn_final = {
            k: g
            for k, g in enumerate(self.fn_steps)
            if not any((h.einsum, h.of) == (g.einsum, g.of) and _reads(h, g) for h in self.fn_steps[k + 1 :])
        }
        # the cotangent passed on unchanged: each function and value, as often as it reads the value with no
        # derived step of its own (``X + X`` twice; ``X - X`` once, its right operand's gradient a scale)
        made = Counter((g.einsum, g.of) for g in self.fn_final.values())
        self.passed: dict[tuple[int, str], Call] = {}
        self.pass_times: dict[tuple[int, str], int] = {}
        for c in self.fw.calls:
            if c.roots[-1] not in self.dgrad:
                continue
            for rx in dict.fromkeys(c.roots[:-1]):
                times = c.roots[:-1].count(rx) - made[(c.index, rx)]
                if times > 0:
                    self.passed[(c.index, rx)], self.pass_times[(c.index, rx)] = c, times
        self.fn_done: dict[int, int] = {}  # each contribution's (a final step's) statement
        self.pass_done: dict[tuple[int, str], list[int]] = {}  # the additions of each passed-on cotangent
        # a gradient a collective copied a passed-on cotangent into -> (that cotangent, the statement that last
        # computed the name then): the copy *is* the cotangent while nothing computes the name again
        self.copies: dict[str, tuple[str, int | None]] = {}

    def names_of(self, r: str) -> set[str]:
        """The names that hold value ``r``'s gradient: ``dR``, or the cotangent passed on to it."""
        d = grad_name(r)
        return {d, self.alias[d]} if d in self.alias else {d}

    def _same_gradient(self, written: str, derived: str) -> bool:
        return self.alias.get(written, written) == self.alias.get(derived, derived)

    def _matches(self, d: tuple, w: tuple) -> bool:
        """Whether written operands ``w`` read what the derived ones ``d`` do: the same forward values (as
        the forward held them, or a resharding), the same gradients."""
        root = self.fw.root
        for dt, wt in zip(d, w, strict=True):
            if dt.name in root:
                if root.get(wt.name or "") != root[dt.name]:
                    return False
            elif wt.name in root or not self._same_gradient(wt.name or "", dt.name or ""):
                return False
        return True

    def _forward_text(self, index: int) -> str:
        return f"statement {index + 1} of the forward ({text(self.calls[index].statement)})"

    def gradient_of(self, a: Apply, result: Tensor, i: int, span: Span | None) -> GradStep | None:
        """The derived step a written function statement is (None, reported, when it is none)."""
        same = [
            g
            for g in self.fn_steps
            if (e := g.statement.expr).op is a.op  # type: ignore[union-attr]
            and (e.dim, e.flags, e.factor) == (a.dim, a.flags, a.factor)  # type: ignore[union-attr]
            and whole_name(g.statement.result.name) == whole_name(result.name)
        ]
        orders = [a.operands, a.operands[::-1]] if a.op is Op.MULTIPLY else [a.operands]
        fits = [g for g in same if any(self._matches(g.statement.expr.operands, w) for w in orders)]  # type: ignore[union-attr]
        if fits:  # one not yet computed first (``dR .* X`` and ``X .* dR`` are both dX's, of X .* X)
            return next((g for g in fits if self._step(g) not in self.fn_done), fits[0])
        if not same:
            self.add(
                ERROR,
                "not-a-gradient",
                f"{text(a)} -> {result.name} is not the gradient of a function of the forward",
                i,
                span,
                _derived_fix(self.fn_steps, result),
            )
            return None
        g = same[0]
        ops = g.statement.expr.operands  # type: ignore[union-attr]
        wrong = next((d, w) for d, w in zip(ops, a.operands, strict=True) if not self._matches((d,), (w,)))
        d, w = wrong
        what = f"the forward's {d.name}" if d.name in self.fw.root else f"the cotangent {d.name}"
        self.add(
            ERROR,
            "wrong-operand",
            f"the gradient of {self._forward_text(g.einsum)} for {g.of} reads {what} where this statement reads "
            f"{w.name} ({text(g.statement.expr)} -> {g.statement.result.name}): {result.name} would not be "
            f"the gradient of {g.of}",
            i,
            w.span or span,
            f"read {shown(d)}: {text(g.statement.expr)} -> {shown(g.statement.result)}",
        )
        return None

    def forward_holds(self, t: Tensor) -> bool:
        """Whether ``t`` is a forward value in a layout the forward gave it: the forward's buffers stay held
        through the whole backward, whatever its collectives made of the value (a collective writes a new
        buffer), so such a read is legal however the program last moved the name (:class:`.held.Held` tracks
        only what the backward's own statements make)."""
        r = self.fw.root.get(t.name or "")
        return r is not None and t.layout() in self.primal_layouts.get(r, set())

    def local_statistics(self, a: Apply, t: Tensor, i: int, span: Span | None, quiet: bool) -> Tensor | None:
        """A function with statistics along ``a.dim`` reading ``t`` with the dim whole where the program holds
        it sharded: each device would take its block's statistics for the whole row's (never all-reduced). A
        forward value read in a layout the forward stored is not: that buffer is held, whole as it reads it,
        whatever the backward's collectives made of the name since. The tensor the program holds, reported
        (unless ``quiet``); None when that is not the case."""
        rec = RECORDS[a.op]
        dim = a.dim
        if dim is None or not rec.statistics or dim not in t.dim_names or t.axes_of(dim):
            return None
        k = t.dim_names.index(dim)
        dims, unreduced, invariant = t.layout()

        def blocks(layout: tuple) -> bool:  # ``t``'s layout with the dim sharded
            ds, u, inv = layout
            return bool(ds[k]) and (ds[:k] + ((),) + ds[k + 1 :], u, inv) == (dims, unreduced, invariant)

        name = t.name or ""
        if self.forward_holds(t):  # the forward's own buffer, still held after a collective moved the name
            return None
        if name in self.env:
            if self.held.find(name, t) is not None:
                return None
            held = self.held.find(name, t, lambda h, w: h.dim_names == w.dim_names and blocks(h.layout()))
            actual = replace(held, span=None) if held is not None else None
        elif name in self.fw.root:
            found = [lay for lay in self.primal_layouts.get(self.fw.root[name], set()) if blocks(lay)]
            actual = tensor_with(replace(t, span=None), Layout(*found[0])) if found else None
        else:
            return None
        if actual is None:
            return None
        if not quiet:
            axes = actual.axes_of(dim)
            sub = subscript(axes)
            self.add(
                ERROR,
                "local-statistics",
                f"{a.op.value}_{dim} reads {shown(t)}, but the program holds {shown(actual)}: each device would "
                f"take the {' and '.join(rec.statistics)} of its own block of {dim} for the whole row's, never "
                f"all-reduced over {', '.join(axes)}",
                i,
                t.span or span,
                f"read {shown(actual)}: {a.op.value} over {dim}_{sub} all-reduces its statistics over {sub}, as "
                f"the derived backward does (or AllGather_{sub} it first)",
            )
        return actual

    def function(self, s: Arrow, i: int) -> None:
        """A function's gradient statement: which derived step it is, what it reads, what it makes."""
        a: Apply = s.expr  # type: ignore[assignment]
        result = s.result
        if not result.name or not all(isinstance(t, Tensor) and t.name for t in a.operands):
            raise UsageError("verify reads a function of named tensors per statement", span=s.span)
        errors = len([f for f in self.findings if f.severity == ERROR])
        g = self.gradient_of(a, result, i, s.span)
        ops: list[Tensor] = []
        said = False  # a local-statistics finding, once a statement
        for t in a.operands:
            local = self.local_statistics(a, t, i, s.span, quiet=said)
            said = said or local is not None
            ops.append(local if local is not None else self.read(t, i, s.span))  # type: ignore[arg-type]
        out = result  # as written, where the statement is wrong already
        if not said:
            out = self.function_result(a, ops, result, i, s.span)
        if len([f for f in self.findings if f.severity == ERROR]) > errors:
            self.tainted.add(result.name)
        elif g is not None and self._step(g) in self.fn_final:
            self.contributed(self._step(g), i, s.span)
        self.assign(result, out, i, s.span)

    def function_result(
        self, a: Apply, ops: list[Tensor], result: Tensor, i: int, span: Span | None
    ) -> Tensor:
        """What the function's rule makes of the operands the program holds (``result`` when it refuses them,
        reported: a partial cotangent, operands that do not meet)."""
        try:
            got = RECORDS[a.op].result(ops, a.dim, a.flags)
        except ShardalgError as err:
            partial = next((t for t in ops if t.unreduced), None)
            if partial is None:
                self.add(
                    ERROR, "not-local", f"{text(a)} is not a local function: {err.message}", i, span, err.fix
                )
                return result
            sub, axes = subscript(partial.unreduced), ", ".join(partial.unreduced)
            whole = not set(partial.unreduced) <= set(result.unreduced)
            of = self.grad_roots.get(result.name or "", result.name)
            said = (
                f", and writes {shown(result)} as the whole value: each device would apply it to its own partial "
                f"sum and use the result as the whole gradient of {of}"
                if whole
                else f": {err.message}"
            )
            self.add(
                ERROR,
                "partial-cotangent",
                f"{a.op.value} reads {shown(partial)}, partial sums over {axes}{said}",
                i,
                span,
                f"reduce it first: AllReduce_{sub}({shown(partial)}) -> {shown(replace(partial, unreduced=()))}",
            )
            return result
        out = Tensor(result.name, got.dims, got.unreduced, (), got.dtype)
        self.produced(out, result, i, span, "result")
        return out

    def _step(self, g: GradStep) -> int:
        return next(k for k, h in enumerate(self.fn_steps) if h is g)

    def contributed(self, k: int, i: int, span: Span | None) -> None:
        """A function's contribution to an operand's gradient (derived step ``k``), once."""
        g = self.fn_steps[k]
        if k in self.fn_done:
            self.add(
                ERROR,
                "duplicate-contribution",
                f"{grad_name(g.of)} gets the contribution of {self._forward_text(g.einsum)} twice (first in "
                f"statement {self.fn_done[k]}): the gradient is doubled",
                i,
                span,
                "compute each contribution once",
            )
        self.fn_done[k] = i

    def functions_finish(self) -> None:
        """Before the ends are checked: a cotangent passed on and never written otherwise is the gradient
        (as the derived backward borrows it); a function's contribution, or a passed-on cotangent, missing."""
        last = len(self.program.statements) or None
        writes = {
            whole_name(st.result.name)
            for st in self.program.statements
            if isinstance(st, Arrow) and st.result.name
        }
        for (index, rx), c in self.passed.items():
            name, cot = grad_name(rx), self.dgrad[c.roots[-1]]
            done = self.pass_done.get((index, rx), [])
            if len(done) >= self._times((index, rx)) or name in self.tainted:
                continue
            if not done and name not in writes and self.dgrad.get(rx, cot).name in self.names_of(c.roots[-1]):
                held = self.env.get(cot.name or "")  # the cotangent itself, as the program left it
                if held is not None and rx in self.fw.inputs:
                    want = self.dgrad.get(rx, cot)
                    kept = self.held.find(cot.name or "", want, lambda h, w: h.layout()[:2] == w.layout()[:2])
                    self.env[name] = replace(kept or held, name=name)
                    if cot.name in self.written:
                        self.written[name] = self.written[cot.name or ""]
                continue
            if name not in writes:
                continue  # never written: its other contributions are reported missing
            self.add(
                ERROR,
                "missing-contribution",
                f"{name} never gets the cotangent {cot.name} that {self._forward_text(index)} passes on to "
                f"{rx} unchanged: the gradient misses that term",
                last,
                None,
                self._add_fix(cot, name),
            )
        for g in self.derived.grads:  # a function's steps are checked here, by operand, not by finish
            if g.side == "operand":
                self.contributions.setdefault((g.einsum, g.side), 0)
        for k, g in self.fn_final.items():
            index, rx = g.einsum, g.of
            if k in self.fn_done or grad_name(rx) in self.tainted:
                continue
            self.add(
                ERROR,
                "missing-contribution",
                f"no statement computes {grad_name(rx)}'s contribution from {self._forward_text(index)}",
                last,
                None,
                f"add {text(g.statement.expr)} -> {shown(g.statement.result)}",
            )

    def _addition(self, cot: Tensor, name: str) -> tuple[str, bool] | None:
        """``cot + name -> name`` in the sharding the program holds gradient ``name`` in, and whether the program
        holds the cotangent so (else it is resharded first); None when the program never wrote ``name``."""
        have = self.env.get(name)
        if have is None:
            return None
        have = replace(have, name=name, span=None)
        same = replace(have, name=cot.name)
        held = cot.layout() == have.layout() or self.held.find(cot.name or "", same) is not None
        return f"{shown(same)} + {shown(have)} -> {shown(have)}", held

    def _add_fix(self, cot: Tensor, name: str) -> str:
        """The fix of a passed-on cotangent ``cot`` that gradient ``name`` misses: add it."""
        addition = self._addition(cot, name)
        if addition is None:
            return f"add {shown(cot)} to {name}"
        add, held = addition
        return f"add it: {add}" if held else f"reshard {shown(cot)} into {name}'s sharding and add it: {add}"

    def passed_on(self, cot: Tensor, name: str, i: int, span: Span | None) -> None:
        """``cot`` added to gradient ``name``: the cotangent a function of the forward passes on to its
        value unchanged (a contribution), or an error."""
        rx = self.grad_roots.get(name, name)
        keys = self._passes(rx, cot)
        if not keys:
            self.add(
                ERROR,
                "not-a-gradient",
                f"{cot.name} is not a cotangent the forward passes on to {rx} (a + passes its result's "
                "cotangent to both operands)",
                i,
                cot.span or span,
            )
            self.tainted.add(name)
            return
        key = next((k for k in keys if len(self.pass_done.get(k, ())) < self._times(k)), None)
        if key is None:
            key = keys[0]
            self.add(
                ERROR,
                "duplicate-contribution",
                f"{name} gets the cotangent {cot.name} that {self._forward_text(key[0])} passes on to {rx} "
                f"once more (already added in statement {self.pass_done[key][-1]}): the gradient has it too often",
                i,
                span,
                "add each passed-on cotangent once",
            )
        self.pass_done.setdefault(key, []).append(i)

    def copied_on(self, s: Arrow, i: int) -> None:
        """A collective ``s`` from the cotangent a function passes on into the operand's gradient
        (``Slice_{X,B}(dO[B, F]) -> dH[B_X, F]``): a collective is the identity on the global value, so the
        gradient then *is* the cotangent, in another sharding: the contribution, as reading the cotangent is. A
        collective writes its result, it does not add to it: into a gradient the program already wrote, it drops
        what was there (an error), where a product or ``+`` would have added. A collective of anything else is
        read as before."""
        cot, name = s.expr.arg, s.result.name or ""  # type: ignore[union-attr]
        rx = self.grad_roots.get(name)
        if rx is None or name != grad_name(rx) or not isinstance(cot, Tensor):
            return
        if not self._passes(rx, cot):
            return
        if name in self.written and name not in self.tainted:
            add, held = self._addition(cot, name) or ("", False)
            kept = replace(s, result=replace(s.result, name=cot.name, span=None))  # the copy, its name kept
            if held:
                fix = f"add it instead: {add}"
            elif kept.result.layout() == self.env[name].layout():
                fix = f"keep the cotangent's name and add it: {text(kept)}; {add}"
            else:
                fix = f"reshard {shown(cot)} into {name}'s sharding and add it: {add}"
            self.add(
                ERROR,
                "overwritten-contribution",
                f"{name} already holds what statement {self.written[name]} wrote; this collective replaces it "
                f"with the cotangent {cot.name} alone (a collective writes its result, it does not add to it), "
                f"so the gradient of {rx} loses that term",
                i,
                s.span,
                fix,
            )
            self.tainted.add(name)
            return
        self.passed_on(cot, name, i, s.span)
        self.copies[name] = (self.copied_from(cot).name or "", self.made.get(name))

    def _passes(self, rx: str, cot: Tensor) -> list[tuple[int, str]]:
        """The passes of a function's cotangent on to value ``rx`` that ``cot`` is: by its name (the cotangent,
        or the name the derived backward gives it), or as a copy of it (:meth:`copied_from`)."""
        source = self.copied_from(cot).name
        return [k for k, c in self.passed.items() if k[1] == rx and source in self.names_of(c.roots[-1])]

    def copied_from(self, t: Tensor) -> Tensor:
        """``t`` under the name of the cotangent it is a copy of (:meth:`copied_on`: ``Slice_{X,B}(dY[B, D]) ->
        dAtt[B_X, D]``, then ``dX + dAtt -> dX`` adds dY), while no statement has computed its name since (a
        contribution added to it, a collective aside, makes it another value); else ``t``."""
        got = self.copies.get(t.name or "")
        if got is not None and self.made.get(t.name or "") == got[1]:
            return replace(t, name=got[0])
        return t

    def _times(self, key: tuple[int, str]) -> int:
        """How often the function passes its cotangent on to the value (``X + X``: twice; ``X - X``: once)."""
        return self.pass_times[key]
