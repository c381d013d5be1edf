"""Defects of the command line and the notation as a user meets them: each test is one repro, run through
``shardalg.cli.main`` (or the Python API) and asserting the real output."""

from __future__ import annotations

import json

import pytest

import shardalg as sa
from shardalg.algebra.legality import check
from shardalg.cli import main
from shardalg.errors import LimitExceeded, ParseError, UsageError
from shardalg.notation.printing import to_json


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---- a program of nothing but separators is empty --------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        ";",
        "$$ $$",
        "\\\\",
        "% a LaTeX comment",
        "\n;\n",
        "\\begin{aligned} \\end{aligned}",
        "\\text{(a remark)}",
    ],
)
@pytest.mark.parametrize("command", [["check"], ["latex"], ["memory", "--mesh", "X=4"]])
def test_a_program_of_separators_is_empty(capsys, command, text):
    """`check ";"` printed "legal: " and exited 0, `latex ";"` an empty aligned block, `memory ";"` a model
    of 0 parameters: the emptiness test counted only blank and `#` lines."""
    code, out, err = run(capsys, command[0], text, *command[1:])
    assert (code, out) == (2, "")
    assert err.startswith(f"error: the program is empty: {text!r} holds no notation [usage]\n")


def test_a_program_that_only_looks_empty_is_read(capsys):
    code, out, _ = run(capsys, "check", "; A[I_X] ;", "--mesh", "X=2")
    assert (code, out) == (0, "legal: A[I_X]\n")


@pytest.mark.parametrize(
    "command", [["memory", "--mesh", "X=4"], ["step", "--mesh", "X=4", "--hw", "tpu-v5p"]]
)
def test_a_model_with_no_statement_is_refused(capsys, command):
    """`memory "mesh X=4"` printed "parameters 0 (1 layers)" and a total of 0 bytes."""
    code, out, err = run(capsys, command[0], "mesh X=4", *command[1:])
    assert (code, out) == (2, "")
    assert err.startswith("error: the program has no statement: there is no model to measure [usage]\n")


# ---- an axis named twice: one message that reads, once, with a fix that is legal ---------------------------


@pytest.mark.parametrize(
    ("source", "text"),
    [
        (
            "A[I, J]{U_X, U_X}",
            "error: mesh axis X is named twice in the unreduced set [axis-used-twice]\n"
            "  A[I, J]{U_X, U_X}\n"
            "         ^^^^^^^^^^\n"
            "  fix: write X once: A[I, J]{U_X}",
        ),
        (
            "A[I]{I_X, I_X, I_X}",
            "error: mesh axis X is named 3 times in the invariant set [axis-used-twice]\n"
            "  A[I]{I_X, I_X, I_X}\n"
            "      ^^^^^^^^^^^^^^^\n"
            "  fix: write X once: A[I]{I_X}",
        ),
        (
            "A[I_XXX, J]",
            "error: mesh axis X shards I 3 times [axis-used-twice]\n"
            "  A[I_XXX, J]\n"
            "    ^^^^^\n"
            "  fix: name each axis once: A[I_X, J]",
        ),
        (
            "A[I_X, J_XX]",
            "error: mesh axis X shards both I and J [axis-used-twice]\n"
            "  A[I_X, J_XX]\n"
            "         ^^^^\n"
            "  fix: shard J over another axis, or replicate it: A[I_X, J]",
        ),
    ],
)
def test_an_axis_named_twice_is_said_once_and_plainly(source, text):
    """`A[I, J]{U_X, U_X}` read "is unreduced ({U_X}) and is unreduced ({U_X})"; a third use repeated the
    error; `A[I_XXX]`'s fix was `A[I_XX]`, still illegal; `A[I_X, J_XX]`'s fix was `A[I_X, J_X]`."""
    found = check(source)
    assert [str(v) for v in found] == [text]


def test_an_axis_in_a_dim_and_a_repeated_set_is_one_error(capsys):
    code, _, err = run(capsys, "check", "A[I_X, J]{U_X, U_X}")
    assert code == 1
    assert err == (
        "error: mesh axis X shards I and is unreduced ({U_X}) [axis-used-twice]\n"
        "  A[I_X, J]{U_X, U_X}\n"
        "           ^^^^^^^^^^\n"
        "  fix: use X in one place: A[I_X, J] or A[I, J]{U_X}\n"
    )


# ---- a sub-axis that is no factor: the fix names the factors there are ------------------------------------


