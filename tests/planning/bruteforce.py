"""A brute-force planner for the property tests: every short sequence of rules, slow and simple.

It knows nothing of the planner (:mod:`shardalg.planning`): it applies the rule table
(:data:`shardalg.algebra.ops.RULES`: each rule's moves and effect), the local einsum typing of
:mod:`shardalg.algebra.einsum`, and counts bytes with :func:`shardalg.algebra.traffic.move_bytes`. A plan of
``A · B -> C`` is a sequence of moves on ``A``, one on ``B``, their local product, and a sequence on the
product that ends in ``C``'s layout; each sequence is at most ``prep`` (operands) or ``finish`` (product)
moves long.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from itertools import product

from shardalg.algebra.einsum import Spec, local_output_or_none
from shardalg.algebra.layout import Layout, tensor_with
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.ops import RULES
from shardalg.algebra.traffic import Sizes, move_bytes
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Op, Tensor

Key = tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]
Move = tuple[Op, tuple[str, ...], int | None, Key]  # op, axes, dim index, the layout it leads to
Cheapest = dict[Key, tuple[int, tuple[Move, ...]]]  # bytes x 4


def key(t: Tensor) -> Key:
    return tuple(d.axes for d in t.dims), t.unreduced


class Brute:
    """Short sequences of rules from the tensors of one einsum on one mesh, with their bytes."""

    def __init__(self, mesh: Mesh, sizes: Sizes):
        self.mesh, self.sizes = mesh, sizes
        self._moves: dict[tuple[int, Key], tuple[Move, ...]] = {}
        self._bytes: dict[tuple[int, Op, tuple[str, ...], Key, Key], int] = {}
        self._protos: dict[Tensor, Tensor] = {}

    def moves(self, proto: Tensor, k: Key) -> tuple[Move, ...]:
        """Every single rule application from layout ``k`` whose result divides."""
        got = self._moves.get((id(proto), k))
        if got is None:
            got = self._moves[(id(proto), k)] = self._new_moves(proto, k)
        return got

    def bytes(self, proto: Tensor, op: Op, axes: tuple[str, ...], before: Key, after: Key) -> int:
        """A move's bytes, times 4 (a whole number: AllToAll counts a quarter)."""
        memo = (id(proto), op, axes, before, after)
        got = self._bytes.get(memo)
        if got is None:
            moved = move_bytes(
                op, axes, proto, before[0], after[0], self.mesh, self.sizes, unreduced=before[1]
            )
            exact = 4 * moved.number
            assert exact.denominator == 1
            got = self._bytes[memo] = int(exact)
        return got

    def _new_moves(self, proto: Tensor, k: Key) -> tuple[Move, ...]:
        lay = Layout(k[0], k[1], ())
        out = []
        for op, rule in RULES.items():
            for axes, dim in rule.moves(lay, self.mesh):
                nxt = rule.effect(lay, axes, dim)
                if self.sizes.check_divisible(proto, self.mesh, nxt.dims):
                    out.append((op, axes, dim, (nxt.dims, nxt.unreduced)))
        return tuple(out)

    def cheapest(self, t: Tensor, depth: int) -> Cheapest:
        """The cheapest sequence (bytes) of at most ``depth`` moves to each layout ``t`` can reach."""
        proto = self.proto(t)
        best: Cheapest = {key(t): (0, ())}
        frontier: list[tuple[int, Key, tuple[Move, ...]]] = [(0, key(t), ())]
        for _ in range(depth):
            nxt = []
            for c, k, path in frontier:
                for m in self.moves(proto, k):
                    total = c + self.bytes(proto, m[0], m[1], k, m[3])
                    if m[3] not in best or total < best[m[3]][0]:
                        best[m[3]] = (total, path + (m,))
                        nxt.append((total, m[3], path + (m,)))
            frontier = nxt
        return best

    def proto(self, t: Tensor) -> Tensor:
        """``t`` without sharding: one object per shape, so the memo tables key on its id."""
        bare = tensor_with(t, Layout(tuple(() for _ in t.dims), (), ()))
        return self._protos.setdefault(bare, bare)

    def every(self, t: Tensor, depth: int) -> list[tuple[Move, ...]]:
        """Every sequence of at most ``depth`` moves from ``t``."""
        proto = self.proto(t)
        out: list[tuple[Move, ...]] = [()]
        frontier: list[tuple[Move, ...]] = [()]
        for _ in range(depth):
            frontier = [p + (m,) for p in frontier for m in self.moves(proto, p[-1][3] if p else key(t))]
            out += frontier
        return out


