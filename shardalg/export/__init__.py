"""Plans as code other people run: JAX ``shard_map`` bodies and ``torch.distributed`` calls.

    >>> from shardalg.export import export_jax, export_torch
    >>> print(export_jax(plan, Mesh(X=4, Y=2)))          # a module with ``forward(A, B)``

This package never imports jax or torch at import time: the generators write text, and the checks run the
text in a subprocess (8 fake CPU devices for JAX, gloo processes for torch) against the dense einsum.

What the generators share lives here: a :class:`Flow` (a plan, or several chained, with named variables),
the einsum subscripts of a local product, the dense reference, and the check's report.

Conventions of the generated code (both backends):

- Unreduced values (``C[I, K]{U_X}``) cross the function boundary *stacked*: the global array has an extra
  leading dim, one slot per device group along the unreduced axes (mesh order), and its value is the sum
  over that dim. Inside, each device sees its own partial.
- A Slice step whose axes become unreduced (the transpose of Slice, S -> U) is a zero-pad: each device
  writes its block in place and zeros elsewhere.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import UsageError
from ..mesh import Mesh, as_mesh
from ..plan import Plan, Step
from ..syntax import Arrow, Collective, Op, Product, Program, Tensor

__all__ = [
    "Flow",
    "CheckResult",
    "as_flow",
    "as_jobs",
    "permute_sources",
    "permute_pairs",
    "einsum_subscripts",
    "is_zero_pad",
    "dense_outputs",
    "random_inputs",
    "check_sizes",
    "export_jax",
    "export_torch",
    "check_jax",
    "check_torch",
]

_LAZY = {
    "export_jax": "jax",
    "check_jax": "jax",
    "export_torch": "torch_export",
    "check_torch": "torch_export",
}


def __getattr__(name: str):  # the backends load on first use
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'shardalg.export' has no attribute {name!r}")


# ------------------------------------------------------------------------------------ text of nodes
def node_text(node: object) -> str:
    """The node in the notation (the printers when they are there, else a plain rendering)."""
    try:
        from ..printing import text

        return text(node)
    except ImportError:
        return _plain(node)


def _plain(node: object) -> str:
    if isinstance(node, Tensor):
        dims = ", ".join(d.label + ("_" + "".join(d.axes) if d.axes else "") for d in node.dims)
        extra = ", ".join([f"U_{a}" for a in node.unreduced] + [f"I_{a}" for a in node.invariant])
        return f"{node.name or ''}[{dims}]" + (f"{{{extra}}}" if extra else "")
    if isinstance(node, Arrow):
        return f"{_plain(node.expr)} -> {_plain(node.result)}"
    if isinstance(node, Product):
        dot = "·_LOCAL" if node.local else "·" + (f"_{','.join(node.contract)}" if node.contract else "")
        return f"{_plain(node.left)} {dot} {_plain(node.right)}"
    if isinstance(node, Collective):
        sub = ",".join(node.axes) + (f",{node.dim}" if node.dim else "")
        sub = sub if len(sub) == 1 else "{" + sub + "}"
        return f"{node.op.value}_{sub}({_plain(node.arg)})"
    return str(node)


def step_text(step: Step) -> str:
    return node_text(step.statement())


# ------------------------------------------------------------------------------------ flows
@dataclass(frozen=True)
class Flow:
    """Straight-line code: the inputs, the steps, the outputs, and a Python name for every value."""

    inputs: tuple[Tensor, ...]
    steps: tuple[Step, ...]
    outputs: tuple[Tensor, ...]
    names: Mapping[Tensor, str] = field(default_factory=dict)
    title: tuple[str, ...] = ()

    def name(self, t: Tensor) -> str:
        return self.names[t]

    def consumers(self, t: Tensor) -> list[Step]:
        return [s for s in self.steps if t in s.inputs]


_RESERVED = {"jax", "jnp", "P", "np", "torch", "dist", "mesh", "groups", "forward", "backward", "NamedSharding"}


def _identifier(t: Tensor) -> str:
    base = re.sub(r"\W", "_", t.name or "t") or "t"
    if base[0].isdigit():
        base = "t_" + base
    if keyword.iskeyword(base) or base in _RESERVED or base.startswith("_"):
        base = f"{base.lstrip('_') or 't'}_v"
    return base


def _plans_of(obj: object, mesh: Mesh, sizes: Mapping[str, int] | None) -> list[Plan]:
    """Plans for a Plan, a Step, a list of plans, a Program, a statement, or text."""
    if isinstance(obj, Plan):
        return [obj]
    if isinstance(obj, Step):
        return [Plan(obj.inputs, (obj,), obj.output)]
    if isinstance(obj, list | tuple) and all(isinstance(p, Plan) for p in obj):
        return list(obj)
    if hasattr(obj, "grads") and hasattr(obj, "seeds"):  # a shardalg.backward.BackwardProgram
        return [g.plan for g in obj.grads]
    if isinstance(obj, str):
        from ..parse import parse

        obj = parse(obj)
    from ..planner import plan as plan_one

    statements = obj.statements if isinstance(obj, Program) else (obj,)
    if isinstance(obj, Program) and sizes is None and obj.sizes:
        sizes = dict(obj.sizes)
    out = [plan_one(s, mesh, sizes) for s in statements if not isinstance(s, Tensor)]
    if not out:
        raise UsageError("nothing to export: the program has no product, collective or resharding")
    return out


def as_flow(obj: object, mesh: Mesh | str, sizes: Mapping[str, int] | None = None) -> Flow:
    """Chain the plans of ``obj`` into one flow. Inputs are the values no earlier step produced; outputs
    are the plan results no later step reads (at least the last)."""
    if isinstance(obj, Flow):
        return obj
    m = as_mesh(mesh)
    if m is None or not m.is_numeric:
        raise UsageError("export needs a mesh with numeric axis sizes, e.g. X=4,Y=2")
    plans = _plans_of(obj, m, sizes)
    produced: set[Tensor] = set()
    inputs: list[Tensor] = []
    steps: list[Step] = []
    for p in plans:
        for t in p.inputs:
            if t not in produced and t not in inputs:
                inputs.append(t)
        for s in p.steps:
            for t in s.inputs:
                if t not in produced and t not in inputs:
                    raise UsageError(f"step {step_text(s)} reads {node_text(t)}, which no earlier step produced")
            steps.append(s)
            produced.add(s.output)
    read = {t for s in steps for t in s.inputs}
    outputs = [p.output for p in plans if p.output not in read]
    if not outputs or plans[-1].output not in outputs:
        outputs.append(plans[-1].output)
    outputs = list(dict.fromkeys(outputs))
    for t in inputs:
        for a in t.used_axes:
            m[a]  # UnknownAxis when the mesh lacks it
    names: dict[Tensor, str] = {}
    taken: set[str] = set()
    for t in [*inputs, *(s.output for s in steps)]:
        if t in names:
            continue
        base, k = _identifier(t), 0
        candidate = base
        while candidate in taken:
            k += 1
            candidate = f"{base}_{k}"
        taken.add(candidate)
        names[t] = candidate
    title = tuple(step_text(s) for s in steps)
    return Flow(tuple(inputs), tuple(steps), tuple(outputs), names, title)


def as_jobs(objs: object) -> list[object]:
    """What a check runs: one thing (a Plan, Program, statement, text or Flow) or a list of them. A list
    of Plans inside the list chains into one flow (a backward pass)."""
    if isinstance(objs, Plan | Step | Program | Flow | str | Arrow | Collective | Product | Tensor):
        return [objs]
    if isinstance(objs, list | tuple):
        return list(objs)
    raise UsageError(f"cannot check {type(objs).__name__}: give a plan, a program, or a list of them")


# ------------------------------------------------------------------------------------ step anatomy
def is_zero_pad(step: Step) -> bool:
    """A Slice read backwards (S -> U): its axes leave a dim and become unreduced."""
    if step.op.value == "ZeroPad":
        return True
    (t,) = step.inputs
    return (
        step.op is Op.SLICE
        and bool(step.axes)
        and set(step.axes) <= set(step.output.unreduced)
        and not set(step.axes) & set(t.unreduced)
    )


def _suffix_changes(before: Tensor, after: Tensor) -> tuple[dict[int, tuple[str, ...]], dict[int, tuple[str, ...]]]:
    """Per dim index: the minor-most axes ``after`` dropped, and the ones it appended."""
    removed: dict[int, tuple[str, ...]] = {}
    added: dict[int, tuple[str, ...]] = {}
    for i, (d0, d1) in enumerate(zip(before.dims, after.dims, strict=True)):
        if d0.axes == d1.axes:
            continue
        if len(d1.axes) < len(d0.axes) and d0.axes[: len(d1.axes)] == d1.axes:
            removed[i] = d0.axes[len(d1.axes) :]
        elif len(d1.axes) > len(d0.axes) and d1.axes[: len(d0.axes)] == d0.axes:
            added[i] = d1.axes[len(d0.axes) :]
        else:
            raise UsageError(f"{node_text(before)} -> {node_text(after)}: dim {d0.label} changes other than at its minor end")
    return removed, added


def removed_suffixes(before: Tensor, after: Tensor) -> dict[int, tuple[str, ...]]:
    """Per dim index, the minor-most axes that ``before`` has and ``after`` dropped."""
    return _suffix_changes(before, after)[0]


def appended_suffixes(before: Tensor, after: Tensor) -> dict[int, tuple[str, ...]]:
    """Per dim index, the minor-most axes that ``after`` added to ``before``."""
    return _suffix_changes(before, after)[1]


def einsum_subscripts(left: Tensor, right: Tensor, out: Tensor) -> str:
    """``'ab,bc->ac'`` for ``A[I, J] · B[J, K] -> C[I, K]`` (letters in order of first appearance)."""
    letters: dict[str, str] = {}
    for t in (left, right, out):
        for label in t.dim_names:
            if label not in letters:
                if len(letters) == 26:
                    raise UsageError("an einsum of more than 26 distinct dims")
                letters[label] = "abcdefghijklmnopqrstuvwxyz"[len(letters)]
    for label in out.dim_names:
        if label not in left.dim_names and label not in right.dim_names:
            raise UsageError(f"result dim {label} of {node_text(out)} is in neither operand")

    def sub(t: Tensor) -> str:
        return "".join(letters[label] for label in t.dim_names)

    return f"{sub(left)},{sub(right)}->{sub(out)}"


# ------------------------------------------------------------------------------------ numbers
def check_sizes(flow: Flow, mesh: Mesh, sizes: Mapping[str, int] | None = None) -> dict[str, int]:
    """Sizes for every named dim: the given ones, and small divisible defaults for the rest."""
    from ..execute import default_sizes

    tensors = [*flow.inputs, *(s.output for s in flow.steps)]
    out = default_sizes(tensors, mesh)
    out.update(sizes or {})
    return out


def global_shape(t: Tensor, sizes: Mapping[str, int]) -> tuple[int, ...]:
    from ..execute import dim_extent

    return tuple(dim_extent(d.label, d.size, sizes) for d in t.dims)


def unreduced_in_mesh_order(t: Tensor, mesh: Mesh) -> tuple[str, ...]:
    return tuple(a for a in mesh.names if a in t.unreduced)


def random_inputs(flow: Flow, mesh: Mesh, sizes: Mapping[str, int], seed: int = 0) -> list[np.ndarray]:
    """One float32 array per input; an unreduced input is stacked (leading dim: its partials)."""
    rng = np.random.default_rng(seed)
    out = []
    for t in flow.inputs:
        shape = global_shape(t, sizes)
        lead = mesh.group_size(unreduced_in_mesh_order(t, mesh))
        arr = rng.standard_normal((lead, *shape) if t.unreduced else shape)
        out.append(arr.astype(np.float32))
    return out


def dense_value(t: Tensor, arr: np.ndarray) -> np.ndarray:
    """The value a (stacked, if unreduced) array stands for."""
    return arr.sum(axis=0) if t.unreduced else arr


def dense_outputs(flow: Flow, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The dense computation: collectives are the identity on global values, einsums are einsums."""
    env: dict[Tensor, np.ndarray] = {
        t: dense_value(t, np.asarray(a, dtype=np.float64)) for t, a in zip(flow.inputs, arrays, strict=True)
    }
    for s in flow.steps:
        if s.op is Op.EINSUM:
            left, right = s.inputs
            env[s.output] = np.einsum(einsum_subscripts(left, right, s.output), env[left], env[right])
        else:
            env[s.output] = env[s.inputs[0]]
    return [env[t] for t in flow.outputs]


