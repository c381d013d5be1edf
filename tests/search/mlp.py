"""The MLP block of seed 002 §4 (In[B, D] · W_in[D, F] -> Tmp[B, F]; Tmp · W_out[F, D] -> Out[B, D]) under the
book's four strategies, planned and costed by the engine. Only the layer's shardings are typed: the forward
plans come from the planner, the backward program from ``backward``, the costs from ``cost``.

The overlap policy is one parameter: ``steady`` (compute and communication overlap: the layer-level view,
``overlap=True`` of today's cost engine) or ``serial`` (they add up: ``overlap=False``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import sympy

import shardalg as sa
from shardalg.algebra.symbols import axis_size, device_count, dim_size, links, quantity
from shardalg.costs.plancost import PlanCost
from shardalg.notation.syntax import Program
from shardalg.search import Candidate, Minimize

B, D, F = dim_size("B"), dim_size("D"), dim_size("F")
X, Y = axis_size("X"), axis_size("Y")
M_X, M_Y = links("X"), links("Y")
C, W = quantity("C"), quantity("W_ici")
N = device_count()
H = quantity("H")  # the memory cap per device (bytes)

# seed 002 §4.1 / the book's chapter 5 table: each strategy's MLP block and the mesh axes it uses
STRATEGIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "DP": ("In[B_X, D] · W_in[D, F] -> Tmp[B_X, F]; Tmp[B_X, F] · W_out[F, D] -> Out[B_X, D]", ("X",)),
    "FSDP": ("In[B_X, D] · W_in[D_X, F] -> Tmp[B_X, F]; Tmp[B_X, F] · W_out[F, D_X] -> Out[B_X, D]", ("X",)),
    "TP": ("In[B, D_Y] · W_in[D, F_Y] -> Tmp[B, F_Y]; Tmp[B, F_Y] · W_out[F_Y, D] -> Out[B, D_Y]", ("Y",)),
    "FSDP+TP": (
        "In[B_X, D_Y] · W_in[D_X, F_Y] -> Tmp[B_X, F_Y]; Tmp[B_X, F_Y] · W_out[F_Y, D_X] -> Out[B_X, D_Y]",
        ("X", "Y"),
    ),
}
POLICIES = {"steady": True, "serial": False}  # the cost engine's overlap flag for each policy
WEIGHTS = ("W_in", "W_out")


def mesh(name: str) -> sa.Mesh:
    return sa.Mesh({a: None for a in STRATEGIES[name][1]})


# Which plan is the cheapest depends on the sizes (FSDP's forward: B against F): no size is made up, so each
# plan is chosen at sizes of the regime the book studies (a large batch, 8 devices an axis) and the
# programs are then priced on the symbolic mesh.
CHOSEN_AT = {"B": 1 << 16, "D": 8192, "F": 32768}


def chosen_mesh(name: str) -> sa.Mesh:
    return sa.Mesh({a: 8 for a in STRATEGIES[name][1]})


@cache
def forward(name: str) -> Program:
    """Each statement replaced by the statements of the planner's plan for it at CHOSEN_AT."""
    m = chosen_mesh(name)
    return Program(
        tuple(
            s.statement()
            for st in sa.parse(STRATEGIES[name][0]).statements
            for s in sa.plan(st, m, CHOSEN_AT).steps
        )
    )


@cache
def backward(name: str) -> Program:
    """The derived backward's statements, its plans chosen at CHOSEN_AT (the sizes left out)."""
    return Program(sa.backward(forward(name), chosen_mesh(name), CHOSEN_AT).program().statements)


def program(name: str, passes: str) -> Program:
    """``forward``, ``backward`` or ``step`` (forward then backward)."""
    parts = {
        "forward": (forward(name),),
        "backward": (backward(name),),
        "step": (forward(name), backward(name)),
    }
    return Program(tuple(s for p in parts[passes] for s in p.statements))


@cache
def _cost(name: str, passes: str, policy: str, hw: str | None = None) -> PlanCost:
    return sa.cost(
        program(name, passes), mesh(name), hw=hw, latency=False, symbolic_links=True, overlap=POLICIES[policy]
    )


@dataclass(frozen=True)
class Phased:
    """A whole step typed by hand as the book times it: under ``steady`` each pass's collectives overlap that
    pass's compute, and the passes add (the forward, then the backward)."""

    forward: PlanCost
    backward: PlanCost

    @property
    def steps(self):
        return self.forward.steps + self.backward.steps

    @property
    def total(self) -> sympy.Expr:
        return self.forward.total + self.backward.total

    @property
    def compute(self) -> sympy.Expr:
        return self.forward.compute + self.backward.compute

    @property
    def comms(self) -> sympy.Expr:
        return self.forward.comms + self.backward.comms


def priced(name: str, passes: str, policy: str, hw: str | None = None) -> PlanCost | Phased:
    """The cost of the passes; a whole step under ``steady`` is its passes' costs added."""
    if passes == "step" and policy == "steady":
        return Phased(_cost(name, "forward", policy, hw), _cost(name, "backward", policy, hw))
    return _cost(name, passes, policy, hw)


def parts(pc: PlanCost | Phased) -> dict[str, sympy.Expr]:
    """The cost's parts by name: compute, and the communication on each mesh axis (``comms X``)."""
    out = {"compute": pc.compute}
    for s in pc.steps:
        if s.step.communicates:
            for a in s.step.axes:
                out[f"comms {a}"] = out.get(f"comms {a}", sympy.Integer(0)) + s.comms
    return out


def weight_bytes(name: str) -> sympy.Expr:
    """Bytes per device of the two weights as the strategy shards them (shape's bytes_per_device)."""
    statements = sa.parse(STRATEGIES[name][0]).statements
    tensors = {t.name: t for st in statements for t in (st.expr.left, st.expr.right)}
    return sympy.Add(*(sa.shape(tensors[w], mesh(name)).bytes_per_device for w in WEIGHTS))


def candidate(
    name: str, passes: str, policy: str, *, memory: bool = False, all_devices: bool = True
) -> Candidate:
    """The strategy as a map candidate: DP and FSDP on all N devices (X -> N), TP on all of them (Y -> N),
    FSDP+TP at its best split (Y -> N/X, minimized over X in [1, N]). ``all_devices=False`` keeps the axis
    sizes as they are. ``memory``: weights per device <= H."""
    pc = priced(name, passes, policy)
    subs: dict = {}
    minimize = None
    if all_devices:
        subs = {"DP": {X: N}, "FSDP": {X: N}, "TP": {Y: N}, "FSDP+TP": {Y: N / X}}[name]
        minimize = Minimize(X, 1, N) if name == "FSDP+TP" else None
    constraints = (sympy.LessThan(weight_bytes(name), H),) if memory else ()
    return Candidate(
        name, pc.total, parts=parts(pc), substitute=subs, minimize=minimize, constraints=constraints
    )


def ge(a, b) -> sympy.Basic:
    """``a >= b`` unevaluated (sympy would decide M_X >= 1 for a positive integer M_X)."""
    return sympy.GreaterThan(a, b, evaluate=False)


DOMAIN = (ge(N, 1), ge(M_X, 1), ge(M_Y, 1))
OVER = (B / N, N, F, C / W, M_X, M_Y)


def same(a: sympy.Basic, b: sympy.Basic) -> bool:
    """Two relations with the same direction and sides, up to simplification."""
    return type(a) is type(b) and sympy.simplify(a.lhs - b.lhs) == 0 and sympy.simplify(a.rhs - b.rhs) == 0
