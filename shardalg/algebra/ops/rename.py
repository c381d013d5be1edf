"""rename_{T,S}: [.., T_A, ..] -> [.., S_A, ..]   the same blocks, the dim called by another name; moves nothing

A value's dim under another name, for a statement that reads one dim of a value twice: the attention core's
keys are the projection's tokens, ``rename_{T,S}(Kp[B, T, N]) -> K[B, S, N]``, so that ``Q[B, T, N] ·
K[B, S, N] -> Sc[B, T, S]`` can name the query and key positions apart. The result keeps the dim's place,
size and axes (``T_X`` becomes ``S_X``): each device holds the same block, nothing is read, written or sent.
A result in another layout is reached by resharding before or after it (``S`` whole from ``T_X`` is an
AllGather over X: what sequence parallelism pays for its keys). Linear (partial sums stay partial); its
transpose is the rename back, ``rename_{S,T}(dK) -> dKp``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

from shardalg.errors import IllegalOperand, UsageError
from shardalg.notation.syntax import Apply, Arrow, Dim, Op, Tensor

from .function import FunctionRecord, Kind, function_record

__all__ = ["RECORD", "RenameRecord", "renamed_dims", "tied_sizes"]


@dataclass(frozen=True, kw_only=True)
class RenameRecord(FunctionRecord):
    """The record of a rename: its result is its operand with the dim relabelled (``flags``: the new name)."""

    def result(self, operands: Sequence[Tensor], dim: str | None, flags: tuple[str, ...] = ()) -> Tensor:
        if len(operands) != 1:
            raise IllegalOperand(f"rename takes one operand, not {len(operands)}")
        (t,) = operands
        if len(flags) != 1:
            raise IllegalOperand("rename names its dim, then the dim's new name: rename_{T,S}", span=t.span)
        (to,) = flags
        if dim is None or dim not in t.dim_names:
            raise IllegalOperand(
                f"rename_{{{dim},{to}}} renames dim {dim}, which {t} does not have",
                fix=f"write rename_{{D,{to}}} with D one of {', '.join(t.dim_names)}",
                span=t.span,
            )
        if to in t.dim_names:
            raise IllegalOperand(
                f"rename_{{{dim},{to}}}: {t} already has a dim {to}; a tensor names each dim once",
                span=t.span,
            )
        dims = tuple(Dim(to, d.axes) if d.label == dim else d for d in t.dims)
        return Tensor(None, dims, t.unreduced, (), t.dtype)


RECORD = function_record(
    Op.RENAME,
    __doc__.split("\n\n")[0].strip(),
    shape=Kind.RENAME,
    dense=lambda xs, axis, c: xs[0],  # the same array: only the dim's name changes
    linear=True,
    vector_flops=0,
    transpose_note="the rename back, rename_{S,T}(dY): the same blocks, nothing moved",
)
RECORD = RenameRecord(**{f.name: getattr(RECORD, f.name) for f in fields(RECORD) if f.init})


def renamed_dims(statements: Sequence[object]) -> dict[str, str]:
    """Each dim a program's renames name anew, with the dim it renames (``rename_{T,S}``: {"S": "T"})."""
    out: dict[str, str] = {}
    for stmt in statements:
        call = stmt.expr if isinstance(stmt, Arrow) else stmt
        if isinstance(call, Apply) and call.op is Op.RENAME and call.dim is not None and call.to is not None:
            out.setdefault(call.to, call.dim)
    return out


def tied_sizes(statements: Sequence[object], sizes: Mapping[str, int]) -> dict[str, tuple[int, str]]:
    """The sizes a program's renames derive: a dim ``rename_{T,S}`` names is T's size, so S is never a size of
    its own. Returns each derived dim's size and the line that says so, for the renamed dims ``sizes`` leaves
    unbound and whose source it binds; a UsageError when ``sizes`` binds one otherwise (S=1024 with
    T=2048)."""
    out: dict[str, tuple[int, str]] = {}
    for to, dim in renamed_dims(statements).items():
        source = sizes.get(dim)
        if source is None:
            continue
        bound = sizes.get(to)
        if bound is not None and bound != source:
            raise UsageError(
                f"{to} is bound to {bound}, but rename_{{{dim},{to}}} makes {to} the dim {dim} under another "
                f"name: its size is {dim}'s, {source}",
                fix=f"drop {to}={bound} (it is derived: {to} = {dim}) or bind {to}={source}",
            )
        if bound is None:
            out[to] = (
                source,
                f"{to} = {dim} = {source} (rename_{{{dim},{to}}}: the same positions, derived)",
            )
    return out
