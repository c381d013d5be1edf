"""The backward of the notation's functions (issue 26 item 4): each function statement's derived backward, run
on the executor's virtual mesh, equals the gradient of the dense program (central differences), over the
function forms, a random-layout property test and a program mixing products with gelu, softmax, rmsnorm and a
residual add; each derivative record equals the finite difference of its function's dense meaning."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.ops.derivatives import DERIVATIVE
from shardalg.algebra.registry import RECORDS
from shardalg.errors import NoPlan, ShardalgError
from shardalg.notation.jsonread import from_json
from shardalg.notation.parse import parse
from shardalg.notation.printing import latex, text, to_json, unicode
from shardalg.notation.syntax import Apply, Arrow, Dim, Op, Program, Tensor
from shardalg.planning.backward import backward
from shardalg.planning.forward import analyze
from shardalg.planning.symbolic import NeedsSizes, strict

from .fnbackward import check_against_finite_differences

SIZES = {"B": 4, "D": 8, "F": 8, "S": 8, "T": 4}

STATEMENTS = {
    "gelu": ("gelu(H[B, F_Y]) -> G[B, F_Y]", "Y=2"),
    "silu": ("silu(H[B_X, F]) -> G[B_X, F]", "X=2"),
    "exp": ("exp(A[B_X, T]) -> E[B_X, T]", "X=2"),
    "relu": ("relu(A[B, T_X]) -> E[B, T_X]", "X=2"),
    "scale": ("scale_{0.125}(S[B_X, T]) -> R[B_X, T]", "X=2"),
    "add broadcast": ("X[B_X, D] + A[D_Y] -> R[B_X, D_Y]", "X=2,Y=2"),
    "subtract": ("X[B_X, D] - A[B_X, D] -> R[B_X, D]", "X=2"),
    "subtract broadcast": ("X[B, D_Y] - A[D_Y] -> R[B, D_Y]", "Y=2"),
    "multiply": ("G[B, F_Y] .* U[B, F_Y] -> R[B, F_Y]", "Y=2"),
    "multiply broadcast": ("G[B_X, F] .* U[F] -> R[B_X, F]", "X=2"),
    "sum sharded": ("sum_D(X[B, D_X]) -> S[B]{U_X}", "X=2"),
    "sum reduced": ("sum_D(X[B, D_X]) -> S[B]", "X=2"),
    "mean": ("mean_D(X[B_Y, D_X]) -> S[B_Y]{U_X}", "X=2,Y=2"),
    "max": ("max_D(X[B, D_X]) -> M[B]", "X=2"),
    "softmax": ("softmax_S(Sc[B_Y, S_X]) -> P[B_Y, S_X]", "X=2,Y=2"),
    "rmsnorm": ("rmsnorm_D(X[B, D_X]) -> Y[B, D_X]", "X=2"),
    "layernorm": ("layernorm_D(X[B_Y, D_X]) -> Y[B_Y, D_X]", "X=2,Y=2"),
    # partial sums: the gradient of a partial operand is the gradient of the sum
    "silu of partials": ("silu(H[B, F]{U_Y}) -> G[B, F_Y]", "Y=2"),
    "add of partials": ("X[B, D]{U_X} + A[B, D]{U_X} -> R[B, D]{U_X}", "X=2"),
    "multiply a partial": ("A[B, D]{U_X} .* C[B, D] -> R[B, D]{U_X}", "X=2"),
    # one value on both sides: its two contributions added
    "add itself": ("X[B, D] + X[B, D] -> R[B, D]", "X=2"),
    "square": ("X[B_X, D] .* X[B_X, D] -> R[B_X, D]", "X=2"),
    # operands that do not meet (the forward's plan reshards In): the product rule's dV .* In is planned into
    # the cotangent's layout (it raised IllegalOperand)
    "multiply, operands apart": ("In[B_XY, T, D_Z] .* g[D] -> V[B_YZ, T_X, D]", "X=2,Y=2,Z=2"),
}

PROGRAM = (
    "X[B_X, D] * W1[D, F_Y] -> H[B_X, F_Y]; gelu(H[B_X, F_Y]) -> G[B_X, F_Y]; "
    "G[B_X, F_Y] * W2[F_Y, D] -> O[B_X, D]; O[B_X, D] + X[B_X, D] -> R[B_X, D]; "
    "rmsnorm_D(R[B_X, D]) -> N[B_X, D]; N[B_X, D] * Wq[D, S_Y] -> Sc[B_X, S_Y]; "
    "softmax_S(Sc[B_X, S_Y]) -> P[B_X, S_Y]"
)


def _check(text_: str, mesh: str, seed: int = 0):
    prog = parse(text_)
    bw = backward(prog, mesh, SIZES)
    fw = analyze(prog, bw.mesh, dict(SIZES))
    check_against_finite_differences(bw, fw, SIZES, seed)
    return bw


@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_each_function_statements_backward_equals_the_dense_gradient(name: str) -> None:
    bw = _check(*STATEMENTS[name])
    values = {t.name for t in bw.forward.statements[0].expr.operands} | {bw.forward.statements[0].result.name}
    assert {r for r, _ in bw.gradients} == values


def test_the_program_mixing_products_and_functions() -> None:
    bw = _check(PROGRAM, "X=2,Y=2")
    ops = {s.op for s in bw.steps}
    assert {Op.SOFTMAX_D, Op.RMSNORM_D, Op.GELU_D, Op.ADD, Op.EINSUM} <= ops
    # X feeds the residual add and the first product: its two contributions are added
    assert bw.gradient("X").name == "dX"


def test_the_transpose_of_a_sum_over_a_sharded_dim_is_a_broadcast() -> None:
    """A {U_X} result's cotangent is replicated; sum' writes each device's block, no communication."""
    bw = backward("sum_D(X[B, D_X]) -> S[B]{U_X}", "X=2", SIZES)
    assert bw.seeds[0].unreduced == ()
    assert [text(s) for s in bw.program().statements] == ["sum'_D(X[B, D_X], dS[B]) -> dX[B, D_X]"]
    assert bw.collectives == ()


