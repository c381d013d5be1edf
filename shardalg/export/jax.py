"""A plan as a JAX module: a ``jax.shard_map`` whose body runs the plan's steps with ``jax.lax`` collectives.

    >>> print(export_jax(plan, Mesh(X=4, Y=2)))

Each op of the plan has one emitter, registered on ``EMITTERS`` (an op without one is refused, naming this
exporter); the table below is the whole mapping.
Axis tuples are passed in the order the sharding names them (``('X', 'Y')``: X major), which is how JAX
linearizes a tuple of axis names for ``all_gather``, ``psum_scatter``, ``all_to_all`` and ``axis_index``.

| shardalg | jax.lax (inside shard_map) |
|---|---|
| AllGather_A on dim d | ``all_gather(x, A, axis=d, tiled=True, to=...)`` once per dim that loses axes |
| ReduceScatter_{A,d} | ``psum_scatter(x, A, scatter_dimension=d, tiled=True)`` |
| AllReduce_A | ``psum(x, A)`` |
| AllToAll_{A,d} from d' | ``all_to_all(x, A, split_axis=d, concat_axis=d', tiled=True)`` |
| Slice_{A,d} | ``dynamic_slice_in_dim(x, axis_index(A) * k, k, axis=d)`` |
| Slice read backwards (S -> U) | zeros, then ``dynamic_update_slice_in_dim`` |
| Permute_{X,Y} | ``ppermute(x, (X, Y), perm)`` with the device matching of the executor |
| Shift_{X,k} | ``ppermute(x, X, perm=[(i, (i + k) % n) ...])``, a cyclic permutation along X |
| Send_{X,k} | ``ppermute(x, X, perm=[(i, i + k) ...])`` for the i + k that exist; the first k receive zeros |
| local einsum | ``jnp.einsum`` |

The body is type-checked by shard_map (``check_vma=True``): a value is *varying* over the axes it is
sharded or unreduced on. An AllGather whose result meets only invariant operands gathers ``to='invarying'``
(shardalg's S -> I: its transpose is a local slice); one that meets a varying operand stays varying
(S -> R: its transpose is a ReduceScatter). When the outputs' types cannot be proven that way the module
falls back to ``check_vma=False`` and says so in a comment.
"""

from __future__ import annotations

import json
import os
import tempfile
import textwrap
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from shardalg.algebra.mesh import Mesh, a_mesh, as_mesh
from shardalg.algebra.ops import norms
from shardalg.algebra.registry import Layer
from shardalg.errors import UsageError
from shardalg.notation.op import ROUTES
from shardalg.notation.plan import Step
from shardalg.notation.syntax import Op, Tensor

from .emit import (
    Body,
    appended_suffixes,
    einsum_subscripts,
    generated_by,
    is_zero_pad,
    removed_suffixes,
    start,
)
from .flow import Flow, node_text, returns_line, step_text
from .harness import (
    CheckResult,
    check_inputs,
    compare,
    dense_outputs,
    require_extra,
    run_driver,
    unreduced_in_mesh_order,
)
from .jaxattention import attend_grad_lines, attend_lines, causal_lines, index_src
from .jaxgrads import DERIVATIVES, derivative_lines
from .permute import permute_pairs
from .specs import partition_spec_source

__all__ = ["export_jax", "check_jax", "jax_backward_collectives"]


def _axes_src(axes: Sequence[str]) -> str:
    return repr(axes[0]) if len(axes) == 1 else repr(tuple(axes))


class _Body(Body):
    """The emitter state: the flow, the mesh, and each value's varying axes (shard_map's vma type)."""

    def __init__(self, flow: Flow, mesh: Mesh) -> None:
        super().__init__(flow, mesh)
        self.vary: dict[Tensor, frozenset[str]] = {
            t: frozenset(t.sharded_axes) | frozenset(t.unreduced) for t in flow.inputs
        }

    def emitted(self, step: Step, result: frozenset[str]) -> None:
        """An emitter returns the varying axes of the step's result."""
        self.vary[step.output] = result

    def gather_to(self, step: Step, axes: frozenset[str]) -> str:
        """'varying' when a consumer multiplies the result with a value varying over the gathered axes."""
        for s in self.flow.consumers(step.output):
            if s.op is Op.EINSUM and any(
                self.vary.get(o, frozenset()) & axes for o in s.inputs if o != step.output
            ):
                return "varying"
        return "invarying"


