"""Check a hand-written backward program against the forward it differentiates.

The hand-written backward is read as a per-device program (the local view): each product is a local einsum
of the shards (its result is what the case rules give: a contraction sharded alike on both sides is
unreduced), each collective does exactly what its rule does. Gradients are named ``d`` + the value
(``dW``, ``dIn``); the cotangent of each forward output (``dOut``) is given, in the output's sharding.
A value read more than once gets a contribution from each reader: one may be written into a name of its own
and added, ``dW[D, F]{U_X} + dW'[D, F]{U_X} -> dW[D, F]{U_X}`` (as ``backward`` writes it), or written as a
second product into the gradient's name, which adds to it.

Functions are read as ``shardalg backward`` writes their gradients, each against the derived backward's (the
reference): a statement ``rmsnorm'_D(In[B_X, D], dN[B_X, D]) -> dIn[B_X, D]`` (or ``dH .* G -> dN``, ``sum_B``,
``scale_{-1}``) is the derived step of the same function into the same gradient, and reads what it reads: the
forward's operands (as the forward held them, or a resharding the program made) and the same cotangents; it
is a local function of the shards, so it reads its cotangent whole (a partial one only where the function is
linear and its result stays partial), and a function with statistics over a sharded dim reads the dim
sharded (its step all-reduces the statistics over the dim's axes; written whole, each device would use its
own block's). A ``+`` passes its cotangent on: a gradient the program never writes otherwise *is* that
cotangent (the derived backward reads ``dOut`` as ``dO``); one it writes gets it added,
``dOut[B_X, D] + dIn[B_X, D] -> dIn[B_X, D]``, or a collective copies it in, ``Slice_{X,B}(dOut[B, D]) ->
dIn[B_X, D]`` (the cotangent resharded; a collective writes its result, so into a gradient already written it
drops what was there: an error). A MoE routing's gradient, a block of attention's, and a ring core's are not
read (refused by name).

Each finding names the statement it concerns (with a caret when there is source text). Exact semantic errors
are errors: a gradient that would be wrong (a missing reduction, a partial value used as the full value, a
replicated value summed again so the gradient is scaled by the axis size, a collective on the wrong axis, a
missing, doubled or overwritten contribution, a gradient left in a sharding other than its value's, a
function's gradient reading the wrong operand or a partial cotangent, statistics of a sharded dim taken per
block). Correct but wasteful choices are warnings, with the bytes they cost (an AllReduce then a Slice where
one ReduceScatter does it). A fix starts from what the program holds: a gradient in the wrong sharding gets
the cheapest resharding (:func:`.redistribute.cheapest_resharding`) of the tensor the program ends with, or of
the one it held before its last collectives on the gradient, when dropping or replacing those is cheaper.

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
from shardalg.algebra.layout import subscript
from shardalg.algebra.legality import as_sizes
from shardalg.algebra.mesh import Mesh, as_mesh
from shardalg.algebra.ops import RULES
from shardalg.algebra.traffic import Bytes, Sizes, step_bytes
from shardalg.errors import ShardalgError, Span, UsageError
from shardalg.notation.op import ROUTES
from shardalg.notation.parse import parse
from shardalg.notation.syntax import Apply, Arrow, Collective, Op, Product, Program, Roles, Tensor

from .accumulate import whole_name
from .backward import BackwardProgram, backward
from .findings import ERROR, WARNING, Finding, VerifyReport
from .forward import Forward, analyze, grad_name
from .held import Held
from .redistribute import plan_bytes
from .symbolic import beaten_everywhere
from .verify_ends import Moved, shown
from .verify_functions import FunctionGradients

__all__ = ["verify", "Finding", "VerifyReport"]

# the functions whose gradient verify does not read: a MoE routing's, a block of attention's (a ring's)
_UNREAD = (*ROUTES, Op.ATTEND, Op.ATTEND_D)


class _Checker(FunctionGradients):
    """Walks the hand-written backward, tracking what each name really holds (its actual layout)."""

    def __init__(
        self,
        fw: Forward,
        derived: BackwardProgram,
        program: Program,
        mesh: Mesh,
        sizes: dict[str, int],
        roles: Roles | None = None,
    ):
        self.fw, self.derived, self.program, self.mesh = fw, derived, program, mesh
        self.roles = roles  # the forward's declarations: which values are parameters
        self.sizes, self.known = Sizes(sizes), dict(sizes)
        self.findings: list[Finding] = []
        self.env: dict[str, Tensor] = {grad_name(r): derived.gradient(r) for r in fw.outputs}
        self.held = Held()  # every layout each name's value is held in (env: the latest)
        for name, t in self.env.items():
            self.held.computed(name, t)
        self.written: dict[str, int] = {}
        self.made: dict[str, int] = {}  # the statement whose product last wrote each name
        self.tainted: set[str] = set()  # names already reported: later checks stay quiet about them
        self.history: dict[str, list[Moved]] = {}
        self.contributions: dict[tuple[int, str], int] = {}
        self.bytes = Bytes()
        self.primal_layouts: dict[str, set] = {}
        for e in fw.einsums:
            for t, r in zip((e.left, e.right, e.out), e.roots, strict=True):
                self.primal_layouts.setdefault(r, set()).add(t.layout())
            for copy, r in zip(e.kept, e.roots, strict=False):  # a copy the forward's plan made (a kept one)
                if copy is not None:
                    self.primal_layouts.setdefault(r, set()).add(copy.layout())
        for r in fw.origin:
            self.primal_layouts.setdefault(r, set()).update({fw.origin[r].layout(), fw.latest[r].layout()})
        for made, src in fw.gathered.items():
            r = fw.root.get(src.name or "", src.name or "")
            self.primal_layouts.setdefault(r, set()).update({made.layout(), src.layout()})
        for c in fw.calls:  # a function's operands and result, as the forward holds them
            for t, r in zip((*c.operands, c.out), c.roots, strict=True):
                self.primal_layouts.setdefault(r, set()).add(t.layout())
        self.grad_roots = {grad_name(r): r for r in fw.origin}
        self._functions_from_derived()

    # ---- reading a value -----------------------------------------------------------------------------

    def read(
        self, t: Tensor, i: int, span: Span | None, op: Op | None = None, axes: tuple[str, ...] = ()
    ) -> Tensor:
        """The actual value a statement reads as ``t``; reports a declared sharding that is not the truth."""
        name = t.name or ""
        if name in self.env:
            actual = self.env[name]
        elif name in self.fw.root:
            if not self.forward_holds(t):
                have = shown(replace(self.fw.origin[self.fw.root[name]], name=name))
                self.add(
                    ERROR,
                    "layout",
                    f"{shown(t)} is not a sharding the forward gave {name}; it holds {have}",
                    i,
                    t.span or span,
                    f"read {have} and let a collective make {shown(t)}",
                )
            return t
        else:
            self.add(
                ERROR, "undefined", f"{shown(t)} is read before any statement computes it", i, t.span or span
            )
            self.env[name] = t
            self.tainted.add(name)
            return t
        # a name already reported is read as it is, quietly; but the forward's buffers stay held whatever was
        # reported about the name, so a read of one is checked (and right) as before the error
        if actual.layout() == t.layout() or (name in self.tainted and not self.forward_holds(t)):
            return actual
        held = self.held.find(name, t, lambda h, w: h.layout() == w.layout())
        if held is not None:  # a layout a collective made of the value, still held
            return held
        if self.forward_holds(t):  # a forward value as the forward holds it: a collective made a new buffer
            return t
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
                f"{op.value}_{subscript(axes)} sums over {', '.join(axes)}, but {shown(actual)} is partial over "
                f"{', '.join(want)}: the partial sums over {', '.join(want)} are never added",
                i,
                span,
                f"{op.value}_{subscript(want)}",
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
                f"{shown(t)} reads {shown(actual)}, a replicated value, as partial sums over "
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
                f"{shown(t)} reads {shown(actual)}, which holds partial sums over {', '.join(sorted(partial))}, "
                f"as the whole value: each device would use only its own partial sum",
                i,
                t.span or span,
                f"reduce it first: AllReduce_{subscript(tuple(sorted(partial)))}({shown(actual)})",
            )
            return
        self.add(
            ERROR,
            "layout",
            f"{shown(t)} is read, but the program made {shown(actual)}",
            i,
            t.span or span,
            f"write {shown(actual)}, or add the collective that makes {shown(t)}",
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
                f"{shown(left)} · {shown(right)} is not a local product: {err.message}",
                i,
                s.span,
                err.fix,
            )
            self.assign(result, result, i, s.span)
            self.tainted.add(result.name)
            return
        self.produced(out, result, i, s.span)
        self.assign(result, out, i, s.span)

    def produced(self, out: Tensor, result: Tensor, i: int, span: Span | None, what: str = "product") -> None:
        """A statement's local result ``out`` against the result it writes (a product's, a function's)."""
        if out.layout() != result.layout():
            partial = set(out.unreduced) - set(result.unreduced)
            if partial and out.layout()[0] == result.layout()[0]:
                axes = subscript(tuple(sorted(partial)))
                self.add(
                    ERROR,
                    "partial-as-replicated",
                    f"the local {what} is {shown(out)}: each device holds a partial sum over "
                    f"{', '.join(sorted(partial))}; written as {shown(result)} it is used as the whole value",
                    i,
                    result.span or span,
                    f"write {shown(out)} and reduce it: AllReduce_{axes} or ReduceScatter_{axes}",
                )
            else:
                self.add(
                    ERROR,
                    "layout",
                    f"the local {what} is {shown(out)}, not {shown(result)}",
                    i,
                    result.span or span,
                    f"write the result as {shown(out)}",
                )
            self.tainted.add(result.name or "")

    def assign(self, written: Tensor, actual: Tensor, i: int, span: Span | None) -> None:
        name = written.name or ""
        if name in self.env and name in self.grad_roots and self.env[name].layout() != actual.layout():
            self.add(
                ERROR,
                "layout",
                f"{name} is added to in two shardings: {shown(self.env[name])} and {shown(actual)}",
                i,
                span,
            )
        self.env[name] = actual
        self.held.computed(name, actual)
        self.written[name] = self.made[name] = i

    def role(self, a: Tensor, b: Tensor, out: Tensor, i: int, span: Span | None) -> None:
        """Which gradient einsum of the forward this product is; an error when it is none, or a repeat. A product
        of a value with itself (``C · C -> W``) has two gradients that read alike, ``dW·C`` and ``C·dW``: the
        first not yet computed is this one."""
        names = {a.name, b.name}
        for e in self.fw.einsums:
            dcs = self.names_of(e.roots[2])  # dC, or the cotangent passed on to C (a +'s)
            keys = [
                (e.index, side)
                for side, (x, other) in (
                    ("left", (e.roots[0], e.roots[1])),
                    ("right", (e.roots[1], e.roots[0])),
                )
                if whole_name(out.name) == grad_name(x)
                and any(names == {dc, other} | ({dc} if dc == other else set()) for dc in dcs)
            ]
            if not keys:
                continue
            key = next((k for k in keys if k not in self.contributions), None)
            if key is None:
                key = keys[0]
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

    def addition(self, s: Arrow, i: int) -> None:
        """``dW + dW' -> dW``: two parts of one gradient added, each device its own buffers, so in one layout."""
        parts = s.expr.operands  # type: ignore[union-attr]
        name = s.result.name or ""
        if len(parts) != 2 or not all(isinstance(t, Tensor) for t in parts):
            raise UsageError(
                f"verify reads an addition of two parts of one gradient, {name}[...] + {name}'[...] -> "
                f"{name}[...], or of a cotangent a + passed on, dOut[...] + {name}[...] -> {name}[...], not {s}",
                span=s.span,
            )
        for t in parts:  # a cotangent passed on (a residual's), added to the gradient
            if whole_name(t.name) != name:  # type: ignore[union-attr]
                self.passed_on(t, name, i, s.span)  # type: ignore[arg-type]
        left, right = (self.read(t, i, s.span) for t in parts)  # type: ignore[arg-type]
        if left.layout() != right.layout():
            self.add(
                ERROR,
                "layout",
                f"{shown(left)} and {shown(right)} are added in two shardings: each device would add "
                "blocks of different parts of the gradient",
                i,
                s.span,
                f"reshard {shown(right)} into {shown(left)}'s sharding first",
            )
            self.tainted.add(name)
        elif s.result.layout() != left.layout():
            self.add(
                ERROR,
                "layout",
                f"the sum is {shown(replace(left, name=name))}, not {shown(s.result)}",
                i,
                s.result.span or s.span,
                f"write the result as {shown(replace(left, name=name))}",
            )
            self.tainted.add(name)
        total = replace(left, name=name)
        self.env[name] = total
        self.held.computed(name, total)
        self.written[name] = self.made[name] = i

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
                f"{head} rolls the blocks of {shown(actual)} along {sharded[0]}: every device then holds "
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
                f"{shown(actual)} is not sharded over {', '.join(c.axes)} (copies or partial sums of one "
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
            moved = step_bytes(c.op, c.axes, actual, out, self.mesh, self.sizes, c.offset)
            self.bytes = self.bytes + moved
            self.history.setdefault(c.arg.name or "", []).append(Moved(i, c.op, c.axes, actual, out, moved))
        if result is not None and result.layout()[:2] != out.layout()[:2] and c.arg.name not in self.tainted:
            self.add(
                ERROR,
                "layout",
                f"{c.op.value}_{subscript(c.axes)} gives {shown(out)}, not {shown(result)}",
                i,
                result.span or s.span,
                f"write the result as {shown(out)}",
            )
        name = (result.name if result is not None else None) or c.arg.name or ""
        if isinstance(s, Arrow) and s.result.name != c.arg.name:
            self.copied_on(s, i)  # a cotangent a + passes on, copied into its operand's gradient
        if result is not None and result.name != c.arg.name:
            self.grad_roots.setdefault(name, self.grad_roots.get(c.arg.name or "", name))
        out = replace(out, name=name)  # the rule's result keeps its operand's name
        self.env[name] = out
        self.held.moved(name, c.arg.name or "", out)
        self.written[name] = i


