"""verify reads the gradients of a forward's functions (norms, silu, softmax, ``.*`` gains, ``+`` residuals) in
the notation ``shardalg backward`` writes them, against the derived backward: the backward derived for a layer
verifies clean, and each wrong one is an error that the numbers confirm (the wrong backward, run on the
executor's per-device buffers, misses the dense gradient; the right one matches it).

Before, a forward with a function was refused (review h1: it used to call a right residual backward WRONG)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.ops.derivatives import DERIVATIVE
from shardalg.algebra.registry import RECORDS
from shardalg.errors import NoPlan, ShardalgError, UsageError
from shardalg.notation.parse import parse_tensor
from shardalg.notation.printing import text
from shardalg.notation.syntax import Apply, Arrow, Dim, Op, Product, Program, Tensor
from shardalg.numeric.devices import ExecutionError, VirtualMesh, shard, unshard
from shardalg.numeric.gradcheck import gradcheck
from shardalg.planning.backward import backward
from shardalg.planning.verify import verify

from .test_backward_functions import SIZES as STATEMENT_SIZES
from .test_backward_functions import STATEMENTS

# ---- the derived backward of a layer with functions verifies clean ----------------------------------------

LAYER = (  # pre-norm MLP: rmsnorm, a gain, silu, a TP MLP and the residual
    "rmsnorm_D(In[B_X, D]) -> N[B_X, D]; N[B_X, D] .* G[D] -> H[B_X, D]; H[B_X, D] * W[D, F_Y] -> U[B_X, F_Y]; "
    "silu(U[B_X, F_Y]) -> S[B_X, F_Y]; S[B_X, F_Y] * W2[F_Y, D] -> O[B_X, D]{U_Y}; "
    "AllReduce_Y(O[B_X, D]{U_Y}) -> O[B_X, D]; In[B_X, D] + O[B_X, D] -> Out[B_X, D]"
)
NORM_SHARDED = "rmsnorm_D(In[B, D_X]) -> H[B, D_X]; H[B, D_X] * W[D_X, F] -> Out[B, F]{U_X}"
LAYERS = {
    "pre-norm MLP, residual": (LAYER, "X=2,Y=2"),
    "norm, D whole": (
        "rmsnorm_D(In[B_X, D]) -> H[B_X, D]; H[B_X, D] * W[D, F_Y] -> Out[B_X, F_Y]",
        "X=2,Y=2",
    ),
    "norm, D sharded: statistics all-reduced": (NORM_SHARDED, "X=2"),
    "residual": ("In[B_X, D] * W[D, F] -> H[B_X, F]; H[B_X, F] + R[B_X, F] -> Out[B_X, F]", "X=2"),
    "SwiGLU": (
        "X[B, D] * W1[D, F_Y] -> A[B, F_Y]; X[B, D] * W3[D, F_Y] -> U[B, F_Y]; silu(A[B, F_Y]) -> S[B, F_Y]; "
        "S[B, F_Y] .* U[B, F_Y] -> H[B, F_Y]; H[B, F_Y] * W2[F_Y, D] -> Out[B, D]{U_Y}",
        "Y=2",
    ),
    "layernorm, bias, softmax, subtract": (
        "layernorm_D(In[B_X, D_Y]) -> H[B_X, D_Y]; H[B_X, D_Y] + b[D_Y] -> Hb[B_X, D_Y]; "
        "Hb[B_X, D_Y] * W[D_Y, F] -> O[B_X, F]{U_Y}; AllReduce_Y(O[B_X, F]{U_Y}) -> O[B_X, F]; "
        "softmax_F(O[B_X, F]) -> P[B_X, F]; P[B_X, F] - O[B_X, F] -> Out[B_X, F]",
        "X=2,Y=2",
    ),
    "scale, gelu, max": (
        "X[B, D] * W[D, F_Y] -> H[B, F_Y]; scale_{0.5}(H[B, F_Y]) -> G[B, F_Y]; gelu(G[B, F_Y]) -> E[B, F_Y]; "
        "max_F(E[B, F_Y]) -> M[B]",
        "Y=2",
    ),
    "sequence-parallel rename": (
        "rename_{T,S}(Kp[B, T_X, K]) -> Kk[B, S_X, K]; Q[B, T_X, K] * Kk[B, S_X, K] -> Sc[B, T_X, S]",
        "X=2",
    ),
}
SIZES = {"B": 8, "D": 16, "F": 16, "K": 4, "T": 8, "S": 8}


def rules(report):
    return [(f.severity, f.rule, f.statement) for f in report.findings]


def statements(bw) -> list[str]:
    return [text(s) for s in bw.program().statements]


def number(bw, start: str) -> int:
    """The statement of ``bw``'s program that starts with ``start``, numbered from 1."""
    return next(i for i, s in enumerate(statements(bw), 1) if s.startswith(start))


