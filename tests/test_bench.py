"""The bench's honesty mechanics (no timings asserted here): it times the README's own commands, finds and
classifies the caches it clears, flags a whole-query cache hit, reads costs through one adapter, and the
executor's cases run and equal the dense product."""

from __future__ import annotations

import functools
import sys
import textwrap

import pytest

from bench.cold import readme_commands
from bench.common import find_caches, read_cost


def test_the_cold_start_times_the_readmes_plan_and_compare() -> None:
    found = readme_commands()
    kinds = {argv[0] for argv in found}
    assert kinds == {"plan", "compare"}
    for argv in found:
        assert not any(a in ("&&", "2>&1", "shardalg") for a in argv)
    compare = next(a for a in found if a[0] == "compare")
    assert compare[-2:] == ["--solve-for", "D"] and "--mesh" in compare


def test_caches_are_found_and_classified(tmp_path, monkeypatch) -> None:
    pkg = tmp_path / "fakepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(
        textwrap.dedent("""
        import functools

        @functools.lru_cache
        def plans(x):
            return [x]

        @functools.cache
        def helper(x):
            return x

        class Thing:
            @staticmethod
            @functools.lru_cache
            def table(x):
                return x

        def clear_caches():
            helper.cache_clear()
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    found = find_caches(["fakepkg"])
    assert found.whole_query == ["fakepkg.mod.plans"]  # a cache around an entry point answers whole queries
    assert sorted(found.unknown) == ["fakepkg.mod.Thing.table", "fakepkg.mod.helper"]
    assert found.clear_functions == ["fakepkg.mod.clear_caches()"]
    mod = sys.modules["fakepkg.mod"]
    mod.plans(1), mod.helper(1)
    found.clear_warm()  # whole-query and unknown caches go before a warm run
    assert mod.plans.cache_info().currsize == 0 and mod.helper.cache_info().currsize == 0


def test_the_planners_searches_stay_warm_and_are_cleared_fresh() -> None:
    found = find_caches()
    assert "shardalg.planning.redistribute.best_sequences" in found.sub_query
    assert not found.unknown, found.unknown
    from shardalg.planning import planner, redistribute

    planner.clear_caches()  # the product-plan memo too, or the query below would not search at all
    import shardalg as sa

    sa.plans("A[I, J_X] · B[J_X, K] -> C[I, K_X]", "X=4")
    assert redistribute.best_sequences.cache_info().currsize > 0
    found.clear_warm()
    assert redistribute.best_sequences.cache_info().currsize > 0
    found.clear_fresh()
    assert redistribute.best_sequences.cache_info().currsize == 0


def _module_containers() -> dict[str, dict | list | set]:
    from bench.common import CACHED_PACKAGES, _modules_of

    out = {}
    for pkg in CACHED_PACKAGES:
        for mod in _modules_of(pkg):
            for name, value in vars(mod).items():
                if isinstance(value, dict | list | set) and not name.startswith("__"):
                    out[f"{mod.__name__}.{name}"] = value
    return out


def test_every_plain_module_cache_is_classified_and_cleared_as_its_kind() -> None:
    """A cache kept in a plain dict has no cache_clear to be found by: run the book's queries (plans, their
    costs, a ranking by seconds) and every module-level container that grew must be named in PLAIN_CACHES;
    an answer is gone after clear_warm, a piece after clear_fresh (and kept by clear_warm)."""
    import shardalg as sa
    from bench.common import PLAIN_CACHES
    from bench.plans import BOOK_CASES, Query

    found = find_caches()
    found.clear_fresh()
    containers = _module_containers()
    base = {name: len(c) for name, c in containers.items()}

    def run() -> None:
        for _, expr in BOOK_CASES:
            Query(expr, "X=2,Y=4")()
        sa.plans("A[I, J_X] · B[J_X, K] -> C[I, K_X]", "X=4", {"I": 64, "J": 64, "K": 64}, hw="tpu-v5e")

    run()
    grown = {name for name, c in containers.items() if len(c) > base[name]}
    assert "shardalg.planning.optimum._OPTIMA" in grown  # the scan sees a plain cache fill
    assert grown <= set(PLAIN_CACHES), f"unclassified module-level caches: {sorted(grown - set(PLAIN_CACHES))}"
    found.clear_warm()
    for name, kind in PLAIN_CACHES.items():
        if kind == "answer":
            assert len(containers[name]) == base[name], name
        elif kind == "piece" and name in grown:
            assert len(containers[name]) > base[name], f"{name} is a piece: warm runs keep it"
    run()
    found.clear_fresh()
    for name, kind in PLAIN_CACHES.items():
        if kind != "table":
            assert len(containers[name]) == base[name], f"{name} survives a fresh start"


def test_a_whole_query_cache_hit_is_flagged(monkeypatch) -> None:
    from bench import plans as bench_plans

    q = bench_plans.Query("A[I, J_X] · B[J_X, K] -> C[I, K]", "X=2,Y=4")
    q.run()
    assert not q.whole_query_hit
    memo = functools.lru_cache(q._plans)
    monkeypatch.setattr(q, "_plans", lambda stmt, mesh, sizes: memo(stmt, mesh, tuple(sorted(sizes.items()))))
    q.run()
    q.run()
    assert q.whole_query_hit


class _Lazy:
    def __init__(self) -> None:
        self.calls = 0

    def total(self) -> str:
        self.calls += 1
        return "T"

    @property
    def seconds(self) -> float:
        return 1.5


def test_the_cost_adapter_reads_attributes_and_methods() -> None:
    import shardalg as sa

    p = sa.plan("A[I, J_X] · B[J_X, K] -> C[I, K]", "X=4", {"I": 8, "J": 8, "K": 8})
    total, seconds = read_cost(sa.plan_cost(p, "X=4", {"I": 8, "J": 8, "K": 8}, hw="tpu-v5p"))
    assert total.free_symbols and seconds is not None and seconds > 0
    lazy = _Lazy()
    assert read_cost(lazy) == ("T", 1.5) and lazy.calls == 1


@pytest.mark.parametrize("n", [16])
def test_the_executor_cases_run_and_equal_the_dense_product(n: int) -> None:
    from bench.executor import _measure

    rows = _measure(n, 1)
    assert len(rows) == 9 and all(r["ok"] for r in rows)
    case2 = next(r for r in rows if r["mesh"] == "X=8" and r["case"] == "case 2")
    assert case2["products"] == "1/8"  # the gathered, replicated product is computed once for 8 devices
