"""A program's own ``mesh X=64`` line on a GPU chip is placed into nodes exactly as ``--mesh X=64`` is
(:func:`shardalg.costs.nodes.place_in_nodes` without a mesh reads the programs' mesh line): the same figures
and the same note, in the planner, the costs, the derivations, the search, the step and serving, through the
command line and the API. Before, ``mesh X=64`` on ``h100`` was priced as one NVLink domain of 64 GPUs, with
no note."""

from __future__ import annotations

import contextlib
import io
import json
import warnings

import pytest

import shardalg
from shardalg.algebra.mesh import Mesh
from shardalg.cli import main
from shardalg.costs import hardware
from shardalg.costs.nodes import _HOW, place_in_nodes, written_mesh
from shardalg.errors import NoteWarning, UsageError
from shardalg.notation.parse import parse

H100 = hardware.get("h100")
PRODUCT = "A[I, J_X] · B[J_X, K] -> C[I, K]"
GATHERED = "A[I, J] · B[J, K] -> C[I, K]"
SIZES = "I=1024,J=8192,K=8192"
MLP_SHARDED = (
    "params W_in, W_out\nIn[B_X, D] * W_in[D, F] -> Tmp[B_X, F]\nTmp[B_X, F] * W_out[F, D] -> Out[B_X, D]"
)
MLP = "params W_in, W_out\nIn[B, D] * W_in[D, F] -> Tmp[B, F]\nTmp[B, F] * W_out[F, D] -> Out[B, D]"
MLP_SIZES = "B=4096,D=8192,F=32768"
NOTE = f"mesh: X=64 spans 8 h100 nodes of 8 GPUs; priced as X=64:node8 {_HOW}"


def lined(program: str, mesh: str = "X=64") -> str:
    return f"mesh {mesh}\n{program}"


# ---- place_in_nodes reads the mesh line ------------------------------------------------------------------


@pytest.mark.parametrize("program", [lined(PRODUCT), parse(lined(PRODUCT))], ids=["text", "Program"])
def test_without_a_mesh_the_programs_mesh_line_is_placed_as_the_mesh_would_be(program: object) -> None:
    from_line = place_in_nodes(None, H100, (), (program,))
    given = place_in_nodes(Mesh.parse("X=64"), H100, (), (program,))
    assert from_line == given
    assert from_line.mesh == Mesh.parse("X=64:node8") and from_line.notes == (NOTE,)


def test_a_given_mesh_wins_over_the_mesh_line() -> None:
    done = place_in_nodes(Mesh.parse("X=16"), H100, (), (lined(PRODUCT),))
    assert done.mesh == Mesh.parse("X=16:node8")
    assert done.notes[0].startswith("mesh: X=16 spans 2 h100 nodes")


@pytest.mark.parametrize("chip, line", [("h100", "X=8"), ("tpu-v5p", "X=64"), (None, "X=64")])
def test_a_mesh_line_in_one_node_or_on_a_tpu_is_left_to_the_program(chip: str | None, line: str) -> None:
    """Nothing placed: the mesh stays None, so the program's own line applies as written, without a note."""
    done = place_in_nodes(None, chip and hardware.get(chip), (), (lined(PRODUCT, line),))
    assert done.mesh is None and done.notes == ()


def test_a_program_without_a_mesh_line_gives_no_mesh() -> None:
    assert place_in_nodes(None, H100, (), (PRODUCT, parse(PRODUCT), None)).mesh is None
    assert written_mesh(PRODUCT, "not notation [", 3) == (None, ())


def test_the_dcn_axes_and_named_sub_axes_apply_to_the_mesh_line() -> None:
    two = lined(PRODUCT, "P=2,X=32")
    assert place_in_nodes(None, H100, ("P",), (two,)).mesh == Mesh.parse("P=2,X=32:node8")
    named = lined("AllGather_{X:(1)8}(A[I_{X:(1)8}, J]) -> A[I, J]")
    done = place_in_nodes(None, H100, (), (named,))
    assert done.mesh is None and "X has sub-axes" in done.notes[0]