# op -> its emitter: the lines of the generated function that run one step (one method per op)
EMITTERS: Layer[Callable[[_Body, Step], frozenset[str]]] = Layer(
    "the JAX exporter (shardalg.export.jax)", fix="register the op's emitter: @EMITTERS.register(op)"
)


@EMITTERS.register(Op.ALL_GATHER)
def _all_gather(b: _Body, s: Step) -> frozenset[str]:
    (t,) = s.inputs
    x, y = b.var(t), b.var(s.output)
    gone = removed_suffixes(t, s.output)
    axes = frozenset(a for v in gone.values() for a in v)
    to = b.gather_to(s, axes)
    cur = x
    for d, removed in gone.items():
        b.lines.append(
            f"{y} = jax.lax.all_gather({cur}, {_axes_src(removed)}, axis={d}, tiled=True, to={to!r})"
        )
        cur = y
    return b.vary[t] - axes if to == "invarying" else b.vary[t]


@EMITTERS.register(Op.REDUCE_SCATTER)
def _reduce_scatter(b: _Body, s: Step) -> frozenset[str]:
    (t,) = s.inputs
    ((d, added),) = appended_suffixes(t, s.output).items()
    b.lines.append(
        f"{b.var(s.output)} = jax.lax.psum_scatter({b.var(t)}, {_axes_src(added)}, scatter_dimension={d}, tiled=True)"
    )
    return b.vary[t] | frozenset(added)


@EMITTERS.register(Op.ALL_REDUCE)
def _all_reduce(b: _Body, s: Step) -> frozenset[str]:
    (t,) = s.inputs
    axes = tuple(a for a in b.mesh.names if a in s.axes)
    b.lines.append(f"{b.var(s.output)} = jax.lax.psum({b.var(t)}, {_axes_src(axes)})")
    return b.vary[t] - frozenset(axes)


@EMITTERS.register(Op.ALL_TO_ALL)
def _all_to_all(b: _Body, s: Step) -> frozenset[str]:
    (t,) = s.inputs
    gone = {
        i: d0.axes[len(d0.axes) - len(s.axes) :] for i, d0 in enumerate(t.dims) if set(s.axes) <= set(d0.axes)
    }
    if len(gone) != 1:
        raise UsageError(f"{step_text(s)}: the axes {', '.join(s.axes)} are not the minor end of one dim")
    ((src, moved),) = gone.items()
    dst = s.output.dim_names.index(s.dim) if s.dim else None
    if dst is None:
        raise UsageError(f"{step_text(s)} names no target dim")
    b.lines.append(
        f"{b.var(s.output)} = jax.lax.all_to_all({b.var(t)}, {_axes_src(moved)}, {dst}, {src}, tiled=True)"
        f"  # split {s.output.dims[dst].label}, concat {t.dims[src].label}"
    )
    return b.vary[t]


@EMITTERS.register(Op.SLICE)
def _slice(b: _Body, s: Step) -> frozenset[str]:
    (t,) = s.inputs
    x, y = b.var(t), b.var(s.output)
    if is_zero_pad(s):
        ((d, moved),) = removed_suffixes(t, s.output).items()
        n = b.mesh.group_size(moved)
        b.lines += [
            f"_shape = {x}.shape[:{d}] + ({x}.shape[{d}] * {n},) + {x}.shape[{d + 1}:]",
            f"{y} = jax.lax.dynamic_update_slice_in_dim(jnp.zeros(_shape, {x}.dtype), {x}, "
            f"jax.lax.axis_index({_axes_src(moved)}) * {x}.shape[{d}], axis={d})",
        ]
        return b.vary[t] | frozenset(moved)
    ((d, added),) = appended_suffixes(t, s.output).items()
    n = b.mesh.group_size(added)
    b.lines.append(
        f"{y} = jax.lax.dynamic_slice_in_dim({x}, jax.lax.axis_index({_axes_src(added)}) * ({x}.shape[{d}] // {n}), "
        f"{x}.shape[{d}] // {n}, axis={d})"
    )
    return b.vary[t] | frozenset(added)


