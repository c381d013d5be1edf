"""The JAX forms of the functions' derivatives (``gelu'``, ``sum'_D``, ``softmax'_S``, ...: the statements a
derived backward writes), for :mod:`shardalg.export.jax`: ``jnp`` on each device's blocks, and over a sharded
dim one ``psum`` of the derivative's per-row statistics (``pmax`` for max's maximum), as its record says."""

from __future__ import annotations

from collections.abc import Callable

from shardalg.algebra.ops import elementwise, norms
from shardalg.notation.syntax import Op

__all__ = ["derivative_lines", "DERIVATIVES"]

_C, _K, _EPS = repr(elementwise.GELU_C), repr(elementwise.GELU_K), repr(norms.EPS)

# op -> lines(y, x, dy, i, n, red, pmax): y the result's name, x the operand's, dy the cotangent aligned to
# the operand's dims, i the dim's axis, n its global extent, red / pmax the group's psum / pmax (or nothing)
Lines = Callable[[str, str, str, int, str, Callable[[str], str], Callable[[str], str]], list[str]]


def _sum(x: str, i: int) -> str:
    return f"jnp.sum({x}, axis={i}, keepdims=True)"


DERIVATIVES: dict[Op, Lines] = {
    Op.GELU_D: lambda y, x, dy, i, n, red, pmax: [
        f"{y}_t = jnp.tanh({_C} * ({x} + {_K} * {x} ** 3))",
        f"{y} = {dy} * (0.5 * (1 + {y}_t) + 0.5 * {x} * (1 - {y}_t * {y}_t) * {_C} * (1 + 3 * {_K} * {x} * {x}))",
    ],
    Op.SILU_D: lambda y, x, dy, i, n, red, pmax: [
        f"{y}_s = jax.nn.sigmoid({x})",
        f"{y} = {dy} * {y}_s * (1 + {x} * (1 - {y}_s))",
    ],
    Op.EXP_D: lambda y, x, dy, i, n, red, pmax: [f"{y} = {dy} * jnp.exp({x})"],
    Op.RELU_D: lambda y, x, dy, i, n, red, pmax: [f"{y} = jnp.where({x} > 0, {dy}, 0.0)"],
    Op.SUM_D: lambda y, x, dy, i, n, red, pmax: [f"{y} = jnp.broadcast_to({dy}, {x}.shape)"],
    Op.MEAN_D: lambda y, x, dy, i, n, red, pmax: [f"{y} = jnp.broadcast_to({dy} / ({n}), {x}.shape)"],
    Op.MAX_D: lambda y, x, dy, i, n, red, pmax: [
        f"{y}_m = " + pmax(f"jnp.max({x}, axis={i}, keepdims=True)"),
        f"{y}_h = ({x} == {y}_m).astype({x}.dtype)",
        f"{y} = {y}_h * {dy} / " + red(_sum(f"{y}_h", i)),
    ],
    Op.SOFTMAX_D: lambda y, x, dy, i, n, red, pmax: [
        f"{y} = {x} * ({dy} - " + red(_sum(f"{dy} * {x}", i)) + ")"
    ],
    Op.RMSNORM_D: lambda y, x, dy, i, n, red, pmax: [
        f"{y}_ss, {y}_dot = " + red("(" + _sum(x + " * " + x, i) + ", " + _sum(dy + " * " + x, i) + ")"),
        f"{y}_r = jnp.sqrt({y}_ss / ({n}) + {_EPS})",
        f"{y} = {dy} / {y}_r - {x} * {y}_dot / (({n}) * {y}_r ** 3)",
    ],
    Op.LAYERNORM_D: lambda y, x, dy, i, n, red, pmax: [
        f"{y}_s1, {y}_s2, {y}_g1, {y}_g2 = "
        + red("(" + ", ".join(_sum(e, i) for e in (x, f"{x} * {x}", dy, f"{dy} * {x}")) + ")"),
        f"{y}_mu = {y}_s1 / ({n})",
        f"{y}_sd = jnp.sqrt({y}_s2 / ({n}) - {y}_mu * {y}_mu + {_EPS})",
        f"{y} = ({dy} - {y}_g1 / ({n}) - ({x} - {y}_mu) / {y}_sd * (({y}_g2 - {y}_mu * {y}_g1) / (({n}) * {y}_sd))) / {y}_sd",
    ],
}


def derivative_lines(op: Op, y: str, x: str, dy: str, i: int, n: str, axes: str | None) -> list[str]:
    """The lines that compute a derivative's block ``y`` on each device; ``axes``: the axes its statistics are
    all-reduced over (None: the dim is whole on each device, or it has no statistics)."""
    red = (lambda e: f"jax.lax.psum({e}, {axes})") if axes else (lambda e: e)
    pmax = (lambda e: f"jax.lax.pmax({e}, {axes})") if axes else (lambda e: e)
    return DERIVATIVES[op](y, x, dy, i, n, red, pmax)