@pytest.mark.parametrize(
    ("source", "mesh", "fix"),
    [
        ("A[I_{Y:(1)3}, J]", "X=4,Y=4", "use a factor of Y=4 (Y:(1)2, Y:(2)2), or Y itself"),
        ("A[I_{X:(1)2}, J]", "X=3", "X=3 has no factor smaller than itself: write X"),
        ("A[I_{Z:(1)2}, J]", "X=4", "use an axis of the mesh (X), or add Z to it"),
        (
            "A[I_{Y:(1)2}, J_{Y:(1)4}]",
            "Y=8",
            "use one of Y:(1)2 and Y:(1)4, or factors that do not overlap (Y:(1)2 and Y:(2)4 of Y=8)",
        ),
    ],
)
def test_a_sub_axis_fix_fits_the_mesh(source, mesh, fix):
    """The fixes read "or add Y:(1)3 to it" (no mesh has a sub-axis added), "add Z:(1)2 to it" (the axis Z
    is what is missing), and the overlap's example was always Y:(1)2 and Y:(2)2 of Y=4."""
    (found,) = check(source, mesh)
    assert found.fix == fix


# ---- JSON reads only what the notation writes ---------------------------------------------------------------


def _tensor(name="A", dims=(("I", ["X"]),)):
    return {
        "kind": "tensor",
        "name": name,
        "dtype": None,
        "dims": [{"kind": "dim", "name": n, "size": None, "axes": a} for n, a in dims],
        "unreduced": [],
        "invariant": [],
    }


@pytest.mark.parametrize(
    ("node", "message"),
    [
        (_tensor(dims=()), "the JSON describes 'A[]', which is not in the notation: expected a number or a"),
        (_tensor(name="A b"), "the JSON describes 'A b[I_X]', which is not in the notation: expected"),
        (_tensor(dims=(("I", ["X Y"]),)), "the JSON describes 'A[I_{X Y}]', which the notation reads back"),
        (_tensor(name="bf16"), "the JSON describes 'bf16[I_X]', which the notation reads back as"),
        (
            {
                "kind": "program",
                "mesh": {"kind": "mesh", "axes": [{"name": "X", "size": 0}]},
                "statements": [],
            },
            "the JSON describes 'mesh X=0', which is not in the notation: the size of X must be a positive",
        ),
    ],
)
def test_json_that_no_notation_writes_is_refused(node, message):
    """from_json built a tensor with no dims, a name with a blank, an axis "X Y", a tensor named like a
    dtype and a mesh axis of size 0: nodes whose text does not parse back (or parses as something else)."""
    with pytest.raises(UsageError) as caught:
        sa.from_json(json.dumps(node))
    assert caught.value.message.startswith(message)


def test_json_nested_too_deep_is_a_limit_not_a_recursion_error():
    node = _tensor()
    for _ in range(900):
        node = {"kind": "collective", "op": "AllGather", "axes": ["X"], "arg": node, "dim": None}
    with pytest.raises(LimitExceeded, match="the JSON nests too deeply to read"):
        sa.from_json(json.dumps(node))


def test_json_round_trips_what_the_printer_writes():
    for text in [
        "A[I_{Y:(1)2}, J]{U_{Y:(2)2}}",
        "params W; layers 4\nX[B, D] · W[D, F] -> Y[B, F] where B=8",
    ]:
        program = sa.parse(text)
        assert sa.from_json(json.dumps(to_json(program))) == program
    plans = sa.plans(sa.parse("A[I, J_X] · B[J_X, K] -> C[I, K_X]").statements[0], sa.Mesh(X=4))
    assert all(sa.from_json(to_json(p)) == p for p in plans)


# ---- parse errors ---------------------------------------------------------------------------------------------


def test_a_tensors_stray_word_is_not_called_a_collective():
    """parse_tensor("A b[I]") said "(a collective needs its mesh axes as a subscript, ...)"."""
    with pytest.raises(ParseError) as caught:
        sa.parse_tensor("A b[I]")
    assert caught.value.message == "expected ':', '[', a prime (') or '_' after 'A', found 'b'"


@pytest.mark.parametrize(
    ("text", "fix"),
    [
        ("A[I_X,\u00a0J]", "U+00A0 NO-BREAK SPACE is not a plain space: write a space, or nothing"),
        ("A[I_X]\u200b", "U+200B ZERO WIDTH SPACE is not a plain space: write a space, or nothing"),
        (
            "\uff21[I_X]",
            "write 'A': U+FF21 FULLWIDTH LATIN CAPITAL LETTER A is not ASCII (names are ASCII letters and digits)",
        ),
    ],
)
def test_a_look_alike_character_gets_a_fix(capsys, text, fix):
    code, _, err = run(capsys, "check", text)
    assert code == 2
    assert err.endswith(f"  fix: {fix}\n")


