"""The memos of the cost path give the same answers as working everything out: a step's terms shared by
equal steps and kept by the values of the step and the options (another CostModel is another key), options
shared between equal calls, the schedule's dependencies read by identity, and the two-pass ranking by seconds."""

from __future__ import annotations

import pickle
import random

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from shardalg import plans as ranked
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.traffic import Sizes
from shardalg.cache import clear_caches
from shardalg.costs import schedule as sched
from shardalg.costs.costmodel import CostModel
from shardalg.costs.plancost import plan_cost
from shardalg.costs.ranking import seconds_key
from shardalg.costs.schedule import OverlapPolicy
from shardalg.costs.stepcost import Options
from shardalg.errors import UsageError
from shardalg.notation.parse import parse_tensor
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Op, Tensor
from shardalg.planning.order import HeadKey, plan_text_key

MESH = Mesh(X=2, Y=4)
SIZES = {"I": 1024, "J": 8192, "K": 4096}
CASES = (
    "A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]",
    "A[I_X, J_Y] · B[J, K] -> C[I_X, K]",
    "A[I_X, J_Y] · B[J_Y, K] -> C[I_X, K]",
    "A[I_X, J] · B[J, K_X] -> C[I_X, K]",
)


def _gather(name: str) -> Step:
    before, after = parse_tensor(f"{name}[I_X, J]"), parse_tensor(f"{name}[I, J]")
    return Step(Op.ALL_GATHER, (before,), after, ("X",))


def test_equal_steps_of_other_names_share_their_terms_and_keep_their_own_step():
    opts = _options()
    a, b = _gather("A"), _gather("B")
    ca, cb = sc_step(a, opts), sc_step(b, opts)
    assert ca.comms is cb.comms  # one term for both: the names take no part
    assert ca.step is a and cb.step is b  # each cost still prints its own step


def _options(hw=None, mesh=MESH, sizes=SIZES, **options) -> Options:
    return Options.of(CostModel.of(hw, **options), mesh, sizes)


def sc_step(step: Step, opts: Options):
    from shardalg.costs.steps import step_cost

    return step_cost(step, opts)


def test_another_cost_model_is_another_key():
    """No fingerprints of module constants: what a step's cost depends on is in its key (the Options, which
    holds the CostModel), so a cost model that differs in any field never reads another's memo."""
    step = _gather("A")
    both = sc_step(step, _options()).comms.sympy()
    one_way = sc_step(step, _options(ring="uni")).comms.sympy()
    assert sympy.simplify(one_way / both) != 1  # a ring used one way: not the bidirectional memo's time
    exact = sc_step(step, Options.of(CostModel.of(exact=True), MESH, SIZES)).comms.sympy()
    assert sympy.simplify(exact / both) != 1


def test_a_step_cost_is_kept_by_the_values_of_its_step_and_options():
    a, b = parse_tensor("A[I_X, J]"), parse_tensor("B[J, K]")
    mul = Step(Op.EINSUM, (a, b), parse_tensor("C[I_X, K]"), contract=("J",))
    first = sc_step(mul, _options())
    # an equal step made again, priced under options made again from equal arguments: the same cost
    again = Step(Op.EINSUM, (parse_tensor("A[I_X, J]"), b), parse_tensor("C[I_X, K]"), contract=("J",))
    assert again is not mul and sc_step(again, Options.of(CostModel(), Mesh(X=2, Y=4), dict(SIZES))) is first
    # other sizes, or another chip, are other options: another cost
    other = sc_step(mul, _options(sizes={**SIZES, "I": 2048}))
    assert other is not first and sympy.simplify(other.compute.sympy() / first.compute.sympy()) == 2
    assert sc_step(mul, _options("tpu-v5p")) is not first


def test_options_are_a_value_shared_between_equal_calls():
    sizes = dict(SIZES)
    first = _options("tpu-v5p", sizes=sizes)
    assert _options("tpu-v5p", Mesh(X=2, Y=4), dict(SIZES)) is first  # equal arguments: the one value
    sizes["I"] = 2048  # the same dict, changed
    second = _options("tpu-v5p", sizes=sizes)
    assert second != first and second.sizes["I"] == 2048 and first.sizes["I"] == 1024
    assert _options("tpu-v5e", sizes=sizes).costs.chip.name != second.costs.chip.name
    assert first.costs == CostModel.of("tpu-v5p") and {first: 1}[_options("tpu-v5p")] == 1


def test_a_mesh_is_read_from_text_at_the_edges_only():
    step = _gather("A")
    plan = Plan((step.inputs[0],), (step,), step.output)
    assert str(plan_cost(plan, "X=2,Y=4", SIZES).total) == str(plan_cost(plan, MESH, SIZES).total)  # an edge
    with pytest.raises(UsageError, match="a cost needs a mesh"):
        Options.of(CostModel(), "X=2,Y=4", SIZES)  # type: ignore[arg-type]  # below the edge: a Mesh only


