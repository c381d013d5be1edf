"""Flows: a plan, or several chained, as straight-line code with a Python name for every value.

:func:`as_flow` turns what the user gives (a Plan, a Step, a list of plans, a Program, a statement, text,
a backward program) into a :class:`Flow`; :func:`node_text` and :func:`step_text` are how generated code
and error messages show a node.
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from shardalg.algebra.factors import is_subaxis
from shardalg.algebra.mesh import Mesh, a_mesh
from shardalg.algebra.subaxes import axes_in, mesh_is_fine, names_subaxes, refine
from shardalg.errors import UsageError
from shardalg.notation.parse import parse
from shardalg.notation.plan import Plan, Step
from shardalg.notation.printing import text
from shardalg.notation.syntax import Arrow, Collective, Product, Program, Tensor
from shardalg.planning.planner import plan as plan_one

__all__ = ["Flow", "as_flow", "as_jobs", "gradient_note", "node_text", "returns_line", "step_text"]


# ------------------------------------------------------------------------------------ text of nodes
def node_text(node: object) -> str:
    """The node in the notation (the printers when they are there, else a plain rendering)."""
    try:
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
    mesh: Mesh | None = None  # the mesh refined into the factors the plans name (sub-axes), else None
    # a backward's: each returned gradient and the forward inputs it is the gradient of (empty: a forward)
    gradient_of: Mapping[Tensor, tuple[str, ...]] = field(default_factory=dict)

    def mesh_on(self, mesh: Mesh) -> Mesh:
        """The mesh the code runs on: ``mesh``, reshaped into the factors of its sub-axes when the plans
        name any (``X=2, Y=4`` as ``X=2, Y:(1)2=2, Y:(2)2=2``: the same devices in the same order)."""
        return self.mesh if self.mesh is not None else mesh

    def name(self, t: Tensor) -> str:
        return self.names[t]

    def consumers(self, t: Tensor) -> list[Step]:
        return [s for s in self.steps if t in s.inputs]


# Names the generated modules (export/jax.py, export/torch_export.py) define or use themselves, besides
# Python's builtins and keywords: a tensor called one of them gets another variable name, so any tensor name
# works (a tensor called zip, IN_SPECS or make_mesh would otherwise shadow the module's own).
_GENERATED = {
    "jax",
    "jnp",
    "P",
    "NamedSharding",
    "np",
    "torch",
    "dist",
    "itertools",
    "MESH_AXES",
    "MESH_SHAPE",
    "IN_SPECS",
    "OUT_SPECS",
    "CHECK_VMA",
    "WORLD",
    "GROUPS",
    "make_mesh",
    "make_groups",
    "mesh_coords",
    "axis_index",
    "mesh",
    "groups",
    "placed",
    "run",
    "x",
    "s",
    "forward",
    "backward",
}
_RESERVED = frozenset(_GENERATED) | frozenset(dir(builtins))


def _identifier(t: Tensor) -> str:
    base = re.sub(r"\W", "_", t.name or "t") or "t"
    if base[0].isdigit():
        base = "t_" + base
    if keyword.iskeyword(base) or base in _RESERVED or base.startswith("_") or base.endswith("_local"):
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
    if hasattr(obj, "grads") and hasattr(obj, "seeds"):  # a shardalg.planning.backward.BackwardProgram
        # the forward plans it reads statistics of (a core's ring: O's log-sum-exp) run first
        plans = [*getattr(obj, "runs_first", ()), *(g.plan for g in obj.grads)]
        if not plans:  # every gradient is a cotangent passed on unchanged (X + Y -> R: dX and dY are dR)
            passed = "; ".join(getattr(obj, "passed_on", list)())
            raise UsageError(f"nothing to export: the backward runs no step ({passed or 'no gradient'})")
        return plans
    if isinstance(obj, str):
        obj = parse(obj)
    statements = obj.statements if isinstance(obj, Program) else (obj,)
    if isinstance(obj, Program) and sizes is None and obj.sizes:
        sizes = dict(obj.sizes)
    out = [plan_one(s, mesh, sizes) for s in statements if not isinstance(s, Tensor)]
    if not out:
        raise UsageError("nothing to export: the program has no product, collective or resharding")
    return out


def as_flow(obj: object, mesh: Mesh, sizes: Mapping[str, int] | None = None) -> Flow:
    """Chain the plans of ``obj`` into one flow. Inputs are the values no earlier step produced; outputs
    are the plan results no later step reads (at least the last), and for a backward program the gradient
    of each of the forward's inputs."""
    if isinstance(obj, Flow):
        return obj
    m = a_mesh(mesh, "as_flow")
    if not m.is_numeric:
        raise UsageError("export needs a mesh with numeric axis sizes, e.g. X=4,Y=2")
    plans = _plans_of(obj, m, sizes)
    # a backward returns every input's gradient, also one that later steps read (a cotangent passed on
    # unchanged, as the dX of X + A -> R is dR, which A's gradient sums)
    of: list[tuple[str, Tensor]] = list(getattr(obj, "input_gradients", ()))  # (input, its gradient)
    fine: Mesh | None = None
    if any(names_subaxes(p) for p in plans) and not all(mesh_is_fine(m, p) for p in plans):
        r = refine(m, [a for p in plans for a in axes_in(p) if is_subaxis(a)])
        plans, fine, m = [r.expand(p) for p in plans], r.fine, r.fine
        of = [(n, r.expand(t)) for n, t in of]
    produced: set[Tensor] = set()
    inputs: list[Tensor] = []
    steps: list[Step] = []
    ends: list[int] = []  # each plan's end in ``steps``
    for p in plans:
        for t in p.inputs:
            if t not in produced and t not in inputs:
                inputs.append(t)
        for s in p.steps:
            for t in s.inputs:
                if t not in produced and t not in inputs:
                    raise UsageError(
                        f"step {step_text(s)} reads {node_text(t)}, which no earlier step produced"
                    )
            steps.append(s)
            produced.add(s.output)
        ends.append(len(steps))
    # a value a step reads after the plan that made it (an equal value made again, as an accumulated
    # gradient's ``dW + dW' -> dW``, is read before it is made: the last one is an output)
    outputs = [p.output for p, end in zip(plans, ends, strict=True) if not _read(p.output, steps[end:])]
    if not outputs or plans[-1].output not in outputs:
        outputs.append(plans[-1].output)
    outputs.extend(t for _, t in of if t in produced or t in inputs)
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
    gradient_of: dict[Tensor, tuple[str, ...]] = {}
    for n, t in of:
        gradient_of[t] = (*gradient_of.get(t, ()), n)
    return Flow(tuple(inputs), tuple(steps), tuple(outputs), names, title, fine, gradient_of)