def derivative_of(op: Op):
    """A gradient step that computes the derivative of ``op``."""
    return lambda g: getattr(g.statement.expr, "op", None) is DERIVATIVE[op]


@pytest.mark.parametrize(
    ("name", "defer"), [(name, defer) for name in sorted(LAYERS) for defer in (False, True)]
)
def test_the_derived_backward_of_a_layer_with_functions_verifies_clean(name: str, defer: bool) -> None:
    """With reductions deferred too: the pre-norm layer's gain gradient reads dH's partial sums before dN's
    plan all-reduces them (read after, it read what the reduction no longer leaves: scaled-gradient)."""
    forward, mesh = LAYERS[name]
    bw = backward(forward, mesh, SIZES, defer_reductions=defer)
    report = verify(forward, bw.program(), mesh, SIZES, defer_reductions=defer)
    assert report.ok and report.findings == (), str(report)


@pytest.mark.parametrize("defer", [False, True])
@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_the_derived_backward_of_each_function_statement_verifies_clean(name: str, defer: bool) -> None:
    # partial operands, a broadcast operand's sum, one value on both sides of + and .* (two contributions)
    forward, mesh = STATEMENTS[name]
    bw = backward(forward, mesh, STATEMENT_SIZES, defer_reductions=defer)
    report = verify(forward, bw.program(), mesh, STATEMENT_SIZES, defer_reductions=defer)
    assert report.ok and report.findings == (), str(report)


def test_what_backward_prints_for_a_layer_verify_takes(tmp_path, capsys) -> None:
    # the printed backward's comments say which gradients are a cotangent passed on (dO is dOut)
    from shardalg.cli import main

    argv = ["--mesh", "X=2,Y=2", "--sizes", "B=64,D=1024,F=4096"]
    assert main(["backward", LAYER, *argv]) == 0
    printed = capsys.readouterr().out
    assert "# dO is dOut[B_X, D]: the cotangent passed on unchanged" in printed
    (tmp_path / "bw.txt").write_text(printed, encoding="utf-8")
    assert main(["verify", LAYER, str(tmp_path / "bw.txt"), *argv]) == 0
    assert capsys.readouterr().out.startswith("ok:")


RESIDUAL = "X[B, D] * W[D, F_Y] -> H[B, F_Y]; H[B, F_Y] + A[B, F_Y] -> R[B, F_Y]"
# right: dH is dR (the + passes it on), dA is dR too
RESIDUAL_RIGHT = (
    "dR[B, F_Y] * W[D, F_Y] -> dX[B, D]{U_Y}; AllReduce_Y(dX[B, D]{U_Y}) -> dX[B, D]; "
    "X[B, D] * dR[B, F_Y] -> dW[D, F_Y]"
)


def test_a_residual_backward_that_reads_the_passed_cotangent_is_right() -> None:
    """Review h1: verify called ``dR · W -> dX`` no gradient einsum of the forward, then refused the forward."""
    sizes = {"B": 512, "D": 1024, "F": 4096}
    assert verify(RESIDUAL, RESIDUAL_RIGHT, mesh="Y=4", sizes=sizes).findings == ()
    # the forward of products alone is still verified as before
    assert verify("X[B, D] * W[D, F_Y] -> H[B, F_Y]", RESIDUAL_RIGHT.replace("dR", "dH"), "Y=4", sizes).ok


