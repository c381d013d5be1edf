"""A MoE layer's routing, top-k with a capacity: ``dispatch`` and ``combine``, one record each, and the rule they
share (issue 28, item 5).

    dispatch_{C,k,cf}: H[T_A, D] · G[T_A, E] -> H[E, C_A, D]     each token to the slots of its top-k experts
    combine_{C,k,cf}:  Y[E, C_A, F] · G[T_A, E] -> O[T_A, F]     each token's k slots back, weighted by its gates
    on A=2, T=4 tokens t0..t3, E=2 experts, k=1, cf=1 (C = cf·k·T/E = 2 slots an expert, 1 a device):
        a=0: t0 -> e1, t1 -> e0   dispatch ->  a=0: [e0: t1 | e1: t0]        a=1: [e0: t3 | e1: t2]
        a=1: t2 -> e1, t3 -> e0   then AllToAll_{A,E} -> a=0: expert e0's slots [t1, t3], a=1: e1's [t0, t2]

G holds the router's logits (its last dim the experts, the dims before it the tokens: G[B, T, E] routes the
B·T tokens of H[B, T, D], a device's block of them in row-major order); a token's experts are the k largest
(ties to the lower index), its gates the softmax of those k logits. The capacity is C = cf·k·T/E slots an expert, a whole number (each expert holds cf
times its even share of the T·k choices); the devices that shard T each fill their own share C/|A| of every
expert's slots (GShard's groups): the top-1 choices first, then the top-2 and on, in token order, and a choice
past its expert's share is dropped (its gate lost). The routing itself is local (no bytes): expert parallelism
is the AllToAll_{A,E} that follows dispatch (to ``H[E_A, C, D]``, each device its experts' slots) and the
AllToAll_{A,C} before combine, each moving the group's [E, C, D] buffer, cf·k·T·D elements (DESIGN.md
section 5: AllToAll's V/4 over a bidirectional ring). Backward: combine is dispatch's transpose (the slots'
cotangents back to their tokens), dispatch combine's (the cotangent to the slots); the gates' gradient flows
through combine's G.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from shardalg.errors import IllegalOperand
from shardalg.notation.syntax import Apply, Arrow, Dim, Op, Tensor

from ..layout import Axes, Layout, subscript, tensor_with, validate
from ..mesh import Mesh
from ..registry import RECORDS as BY_OP
from .function import FunctionRecord, Kind, function_record, np

__all__ = [
    "RouteRecord",
    "Roles",
    "DISPATCH",
    "COMBINE",
    "RECORDS",
    "capacity",
    "capacity_of",
    "capacity_dims",
    "derived_capacities",
    "top_k",
    "slots",
]


def capacity(tokens: Any, experts: Any, k: Any, cf: Any) -> Any:
    """C = cf·k·T/E: each expert's slots (ints and Fractions give a Fraction, sympy symbols an expression)."""
    return cf * k * tokens / experts