def test_a_ranking_times_equal_steps_and_plans_once(monkeypatch):
    """fast_seconds keeps its times by value: a step equal to one already timed (another object) is not
    timed again, nor is a plan equal to one already timed."""
    from shardalg.costs import steps

    timed: list[Step] = []
    real = steps.seconds_of
    monkeypatch.setattr(steps, "seconds_of", lambda s, opts: timed.append(s) or real(s, opts))
    seconds = steps.fast_seconds(_options("tpu-v5p"), OverlapPolicy.SCHEDULE)
    a = parse_tensor("A[I_X, J]")

    def plan() -> Plan:
        return Plan((a,), (_gather("A"),), parse_tensor("A[I, J]"))

    first, again = plan(), plan()
    assert first is not again and first.steps[0] is not again.steps[0]
    assert seconds(first) == seconds(again) and len(timed) == 1
    other = Plan((a,), (_gather("A"), Step(Op.SLICE, (parse_tensor("A[I, J]"),), a, ("X",), "I")), a)
    assert seconds(other) is not None and len(timed) == 2  # only the new step (the slice) is timed


def test_a_plan_input_read_again_waits_for_nothing():
    a = parse_tensor("A[I_X, J]")
    gathered = parse_tensor("A[I, J]")
    sliced = parse_tensor("A[I_X, J]")  # equal to the input, made by a step
    steps = [
        Step(Op.ALL_GATHER, (a,), gathered, ("X",)),
        Step(Op.SLICE, (gathered,), sliced, ("X",), "I"),
        Step(Op.ALL_GATHER, (a,), parse_tensor("A[I, J]"), ("X",)),  # reads the input object itself
    ]
    assert sched.dependencies(steps, (a,)) == ((), (0,), ())
    # without being told it is an input, an equal value made by a step is waited for (a program's reading)
    assert sched.dependencies(steps) == ((), (0,), (1,))


def test_costs_are_the_same_in_a_fresh_process_order():
    """Every book case's plan costs, priced twice in a different order, agree (the memos hold no order)."""
    found = [(case, p) for case in CASES for p in ranked(case, MESH, SIZES, hw="tpu-v5p")]
    first = [(str(plan_cost(p, MESH, SIZES, hw="tpu-v5p").total)) for _, p in found]
    order = list(range(len(found)))
    random.Random(3).shuffle(order)
    clear_caches()
    again = {i: str(plan_cost(found[i][1], MESH, SIZES, hw="tpu-v5p").total) for i in order}
    assert [again[i] for i in range(len(found))] == first


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(CASES), st.sampled_from(["schedule", "steady", "serial"]))
def test_the_two_pass_sort_is_the_sort_by_the_whole_key(case, policy):
    found = list(ranked(case, MESH, SIZES))  # by bytes: every plan, in another order
    key = seconds_key(MESH, Sizes(SIZES), "tpu-v5p", overlap=policy)
    assert isinstance(key, HeadKey)
    from shardalg.planning.order import sort_plans

    two_pass = list(found)
    sort_plans(two_pass, key)
    assert two_pass == sorted(found, key=lambda p: (*key.head(p), plan_text_key(p)))


def test_a_mesh_pickles_as_its_axes():
    again = pickle.loads(pickle.dumps(MESH))
    assert again == MESH and hash(again) == hash(MESH) and again.names == ("X", "Y")
    assert {MESH: 1}[again] == 1


def test_a_tensor_prints_once_and_the_same():
    t = parse_tensor("A[I_XY, J]{U_Z}")
    assert str(t) is str(t) and str(t) == "A[I_XY, J]{U_Z}"
    moved = t.with_axes("J", ("W",))
    assert isinstance(moved, Tensor) and str(moved) == "A[I_XY, J_W]{U_Z}" and moved.with_axes("J", ()) == t


def test_tensors_and_sizes_pickled_in_another_process_hash_here():
    """A tensor and a Sizes keep their hash once made, but pickle without it: string hashes differ per process."""
    import os
    import subprocess
    import sys

    child = (
        "import pickle, sys; from shardalg.notation.parse import parse_tensor; "
        "from shardalg.algebra.traffic import Sizes; t = parse_tensor('A[I_X, J]{U_Y}'); s = Sizes({'I': 8}); "
        "hash(t); hash(s); sys.stdout.write(pickle.dumps((t, s)).hex())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, env=env, check=True
    ).stdout
    t, s = pickle.loads(bytes.fromhex(out))
    here = parse_tensor("A[I_X, J]{U_Y}")
    assert t == here and hash(t) == hash(here) and {here: 1}[t] == 1
    assert s == Sizes({"I": 8}) and {Sizes({"I": 8}): 1}[s] == 1
