"""The strategies of seed 002, derived forward and backward: the exact collectives, in order.

Sizes are those of each strategy's regime (DP/FSDP: a large batch; TP: a small one), because the planner
picks the cheapest plan and the cheapest plan depends on them.
"""

from __future__ import annotations

import pytest

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.transpose import Cast, transpose
from shardalg.notation.parse import parse
from shardalg.notation.syntax import Op
from shardalg.planning.backward import backward

AG, RS, AR = "AllGather", "ReduceScatter", "AllReduce"
TRAIN = {"B": 1 << 16, "D": 1024, "F": 4096}  # data parallel regime: B >> D, F
TP = {"B": 512, "D": 4096, "F": 16384}  # model parallel regime: B small


def grads_by_value(bw):
    """Per gradient einsum: (the value it differentiates, its collectives)."""
    return [(g.of, tuple((s.op.value, s.axes) for s in g.plan.steps if s.communicates)) for g in bw.grads]


def test_dp_one_allreduce_per_weight_gradient():
    bw = backward("In[B_X, D] * W[D, F] -> Out[B_X, F]", Mesh(X=4), TRAIN)
    assert bw.collectives == ((AR, ("X",)),)
    assert grads_by_value(bw) == [("In", ()), ("W", ((AR, ("X",)),))]
    assert str(bw.gradient("W")) == "dW[D, F]"
    assert str(bw.gradient("In")) == "dIn[B_X, D]"
    assert bw.forward_collectives == ()


def test_dp_two_layers_one_allreduce_each():
    prog = "In[B_X, D] * W1[D, F] -> H[B_X, F]; H[B_X, F] * W2[F, D] -> Out[B_X, D]"
    bw = backward(prog, Mesh(X=4), TRAIN)
    assert grads_by_value(bw) == [("H", ()), ("W2", ((AR, ("X",)),)), ("In", ()), ("W1", ((AR, ("X",)),))]


def test_fsdp_reduce_scatters_the_weight_gradient_and_regathers_the_weight():
    bw = backward("In[B_X, D] * W[D_X, F] -> Out[B_X, F]", Mesh(X=4), TRAIN)
    assert bw.forward_collectives == ((AG, ("X",)),)
    assert bw.collectives == ((AG, ("X",)), (RS, ("X",)))
    assert grads_by_value(bw) == [("In", ((AG, ("X",)),)), ("W", ((RS, ("X",)),))]
    assert str(bw.gradient("W")) == "dW[D_X, F]"
    gather = bw.grads[0].plan.steps[0]
    assert gather.op is Op.ALL_GATHER and str(gather.inputs[0]) == "W[D_X, F]"


def test_fsdp_with_the_gather_written_out_gives_the_same_backward():
    explicit = "AllGather_X: W[D_X, F] -> W[D, F]; In[B_X, D] * W[D, F] -> Out[B_X, F]"
    implicit = "In[B_X, D] * W[D_X, F] -> Out[B_X, F]"
    a, b = backward(explicit, Mesh(X=4), TRAIN), backward(implicit, Mesh(X=4), TRAIN)
    assert a.collectives == b.collectives == ((AG, ("X",)), (RS, ("X",)))
    assert dict(a.gradients) == dict(b.gradients)


def test_tp_activation_collectives_appear_transposed():
    prog = "In[B, D_Y] * W_in[D, F_Y] -> H[B, F_Y]; H[B, F_Y] * W_out[F_Y, D] -> Out[B, D]"
    bw = backward(prog, Mesh(Y=4), TP)
    # forward: gather the activation In, all-reduce the partial Out
    assert bw.forward_collectives == ((AG, ("Y",)), (AR, ("Y",)))
    # backward: dOut is replicated (the forward AllReduce costs nothing back); dIn is reduce-scattered
    # (the transpose of the forward AllGather of In); In is gathered again for dW_in
    assert grads_by_value(bw) == [
        ("H", ()),
        ("W_out", ()),
        ("In", ((RS, ("Y",)),)),
        ("W_in", ((AG, ("Y",)),)),
    ]
    assert str(bw.gradient("In")) == "dIn[B, D_Y]"
    assert str(bw.gradient("W_in")) == "dW_in[D, F_Y]"


def test_megatron_column_then_row():
    prog = "X[B, D] * W1[D, F_Y] -> H[B, F_Y]; H[B, F_Y] * W2[F_Y, D] -> Out[B, D]"
    bw = backward(prog, Mesh(Y=4), TP)
    first, second = bw.forward_plans
    assert first.collectives == ()  # no communication between the two matmuls
    assert [(s.op.value, s.axes) for s in second.collectives] == [(AR, ("Y",))]
    assert bw.collectives == ((AR, ("Y",)),)  # one reduction in backward: dX
    assert grads_by_value(bw) == [("H", ()), ("W2", ()), ("X", ((AR, ("Y",)),)), ("W1", ())]


def test_megatron_with_deferred_reductions_leaves_dx_unreduced():
    prog = "X[B, D] * W1[D, F_Y] -> H[B, F_Y]; H[B, F_Y] * W2[F_Y, D] -> Out[B, D]"
    bw = backward(prog, Mesh(Y=4), TP, defer_reductions=True)
    assert bw.collectives == ()
    assert str(bw.gradient("X")) == "dX[B, D]{U_Y}"


