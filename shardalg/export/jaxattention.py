"""The JAX source of attention's own steps (:mod:`shardalg.export.jax` registers them): the causal mask of a
``softmax_{S,causal}``, a block of attention ``attend_{S,k}`` with its online rescaling and its backward
``attend'`` (from the forward's row log-sum-exp), inside
``shard_map`` (a device's block positions from ``jax.lax.axis_index``), as the executor runs them
(:mod:`shardalg.numeric.attention`)."""

from __future__ import annotations

from collections.abc import Sequence

from shardalg.algebra.mesh import Mesh
from shardalg.notation.plan import Step

__all__ = ["index_src", "causal_lines", "attend_lines", "attend_grad_lines"]

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def index_src(axes: Sequence[str], mesh: Mesh) -> str:
    """This device's block index over ``axes`` (the first axis major), as source; ``0`` with no axes."""
    if not axes:
        return "0"
    terms = []
    for n, a in enumerate(axes):
        after = 1
        for b in axes[n + 1 :]:
            after *= mesh.size(b)
        terms.append(f"jax.lax.axis_index({a!r})" + (f" * {after}" if after != 1 else ""))
    return " + ".join(terms) if len(terms) == 1 else "(" + " + ".join(terms) + ")"


def causal_lines(
    out: str, x: str, t_axis: int, s_axis: int, ndim: int, starts: tuple[str, str], totals: tuple[str, str]
) -> list[str]:
    """Lines that set ``out`` to ``x`` with the keys after each query at -inf: positions from the blocks'
    ``starts`` (source), the dims' global ``totals`` (source); ``t_axis``, ``s_axis`` the dims of ``x``."""
    shape = ["1"] * ndim
    shape[t_axis], shape[s_axis] = f"{x}.shape[{t_axis}]", f"{x}.shape[{s_axis}]"
    t = f"({starts[0]}) + jnp.arange({x}.shape[{t_axis}])"
    s = f"({starts[1]}) + jnp.arange({x}.shape[{s_axis}])"
    mask = f"({s})[None, :] > ({t})[:, None] + (({totals[1]}) - ({totals[0]}))"
    if t_axis > s_axis:
        mask = f"jnp.transpose({mask})"
    return [f"{out} = jnp.where(jnp.reshape({mask}, ({', '.join(shape)},)), -jnp.inf, {x})"]


def _letters(step: Step) -> tuple[dict[str, str], str, str, str]:
    """Einsum letters of a block's dims, and Q's, K's and the scores' rows' subscripts (rows: Q's but the head)."""
    qt, kt = step.inputs[0], step.inputs[1]
    head = qt.dims[-1].label
    ltr: dict[str, str] = {}
    for t in (qt, kt):
        for d in t.dim_names:
            ltr.setdefault(d, _LETTERS[len(ltr)])
    qs, ks = "".join(ltr[d] for d in qt.dim_names), "".join(ltr[d] for d in kt.dim_names)
    return ltr, qs, ks, "".join(ltr[d] for d in qt.dim_names if d != head)


def _scores_lines(step: Step, q: str, k: str, out: str, mesh: Mesh) -> list[str]:
    """Lines that set ``<out>_sc`` to the block's scores Q·Kᵀ, the keys after each query at -inf when causal
    (positions from this device's index and the step's offset round the ring)."""
    qt, kt = step.inputs[0], step.inputs[1]
    key = step.dim
    assert key is not None
    query = next(d for d in qt.dim_names if d not in kt.dim_names)
    ltr, qs, ks, rows = _letters(step)
    lines = [f"{out}_sc = jnp.einsum('{qs},{ks}->{rows}{ltr[key]}', {q}, {k})"]
    if "causal" in step.flags:
        axes, keys = qt.axes_of(query), kt.axes_of(key)
        n = mesh.group_size(axes) if axes else 1
        tq, sk = f"{q}.shape[{qt.dim_names.index(query)}]", f"{k}.shape[{kt.dim_names.index(key)}]"
        mine = index_src(axes, mesh)
        theirs = f"(({mine} - {step.offset}) % {n})" if keys else "0"
        lines += causal_lines(
            f"{out}_sc",
            f"{out}_sc",
            rows.index(ltr[query]),
            len(rows),
            len(rows) + 1,
            (f"{mine} * {tq}", f"{theirs} * {sk}"),
            (f"{tq} * {n}", f"{sk} * {n if keys else 1}"),
        )
    return lines


def attend_lines(step: Step, names: Sequence[str], out: str, mesh: Mesh) -> list[str]:
    """A block of attention on each device: scores, their row max and sum, P·V; with a state, both rescaled
    to their common log-sum-exp and added. ``names`` are the operands' variables; the state's log-sum-exp is
    ``<state>_lse`` and the result's ``<out>_lse``."""
    ltr, qs, ks, rows = _letters(step)
    key = ltr[step.dim or ""]
    q, k, v = names[:3]
    lines = _scores_lines(step, q, k, out, mesh)
    lines += [
        f"{out}_m = jnp.max({out}_sc, axis=-1, keepdims=True)",
        f"{out}_m = jax.lax.stop_gradient(jnp.where(jnp.isfinite({out}_m), {out}_m, 0.0))",
        f"{out}_e = jnp.exp({out}_sc - {out}_m)",
        f"{out}_l = jnp.sum({out}_e, axis=-1, keepdims=True)",
        f"{out}_b = jnp.einsum('{rows}{key},{ks}->{qs}', {out}_e / jnp.where({out}_l > 0, {out}_l, 1.0), {v})",
        f"{out}_blse = {out}_m + jnp.log({out}_l)",  # the block's (the state's may have the same name)
    ]
    if len(names) == 4:
        p = names[3]
        lines += [
            f"{out}_new = jnp.logaddexp({p}_lse, {out}_blse)",
            f"{out}_new0 = jnp.where(jnp.isfinite({out}_new), {out}_new, 0.0)",
            f"{out} = {p} * jnp.exp({p}_lse - {out}_new0) + {out}_b * jnp.exp({out}_blse - {out}_new0)",
            f"{out}_lse = {out}_new",
        ]
    else:
        lines += [f"{out} = {out}_b", f"{out}_lse = {out}_blse"]
    return lines


def attend_grad_lines(step: Step, names: Sequence[str], out: str, mesh: Mesh) -> list[str]:
    """A block's backward (``attend'``) on each device: P remade from the forward's ``<O>_lse``, then dV = Pᵀ·dO,
    or dS = P ⊙ (dO·Vᵀ − sum_E(dO ⊙ O)) and dQ = dS·K or dK = dSᵀ·Q, as the step's flag says."""
    ltr, qs, ks, rows = _letters(step)
    key = ltr[step.dim or ""]
    q, k, v, o, do = names
    lines = _scores_lines(step, q, k, out, mesh)
    lines.append(f"{out}_p = jnp.exp({out}_sc - {o}_lse)")
    if "dv" in step.flags:
        return [*lines, f"{out} = jnp.einsum('{rows}{key},{qs}->{ks}', {out}_p, {do})"]
    lines += [
        f"{out}_d = jnp.sum({do} * {o}, axis=-1, keepdims=True)",
        f"{out}_ds = {out}_p * (jnp.einsum('{qs},{ks}->{rows}{key}', {do}, {v}) - {out}_d)",
    ]
    if "dq" in step.flags:
        return [*lines, f"{out} = jnp.einsum('{rows}{key},{ks}->{qs}', {out}_ds, {k})"]
    return [*lines, f"{out} = jnp.einsum('{rows}{key},{qs}->{ks}', {out}_ds, {q})"]