@pytest.mark.parametrize(
    ("name", "collectives"),
    [
        ("softmax", (("softmax'", ("X",)),)),  # its step all-reduces the row dot product (its statistics)
        ("gelu", ()),
        # dX = dR in X's own sharding [B_X, D] (gathered over Y); dA = sum_B(dR), a partial sum over X
        ("add broadcast", (("AllGather", ("Y",)), ("AllReduce", ("X",)))),
    ],
)
def test_what_the_backward_communicates(name: str, collectives) -> None:
    bw = backward(STATEMENTS[name][0], STATEMENTS[name][1], SIZES)
    assert bw.collectives == collectives


def test_softmax_backward_all_reduces_the_row_dot_product_over_the_sharded_dim() -> None:
    bw = backward("softmax_S(Sc[B_Y, S_X]) -> P[B_Y, S_X]", "X=2,Y=2", SIZES)
    (step,) = bw.steps
    assert step.op is Op.SOFTMAX_D and step.axes == ("X",)
    assert "AllReduce_X" in step.reason and "dot" in step.reason
    assert [text(t) for t in bw.grads[0].reads] == ["P[B_Y, S_X]"]  # it reads the forward's result


@pytest.mark.parametrize(
    ("statement", "said"),
    [
        ("sum_T(G[B, T, F_Y]) -> S[B, F_Y]", "a broadcast of the cotangent along T (over a sharded T: "),
        ("mean_F(G[B, T, F_Y]) -> M[B, T]{U_Y}", "a broadcast of the cotangent along F, divided by |F|"),
        ("softmax_T(G[B, T, F_Y]) -> P[B, T, F_Y]", "dX = P ⊙ (dP - sum_T(dP ⊙ P))"),
    ],
)
def test_a_gradients_reason_names_the_dim_its_function_works_along(statement: str, said: str) -> None:
    """The records say how a reduction's or softmax's backward goes along ``{dim}``: each statement's reason
    names its own dim, not the rule's generic D or S."""
    reason = backward(statement, "Y=2", {"B": 2, "T": 4, "F": 4}).steps[0].reason
    assert said in reason and "along D" not in reason and "sum_S" not in reason


