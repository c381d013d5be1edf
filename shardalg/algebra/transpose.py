"""The local view of the backward pass: the transpose of an explicit collective on sharding types.

An explicit collective in a per-device program (shard_map, a hand-written Megatron layer) is a linear
operator on the stacked per-device buffers; its backward is its transpose. On sharding types the transpose
maps the forward's output cotangent to its input cotangent, where the cotangent of a type swaps ``R`` and
``U`` and keeps ``S(d)`` and ``I`` (DESIGN.md section 4)::

    >>> fsdp = Step(Op.ALL_GATHER, (Tensor("W", (Dim("D", ("X",)), Dim("F"))),), Tensor("W", (Dim("D"), Dim("F"))), ("X",))
    >>> [str(s) for s in transpose(fsdp, Mesh(X=4))]
    ['ReduceScatter_{X,D}(W[D, F]{U_X}) -> W[D_X, F]']

Two transposes have no op in the notation, because they communicate nothing: ``pvary`` (an invariant value
used as replicated, ``I -> R``: the transpose of an AllReduce to ``I``, JAX's ``pvary``) and ``pad`` (each
device zero-pads its block into the full dim, ``S(d) -> U``: the transpose of a Slice). They are
:class:`Cast` values; a :class:`LocalStep` holds either an :class:`~shardalg.notation.syntax.Op` or a Cast.

The table :data:`TRANSPOSES` is keyed per mesh axis by (forward op, input placement, output placement);
it is an involution (transposing twice gives the forward op back), which a test checks entry by entry.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from shardalg.errors import IllegalCollective, UsageError
from shardalg.notation.plan import Step
from shardalg.notation.printing import text
from shardalg.notation.printing.display import short
from shardalg.notation.syntax import Arrow, Collective, Op, Tensor

from .mesh import Mesh, as_mesh
from .ops import RULES
from .ops.record import Kind
from .registry import RECORDS

__all__ = [
    "Kind",
    "Cast",
    "LocalStep",
    "TRANSPOSES",
    "COTANGENT",
    "placement",
    "cotangent",
    "transpose",
    "local_steps",
]


# The cotangent of each placement (DESIGN.md section 4): swap R and U, keep S(d) and I.
COTANGENT: dict[Kind, Kind] = {Kind.S: Kind.S, Kind.R: Kind.U, Kind.U: Kind.R, Kind.I: Kind.I}


class Cast(enum.Enum):
    """Free changes of type with no op in the notation: they appear only as transposes."""

    PVARY = "pvary"  # I -> R: use an invariant value as replicated (no data moves)
    PAD = "pad"  # S(d) -> U: each device zero-pads its block of d into the full dim

    def __repr__(self) -> str:
        return f"Cast.{self.name}"


AnyOp = Op | Cast

# ---- the table: per axis, (forward op, in, out) -> backward op -------------------------------------
# The backward op runs from cot(out) to cot(in) on the same axes. The lines of the rules themselves come
# from their records in :data:`shardalg.algebra.ops.RULES` (what each does per axis, ``kinds``, and its
# Transpose; a Transpose with no op is the zero-pad);
# the lines for invariant values and for the two casts are added here, as data (DESIGN.md section 4).


def _rule_lines() -> dict[tuple[AnyOp, Kind, Kind], AnyOp]:
    """A line per operation whose record gives what it does on each axis it names (``kinds``)."""
    lines: dict[tuple[AnyOp, Kind, Kind], AnyOp] = {}
    for op, rec in RULES.items():
        if rec.kinds is not None:
            back = rec.transpose.op
            lines[(op, *rec.kinds)] = Cast.PAD if back is None else back
    return lines


_INVARIANT_LINES: dict[tuple[AnyOp, Kind, Kind], AnyOp] = {
    # AllReduce to an invariant value (psum): its cotangent is invariant already; I -> R costs nothing
    (Op.ALL_REDUCE, Kind.U, Kind.I): Cast.PVARY,
    # an invariant value used as replicated (Megatron's copy-to-region f): AllReduce in backward, U -> I
    (Cast.PVARY, Kind.I, Kind.R): Op.ALL_REDUCE,
    # AllGather to an invariant value: its backward is a local slice of the invariant cotangent
    (Op.ALL_GATHER, Kind.S, Kind.I): Op.SLICE,
    # ... and a slice of an invariant value transposes to the AllGather to an invariant value
    (Op.SLICE, Kind.I, Kind.S): Op.ALL_GATHER,
    # the zero-pad (the transpose of a Slice of a replicated value) transposes back to that Slice
    (Cast.PAD, Kind.S, Kind.U): Op.SLICE,
}

TRANSPOSES: dict[tuple[AnyOp, Kind, Kind], AnyOp] = {**_rule_lines(), **_INVARIANT_LINES}
# Permute_{X,Y} (swap the names X and Y) is a permutation of whole shards; its transpose is its inverse,
# which is Permute_{X,Y} again from the cotangent of the output. Shift_{X,k} (device x sends to x + k) is a
# cyclic permutation of the devices along X; its transpose is the inverse shift, Shift_{X,-k} (JAX's
# ppermute transposes to the inverse permutation). Both are handled whole, not per axis.


# Which dim a backward op targets: an op whose subscript names a dim (ReduceScatter, Slice, AllToAll) the
# dim the forward input held the axes in; the zero-pad the dim the forward output put them in.
def _takes_dim(back: AnyOp) -> str:
    if isinstance(back, Op):
        return "input" if back.takes_dim else ""
    return "output" if back is Cast.PAD else ""


# Casts that can be written as one step over several axes (an op's record says whether it fuses).
_FUSES: frozenset[Cast] = frozenset({Cast.PVARY})


def _fuses(op: AnyOp) -> bool:
    return RECORDS[op].fuses if isinstance(op, Op) else op in _FUSES


def placement(t: Tensor, axis: str) -> tuple[Kind, str | None]:
    """What ``t`` is along mesh ``axis``: (S, dim) or (R | U | I, None)."""
    for d in t.dims:
        if axis in d.axes:
            return Kind.S, d.label
    if axis in t.unreduced:
        return Kind.U, None
    if axis in t.invariant:
        return Kind.I, None
    return Kind.R, None


def cotangent(t: Tensor, mesh: Mesh) -> Tensor:
    """The type of the gradient of ``t`` in the local view: R and U swapped, S(d) and I kept."""
    unused = tuple(a for a in mesh.names if placement(t, a)[0] is Kind.R)
    return replace(t, unreduced=unused)


@dataclass(frozen=True)
class LocalStep:
    """One step of a per-device program: a collective (an :class:`Op`) or a free :class:`Cast`."""

    op: AnyOp
    input: Tensor
    output: Tensor
    axes: tuple[str, ...]
    dim: str | None = None
    reason: str = field(default="", compare=False)
    offset: int | None = None  # a Shift's signed step

    @property
    def communicates(self) -> bool:
        return isinstance(self.op, Op) and RECORDS[self.op].communicates

    def step(self) -> Step:
        """The step as a plan :class:`Step`. A zero-pad is the executor's Slice read backwards (its axes
        leave a dim and become unreduced); pvary moves no data and has no Step (a UsageError)."""
        if self.op is Cast.PVARY:
            raise UsageError("pvary is a free cast with no op in the notation: the buffers are unchanged")
        op = Op.SLICE if self.op is Cast.PAD else self.op
        return Step(
            op, (self.input,), self.output, self.axes, self.dim, reason=self.reason, offset=self.offset
        )  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return short("LocalStep", str(self))

    def __str__(self) -> str:
        if isinstance(self.op, Op):
            return text(self.step().statement())
        if self.op is Cast.PAD:
            sub = ",".join(self.axes) + f",{self.dim}"
            return f"ZeroPad_{{{sub}}}({text(self.input)}) -> {text(self.output)}"
        sub = ",".join(self.axes) + (f",{self.dim}" if self.dim else "")
        return f"{self.op.value}_{{{sub}}}({text(self.input)}) -> {text(self.output)}"


def local_steps(x: Step | LocalStep | Arrow | Sequence[Step | LocalStep | Arrow]) -> tuple[LocalStep, ...]:
    """Steps, collective statements (``AllGather_X: W[D_X, F] -> W[D, F]``) or local steps as LocalSteps."""
    if isinstance(x, (Step, LocalStep, Arrow)):
        items: Iterable[Step | LocalStep | Arrow] = (x,)
    elif isinstance(x, Sequence):
        items = x
    else:
        raise UsageError(f"transpose takes a Step, a collective statement or a sequence of them, not {x!r}")
    out: list[LocalStep] = []
    for s in items:
        if isinstance(s, LocalStep):
            out.append(s)
        elif isinstance(s, Step):
            if s.op is Op.EINSUM:
                raise UsageError(
                    "a local einsum has two transposes (one per operand): use shardalg.planning.backward"
                )
            out.append(LocalStep(s.op, s.inputs[0], s.output, s.axes, s.dim, s.reason, s.offset))
        elif isinstance(s, Arrow) and isinstance(s.expr, Collective) and isinstance(s.expr.arg, Tensor):
            c = s.expr
            out.append(LocalStep(c.op, c.arg, s.result, c.axes, c.dim, offset=c.offset))
        else:
            raise UsageError(f"not an explicit collective with its result: {s!r}")
    return tuple(out)


def _groups(s: LocalStep) -> list[tuple[tuple[str, ...], Kind, Kind, str | None, str | None]]:
    """The step's axes grouped by (input placement, output placement): (axes, in, out, in dim, out dim)."""
    groups: dict[tuple[Kind, Kind, str | None, str | None], list[str]] = {}
    for a in dict.fromkeys(s.axes):
        k_in, d_in = placement(s.input, a)
        k_out, d_out = placement(s.output, a)
        groups.setdefault((k_in, k_out, d_in, d_out), []).append(a)
    return [(tuple(axes), k_in, k_out, d_in, d_out) for (k_in, k_out, d_in, d_out), axes in groups.items()]


