"""The torch forms of the notation's functions and their derivatives, for :mod:`shardalg.export.torch_export`:
``torch`` on each rank's blocks, and over a sharded dim the statistics all-reduced over the dim's axes
(``_all_reduce``, or ``_all_reduce_max`` for a maximum), as the functions' records say and as the JAX exporter
(:mod:`shardalg.export.jax`, :mod:`shardalg.export.jaxgrads`) writes them with ``psum``:

| shardalg | torch |
|---|---|
| gelu, silu, exp, relu | ``F.gelu(x, approximate="tanh")``, ``F.silu``, ``torch.exp``, ``torch.relu`` |
| scale_c, ``+``, ``-``, ``⊙`` | ``c * x``, ``a + b``, ``a - b``, ``a * b`` (operands aligned to the result's dims) |
| rename_{T,S} | ``y = x``: the same block, its dim called by another name |
| sum_D, mean_D, max_D | ``torch.sum`` / ``torch.amax`` over D (a max over a sharded D all-reduced with MAX) |
| softmax_S (causal), rmsnorm_D, layernorm_D | their per-row statistics all-reduced over D's axes |
| gelu', ..., layernorm' | the derivatives' statistics all-reduced as the forward's |

A block of attention (``attend``, ``attend'``) has no torch form yet: the exporter's registry refuses it by name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.ops import elementwise, norms
from shardalg.errors import UsageError
from shardalg.notation.plan import Step
from shardalg.notation.syntax import Op, Tensor

__all__ = ["function_lines", "DERIVATIVES"]

_C, _K, _EPS = repr(elementwise.GELU_C), repr(elementwise.GELU_K), repr(norms.EPS)


class _Body(Protocol):
    """What the forms need of the torch exporter's state."""

    lines: list[str]
    mesh: Mesh

    def var(self, t: Tensor) -> str: ...

    def call(self, helper: str, args: str) -> str: ...

    def group(self, axes: Sequence[str]) -> tuple[str, str]: ...


_UNARY = {
    Op.GELU: 'torch.nn.functional.gelu({x}, approximate="tanh")',  # the tanh form, as the executor's
    Op.SILU: "torch.nn.functional.silu({x})",
    Op.EXP: "torch.exp({x})",
    Op.RELU: "torch.relu({x})",
}
_BINARY = {Op.ADD: "{a} + {b}", Op.SUBTRACT: "{a} - {b}", Op.MULTIPLY: "{a} * {b}"}


def _sum(x: str, i: int) -> str:
    return f"torch.sum({x}, dim={i}, keepdim=True)"


# op -> lines(y, x, dy, i, n, red, rmax): as :data:`shardalg.export.jaxgrads.DERIVATIVES`, in torch
Lines = Callable[[str, str, str, int, str, Callable[[str], str], Callable[[str], str]], list[str]]
DERIVATIVES: dict[Op, Lines] = {
    Op.GELU_D: lambda y, x, dy, i, n, red, rmax: [
        f"{y}_t = torch.tanh({_C} * ({x} + {_K} * {x} ** 3))",
        f"{y} = {dy} * (0.5 * (1 + {y}_t) + 0.5 * {x} * (1 - {y}_t * {y}_t) * {_C} * (1 + 3 * {_K} * {x} * {x}))",
    ],
    Op.SILU_D: lambda y, x, dy, i, n, red, rmax: [
        f"{y}_s = torch.sigmoid({x})",
        f"{y} = {dy} * {y}_s * (1 + {x} * (1 - {y}_s))",
    ],
    Op.EXP_D: lambda y, x, dy, i, n, red, rmax: [f"{y} = {dy} * torch.exp({x})"],
    Op.RELU_D: lambda y, x, dy, i, n, red, rmax: [
        f"{y} = torch.where({x} > 0, torch.broadcast_to({dy}, {x}.shape), 0.0)"
    ],
    Op.SUM_D: lambda y, x, dy, i, n, red, rmax: [f"{y} = torch.broadcast_to({dy}, {x}.shape).clone()"],
    Op.MEAN_D: lambda y, x, dy, i, n, red, rmax: [
        f"{y} = torch.broadcast_to({dy} / ({n}), {x}.shape).clone()"
    ],
    Op.MAX_D: lambda y, x, dy, i, n, red, rmax: [
        f"{y}_m = " + rmax(f"torch.amax({x}, dim={i}, keepdim=True)"),
        f"{y}_h = ({x} == {y}_m).to({x}.dtype)",
        f"{y} = {y}_h * {dy} / " + red(_sum(f"{y}_h", i)),
    ],
    Op.SOFTMAX_D: lambda y, x, dy, i, n, red, rmax: [
        f"{y} = {x} * ({dy} - " + red(_sum(f"{dy} * {x}", i)) + ")"
    ],
    Op.RMSNORM_D: lambda y, x, dy, i, n, red, rmax: [
        f"{y}_ss = " + red(_sum(f"{x} * {x}", i)),
        f"{y}_dot = " + red(_sum(f"{dy} * {x}", i)),
        f"{y}_r = torch.sqrt({y}_ss / ({n}) + {_EPS})",
        f"{y} = {dy} / {y}_r - {x} * {y}_dot / (({n}) * {y}_r ** 3)",
    ],
    Op.LAYERNORM_D: lambda y, x, dy, i, n, red, rmax: [
        *(
            f"{y}_{k} = " + red(_sum(e, i))
            for k, e in (("s1", x), ("s2", f"{x} * {x}"), ("g1", dy), ("g2", f"{dy} * {x}"))
        ),
        f"{y}_mu = {y}_s1 / ({n})",
        f"{y}_sd = torch.sqrt({y}_s2 / ({n}) - {y}_mu * {y}_mu + {_EPS})",
        f"{y} = ({dy} - {y}_g1 / ({n}) - ({x} - {y}_mu) / {y}_sd * (({y}_g2 - {y}_mu * {y}_g1) / (({n}) * {y}_sd))) / {y}_sd",
    ],
}