def test_an_attention_core_the_planner_runs_as_a_ring_is_still_refused_by_name() -> None:
    core = (
        "Q[B, T_X, K] * Kk[B, S_X, K] -> Sc[B, T_X, S]; softmax_S(Sc[B, T_X, S]) -> P[B, T_X, S]; "
        "P[B, T_X, S] * V[B, S_X, K] -> O[B, T_X, K]"
    )
    sizes = {"B": 2, "T": 4096, "S": 4096, "K": 128}
    bw = backward(core, "X=4", sizes)
    assert bw.note.startswith("backward of the forward's ring plan")
    with pytest.raises(UsageError) as err:
        verify(core, bw.program(), "X=4", sizes)
    assert "an attention core the planner runs as a ring" in err.value.message
    with pytest.raises(UsageError) as err:
        verify("dispatch_{C,k=1,cf=1.0}(X[T, D], Gt[T, E]) -> Xe[E, C, D]", "", "X=2")
    assert err.value.message.endswith(
        "statement 1 of the forward, dispatch_{C,k=1,cf=1}(X[T, D], Gt[T, E]) -> Xe[E, C, D], is a MoE routing, "
        "whose gradient it does not read"
    )


# ---- each wrong function gradient is an error, and wrong on numbers ----------------------------------------

NUMERIC = {"B": 4, "D": 8, "F": 8}  # small: the dense check runs every input's gradient


def derived(forward: str = LAYER, mesh: str = "X=2,Y=2"):
    return backward(forward, mesh, NUMERIC)


def edited(bw, keep=lambda g: True, change=lambda g: g):
    """``bw`` with some of its gradient steps dropped or changed (a hand-written variant the executor runs)."""
    return dataclasses.replace(bw, grads=tuple(change(g) for g in bw.grads if keep(g)))


def with_step(g, step):
    """Gradient step ``g`` as one plan step ``step`` (its statement too)."""
    return dataclasses.replace(g, statement=step.statement(), plan=dataclasses.replace(g.plan, steps=(step,)))


def test_the_right_layer_backward_matches_the_dense_gradient() -> None:
    bw = derived()
    assert gradcheck(bw).ok
    assert verify(LAYER, bw.program(), "X=2,Y=2", NUMERIC).ok


def test_a_residuals_cotangent_never_added_is_a_missing_contribution() -> None:
    bw = derived()
    adds = [g for g in bw.grads if isinstance(g.statement.expr, Apply) and g.statement.expr.op is Op.ADD]
    assert [text(g.statement) for g in adds] == ["dIn[B_X, D] + dOut[B_X, D] -> dIn[B_X, D]"]
    wrong = edited(bw, keep=lambda g: g not in adds)
    report = verify(LAYER, wrong.program(), "X=2,Y=2", NUMERIC)
    assert rules(report) == [("error", "missing-contribution", len(statements(wrong)))]
    (f,) = report.findings
    assert f.message == (
        "dIn never gets the cotangent dOut that statement 7 of the forward (In[B_X, D] + O[B_X, D] -> "
        "Out[B_X, D]) passes on to In unchanged: the gradient misses that term"
    )
    assert f.fix == "add it: dOut[B_X, D] + dIn[B_X, D] -> dIn[B_X, D]"
    check = gradcheck(wrong)
    assert not check.ok and {p.input for p in check.probes if not p.ok} == {"In"}


def test_a_norm_gradient_reading_its_result_is_a_wrong_operand() -> None:
    bw = derived()
    (norm,) = filter(derivative_of(Op.RMSNORM), bw.grads)
    step = norm.plan.steps[0]
    n = parse_tensor("N[B_X, D]")
    wrong = edited(
        bw,
        change=lambda g: (
            with_step(g, dataclasses.replace(step, inputs=(n, step.inputs[1]))) if g is norm else g
        ),
    )
    written = "\n".join(statements(wrong))
    assert "rmsnorm'_D(N[B_X, D], dN[B_X, D]) -> dIn[B_X, D]" in written
    report = verify(LAYER, written, "X=2,Y=2", NUMERIC)
    assert rules(report) == [("error", "wrong-operand", number(wrong, "rmsnorm'"))]
    (f,) = report.findings
    assert f.fix == "read In[B_X, D]: rmsnorm'_D(In[B_X, D], dN[B_X, D]) -> dIn[B_X, D]"
    assert written[f.span.start : f.span.end] == "N[B_X, D]"  # the caret is on the operand
    assert {p.input for p in gradcheck(wrong).probes if not p.ok} == {"In"}


