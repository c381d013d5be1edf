"""The layout spaces a process keeps are bounded (issue 13 fuzzing: every space was kept and the heap grew
without bound), and a space dropped and made anew gives the same answers."""

from __future__ import annotations

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.traffic import Sizes
from shardalg.notation.parse import parse_tensor as T
from shardalg.planning import space
from shardalg.planning.redistribute import clear_caches, redistribute
from shardalg.planning.space import MAX_SPACES, space_of


def _steps(src: str, dst: str, mesh: Mesh) -> list[str]:
    return [str(p) for p in redistribute(T(src), T(dst), mesh)]


def test_at_most_max_spaces_are_kept_the_least_recently_used_dropped_first():
    clear_caches()
    mesh = Mesh(X=2, Y=2)
    first = space_of(T("A[I, J]"), mesh, Sizes())
    for n in range(1, MAX_SPACES + 10):
        space_of(T(f"A[{n}, J]"), mesh, Sizes())
        space_of(T("A[I, J]"), mesh, Sizes())  # used again: kept
        assert len(space._SPACES) <= MAX_SPACES
    assert space_of(T("A[I, J]"), mesh, Sizes()) is first
    assert space_of(T("A[1, J]"), mesh, Sizes()) is not None and len(space._SPACES) == MAX_SPACES


def test_a_dropped_space_is_made_anew_with_the_same_plans():
    clear_caches()
    mesh = Mesh(X=2, Y=4)
    before = _steps("A[I_X, J_Y]", "A[I_Y, J_X]", mesh)
    kept = space_of(T("A[I, J]"), mesh, Sizes())
    for n in range(1, MAX_SPACES + 1):
        space_of(T(f"A[{n}, J]"), mesh, Sizes())
    assert space_of(T("A[I, J]"), mesh, Sizes()) is not kept  # dropped, made anew: searched again in it
    assert _steps("A[I_X, J_Y]", "A[I_Y, J_X]", mesh) == before
