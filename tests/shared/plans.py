"""Plans written step by step (not by the planner), so the tests that run them do not depend on the
planner's choices: ``S``/``P`` from statements in the notation, ``col``/``ein``/``chain`` from pieces; the
hand plans and forward programs the export tests run; and ``WRONG``, a plan that lies."""

from __future__ import annotations

from shardalg.algebra.mesh import Mesh
from shardalg.notation.parse import parse_statement
from shardalg.notation.parse import parse_tensor as T
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Arrow, Collective, Op, Product, Tensor


def S(text: str) -> Step:
    """A plan Step from a statement: ``AllGather_X(A[I_X, J]) -> A[I, J]`` or ``A[..] · B[..] -> C[..]``."""
    st_ = parse_statement(text)
    assert isinstance(st_, Arrow)
    e = st_.expr
    if isinstance(e, Product):
        return Step(Op.EINSUM, (e.left, e.right), st_.result, contract=e.contract or (), local=e.local)
    assert isinstance(e, Collective)
    return Step(e.op, (e.arg,), st_.result, e.axes, e.dim, offset=e.offset)


def P(*texts: str) -> Plan:
    """A plan of statements; its inputs are the tensors no earlier statement produced."""
    steps = tuple(S(t) for t in texts)
    made, inputs = set(), []
    for s in steps:
        inputs += [t for t in s.inputs if t not in made and t not in inputs]
        made.add(s.output)
    return Plan(tuple(inputs), steps, steps[-1].output)


_OPS = {o.value: o for o in Op}


def col(op: str, axes: str, before: str, after: str, dim: str | None = None) -> Step:
    return Step(_OPS[op], (T(before),), T(after), axes=tuple(axes), dim=dim)


def ein(left: str, right: str, out: str) -> Step:
    a, b, c = T(left), T(right), T(out)
    contract = tuple(n for n in a.dim_names if n in b.dim_names and n not in c.dim_names)
    return Step(Op.EINSUM, (a, b), c, contract=contract)


def chain(*steps: Step) -> Plan:
    produced = {s.output for s in steps}
    inputs: list[Tensor] = []
    for s in steps:
        inputs += [t for t in s.inputs if t not in produced and t not in inputs]
    return Plan(tuple(inputs), steps, steps[-1].output)


MESH = Mesh(X=4, Y=2)
HAND_PLANS: dict[str, Plan] = {
    "case1": chain(ein("A[I_X, J]", "B[J, K_Y]", "C[I_X, K_Y]")),
    "case2": chain(col("AllGather", "X", "A[I, J_X]", "A[I, J]"), ein("A[I, J]", "B[J, K]", "C[I, K]")),
    "case3": chain(
        ein("A[I, J_X]", "B[J_X, K]", "C[I, K]{U_X}"), col("AllReduce", "X", "C[I, K]{U_X}", "C[I, K]")
    ),
    "case3_rs": chain(
        ein("A[I, J_X]", "B[J_X, K]", "C[I, K]{U_X}"),
        col("ReduceScatter", "X", "C[I, K]{U_X}", "C[I, K_X]", "K"),
    ),
    "case4": chain(col("AllGather", "X", "B[J, K_X]", "B[J, K]"), ein("A[I_X, J]", "B[J, K]", "C[I_X, K]")),
    "dp": chain(ein("In[B_X, D]", "W[D, F]", "Out[B_X, F]")),
    "fsdp": chain(col("AllGather", "X", "W[D_X, F]", "W[D, F]"), ein("In[B_X, D]", "W[D, F]", "Out[B_X, F]")),
    "tp": chain(
        ein("In[B, D]", "Win[D, F_Y]", "H[B, F_Y]"),
        ein("H[B, F_Y]", "Wout[F_Y, D]", "Out[B, D]{U_Y}"),
        col("AllReduce", "Y", "Out[B, D]{U_Y}", "Out[B, D]"),
    ),
    "fsdp_tp": chain(
        col("AllGather", "Y", "In[B_X, D_Y]", "In[B_X, D]"),
        col("AllGather", "X", "Win[D_X, F_Y]", "Win[D, F_Y]"),
        ein("In[B_X, D]", "Win[D, F_Y]", "H[B_X, F_Y]"),
        col("AllGather", "X", "Wout[F_Y, D_X]", "Wout[F_Y, D]"),
        ein("H[B_X, F_Y]", "Wout[F_Y, D]", "Out[B_X, D]{U_Y}"),
        col("ReduceScatter", "Y", "Out[B_X, D]{U_Y}", "Out[B_X, D_Y]", "D"),
    ),
    "all_to_all": chain(col("AllToAll", "Y", "A[I_XY, J]", "A[I_X, J_Y]", "J")),
    "all_to_all_xy": chain(col("AllToAll", "XY", "A[I_XY, J]", "A[I, J_XY]", "J")),
    "slice": chain(col("Slice", "Y", "A[I_X, J]", "A[I_X, J_Y]", "J")),
    "zero_pad": chain(col("Slice", "Y", "A[I_X, J_Y]", "A[I_X, J]{U_Y}", "J")),
    "permute": chain(col("Permute", "XY", "A[I_XY, J]", "A[I_YX, J]")),
    "gather_two_dims": chain(col("AllGather", "XY", "A[I_X, J_Y]", "A[I, J]")),
    "reduce_scatter_in": chain(col("ReduceScatter", "Y", "C[I_X, K]{U_Y}", "C[I_XY, K]", "I")),
    "gather_yx": chain(col("AllGather", "YX", "A[I_YX, J]", "A[I, J]")),
    # the ring shift: the blocks roll along the dim the axis shards; replicated or partial values keep theirs
    "shift": chain(S("Shift_{X,+1}(A[I_X, J]) -> A2[I_X, J]")),
    "shift_minor_back": chain(S("Shift_{Y,-1}(A[I_XY, J]) -> A2[I_XY, J]")),
    "shift_partials": chain(S("Shift_{X,+3}(C[I, K]{U_X}) -> C2[I, K]{U_X}")),
}

# The forward programs in the notation (planned by the planner), on the mesh X=4, Y=2.
PROGRAMS = {
    "case1": "A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]",
    "case2": "A[I, J_X] * B[J, K] -> C[I, K]",
    "case3": "A[I, J_X] * B[J_X, K] -> C[I, K]",
    "case4": "AllGather_X(B[J, K_X]) -> B[J, K]; A[I_X, J] * B[J, K] -> C[I_X, K]",
    "case4_bare": "A[I_X, J] * B[J, K_X] -> C[I_X, K]",  # the forward's plan gathers B (issue 13)
    "dp": "In[B_X, D] * W[D, F] -> Out[B_X, F]",
    "fsdp": "In[B_X, D] * W[D_X, F] -> Out[B_X, F]",
    "tp": "In[B, D] * Win[D, F_Y] -> H[B, F_Y]; H[B, F_Y] * Wout[F_Y, D] -> Out[B, D]",
    "fsdp_tp": "AllGather_X(Win[D_X, F_Y]) -> Win[D, F_Y]; In[B_X, D] * Win[D, F_Y] -> H[B_X, F_Y]; "
    "AllGather_X(Wout[F_Y, D_X]) -> Wout[F_Y, D]; H[B_X, F_Y] * Wout[F_Y, D] -> Out[B_X, D]",
}

# A plan that lies: it all-reduces a replicated value, which multiplies it by |X|. The check must say no.
WRONG = Plan(
    (T("A[I, J]"),), (Step(Op.ALL_REDUCE, (T("A[I, J]"),), T("A[I, J]"), axes=("X",)),), T("A[I, J]")
)