def _set(t: Tensor, axes: tuple[str, ...], kind: Kind, dim: str | None) -> Tensor:
    """``t`` with ``axes`` moved to placement ``kind`` (appended minor-most to ``dim`` for S)."""
    t = replace(
        t,
        dims=tuple(d.with_axes(tuple(a for a in d.axes if a not in axes)) for d in t.dims),
        unreduced=tuple(a for a in t.unreduced if a not in axes),
        invariant=tuple(a for a in t.invariant if a not in axes),
    )
    if kind is Kind.S and dim is not None:
        return t.with_axes(dim, t.axes_of(dim) + axes)
    if kind is Kind.U:
        return replace(t, unreduced=t.unreduced + axes)
    if kind is Kind.I:
        return replace(t, invariant=t.invariant + axes)
    return t


_CAST_REASONS: dict[Cast, str] = {
    Cast.PVARY: "the invariant gradient is used as replicated (no communication)",
    Cast.PAD: "each device zero-pads its block into an unreduced gradient (no communication)",
}


def _reason(op: AnyOp, fwd: LocalStep) -> str:
    name = fwd.op.value
    sub = "".join(fwd.axes) if fwd.offset is None else f"{{{','.join(fwd.axes)},{fwd.offset:+d}}}"
    why = RECORDS[op].as_transpose if isinstance(op, Op) else _CAST_REASONS[op]
    return f"transpose of {name}_{sub}: {why}"