def _aligned(var: str, t: Tensor, out: Tensor) -> str:
    """``var`` (laid out as ``t``) in ``out``'s dim order, with a length-1 dim for each dim it lacks."""
    labels = t.dim_names
    order = [labels.index(d) for d in out.dim_names if d in labels]
    src = var if order == sorted(order) else f"{var}.permute{tuple(order)!r}"
    for i, d in enumerate(out.dim_names):
        if d not in labels:
            src = f"{src}.unsqueeze({i})"
    return src


def _causal(b: _Body, s: Step, x: str, y: str, i: int) -> str:
    """Lines that mask the keys after each query (the dim before S is the query dim); the masked source."""
    t = s.inputs[0]
    if i == 0:
        raise UsageError(f"a causal softmax_{s.dim} masks by the dim before {s.dim}; {t} has none")
    tq, sk = t.axes_of(t.dims[i - 1].label), t.axes_of(s.dim or "")
    mesh = b.mesh
    nq, nk = (mesh.group_size(a) if a else 1 for a in (tq, sk))
    start = [
        f"{b.call('axis_index', f'mesh, {tuple(a)!r}')} * {x}.shape[{j}]" if a else "0"
        for a, j in ((tq, i - 1), (sk, i))
    ]
    q = f"({start[0]}) + torch.arange({x}.shape[{i - 1}])"
    k = f"({start[1]}) + torch.arange({x}.shape[{i}])"
    shape = ["1"] * len(t.dims)
    shape[i - 1], shape[i] = f"{x}.shape[{i - 1}]", f"{x}.shape[{i}]"
    mask = f"({k})[None, :] > ({q})[:, None] + ({x}.shape[{i}] * {nk} - {x}.shape[{i - 1}] * {nq})"
    b.lines.append(f"{y}_in = torch.where(torch.reshape({mask}, ({', '.join(shape)},)), -torch.inf, {x})")
    return f"{y}_in"


def function_lines(b: _Body, s: Step) -> None:
    """The lines of one function step (a function of the notation or a derivative) on this rank's blocks."""
    x, y = b.var(s.inputs[0]), b.var(s.output)
    if s.op in _UNARY:
        b.lines.append(f"{y} = {_UNARY[s.op].format(x=x)}")
        return
    if s.op is Op.SCALE:
        b.lines.append(f"{y} = {float(s.factor or 0)!r} * {x}")
        return
    if s.op is Op.RENAME:  # the same block, its dim called by another name: nothing moved
        b.lines.append(f"{y} = {x}")
        return
    if s.op in _BINARY:
        left, right = (_aligned(b.var(t), t, s.output) for t in s.inputs)
        b.lines.append(f"{y} = {_BINARY[s.op].format(a=left, b=right)}")
        return
    t = s.inputs[0]
    i = t.dim_names.index(s.dim) if s.dim is not None else -1
    mesh = b.mesh
    parts = 1
    for a in t.axes_of(s.dim) if s.dim is not None else ():
        parts *= mesh.size(a)
    n = f"{x}.shape[{i}] * {parts}"  # the dim's global extent
    group = b.group(tuple(a for a in mesh.names if a in s.axes))[0] if s.axes else ""
    red = (lambda e: b.call("_all_reduce", f"{e}, {group}")) if s.axes else (lambda e: e)
    rmax = (lambda e: b.call("_all_reduce_max", f"{e}, {group}")) if s.axes else (lambda e: e)
    if s.op in DERIVATIVES:  # f'(X, dY): the cotangent aligned to the operand's dims
        dy = _aligned(b.var(s.inputs[1]), s.inputs[1], s.output)
        b.lines.extend(DERIVATIVES[s.op](y, x, dy, i, n, red, rmax))
        return
    if s.op in (Op.SUM, Op.MEAN):  # over a sharded dim, this rank's share of the total (a partial sum)
        scale = "" if s.op is Op.SUM else f" / ({n})"
        b.lines.append(f"{y} = torch.sum({x}, dim={i}){scale}")
        return
    if s.op is Op.MAX:
        b.lines.append(f"{y} = " + rmax(f"torch.amax({x}, dim={i})"))
        return
    if s.op is Op.SOFTMAX:
        if "causal" in s.flags:
            x = _causal(b, s, x, y, i)
        m = rmax(f"torch.amax({x}, dim={i}, keepdim=True)")
        b.lines.append(f"{y} = torch.exp({x} - {m})")
        b.lines.append(f"{y} = {y} / {red(_sum(y, i))}")
        return
    if s.op is Op.RMSNORM:
        b.lines.append(f"{y} = {x} * torch.rsqrt({red(_sum(f'{x} * {x}', i))} / ({n}) + {_EPS})")
        return
    if s.op is Op.LAYERNORM:
        b.lines.append(f"{y}_s1 = {red(_sum(x, i))}")
        b.lines.append(f"{y}_s2 = {red(_sum(f'{x} * {x}', i))}")
        b.lines.append(f"{y} = {y}_s1 / ({n})")
        b.lines.append(f"{y} = ({x} - {y}) * torch.rsqrt({y}_s2 / ({n}) - {y} * {y} + {_EPS})")
        return
    raise UsageError(f"the torch exporter has no form for {s.op.value}")
