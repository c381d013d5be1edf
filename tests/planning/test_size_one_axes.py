"""Axes of size 1: a collective over one device moves no byte, and the planner ranks it so; nor does a Permute
that relabels an axis of size 1, or a Shift by whole turns of its ring.

The planner's two ranking measures (:func:`shardalg.algebra.traffic.step_rank` and a layout space's ranks) priced
a collective over a group of one device as if its data moved, where :func:`~shardalg.algebra.traffic.step_bytes`
says nothing moves. So on ``X=1,Y=2`` the plans of ``A[I, J]{U_X} -> A[I, J]`` were 128-byte detours
(``Slice_Y; ReduceScatter_X; AllGather_YX``) and ``AllReduce_X``, 0 bytes, was not among them.

On an axis of size 1 every pair of the operands' placements computes the same local product, so the einsum
planner takes one pair there (the fewest changes, then no partial sums left to reduce): the fuzzer's slowest
backward, two statements on ``X=1,Y=2,Z=1,S0=2``, took 1.93 s and 10.56 s deferred, and takes 0.75 s and 1.46 s.
"""

from __future__ import annotations

import pytest

from shardalg.algebra.mesh import Mesh, as_mesh
from shardalg.algebra.traffic import Bytes, Sizes, rank_table, step_bytes, step_rank
from shardalg.costs.costmodel import CostModel
from shardalg.costs.stepcost import Options
from shardalg.costs.steps import seconds_of, step_cost
from shardalg.costs.terms import ZERO
from shardalg.notation.parse import parse_tensor
from shardalg.notation.syntax import Op
from shardalg.numeric.execute import run_plan, simulate
from shardalg.planning.planner import plans
from shardalg.planning.redistribute import plan_bytes
from tests.shared.plans import P

ONE = as_mesh("X=1,Y=2")


def ops(p) -> list[str]:
    return [f"{s.op.value}_{''.join(s.axes)}" for s in p.steps]


@pytest.mark.parametrize(
    "op, before, after, axes",
    [
        (Op.ALL_REDUCE, "A[I, J]{U_X}", "A[I, J]", ("X",)),
        (Op.ALL_GATHER, "A[I_X, J]", "A[I, J]", ("X",)),
        (Op.ALL_TO_ALL, "A[I_X, J]", "A[I, J_X]", ("X",)),
        (Op.REDUCE_SCATTER, "A[I, J]{U_X}", "A[I_X, J]", ("X",)),
    ],
)
def test_a_collective_over_one_device_is_ranked_as_no_bytes(op, before, after, axes) -> None:
    b, a, sizes = parse_tensor(before), parse_tensor(after), Sizes({"I": 8, "J": 8})
    assert step_bytes(op, axes, b, a, ONE, sizes) == Bytes()
    assert (
        step_rank(op, axes, b, a, ONE, sizes) == step_rank(op, axes, b, a, ONE, sizes, rank_table(ONE)) == 0
    )
    two = as_mesh("X=2,Y=2")
    assert step_rank(op, axes, b, a, two, sizes) > 0  # over two devices it moves data


def test_partial_sums_over_one_device_are_all_reduced_for_nothing() -> None:
    sizes = {"I": 8, "J": 8}
    found = plans("A[I, J]{U_X} -> A[I, J]", ONE, sizes)
    assert ops(found[0]) == ["AllReduce_X"]
    assert plan_bytes(found[0], ONE, Sizes(sizes)) == Bytes()
    moved = [plan_bytes(p, ONE, Sizes(sizes)).number for p in found]
    assert moved == sorted(moved)  # a detour through Y, where listed, comes after every plan of 0 bytes
    (run,) = simulate(found[0], ONE, sizes)
    assert run.ok and run.bytes_sent == (0,)  # the executor's devices receive nothing