# ---- flags ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "A[I_X, J]", "--mesh", "X=4", "--json", "--format", "latex"],
        ["backward", "X[B, D] · W[D, F_Y] -> H[B, F_Y]", "--mesh", "Y=4", "--json", "--format", "text"],
    ],
)
def test_json_and_another_format_conflict(capsys, argv):
    """`plan --json --format latex` printed JSON, the --format dropped without a word (and backward's
    --json and --format were two flags too)."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    out, err = capsys.readouterr()
    assert (exited.value.code, out) == (2, "")
    assert err.endswith(
        "error: argument --format: not allowed with argument --json (one output format) [usage]\n"
    )


def test_json_and_format_json_agree(capsys):
    code, out, _ = run(capsys, "plan", "A[I_X, J]", "--mesh", "X=4", "--format", "json", "--json")
    assert code == 0 and json.loads(out)["complete"] is True


def test_latex_help_shows_a_percent_sign(capsys):
    with pytest.raises(SystemExit):
        main(["latex", "--help"])
    out = capsys.readouterr().out
    assert "plan's note in % comments" in " ".join(out.split())


# ---- latex ---------------------------------------------------------------------------------------------------


def test_latex_prints_a_programs_mesh_sizes_and_roles(capsys):
    """`latex "mesh X=4; A[I_X, J] where I=8"` printed `A[I_X, J]` alone: a one-statement program lost
    its mesh, its sizes and its roles."""
    code, out, _ = run(capsys, "latex", "mesh X=4; A[I_X, J] where I=8")
    assert code == 0
    assert (
        out
        == "\\begin{aligned}\n\\text{mesh}\\; X=4 \\\\\nA[I_X, J] \\\\\n\\text{where}\\; I=8\n\\end{aligned}\n"
    )
    assert sa.parse(out) == sa.parse("mesh X=4; A[I_X, J] where I=8")


def test_latex_plan_reads_the_programs_mesh_and_sizes(capsys):
    """`latex --plan` planned the statement alone: the program's sizes were dropped (it listed the plans
    "not beaten at every size") and its mesh line ignored ("--plan needs --mesh")."""
    source = "mesh X=4; A[I_X, J] · B[J, K_X] -> C[I, K] where I=64,J=64,K=64"
    code, out, err = run(capsys, "latex", source, "--plan")
    assert (code, err) == (0, "")
    code, plain, _ = run(capsys, "plan", source)
    planned = [line.split("  #")[0] for line in plain.splitlines() if not line.startswith("#")]
    assert [sa.parse(line).statements[0] for line in planned] == list(sa.parse(out).statements)


def test_latex_plan_sizes_given_twice_are_refused(capsys):
    code, _, err = run(
        capsys, "latex", "A[I_X, J] -> A[I, J]", "--plan", "--mesh", "X=4", "--sizes", "I=8,I=4"
    )
    assert code == 2 and err.startswith("error: size of I given twice [usage]")


# ---- show ----------------------------------------------------------------------------------------------------


def test_show_names_itself_and_what_it_was_given(capsys):
    code, _, err = run(capsys, "show", "A[I_X, J] · B[J, K] -> C[I_X, K]", "--mesh", "X=2")
    assert code == 2
    assert err.startswith(
        "error: show draws a tensor, or one collective of a tensor and its result, e.g. AllGather_X(A[I_X, J]); "
        "not product A[I_X, J] * B[J, K] -> C[I_X, K] [usage]"
    )


def test_show_reads_a_programs_mesh_and_sizes(capsys):
    """`show "mesh X=2; A[I_X]"` and `show "A[I_X] where I=3"` were syntax errors (the text was read as one
    tensor or statement); two statements were a syntax error at the `;`."""
    code, out, _ = run(capsys, "show", "mesh X=2; A[I_X]")
    assert code == 0 and out.startswith("A[I_X] on the mesh X=2: local shape [I/2]\n")
    code, _, err = run(capsys, "show", "A[I_X] where I=3", "--mesh", "X=2")
    assert code == 1 and err.startswith(
        "error: dim I has size 3, not divisible by |X| = 2 [indivisible-dim]\n"
    )
    code, _, err = run(capsys, "show", "A[I_X]; B[J]", "--mesh", "X=2")
    assert code == 2 and err.startswith("error: show draws one tensor or one collective, not 2 statements")


def test_show_points_at_an_unknown_axis_in_a_collective(capsys):
    code, _, err = run(capsys, "show", "AllGather_X(A[I_Z, J])", "--mesh", "X=2")
    assert code == 1
    assert err == (
        "error: mesh axis Z is not in the mesh (X) [unknown-axis]\n"
        "  AllGather_X(A[I_Z, J])\n"
        "                ^^^\n"
        "  fix: use an axis of the mesh (X), or add Z to it\n"
    )


# ---- check --json, verify's arguments ---------------------------------------------------------------------------


def test_check_json_answers_a_syntax_error_in_json(capsys):
    """`check --json "A[I_X"` printed nothing on stdout: a script reading the JSON got no answer."""
    code, out, err = run(capsys, "check", "A[I_X", "--json")
    assert code == 2
    assert json.loads(out) == {
        "legal": False,
        "violations": [
            {
                "error": "ParseError",
                "rule": "syntax",
                "message": "expected ',' or ']' after 'X', found the end of the input",
                "span": [5, 5],
            }
        ],
        "notes": [],
    }
    assert err.startswith("error: expected ',' or ']' after 'X', found the end of the input [syntax]\n")


FORWARD = "In[B_X, D] · W[D, F] -> Out[B_X, F]"
BACKWARD = (
    "dOut[B_X, F] · W[D, F] -> dIn[B_X, D]; In[B_X, D] ·_LOCAL dOut[B_X, F] -> dW[D, F]{U_X}; "
    "AllReduce_X(dW[D, F]{U_X}) -> dW[D, F]"
)


def test_verify_reads_a_positional_backward_after_forward_option(capsys):
    """`verify --forward F B` read B as the forward (the first positional) and said "give the forward and
    the backward"."""
    code, out, _ = run(capsys, "verify", "--forward", FORWARD, BACKWARD, "--mesh", "X=4")
    assert (code, out) == (
        0,
        "ok: the backward computes every gradient exactly, in its parameter's sharding\n",
    )
    assert run(capsys, "verify", FORWARD, BACKWARD, "--mesh", "X=4")[:2] == (0, out)


