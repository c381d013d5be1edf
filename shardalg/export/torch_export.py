"""A plan as ``torch.distributed`` code: a function of this rank's blocks and the process groups per axis.

    >>> print(export_torch(plan, Mesh(X=4, Y=2)))

Ranks are mesh coordinates row-major (the last axis fastest), as in JAX and in shardalg's executor. The
generated module makes one process group per set of mesh axes the plan communicates over
(``make_groups()``, called on every rank), and ``forward(*blocks, groups)`` runs the steps:

| shardalg | torch.distributed |
|---|---|
| AllGather_A on dim d | ``all_gather_single`` (``all_gather_into_tensor`` before torch 2.13), blocks concatenated on d |
| ReduceScatter_{A,d} | ``reduce_scatter_single`` (``reduce_scatter_tensor``) of the blocks of d |
| AllReduce_A | ``all_reduce`` |
| AllToAll_{A,d} | ``all_to_all_single`` of the blocks of d, received blocks concatenated on the source dim |
| Slice / its transpose | ``narrow`` at this rank's index / zeros with the block written in place |
| Permute | ``batch_isend_irecv``: one shard to one peer |
| local einsum | ``torch.einsum`` |

``torch.distributed.new_group`` sorts its ranks, so a group's rank order is the mesh order of its axes; an
op over axes in another order (``I_YX`` gathered over Y, X) passes the block order explicitly.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import textwrap
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from shardalg.algebra.mesh import Mesh, as_mesh
from shardalg.errors import ShardalgError, UsageError
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
from .flow import Flow, node_text, step_text
from .harness import CheckResult, check_inputs, compare, dense_outputs, dense_value, run_driver
from .permute import permute_sources
from .specs import placements_source

__all__ = ["export_torch", "check_torch"]

_HELPERS = '''
_gather_into = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_scatter_from = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def mesh_coords(rank):
    """The mesh coordinates of a global rank (row-major: the last axis fastest)."""
    out = []
    for n in reversed(MESH_SHAPE):
        out.append(rank % n)
        rank //= n
    return tuple(reversed(out))


def axis_index(axes):
    """This rank's index along ``axes`` (the first axis major)."""
    c, r = mesh_coords(dist.get_rank()), 0
    for a in axes:
        i = MESH_AXES.index(a)
        r = r * MESH_SHAPE[i] + c[i]
    return r


def make_groups():
    """One process group per set of axes in GROUPS, holding this rank. Every rank must call it."""
    me, groups = mesh_coords(dist.get_rank()), {}
    for axes in GROUPS:
        fixed = [i for i, a in enumerate(MESH_AXES) if a not in axes]
        for rest in itertools.product(*(range(MESH_SHAPE[i]) for i in fixed)):
            ranks = [r for r in range(WORLD) if all(mesh_coords(r)[i] == v for i, v in zip(fixed, rest))]
            group = dist.new_group(ranks)
            if all(me[i] == v for i, v in zip(fixed, rest)):
                groups[axes] = group
    return groups


def _by_rank(blocks, order):
    """Blocks in position order -> blocks in group-rank order (position p lives on group rank order[p])."""
    if order is None:
        return blocks
    out = [None] * len(blocks)
    for p, r in enumerate(order):
        out[r] = blocks[p]
    return out


def _all_gather(x, group, dim, order=None):
    n = dist.get_world_size(group)
    x = x.contiguous()
    out = x.new_empty((n * x.shape[0],) + tuple(x.shape[1:]))
    _gather_into(out, x, group=group)
    blocks = list(out.chunk(n, dim=0))
    if order is not None:
        blocks = [blocks[r] for r in order]
    return torch.cat(blocks, dim=dim)


def _reduce_scatter(x, group, dim, order=None):
    n = dist.get_world_size(group)
    blocks = _by_rank(list(x.chunk(n, dim=dim)), order)
    out = torch.empty_like(blocks[0].contiguous())
    _scatter_from(out, torch.cat([b.contiguous() for b in blocks], dim=0), group=group)
    return out


def _all_reduce(x, group):
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out


