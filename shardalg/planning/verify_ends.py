"""What a hand-written backward's gradients end as, checked against the derived backward (:mod:`.verify`):
a contribution or a gradient missing, a gradient left partial or in another sharding than its value's, each
with a fix from what the program holds (the cheapest resharding of the tensor it ends with, or of the one it
held before its last collectives on the gradient), and an AllReduce a ReduceScatter would do in half."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from shardalg.algebra.layout import subscript
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.ops import RULES
from shardalg.algebra.traffic import Bytes, Sizes, step_bytes
from shardalg.errors import NoPlan, ShardalgError, Span
from shardalg.notation.plan import Plan
from shardalg.notation.printing import text
from shardalg.notation.syntax import Arrow, Op, Program, Role, Roles, Tensor

from .findings import ERROR, WARNING, Finding
from .forward import Forward, grad_name
from .redistribute import cheapest_resharding, plan_bytes
from .symbolic import beaten_everywhere

if TYPE_CHECKING:
    from .backward_program import BackwardProgram

__all__ = ["GradientEnds", "shown"]


def shown(t: Tensor) -> str:
    return text(t)


def _statements(numbers: list[int]) -> str:
    """``statement 5``, ``statements 4 and 5``, ``statements 3, 4 and 5``."""
    if len(numbers) == 1:
        return f"statement {numbers[0]}"
    return f"statements {', '.join(map(str, numbers[:-1]))} and {numbers[-1]}"


class Moved(NamedTuple):
    """A collective of the program on a value: statement ``index``, its op and axes, the value before and after,
    and the bytes it moved."""

    index: int
    op: Op
    axes: tuple[str, ...]
    before: Tensor
    after: Tensor
    bytes: Bytes


class GradientEnds:
    """The checks of a backward's end (a base of verify's checker, which walks the statements and fills
    ``env``, ``history``, ``contributions``, ``written`` and ``tainted``)."""

    fw: Forward
    derived: BackwardProgram
    program: Program
    mesh: Mesh
    sizes: Sizes
    roles: Roles | None
    env: dict[str, Tensor]
    tainted: set[str]
    written: dict[str, int]
    contributions: dict[tuple[int, str], int]
    grad_roots: dict[str, str]
    findings: list[Finding]
    history: dict[str, list[Moved]]

    def add(
        self, severity: str, rule: str, message: str, i: int | None, span: Span | None, fix: str | None = None
    ):
        if span is None and i is not None and 0 < i <= len(self.program.statements):
            span = self.program.statements[i - 1].span
        self.findings.append(Finding(severity, rule, message, i, span, fix))

    def finish(self, defer: bool) -> None:
        last = len(self.program.statements) or None
        for g in self.derived.grads:
            if (g.einsum, g.side) not in self.contributions and grad_name(g.of) not in self.tainted:
                self.add(
                    ERROR,
                    "missing-contribution",
                    f"no statement computes {grad_name(g.of)}'s contribution from statement "
                    f"{g.einsum + 1} of the forward: {g.reason.split(': ', 1)[-1]}",
                    last,
                    None,
                    f"add {shown(g.statement.expr.left)} · {shown(g.statement.expr.right)} -> ...",
                )
        for r in self.fw.inputs:
            name = grad_name(r)
            want = replace(self.derived.gradient(r), name=name)  # a cotangent passed on is named as its own
            if name not in self.env:
                if name not in self.tainted:
                    self.add(
                        ERROR,
                        "missing-gradient",
                        f"the backward never computes {name}",
                        last,
                        None,
                        f"end with {shown(want)}",
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
                    f"{shown(got)} is still partial over {', '.join(sorted(extra_u))}: every device holds "
                    f"a different partial sum of the gradient of {r}",
                    i,
                    None,
                    self._reduction_fix(got, want),
                )
            else:
                self.add(
                    ERROR,
                    "gradient-sharding",
                    f"{name} ends as {shown(got)}, but {r} is {shown(self.fw.origin[r])}: a gradient is handed "
                    f"on (to the optimizer, or to the backward of what made {r}) in {r}'s own sharding, "
                    f"{shown(want)}",
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
            return f"end with {shown(want)}"
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
        for i, _op, _axes, before, after, moved in reversed(self.history.get(name, [])):
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
            run.insert(0, (i, before, moved))
            at = before
        return run

    def _sharding_fix(self, name: str, r: str, got: Tensor, want: Tensor) -> str:
        """The cheapest way from what the program holds to ``want``: reshard ``got``, or drop or replace the
        program's last collectives on the gradient (keeping the first k of them, for every k) when that moves
        fewer bytes at every size (or as many, in fewer statements)."""
        if got.dim_names != want.dim_names:  # another tensor than the gradient (already reported)
            return f"end with {shown(want)}"
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
        return f"drop {which}: before {it} the gradient was already {shown(run[k][1])}, {r}'s sharding"

    def what(self, name: str) -> str:
        """The value whose gradient ``name`` is, as the forward declares it: ``the parameter W`` (``params``,
        ``embeddings``), ``the activation In`` (the program declares its parameters, and not this one), or
        ``the value In`` (it declares none)."""
        r = self.grad_roots.get(name, name)
        if self.roles is None or not (self.roles.params or self.roles.embeddings):
            return f"the value {r}"
        kind = self.roles.role_of(r)
        return f"the {'parameter' if kind in (Role.PARAMS, Role.EMBEDDINGS) else 'activation'} {r}"

    def wasteful_allreduce(self, name: str, got: Tensor, want: Tensor) -> None:
        """AllReduce_A of a gradient whose value is sharded over A: a ReduceScatter does it in half."""
        for i, op, axes, before, _after, ar in self.history.get(name, []):
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
            rs = step_bytes(Op.REDUCE_SCATTER, rs_axes, before, rs_out, self.mesh, self.sizes)
            saved = ar + rs.scale(-1)
            rs_text = f"ReduceScatter_{{{','.join(rs_axes)},{dim}}}"
            if got.layout()[:2] == want.layout()[:2]:
                self.add(
                    WARNING,
                    "wasteful-allreduce",
                    f"AllReduce_{subscript(axes)} of {shown(before)} then a slice to {shown(want)}: {self.what(name)} is "
                    f"sharded over {', '.join(rs_axes)} (the forward gathered it), so {rs_text} does both "
                    f"and saves {saved} bytes",
                    i,
                    None,
                    f"{rs_text}({shown(before)}) -> {shown(rs_out)}",
                )
            else:
                self.findings.append(
                    Finding(
                        WARNING,
                        "wasteful-allreduce",
                        f"{rs_text} instead of AllReduce_{subscript(axes)} would leave {name} in its "
                        f"value's sharding and save {saved} bytes",
                        i,
                        None,
                        f"{rs_text}({shown(before)}) -> {shown(rs_out)}",
                    )
                )