@EMITTERS.register(Op.PERMUTE)
def _permute(b: _Body, s: Step) -> frozenset[str]:
    (t,) = s.inputs
    axes, pairs = permute_pairs(t, s.output, b.mesh)
    moved = [(i, j) for i, j in pairs if i != j]
    b.lines.append(f"{b.var(s.output)} = jax.lax.ppermute({b.var(t)}, {_axes_src(axes)}, perm={pairs!r})")
    if not moved:
        b.lines[-1] = f"{b.var(s.output)} = {b.var(t)}  # every device already holds its block"
    return b.vary[t] | frozenset(axes)


@EMITTERS.register(Op.SHIFT)
def _shift(b: _Body, s: Step) -> frozenset[str]:
    (t,) = s.inputs
    (axis,) = s.axes
    n = b.mesh.group_size((axis,))
    assert s.offset is not None and n is not None
    perm = [(i, (i + s.offset) % n) for i in range(n)]
    b.lines.append(
        f"{b.var(s.output)} = jax.lax.ppermute({b.var(t)}, {axis!r}, perm={perm!r})  # Shift_{{{axis},{s.offset:+d}}}"
    )
    return b.vary[t] | frozenset(s.axes)


@EMITTERS.register(Op.SEND)
def _send(b: _Body, s: Step) -> frozenset[str]:
    (t,) = s.inputs
    (axis,) = s.axes
    n = b.mesh.group_size((axis,))
    assert s.offset is not None and n is not None
    perm = [(i, i + s.offset) for i in range(n) if 0 <= i + s.offset < n]  # no wrap: the rest receive zeros
    b.lines.append(
        f"{b.var(s.output)} = jax.lax.ppermute({b.var(t)}, {axis!r}, perm={perm!r})  # Send_{{{axis},{s.offset:+d}}}"
    )
    return b.vary[t] | frozenset(s.axes)


@EMITTERS.register(Op.EINSUM)
def _einsum(b: _Body, s: Step) -> frozenset[str]:
    left, right = s.inputs
    spec = einsum_subscripts(left, right, s.output)
    b.lines.append(f"{b.var(s.output)} = jnp.einsum({spec!r}, {b.var(left)}, {b.var(right)})")
    return b.vary[left] | b.vary[right]


# ---- the notation's functions: jnp on each device's block; over a sharded dim, psum / pmax of statistics
_UNARY_SRC = {
    Op.GELU: "jax.nn.gelu({x})",  # the tanh form, as the numeric executor's
    Op.SILU: "jax.nn.silu({x})",
    Op.EXP: "jnp.exp({x})",
    Op.RELU: "jax.nn.relu({x})",
}
_BINARY_SRC = {Op.ADD: "{a} + {b}", Op.SUBTRACT: "{a} - {b}", Op.MULTIPLY: "{a} * {b}"}


def _aligned_src(var: str, t: Tensor, out: Tensor) -> str:
    """``var`` (laid out as ``t``) in ``out``'s dim order, with a length-1 axis for each dim it lacks."""
    labels = t.dim_names
    order = [labels.index(d) for d in out.dim_names if d in labels]
    src = var if order == sorted(order) else f"jnp.transpose({var}, {tuple(order)!r})"
    missing = tuple(i for i, d in enumerate(out.dim_names) if d not in labels)
    return f"jnp.expand_dims({src}, {missing!r})" if missing else src