def _transpose_one(s: LocalStep, mesh: Mesh) -> list[LocalStep]:
    start, end = cotangent(s.output, mesh), cotangent(s.input, mesh)
    rec = RULES.get(s.op) if isinstance(s.op, Op) else None
    if rec is not None and rec.kinds is None and rec.transpose.op is not None:  # transposed whole
        back = rec.transpose.op
        offset = None if s.offset is None else -s.offset
        axes = s.axes[::-1] if rec.transpose.reverse_axes and len(s.axes) > 2 else s.axes
        return [LocalStep(back, start, end, axes, None, _reason(back, s), offset)]
    out: list[LocalStep] = []
    cur = start
    groups = _groups(s)
    for i, (axes, k_in, k_out, d_in, d_out) in enumerate(reversed(groups)):
        try:
            back = TRANSPOSES[(s.op, k_in, k_out)]
        except KeyError:
            raise IllegalCollective(
                f"{s.op.value}_{''.join(axes)} takes {s.input} to {s.output}: {k_in.value} -> {k_out.value} "
                f"on {', '.join(axes)} is not what {s.op.value} does, so it has no transpose"
            ) from None
        dim = {"input": d_in, "output": d_out}.get(_takes_dim(back))
        if k_in is Kind.S and d_in is not None:  # back onto the dim they came from, in their order there
            axes = tuple([a for a in s.input.axes_of(d_in) if a in axes])
        nxt = end if i == len(groups) - 1 else _set(cur, axes, COTANGENT[k_in], d_in)
        out.append(LocalStep(back, cur, nxt, axes, dim, _reason(back, s)))
        cur = nxt
    return out


def _axis_order(t: Tensor, mesh: Mesh) -> dict[str, int]:
    """Canonical order of axes in a fused step: as they shard ``t`` (dim order, major first), then mesh order."""
    order = list(t.sharded_axes) + [a for a in mesh.names if a not in t.sharded_axes]
    return {a: i for i, a in enumerate(order)}


def _fuse(steps: list[LocalStep], mesh: Mesh) -> list[LocalStep]:
    """Merge consecutive steps of one fusable op that chain (``AllGather_X`` then ``AllGather_Y`` on the
    result is ``AllGather_XY``), so a multi-dim collective transposes back to itself."""
    out: list[LocalStep] = []
    for s in steps:
        prev = out[-1] if out else None
        if prev is not None and prev.op is s.op and _fuses(s.op) and prev.output == s.input:
            order = _axis_order(prev.input, mesh)
            axes = tuple(sorted(prev.axes + s.axes, key=lambda a: order[a]))
            out[-1] = LocalStep(s.op, prev.input, s.output, axes, None, prev.reason)
        else:
            out.append(s)
    return out


def transpose(
    x: Step | LocalStep | Arrow | Sequence[Step | LocalStep | Arrow], mesh: Mesh | str | dict | None = None
) -> tuple[LocalStep, ...]:
    """The backward of explicit collectives: for steps ``s1 … sn`` (each from its input to its output),
    the local steps that take the cotangent of ``sn``'s output to the cotangent of ``s1``'s input.

    ``mesh`` is needed to know the replicated axes (they become unreduced in the cotangent); without it,
    the axes the steps mention are taken as the mesh.
    """
    steps = local_steps(x)
    m = as_mesh(mesh)
    if m is None:
        names: dict[str, None] = {}
        for s in steps:
            for t in (s.input, s.output):
                names.update(dict.fromkeys(t.used_axes))
            names.update(dict.fromkeys(s.axes))
        m = Mesh(dict.fromkeys(names, None))
    out: list[LocalStep] = []
    for s in reversed(steps):
        out.extend(_transpose_one(s, m))
    return tuple(_fuse(out, m))