@pytest.mark.parametrize(
    "mesh, ones, plain",
    [
        (
            "X=1,Y=2,Z=1",
            "In[B_XYZ, T, D] * dV0[B, T_YZ, F] -> dW0[D_X, F_YZ]",
            "In[B_Y, T, D] * dV0[B, T_Y, F] -> dW0[D, F_Y]",
        ),
        ("X=2,Y=1", "A[I_X, J_Y] * B[J, K_Y] -> C[I_X, K]", "A[I_X, J] * B[J, K] -> C[I_X, K]"),
        ("X=1,Y=4", "A[I_Y, J_X] * B[J_X, K] -> C[I_Y, K]", "A[I_Y, J] * B[J, K] -> C[I_Y, K]"),
    ],
)
def test_axes_of_size_one_change_no_bytes(mesh: str, ones: str, plain: str) -> None:
    """The cheapest plan with the axes of size 1 written moves what the plain program's does, and runs right on
    the executor, which counts the bytes the devices receive."""
    sizes = {"B": 4, "T": 4, "D": 4, "F": 4, "I": 8, "J": 8, "K": 8}
    m = as_mesh(mesh)
    without = Mesh(**{a.name: a.size for a in m if a.size != 1})
    got, want = plans(ones, m, sizes)[0], plans(plain, without, sizes)[0]
    assert plan_bytes(got, m, Sizes(sizes)) == plan_bytes(want, without, Sizes(sizes)), ops(got)
    (run,) = simulate(got, m, sizes)
    (plain_run,) = simulate(want, without, sizes)
    assert run.ok and sum(run.bytes_sent) == sum(plain_run.bytes_sent)


@pytest.mark.parametrize(
    "mesh, program, moved",
    [
        ("X=1,Y=2", "A[I_XY, J] -> A[I_YX, J]", 0),  # x = 0: both index block y
        ("X=1,Y=2,Z=2", "A[I_XYZ, J] -> A[I_YZX, J]", 0),  # two swaps, each with X
        ("X=2,Y=2", "A[I_XY, J] -> A[I_YX, J]", 64),  # block 2x + y goes to device (y, x)
    ],
)
def test_a_permute_that_relabels_an_axis_of_size_one_moves_nothing(
    mesh: str, program: str, moved: int
) -> None:
    """``Permute_{X,Y}`` of ``I_XY`` on ``|X| = 1`` leaves each block on its device: 0 bytes, no time, and
    the executor's devices receive nothing (on ``X=2,Y=2`` it moves a shard)."""
    sizes = {"I": 16, "J": 8}
    m = as_mesh(mesh)
    (best, *_) = plans(program, m, sizes)
    assert {s.op for s in best.steps} == {Op.PERMUTE}
    assert plan_bytes(best, m, Sizes(sizes)).number == moved
    opts = Options.of(CostModel.of("tpu-v5e"), m, sizes)
    assert all((seconds_of(s, opts) == 0) == (moved == 0) for s in best.steps)
    assert all((step_cost(s, opts).comms == ZERO) == (moved == 0) for s in best.steps)
    (run,) = simulate(best, m, sizes)
    assert run.ok and (sum(run.bytes_sent) == 0) == (moved == 0)


@pytest.mark.parametrize(
    "step, mesh, moved",
    [
        ("Shift_{X,+2}(A[I_X]) -> A[I_X]", "X=2", False),  # a whole turn of the ring
        ("Shift_{X,-4}(A[I_X]) -> A[I_X]", "X=4", False),
        ("Shift_{X,+2}(A[I_X]) -> A[I_X]", "X=4", True),
        ("Send_{X,+4}(A[I_X]) -> A[I_X]", "X=4", False),  # every block dropped, zeros received
        ("Send_{X,+1}(A[I_X]) -> A[I_X]", "X=4", True),
        ("Permute_XY(A[I, J]) -> A[I, J]", "X=2,Y=2", False),  # neither axis shards A
        ("Permute_XY(A[I, J]{U_XY}) -> A[I, J]{U_XY}", "X=2,Y=2", False),  # partial sums over both
        ("Permute_XY(A[I, J]{U_X}) -> A[I, J]{U_Y}", "X=2,Y=2", True),  # over one: the blocks move
        ("Permute_XY(A[I_Z, J]) -> A[I_Z, J]", "X=2,Y=2,Z=2", False),
    ],
)
def test_a_shift_by_whole_turns_moves_nothing(step: str, mesh: str, moved: bool) -> None:
    """The bytes model, the cost model and the executor agree on when a Shift, a Send or a Permute moves
    nothing."""
    sizes, m = {"I": 8, "J": 4}, as_mesh(mesh)
    plan = P(step)
    (s,) = plan.steps
    assert (step_bytes(s.op, s.axes, s.inputs[0], s.output, m, Sizes(sizes), s.offset).number > 0) == moved
    assert (seconds_of(s, Options.of(CostModel.of("tpu-v5e"), m, sizes)) > 0) == moved
    run = run_plan(plan, m, sizes)
    assert (run.total_bytes > 0) == moved