def steps(t: Tensor, moves: tuple[Move, ...]) -> tuple[Step, ...]:
    """The moves as Steps from ``t``."""
    out, cur = [], t
    for op, axes, dim, k in moves:
        nxt = tensor_with(t, Layout(k[0], k[1], ()))
        out.append(Step(op, (cur,), nxt, axes, t.dims[dim].label if dim is not None else None))
        cur = nxt
    return tuple(out)


def _product(left: Tensor, right: Tensor, spec: Spec, mesh: Mesh, name: str) -> Step | None:
    out = local_output_or_none(left, right, spec, mesh, name)
    if out is None:
        return None
    local = bool(set(out.unreduced) - set(left.unreduced) - set(right.unreduced))
    return Step(Op.EINSUM, (left, right), out, local=local)


def _end(t: Tensor, moves: tuple[Move, ...]) -> Tensor:
    return tensor_with(t, Layout(moves[-1][3][0], moves[-1][3][1], ())) if moves else t


def best_bytes(
    left: Tensor, right: Tensor, target: Tensor, mesh: Mesh, sizes: Sizes, prep: int, finish: int
) -> tuple[Fraction, Plan] | None:
    """The fewest bytes of any plan with at most ``prep`` moves per operand and ``finish`` after the
    product, and that plan."""
    brute, spec = Brute(mesh, sizes), Spec.of(left, right, None, target)
    lefts = sorted(brute.cheapest(left, prep).items(), key=lambda x: (x[1][0], x[0]))
    rights = sorted(brute.cheapest(right, prep).items(), key=lambda x: (x[1][0], x[0]))
    ends: dict[Key, Cheapest] = {}
    best: tuple[int, Plan] | None = None
    for _, (lc, lm) in lefts:
        for _, (rc, rm) in rights:
            if best is not None and lc + rc >= best[0]:
                break  # the lists are sorted by bytes
            lt, rt = _end(left, lm), _end(right, rm)
            mul = _product(lt, rt, spec, mesh, target.name or "C")
            if mul is None:
                continue
            out = mul.output
            if key(out) not in ends:
                ends[key(out)] = brute.cheapest(out, finish)
            end = ends[key(out)].get(key(target))
            if end is not None and (best is None or lc + rc + end[0] < best[0]):
                plan_steps = steps(left, lm) + steps(right, rm) + (mul,) + steps(out, end[1])
                best = (lc + rc + end[0], Plan((left, right), plan_steps, plan_steps[-1].output))
    return None if best is None else (Fraction(best[0], 4), best[1])


def plans(
    left: Tensor, right: Tensor, target: Tensor, mesh: Mesh, sizes: Sizes, prep: int, finish: int
) -> Iterator[Plan]:
    """Every plan with at most ``prep`` moves per operand and ``finish`` after the product."""
    brute, spec = Brute(mesh, sizes), Spec.of(left, right, None, target)
    finishes: dict[Key, list[tuple[Move, ...]]] = {}
    for lm, rm in product(brute.every(left, prep), brute.every(right, prep)):
        lt, rt = _end(left, lm), _end(right, rm)
        mul = _product(lt, rt, spec, mesh, target.name or "C")
        if mul is None:
            continue
        out = mul.output
        if key(out) not in finishes:
            finishes[key(out)] = [
                f for f in brute.every(out, finish) if (f[-1][3] if f else key(out)) == key(target)
            ]
        for f in finishes[key(out)]:
            plan_steps = steps(left, lm) + steps(right, rm) + (mul,) + steps(out, f)
            yield Plan((left, right), plan_steps, plan_steps[-1].output)