@dataclass(frozen=True, kw_only=True)
class RouteRecord(FunctionRecord):
    """A routing's record: two operands (the tokens or the experts' slots, and the router's logits)."""

    def apply(
        self,
        operands: Sequence[Tensor],
        dim: str | None,
        mesh: Mesh,
        axes: Axes = (),
        name: str | None = None,
        flags: tuple[str, ...] = (),
    ) -> Tensor:
        for t in operands:
            validate(t, mesh)
        if tuple(axes):
            raise IllegalOperand(f"{self.op.value} routes on each device: it names no axes")
        out = self.result(operands, dim)
        return Tensor(name, out.dims, (), (), out.dtype)

    def compute_layouts(self, operands: Sequence[Tensor]) -> Iterator[tuple[Tensor, ...]]:
        """The operands' layouts a step of it may read (the planner reshards to each): as they are; the
        router's expert dim whole; the tokens of the data sharded as the router's, or the router's as the
        data's, or whole (the tokens' sharding is the routing's groups); for combine, the slots with the
        expert dim whole and the capacity dim sharded over the router's token axes (expert parallelism's
        AllToAll back)."""
        yield tuple(operands)
        data, g = operands
        if len(g.dims) < 2:
            return
        n = len(g.dims) - 1
        g_tokens = tuple(d.axes for d in g.dims[:-1])
        routers = [_laid(g, (*g_tokens, ()))]
        if self.op is Op.DISPATCH and len(data.dims) > n:
            d_tokens = tuple(d.axes for d in data.dims[:n])
            routers.append(_laid(g, (*d_tokens, ())))
            routers.append(_laid(g, (*((),) * n, ())))
            for r in routers:
                tokens = tuple(d.axes for d in r.dims[:-1])
                used = {a for axes in tokens for a in axes}
                rest = tuple(tuple(a for a in d.axes if a not in used) for d in data.dims[n:])
                yield (_laid(data, (*tokens, *rest)), r)
        elif self.op is Op.COMBINE and len(data.dims) >= 3:
            routers.append(_laid(g, (*((),) * n, ())))
            for r in routers:
                groups = tuple(a for d in r.dims[:-1] for a in d.axes)
                rest = tuple(tuple(a for a in d.axes if a not in groups) for d in data.dims[2:])
                yield (_laid(data, ((), groups, *rest)), r)

    def roles(self, operands: Sequence[Tensor], dim: str | None) -> Roles:
        """The token dims, the expert dim and the capacity dim of a step of it, or IllegalOperand."""
        fn = self.op.value
        if len(operands) != 2:
            raise IllegalOperand(f"{fn} takes 2 operands (its data and the router's logits G[T, E])")
        data, g = operands
        if dim is None:
            raise IllegalOperand(f"{fn} names the capacity dim")
        for t in operands:
            if t.unreduced:
                raise IllegalOperand(
                    f"{t} is unreduced: a routing is not linear in it",
                    fix=f"AllReduce_{subscript(tuple(t.unreduced))}({t}) first",
                    span=t.span,
                )
        if len(g.dims) < 2:
            raise IllegalOperand(
                f"the router's logits are G[T, E] (tokens, then experts), not {g}", span=g.span
            )
        tokens, expert = g.dim_names[:-1], g.dim_names[-1]
        n = len(tokens)
        if self.op is Op.DISPATCH:
            if data.dim_names[:n] != tokens or len(data.dims) <= n:
                raise IllegalOperand(
                    f"dispatch routes the tokens of {data}: its first dims are G's token dims "
                    f"({', '.join(tokens)}), then its features",
                    span=data.span,
                )
            if dim in data.dim_names or dim == expert:
                raise IllegalOperand(f"dispatch's new capacity dim {dim} is a dim already", span=data.span)
            mine = tuple(data.axes_of(d) for d in tokens)
            what = f"the tokens {', '.join(tokens)} of {data} are"
        else:
            if data.dim_names[:2] != (expert, dim) or len(data.dims) < 3:
                raise IllegalOperand(
                    f"combine_{{{dim},..}} takes the experts' slots [{expert}, {dim}, ..] (G's expert dim, then "
                    f"the capacity dim), not {data}",
                    span=data.span,
                )
            if data.axes_of(expert):
                raise IllegalOperand(
                    f"combine takes each device's own tokens' slots of every expert: {expert} whole, "
                    f"{dim} sharded as G's tokens (not {expert}_{subscript(data.axes_of(expert))})",
                    fix=f"AllToAll_{{{subscript(data.axes_of(expert))},{dim}}}({data}) first",
                    span=data.span,
                )
            mine = (data.axes_of(dim),)
            what = f"the slots {dim} of {data} are"
        if g.axes_of(expert):
            raise IllegalOperand(
                f"each device routes its tokens among all the experts: G's expert dim {expert} is whole, "
                f"not {expert}_{subscript(g.axes_of(expert))}",
                fix=f"AllGather_{subscript(g.axes_of(expert))}({g}) first",
                span=g.span,
            )
        groups = tuple(a for d in tokens for a in g.axes_of(d))
        if self.op is Op.DISPATCH:
            same = mine == tuple(g.axes_of(d) for d in tokens)
        else:
            same = mine == (groups,)
        if not same:
            got = subscript(tuple(a for m in mine for a in m)) or "whole"
            raise IllegalOperand(
                f"a device routes the tokens it holds with their logits: {what} sharded as G's "
                f"{', '.join(tokens)} ({subscript(groups) or 'whole'}), not {got}",
                span=data.span,
            )
        return Roles(tokens, expert, dim, groups)

    def result(self, operands: Sequence[Tensor], dim: str | None, flags: tuple[str, ...] = ()) -> Tensor:
        data, g = operands
        r = self.roles(operands, dim)
        if self.op is Op.DISPATCH:
            dims = (g.dims[-1].with_axes(()), Dim(r.capacity, r.groups), *data.dims[len(r.tokens) :])
        else:
            dims = (*g.dims[:-1], *data.dims[2:])
        return Tensor(None, dims, (), (), data.dtype)

    def check_sizes(
        self, operands: Sequence[Tensor], dim: str | None, k: int, cf: Fraction, sizes: Mapping[str, int]
    ) -> None:
        """IllegalOperand unless k <= E and the capacity dim's size, where bound, is cf·k·T/E."""
        data, g = operands
        r = self.roles(operands, dim)
        size = {d.label: (d.size if d.size is not None else sizes.get(d.label)) for d in g.dims}
        n_exp, bound = size[r.expert], sizes.get(r.capacity)
        if n_exp is not None and k > n_exp:
            raise IllegalOperand(
                f"k={k}: a token goes to at most the {n_exp} experts of {r.expert}", span=g.span
            )
        want = capacity_of(r, g, k, cf, sizes)
        if want is None:
            return
        tok = "·".join(r.tokens)
        said = f"cf·k·{tok}/{r.expert} = {float(cf):g}·{k}·{_tokens(r, g, sizes)}/{n_exp}"
        if want.denominator != 1:
            raise IllegalOperand(
                f"the capacity {said} = {float(want):g} is not a whole number of slots",
                fix=f"choose cf or the tokens so that cf·k·{tok}/{r.expert} is whole",
                span=g.span,
            )
        if bound is None:
            raise IllegalOperand(
                f"the capacity {r.capacity} = {said} = {want} slots an expert: bind it ({r.capacity}={want})",
                span=data.span,
            )
        if bound != want:
            raise IllegalOperand(
                f"the capacity {r.capacity} is {said} = {want} slots an expert, not {bound}",
                fix=f"bind {r.capacity}={want}",
                span=data.span,
            )