def _all_to_all(x, group, split_dim, concat_dim, order=None):
    n = dist.get_world_size(group)
    blocks = _by_rank(list(x.chunk(n, dim=split_dim)), order)
    sent = torch.cat([b.contiguous() for b in blocks], dim=0)
    got = torch.empty_like(sent)
    dist.all_to_all_single(got, sent, group=group)
    parts = list(got.chunk(n, dim=0))
    if order is not None:
        parts = [parts[r] for r in order]
    return torch.cat(parts, dim=concat_dim)


def _slice(x, axes, dim, n):
    k = x.shape[dim] // n
    return x.narrow(dim, axis_index(axes) * k, k).contiguous()


def _zero_pad(x, axes, dim, n):
    shape = list(x.shape)
    shape[dim] *= n
    out = x.new_zeros(shape)
    out.narrow(dim, axis_index(axes) * x.shape[dim], x.shape[dim]).copy_(x)
    return out


def _permute(x, sources):
    """Rank r receives the shard of rank sources[r]."""
    me = dist.get_rank()
    src, dst = sources[me], sources.index(me)
    if src == me:
        return x.clone()
    buf = torch.empty_like(x)
    ops = [dist.P2POp(dist.isend, x.contiguous(), dst), dist.P2POp(dist.irecv, buf, src)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    return buf
'''


def _order(axes: Sequence[str], mesh: Mesh) -> tuple[tuple[str, ...], list[int] | None]:
    """The group (axes in mesh order) and, when ``axes`` are in another order, position -> group rank."""
    group = tuple(a for a in mesh.names if a in axes)
    if tuple(axes) == group:
        return group, None
    order = []
    for coords in itertools.product(*(range(mesh.size(a)) for a in axes)):
        at = dict(zip(axes, coords, strict=True))
        r = 0
        for a in group:
            r = r * mesh.size(a) + at[a]
        order.append(r)
    return group, order


class _Body(Body):
    """The emitter state, and the process groups (sets of mesh axes) the code communicates over."""

    def __init__(self, flow: Flow, mesh: Mesh) -> None:
        super().__init__(flow, mesh)
        self.groups: list[tuple[str, ...]] = []

    def group(self, axes: Sequence[str]) -> tuple[str, str]:
        """(``groups[...]`` source, ``, order=[...]`` source or '')."""
        group, order = _order(axes, self.mesh)
        if group not in self.groups:
            self.groups.append(group)
        return f"groups[{group!r}]", "" if order is None else f", order={order!r}"


def _all_gather(b: _Body, s: Step) -> None:
    (t,) = s.inputs
    cur, y = b.var(t), b.var(s.output)
    for d, removed in removed_suffixes(t, s.output).items():
        g, order = b.group(removed)
        b.lines.append(f"{y} = _all_gather({cur}, {g}, dim={d}{order})")
        cur = y


def _reduce_scatter(b: _Body, s: Step) -> None:
    (t,) = s.inputs
    ((d, added),) = appended_suffixes(t, s.output).items()
    g, order = b.group(added)
    b.lines.append(f"{b.var(s.output)} = _reduce_scatter({b.var(t)}, {g}, dim={d}{order})")


def _all_reduce(b: _Body, s: Step) -> None:
    (t,) = s.inputs
    g, _ = b.group(tuple(a for a in b.mesh.names if a in s.axes))
    b.lines.append(f"{b.var(s.output)} = _all_reduce({b.var(t)}, {g})")


def _all_to_all(b: _Body, s: Step) -> None:
    (t,) = s.inputs
    gone = removed_suffixes(t, s.output)
    added = appended_suffixes(t, s.output)
    if len(gone) != 1 or len(added) != 1:
        raise UsageError(f"{step_text(s)}: an AllToAll moves axes from one dim to one other dim")
    ((src, moved),) = gone.items()
    ((dst, _),) = added.items()
    g, order = b.group(moved)
    b.lines.append(f"{b.var(s.output)} = _all_to_all({b.var(t)}, {g}, split_dim={dst}, concat_dim={src}{order})")


def _slice(b: _Body, s: Step) -> None:
    (t,) = s.inputs
    if is_zero_pad(s):
        ((d, moved),) = removed_suffixes(t, s.output).items()
        n = b.mesh.group_size(moved)
        b.lines.append(f"{b.var(s.output)} = _zero_pad({b.var(t)}, {tuple(moved)!r}, dim={d}, n={n})")
        return
    ((d, added),) = appended_suffixes(t, s.output).items()
    n = b.mesh.group_size(added)
    b.lines.append(f"{b.var(s.output)} = _slice({b.var(t)}, {tuple(added)!r}, dim={d}, n={n})")


def _permute(b: _Body, s: Step) -> None:
    (t,) = s.inputs
    coords = list(itertools.product(*(range(n) for n in b.mesh.shape)))
    rank = {c: r for r, c in enumerate(coords)}
    sources = permute_sources(t, s.output, b.mesh)
    table = [rank[sources[c]] for c in coords]
    b.lines.append(f"{b.var(s.output)} = _permute({b.var(t)}, {table!r})")


def _shift(b: _Body, s: Step) -> None:
    """``Shift_{X,k}``: rank c receives from the rank whose X coordinate is c_X - k (the _permute helper)."""
    (t,) = s.inputs
    (axis,) = s.axes
    at, n = b.mesh.names.index(axis), b.mesh.shape[b.mesh.names.index(axis)]
    assert s.offset is not None and n is not None
    coords = list(itertools.product(*(range(m) for m in b.mesh.shape)))
    rank = {c: r for r, c in enumerate(coords)}
    table = [rank[c[:at] + ((c[at] - s.offset) % n,) + c[at + 1 :]] for c in coords]
    b.lines.append(f"{b.var(s.output)} = _permute({b.var(t)}, {table!r})  # Shift_{{{axis},{s.offset:+d}}}")


def _einsum(b: _Body, s: Step) -> None:
    left, right = s.inputs
    spec = einsum_subscripts(left, right, s.output)
    b.lines.append(f"{b.var(s.output)} = torch.einsum({spec!r}, {b.var(left)}, {b.var(right)})")


_EMIT: dict[Op, Callable[[_Body, Step], None]] = {
    Op.ALL_GATHER: _all_gather,
    Op.REDUCE_SCATTER: _reduce_scatter,
    Op.ALL_REDUCE: _all_reduce,
    Op.ALL_TO_ALL: _all_to_all,
    Op.SLICE: _slice,
    Op.PERMUTE: _permute,
    Op.SHIFT: _shift,
    Op.EINSUM: _einsum,
}


def _placements_note(t: Tensor, mesh: Mesh) -> str:
    try:
        return placements_source(t, mesh)
    except ShardalgError:
        return "(no DTensor spelling: a dim's axes are not in mesh order)"


def export_torch(
    plan_or_program: object,
    mesh: Mesh | str,
    *,
    sizes: Mapping[str, int] | None = None,
    name: str = "forward",
) -> str:
    """Python source of a module whose ``name(*blocks, groups)`` runs the plan on this rank's blocks."""
    m, flow = start(plan_or_program, mesh, sizes)
    body = _Body(flow, m)
    body.emit_steps(_EMIT, "torch.distributed")
    body.lines.append("return " + ", ".join(body.var(t) for t in flow.outputs))
    args = ", ".join(body.var(t) for t in flow.inputs)
    shapes = "\n".join(
        f"        {body.var(t)}: {node_text(t)}, DTensor placements {_placements_note(t, m)}" for t in flow.inputs
    )
    outs = "\n".join(
        f"        {body.var(t)}: {node_text(t)}, DTensor placements {_placements_note(t, m)}" for t in flow.outputs
    )
    names, shape = tuple(m.names), tuple(m.shape)
    return f'''"""{generated_by(flow, m)} ({m.devices} ranks, row-major: the last axis fastest).

On every rank, after dist.init_process_group(world_size={m.devices}):
    groups = make_groups()
    outputs = {name}({args}{", " if args else ""}groups)
with each argument this rank's block (an unreduced value: this rank's partial sum).
"""

import itertools

import torch
import torch.distributed as dist

MESH_AXES = {names!r}
MESH_SHAPE = {shape!r}
WORLD = {m.devices}
GROUPS = {body.groups!r}
{_HELPERS}

def {name}({args}{", " if args else ""}groups):
    """The plan on this rank's blocks.

    inputs:
{shapes}
    returns:
{outs}
    """
{textwrap.indent(chr(10).join(body.lines), "    ")}
'''


# ------------------------------------------------------------------------------------ running it
_DRIVER = r'''
import datetime, importlib.util, json, multiprocessing as mp, os, sys, traceback
import numpy as np
import torch
import torch.distributed as dist

def load(path):
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

def work(rank, world, store, jobs):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    for job in jobs:
        try:
            mod = load(job["module"])
            groups = mod.make_groups()
            data = np.load(job["inputs"].format(rank=rank))
            args = [torch.from_numpy(data[f"arg{i}"]) for i in range(job["n_inputs"])]
            res = mod.forward(*args, groups)
            res = res if isinstance(res, tuple) else (res,)
            np.savez(job["outputs"].format(rank=rank), **{f"out{i}": r.numpy() for i, r in enumerate(res)})
        except Exception:
            with open(job["outputs"].format(rank=rank) + ".err", "w") as f:
                f.write(traceback.format_exc(limit=4))
    dist.destroy_process_group()

if __name__ == "__main__":
    jobs, world, store = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3]
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=work, args=(r, world, store, jobs)) for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    print("SHARDALG-EXIT " + json.dumps([p.exitcode for p in procs]))
'''


def check_torch(
    plans: object | Sequence[object],
    mesh: Mesh | str,
    *,
    sizes: Mapping[str, int] | None = None,
    seed: int = 0,
    timeout: float = 600.0,
) -> list[CheckResult]:
    """Run the generated torch code of each plan on ``mesh.devices`` gloo processes (forked from one
    subprocess that imports torch once) and compare the reassembled outputs with the dense einsum."""
    from shardalg.numeric.execute import ExecutionError, shard, unshard

    m = as_mesh(mesh)
    assert m is not None
    coords = list(itertools.product(*(range(n) for n in m.shape)))
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="shardalg-torch-") as tmp:
        work = Path(tmp)
        flows, expected, jobs = [], [], []
        for k, flow, arrays in check_inputs(plans, m, sizes, seed):
            rng = np.random.default_rng(seed + k)
            blocks = [shard(dense_value(t, a), t, m, rng) for t, a in zip(flow.inputs, arrays, strict=True)]
            for r, c in enumerate(coords):
                np.savez(work / f"in{k}_{r}.npz", **{f"arg{i}": b[c].astype(np.float32) for i, b in enumerate(blocks)})
            (work / f"plan{k}.py").write_text(export_torch(flow, m))
            jobs.append({
                "module": str(work / f"plan{k}.py"), "inputs": str(work / f"in{k}_{{rank}}.npz"),
                "outputs": str(work / f"out{k}_{{rank}}.npz"), "n_inputs": len(arrays),
            })  # fmt: skip
            flows.append(flow)
            expected.append(dense_outputs(flow, arrays, m))
        env = dict(os.environ, OMP_NUM_THREADS="1")
        proc = run_driver(work, _DRIVER, jobs, str(m.devices), str(work / "store"), env=env, timeout=timeout)
        if "SHARDALG-EXIT" not in proc.stdout:
            raise UsageError(f"the torch check did not run (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        seconds = time.perf_counter() - start
        results = []
        for k, flow in enumerate(flows):
            errs = sorted(work.glob(f"out{k}_*.npz.err"))
            if errs:
                results.append(CheckResult(False, float("inf"), errs[0].read_text(), seconds))
                continue
            try:
                got = []
                for i, t in enumerate(flow.outputs):
                    bufs = {c: np.load(work / f"out{k}_{r}.npz")[f"out{i}"] for r, c in enumerate(coords)}
                    value = unshard(bufs, t, m)
                    got.append(value[None] if t.unreduced else value)
                results.append(compare(flow, expected[k], got, seconds))
            except (ExecutionError, FileNotFoundError) as err:
                results.append(CheckResult(False, float("inf"), str(err), seconds))
    return results
