"""rename_{T,S}: a dim of a value called by another name (issue 26: the attention core's keys are the
projection's tokens). It parses and prints in the three syntaxes and JSON, its plans equal the dense result on
the executor over random layouts, a sharded T made whole S is an AllGather (sequence parallelism pays for its
keys), a rename in place moves nothing and costs nothing, and its backward (the rename back) equals the dense
gradient on numbers and in JAX."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import shardalg
from shardalg.algebra.mesh import Mesh
from shardalg.costs.costmodel import CostModel
from shardalg.costs.stepcost import Options
from shardalg.costs.steps import step_cost
from shardalg.errors import ShardalgError
from shardalg.notation.jsonread import from_json
from shardalg.notation.parse import parse
from shardalg.notation.printing import latex, text, to_json, unicode
from shardalg.notation.syntax import Op
from shardalg.numeric.execute import run_plan
from shardalg.planning.backward import backward
from shardalg.planning.forward import analyze

from .fnbackward import check_against_finite_differences

MESH = "X=2,Y=2"
SIZES = {"B": 4, "T": 8, "S": 8, "N": 4}


def test_rename_round_trips_in_the_three_syntaxes_and_json() -> None:
    prog = parse("rename_{T,S}(Kp[B, T_X, N]) -> K[B, S_X, N]")
    call = prog.statements[0].expr
    assert call.op is Op.RENAME and call.dim == "T" and call.to == "S"
    assert latex(prog) == r"\mathrm{rename}_{T,S}(\text{Kp}[B, T_X, N]) \rightarrow K[B, S_X, N]"
    for form in (text(prog), unicode(prog), latex(prog)):
        assert parse(form) == prog, form
    j = to_json(prog)
    assert j["statements"][0]["expr"]["to"] == "S" and "flags" not in j["statements"][0]["expr"]
    assert from_json(json.loads(json.dumps(j))) == prog


@pytest.mark.parametrize(
    "bad",
    [
        "rename_T(K[B, T]) -> K2[B, S]",
        "rename_{T,T}(K[B, T]) -> K2[B, T]",
        "rename_{T,S,U}(K[B, T]) -> K2[B, S]",
    ],
)
def test_a_rename_names_its_dim_and_one_new_name(bad: str) -> None:
    with pytest.raises(ShardalgError, match="rename names the dim, then its new name"):
        parse(bad)


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("rename_{Q,S}(K[B, T]) -> K2[B, S]", "which K[B, T] does not have"),
        ("rename_{T,B}(K[B, T]) -> K2[B, B]", "already has a dim B"),
    ],
)
def test_a_rename_of_a_dim_the_tensor_lacks_or_onto_one_it_has_is_refused(query: str, says: str) -> None:
    with pytest.raises(ShardalgError, match=re.escape(says)):
        shardalg.plans(query, mesh=MESH, sizes={"B": 4, "T": 8, "S": 8})


def test_a_rename_in_place_moves_nothing_and_costs_nothing() -> None:
    (plan, *_) = shardalg.plans("rename_{T,S}(Kp[B, T_X, N]) -> K[B, S_X, N]", mesh=MESH, sizes=SIZES)
    (step,) = plan.steps
    assert step.op is Op.RENAME and not step.communicates
    assert "nothing moved" in step.reason
    cost = shardalg.plan_cost(plan, mesh=MESH)
    assert cost.total == 0 and cost.flops == 0
    one = step_cost(step, Options.of(CostModel.of(None), Mesh.parse(MESH), None))
    assert one.hbm_bytes.sympy() == 0 and one.vector_flops.sympy() == 0


def test_a_sharded_sequence_made_whole_keys_is_an_all_gather() -> None:
    """Sequence parallelism's price for its keys: T over X, the keys' S whole on each device."""
    (plan, *_) = shardalg.plans("rename_{T,S}(Kp[B, T_X, N]) -> K[B, S, N]", mesh=MESH, sizes=SIZES)
    assert [s.op for s in plan.steps if s.communicates] == [Op.ALL_GATHER]
    assert [s.axes for s in plan.steps if s.communicates] == [("X",)]


_PLACES = ["", "X", "Y", "XY"]


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(_PLACES), st.sampled_from(_PLACES), st.sampled_from(_PLACES))
def test_every_plan_of_a_rename_equals_dense(t: str, s: str, b: str) -> None:
    src_b = "" if set(b) & set(t) else b
    dst_b = "" if set(b) & set(s) else b
    sub = lambda d, axes: f"{d}_{axes}" if axes else d  # noqa: E731
    query = (
        f"rename_{{T,S}}(Kp[{sub('B', src_b)}, {sub('T', t)}, N]) -> K[{sub('B', dst_b)}, {sub('S', s)}, N]"
    )
    found = shardalg.plans(query, mesh=MESH, sizes=SIZES)
    assert found, query
    for plan in found:
        assert run_plan(plan, MESH, SIZES).ok, (query, str(plan))


@pytest.mark.parametrize(
    "query",
    [
        "rename_{T,S}(Kp[B, T_X, N]) -> K[B, S, N]",
        "rename_{T,S}(Kp[B_Y, T_X, N]) -> K[B_Y, S_X, N]",
        "X[B, T_X, N] * W[N, D_Y] -> Kp[B, T_X, D_Y]; rename_{T,S}(Kp[B, T_X, D_Y]) -> K[B, S, D_Y]",
    ],
)
def test_the_backward_of_a_rename_is_the_rename_back_and_equals_the_dense_gradient(query: str) -> None:
    sizes = {**SIZES, "D": 4}
    prog = parse(query)
    bw = backward(prog, MESH, sizes)
    fw = analyze(prog, bw.mesh, dict(sizes))
    check_against_finite_differences(bw, fw, sizes, 0)
    renames = [s for g in bw.grads for s in g.plan.steps if s.op is Op.RENAME]
    assert [(s.dim, s.to) for s in renames] == [("S", "T")]


SP_KEYS = "rename_{T,S}(Kp[B, T_X, N]) -> K[B, S, N]; Q[B, T_X, N] * K[B, S, N] -> Sc[B, T_X, S]"


@pytest.mark.parametrize(
    ("query", "scattered"),
    [
        (SP_KEYS, True),  # the gather's transpose: dK's partials reduce-scattered into Kp's shards
        # read by a second product with no contracted dim (which cannot leave its part of dK unreduced): dK
        # is its primal's own gradient, reduced, and the rename back slices it, as before
        (SP_KEYS + "; K[B, S, N] * M[B, S, N] -> Z[B, S, N]", False),
    ],
)
def test_a_renamed_values_gradient_is_reduced_by_the_rename_back(query: str, scattered: bool) -> None:
    """The cotangent of K, replicated over X, is a sum of partials over X (each device's queries' part);
    read by one product, it stays so, and the rename back's plan reduces it into Kp's shards: a
    ReduceScatter, not an AllReduce and a Slice (SP's 373 us a layer on the searched transformer)."""
    prog = parse(query)
    bw = backward(prog, MESH, SIZES)
    moves = [(s.op, s.axes) for s in bw.steps if s.communicates and s.inputs[0].name == "dK"]
    assert (moves == [(Op.REDUCE_SCATTER, ("X",))]) is scattered, moves
    (back,) = [g for g in bw.grads if g.of == "Kp"]
    first = Op.REDUCE_SCATTER if scattered else Op.SLICE
    assert [s.op for s in back.plan.steps] == [first, Op.RENAME]
    check_against_finite_differences(bw, analyze(prog, bw.mesh, dict(SIZES)), SIZES, 1)


def test_a_rename_exported_to_jax_equals_dense_with_its_vjp() -> None:
    pytest.importorskip("jax", reason="jax is not installed (pip install 'shardalg[jax]'); CI installs it")
    from shardalg.export.jax import check_jax

    sizes = {"B": 8, "T": 8, "S": 8, "N": 4}
    plans = [
        shardalg.plans(q, mesh="X=2,Y=4", sizes=sizes)[0]
        for q in (
            "rename_{T,S}(Kp[B_Y, T_X, N]) -> K[B_Y, S, N]",
            "rename_{T,S}(Kp[B, T_X, N]) -> K[B, S_X, N]",
        )
    ]
    for got in check_jax(plans, Mesh.parse("X=2,Y=4"), sizes=sizes, vjp=True):
        assert got.ok, got
