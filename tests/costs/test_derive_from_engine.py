"""The book's conditions derived from programs the ENGINE wrote: the forward plans come from the planner,
the backward program from ``backward``; only the MLP block itself is typed, in the notation (seed 002 §4).

These complement tests/test_derive.py (which derives from plans spelled out in the notation): here nothing
but the layer's shardings is given, so a planner or backward change that alters the communication shows up
as a changed condition."""

import sympy

import shardalg as sa
from shardalg.algebra.symbols import axis_size, device_count, dim_size, links, quantity
from shardalg.costs.derive import compute_bound, optimum
from shardalg.costs.plancost import plan_of
from shardalg.notation.syntax import Program

B, F = dim_size("B"), dim_size("F")
X, Y = axis_size("X"), axis_size("Y")
M_X, M_Y = links("X"), links("Y")
C, W = quantity("C"), quantity("W_ici")
N = device_count()


def same(a, b) -> bool:
    """Two relations with the same sides, up to simplification."""
    return type(a) is type(b) and sympy.simplify(a.lhs - b.lhs) == 0 and sympy.simplify(a.rhs - b.rhs) == 0


# Which plan is the cheapest depends on the sizes (FSDP's forward: B against F): no size is made up, so each
# plan is chosen at sizes of the regime the book studies (a large batch on 8 devices a side) and then priced
# on the symbolic mesh, where the conditions are derived.
CHOSEN_AT = {"B": 1 << 16, "D": 8192, "F": 32768}


def chosen_mesh(mesh: sa.Mesh) -> sa.Mesh:
    return sa.Mesh(**{a: 8 for a in mesh.names})


def forward_plans(text: str, mesh: sa.Mesh) -> Program:
    """Each statement replaced by the statements of its cheapest plan at CHOSEN_AT."""
    at = chosen_mesh(mesh)
    steps = [s.statement() for st in sa.parse(text).statements for s in sa.plan(st, at, CHOSEN_AT).steps]
    return Program(tuple(steps))


def derived_backward(text: str, mesh: sa.Mesh) -> Program:
    """The derived backward program's statements, its plans chosen at CHOSEN_AT (the sizes left out)."""
    return Program(sa.backward(sa.parse(text), chosen_mesh(mesh), CHOSEN_AT).program().statements)


def test_dp_bound_from_the_derived_backward():
    mesh = sa.Mesh(X=None)
    bw = sa.backward(sa.parse("In[B_X, D] · W[D, F] -> Out[B_X, F]"), chosen_mesh(mesh), CHOSEN_AT)
    assert list(bw.collectives) == [("AllReduce", ("X",))]
    d = compute_bound(Program(bw.program().statements), "B", mesh=mesh, symbolic_links=True)
    assert same(d.result, B > C * X / (W * M_X))  # seed 002: B/X > C/(W_ici·M_X)


def test_fsdp_bound_from_planned_forward_and_derived_backward():
    mesh = sa.Mesh(X=None)
    text = "In[B_X, D] · W[D_X, F] -> Out[B_X, F]"
    program = Program(forward_plans(text, mesh).statements + derived_backward(text, mesh).statements)
    d = compute_bound(program, "B", mesh=mesh, symbolic_links=True)
    assert same(d.result, B > C * X / (W * M_X))  # the same as DP (seed 002)


def test_tp_bound_from_planned_forward():
    mesh = sa.Mesh(Y=None)
    program = forward_plans(
        "In[B, D_Y] · W_in[D, F_Y] -> Tmp[B, F_Y]; Tmp[B, F_Y] · W_out[F_Y, D] -> Out[B, D_Y]", mesh
    )
    assert [s.op for s in plan_of(program, mesh).collectives] == [sa.Op.ALL_GATHER, sa.Op.REDUCE_SCATTER]
    d = compute_bound(program, "Y", mesh=mesh, symbolic_links=True)
    assert same(d.result, Y < F * M_Y * W / C)  # seed 002: Y < F·M_Y/(C/W_ici)


def test_fsdp_tp_optimum_from_planned_forward():
    mesh = sa.Mesh(X=None, Y=None)
    program = forward_plans(
        "In[B_X, D_Y] · W_in[D_X, F_Y] -> Tmp[B_X, F_Y]; Tmp[B_X, F_Y] · W_out[F_Y, D_X] -> Out[B_X, D_Y]",
        mesh,
    )
    pc = sa.cost(program, mesh, latency=False, symbolic_links=True, overlap="steady")
    opt = optimum(pc, over="X", subject_to=sympy.Eq(X * Y, N))
    assert sympy.simplify(opt.result - sympy.sqrt(B * M_X * N / (F * M_Y))) == 0  # seed 002 §4.3
