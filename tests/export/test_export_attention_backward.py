"""The ring's derived backward exported as jax.shard_map code and run on 8 fake CPU devices (X=4, Y=2) after the
forward ring (the backward reads O's row log-sum-exp, kept beside O by the forward's blocks): dQ, dK, dV equal
the dense gradients, computed here by the textbook formulas (issue 26, the core's backward)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from shardalg.algebra.mesh import Mesh
from shardalg.export.flow import Flow, as_flow
from shardalg.export.harness import check_sizes, dense_outputs, random_inputs
from shardalg.notation.parse import parse
from shardalg.planning.attention import core_of
from shardalg.planning.attention_backward import is_ring, named_apart, ring_backward
from shardalg.planning.backward import backward
from shardalg.planning.planner import plans

pytest.importorskip("jax", reason="jax is not installed (pip install 'shardalg[jax]'); CI installs it")

from shardalg.export.jax import check_jax, export_jax  # noqa: E402

MESH = Mesh(X=4, Y=2)
SIZES = {"B": 2, "T": 8, "S": 8, "H": 2, "E": 4}


def core(flags: str) -> str:
    sub = "S" if not flags else "{S," + flags + "}"
    return (
        "Q[B, T_X, H_Y, E] · K[B, S_X, H_Y, E] -> Sc[B, H_Y, T_X, S]; "
        f"softmax_{sub}(Sc[B, H_Y, T_X, S]) -> P[B, H_Y, T_X, S]; "
        "P[B, H_Y, T_X, S] · V[B, S_X, H_Y, E] -> O[B, T_X, H_Y, E]"
    )


def dense_grads(q, k, v, do, causal):
    s = np.einsum("bthe,bshe->bhts", q, k)
    if causal:
        t_, s_ = q.shape[1], k.shape[1]
        s = np.where(np.arange(s_)[None, :] > np.arange(t_)[:, None] + (s_ - t_), -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dv = np.einsum("bhts,bthe->bshe", p, do)
    ds = p * (
        np.einsum("bthe,bshe->bhts", do, v) - (np.einsum("bthe,bshe->bhts", do, v) * p).sum(-1, keepdims=True)
    )
    return np.einsum("bhts,bshe->bthe", ds, k), np.einsum("bhts,bthe->bshe", ds, q), dv


def grad_flow(flags: str, derived: bool) -> Flow:
    """The forward ring (its shifted blocks named apart) and its derived backward as one flow, out dQ, dK, dV:
    ``backward``'s own (its forward runs first), or put together here from the planner's plans."""
    if derived:
        return as_flow(backward(core(flags), MESH, SIZES), MESH, SIZES)
    prog = parse(core(flags))
    ring = next(p for p in plans(prog, MESH, SIZES) if is_ring(p))
    bw = ring_backward(ring, core_of(prog), MESH)
    flow = as_flow([named_apart(ring), bw], MESH, SIZES)
    last = {s.output.name: s.output for s in bw.steps}
    return replace(flow, outputs=tuple(last[n] for n in ("dQ", "dK", "dV")))


@pytest.mark.parametrize(("flags", "derived"), [("", False), ("causal", True)])
def test_the_ring_backward_runs_in_jax_and_equals_dense_gradients(flags: str, derived: bool) -> None:
    flow = grad_flow(flags, derived)
    assert [t.name for t in flow.inputs] == ["Q", "K", "V", "dO"]
    assert [t.name for t in flow.outputs] == ["dQ", "dK", "dV"]
    arrays = random_inputs(flow, MESH, check_sizes(flow, MESH, SIZES), 0)  # what check_jax draws (seed 0)
    want = dense_grads(*(np.asarray(a, dtype=np.float64) for a in arrays), causal=bool(flags))
    for got, w in zip(dense_outputs(flow, arrays, MESH), want, strict=True):
        assert np.max(np.abs(got - w)) < 1e-9 * max(1.0, np.max(np.abs(w)))
    (r,) = check_jax(flow, MESH, sizes=SIZES)
    assert r.ok and r.max_error < 1e-5, r.message


@pytest.mark.parametrize("flags", ["", "causal"])
def test_the_ring_backward_equals_jax_vjp_of_the_exported_forward(flags: str, tmp_path) -> None:
    """The derived ring backward's dQ, dK, dV (its flow run densely, as the executor means it) equal
    ``jax.vjp`` of the exported forward (``jax.shard_map`` of the generated ring code, float64) for the same
    Q, K, V and cotangent dO: the issue's "each backward equals jax.vjp of the exported forward"."""
    from tests.export.test_export_backward_functions import _jax_vjp

    grads = grad_flow(flags, derived=True)
    arrays = [np.asarray(a, dtype=np.float64) for a in random_inputs(grads, MESH, SIZES, 1)]
    ours = dense_outputs(grads, arrays, MESH)
    forward = as_flow(parse(core(flags)), MESH, SIZES)
    assert [t.name for t in forward.inputs] == ["Q", "K", "V"] and [t.name for t in forward.outputs] == ["O"]
    (theirs,) = _jax_vjp([(export_jax(forward, MESH), arrays[:3], arrays[3:])], tmp_path)
    for name, got, want in zip(("dQ", "dK", "dV"), ours, theirs, strict=True):
        assert float(np.abs(want).max()) > 1e-3, name  # the comparison could fail
        assert np.abs(got - want).max() < 1e-9 * max(1.0, float(np.abs(want).max())), name