@EMITTERS.register(*(op for op in Op if op.function and op not in ROUTES))  # a MoE routing: refused by name
def _function(b: _Body, s: Step) -> frozenset[str]:
    x, y = b.var(s.inputs[0]), b.var(s.output)
    vary = frozenset().union(*(b.vary[t] for t in s.inputs))
    if s.op is Op.ATTEND:  # a block of attention, its state's statistics beside it (export.jaxattention)
        b.lines.extend(attend_lines(s, [b.var(t) for t in s.inputs], y, b.mesh))
        return vary
    if s.op is Op.ATTEND_D:  # a block's backward, from the forward O's statistics (export.jaxattention)
        b.lines.extend(attend_grad_lines(s, [b.var(t) for t in s.inputs], y, b.mesh))
        return vary
    if s.op in _UNARY_SRC:
        b.lines.append(f"{y} = {_UNARY_SRC[s.op].format(x=x)}")
        return vary
    if s.op is Op.SCALE:
        b.lines.append(f"{y} = {float(s.factor)!r} * {x}")
        return vary
    if s.op is Op.RENAME:  # the same block, its dim called by another name
        b.lines.append(f"{y} = {x}")
        return vary
    if s.op in _BINARY_SRC:
        left, right = (_aligned_src(b.var(t), t, s.output) for t in s.inputs)
        b.lines.append(f"{y} = {_BINARY_SRC[s.op].format(a=left, b=right)}")
        return vary
    t = s.inputs[0]
    i = t.dim_names.index(s.dim) if s.dim is not None else -1
    axes = _axes_src(tuple(a for a in b.mesh.names if a in s.axes)) if s.axes else ""
    parts = 1
    for a in t.axes_of(s.dim) if s.dim is not None else ():
        parts *= b.mesh.size(a)
    n = f"{x}.shape[{i}] * {parts}"  # the dim's global extent
    if s.op in DERIVATIVES:  # a derivative f'(X, dY): the cotangent aligned to the operand's dims
        dy = _aligned_src(b.var(s.inputs[1]), s.inputs[1], s.output)
        b.lines.extend(derivative_lines(s.op, y, x, dy, i, n, axes or None))
        return vary
    if s.op in (Op.SUM, Op.MEAN):  # over a sharded dim, this device's share of the total (a partial sum)
        scale = "" if s.op is Op.SUM else f" / ({n})"
        b.lines.append(f"{y} = jnp.sum({x}, axis={i}){scale}")
        return vary
    if s.op is Op.MAX:  # over a sharded dim: the group's row maxima gathered (pmax has no derivative in JAX)
        local = f"jnp.max({x}, axis={i})"
        gathered = f"jnp.max(jax.lax.all_gather({local}, {axes}, axis=0, to='invarying'), axis=0)"
        b.lines.append(f"{y} = {gathered}" if s.axes else f"{y} = {local}")
        return vary - frozenset(s.axes)
    red = (lambda e: f"jax.lax.psum({e}, {axes})") if s.axes else (lambda e: e)
    if s.op is Op.SOFTMAX:
        if "causal" in s.flags:  # the keys after each query at -inf first (the query dim is the one before S)
            if i == 0:
                raise UsageError(f"a causal softmax_{s.dim} masks by the dim before {s.dim}; {t} has none")
            tq, sk = t.axes_of(t.dims[i - 1].label), t.axes_of(s.dim)
            nq, nk = (b.mesh.group_size(a) if a else 1 for a in (tq, sk))
            starts = tuple(f"{index_src(a, b.mesh)} * {x}.shape[{j}]" for a, j in ((tq, i - 1), (sk, i)))
            totals = (f"{x}.shape[{i - 1}] * {nq}", f"{x}.shape[{i}] * {nk}")
            b.lines.extend(causal_lines(f"{y}_in", x, i - 1, i, len(t.dims), starts, totals))  # type: ignore[arg-type]
            x = f"{y}_in"
        m = f"jax.lax.stop_gradient(jnp.max({x}, axis={i}, keepdims=True))"  # a shift: no gradient flows
        m = f"jax.lax.pmax({m}, {axes})" if s.axes else m
        b.lines.append(f"{y} = jnp.exp({x} - {m})")
        b.lines.append(f"{y} = {y} / {red(f'jnp.sum({y}, axis={i}, keepdims=True)')}")
        return vary
    eps = repr(norms.EPS)
    if s.op is Op.RMSNORM:
        ss = red(f"jnp.sum({x} * {x}, axis={i}, keepdims=True)")
        b.lines.append(f"{y} = {x} * jax.lax.rsqrt({ss} / ({n}) + {eps})")
        return vary
    if s.op is Op.LAYERNORM:  # one AllReduce of the pair (sum, sum of squares)
        pair = f"(jnp.sum({x}, axis={i}, keepdims=True), jnp.sum({x} * {x}, axis={i}, keepdims=True))"
        b.lines.append(f"{y}_s1, {y}_s2 = {red(pair)}")
        b.lines.append(f"{y} = {y}_s1 / ({n})")
        b.lines.append(f"{y} = ({x} - {y}) * jax.lax.rsqrt({y}_s2 / ({n}) - {y} * {y} + {eps})")
        return vary
    raise UsageError(f"the JAX exporter has no form for {s.op.value}")