def test_what_the_backward_reads_from_the_forward() -> None:
    bw = backward("gelu(H[B, F_Y]) -> G[B, F_Y]", "Y=2", SIZES)
    assert [text(t) for t in bw.grads[0].reads] == ["H[B, F_Y]"]
    bw = backward("G[B, F_Y] .* U[B, F_Y] -> R[B, F_Y]", "Y=2", SIZES)
    assert [[text(t) for t in g.reads] for g in bw.grads] == [["U[B, F_Y]"], ["G[B, F_Y]"]]


def test_a_wrong_derivative_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check is not vacuous: gelu' off by a factor is caught."""
    rec = RECORDS[Op.GELU_D]
    dense = rec.dense
    wrong = dataclasses.replace(rec, dense=lambda xs, axis, c: 1.01 * dense(xs, axis, c))
    monkeypatch.setitem(RECORDS, Op.GELU_D, wrong)
    with pytest.raises(AssertionError):
        _check(*STATEMENTS["gelu"])


# ---- each derivative record against the finite difference of its function ------------------------------


@pytest.mark.parametrize("op", list(DERIVATIVE), ids=lambda o: o.value)
def test_each_derivative_record_is_the_vjp_of_its_function(op: Op) -> None:
    rng = np.random.default_rng(3)
    fwd, der = RECORDS[op], RECORDS[DERIVATIVE[op]]
    assert der.derivative_of == op.value and der.arity == 2
    x = rng.standard_normal((3, 5))
    axis = 1 if op.takes_dim else None
    y = fwd.dense([x], axis, None)
    dy = rng.standard_normal(y.shape)
    primal = y if op is Op.SOFTMAX else x
    dy_aligned = np.expand_dims(dy, 1) if fwd.reduces() else dy
    dx = der.dense([primal, dy_aligned], axis, None)
    h = 1e-6
    for _ in range(3):
        delta = rng.standard_normal(x.shape)
        up = np.vdot(dy, fwd.dense([x + h * delta], axis, None))
        down = np.vdot(dy, fwd.dense([x - h * delta], axis, None))
        assert abs((up - down) / (2 * h) - np.vdot(dx, delta)) < 1e-6 * max(1.0, abs(np.vdot(dx, delta)))


# ---- the notation of the backward ---------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_the_backward_program_round_trips_in_the_three_syntaxes(name: str) -> None:
    bw = backward(STATEMENTS[name][0], STATEMENTS[name][1], SIZES)
    prog = bw.program()
    for fmt in (text, unicode, latex):
        assert [s for s in parse(fmt(prog)).statements] == list(prog.statements), fmt
    assert from_json(to_json(prog)).statements == prog.statements


def test_a_derivative_refuses_a_cotangent_of_the_wrong_shape() -> None:
    from shardalg import plans

    with pytest.raises(ShardalgError, match="takes the cotangent of the result of sum_D"):
        plans("sum'_D(X[B, D], dS[B, D]) -> dX[B, D]", mesh="X=2", sizes=SIZES)


# ---- random layouts -----------------------------------------------------------------------------------

UNARY = [
    Op.GELU,
    Op.SILU,
    Op.EXP,
    Op.RELU,
    Op.SCALE,
    Op.SUM,
    Op.MEAN,
    Op.MAX,
    Op.SOFTMAX,
    Op.RMSNORM,
    Op.LAYERNORM,
]
BINARY = [Op.ADD, Op.SUBTRACT, Op.MULTIPLY]