def test_mesh_lines_that_differ_are_not_placed_and_said() -> None:
    done = place_in_nodes(None, H100, (), (lined(PRODUCT), lined(GATHERED, "X=32")))
    assert done.mesh is None
    assert done.notes == (
        "mesh: the programs' mesh lines differ (X=64; X=32), so none is placed into h100 nodes of 8 GPUs: "
        "each is priced as one NVLink domain; give --mesh (with :nodeN) to place it",
    )
    same = place_in_nodes(None, H100, (), (lined(PRODUCT), parse(lined(GATHERED))))
    assert same.mesh == Mesh.parse("X=64:node8")
    small = place_in_nodes(None, H100, (), (lined(PRODUCT, "X=4"), lined(GATHERED, "X=8")))
    assert small == place_in_nodes(None, H100)  # neither spans a node: nothing to say


def test_a_mesh_line_that_does_not_tile_the_node_is_refused_as_the_mesh_is() -> None:
    """As --mesh X=12 is; the fix says to give the mesh as --mesh, since a mesh line takes no :nodeN."""
    with pytest.raises(UsageError, match="the mesh X=12 does not tile h100 nodes of 8 GPUs") as err:
        place_in_nodes(None, H100, (), (lined(PRODUCT, "X=12"),))
    assert err.value.fix is not None and err.value.fix.startswith(
        "a mesh line takes no :nodeN: give the mesh as --mesh"
    )
    assert err.value.fix.endswith("e.g. X=12:node4")
    code, _, stderr = run("cost", lined(PRODUCT, "X=12"), "--hw", "h100", "--sizes", "I=1024,J=8196,K=8192")
    assert code == 2 and "Traceback" not in stderr and "give the mesh as --mesh" in stderr


# ---- the API ---------------------------------------------------------------------------------------------


def test_the_api_cost_prices_the_mesh_line_as_the_mesh() -> None:
    """Was 0.000327571 s (126*alpha + 33030144/beta: 64 GPUs as one NVLink domain), without a note."""
    given = shardalg.cost(PRODUCT, mesh="X=64", sizes=SIZES, hw="h100")
    for program in (lined(PRODUCT), parse(lined(PRODUCT))):
        own = shardalg.cost(program, sizes=SIZES, hw="h100")
        assert own.seconds == given.seconds == pytest.approx(1.31571e-4, rel=1e-5)
        assert own.total == given.total and own.notes == given.notes and own.notes[0] == NOTE


def test_the_api_plans_and_derivations_place_the_mesh_line() -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        shardalg.plans(lined(PRODUCT), sizes=SIZES, hw="h100")
    assert [str(w.message) for w in seen if issubclass(w.category, NoteWarning)] == [NOTE]
    d = shardalg.compare(lined(PRODUCT), lined(GATHERED), sizes=SIZES, hw="h100")
    assert d.notes[0] == NOTE
    assert d.notes == shardalg.compare(PRODUCT, GATHERED, mesh="X=64", sizes=SIZES, hw="h100").notes


def test_the_search_api_places_the_mesh_and_the_mesh_line() -> None:
    """shardalg.search priced mesh='X=64' on h100 as one NVLink domain (1.09 ms, no note); the CLI placed
    it (699 us)."""
    given = shardalg.search(MLP, mesh="X=64", hw="h100", sizes=MLP_SIZES)
    own = shardalg.search(lined(MLP), hw="h100", sizes=MLP_SIZES)
    split = shardalg.search(MLP, mesh="X=64:node8", hw="h100", sizes=MLP_SIZES)
    assert given.winner.seconds == own.winner.seconds == split.winner.seconds
    assert given.winner.seconds == pytest.approx(6.992e-4, rel=1e-3)
    said = ("mesh", NOTE.removeprefix("mesh: "))
    assert said in given.notes and said in own.notes
    assert "mesh" not in dict(split.notes)


def test_the_step_api_places_the_mesh_line() -> None:
    given = shardalg.step_time(MLP_SHARDED, mesh="X=64", sizes=MLP_SIZES, hw="h100")
    own = shardalg.step_time(lined(MLP_SHARDED), sizes=MLP_SIZES, hw="h100")
    assert own.to_json() == given.to_json() and str(own) == str(given)  # every figure, the notes included
    assert dict(own.notes)["mesh"] == dict(given.notes)["mesh"] == NOTE.removeprefix("mesh: ")