def _tuple_src(items: Sequence[str]) -> str:
    return "(" + items[0] + ",)" if len(items) == 1 else "(" + ", ".join(items) + ")"


def _stacked_spec(t: Tensor, mesh: Mesh) -> str:
    """The spec of a value as it crosses the boundary: unreduced ones get a leading dim of partials."""
    if not t.unreduced:
        return partition_spec_source(t)
    lead = unreduced_in_mesh_order(t, mesh)
    plain = partition_spec_source(Tensor(t.name, t.dims, (), t.invariant, t.dtype))
    return f"P({_axes_src(lead)}, {plain[2:]}" if t.dims else f"P({_axes_src(lead)})"


def export_jax(
    plan_or_program: object,
    mesh: Mesh | str,
    *,
    sizes: Mapping[str, int] | None = None,
    name: str = "forward",
) -> str:
    """Python source of a module whose ``name(*inputs, mesh=None)`` runs the plan with ``jax.shard_map``."""
    m, flow = start(plan_or_program, as_mesh(mesh), sizes)
    body = _Body(flow, m)
    for t in flow.inputs:
        if t.unreduced:
            body.lines.append(f"{body.var(t)} = {body.var(t)}[0]  # this device's partial sum")
    body.emit_steps(EMITTERS)
    results = []
    vma_ok = True
    for t in flow.outputs:
        shown = frozenset(t.sharded_axes) | frozenset(t.unreduced)
        vma_ok &= body.vary[t] <= shown
        results.append(f"{body.var(t)}[None]" if t.unreduced else body.var(t))
    body.lines.append("return " + ", ".join(results))
    args = ", ".join(body.var(t) for t in flow.inputs)
    in_specs = _tuple_src([_stacked_spec(t, m) for t in flow.inputs])
    out_specs = ", ".join(_stacked_spec(t, m) for t in flow.outputs)
    out_specs = out_specs if len(flow.outputs) == 1 else f"({out_specs})"
    check = "True" if vma_ok else "False"
    if not vma_ok:
        body.lines.insert(
            0, "# check_vma=False: that the outputs are replicated where their specs say so is not provable"
        )
        body.lines.insert(
            1,
            "# from shard_map's varying types (a collective leaves a copy varying); `shardalg export --check` runs it.",
        )
    stacked = [node_text(t) for t in (*flow.inputs, *flow.outputs) if t.unreduced]
    note = (
        "\nUnreduced values are passed stacked: a leading dim of partial sums (one per device group along the\n"
        f"unreduced axes, mesh order) whose sum is the value: {', '.join(dict.fromkeys(stacked))}.\n"
        if stacked
        else ""
    )
    names, shape = tuple(m.names), tuple(m.shape)
    said = returns_line(flow)  # a backward's: which returned value is the gradient of which input
    returns = f"\n\n    {said}\n    " if said else ""
    return f'''"""{generated_by(flow, m)}.
{note}"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH_AXES = {names!r}
MESH_SHAPE = {shape!r}
IN_SPECS = {in_specs}
OUT_SPECS = {out_specs}
CHECK_VMA = {check}


def make_mesh():
    """The mesh on the first {m.devices} devices, row-major (the last axis fastest)."""
    auto = (jax.sharding.AxisType.Auto,) * len(MESH_AXES)
    return jax.make_mesh(MESH_SHAPE, MESH_AXES, axis_types=auto, devices=jax.devices()[:{m.devices}])


def {name}_local({args}):
    """What each device runs, on its own blocks."""
{textwrap.indent(chr(10).join(body.lines), "    ")}


def {name}({args}{", " if args else ""}mesh=None):
    """The plan on global arrays: shard them by IN_SPECS, run {name}_local on every device.{returns}"""
    mesh = make_mesh() if mesh is None else mesh
    placed = [jax.device_put(x, NamedSharding(mesh, s)) for x, s in zip({_tuple_src([body.var(t) for t in flow.inputs])}, IN_SPECS)]
    run = jax.shard_map({name}_local, mesh=mesh, in_specs=IN_SPECS, out_specs=OUT_SPECS, check_vma=CHECK_VMA)
    return run(*placed)
'''