@st.composite
def statements(draw):
    mesh = Mesh(X=2, Y=2)

    def tensor(name: str, dims: list[str]) -> Tensor:
        where = {a: draw(st.sampled_from([*dims, None])) for a in ("X", "Y")}
        return Tensor(name, tuple(Dim(d, tuple(a for a in ("X", "Y") if where[a] == d)) for d in dims))

    op = draw(st.sampled_from(UNARY + BINARY))
    if op in BINARY:
        left = tensor("A", ["B", "D"])
        right = tensor("C", draw(st.sampled_from([["B", "D"], ["D"], ["B"]])))
        apply = Apply(op, (left, right))
    else:
        x = tensor("A", ["B", "D"])
        dim = "D" if op.takes_dim else None
        apply = Apply(op, (x,), dim, factor=0.5 if op is Op.SCALE else None)
    try:
        natural = RECORDS[op].result(apply.operands, apply.dim)
    except ShardalgError:
        assume(False)
    result = Tensor("R", natural.dims, natural.unreduced)
    if draw(st.booleans()):  # a result laid out as the user asks: the planner reshards
        result = tensor("R", list(natural.dim_names))
    return Program((Arrow(apply, result),)), mesh


@settings(max_examples=40, deadline=None)
@given(statements(), st.integers(0, 2**16))
def test_random_layouts_backward_equals_the_dense_gradient(case, seed: int) -> None:
    prog, mesh = case
    sizes = {"B": 4, "D": 4}
    try:
        bw = backward(prog, mesh, sizes)
    except NoPlan:
        assume(False)
    fw = analyze(prog, mesh, sizes)
    check_against_finite_differences(bw, fw, sizes, seed, tries=1)


# ---- the command line ---------------------------------------------------------------------------------

CLI_SIZES = (
    "B=64,D=256,F=512,S=128,T=128"  # every dim the statements name: a plan over a sharded dim depends on them
)


