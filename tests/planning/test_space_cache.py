"""The layout spaces a process keeps are bounded (issue 13 fuzzing: every space was kept and the heap grew
without bound), and a space dropped and made anew gives the same answers."""

from __future__ import annotations

import gc
import weakref

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.traffic import Sizes
from shardalg.cache import clear_caches
from shardalg.notation.parse import parse_tensor as T
from shardalg.planning import space
from shardalg.planning.redistribute import redistribute
from shardalg.planning.search import search_from
from shardalg.planning.space import MAX_SPACES, space_of, state_of


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


def _freed_without_the_collector(make) -> bool:
    """Whether the objects ``make`` returns weak references to are freed as soon as they are dropped, with the
    garbage collector off (a reference cycle would keep them until a full collection)."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        refs = make()
        return all(r() is None for r in refs)
    finally:
        if was:
            gc.enable()


def _searched(mesh: Mesh) -> list[weakref.ref]:
    """A space with a search settled in it, kept by the spaces alone: weak references to the two."""
    clear_caches()
    s = space_of(T("A[I, J]"), mesh, Sizes())
    found = search_from(s, state_of(T("A[I_X, J_Y]")))
    found.settle(state_of(T("A[I_Y, J_X]")))
    return [weakref.ref(s), weakref.ref(found)]


def test_a_dropped_or_forgotten_space_frees_its_searches_at_once():
    """A search refers to its space and the space keeps its searches: without help the two are a cycle, and
    a fresh 4-axis query spent about half its time in the full collections that freed them."""
    mesh = Mesh(X=2, Y=2)

    def forgotten() -> list[weakref.ref]:
        refs = _searched(mesh)
        clear_caches()  # the spaces with the rest
        return refs

    def evicted() -> list[weakref.ref]:
        refs = _searched(mesh)
        for n in range(1, MAX_SPACES + 1):
            space_of(T(f"A[{n}, J]"), mesh, Sizes())
        return refs

    assert _freed_without_the_collector(forgotten)
    assert _freed_without_the_collector(evicted)


def test_reading_paths_back_leaves_no_garbage_for_the_collector():
    mesh = Mesh(X=2, Y=2)
    clear_caches()
    s = space_of(T("A[I, J]"), mesh, Sizes())
    found = search_from(s, state_of(T("A[I_X, J_Y]")))
    lab = found.settle(state_of(T("A[I_Y, J_X]")))
    assert lab is not None
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(20):
            assert found.paths(lab, 4, keep=lambda m: True)
        assert gc.collect() == 0  # nothing unreachable was left in a cycle
    finally:
        if was:
            gc.enable()