# ------------------------------------------------------------------------------------ running it
_DRIVER = r"""
import importlib.util, json, sys, traceback
import numpy as np
import jax

def load(path):
    spec = importlib.util.spec_from_file_location(path.replace("/", "_").replace(".", "_"), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

def collectives(jaxpr, found):
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in WATCH:
            axes = eqn.params.get("axis_name", eqn.params.get("axes"))
            axes = tuple(axes) if isinstance(axes, (tuple, list)) else (axes,)
            found.append([WATCH[name], sorted(str(a) for a in axes)])
        for v in eqn.params.values():
            for sub in (v if isinstance(v, (tuple, list)) else (v,)):
                inner = getattr(sub, "jaxpr", None)
                if inner is not None and hasattr(inner, "eqns"):
                    collectives(inner, found)
                elif hasattr(sub, "eqns"):
                    collectives(sub, found)

WATCH = {"all_gather": "AllGather", "all_gather_invariant": "AllGather", "psum": "AllReduce",
         "psum_invariant": "AllReduce", "reduce_scatter": "ReduceScatter", "psum_scatter": "ReduceScatter",
         "all_to_all": "AllToAll", "ppermute": "Permute"}

out = []
for job in json.load(open(sys.argv[1])):
    try:
        mod = load(job["module"])
        fn = getattr(mod, job["function"])
        data = np.load(job["inputs"])
        args = [data[f"arg{i}"] for i in range(job["n_inputs"])]
        res = fn(*args)
        res = res if isinstance(res, tuple) else (res,)
        np.savez(job["outputs"], **{f"out{i}": np.asarray(r) for i, r in enumerate(res)})
        entry = {"ok": True}
        if job.get("vjp"):
            # remat as shardalg's backward assumes: keep every value but the copies AllGather makes
            keep = lambda prim, *_, **__: prim.name not in ("all_gather", "all_gather_invariant")
            local = jax.checkpoint(mod.forward_local, policy=keep)
            mesh = mod.make_mesh()
            fn = jax.shard_map(local, mesh=mesh, in_specs=mod.IN_SPECS, out_specs=mod.OUT_SPECS, check_vma=mod.CHECK_VMA)
            _, pull = jax.vjp(fn, *args)
            cts = tuple(np.ones_like(np.asarray(r)) for r in res)
            jaxpr = jax.make_jaxpr(lambda *c: pull(c if len(c) > 1 else c[0]))(*cts)
            found = []
            collectives(jaxpr.jaxpr, found)
            entry["backward"] = found
        out.append(entry)
    except Exception:
        out.append({"ok": False, "error": traceback.format_exc(limit=4)})
print("SHARDALG-RESULT " + json.dumps(out))
"""


