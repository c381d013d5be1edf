"""Check a hand-written backward program against the forward it differentiates.

The hand-written backward is read as a per-device program (the local view): each product is a local einsum
of the shards (its result is what the case rules give: a contraction sharded alike on both sides is
unreduced), each collective does exactly what its rule does. Gradients are named ``d`` + the value
(``dW``, ``dIn``); the cotangent of each forward output (``dOut``) is given, in the output's sharding.
A second product into the same gradient name adds to it (a value used twice).

Each finding names the statement it concerns (with a caret when there is source text). Exact semantic errors
are errors: a gradient that would be wrong (a missing reduction, a partial value used as the full value, a
replicated value summed again so the gradient is scaled by the axis size, a collective on the wrong axis, a
missing or doubled contribution, a gradient left in a sharding other than its value's). Correct but
wasteful choices are warnings, with the bytes they cost (an AllReduce then a Slice where one ReduceScatter
does it). A fix starts from what the program holds: a gradient in the wrong sharding gets the cheapest
resharding (:func:`.redistribute.cheapest_resharding`) of the tensor the program ends with, or of the one it held
before its last collectives on the gradient, when dropping or replacing those is cheaper.

    >>> report = verify("In[B_X, D] * W[D, F] -> Out[B_X, F]",
    ...                 "In[B_X, D] * dOut[B_X, F] -> dW[D, F]{U_X}; dOut[B_X, F] * W[D, F] -> dIn[B_X, D]",
    ...                 mesh="X=4")
    >>> report.ok, [f.rule for f in report.findings]
    (False, ['missing-reduction'])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from shardalg.algebra.einsum import Spec, local_output
from shardalg.algebra.legality import as_sizes
from shardalg.algebra.mesh import Mesh, as_mesh
from shardalg.algebra.ops import RULES
from shardalg.algebra.traffic import Bytes, Sizes, step_bytes
from shardalg.errors import NoPlan, ShardalgError, Span, UsageError
from shardalg.notation.parse import parse
from shardalg.notation.plan import Plan
from shardalg.notation.printing import text
from shardalg.notation.syntax import Arrow, Collective, Op, Product, Program, Tensor

from .backward import BackwardProgram, backward
from .findings import ERROR, WARNING, Finding, VerifyReport
from .forward import Forward, analyze, grad_name
from .held import Held
from .redistribute import cheapest_resharding, plan_bytes
from .symbolic import beaten_everywhere

__all__ = ["verify", "Finding", "VerifyReport"]


def _show(t: Tensor) -> str:
    return text(t)


def _sub(axes: tuple[str, ...]) -> str:
    return "".join(axes) if all(len(a) == 1 for a in axes) else "{" + ",".join(axes) + "}"


def _statements(numbers: list[int]) -> str:
    """``statement 5``, ``statements 4 and 5``, ``statements 3, 4 and 5``."""
    if len(numbers) == 1:
        return f"statement {numbers[0]}"
    return f"statements {', '.join(map(str, numbers[:-1]))} and {numbers[-1]}"


class _Checker:
    """Walks the hand-written backward, tracking what each name really holds (its actual layout)."""

    def __init__(
        self, fw: Forward, derived: BackwardProgram, program: Program, mesh: Mesh, sizes: dict[str, int]
    ):
        self.fw, self.derived, self.program, self.mesh = fw, derived, program, mesh
        self.sizes, self.known = Sizes(sizes), dict(sizes)
        self.findings: list[Finding] = []
        self.env: dict[str, Tensor] = {grad_name(r): derived.gradient(r) for r in fw.outputs}
        self.held = Held()  # every layout each name's value is held in (env: the latest)
        for name, t in self.env.items():
            self.held.computed(name, t)
        self.written: dict[str, int] = {}
        self.made: dict[str, int] = {}  # the statement whose product last wrote each name
        self.tainted: set[str] = set()  # names already reported: later checks stay quiet about them
        self.history: dict[str, list[tuple[int, Op, tuple[str, ...], str | None, Tensor, Tensor]]] = {}
        self.contributions: dict[tuple[int, str], int] = {}
        self.bytes = Bytes()
        self.primal_layouts: dict[str, set] = {}
        for e in fw.einsums:
            for t, r in zip((e.left, e.right, e.out), e.roots, strict=True):
                self.primal_layouts.setdefault(r, set()).add(t.layout())
        for r in fw.origin:
            self.primal_layouts.setdefault(r, set()).update({fw.origin[r].layout(), fw.latest[r].layout()})
        for made, src in fw.gathered.items():
            r = fw.root.get(src.name or "", src.name or "")
            self.primal_layouts.setdefault(r, set()).update({made.layout(), src.layout()})
        self.grad_roots = {grad_name(r): r for r in fw.origin}

    # ---- findings ------------------------------------------------------------------------------------

    def add(
        self, severity: str, rule: str, message: str, i: int | None, span: Span | None, fix: str | None = None
    ):
        if span is None and i is not None and 0 < i <= len(self.program.statements):
            span = self.program.statements[i - 1].span
        self.findings.append(Finding(severity, rule, message, i, span, fix))

    # ---- reading a value -----------------------------------------------------------------------------

    def read(
        self, t: Tensor, i: int, span: Span | None, op: Op | None = None, axes: tuple[str, ...] = ()
    ) -> Tensor:
        """The actual value a statement reads as ``t``; reports a declared sharding that is not the truth."""
        name = t.name or ""
        if name in self.env:
            actual = self.env[name]
        elif name in self.fw.root:
            r = self.fw.root[name]
            if t.layout() not in self.primal_layouts.get(r, set()):
                have = _show(replace(self.fw.origin[r], name=name))
                self.add(
                    ERROR,
                    "layout",
                    f"{_show(t)} is not a sharding the forward gave {name}; it holds {have}",
                    i,
                    t.span or span,
                    f"read {have} and let a collective make {_show(t)}",
                )
            return t
        else:
            self.add(
                ERROR, "undefined", f"{_show(t)} is read before any statement computes it", i, t.span or span
            )
            self.env[name] = t
            self.tainted.add(name)
            return t
        if actual.layout() == t.layout() or name in self.tainted:
            return actual
        held = self.held.find(name, t, lambda h, w: h.layout() == w.layout())
        if held is not None:  # a layout a collective made of the value, still held
            return held
        self.mismatch(t, actual, i, span, op, axes)
        self.tainted.add(name)
        return t

    def mismatch(
        self, t: Tensor, actual: Tensor, i: int, span: Span | None, op: Op | None, axes: tuple[str, ...]
    ):
        said_u, real_u = set(t.unreduced), set(actual.unreduced)
        real_r = {a for a in self.mesh.names if a not in actual.used_axes}
        reducing = op in (Op.ALL_REDUCE, Op.REDUCE_SCATTER)
        if reducing and set(axes) <= said_u and not set(axes) & real_u and real_u:
            want = tuple(a for a in self.mesh.names if a in real_u)
            self.add(
                ERROR,
                "wrong-axis",
                f"{op.value}_{_sub(axes)} sums over {', '.join(axes)}, but {_show(actual)} is partial over "
                f"{', '.join(want)}: the partial sums over {', '.join(want)} are never added",
                i,
                span,
                f"{op.value}_{_sub(want)}",
            )
            return
        scaled = (said_u - real_u) & real_r
        if scaled:
            n = " · ".join(f"|{a}|" for a in sorted(scaled))
            size = self.mesh.group_size(sorted(scaled)) if self.mesh.is_numeric else None
            times = f" = {size}" if size is not None else ""
            self.add(
                ERROR,
                "scaled-gradient",
                f"{_show(t)} reads {_show(actual)}, a replicated value, as partial sums over "
                f"{', '.join(sorted(scaled))}: every device holds the whole value, so summing the copies "
                f"makes the gradient {n}{times} times too large",
                i,
                t.span or span,
                f"drop the reduction over {', '.join(sorted(scaled))}: the value is already whole",
            )
            return
        partial = real_u - said_u
        if partial and not (partial & set(t.sharded_axes)):
            self.add(
                ERROR,
                "partial-as-replicated",
                f"{_show(t)} reads {_show(actual)}, which holds partial sums over {', '.join(sorted(partial))}, "
                f"as the whole value: each device would use only its own partial sum",
                i,
                t.span or span,
                f"reduce it first: AllReduce_{_sub(tuple(sorted(partial)))}({_show(actual)})",
            )
            return
        self.add(
            ERROR,
            "layout",
            f"{_show(t)} is read, but the program made {_show(actual)}",
            i,
            t.span or span,
            f"write {_show(actual)}, or add the collective that makes {_show(t)}",
        )

    # ---- statements ----------------------------------------------------------------------------------

    def product(self, s: Arrow, i: int) -> None:
        p: Product = s.expr  # type: ignore[assignment]
        result = s.result
        if not isinstance(p.left, Tensor) or not isinstance(p.right, Tensor) or not result.name:
            raise UsageError("verify reads one product of two named tensors per statement", span=s.span)
        left, right = self.read(p.left, i, s.span), self.read(p.right, i, s.span)
        self.role(p.left, p.right, result, i, s.span)
        try:
            out = local_output(left, right, Spec.of(left, right, p.contract, result), self.mesh, result.name)
        except ShardalgError as err:
            self.add(
                ERROR,
                "not-local",
                f"{_show(left)} · {_show(right)} is not a local product: {err.message}",
                i,
                s.span,
                err.fix,
            )
            self.assign(result, result, i, s.span)
            self.tainted.add(result.name)
            return
        if out.layout() != result.layout():
            partial = set(out.unreduced) - set(result.unreduced)
            if partial and out.layout()[0] == result.layout()[0]:
                axes = _sub(tuple(sorted(partial)))
                self.add(
                    ERROR,
                    "partial-as-replicated",
                    f"the local product is {_show(out)}: each device holds a partial sum over "
                    f"{', '.join(sorted(partial))}; written as {_show(result)} it is used as the whole value",
                    i,
                    result.span or s.span,
                    f"write {_show(out)} and reduce it: AllReduce_{axes} or ReduceScatter_{axes}",
                )
            else:
                self.add(
                    ERROR,
                    "layout",
                    f"the local product is {_show(out)}, not {_show(result)}",
                    i,
                    result.span or s.span,
                    f"write the result as {_show(out)}",
                )
            self.tainted.add(result.name)
        self.assign(result, out, i, s.span)

    def assign(self, written: Tensor, actual: Tensor, i: int, span: Span | None) -> None:
        name = written.name or ""
        if name in self.env and name in self.grad_roots and self.env[name].layout() != actual.layout():
            self.add(
                ERROR,
                "layout",
                f"{name} is added to in two shardings: {_show(self.env[name])} and {_show(actual)}",
                i,
                span,
            )
        self.env[name] = actual
        self.held.computed(name, actual)
        self.written[name] = self.made[name] = i

    def role(self, a: Tensor, b: Tensor, out: Tensor, i: int, span: Span | None) -> None:
        """Which gradient einsum of the forward this product is; an error when it is none, or a repeat."""
        for e in self.fw.einsums:
            dc = grad_name(e.roots[2])
            for side, (x, other) in (("left", (e.roots[0], e.roots[1])), ("right", (e.roots[1], e.roots[0]))):
                names = {a.name, b.name}
                if out.name == grad_name(x) and names == {dc, other} | ({dc} if dc == other else set()):
                    key = (e.index, side)
                    if key in self.contributions:
                        self.add(
                            ERROR,
                            "duplicate-contribution",
                            f"{out.name} gets the contribution of statement {e.index + 1} of the forward twice "
                            f"(first in statement {self.contributions[key]}): the gradient is doubled",
                            i,
                            span,
                            "compute each contribution once",
                        )
                    self.contributions[key] = i
                    return
        self.add(
            ERROR,
            "not-a-gradient",
            f"{a.name} · {b.name} -> {out.name} is not a gradient einsum of the forward "
            f"(dA = dC·Bᵀ or dB = Aᵀ·dC of one of its products)",
            i,
            span,
        )

    def shift(self, c: Collective, actual: Tensor, i: int, span: Span | None) -> None:
        """A Shift in a backward: where its axis shards a dim it rolls the gradient's blocks (a wrong
        gradient: the forward has no shift, every value's gradient sits where the value did); elsewhere it
        moves copies or partials that are already in place (communication for nothing)."""
        sharded = [d.label for d in actual.dims if set(c.axes) & set(d.axes)]
        head = f"Shift_{{{','.join(c.axes)},{c.offset:+d}}}"
        if sharded:
            self.add(
                ERROR,
                "shifted-gradient",
                f"{head} rolls the blocks of {_show(actual)} along {sharded[0]}: every device then holds "
                "another device's block of the gradient",
                i,
                span,
                "drop the shift",
            )
            self.tainted.add(actual.name or "")
        else:
            self.add(
                WARNING,
                "wasteful-shift",
                f"{_show(actual)} is not sharded over {', '.join(c.axes)} (copies or partial sums of one "
                f"value), so {head} moves bytes and changes nothing",
                i,
                span,
                "drop the shift",
            )

    def collective(self, s: Arrow | Collective, i: int) -> None:
        c = s.expr if isinstance(s, Arrow) else s
        result = s.result if isinstance(s, Arrow) else None
        assert isinstance(c, Collective)
        if not isinstance(c.arg, Tensor):
            raise UsageError("verify reads one collective of a named tensor per statement", span=s.span)
        actual = self.read(c.arg, i, s.span, c.op, c.axes)
        if c.op is Op.SHIFT and c.offset is not None:
            self.shift(c, actual, i, s.span)
        try:
            out = RULES[c.op].apply(actual, c.axes, c.dim, self.mesh)
        except ShardalgError as err:
            if c.arg.name not in self.tainted:
                self.add(ERROR, "collective", err.message, i, s.span, err.fix)
            out = result if result is not None else actual
            self.tainted.add(c.arg.name or "")
        else:
            if result is not None and result.invariant:
                out = replace(
                    out, invariant=tuple(sorted(set(out.invariant) | (set(result.invariant) & set(c.axes))))
                )
            self.bytes = self.bytes + step_bytes(c.op, c.axes, actual, out, self.mesh, self.sizes)
            self.history.setdefault(c.arg.name or "", []).append((i, c.op, c.axes, c.dim, actual, out))
        if result is not None and result.layout()[:2] != out.layout()[:2] and c.arg.name not in self.tainted:
            self.add(
                ERROR,
                "layout",
                f"{c.op.value}_{_sub(c.axes)} gives {_show(out)}, not {_show(result)}",
                i,
                result.span or s.span,
                f"write the result as {_show(out)}",
            )
        name = (result.name if result is not None else None) or c.arg.name or ""
        if result is not None and result.name != c.arg.name:
            self.grad_roots.setdefault(name, self.grad_roots.get(c.arg.name or "", name))
        self.env[name] = out
        self.held.moved(name, c.arg.name or "", out)
        self.written[name] = i

    # ---- the end -------------------------------------------------------------------------------------

    def finish(self, defer: bool) -> None:
        last = len(self.program.statements) or None
        for g in self.derived.grads:
            if (g.einsum, g.side) not in self.contributions and grad_name(g.of) not in self.tainted:
                self.add(
                    ERROR,
                    "missing-contribution",
                    f"no statement computes {g.statement.result.name}'s contribution from statement "
                    f"{g.einsum + 1} of the forward: {g.reason.split(': ', 1)[-1]}",
                    last,
                    None,
                    f"add {_show(g.statement.expr.left)} · {_show(g.statement.expr.right)} -> ...",
                )
        for r in self.fw.inputs:
            want = self.derived.gradient(r)
            name = grad_name(r)
            if name not in self.env:
                if name not in self.tainted:
                    self.add(
                        ERROR,
                        "missing-gradient",
                        f"the backward never computes {name}",
                        last,
                        None,
                        f"end with {_show(want)}",
                    )
                continue
            got = self.env[name]
            self.wasteful_allreduce(name, got, want)
            if name in self.tainted or got.layout()[:2] == want.layout()[:2]:
                continue
            free = {a for a in self.mesh.names if a not in self.fw.origin[r].used_axes}
            extra_u = set(got.unreduced) - set(want.unreduced)
            if defer and extra_u <= free and got.layout()[0] == want.layout()[0]:
                continue
            i = self._last_write(name)
            if extra_u and got.layout()[0] == want.layout()[0]:
                self.add(
                    ERROR,
                    "missing-reduction",
                    f"{_show(got)} is still partial over {', '.join(sorted(extra_u))}: every device holds "
                    f"a different partial sum of the gradient of {r}",
                    i,
                    None,
                    self._reduction_fix(got, want),
                )
            else:
                self.add(
                    ERROR,
                    "gradient-sharding",
                    f"{name} ends as {_show(got)}, but {r} is {_show(self.fw.origin[r])}: a gradient is handed "
                    f"on (to the optimizer, or to the backward of what made {r}) in {r}'s own sharding, "
                    f"{_show(want)}",
                    i,
                    None,
                    self._sharding_fix(name, r, got, want),
                )

    def _last_write(self, name: str) -> int | None:
        return self.written.get(name)

    def _cheapest(self, have: Tensor, want: Tensor) -> Plan:
        """:func:`.redistribute.cheapest_resharding` on this program's mesh and sizes."""
        return cheapest_resharding(have, want, self.mesh, self.known)

    def _reduction_fix(self, got: Tensor, want: Tensor) -> str:
        """Reduce the partial gradient the program holds, ``got``, into ``want``."""
        if got.dim_names != want.dim_names:
            return f"end with {_show(want)}"
        try:
            steps = self._cheapest(got, want).steps
        except NoPlan as err:
            return err.message
        return "reduce it: " + "; ".join(text(s.statement()) for s in steps)

    def _trailing(self, name: str, got: Tensor) -> list[tuple[int, Tensor, Bytes]]:
        """The collectives the program ran on ``name`` since a product last wrote it, in order, as an unbroken
        chain that ends in ``got``: each its statement, the layout it read and the bytes it moved."""
        run: list[tuple[int, Tensor, Bytes]] = []
        at = got
        for i, op, axes, _dim, before, after in reversed(self.history.get(name, [])):
            s = self.program.statements[i - 1]
            into = s.result.name if isinstance(s, Arrow) and s.result.name else name
            overwritten = not run and i != self.written.get(name)  # a later statement wrote the name
            if (
                overwritten
                or i <= self.made.get(name, 0)
                or into != name
                or after.layout()[:2] != at.layout()[:2]
            ):
                break
            run.insert(0, (i, before, step_bytes(op, axes, before, after, self.mesh, self.sizes)))
            at = before
        return run

    def _sharding_fix(self, name: str, r: str, got: Tensor, want: Tensor) -> str:
        """The cheapest way from what the program holds to ``want``: reshard ``got``, or drop or replace the
        program's last collectives on the gradient (keeping the first k of them, for every k) when that moves
        fewer bytes at every size (or as many, in fewer statements)."""
        if got.dim_names != want.dim_names:  # another tensor than the gradient (already reported)
            return f"end with {_show(want)}"
        run = self._trailing(name, got)
        best: tuple[int, Plan, Bytes] | None = None
        failure = ""
        for k in range(len(run), -1, -1):
            start = run[k][1] if k < len(run) else got
            try:
                plan = self._cheapest(start, want)
            except NoPlan as err:
                failure = failure or err.message
                continue
            cost = sum((b for _i, _t, b in run[:k]), Bytes()) + plan_bytes(plan, self.mesh, self.sizes)
            if best is not None:
                tie = not (best[2] + cost.scale(-1)).terms
                if not (
                    beaten_everywhere(best[2], cost)
                    or (tie and k + len(plan.steps) < best[0] + len(best[1].steps))
                ):
                    continue
            best = (k, plan, cost)
        if best is None:
            return failure
        k, plan, _cost = best
        steps = "; ".join(text(s.statement()) for s in plan.steps)
        if k == len(run):
            return steps
        which = _statements([i for i, _t, _b in run[k:]])
        if steps:
            return f"replace {which} with {steps}"
        it = "it" if len(run) - k == 1 else "them"
        return f"drop {which}: before {it} the gradient was already {_show(run[k][1])}, {r}'s sharding"

    def wasteful_allreduce(self, name: str, got: Tensor, want: Tensor) -> None:
        """AllReduce_A of a gradient whose parameter is sharded over A: a ReduceScatter does it in half."""
        for i, op, axes, _dim, before, after in self.history.get(name, []):
            if op is not Op.ALL_REDUCE:
                continue
            target = [(a, d.label) for a in axes for d in want.dims if a in d.axes]
            if not target:
                continue
            dim = target[0][1]
            rs_axes = tuple(a for a, d in target if d == dim)
            try:
                rs_out = RULES[Op.REDUCE_SCATTER].apply(before, rs_axes, dim, self.mesh)
            except ShardalgError:
                continue
            ar = step_bytes(Op.ALL_REDUCE, axes, before, after, self.mesh, self.sizes)
            rs = step_bytes(Op.REDUCE_SCATTER, rs_axes, before, rs_out, self.mesh, self.sizes)
            saved = ar + rs.scale(-1)
            rs_text = f"ReduceScatter_{{{','.join(rs_axes)},{dim}}}"
            if got.layout()[:2] == want.layout()[:2]:
                self.add(
                    WARNING,
                    "wasteful-allreduce",
                    f"AllReduce_{_sub(axes)} of {_show(before)} then a slice to {_show(want)}: the parameter is "
                    f"sharded over {', '.join(rs_axes)} (the forward gathered it), so {rs_text} does both "
                    f"and saves {saved} bytes",
                    i,
                    None,
                    f"{rs_text}({_show(before)}) -> {_show(rs_out)}",
                )
            else:
                self.findings.append(
                    Finding(
                        WARNING,
                        "wasteful-allreduce",
                        f"{rs_text} instead of AllReduce_{_sub(axes)} would leave {name} in its "
                        f"value's sharding and save {saved} bytes",
                        i,
                        None,
                        f"{rs_text}({_show(before)}) -> {_show(rs_out)}",
                    )
                )