def test_verify_refuses_a_program_given_twice(capsys):
    """`verify F B --forward G` verified G, F dropped without a word."""
    code, out, err = run(capsys, "verify", FORWARD, BACKWARD, "--forward", "A[I]", "--mesh", "X=4")
    assert (code, out) == (2, "")
    assert err == (
        "error: 2 programs given as arguments besides --forward: verify reads one forward and one backward "
        "[usage]\n  fix: give each program once: FORWARD BACKWARD, or --forward F --backward B\n"
    )


def test_verify_says_which_program_is_missing(capsys):
    code, _, err = run(capsys, "verify", FORWARD, "--mesh", "X=4")
    assert (code, err) == (
        2,
        "error: verify needs the backward program [usage]\n  fix: give FORWARD BACKWARD, or --forward F --backward B\n",
    )


# ---- the Python API: nodes made by hand -------------------------------------------------------------------------


def test_a_bad_dim_is_a_usage_error():
    """Dim("I", ("X",), 3) raised a bare ValueError."""
    with pytest.raises(UsageError) as caught:
        sa.Dim("I", ("X",), 3)
    assert caught.value.message == (
        "a Dim has a name or a literal size, not both and not neither: Dim('I', ('X',), 3)"
    )


def test_a_printer_given_text_says_to_parse_it():
    """sa.latex("A[I]") said "LatexPrinter cannot print a str"."""
    with pytest.raises(UsageError) as caught:
        sa.latex("A[I]")
    assert caught.value.message == "LatexPrinter prints a node, not text: 'A[I]'"
    assert caught.value.fix == "parse it first: shardalg.parse(text) (or parse_tensor, parse_statement)"
    with pytest.raises(UsageError, match="a Tensor's dims are Dim values"):
        sa.text(sa.Tensor("A", ("I",)))


def test_a_tensor_made_with_text_dims_is_refused_where_it_is_made():
    """sa.check(sa.Tensor("A", ("I",))) raised AttributeError: 'str' object has no attribute 'label'."""
    with pytest.raises(UsageError, match=r"a Tensor's dims are Dim values, not str \('I'\)") as caught:
        sa.check(sa.Tensor("A", ("I",)))
    assert "parse('A[I_X, J]')" in caught.value.fix
    assert list(sa.check(sa.Tensor("A", (sa.Dim("I", ("X",)),)), mesh="X=2")) == []