def _unread(fwd: Program, where: object, n: int, what: str) -> UsageError:
    """The refusal of a forward statement whose gradient verify does not read."""
    return UsageError(
        "verify checks the backward of products, collectives and functions (elementwise, reductions, softmax, "
        f"norms, + and .*); statement {n} of the forward, {where}, is {what}, whose gradient it does not read",
        span=getattr(where, "span", None),
        source=fwd.source,
        fix="`shardalg backward` derives the whole backward; verify the rest of the layer alone",
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
    for n, st in enumerate(fwd.statements, 1):
        if isinstance(st, Arrow) and isinstance(st.expr, Apply) and st.expr.op in _UNREAD:
            raise _unread(fwd, st, n, "a MoE routing" if st.expr.op in ROUTES else "a block of attention")
    derived = backward(fwd, m, bound, defer_reductions=defer_reductions)
    fw = analyze(fwd, m, bound)
    if derived.note:  # an attention core whose derived backward is the ring's blocks
        raise _unread(fwd, fwd.statements[0], 1, "part of an attention core the planner runs as a ring")
    checker = _Checker(fw, derived, bwd, m, bound, fwd.roles)
    for n, s in enumerate(bwd.statements, 1):
        expr = s.expr if isinstance(s, Arrow) else s
        if isinstance(expr, Product) and isinstance(s, Arrow):
            checker.product(s, n)
        elif isinstance(expr, Collective):
            checker.collective(s, n)  # type: ignore[arg-type]
        elif isinstance(expr, Tensor):
            checker.read(expr, n, s.span)
        elif isinstance(expr, Apply) and expr.op is Op.ADD and isinstance(s, Arrow):
            checker.addition(s, n)
        elif isinstance(expr, Apply) and isinstance(s, Arrow):
            checker.function(s, n)
        else:
            raise UsageError(f"verify cannot read the statement {s}", span=s.span, source=bwd.source)
    checker.functions_finish()
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
