"""Audits of PyTorch DTensor modules, as far as DTensor's public API goes.

``FILE.py:FUNCTION`` names a function that takes a ``DeviceMesh`` and returns ``(module, inputs)``. It runs on
one gloo process per mesh device (forked from one subprocess, as the torch export's check does); the module's
forward runs under ``torch.distributed.tensor.debug.CommDebugMode`` and a ``TorchFunctionMode`` that records
every ``F.linear`` / ``matmul`` with its operands' DTensor placements (and every ``F.silu``, ``F.relu`` and
``F.gelu(approximate="tanh")``, the notation's functions; gelu's erf form, PyTorch's default, is not the
notation's gelu: its value is the operand primed, as another op's of one named value), and the backward of the
sum of the output under another ``CommDebugMode``.

In the notation: each product is a statement (``Shard(d)`` on a mesh dim is that axis on dim ``d``,
``Partial`` is ``{U_axis}``, ``Replicate`` nothing), and so is each recognised function; where the module's
output leaves the last statement in another placement (RowwiseParallel's Partial -> Replicate), a resharding
statement. CommDebugMode counts collectives by type, not by group: on a mesh of one axis each is over that
axis; on a larger mesh the report compares counts per type and says that the axes were not read. The
comparison: the forward counts against the collectives of shardalg's best plan of each statement (under the
cost model), the backward counts against shardalg's derived backward of the program.

torch is imported only in the subprocess (the driver is text run with this Python).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from typing import Any

from shardalg.algebra.mesh import Mesh, a_mesh
from shardalg.api import plans as all_plans
from shardalg.costs.costmodel import CostModel
from shardalg.errors import ShardalgError, UsageError
from shardalg.export.harness import require_extra, run_driver
from shardalg.notation.parse import parse
from shardalg.planning.backward import backward as derive_backward

from .records import LETTERS, Layout, dtype_of
from .run import DEFAULT_CHIP, _defines

__all__ = ["DTensorAudit", "audit_dtensor", "COLLECTIVES"]

COLLECTIVES: dict[str, str] = {  # CommDebugMode's functional collectives -> the notation's
    "all_reduce": "AllReduce",
    "all_gather_into_tensor": "AllGather",
    "reduce_scatter_tensor": "ReduceScatter",
    "all_to_all_single": "AllToAll",
    "broadcast": "Broadcast",
}

_DRIVER = r'''
import datetime, importlib.util, json, multiprocessing as mp, os, sys, traceback, warnings
warnings.filterwarnings("ignore")
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.debug import CommDebugMode
from torch.overrides import TorchFunctionMode

PRODUCTS = {F.linear: "linear", torch.matmul: "matmul", torch.Tensor.__matmul__: "matmul", torch.mm: "matmul"}
FUNCTIONS = {F.silu: "silu", F.relu: "relu", torch.relu: "relu", F.gelu: "gelu"}


def function_of(func, kwargs):
    """The notation's function a torch call is, else None: gelu only in its tanh form (the notation's gelu;
    PyTorch's default is the erf form)."""
    op = FUNCTIONS.get(func)
    if op == "gelu" and (kwargs or {}).get("approximate", "none") != "tanh":
        return None
    return op


def info(t, name):
    """A tensor as a call's record holds it: its name, shape, dtype and DTensor placements (None: a plain
    tensor)."""
    return {"name": name, "shape": list(t.shape), "dtype": str(t.dtype), "placements": placements(t)}


def placements(t):
    if not isinstance(t, DTensor):
        return None
    out = []
    for p in t.placements:
        if p.is_shard():
            out.append(["S", p.dim])
        elif p.is_partial():
            out.append(["P", None])
        else:
            out.append(["R", None])
    return out


def key(t):
    """A value by its data: a DTensor re-wrapped by a module's hook (from_local, a redistribute to the same
    placements) shares its local tensor's storage, and so does the local shard an op computes on, so they
    keep its name."""
    local = t.to_local() if isinstance(t, DTensor) else t
    return local.data_ptr()


