"""The backward of the attention core's ring plan, derived from the forward plan by the rewrite rules.

The forward ring (:mod:`.attention`) runs a chain of blocks ``attend_{S,j}(Q, K⁽ʲ⁾, V⁽ʲ⁾[, O])`` where each
``K⁽ʲ⁾`` is made from the last by ``Shift_{X,+1}``. :func:`ring_backward` reads that plan and derives:

1. **The chain's global rule** (the ``attend`` record's transpose): a chain of blocks is attention over the
   union of their keys, so its backward is one block backward per forward block, ``attend'_{S,dq|dk|dv,j}(Q,
   K⁽ʲ⁾, V⁽ʲ⁾, O, dO)``, each from the forward's final O and its rows' log-sum-exp (flash attention's
   backward). dQ's shares are all on the query's device: they are added there.
2. **The shifts' transposes** (the ``Shift`` record's: ``Shift_{A,k}ᵀ = Shift_{A,−k}``): ``K⁽ʲ⁾`` is
   ``Shift_{X,+e_j}(K)`` with ``e_j`` the forward's shifts since K, so ``dK = Σ_j Shift_{X,−e_j}(dK⁽ʲ⁾)``.
3. **The ring identity** ``Shift_{X,+n} = 1`` (n = |X|): ``Shift_{X,−e} = Shift_{X,+(n−e) mod n}``, so the
   block the forward held at home (e = 0) needs no shift, and the rest travel the same way K and V do.
4. **Horner's rule** (a shift is linear): ``Σ_j Shift^{f_j}(c_j)``, sorted by ``f_j`` falling, is an
   accumulator that starts at the block with the most hops left, moves one ``Shift_{X,+1}`` per block and
   adds each block's share as it passes it: dK and dV travel round the ring with K and V (as ring attention's
   backward does), n − 1 shifts each, and end on their home devices, where the home block's share is added.

K⁽ʲ⁾ and V⁽ʲ⁾ are made again by the forward's own shifts (n − 1 each; keeping them would cost n − 1 blocks of
memory a device). So the backward moves ``4·(n − 1)`` blocks (K, V, dK, dV) against the forward's ``2·(n − 1)``.
"""

from __future__ import annotations

from dataclasses import replace

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.registry import RECORDS
from shardalg.algebra.transpose import transpose
from shardalg.errors import UsageError
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Op, Tensor

from .attention import CAUSAL_NOTE, Core
from .forward import grad_name

__all__ = ["ring_backward", "is_ring", "named_apart"]


def is_ring(plan: Plan) -> bool:
    """Whether a plan of the core is its ring (blocks of attention with shifts between them)."""
    return any(s.op is Op.SHIFT for s in plan.steps) and any(s.op is Op.ATTEND for s in plan.steps)


def _named(t: Tensor, name: str) -> Tensor:
    return replace(t, name=name, span=None, unreduced=(), invariant=())