def _laid(t: Tensor, axes: tuple[Axes, ...]) -> Tensor:
    """``t`` with each dim sharded over ``axes`` (one entry a dim), no partial sums."""
    return tensor_with(t, Layout(axes, (), ()))


@dataclass(frozen=True)
class Roles:
    """What each dim of a routing step is: the token dims (G's but its last), the expert dim (G's last), the
    capacity dim and the axes that shard the tokens (the groups, in order: the capacity dim's sharding)."""

    tokens: tuple[str, ...]
    expert: str
    capacity: str
    groups: Axes


def _tokens(r: Roles, g: Tensor, sizes: Mapping[str, int]) -> int | None:
    total = 1
    for d in g.dims[:-1]:
        n = d.size if d.size is not None else sizes.get(d.label)
        if n is None:
            return None
        total *= n
    return total


def capacity_of(r: Roles, g: Tensor, k: int, cf: Fraction, sizes: Mapping[str, int]) -> Fraction | None:
    """The capacity cf·k·T/E of a routing step (T the product of its token dims), None while a size is unknown."""
    last = g.dims[-1]
    n_exp = last.size if last.size is not None else sizes.get(last.label)
    n_tok = _tokens(r, g, sizes)
    return None if n_tok is None or n_exp is None else capacity(Fraction(n_tok), n_exp, k, cf)


def capacity_dims(statements: Sequence[object]) -> frozenset[str]:
    """The capacity dims of a program's routings (each derived from its tokens, k and cf)."""
    out = set()
    for stmt in statements:
        call = stmt.expr if isinstance(stmt, Arrow) else stmt
        if isinstance(call, Apply) and isinstance(BY_OP.get(call.op), RouteRecord) and call.dim is not None:
            out.add(call.dim)
    return frozenset(out)


