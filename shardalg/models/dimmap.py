"""Dim maps: ``--params D=X,F=XY`` and ``--activations B=X`` as {dim: axes}, applied to a tensor in the map's
order, and refused where they cannot be applied as written (:func:`.expand.shard` reads them).

A tensor with two dims the map gives one axis takes it on the first in the map's order (EP's ``B=X,E=X``: the
router's ``R[B_X, T, E]``, the experts' ``X[E_X, C, D]``); a map is refused rather than dropped where an axis
is named twice for one dim (``D=XX``), an entry would shard nothing (``D=X,F=X``: every parameter with F has
D), or one axis is given to two of the ``tokens`` dims (``B=X,T=X``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from shardalg.errors import UsageError
from shardalg.notation.build import split_axes
from shardalg.notation.syntax import Dim, Tensor

__all__ = [
    "parse_dim_map",
    "apply_map",
    "place",
    "refuse_dropped",
    "refuse_repeated_axis",
    "sequence_axes",
    "map_text",
    "axes_text",
]


def parse_dim_map(text: str | None) -> dict[str, tuple[str, ...]]:
    """``"D=X,F=Y,S=XY"`` (``S=data+model`` for multi-letter axes) to {dim: axes}, without evaluating it."""
    out: dict[str, tuple[str, ...]] = {}
    if not text:
        return out
    for part in (p.strip() for p in text.split(",")):
        dim, eq, axes = part.partition("=")
        if not eq or not dim.isidentifier() or "_" in dim or not axes:
            raise UsageError(f"bad dim map item {part!r}: write DIM=AXES, e.g. D=X,F=Y (S=XY for two axes)")
        words = [w for w in axes.split("+")]
        if not all(w.isalnum() and w[0].isalpha() for w in words):
            raise UsageError(f"bad axes {axes!r} for {dim}: axis names, e.g. X, XY or data+model")
        if dim in out:
            raise UsageError(f"{dim} is mapped twice in {text!r}")
        out[dim] = tuple(a for w in words for a in (split_axes(w) if len(words) == 1 else (w,)))
        refuse_repeated_axis(dim, out[dim], repr(text))
    return out


def sequence_axes(sequence: tuple[str, ...] | str) -> tuple[str, ...]:
    """The axes of ``--megatron-sp`` (``"Y"``, ``"XY"``, ``"data+model"``, or the axes as a tuple), refused
    (UsageError) as a dim map's axes are: empty or not axis names (``Y,Z``), or naming an axis twice (``YY``
    would shard the sequence ``T_YY``, an illegal tensor)."""
    words = sequence.split("+") if isinstance(sequence, str) else list(sequence)
    if not all(isinstance(w, str) and w.isalnum() and w[0].isalpha() for w in words):
        given = sequence if isinstance(sequence, str) else tuple(sequence)
        raise UsageError(
            f"bad axes {given!r} for --megatron-sp: axis names, e.g. Y, XY or data+model",
            fix="name the tensor-parallel axes to run Megatron sequence parallelism on (--megatron-sp Y), "
            "or drop --megatron-sp",
        )
    axes = tuple(a for w in words for a in (split_axes(w) if len(words) == 1 else (w,)))
    twice = next((a for k, a in enumerate(axes) if a in axes[:k]), None)
    if twice is not None:
        raise UsageError(
            f"--megatron-sp {sequence if isinstance(sequence, str) else axes_text(axes)} names {twice} twice: "
            "a mesh axis shards the sequence dim once",
            fix=f"name each axis once (--megatron-sp {axes_text(tuple(dict.fromkeys(axes)))})",
        )
    return axes


def map_text(mapping: Mapping[str, tuple[str, ...]]) -> str:
    """A dim map as ``--params`` takes it: ``D=X,F=XY`` (``B=data+model`` for multi-letter axes)."""
    return ",".join(f"{d}={axes_text(axes)}" for d, axes in mapping.items())


def refuse_repeated_axis(dim: str, axes: tuple[str, ...], where: str) -> None:
    """A UsageError when ``axes`` (the axes a map gives ``dim``) names an axis twice: a mesh axis shards a dim
    once (``D=XX`` would write ``W_q[D_XX, ...]``, an illegal tensor)."""
    twice = next((a for k, a in enumerate(axes) if a in axes[:k]), None)
    if twice is None:
        return
    raise UsageError(
        f"{where} names {twice} twice for {dim}: a mesh axis shards a dim once",
        fix=f"name each axis once ({dim}={axes_text(tuple(dict.fromkeys(axes)))})",
    )


def place(t: Tensor, mapping: Mapping[str, tuple[str, ...]]) -> tuple[Tensor, dict[str, tuple[str, str]]]:
    """``t`` with its mapped dims sharded over their axes, in the map's order, skipping a dim already sharded
    and axes the tensor already uses (``F=XY,D=XY`` shards W_in[D, F] as W_in[D, F_XY]); and the dims of ``t``
    the map shards that were skipped for an axis another dim of ``t`` holds, each with (that dim, the axis)."""
    dims = {d.label: d for d in t.dims}
    holder = {a: d.label for d in t.dims for a in d.axes}
    skipped: dict[str, tuple[str, str]] = {}
    for label, axes in mapping.items():
        d = dims.get(label)
        if d is None or d.axes or not axes:
            continue
        taken = next((a for a in axes if a in holder), None)
        if taken is not None:
            skipped[label] = (holder[taken], taken)
            continue
        holder.update((a, label) for a in axes)
        dims[label] = d.with_axes(axes)
    return replace(t, dims=tuple(dims[d.label] for d in t.dims)), skipped


def apply_map(t: Tensor, mapping: Mapping[str, tuple[str, ...]]) -> Tensor:
    """``t`` with its mapped dims sharded over their axes (:func:`place`)."""
    return place(t, mapping)[0]


def refuse_dropped(
    tensors: list[Tensor],
    mapping: Mapping[str, tuple[str, ...]],
    what: str,
    where: str,
    tokens: tuple[str, ...] = (),
) -> dict[Tensor, tuple[Dim, ...]]:
    """Each of ``tensors``' dims under ``mapping`` (:func:`place`), the map checked on the way: a UsageError when an entry of ``mapping`` (the map of ``what``, e.g. ``--activations B=X,T=X``) cannot
    be applied as written and would be dropped silently: it would shard none of ``tensors`` (``where``: the
    activations) that have its dim, each of them having an earlier mapped dim on the same axis (``D=X,F=X``:
    every parameter with F has D, which takes X); or it shares an axis with an earlier one of the ``tokens``
    dims (``T=X,B=X``: the token stream holds both, so B would shard only the tensors without T, the keys
    renamed ``Ks[B_X, S, K, H]``). An entry that shards some tensors and gives way in others is the map's order
    at work (EP's ``B=X,E=X``: the router's ``R[B_X, T, E]``, the experts' ``X[E_X, C, D]``; the book's
    ``F=XY,D=XY``: ``W_in[D, F_XY]``, ``W_q[D_XY, K, G, H]``) and is kept."""
    placed: dict[str, Tensor] = {}  # a dim the map shards somewhere: the first tensor it shards
    dropped: dict[str, tuple[Tensor, str, str]] = {}  # a dim the map gives way: (a tensor, the dim, the axis)
    dims: dict[Tensor, tuple[Dim, ...]] = {}
    for t in tensors:
        after, skipped = place(t, mapping)
        dims[t] = after.dims
        for d in after.dims:
            if d.axes and not t.axes_of(d.label):
                placed.setdefault(d.label, after)
        for label, (other, axis) in skipped.items():
            dropped.setdefault(label, (after, other, axis))
    for label, (example, other, axis) in dropped.items():
        together = other in tokens and label in tokens and other in mapping
        if label in placed and not together:
            continue
        mine = f"{label}={axes_text(mapping[label])}"
        if label not in placed:
            holds = (
                f"which {other}={axes_text(mapping[other])} takes first"
                if other in mapping
                else f"which the program shards over {axis} already"
            )
            why = f"every one of {where} with {label} has {other}, {holds} ({example}): {mine} would shard nothing"
        else:  # two token dims: the later shards only what the stream's renames and cuts leave (Ks[B_X, S, K, H])
            why = (
                f"both are the program's token dims (tokens {', '.join(tokens)}), which the token stream holds "
                f"together ({example}): {mine} would shard only the tensors without {other} ({placed[label]})"
            )
        letters = all(len(a) == 1 for axes in mapping.values() for a in axes)
        spare = next((a for a in "XYZW" if letters and not any(a in axes for axes in mapping.values())), None)
        more = f" ({other}={axes_text((*mapping.get(other, (axis,)), spare))})" if spare else ""
        raise UsageError(
            f"{what}: {axis} is asked to shard {other + ' and ' if other in mapping else ''}{label}, and {why}",
            fix=f"give {label} an axis {other} does not use"
            + (f" ({label}={spare})" if spare else "")
            + f", or shard {other} over more axes{more} and drop {mine}",
        )
    return dims


def axes_text(axes: tuple[str, ...]) -> str:
    """A dim's axes as a map writes them: ``XY``, or ``data+model`` for multi-letter axes."""
    return ("" if all(len(a) == 1 for a in axes) else "+").join(axes)