def test_a_gains_gradient_multiplied_by_the_wrong_operand_is_a_wrong_operand() -> None:
    bw = derived()
    (dn,) = [g for g in bw.grads if g.of == "N"]
    step = dn.plan.steps[0]
    n = parse_tensor("N[B_X, D]")
    wrong = edited(
        bw,
        change=lambda g: (
            with_step(g, dataclasses.replace(step, inputs=(step.inputs[0], n))) if g is dn else g
        ),
    )
    report = verify(LAYER, wrong.program(), "X=2,Y=2", NUMERIC)
    assert rules(report) == [("error", "wrong-operand", number(wrong, "dH[B_X, D] .*"))]
    assert report.findings[0].fix == "read G[D]: dH[B_X, D] .* G[D] -> dN[B_X, D]"
    assert {p.input for p in gradcheck(wrong).probes if not p.ok} == {"In"}


def test_another_functions_derivative_is_not_a_gradient() -> None:
    bw = derived()
    (norm,) = filter(derivative_of(Op.RMSNORM), bw.grads)
    step = norm.plan.steps[0]
    silu = dataclasses.replace(step, op=DERIVATIVE[Op.SILU], dim=None, axes=())
    wrong = edited(bw, change=lambda g: with_step(g, silu) if g is norm else g)
    report = verify(LAYER, wrong.program(), "X=2,Y=2", NUMERIC)
    assert rules(report) == [("error", "not-a-gradient", number(wrong, "silu'(In"))]
    assert (
        report.findings[0].fix
        == "the derived backward writes rmsnorm'_D(In[B_X, D], dN[B_X, D]) -> dIn[B_X, D]"
    )
    assert {p.input for p in gradcheck(wrong).probes if not p.ok} == {"In"}


def test_a_function_gradient_computed_twice_is_a_duplicate_contribution() -> None:
    # silu' into a part dU' of dU, then added to dU: the gradient of U doubled
    bw = derived()
    (du,) = [g for g in bw.grads if g.of == "U"]
    step = du.plan.steps[0]
    part = dataclasses.replace(step, output=parse_tensor("dU'[B_X, F_Y]"))
    add = dataclasses.replace(step, op=Op.ADD, inputs=(part.output, step.output))
    twice = (
        du,
        dataclasses.replace(
            du, statement=add.statement(), plan=dataclasses.replace(du.plan, steps=(part, add))
        ),
    )
    wrong = dataclasses.replace(bw, grads=tuple(x for g in bw.grads for x in (twice if g is du else (g,))))
    written, first = statements(wrong), number(wrong, "silu'")
    assert written[first - 1 : first + 2] == [
        "silu'(U[B_X, F_Y], dS[B_X, F_Y]) -> dU[B_X, F_Y]",
        "silu'(U[B_X, F_Y], dS[B_X, F_Y]) -> dU'[B_X, F_Y]",
        "dU'[B_X, F_Y] + dU[B_X, F_Y] -> dU[B_X, F_Y]",
    ]
    report = verify(LAYER, "\n".join(written), "X=2,Y=2", NUMERIC)
    assert rules(report) == [("error", "duplicate-contribution", first + 1)]
    assert {p.input for p in gradcheck(wrong).probes if not p.ok} >= {"W", "In"}


def test_a_missing_function_gradient_is_a_missing_contribution() -> None:
    bw = derived()
    wrong = edited(bw, keep=lambda g: g.of != "G")  # the gain's gradient: .* then sum_B, dropped
    report = verify(LAYER, wrong.program(), "X=2,Y=2", NUMERIC)
    assert ("error", "missing-contribution", len(wrong.program().statements)) in rules(report)
    (f,) = [f for f in report.findings if f.rule == "missing-contribution"]
    assert f.fix == "add sum_B(dG'[B_X, D]) -> dG[D]"