def derived_capacities(statements: Sequence[object], sizes: Mapping[str, int]) -> dict[str, tuple[int, str]]:
    """The capacity dims of a program's routings that ``sizes`` leaves unbound but whose tokens and experts it
    binds: each dim's cf·k·T/E (a whole number) and the line that says how it was derived."""
    out: dict[str, tuple[int, str]] = {}
    for stmt in statements:
        call = stmt.expr if isinstance(stmt, Arrow) else stmt
        if not isinstance(call, Apply) or not isinstance(BY_OP.get(call.op), RouteRecord):
            continue
        if not all(isinstance(x, Tensor) for x in call.operands) or call.dim in sizes or call.dim in out:
            continue
        whole = [tensor_with(t, Layout(tuple(() for _ in t.dims), (), ())) for t in call.operands]  # type: ignore[union-attr]
        try:
            r = BY_OP[call.op].roles(whole, call.dim)
        except IllegalOperand:
            continue  # the rule refuses it where the statement is planned
        g = whole[1]
        k, cf = call.offset or 0, call.factor or Fraction(0)
        want = capacity_of(r, g, k, cf, sizes)
        if want is None or want.denominator != 1:
            continue
        said = (
            f"{r.capacity} = cf·k·{'·'.join(r.tokens)}/{r.expert} = {float(cf):g}·{k}·{_tokens(r, g, sizes)}/"
            f"{sizes.get(r.expert, g.dims[-1].size)} = {want} slots an expert (derived from {call.op.value}'s k "
            "and cf)"
        )
        out[call.dim] = (int(want), said)  # type: ignore[index]
    return out


# ---------------------------------------------------------------- the routing on numbers


def top_k(logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's k experts (largest logit first, ties to the lower index) and their gates (the softmax of the
    k logits): two [T, k] arrays."""
    order = np.argsort(-logits, axis=-1, kind="stable")[..., :k]
    chosen = np.take_along_axis(logits, order, axis=-1)
    w = np.exp(chosen - chosen.max(axis=-1, keepdims=True))
    return order, w / w.sum(axis=-1, keepdims=True)


def slots(experts: np.ndarray, n_experts: int, share: int) -> np.ndarray:
    """Each (token, choice)'s slot in its expert's share of ``share`` slots (-1: dropped): the top-1 choices
    first, then the top-2, each in token order."""
    filled = [0] * n_experts
    out = np.full(experts.shape, -1, dtype=np.int64)
    for j in range(experts.shape[1]):
        for t in range(experts.shape[0]):
            e = int(experts[t, j])
            if filled[e] < share:
                out[t, j], filled[e] = filled[e], filled[e] + 1
    return out


def dispatch_block(h: np.ndarray, logits: np.ndarray, k: int, share: int) -> np.ndarray:
    """One group's dispatch: [T, ..] tokens into [E, share, ..] slots (zeros where no token is)."""
    experts, _ = top_k(logits, k)
    where = slots(experts, logits.shape[-1], share)
    out = np.zeros((logits.shape[-1], share, *h.shape[1:]), dtype=np.result_type(h, np.float64))
    for t, j in zip(*np.nonzero(where >= 0), strict=True):
        out[experts[t, j], where[t, j]] = h[t]
    return out


def combine_block(y: np.ndarray, logits: np.ndarray, k: int) -> np.ndarray:
    """One group's combine: [E, share, ..] slots back into [T, ..] tokens, each its kept choices' gated sum."""
    experts, gates = top_k(logits, k)
    where = slots(experts, logits.shape[-1], y.shape[1])
    out = np.zeros((logits.shape[0], *y.shape[2:]), dtype=np.result_type(y, np.float64))
    for t, j in zip(*np.nonzero(where >= 0), strict=True):
        out[t] += gates[t, j] * y[experts[t, j], where[t, j]]
    return out


def _unused_dense(xs: Sequence[np.ndarray], axis: int | None, c: Fraction | None) -> np.ndarray:
    raise AssertionError("a routing's dense meaning needs its groups: shardalg.numeric.routing")


DISPATCH, COMBINE = (
    function_record(
        op,
        doc,
        arity=2,
        shape=Kind.ROUTE,
        dense=_unused_dense,  # never read: the executor's routing (numeric.routing) has the groups
        transpose_note=note,
        kind=RouteRecord,
    )
    for op, doc, note in (
        (
            Op.DISPATCH,
            __doc__.split("\n\n")[1].strip(),
            "combine is dispatch's transpose: each slot's cotangent back to its token (ungated)",
        ),
        (
            Op.COMBINE,
            "combine_{C,k,cf}: Y[E, C_A, F] · G[T_A, E] -> O[T_A, F]   each token's kept slots, gated and summed"
            "\n    the inverse of dispatch_{C,k,cf}(H[T_A, D], G[T_A, E]); backward: dispatch of the cotangent, "
            "gated",
            "dispatch is combine's transpose: the cotangent to each token's slots, times its gate",
        ),
    )
)
RECORDS = (DISPATCH, COMBINE)