@dataclass(frozen=True)
class CheckResult:
    """How generated code fared against the dense result: ``ok``, the largest relative error, and why not."""

    ok: bool
    max_error: float
    message: str = ""
    seconds: float = 0.0
    backward: tuple[tuple[str, tuple[str, ...]], ...] | None = None  # JAX: the vjp's collectives, when asked

    def __bool__(self) -> bool:
        return self.ok


def compare(flow: Flow, expected: Sequence[np.ndarray], got: Sequence[np.ndarray], seconds: float) -> CheckResult:
    """Relative max-abs error per output against float32 tolerance."""
    worst = 0.0
    for t, e, g in zip(flow.outputs, expected, got, strict=True):
        g = dense_value(t, np.asarray(g, dtype=np.float64))
        if g.shape != e.shape:
            return CheckResult(False, float("inf"), f"{node_text(t)}: shape {g.shape}, expected {e.shape}", seconds)
        scale = max(1.0, float(np.max(np.abs(e), initial=0.0)))
        worst = max(worst, float(np.max(np.abs(g - e), initial=0.0)) / scale)
    ok = worst < 1e-4
    msg = "" if ok else f"the generated code differs from the dense result by {worst:.3g} (relative)"
    return CheckResult(ok, worst, msg, seconds)


# ------------------------------------------------------------------------------------ permute matching
def _coords(mesh: Mesh) -> list[tuple[int, ...]]:
    import itertools

    return list(itertools.product(*(range(n) for n in mesh.shape)))