def _rmsnorm_prime(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """rmsnorm' over the last axis, by the record's dense meaning."""
    return np.asarray(RECORDS[DERIVATIVE[Op.RMSNORM]].dense([x, dy], x.ndim - 1, None))


def test_statistics_of_a_sharded_dim_taken_per_block_are_local_statistics() -> None:
    # the program holds In and dH as D_X blocks; written with D whole, each device would normalize its block by
    # its own block's statistics
    written = (
        "dOut[B, F] * W[D_X, F] -> dH[B, D_X]; H[B, D_X] * dOut[B, F] -> dW[D_X, F]; "
        "rmsnorm'_D(In[B, D], dH[B, D]) -> dIn[B, D]"
    )
    report = verify(NORM_SHARDED, written, "X=2", {"B": 64, "D": 1024, "F": 4096})
    assert rules(report) == [("error", "local-statistics", 3)]
    (f,) = report.findings
    assert f.message == (
        "rmsnorm'_D reads In[B, D], but the program holds In[B, D_X]: each device would take the sum of squares "
        "and dot of its own block of D for the whole row's, never all-reduced over X"
    )
    assert written[f.span.start : f.span.end] == "In[B, D]"
    right = written.replace("In[B, D], dH[B, D]) -> dIn[B, D]", "In[B, D_X], dH[B, D_X]) -> dIn[B, D_X]")
    assert verify(NORM_SHARDED, right, "X=2", {"B": 64, "D": 1024, "F": 4096}).ok
    # on numbers: the executor's blocks of D, each device's statistics its own, against the dense gradient
    vm, rng = VirtualMesh(Mesh(X=2)), np.random.default_rng(0)
    x, dy = rng.standard_normal((4, 8)), rng.standard_normal((4, 8))
    sharded = parse_tensor("In[B, D_X]")
    blocks_x, blocks_dy = shard(x, sharded, vm), shard(dy, sharded, vm)
    local = {c: _rmsnorm_prime(blocks_x[c], blocks_dy[c]) for c in vm.coords}
    assert not np.allclose(unshard(local, sharded, vm), _rmsnorm_prime(x, dy))
    # the right one: the derived backward's step, statistics all-reduced over X, run on the executor
    bw = backward(NORM_SHARDED, "X=2", NUMERIC)
    assert "rmsnorm'_D(In[B, D_X], dH[B, D_X]) -> dIn[B, D_X]" in statements(bw)
    assert gradcheck(bw).ok


def test_a_partial_cotangent_fed_to_a_norms_gradient_is_a_partial_cotangent() -> None:
    forward = "rmsnorm_D(In[B_X, D]) -> H[B_X, D]; H[B_X, D] * W[D, F_Y] -> Out[B_X, F_Y]"
    bw = backward(forward, "X=2,Y=2", NUMERIC)
    written = "\n".join(statements(bw))
    assert "AllReduce_Y(dH[B_X, D]{U_Y}) -> dH[B_X, D]" in written
    wrong = written.replace("AllReduce_Y(dH[B_X, D]{U_Y}) -> dH[B_X, D]\n", "").replace(
        "dH[B_X, D]) -> dIn", "dH[B_X, D]{U_Y}) -> dIn"
    )
    report = verify(forward, wrong, "X=2,Y=2", NUMERIC)
    assert rules(report) == [("error", "partial-cotangent", len(statements(bw)) - 1)]
    (f,) = report.findings
    assert f.fix == "reduce it first: AllReduce_Y(dH[B_X, D]{U_Y}) -> dH[B_X, D]"
    assert "each device would apply it to its own partial sum" in f.message
    # written as a whole dH, the same reading is the partial value used as the whole one
    hidden = written.replace("AllReduce_Y(dH[B_X, D]{U_Y}) -> dH[B_X, D]\n", "")
    assert rules(verify(forward, hidden, "X=2,Y=2", NUMERIC)) == [
        ("error", "partial-as-replicated", len(statements(bw)) - 1)
    ]
    # on numbers: each device's partial sum of dH (as the executor cuts {U_Y}) through rmsnorm': the devices
    # along Y hold different values of what should be one dIn, none of them the dense gradient
    vm, rng = VirtualMesh(Mesh(X=2, Y=2)), np.random.default_rng(0)
    x, dy = rng.standard_normal((4, 8)), rng.standard_normal((4, 8))
    xs, parts = shard(x, parse_tensor("In[B_X, D]"), vm), shard(dy, parse_tensor("dH[B_X, D]{U_Y}"), vm, rng)
    each = {c: _rmsnorm_prime(xs[c], parts[c]) for c in vm.coords}
    with pytest.raises(ExecutionError):
        unshard(each, parse_tensor("dIn[B_X, D]"), vm)
    right = _rmsnorm_prime(x, dy)
    assert not any(np.allclose(each[c], right[2 * c[0] : 2 * c[0] + 2]) for c in vm.coords)
    assert gradcheck(bw).ok  # the derived one: dH all-reduced first


# ---- a property: random small layers ------------------------------------------------------------------

FUNCTIONS = [Op.GELU, Op.SILU, Op.SCALE, Op.SOFTMAX, Op.RMSNORM, Op.LAYERNORM, Op.MAX, Op.ADD, Op.MULTIPLY]


@st.composite
def layers(draw):
    """A product, then a function of its result (a second operand for + and .*), on a 2x2 mesh."""
    axes = ("X", "Y")

    def dims(names: list[str]) -> tuple[Dim, ...]:
        where = {a: draw(st.sampled_from([*names, None])) for a in axes}
        return tuple(Dim(d, tuple(a for a in axes if where[a] == d)) for d in names)

    x, w = Tensor("X", dims(["B", "D"])), Tensor("W", dims(["D", "F"]))
    h = Tensor("H", dims(["B", "F"]))
    op = draw(st.sampled_from(FUNCTIONS))
    if op in (Op.ADD, Op.MULTIPLY):
        other = Tensor("A", dims(draw(st.sampled_from([["B", "F"], ["F"]]))))
        apply = Apply(op, (h, other))
    else:
        apply = Apply(op, (h,), "F" if op.takes_dim else None, factor=0.5 if op is Op.SCALE else None)
    try:
        out = RECORDS[op].result(apply.operands, apply.dim)
    except ShardalgError:
        assume(False)
    prog = Program((Arrow(Product(x, w), h), Arrow(apply, Tensor("R", out.dims, out.unreduced))))
    return prog


@settings(max_examples=25, deadline=None)
@given(layers(), st.booleans())
def test_random_layers_derived_backward_verifies_and_dropping_a_function_gradient_does_not(
    prog, defer
) -> None:
    mesh, sizes = Mesh(X=2, Y=2), {"B": 8, "D": 8, "F": 8}
    try:
        bw = backward(prog, mesh, sizes, defer_reductions=defer)
    except (NoPlan, ShardalgError):
        assume(False)
    report = verify(prog, bw.program(), mesh, sizes, defer_reductions=defer)
    assert report.ok, str(report)
    written = bw.program().statements
    fn = [i for i, s in enumerate(written) if isinstance(s.expr, Apply) and s.expr.op is not Op.ADD]
    if fn:  # the last function gradient dropped: a gradient missing (or read before it is made)
        dropped = Program(tuple(s for i, s in enumerate(written) if i != fn[-1]))
        assert not verify(prog, dropped, mesh, sizes, defer_reductions=defer).ok


def test_x_minus_x_passes_its_cotangent_on_once() -> None:
    """``In - In``: the left operand's gradient is the cotangent passed on, the right one's its scale by -1
    (a derived step): one addition of dV0 is the gradient, none misses it, two double it."""
    forward, sizes = "In[B, D] - In[B, D] -> V0[B, D]", {"B": 4, "D": 4}
    scale = "scale_{-1}(dV0[B, D]) -> dIn[B, D]"
    once = f"{scale}; dIn[B, D] + dV0[B, D] -> dIn[B, D]"
    assert verify(forward, once, "X=2", sizes).ok
    assert rules(verify(forward, scale, "X=2", sizes)) == [("error", "missing-contribution", 1)]
    twice = f"{once}; dIn[B, D] + dV0[B, D] -> dIn[B, D]"
    assert rules(verify(forward, twice, "X=2", sizes)) == [("error", "duplicate-contribution", 3)]