def ring_backward(forward: Plan, core: Core, mesh: Mesh) -> Plan:
    """The ring's backward, derived from the forward ring plan ``forward`` (see the module's docstring):
    inputs Q, K, V, the forward's O (with its rows' log-sum-exp) and dO; output dV (dQ and dK made on the
    way, each in its primal's layout)."""
    if not is_ring(forward):
        raise UsageError("ring_backward takes the ring plan of an attention core")
    # the forward's K, V blocks: each as the transposes' total offset that takes its cotangent home, and the
    # forward's shifts that made it from K or V (read from the plan's shift steps, by identity)
    since: dict[int, tuple[int, tuple[Step, ...]]] = {id(core.k): (0, ()), id(core.v): (0, ())}
    blocks: list[Step] = []
    axis = ""
    for s in forward.steps:
        if s.op is Op.SHIFT:
            back_offset, path = since[id(s.inputs[0])]
            (back,) = transpose(s, mesh)  # the record's transpose: Shift_{X,-k}
            since[id(s.output)] = (back_offset + (back.offset or 0), (*path, s))
            axis = s.axes[0]
        elif s.op is Op.ATTEND:
            blocks.append(s)
    n = mesh[axis].size
    assert n is not None  # the forward ring is only made on a numeric axis
    out = blocks[-1].output  # the forward's O, with its rows' statistics
    do = _named(core.out, grad_name(core.out.name))
    dq, dk, dv = (_named(t, grad_name(t.name)) for t in (core.q, core.k, core.v))
    flags = tuple(f for f in core.flags if f == "causal")

    # (1)-(3): each block's shares, and the hops (+1 each, by Shift_{X,+n} = 1) its dK, dV shares have to go
    shares = []
    for j, b in enumerate(blocks):
        (back_k, _), (back_v, _) = since[id(b.inputs[1])], since[id(b.inputs[2])]
        assert back_k == back_v  # K and V travel together
        shares.append((back_k % n, j, b))
    # (4): Horner's order: the most hops first; the home block's share (0 hops) is made first, added last
    shares.sort(key=lambda x: (x[0] != 0, -x[0]))

    steps: list[Step] = []
    made: set[int] = set()  # the forward's shift steps made again (equal steps are several: by identity)
    acc: dict[str, Tensor] = {}
    home: dict[str, Tensor] = {}
    at: dict[str, int] = {}  # the hops each accumulator has still to go
    q_acc: Tensor | None = None

    def block(b: Step, which: str, name: str, j: int) -> Tensor:
        operands = (core.q, b.inputs[1], b.inputs[2], out, do)
        got = RECORDS[Op.ATTEND_D].apply(operands, core.key, mesh, (), name, flags=(*flags, which))
        what = {"dq": "dQ's share", "dk": "the K block's gradient", "dv": "the V block's gradient"}[which]
        why = f"backward of ring block {j + 1}: {what}, P remade from {out.name}'s rows' log-sum-exp"
        steps.append(
            Step(Op.ATTEND_D, operands, got, (), core.key, offset=b.offset, flags=(*flags, which), reason=why)
        )
        return got

    def add(a: Tensor, b: Tensor, name: str, why: str) -> Tensor:
        got = RECORDS[Op.ADD].apply((a, b), None, mesh, (), name)
        steps.append(Step(Op.ADD, (a, b), got, (), reason=why))
        return got

    def shift(t: Tensor, why: str) -> Tensor:
        nxt = replace(t, span=None)
        steps.append(Step(Op.SHIFT, (t,), nxt, (axis,), offset=1, reason=why))
        return nxt

    for hops, j, b in shares:
        for t in b.inputs[1:3]:  # K⁽ʲ⁾, V⁽ʲ⁾ made again by the forward's own shifts (each once)
            for fs in since[id(t)][1]:
                if id(fs) not in made:
                    made.add(id(fs))
                    steps.append(replace(fs, reason=f"{fs.reason}: the forward's shift made again"))
        if q_acc is None:
            q_acc = block(b, "dq", dq.name, j)
        else:
            share = block(b, "dq", dq.name + "'", j)
            q_acc = add(q_acc, share, dq.name, f"dQ's shares added on each query's device (block {j + 1})")
        for which, g in (("dk", dk), ("dv", dv)):
            if hops == 0:  # the home block's share: no shift (Shift_{X,+n} = 1), added when the rest arrive
                home[which] = block(b, which, g.name + "''", j)
                continue
            if which not in acc:  # the accumulator starts at the share with the most hops to go
                acc[which], at[which] = block(b, which, g.name, j), hops
                continue
            share = block(b, which, g.name + "'", j)
            moved = acc[which]
            for _ in range(at[which] - hops):  # Horner's rule: the sum so far moves on to this share
                moved = shift(
                    moved,
                    f"the {g.name} accumulator travels with the K, V blocks (the transposes' Shift_{{{axis},-1}}"
                    f" as Shift_{{{axis},+1}}: Shift_{{{axis},+{n}}} = 1)",
                )
            acc[which], at[which] = (
                add(moved, share, g.name, f"block {j + 1}'s share added as the accumulator passes it"),
                hops,
            )
    for which, g in (("dk", dk), ("dv", dv)):
        total = home.get(which)
        if which in acc:
            back = acc[which]
            for _ in range(at[which]):
                back = shift(
                    back, f"the {g.name} accumulator's last hop home (the transposes' shifts, summed)"
                )
            total = (
                back if total is None else add(total, back, g.name, f"{g.name}: the home block's share added")
            )
        assert total is not None and total.name == g.name
    note = (
        f"{RECORDS[Op.ATTEND].transpose.note}; ring backward: K and V made again round {axis} by {2 * (n - 1)} Shift_{{{axis},+1}}, dK and dV "
        f"accumulated as they travel with them ({2 * (n - 1)} more, the transposes' Shift_{{{axis},-1}} "
        f"rewritten by Shift_{{{axis},+{n}}} = 1); each block's backward from O's row statistics"
    )
    if core.causal:
        note += f"; {CAUSAL_NOTE}"
    inputs = (core.q, core.k, core.v, out, do)
    return Plan(inputs, tuple(steps), steps[-1].output, note=note)


def named_apart(ring: Plan) -> Plan:
    """The forward ring with each shifted K, V block named apart (K', K'', ...): run before its backward in one
    flow (an export), the home K and V the backward starts from are kept (a flow names values by value)."""
    renamed: dict[int, Tensor] = {}
    count: dict[str, int] = {}
    steps = []
    for s in ring.steps:
        ins = tuple(renamed.get(id(t), t) for t in s.inputs)
        out = s.output
        if s.op is Op.SHIFT:
            count[out.name or ""] = count.get(out.name or "", 0) + 1
            out = replace(out, name=f"{out.name}{chr(39) * count[out.name or '']}")
        renamed[id(s.output)] = out
        steps.append(replace(s, inputs=ins, output=out))
    return replace(ring, steps=tuple(steps), output=steps[-1].output)