class Record(TorchFunctionMode):
    """Every product and recognised function with its operands' names, shapes and placements; a value made
    from one named value of the same shape (an activation, a view) takes that value's name."""

    def __init__(self, names):
        super().__init__()
        self.names, self.calls, self.made = names, [], 0
        self.seen = {}  # each recorded result by name, as the program holds it (global shape, placements)

    def name(self, t, fresh=False):
        if fresh and key(t) not in self.names:
            self.names[key(t)] = f"A{sum(n.startswith('A') for n in self.names.values()) + 1}"
        return self.names.get(key(t))

    def describe(self, t, name):
        """``t`` as the program holds it: a DTensor by its own global shape and placements; a plain tensor
        that is a recorded value's local shard (a ParallelStyle hands its module's output on as its local
        tensor) as that value; None for another plain tensor."""
        if isinstance(t, DTensor):
            return info(t, name)
        held = self.seen.get(name)
        return None if held is None else {**held, "name": name, "dtype": str(t.dtype)}

    def result(self, out, described):
        self.made += 1
        name = f"H{self.made}"
        self.names[key(out)] = name
        self.seen[name] = described
        return {**described, "name": name}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in PRODUCTS:
            a, b = args[0], args[1]
            ins = [info(x, self.name(x, fresh=True)) for x in (a, b)]
            made = self.result(out, info(out, None))
            self.calls.append({"kind": PRODUCTS[func], "args": ins, "out": made})
        elif isinstance(out, torch.Tensor) and key(out) not in self.names:
            op = function_of(func, kwargs)
            x = args[0] if args and isinstance(args[0], torch.Tensor) else None
            name = self.name(x) if op is not None and x is not None else None
            arg = self.describe(x, name) if name else None
            if arg is not None and x.shape == out.shape:  # elementwise: the result is laid out as its operand
                made = self.result(out, self.describe(out, None) or {**arg, "dtype": str(out.dtype)})
                self.calls.append({"kind": "function", "op": op, "args": [arg], "out": made})
                return out
            named = [x for x in args if isinstance(x, torch.Tensor) and self.name(x) and x.shape == out.shape]
            if len(named) == 1:
                base = self.name(named[0]).rstrip("'")
                self.names[key(out)] = base + "'"
        return out


def load(path, function):
    spec = importlib.util.spec_from_file_location("shardalg_dtensor_audit", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, function)