def test_serving_two_programs_places_their_mesh_line() -> None:
    """Was a time to first token of 162 us (one NVLink domain) against 63.8 us on X=64:node8."""
    program = "params W\nkvcache Kc\ntokens B\nQ[B, S] * Kc[B, S] -> Sc[B]\nP[B, S] * W[S, D_X] -> O[B, D]\nwhere D=65536"
    given = shardalg.serve((program, program), "X=64", "B=128", "h100", 125, 3)
    own = shardalg.serve((lined(program), lined(program)), None, "B=128", "h100", 125, 3)
    assert own.ttft_s == given.ttft_s == pytest.approx(6.385e-5, rel=1e-3) and own.total_s == given.total_s
    assert dict(own.notes)["mesh"] == dict(given.notes)["mesh"] == NOTE.removeprefix("mesh: ")


# ---- the command line ------------------------------------------------------------------------------------


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


BOUND = "A[I, J_X] *_LOCAL B[J_X, K] -> C[I, K]{U_X}\nAllReduce_X(C[I, K]{U_X}) -> C[I, K]"
# name: the arguments but the mesh, given the program text (with or without its mesh line)
COMMANDS = {
    "cost": lambda p: ("cost", p(PRODUCT), "--hw", "h100", "--sizes", SIZES),
    "cost --json": lambda p: ("cost", p(PRODUCT), "--hw", "h100", "--sizes", SIZES, "--json"),
    "compare": lambda p: ("compare", p(PRODUCT), p(GATHERED), "--hw", "h100", "--sizes", SIZES),
    "bound": lambda p: ("bound", p(BOUND), "--hw", "h100", "--sizes", "I=1024,K=8192", "--solve-for", "J"),
    "plan": lambda p: ("plan", p(PRODUCT), "--hw", "h100", "--sizes", SIZES, "--format", "json"),
    "step": lambda p: ("step", p(MLP_SHARDED), "--hw", "h100", "--sizes", MLP_SIZES),
    "memory": lambda p: ("memory", p(MLP_SHARDED), "--hw", "h100", "--sizes", MLP_SIZES),
    "strategy-map": lambda p: ("strategy-map", p(MLP), "--hw", "h100", "--sizes", MLP_SIZES),
}


@pytest.mark.parametrize("name", COMMANDS)
def test_a_commands_mesh_line_is_priced_as_the_same_mesh_option(name: str) -> None:
    code, out, err = run(*COMMANDS[name](lambda t: t), "--mesh", "X=64")
    own = run(*COMMANDS[name](lined))
    assert code == 0 and own == (code, out, err)
    assert f"shardalg: note: {NOTE}" in err.splitlines()


def test_cost_of_the_mesh_line_has_the_figures_of_the_node_split() -> None:
    """The defect's reproducer: 0.000327571 s, 126*alpha + 33030144/beta before."""
    _, out, _ = run("cost", lined(PRODUCT), "--hw", "h100", "--sizes", SIZES)
    assert "seconds: 0.000131571" in out and "28*alpha + 2*Max(1835008/W_dcn, 14680064/beta)" in out
    assert f"note: {NOTE}" in out.splitlines()


def test_search_of_the_mesh_line_is_the_search_of_the_mesh_option() -> None:
    """Was a winner of 1.09 ms per step (one NVLink domain) against 699 us with --mesh X=64."""
    args = ("--hw", "h100", "--sizes", MLP_SIZES, "--quiet", "--json")
    code, out, err = run("search", MLP, "--mesh", "X=64", *args)
    own_code, own_out, own_err = run("search", lined(MLP), *args)
    assert code == own_code == 0
    given, own = json.loads(out), json.loads(own_out)
    assert own["winner"] == given["winner"] and own["winner"]["seconds"] == pytest.approx(6.992e-4, rel=1e-3)
    assert own["strategies"] == given["strategies"]
    assert f"note: {NOTE}" in err.splitlines() and f"note: {NOTE}" in own_err.splitlines()