@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_shardalg_backward_of_each_function_statement_runs(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    from shardalg.cli import main

    source, mesh = STATEMENTS[name]
    for fmt in ("text", "json"):
        # sizes given: the cheapest plan of a statement over a sharded dim depends on them (none is made up)
        assert main(["backward", source, "--mesh", mesh, "--sizes", CLI_SIZES, "--format", fmt]) == 0
        out, err = capsys.readouterr()
        assert err == "" and out
    doc = json.loads(out)
    assert doc["kind"] == "backward" and doc["gradients"]


def test_shardalg_backward_of_the_program(capsys: pytest.CaptureFixture[str]) -> None:
    from shardalg.cli import main

    assert main(["backward", PROGRAM, "--mesh", "X=2,Y=2", "--sizes", CLI_SIZES, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    reads = {r for g in doc["grads"] for r in g["reads"]}
    assert {"H[B_X, F_Y]", "R[B_X, D]", "P[B_X, S_Y]"} <= reads  # gelu's X, rmsnorm's X, softmax's result


def test_a_backward_that_only_passes_cotangents_on_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    from shardalg.cli import main

    assert main(["backward", "X[B, D]{U_X} + A[B, D]{U_X} -> R[B, D]{U_X}", "--mesh", "X=2"]) == 0
    assert capsys.readouterr().out == (
        "# dX is dR[B, D]: the cotangent passed on unchanged\n# dA is dR[B, D]: the cotangent passed on unchanged\n"
    )


def test_the_backward_of_a_derivative_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from shardalg.cli import main

    assert main(["backward", "sum'_D(X[B, D], dS[B]) -> dX[B, D]", "--mesh", "X=2"]) == 2
    err = capsys.readouterr().err
    assert "sum' is a derivative, a statement of a backward" in err and "Traceback" not in err


def test_a_broadcast_reads_its_operand_for_its_shape_only() -> None:
    """sum'_D's HBM bytes: the cotangent read and the result written, not X (bf16, X=4: B·D/4 elements)."""
    import sympy

    import shardalg

    def hbm(statement: str) -> sympy.Expr:
        p = shardalg.plans(statement, mesh="X=4")[0]
        return shardalg.cost(p, mesh="X=4").memory

    b, d, w = (
        next(s for s in hbm("gelu'(X[B, D_X], dS[B, D_X]) -> dX[B, D_X]").free_symbols if s.name == n)
        for n in ("B", "D", "W_hbm")
    )
    assert sympy.simplify(hbm("sum'_D(X[B, D_X], dS[B]) -> dX[B, D_X]") - (b * d / 2 + 2 * b) / w) == 0
    assert sympy.simplify(hbm("gelu'(X[B, D_X], dS[B, D_X]) -> dX[B, D_X]") - 3 * b * d / 2 / w) == 0


def test_a_derivative_is_known_by_its_record_not_its_spelling() -> None:
    """The refusal reads the record's ``derivative_of``: a derivative named without a prime is refused too."""
    from shardalg.algebra.ops import forget_op, register_op
    from shardalg.errors import UsageError

    op = Op.define("TOY_GELU_D", "toygelu", function=True, operands=2)
    register_op(dataclasses.replace(RECORDS[Op.GELU_D], op=op))
    try:
        stmt = parse("gelu'(H[B, F], dG[B, F]) -> dH[B, F]").statements[0]
        toy = dataclasses.replace(stmt, expr=dataclasses.replace(stmt.expr, op=op))
        with pytest.raises(UsageError, match="toygelu is a derivative, a statement of a backward"):
            analyze(Program((toy,)), Mesh(X=2), {})
    finally:
        forget_op(op)


@pytest.mark.parametrize(
    ("layout", "order"),
    [("B_X, T, D", ["T", "B"]), ("B, T_X, D", ["T", "B"]), ("B, T, D", ["T", "B"])],
)
def test_a_gain_sums_its_broadcast_dims_largest_per_device_first(layout: str, order: list[str]) -> None:
    """The gradient of a gain ``g[D]`` broadcast over B and T sums the dim with the most elements on each
    device first (T: 16, or 8 split, against B's 4 or 2), so its intermediate is [B, D] per device whether B
    or T is split: data and sequence parallelism pay the same HBM for it (summing B first left a [T, D] the
    size of the whole sequence under data parallelism, half of it under sequence parallelism: 5 us of the
    layer's backward on a v5e at T=1024). The value is the dense gradient's whatever the order."""
    sizes = {"B": 4, "T": 16, "D": 8}
    prog = parse(f"H[{layout}] .* g[D] -> Y[{layout}]")
    bw = backward(prog, "X=2", sizes)
    fw = analyze(prog, bw.mesh, dict(sizes))
    check_against_finite_differences(bw, fw, sizes)
    sums = [s.dim for s in bw.steps if s.op is Op.SUM]
    assert sums == order


def test_broadcast_dims_are_summed_in_the_cotangents_order_without_sizes() -> None:
    bw = backward(parse("H[B_X, T, D] .* g[D] -> Y[B_X, T, D]"), "X=2")
    assert [s.dim for s in bw.steps if s.op is Op.SUM] == ["B", "T"]


def test_a_function_gradient_whose_plan_depends_on_a_size_is_piecewise_under_strict() -> None:
    """``sum_T`` of the gain's product rule on ``T_X``: summing T locally then reducing ``g[D]`` moves less when T
    is more than 1, gathering ``[T, D]`` first only at T = 1. Under strict (the ``backward`` command) the choice is
    not made up: it is :class:`NeedsSizes` with the crossing in T, as a product's gradients are; with T given,
    the plan of the larger T."""
    forward = "G[T_X, D]{U_YZ} .* g[D] -> H[T_X, D]{U_YZ}"
    with pytest.raises(NeedsSizes) as err, strict():
        backward(forward, "X=2,Y=1,Z=2,S0=3")
    assert err.value.choice.symbols == ("T",) and err.value.choice.piecewise
    with strict():
        bw = backward(forward, "X=2,Y=1,Z=2,S0=3", {"T": 8})
    (dg,) = [g for g in bw.grads if g.of == "g" and g.plan.steps[0].op is Op.SUM]
    assert dg.plan.steps[0].inputs[0].dim_names == ("T", "D") and dg.plan.steps[0].inputs[0].dims[0].axes == (
        "X",
    )
