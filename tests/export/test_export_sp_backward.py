"""Sequence parallelism's backward on numbers (issue 26): the attention core with its keys and values renamed
from tokens sharded over X (``rename_{T,S}(Kp[B, T_X, ..]) -> K[B, S, ..]``, an AllGather in the forward), its
projections before it. The derived backward reduces dK and dV, partial sums over X (each device's queries'
part), with a ReduceScatter into Kp's and Vp's shards, the transpose of the gather, not an AllReduce and a
Slice; its plans run on the executor equal the dense gradient (finite differences) and ``jax.vjp`` of the
exported forward (8 CPU devices, float64), and the backward exported itself runs in JAX and equals dense."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from shardalg.algebra.mesh import Mesh
from shardalg.export.flow import as_flow
from shardalg.notation.parse import parse
from shardalg.notation.syntax import Op
from shardalg.planning.backward import backward
from shardalg.planning.forward import analyze
from tests.planning.fnbackward import check_against_finite_differences, run_backward, shape_of

pytest.importorskip("jax", reason="jax is not installed (pip install 'shardalg[jax]'); CI installs it")

from shardalg.export.jax import check_jax, export_jax  # noqa: E402

MESH = Mesh(X=4, Y=2)
SIZES = {"B": 2, "T": 8, "S": 8, "H": 2, "E": 4, "D": 4}


def sp_layer(softmax: str) -> str:
    return (
        "Xn[B, T_X, D] * Wq[D, H_Y, E] -> Q[B, T_X, H_Y, E]; "
        "Xn[B, T_X, D] * Wk[D, H_Y, E] -> Kp[B, T_X, H_Y, E]; "
        "Xn[B, T_X, D] * Wv[D, H_Y, E] -> Vp[B, T_X, H_Y, E]; "
        "rename_{T,S}(Kp[B, T_X, H_Y, E]) -> K[B, S, H_Y, E]; "
        "rename_{T,S}(Vp[B, T_X, H_Y, E]) -> V[B, S, H_Y, E]; "
        "Q[B, T_X, H_Y, E] * K[B, S, H_Y, E] -> Sc[B, H_Y, T_X, S]; "
        f"{softmax}(Sc[B, H_Y, T_X, S]) -> P[B, H_Y, T_X, S]; "
        "P[B, H_Y, T_X, S] * V[B, S, H_Y, E] -> A[B, T_X, H_Y, E]"
    )


SOFTMAXES = ["softmax_S", "softmax_{S,causal}"]


def _moves(bw, names: tuple[str, ...]) -> list[tuple[str, tuple[str, ...], str]]:
    return [
        (s.op.value, s.axes, s.inputs[0].name)
        for s in bw.steps
        if s.communicates and s.inputs[0].name in names
    ]


@pytest.mark.parametrize("softmax", SOFTMAXES)
def test_dk_and_dv_are_reduce_scattered_into_the_tokens_shards(softmax: str) -> None:
    bw = backward(sp_layer(softmax), MESH, SIZES)
    assert _moves(bw, ("dK", "dV", "dKp", "dVp")) == [
        ("ReduceScatter", ("X",), "dV"),
        ("ReduceScatter", ("X",), "dK"),
    ]
    assert bw.gradient("Kp").dims == parse(sp_layer(softmax)).statements[1].result.dims  # Kp's own shards
    renames = [g.plan for g in bw.grads if g.of in ("Kp", "Vp")]
    assert [[s.op for s in p.steps] for p in renames] == [[Op.REDUCE_SCATTER, Op.RENAME]] * 2


@pytest.mark.parametrize("softmax", SOFTMAXES)
def test_the_sp_backward_on_the_executor_equals_the_dense_gradient(softmax: str) -> None:
    prog = parse(sp_layer(softmax))
    bw = backward(prog, MESH, SIZES)
    check_against_finite_differences(bw, analyze(prog, MESH, dict(SIZES)), SIZES, 3)


@pytest.mark.parametrize("softmax", SOFTMAXES)
def test_the_sp_backward_equals_jax_vjp_of_the_exported_forward(softmax: str) -> None:
    from tests.export.test_export_backward_functions import _jax_vjp

    prog = parse(sp_layer(softmax))
    bw = backward(prog, MESH, SIZES)
    fw = analyze(prog, MESH, dict(SIZES))
    rng = np.random.default_rng(5)
    inputs = {r: rng.standard_normal(shape_of(fw.origin[r], SIZES)) for r in fw.inputs}
    seeds = {r: rng.standard_normal(shape_of(fw.latest[r], SIZES)) for r in fw.outputs}
    ours = run_backward(bw, fw, inputs, seeds, dict(SIZES), rng)
    flow = as_flow(prog, MESH, SIZES)
    ins, outs = [fw.root[t.name] for t in flow.inputs], [fw.root[t.name] for t in flow.outputs]
    assert sorted(ins) == ["Wk", "Wq", "Wv", "Xn"] and outs == ["A"]
    with tempfile.TemporaryDirectory(prefix="shardalg-vjp-") as tmp:
        (theirs,) = _jax_vjp(
            [(export_jax(flow, MESH), [inputs[r] for r in ins], [seeds[r] for r in outs])], Path(tmp)
        )
    for r, want in zip(ins, theirs, strict=True):
        scale = max(1.0, float(np.abs(want).max()))
        assert float(np.abs(want).max()) > 1e-3, r  # the comparison could fail
        assert np.abs(ours[r] - want).max() < 1e-9 * scale, r


def test_the_sp_backward_runs_in_jax_and_equals_dense() -> None:
    bw = backward(sp_layer("softmax_{S,causal}"), MESH, SIZES)
    (r,) = check_jax([bw], MESH, sizes=SIZES)
    assert r.ok, r.message
    assert r.max_error < 1e-5
