"""A budget that cuts a search is never silent: ``complete`` is False, the note names the limit, a warning goes
to stderr, and the CLI's JSON says ``"complete": false``. Whatever the budget, an answer that claims to be
complete is the full answer."""

from __future__ import annotations

import json
import warnings

import pytest

from shardalg import plans
from shardalg.cache import clear_caches
from shardalg.cli import main
from shardalg.errors import IncompleteWarning
from shardalg.planning.planner import Limits

RS3 = "A[I, J_{X,Y,Z}] · B[J_{X,Y,Z}, K] -> C[I, K_{X,Y,Z}]"
MESH3 = "X=2,Y=2,Z=2"
CASES = [
    (RS3, MESH3),
    ("A[I, J_{X,Y}] · B[J_{X,Y}, K] -> C[I, K]", "X=2,Y=2"),
    ("A[I_X, J] · B[J, K_Y] -> C[I, K_XY]", "X=2,Y=2"),
    ("A[I_{XY}, J_Z] -> A[I_Z, J_{YX}]", MESH3),
    ("A[I, J]{U_XY} -> A[I_Y, J_X]", "X=2,Y=2"),
]


def _shown(found: list) -> list[str]:
    return [str(p) for p in found]


def test_a_tiny_budget_says_so() -> None:
    clear_caches()
    with pytest.warns(IncompleteWarning, match="max_labels"):
        found = plans(RS3, MESH3, limits=Limits(max_labels=5))
    assert found.complete is False
    assert "stopped after 5 labels (the planning limit max_labels)" in found.note
    assert "--max-labels" in found.note


@pytest.mark.parametrize(("expr", "mesh"), CASES)
def test_never_a_silent_subset(expr: str, mesh: str) -> None:
    full = plans(expr, mesh)
    assert full.complete and full
    cut = 0
    for budget in (1, 2, 3, 5, 8, 13, 30, 100, 300, 1000, 10_000):
        for fresh in (True, False):  # the answer never depends on the queries before it
            if fresh:
                clear_caches()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                found = plans(expr, mesh, limits=Limits(max_labels=budget))
            warned = [w for w in caught if issubclass(w.category, IncompleteWarning)]
            if found.complete:
                assert not warned and _shown(found) == _shown(full), (
                    f"budget {budget}: a complete answer differs"
                )
            else:
                cut += 1
                assert warned and "max_labels" in found.note
    assert cut  # the smallest budgets do cut every case


def test_cli_says_incomplete_in_json_and_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", RS3, "--mesh", MESH3, "--max-labels", "5", "--json", "--all"])
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert code == 0
    assert data["complete"] is False and "max_labels" in data["note"]
    assert err.startswith("shardalg: warning: the plans may be incomplete:") and "--max-labels" in err


def test_cli_text_says_incomplete(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", RS3, "--mesh", MESH3, "--max-labels", "5"])
    out, err = capsys.readouterr()
    assert code == 0 and out.startswith("# incomplete: ") and "warning" in err
    code = main(["plan", RS3, "--mesh", MESH3, "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and json.loads(out)["complete"] is True and err == ""


SAME_SPACES = [
    ("A[I, J_X]{U_Y} · B[J_X, K] -> C[I, K]", "X=2,Y=2"),
    ("x[B, D_X] · W[D_X, F] -> y[B, F]", "X=2"),
    ("A[I_X, J] · B[J, K_X] -> C[I_X, K]", "X=2"),
    ("A[I, J]{U_X} · B[J, K] -> C[I, K]{U_Y}", "X=2,Y=2"),
    ("A[I_Y, J_X] · B[J_X, K] -> C[I, K_Y]", "X=2,Y=2"),
    ("A[I, J_X] · B[J, K] -> C[I, K]", "X=2"),
    ("A[I, J_{XY}] · B[J_{XY}, K] -> C[I_X, K_Y]", "X=2,Y=2"),
]


@pytest.mark.parametrize("order", [1, -1])
def test_answers_never_depend_on_earlier_queries(order: int) -> None:
    fresh = {}
    for expr, mesh in SAME_SPACES:
        clear_caches()
        fresh[expr] = _shown(plans(expr, mesh))
    clear_caches()
    for expr, mesh in SAME_SPACES[::order]:  # one shared set of spaces and searches, in either order
        assert _shown(plans(expr, mesh)) == fresh[expr], expr