def _rank(mesh: Mesh, c: tuple[int, ...], axes: Sequence[str]) -> int:
    r = 0
    for a in axes:
        i = mesh.names.index(a)
        r = r * mesh.shape[i] + c[i]
    return r


def permute_sources(before: Tensor, after: Tensor, mesh: Mesh) -> dict[tuple[int, ...], tuple[int, ...]]:
    """For a Permute step: the device each device receives its shard from. Devices that hold the same
    block (and the same partial) before are matched, in device order, with the devices that need it
    after (the executor's matching): a bijection."""
    swap = _swap_of(before, after)
    new_dims = [tuple(swap.get(a, a) for a in d.axes) for d in before.dims]
    new_unred = tuple(swap.get(a, a) for a in before.unreduced)
    if [d.axes for d in after.dims] != new_dims or sorted(new_unred) != list(after.unreduced):
        raise UsageError(f"{node_text(before)} -> {node_text(after)} is not a swap of two axes")
    old: dict[tuple, list[tuple[int, ...]]] = {}
    new: dict[tuple, list[tuple[int, ...]]] = {}
    for c in _coords(mesh):
        old.setdefault((tuple(_rank(mesh, c, d.axes) for d in before.dims), _rank(mesh, c, before.unreduced)), []).append(c)
        new.setdefault((tuple(_rank(mesh, c, e) for e in new_dims), _rank(mesh, c, new_unred)), []).append(c)
    sizes_old = [mesh.group_size(d.axes) for d in before.dims]
    sizes_new = [mesh.group_size(e) for e in new_dims]
    if sizes_old != sizes_new or set(old) != set(new):
        raise UsageError(f"{node_text(before)} -> {node_text(after)} changes the local shape: not a permute")
    keys_old = {c: k for k, cs in old.items() for c in cs}
    keys_new = {c: k for k, cs in new.items() for c in cs}
    x, y = (mesh.names.index(a) for a in sorted(swap)[:2]) if swap else (0, 0)
    if swap and mesh.shape[x] == mesh.shape[y]:  # the plain swap of the two coordinates, when it works
        swapped = {c: tuple(c[y] if i == x else c[x] if i == y else v for i, v in enumerate(c)) for c in keys_new}
        if all(keys_old[swapped[c]] == keys_new[c] for c in keys_new):
            return swapped
    out: dict[tuple[int, ...], tuple[int, ...]] = {}
    for key, dsts in new.items():
        for src, dst in zip(old[key], dsts, strict=True):
            out[dst] = src
    return out