def _of(flow: Flow, t: Tensor) -> str:
    """Which inputs a backward flow's output ``t`` is the gradient of: "of X" ("of X and Y" when one tensor is
    both gradients), or "no input's gradient"."""
    of = flow.gradient_of.get(t)
    return f"of {' and '.join(of)}" if of else "no input's gradient"


def gradient_note(flow: Flow, t: Tensor) -> str:
    """What output ``t`` of a backward flow is: "the gradient of X"; "" for a forward flow, whose outputs are
    its results."""
    if not flow.gradient_of:
        return ""
    what = _of(flow, t)
    return what if t not in flow.gradient_of else f"the gradient {what}"


def returns_line(flow: Flow) -> str:
    """For a backward flow, one line naming each returned value and the input it is the gradient of, in the
    order returned (``returns: dW (gradient of W), dA (of A), dR_1 (of X)``); "" for a forward flow."""
    if not flow.gradient_of:
        return ""
    items = []
    for t in flow.outputs:
        what = _of(flow, t)
        items.append(f"{flow.name(t)} ({'gradient ' if not items and t in flow.gradient_of else ''}{what})")
    return "returns: " + ", ".join(items)


def _read(t: Tensor, steps: list[Step]) -> bool:
    """Whether a step of ``steps`` reads ``t`` before one makes it again."""
    for s in steps:
        if t in s.inputs:
            return True
        if s.output == t:
            return False
    return False


def as_jobs(objs: object) -> list[object]:
    """What a check runs: one thing (a Plan, Program, statement, text or Flow) or a list of them. A list
    of Plans inside the list chains into one flow (a backward pass)."""
    if isinstance(objs, Plan | Step | Program | Flow | str | Arrow | Collective | Product | Tensor):
        return [objs]
    if isinstance(objs, list | tuple):
        return list(objs)
    raise UsageError(f"cannot check {type(objs).__name__}: give a plan, a program, or a list of them")
