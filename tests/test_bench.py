"""The bench's honesty mechanics (no timings asserted here): it times the README's own commands, finds and
classifies the caches it clears, flags a whole-query cache hit, reads costs through one adapter, and the
executor's cases run and equal the dense product."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import textwrap

import pytest

from bench.cold import readme_commands
from bench.common import find_caches, read_cost
from tests.shared import ROOT


def test_the_cold_start_times_the_readmes_plan_and_compare() -> None:
    found = readme_commands()
    kinds = {argv[0] for argv in found}
    assert kinds == {"plan", "compare"}
    for argv in found:
        assert not any(a in ("&&", "2>&1", "shardalg", "|") for a in argv)  # the command alone, no pipe
    compare = next(a for a in found if a[0] == "compare")
    assert compare[-2:] == ["--solve-for", "D"] and "--mesh" in compare


def test_the_readmes_plan_and_compare_start_without_what_they_do_not_use() -> None:
    # what their cold start leaves out (shardalg.deferred): json (only --json prints it), html (a notebook's
    # tables), pickle (lark's cache and save/load, which the generated parser never runs); --json still works
    code = textwrap.dedent("""
        import ast, contextlib, io, sys
        from shardalg.cli import main
        for argv in ast.literal_eval(sys.argv[1]):
            with contextlib.redirect_stdout(io.StringIO()):
                assert main(argv) == 0, argv
        print([m for m in ("json", "html", "pickle", "base64") if m in sys.modules])
    """)
    commands = readme_commands()
    done = subprocess.run(
        [sys.executable, "-c", code, repr(commands)], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    compare = next(argv for argv in commands if argv[0] == "compare")
    done = subprocess.run(
        [sys.executable, "-m", "shardalg", *compare, "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "result" in json.loads(done.stdout)


def test_caches_are_found_by_the_registry_and_cleared_by_kind(tmp_path, monkeypatch) -> None:
    pkg = tmp_path / "fakepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(
        textwrap.dedent("""
        import functools

        from shardalg.cache import Kind, memo, memoized

        @memoized(Kind.ANSWER)
        def answer(x):
            return [x]

        @memoized(Kind.PIECE)
        def piece(x):
            return x

        @memoized(Kind.PIECE)
        def plans(x):  # a piece around a public entry point: suspect
            return x

        TABLE = memo(__name__ + ".TABLE", Kind.TABLE)

        @functools.lru_cache
        def stray(x):  # made outside the layer
            return x
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    found = find_caches(["fakepkg"])
    assert {"fakepkg.mod.answer"} <= set(found.answers) and "fakepkg.mod.piece" in found.pieces
    assert "fakepkg.mod.TABLE" in found.tables and found.suspect == ["fakepkg.mod.plans"]
    assert found.unregistered == ["fakepkg.mod.stray"]
    mod = sys.modules["fakepkg.mod"]
    mod.answer(1), mod.piece(1), mod.plans(1), mod.stray(1), mod.TABLE.keep(1, 1)
    found.clear_warm()  # answers, suspect and unregistered caches go before a warm run; pieces stay
    assert mod.answer.cache_info().currsize == 0 and mod.plans.cache_info().currsize == 0
    assert mod.stray.cache_info().currsize == 0 and mod.piece.cache_info().currsize == 1
    found.clear_fresh()  # everything but the tables
    assert mod.piece.cache_info().currsize == 0 and len(mod.TABLE) == 1


def test_the_planners_searches_stay_warm_and_are_cleared_fresh() -> None:
    found = find_caches()
    assert "shardalg.planning.redistribute.best_sequences" in found.pieces
    assert "shardalg.planning.planner._einsum_plans" in found.answers
    assert not found.unregistered and not found.suspect, (found.unregistered, found.suspect)
    import shardalg as sa
    from shardalg.planning import redistribute

    sa.clear_caches()  # the product-plan memo too, or the query below would not search at all
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


def test_every_module_level_cache_is_registered_and_cleared_as_its_kind() -> None:
    """A cache kept in a module-level container must be made through shardalg.cache: run the book's queries
    (plans, their costs, a ranking by seconds) and every module-level container that grew must be a
    registered one; an answer is gone after clear_warm, a piece after clear_fresh (and kept by clear_warm), a
    table never cleared."""
    import shardalg as sa
    from bench.plans import BOOK_CASES, Query
    from shardalg.cache import Kind, registered

    found = find_caches()
    found.clear_fresh()
    containers = _module_containers()
    kinds = {id(entry.holds): entry.kind for entry in registered()}
    base = {name: len(c) for name, c in containers.items()}

    def run() -> None:
        for _, expr in BOOK_CASES:
            Query(expr, "X=2,Y=4")()
        sa.plans("A[I, J_X] · B[J_X, K] -> C[I, K_X]", "X=4", {"I": 64, "J": 64, "K": 64}, hw="tpu-v5e")

    run()
    grown = {name for name, c in containers.items() if len(c) > base[name]}
    assert "shardalg.planning.optimum._OPTIMA" in grown  # the scan sees a plain cache fill
    unregistered = sorted(name for name in grown if id(containers[name]) not in kinds)
    assert not unregistered, f"module-level caches made outside shardalg.cache: {unregistered}"
    kind = {name: kinds[id(containers[name])] for name in grown}
    assert Kind.PIECE in kind.values()
    found.clear_warm()
    for name in grown:
        if kind[name] is Kind.ANSWER:
            assert len(containers[name]) == base[name], name
        else:
            assert len(containers[name]) > base[name], f"{name} is a {kind[name].value}: warm runs keep it"
    run()
    found.clear_fresh()
    for name in grown:
        if kind[name] is not Kind.TABLE:
            assert len(containers[name]) == base[name], f"{name} survives a fresh start"
        else:
            assert len(containers[name]) > base[name], f"{name} is a table: no run clears it"


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


def test_a_timed_run_collects_what_it_made_and_not_what_the_run_before_it_made(monkeypatch) -> None:
    """The young generation is collected before the timing starts (the query starts with it nearly empty,
    however many objects were made before it) and again at the end of the timed run (what the query made
    is walked inside its own timing). Without that, the warm run after a fresh one paid the collector's walk
    over the fresh run's objects."""
    import gc

    from bench import plans as bench_plans

    q = bench_plans.Query("A[I, J_X] · B[J_X, K] -> C[I, K]", "X=2,Y=4")
    young_at_start: list[int] = []
    made: list[list[int]] = []

    def plans(stmt, mesh, sizes):
        young_at_start.append(len(gc.get_objects(0)))
        made.extend([i] for i in range(5000))  # young objects the query leaves
        return []

    monkeypatch.setattr(q, "_plans", plans)
    gc.disable()
    try:
        left = [[i] for i in range(5000)]  # young objects of "the run before"
        q.run()
        young_at_end = len(gc.get_objects(0))
    finally:
        gc.enable()
    assert len(left) == len(made) == 5000
    assert young_at_start[0] < 100
    assert young_at_end < 100


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


def test_the_wide_bench_plans_each_size_in_a_child_of_its_own(capsys) -> None:
    from bench import wide

    assert wide.expression(2) == "A[D0, D1, I_X, J] · B[J, K_X]"
    assert wide.main(["--dims", "0,2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["dims"] for r in out["rows"]] == [0, 2] and all(
        r["plans"] == 4 and not r["stopped"] for r in out["rows"]
    )
    assert out["meets"] in (True, False) and out["target_ratio"] == 2.0