def verify(
    forward: Program | str,
    written: Program | str,
    mesh: Mesh | Mapping[str, int] | str | None = None,
    sizes: Mapping[str, int] | str | None = None,
    defer_reductions: bool = False,
) -> VerifyReport:
    """Compare a hand-written backward with the forward it differentiates; see the module docstring."""
    fwd = parse(forward) if isinstance(forward, str) else forward
    bwd = parse(written) if isinstance(written, str) else written
    if not isinstance(fwd, Program) or not isinstance(bwd, Program):
        raise UsageError("verify takes two programs (or their text): the forward and the backward")
    m = as_mesh(mesh)
    if m is None:
        decl = fwd.mesh or bwd.mesh
        m = Mesh(dict(decl.axes)) if decl is not None else None
    if m is None:
        raise UsageError("verify needs a mesh, e.g. mesh='X=4'")
    bound = dict(fwd.sizes) | dict(bwd.sizes) | as_sizes(sizes)
    derived = backward(fwd, m, bound, defer_reductions=defer_reductions)
    fw = analyze(fwd, m, bound)
    checker = _Checker(fw, derived, bwd, m, bound)
    for n, s in enumerate(bwd.statements, 1):
        expr = s.expr if isinstance(s, Arrow) else s
        if isinstance(expr, Product) and isinstance(s, Arrow):
            checker.product(s, n)
        elif isinstance(expr, Collective):
            checker.collective(s, n)  # type: ignore[arg-type]
        elif isinstance(expr, Tensor):
            checker.read(expr, n, s.span)
        else:
            raise UsageError(f"verify cannot read the statement {s}", span=s.span, source=bwd.source)
    checker.finish(defer_reductions)
    derived_bytes = Bytes()
    for g in derived.grads:
        derived_bytes = derived_bytes + plan_bytes(g.plan, m, Sizes(bound))
    quiet = any(
        f.severity == ERROR or f.rule in ("wasteful-allreduce", "wasteful-shift") for f in checker.findings
    )
    if beaten_everywhere(checker.bytes, derived_bytes) and not quiet:  # more at every size
        checker.add(
            WARNING,
            "extra-communication",
            f"the backward communicates {checker.bytes} bytes; the derived one {derived_bytes}",
            None,
            None,
            "compare with `shardalg backward`",
        )
    findings = tuple(sorted(checker.findings, key=lambda f: (f.statement or 0, f.severity != ERROR)))
    return VerifyReport(findings, derived, bwd.source, checker.bytes, derived_bytes)