def test_dp_invariant_weight_gradient_arrives_reduced_even_when_deferring():
    bw = backward("In[B_X, D] * W[D, F]{I_X} -> Out[B_X, F]", Mesh(X=4), TRAIN, defer_reductions=True)
    assert bw.collectives == ((AR, ("X",)),)
    assert str(bw.gradient("W")) == "dW[D, F]{I_X}"
    plain = backward("In[B_X, D] * W[D, F] -> Out[B_X, F]", Mesh(X=4), TRAIN, defer_reductions=True)
    assert plain.collectives == ()
    assert str(plain.gradient("W")) == "dW[D, F]{U_X}"


def test_fsdp_tp_together():
    # H[B_X, F_Y] · W_out[F_Y, D_X] is case 4 (B and D both on X), so the program gathers W_out first,
    # as the book does; the backward gathers it again from its shards
    prog = (
        "In[B_X, D_Y] * W_in[D_X, F_Y] -> H[B_X, F_Y]; AllGather_X: W_out[F_Y, D_X] -> W_out[F_Y, D]; "
        "H[B_X, F_Y] * W_out[F_Y, D] -> Out[B_X, D_Y]"
    )
    bw = backward(prog, Mesh(X=4, Y=2), {"B": 1 << 15, "D": 2048, "F": 8192})
    grads = dict((of, c) for of, c in grads_by_value(bw))
    # FSDP moves the weights: each weight is gathered over X and its gradient reduce-scattered over X
    assert (RS, ("X",)) in grads["W_in"] and (RS, ("X",)) in grads["W_out"]
    assert str(bw.gradient("W_in")) == "dW_in[D_X, F_Y]"
    assert str(bw.gradient("W_out")) == "dW_out[F_Y, D_X]"
    assert str(bw.gradient("In")) == "dIn[B_X, D_Y]"
    # forward: gather In over Y (TP) and W_in over X (FSDP); W_out over X (the statement written as such);
    # reduce-scatter Out over Y
    assert bw.forward_collectives == ((AG, ("Y",)), (AG, ("X",)), (AG, ("X",)), (RS, ("Y",)))
    # backward, per layer in reverse: the book's eleven steps (dOut gathered once, serving dH and dW_out)
    assert grads_by_value(bw) == [
        ("H", ((AG, ("Y",)), (AG, ("X",)))),  # dOut over Y, W_out over X again
        ("W_out", ((RS, ("X",)),)),  # reuses the gathered dOut
        ("In", ((AG, ("X",)), (RS, ("Y",)))),  # W_in over X again; dIn back to D_Y
        ("W_in", ((AG, ("Y",)), (RS, ("X",)))),  # In over Y again; dW_in back to D_X
    ]


# ---- the two views agree where both apply ---------------------------------------------------------------


def test_fsdp_local_transpose_is_what_global_planning_gives():
    mesh = Mesh(X=4)
    gather = parse("AllGather_X: W[D_X, F] -> W[D, F]").statements[0]
    (local,) = transpose(gather, mesh)
    bw = backward("In[B_X, D] * W[D_X, F] -> Out[B_X, F]", mesh, TRAIN)
    (rs,) = [s for s in bw.grads[1].plan.steps if s.communicates]
    assert (local.op, local.axes, local.dim) == (rs.op, rs.axes, rs.dim)
    assert local.input.layout() == rs.inputs[0].layout() and local.output.layout() == rs.output.layout()


def test_dp_local_transpose_is_what_global_planning_gives():
    mesh = Mesh(X=4)
    # local view: the invariant weight is used as replicated (pvary); its transpose is AllReduce U -> I
    from shardalg.algebra.transpose import LocalStep
    from shardalg.notation.syntax import Dim, Tensor

    w_inv = Tensor("W", (Dim("D"), Dim("F")), invariant=("X",))
    (local,) = transpose(LocalStep(Cast.PVARY, w_inv, Tensor("W", (Dim("D"), Dim("F"))), ("X",)), mesh)
    bw = backward("In[B_X, D] * W[D, F]{I_X} -> Out[B_X, F]", mesh, TRAIN)
    (ar,) = [s for s in bw.grads[1].plan.steps if s.communicates]
    assert (local.op, local.axes) == (ar.op, ar.axes) == (Op.ALL_REDUCE, ("X",))
    assert local.input.layout() == ar.inputs[0].layout() and local.output.layout() == ar.output.layout()


@pytest.mark.parametrize("fmt", ["text", "unicode", "latex"])
def test_backward_prints_with_reasons(fmt):
    bw = backward("In[B_X, D] * W[D_X, F] -> Out[B_X, F]", Mesh(X=4), TRAIN)
    out = {"text": str, "unicode": lambda b: b.unicode(), "latex": lambda b: b.latex()}[fmt](bw)
    assert "ReduceScatter" in out and "AllGather" in out
    assert "gradient of statement 1" in out
    j = bw.to_json()
    assert [c["op"] for c in j["collectives"]] == [AG, RS]
    assert j["gradients"]["W"] == "dW[D_X, F]"