def _swap_of(before: Tensor, after: Tensor) -> dict[str, str]:
    """The two axes a permute swaps, read off the layouts."""
    pairs = {
        (a, b)
        for d0, d1 in zip(before.dims, after.dims, strict=True)
        for a, b in zip(d0.axes, d1.axes, strict=False)
        if a != b
    }
    pairs |= {(a, b) for a, b in zip(before.unreduced, after.unreduced, strict=False) if a != b}
    names = {x for p in pairs for x in p}
    if len(names) != 2 and pairs:
        raise UsageError(f"{node_text(before)} -> {node_text(after)} is not a swap of two axes")
    if not pairs:
        return {}
    x, y = sorted(names)
    return {x: y, y: x}


def permute_pairs(before: Tensor, after: Tensor, mesh: Mesh) -> tuple[tuple[str, ...], list[tuple[int, int]]]:
    """The permute as one ``ppermute`` over the axes whose coordinates change: (axes in mesh order,
    [(source index, destination index)] over those axes). A UsageError when the matching moves data
    differently in different slices of the other axes."""
    sources = permute_sources(before, after, mesh)
    changed = sorted({i for dst, src in sources.items() for i in range(len(dst)) if dst[i] != src[i]})
    axes = tuple(mesh.names[i] for i in changed) or (mesh.names[0],)
    pairs: dict[int, int] = {}
    for dst, src in sources.items():
        d_lin, s_lin = _rank(mesh, dst, axes), _rank(mesh, src, axes)
        if pairs.setdefault(d_lin, s_lin) != s_lin:
            raise UsageError(f"{node_text(before)} -> {node_text(after)}: the shards move differently on different devices")
    return axes, sorted((s, d) for d, s in pairs.items())
