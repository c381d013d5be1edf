"""Placing a mesh into GPU nodes reads the programs themselves, and points at the mesh line it refuses.

:func:`shardalg.costs.nodes.subaxis_parents` reads the sub-axes a program names from its tensors and
collectives (notation text parsed), not from its printed text: the package's own LaTeX print of a program
(``X{:}(1)8``) names X, and a comment that spells ``X:(1)8`` names nothing. Before, a regex over ``str(p)``
missed the first (so the LaTeX program was refused where its plain text was priced) and took the second.

A program's own ``mesh`` line that does not tile a GPU node is refused with a caret under that line, as every
error about the source is; ``--mesh`` on the command line has no source to point into. And the example of
:mod:`shardalg.models.memory`'s docstring runs and prints what it says.
"""

from __future__ import annotations

import doctest

import pytest

import shardalg
from shardalg.algebra.mesh import Mesh
from shardalg.cli import main
from shardalg.costs import hardware
from shardalg.costs.nodes import place_in_nodes, subaxis_parents
from shardalg.errors import Span, UsageError
from shardalg.notation import printing
from shardalg.notation.parse import parse

H100 = hardware.get("h100")
NAMED = "AllGather_{X:(8)2}(K[S_X]) -> K[S_{X:(1)8}]"
SIZES = {"S": 2**20}
LEFT_WHOLE = (
    "mesh: X=16 spans 2 h100 nodes of 8 GPUs, but X has sub-axes (declared X=AxB, or named X:(k)n) and an "
    "axis that spans nodes has none: priced as one NVLink domain, the node split not priced; write :nodeN "
    "(and no sub-axes of it) to price it"
)
TWELVE = "mesh X=12; A[I_X, J] · B[J, K] -> C[I_X, K]"
CARET = "  mesh X=12; A[I_X, J] · B[J, K] -> C[I_X, K]\n  ^^^^^^^^^"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---- sub-axes read from the objects ----------------------------------------------------------------------


def test_the_latex_print_of_a_program_names_its_sub_axes() -> None:
    """``X{:}(1)8`` is LaTeX's spelling of ``X:(1)8``: the program it parses to names X's factors, so X is left
    whole on h100 and the program priced as its plain text is, not refused for a factor of a placed axis."""
    latex = printing.latex(parse(NAMED))
    assert "X{:}(1)8" in latex and parse(latex) == parse(NAMED)
    assert subaxis_parents(latex) == {"X"}
    done = place_in_nodes(Mesh.parse("X=16"), H100, (), (latex,))
    assert done.mesh == Mesh.parse("X=16") and done.notes == (LEFT_WHOLE,)
    plain = shardalg.cost(NAMED, mesh="X=16", sizes=SIZES, hw="h100")
    assert shardalg.cost(latex, mesh="X=16", sizes=SIZES, hw="h100").notes == plain.notes
    assert plain.notes[0] == LEFT_WHOLE


def test_a_comment_that_spells_a_sub_axis_names_none() -> None:
    """A comment is not the program: X is placed into nodes as for the program without it."""
    commented = "AllGather_X(A[I_X, J]) -> A[I, J]  # X:(1)8 would gather less"
    assert subaxis_parents(commented) == frozenset()
    done = place_in_nodes(Mesh.parse("X=16"), H100, (), (commented,))
    assert done == place_in_nodes(Mesh.parse("X=16"), H100, (), ("AllGather_X(A[I_X, J]) -> A[I, J]",))
    assert done.mesh == Mesh.parse("X=16:node8")


def test_sub_axes_are_read_from_programs_statements_plans_and_functions() -> None:
    program = parse(f"mesh X=16\n{NAMED}")
    (statement,) = program.statements
    plan = shardalg.plan("A[I_{X:(1)8}, J] · B[J, K] -> C[I_{X:(1)8}, K]", mesh="X=16")
    function = parse("gelu(H[B, F_{Y:(2)4}]) -> G[B, F]").statements[0]
    assert subaxis_parents(program) == subaxis_parents(statement) == subaxis_parents(plan) == {"X"}
    assert subaxis_parents(plan.steps[0]) == {"X"}
    assert subaxis_parents(function, program, None) == {"X", "Y"}
    priced = shardalg.cost(NAMED, mesh="X=16", sizes=SIZES)  # a plan's cost, as compare and bound take it
    assert (
        subaxis_parents(priced) == subaxis_parents(shardalg.plans(NAMED, mesh="X=16", sizes=SIZES)) == {"X"}
    )


def test_what_names_no_sub_axis_or_does_not_parse_gives_none() -> None:
    assert (
        subaxis_parents("A[I_X, J_Y] -> A[I_{XY}, J]", parse("A[I_X]"), None, 3, Mesh.parse("X=2x4")) == set()
    )
    assert subaxis_parents("A[I_{X:(1)8}, J", "not notation [X:(1)2]") == frozenset()


# ---- a mesh line that does not tile the node points at itself ---------------------------------------------


def test_the_refused_mesh_line_is_pointed_at() -> None:
    with pytest.raises(UsageError, match="the mesh X=12 does not tile h100 nodes of 8 GPUs") as err:
        place_in_nodes(None, H100, (), (TWELVE,))
    assert err.value.span == Span(0, 9) and err.value.source == TWELVE
    assert CARET in str(err.value)
    with pytest.raises(UsageError) as planned:
        shardalg.plan(TWELVE, hw="h100")
    assert CARET in str(planned.value)


def test_the_caret_is_under_the_line_that_writes_the_mesh() -> None:
    """A line after the statements, in a Program parsed elsewhere, among programs without a line."""
    text = "A[I_X, J] · B[J, K] -> C[I_X, K]\nmesh Y=2, X=6\n"
    with pytest.raises(UsageError) as err:
        place_in_nodes(None, H100, (), ("A[I_X] -> A[I]", parse(text)))
    assert str(err.value).splitlines()[1:3] == ["  mesh Y=2, X=6", "  ^^^^^^^^^^^^^"]


def test_a_mesh_line_with_no_source_and_the_mesh_option_have_no_caret() -> None:
    made = parse(TWELVE)
    bare = type(made)(made.statements, made.mesh)  # made in code: no source to point into
    with pytest.raises(UsageError) as err:
        place_in_nodes(None, H100, (), (bare,))
    assert err.value.span is None and "^" not in str(err.value)
    with pytest.raises(UsageError) as given:
        place_in_nodes(Mesh.parse("X=12"), H100, (), (TWELVE,))
    assert given.value.span is None and "^" not in str(given.value)


def test_the_cli_shows_the_mesh_line_with_a_caret(capsys) -> None:
    code, out, err = run(capsys, "plan", TWELVE, "--hw", "h100")
    assert code == 2 and out == "" and "Traceback" not in err
    assert "error: the mesh X=12 does not tile h100 nodes of 8 GPUs" in err and CARET in err
    code, out, err = run(capsys, "plan", "A[I_X, J] · B[J, K] -> C[I_X, K]", "--mesh", "X=12", "--hw", "h100")
    assert code == 2 and "does not tile h100 nodes" in err and "^" not in err


# ---- the memory module's example ------------------------------------------------------------------------


def test_the_memory_module_example_runs() -> None:
    """The example in :mod:`shardalg.models.memory`'s docstring prints what it says."""
    from shardalg.models import memory

    result = doctest.testmod(memory)
    assert result.attempted >= 3 and result.failed == 0