def _run_jobs(
    jobs: list[dict[str, object]], devices: int, workdir: Path, timeout: float
) -> list[dict[str, object]]:
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}".strip()
    env["JAX_PLATFORMS"] = "cpu"
    proc = run_driver(workdir, _DRIVER, jobs, env=env, timeout=timeout)
    for line in proc.stdout.splitlines():
        if line.startswith("SHARDALG-RESULT "):
            return json.loads(line[len("SHARDALG-RESULT ") :])
    raise UsageError(f"the JAX check did not run (exit {proc.returncode}):\n{proc.stderr[-3000:]}")


def _prepare(plans: object, mesh: Mesh, sizes: Mapping[str, int] | None, seed: int, vjp: bool, workdir: Path):
    flows, expected, jobs = [], [], []
    for k, flow, arrays in check_inputs(plans, mesh, sizes, seed):
        src = export_jax(flow, mesh)
        (workdir / f"plan{k}.py").write_text(src)
        np.savez(workdir / f"in{k}.npz", **{f"arg{i}": a for i, a in enumerate(arrays)})
        jobs.append(
            {
                "module": str(workdir / f"plan{k}.py"),
                "function": "forward",
                "inputs": str(workdir / f"in{k}.npz"),
                "outputs": str(workdir / f"out{k}.npz"),
                "n_inputs": len(arrays),
                "vjp": vjp,
            }
        )
        flows.append(flow)
        expected.append(dense_outputs(flow, arrays, flow.mesh_on(mesh)))
    return flows, expected, jobs


def check_jax(
    plans: object | Sequence[object],
    mesh: Mesh,
    *,
    sizes: Mapping[str, int] | None = None,
    seed: int = 0,
    vjp: bool = False,
    timeout: float = 600.0,
) -> list[CheckResult]:
    """Run the generated JAX code of each plan on ``mesh.devices`` fake CPU devices (one subprocess for
    all of them) and compare with the dense einsum of the same random inputs. With ``vjp``, each result
    also lists the collectives of ``jax.vjp`` of the forward (see :func:`jax_backward_collectives`)."""
    require_extra("jax", "jax", "the JAX check")
    m = a_mesh(mesh, "check_jax")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="shardalg-jax-") as tmp:
        workdir = Path(tmp)
        flows, expected, jobs = _prepare(plans, m, sizes, seed, vjp, workdir)
        runs = _run_jobs(jobs, m.devices, workdir, timeout)
        seconds = time.perf_counter() - start
        results = []
        for k, (flow, exp, run) in enumerate(zip(flows, expected, runs, strict=True)):
            if not run["ok"]:
                results.append(CheckResult(False, float("inf"), str(run["error"]), seconds))
                continue
            data = np.load(workdir / f"out{k}.npz")
            got = [data[f"out{i}"] for i in range(len(flow.outputs))]
            r = compare(flow, exp, got, seconds)
            if vjp:
                r = replace(r, backward=tuple((op, tuple(axes)) for op, axes in run["backward"]))
            results.append(r)
    return results


def jax_backward_collectives(
    plans: object | Sequence[object],
    mesh: Mesh | str,
    *,
    sizes: Mapping[str, int] | None = None,
    seed: int = 0,
) -> list[list[tuple[str, tuple[str, ...]]]]:
    """For each plan (one subprocess for all): the collectives in the jaxpr of ``jax.vjp`` of the generated
    forward, as (op, sorted axes) in program order. The forward is rematerialized as shardalg's backward
    assumes (every value is kept except the copies an AllGather makes, which are gathered again)."""
    out = []
    for r in check_jax(plans, mesh, sizes=sizes, seed=seed, vjp=True):
        if r.backward is None:
            raise UsageError(f"the JAX vjp did not run:\n{r.message}")
        out.append(list(r.backward))
    return out