def work(rank, world, store, job):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    try:
        mesh = init_device_mesh("cpu", tuple(job["sizes"]), mesh_dim_names=tuple(job["names"]))
        fn = load(job["file"], job["function"])
        if not callable(fn):
            raise TypeError(f"{job['function']} is not a function")
        torch.manual_seed(0)
        module, inputs = fn(mesh)
        inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        names = {key(p): "W" + "".join(ch for ch in n.removesuffix(".weight") if ch.isalnum()) for n, p in module.named_parameters()}
        for k, x in enumerate(inputs):
            names[key(x)] = f"in{k}"
        rec, fwd, bwd = Record(names), CommDebugMode(), CommDebugMode()
        with fwd, rec:
            out = module(*inputs)
        with bwd:
            out.sum().backward()
        result = {
            "ok": True,
            "calls": rec.calls,
            "output": placements(out),
            "forward": {str(k): v for k, v in fwd.get_comm_counts().items()},
            "backward": {str(k): v for k, v in bwd.get_comm_counts().items()},
        }
    except Exception as err:
        result = {"ok": False, "error": f"{type(err).__name__}: {err}".splitlines()[0]}
    if rank == 0:
        with open(job["out"], "w") as f:
            json.dump(result, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    (job,) = json.load(open(sys.argv[1]))
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=work, args=(r, job["world"], job["store"], job)) for r in range(job["world"])]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    print("SHARDALG-EXIT " + json.dumps([p.exitcode for p in procs]))
'''


@dataclass
class DTensorAudit:
    """The module's products and recognised functions in the notation, DTensor's collective counts and
    shardalg's, forward and backward; ``notes`` say what was assumed or not read."""

    name: str
    program: list[str]
    sizes: dict[str, int]
    mesh: dict[str, int]
    forward: Counter
    backward: Counter
    shardalg_forward: Counter
    shardalg_backward: Counter
    forward_plans: list[str]
    backward_text: str
    notes: list[str] = field(default_factory=list)

    @property
    def forward_matches(self) -> bool:
        return self.forward == self.shardalg_forward

    @property
    def backward_matches(self) -> bool:
        return self.backward == self.shardalg_backward

    def text(self) -> str:
        mesh = ", ".join(f"{k}={n}" for k, n in self.mesh.items())
        lines = [
            f"# DTensor audit of {self.name} on {len(self.mesh) and prod(self.mesh.values())} gloo processes, mesh {mesh}"
        ]
        lines += ["# the module's products and functions, in DTensor's placements", *self.program]

        def fmt(c: Counter) -> str:
            return ", ".join(f"{k} x{n}" for k, n in sorted(c.items())) or "none"

        lines.append(
            f"# forward: DTensor {fmt(self.forward)}; shardalg's best plans {fmt(self.shardalg_forward)}"
            f" ({'the same' if self.forward_matches else 'they differ'})"
        )
        lines.append(
            f"# backward: DTensor {fmt(self.backward)}; shardalg's derived backward {fmt(self.shardalg_backward)}"
            f" ({'the same' if self.backward_matches else 'they differ'})"
        )
        lines += [f"# note: {n}" for n in self.notes]
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        return {
            "function": self.name,
            "mesh": self.mesh,
            "sizes": self.sizes,
            "program": self.program,
            "forward": dict(sorted(self.forward.items())),
            "backward": dict(sorted(self.backward.items())),
            "shardalg_forward": dict(sorted(self.shardalg_forward.items())),
            "shardalg_backward": dict(sorted(self.shardalg_backward.items())),
            "forward_matches": self.forward_matches,
            "backward_matches": self.backward_matches,
            "notes": self.notes,
        }


def _counts(raw: Mapping[str, int], names: Sequence[str], notes: list[str]) -> Counter:
    out: Counter = Counter()
    for key, n in raw.items():
        short = key.rsplit(".", 1)[-1]
        op = COLLECTIVES.get(short)
        if op is None:
            notes.append(f"{key} x{n}: a collective the notation has no name for")
            op = short
        out[op if len(names) != 1 else f"{op}_{names[0]}"] += n
    return out


class _Dims:
    def __init__(self) -> None:
        self.parent: dict[tuple[str, int], tuple[str, int]] = {}

    def find(self, x: tuple[str, int]) -> tuple[str, int]:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            x = self.parent[x]
        return x

    def union(self, a: tuple[str, int], b: tuple[str, int]) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def _statements(
    calls: list[dict[str, Any]], names: Sequence[str]
) -> tuple[list[str], dict[str, int], str | None]:
    """The products and the recognised functions (silu, relu, gelu's tanh form) as notation text, the dims'
    sizes, and the last statement's result."""
    dims = _Dims()
    for c in calls:
        if c["kind"] == "function":  # elementwise: its operand's dims are its result's
            (a,), out = c["args"], c["out"]
            for k in range(len(a["shape"])):
                dims.union((a["name"], k), (out["name"], k))
                dims.union((a["name"].rstrip("'"), k), (out["name"], k))
            continue
        (a, b), out = c["args"], c["out"]
        ra, rb = len(a["shape"]), len(b["shape"])
        if c["kind"] == "linear":  # x[..., D] · W[F, D] -> y[..., F]
            dims.union((a["name"], ra - 1), (b["name"], 1))
            dims.union((out["name"], ra - 1), (b["name"], 0))
        else:  # a[..., I, J] · b[..., J, K] -> c[..., I, K]
            dims.union((a["name"], ra - 1), (b["name"], rb - 2))
            dims.union((out["name"], ra - 1), (b["name"], rb - 1))
        for k in range(ra - 1):
            dims.union((a["name"].rstrip("'"), k), (out["name"], k))
            dims.union((a["name"], k), (out["name"], k))
        if a["name"].endswith("'"):  # an activation of a value keeps its dims
            for k in range(ra):
                dims.union((a["name"], k), (a["name"].rstrip("'"), k))
    letters: dict[tuple[str, int], str] = {}
    pool = iter(LETTERS)
    sizes: dict[str, int] = {}

    def layout(t: dict[str, Any]) -> Layout:
        axes: list[list[str]] = [[] for _ in t["shape"]]
        unreduced: list[str] = []
        for axis, (kind, dim) in zip(names, t["placements"] or [["R", None]] * len(names), strict=True):
            if kind == "S":
                axes[dim].append(axis)
            elif kind == "P":
                unreduced.append(axis)
        out = []
        for k, n in enumerate(t["shape"]):
            root = dims.find((t["name"], k))
            if root not in letters:
                letters[root] = next(pool)
            sizes[letters[root]] = n
            out.append((letters[root], tuple(axes[k])))
        return Layout(t["name"], tuple(out), tuple(unreduced), dtype_of(t["dtype"]))

    lines = []
    last = None
    for c in calls:
        if c["kind"] == "function":
            a, out = layout(c["args"][0]), layout(c["out"])
            lines.append(f"{c['op']}({a.text()}) -> {out.text()}")
        else:
            a, b, out = (layout(x) for x in (*c["args"], c["out"]))
            local = " *_LOCAL " if out.unreduced else " · "
            lines.append(f"{a.text()}{local}{b.text()} -> {out.text()}")
        last = out
    return lines, sizes, (last.text() if last is not None else None)


def audit_dtensor(
    target: str, mesh: Mesh, *, hw: object = None, overlap: object = None, timeout: float = 600.0
) -> DTensorAudit:
    """Run ``FILE.py:FUNCTION`` (see the module docstring) on ``mesh.devices`` gloo processes."""
    require_extra("torch", "torch", "a DTensor audit")
    file, sep, function = str(target).rpartition(":")
    if not sep or not file or not function:
        raise UsageError(f"an audit target is FILE.py:FUNCTION, not {target!r}")
    _defines(file, function)
    m = a_mesh(mesh, "a DTensor audit")
    names = list(m.names)
    with tempfile.TemporaryDirectory(prefix="shardalg-dtensor-") as tmp:
        work = Path(tmp)
        job = {
            "file": str(Path(file).resolve()),
            "function": function,
            "names": names,
            "sizes": [a.size for a in m],
            "world": m.devices,
            "store": str(work / "store"),
            "out": str(work / "result.json"),
        }
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
        proc = run_driver(work, _DRIVER, [job], env=env, timeout=timeout)
        result_file = work / "result.json"
        if "SHARDALG-EXIT" not in proc.stdout or not result_file.is_file():
            raise UsageError(
                f"the DTensor audit did not run (exit {proc.returncode}):\n{proc.stderr[-2000:]}"
            )
        result = json.loads(result_file.read_text())
    if not result["ok"]:
        raise UsageError(f"{target}: {result['error']}")
    notes: list[str] = []
    if len(names) > 1:
        notes.append("CommDebugMode counts collectives by type, not by group: their axes were not read")
    program, sizes, last = _statements(result["calls"], names)
    if not program:
        raise UsageError(f"{target}: the module ran no F.linear or matmul on DTensors")
    # the module's output: where it leaves the last product in another placement, a resharding
    final = result["output"]
    if last is not None:
        lhs = parse(last).statements[0]
        target_axes = final or [["R", None]] * len(names)
        dims_axes: list[list[str]] = [[] for _ in lhs.dims]
        for axis, (kind, dim) in zip(names, target_axes, strict=True):
            if kind == "S":
                dims_axes[dim].append(axis)
        out = Layout(
            lhs.name or "?",
            tuple((d.name or "?", tuple(a)) for d, a in zip(lhs.dims, dims_axes, strict=True)),
            tuple(a for a, (k, _) in zip(names, target_axes, strict=True) if k == "P"),
            lhs.dtype.value if lhs.dtype is not None else None,
        )
        if out.text() != last:
            program.append(f"{last} -> {out.text()}")
            if final is None:
                notes.append("the module returns a plain tensor: its output is taken as replicated")
    costs = CostModel.of(hw or DEFAULT_CHIP, None, overlap)
    ours_forward: Counter = Counter()
    plans_text = []
    for st in program:
        best = all_plans(st, m, sizes, hw=costs.chip, overlap=costs.overlap)[0]
        plans_text.append(str(best))
        for s in best.steps:
            if s.op.communicates:
                ours_forward[s.op.value if len(names) != 1 else f"{s.op.value}_{names[0]}"] += 1
    try:
        derived = derive_backward(parse("\n".join(program)), m, sizes)
    except ShardalgError as err:
        raise UsageError(
            f"{target}: shardalg cannot derive the backward of the module's program: {err.message}"
        ) from None
    ours_backward: Counter = Counter(
        op if len(names) != 1 else f"{op}_{names[0]}" for op, _ in derived.collectives
    )
    return DTensorAudit(
        target,
        program,
        sizes,
        dict(zip(names, (a.size for a in m), strict=True)),
        _counts(result["forward"], names, notes),
        _counts(result["backward"], names, notes),
        ours_forward,
        ours_backward,
        plans_text,
        str(derived),
        notes,
    )
