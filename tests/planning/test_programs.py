"""Programs checked statement by statement: each use must match the sharding the program left a tensor in;
a mismatch points at the use and names the collective that fixes it."""

from __future__ import annotations

import numpy as np
import pytest

from shardalg.algebra.mesh import Mesh
from shardalg.errors import IllegalCollective, ShapeMismatch, UsageError
from shardalg.notation.parse import parse, parse_tensor
from shardalg.notation.syntax import Op
from shardalg.numeric.execute import run_plan
from shardalg.planning.programs import check_program

T = parse_tensor

MLP = """mesh X=2, Y=2
In[B_X, D] · W_in[D, F_Y] -> H[B_X, F_Y]
H[B_X, F_Y] · W_out[F_Y, D] -> Out[B_X, D]
where B=8, D=4, F=8"""


def test_megatron_mlp_forward() -> None:
    first, second = check_program(MLP)
    assert [s.op for s in first.steps] == [Op.EINSUM]  # column partition: no communication
    assert [s.op for s in second.steps] == [Op.EINSUM, Op.ALL_REDUCE]  # row partition: sum over Y
    assert second.steps[1].axes == ("Y",)
    assert second.output == T("Out[B_X, D]")
    for p in (first, second):
        assert run_plan(p, "X=2,Y=2", {"B": 8, "D": 4, "F": 8}, np.random.default_rng(0)).ok


def test_a_use_in_another_sharding_is_a_mismatch_with_the_fix() -> None:
    text = MLP.replace("H[B_X, F_Y] · W_out", "H[B_X, F] · W_out")
    with pytest.raises(ShapeMismatch) as info:
        check_program(text)
    err = info.value
    assert err.message == "statement 2 uses H[B_X, F], but statement 1 made it as H[B_X, F_Y]"
    assert err.fix == "insert AllGather_Y(H[B_X, F_Y]) -> H[B_X, F]"
    assert text[err.span.start : err.span.end] == "H[B_X, F]"
    assert str(err).splitlines()[1:3] == ["  H[B_X, F] · W_out[F_Y, D] -> Out[B_X, D]", "  ^^^^^^^^^"]


def test_inputs_are_tracked_too() -> None:
    text = "A[I, J_X] · B[J_X, K] -> C[I, K]\nA[I_X, J] · D[J, L] -> E[I_X, L]"
    with pytest.raises(ShapeMismatch) as info:
        check_program(text, Mesh(X=2))
    assert info.value.message == "statement 2 uses A[I_X, J], but statement 1 used it as A[I, J_X]"
    assert info.value.fix == "insert AllToAll_{X,I}(A[I, J_X]) -> A[I_X, J]"


def test_collective_statements_re_lay_their_tensor() -> None:
    text = "A[I, J_X] ·_LOCAL B[J_X, K] -> C[I, K]{U_X}\nAllReduce_X C[I, K]{U_X} -> C[I, K]\nC[I, K] · E[K, L] -> F[I, L]"
    plans = check_program(text, Mesh(X=2))
    assert [[s.op for s in p.steps] for p in plans] == [[Op.EINSUM], [Op.ALL_REDUCE], [Op.EINSUM]]
    with pytest.raises(ShapeMismatch) as info:
        check_program(text.replace("C[I, K] · E", "C[I, K]{U_X} · E"), Mesh(X=2))
    assert info.value.fix == "no collective turns C[I, K] into C[I, K]{U_X}: " + (
        "no rule makes C[I, K] unreduced over X: the global value of C[I, K]{U_X} is the sum of the partials "
        "over X, so all but one replica would have to be zeroed, and no collective does that"
    )


def test_an_illegal_statement_is_located() -> None:
    text = "A[I, J_X] ·_LOCAL B[J_X, K] -> C[I, K]{U_X}\nAllGather_X C[I, K]{U_X} -> C[I, K]"
    with pytest.raises(IllegalCollective) as info:
        check_program(text, Mesh(X=2))
    assert info.value.source == parse(text).source
    assert info.value.span is not None and info.value.span.start >= text.index("\n")


def test_needs_a_mesh() -> None:
    with pytest.raises(UsageError):
        check_program("A[I, J] · B[J, K] -> C[I, K]")


def test_a_mesh_or_sizes_in_place_of_the_programs_are_said_not_silently_used() -> None:
    from shardalg.errors import NoteWarning
    from shardalg.planning.backward import backward
    from shardalg.planning.planner import plans

    with pytest.warns(NoteWarning) as said:
        check_program(MLP, Mesh(X=2, Y=4), {"B": 8, "D": 4, "F": 16})
    assert [str(w.message) for w in said] == [
        "--mesh X=2,Y=4 replaces the program's mesh X=2, Y=2",
        "--sizes F=16 replaces the program's F=8",
    ]
    with pytest.warns(NoteWarning, match=r"^--sizes D=8 replaces the program's D=4$"):
        backward(MLP, None, {"D": 8})
    with pytest.warns(NoteWarning, match=r"^--sizes I=8 replaces the program's I=16$"):
        plans("A[I_X, J] -> A[I, J] where I=16", Mesh(X=4), {"I": 8})


def test_the_programs_own_mesh_and_sizes_given_again_replace_nothing(recwarn) -> None:
    check_program(MLP, Mesh(X=2, Y=2), {"B": 8, "F": 8})
    assert recwarn.list == []


def test_the_cli_check_reads_a_program_as_backward_does(capsys) -> None:
    # a statement that reads a value in a layout the program never gave it: illegal in check too, not only in
    # backward and check_program (each statement alone is legal)
    from shardalg.cli import main

    wrong = "A[I_X, J] * B[J, K] -> C[I_X, K]; C[I, K] * D[K, L] -> E[I, L]"
    assert main(["check", wrong, "--mesh", "X=4"]) == 1
    assert (
        "statement 2 uses C[I, K], but statement 1 made it as C[I_X, K] [shape-mismatch]"
        in capsys.readouterr().err
    )
    with pytest.raises(ShapeMismatch):
        check_program(wrong, Mesh(X=4))
    # a layout a collective made, still held: legal in all three
    held = "AllGather_X(A[I_X, J]) -> A[I, J]; A[I_X, J] * B[J, K] -> C[I_X, K]"
    assert main(["check", held, "--mesh", "X=4"]) == 0
    assert len(check_program(held, Mesh(X=4))) == 2
