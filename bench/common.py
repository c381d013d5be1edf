"""What every benchmark shares: medians of interleaved runs, the caches to clear, and the cost adapter.

Honesty rules the parts follow (README "Benchmarks"):

- every figure is a median of repeated runs, next to a baseline measured in the same run (interleaved
  with it where both are cheap, so a loaded machine slows both alike);
- *warm* means modules imported, the grammar loaded and the caches of *pieces* of a query warm (one
  resharding search, one layout space, sympy's cache of sub-expressions); a cache of a whole query is
  cleared before every warm run (``WHOLE_QUERY`` and the ``answer`` kind of ``PLAIN_CACHES`` below, and any
  unknown cache: it is cleared, and named, until someone says which kind it is);
- *fresh* means every cache of the planner, the costs and the algebra below them, and sympy's, cleared
  before the run (the list is found by walking the loaded modules and printed: ``python -m bench caches``).
"""

from __future__ import annotations

import functools
import importlib
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The packages whose caches a fresh run clears (the planner, the costs, and the algebra they call).
CACHED_PACKAGES = ("shardalg.planning", "shardalg.costs", "shardalg.algebra")

# Caches of a piece of a query: kept warm in warm runs. Anything found that is in neither list is treated as
# a whole-query cache (cleared before warm runs too) and named in the output, so a new cache never flatters.
SUB_QUERY_PREFIXES = (
    "shardalg.planning.redistribute.",  # one resharding search (best_sequences), one layout space
    "shardalg.planning.space.",  # layout spaces (the planner branch)
    "shardalg.planning.search.",  # label-setting searches (the planner branch)
    "shardalg.planning.order.",  # one step's byte rank, by step object
    "shardalg.planning.steps.",  # the steps of one move sequence between two tensors
    "shardalg.algebra.",  # rank tables, symbols
    "shardalg.costs.stepcost.",  # one step's cost
    "shardalg.costs.sweep.",  # one compiled expression
    "shardalg.costs.schedule.",  # one plan shape's waits (its steps' lanes and producers)
    "shardalg.planning.optimum._side",  # one search state as a pair of compute layouts sees it
)
# Caches known to hold a whole query's answer (plans of a statement, the costs of a plan list): the plans of one
# product (memoized for the strategy search, which plans the same sharded statement for many candidates).
WHOLE_QUERY: tuple[str, ...] = ("shardalg.planning.planner._einsum_plans",)
# Caches kept in plain module-level containers (no cache_clear to find them by), by kind: ``answer`` holds a
# whole query's answer or part of it keyed by the whole query (cleared before warm runs, by the bench itself);
# ``piece`` one piece of a query (cleared by its module's clear_caches, fresh runs only); ``table`` interns
# atoms or rules for the process (never cleared: terms and rules refer to it). tests/test_bench.py runs queries
# and fails on any module-level container that grew and is not named here, so a new one is never missed.
PLAIN_CACHES: dict[str, str] = {
    "shardalg.planning.optimum._OPTIMA": "answer",  # the cheapest plan of one whole einsum
    "shardalg.planning.space._SPACES": "piece",  # one tensor shape's layout space on a mesh
    "shardalg.planning.optimum._PROTOS": "piece",  # a product's unsharded tensor, by its operands' shapes
    "shardalg.planning.reasons._PIECES": "piece",  # a planned step sequence with its reasons, by what it reads
    "shardalg.planning.steps._SPARED": "piece",  # a gather's spare-axes variant, by the gather step
    "shardalg.algebra.einsum._SPECS": "piece",  # an einsum's structure, by its dims' names and sizes
    "shardalg.algebra.legality._CLEAN": "piece",  # a tensor that passed the tensor rules, by mesh and sizes
    "shardalg.costs.stepcost._LAST": "piece",  # the last pricing context (chip, sizes, model)
    "shardalg.costs.sympymax._FORMULAS": "piece",  # one Max tree's sympy form
    "shardalg.costs.atoms._ATOMS": "table",  # atoms interned for the process
    "shardalg.costs.atoms._IDS": "table",
    "shardalg.costs.terms._SYMPY_ATOMS": "table",  # numbers and symbols as terms
    "shardalg.algebra.legality._BY_TYPE": "table",  # the legality rules by node type
    "shardalg.algebra.traffic._RANK_SCALE": "table",  # each collective's byte scale per dtype
}
# Public entry points: a cache wrapped around one of these is a whole-query cache wherever it lives.
ENTRY_POINTS = frozenset({"plans", "plan", "plan_cost", "cost", "einsum_plans", "compare", "optimum"})


# ---------------------------------------------------------------- timing


def median_ms(times: Iterable[float]) -> float:
    return statistics.median(times) * 1e3


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def ratio(a: float | None, b: float | None) -> str:
    """``a / b`` printed, or a dash when either is missing."""
    if a is None or b is None or b == 0:
        return "-"
    r = a / b
    return f"{r:,.0f}x" if r >= 100 else f"{r:.1f}x" if r >= 10 else f"{r:.2f}x"


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else "meets" if ok else "MISSES"


def table(headers: list[str], rows: list[list[str]], *, right: Iterable[int] = ()) -> str:
    """A plain text table; columns in ``right`` are right-aligned."""
    right = set(right)
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = []
    for r in [headers, *rows]:
        cells = [
            str(c).rjust(w) if i in right else str(c).ljust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# ---------------------------------------------------------------- caches


@dataclass
class Caches:
    """The caches found in the loaded modules of ``CACHED_PACKAGES`` (and sympy's), by kind."""

    sub_query: list[str] = field(default_factory=list)
    whole_query: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    clear_functions: list[str] = field(default_factory=list)
    plain_answers: list[str] = field(default_factory=list)  # PLAIN_CACHES of kind "answer" that were found
    skipped: list[str] = field(default_factory=list)
    _clear: dict[str, Callable[[], None]] = field(default_factory=dict, repr=False)

    def clear_fresh(self) -> None:
        """Every cache: a fresh start."""
        for fn in self._clear.values():
            fn()
        _clear_sympy()

    def clear_warm(self) -> None:
        """Only the whole-query caches, plain answers included (and the unknown ones)."""
        for name in (*self.whole_query, *self.plain_answers, *self.unknown):
            self._clear[name]()

    def describe(self) -> str:
        lines = [
            "fresh runs clear: sympy's cache, "
            + ", ".join([*self.clear_functions, *self.sub_query, *self.whole_query, *self.plain_answers,
                         *self.unknown]),
            "warm runs keep (pieces of a query): " + (", ".join(self.sub_query) or "nothing")
            + "; " + ", ".join([n for n, kind in PLAIN_CACHES.items() if kind == "piece"])
            + " (plain, cleared by their module's clear_caches); and sympy's cache",
            "warm runs clear (whole queries): " + (", ".join([*self.whole_query, *self.plain_answers]) or "none found"),
        ]  # fmt: skip
        if self.skipped:
            lines.append("modules not searched (they did not import): " + ", ".join(self.skipped))
        if self.unknown:
            lines.append("unknown caches, cleared in warm runs too until classified in bench/common.py: "
                         + ", ".join(self.unknown))  # fmt: skip
        return "\n".join(lines)


def _clear_sympy() -> None:
    from sympy.core.cache import clear_cache

    clear_cache()


def _cached_callables(module: Any) -> Iterator[tuple[str, Any]]:
    """(qualified name, object with cache_clear) for functools caches at module level and on classes."""
    for name, obj in sorted(vars(module).items()):
        if getattr(obj, "__module__", None) != module.__name__:
            continue
        if callable(getattr(obj, "cache_clear", None)):
            yield f"{module.__name__}.{name}", obj
        elif isinstance(obj, type):
            for attr, inner in sorted(vars(obj).items()):
                target = getattr(inner, "__func__", inner)
                if callable(getattr(target, "cache_clear", None)):
                    yield f"{module.__name__}.{name}.{attr}", target


def find_caches(packages: Iterable[str] = CACHED_PACKAGES) -> Caches:
    """Import every module of ``packages`` and collect their caches: functools caches, and module-level
    ``clear_caches``/``clear_cache`` functions (a package's own way to forget everything)."""
    found = Caches()
    for pkg in packages:
        for mod in _modules_of(pkg, found.skipped):
            for qual, obj in _cached_callables(mod):
                found._clear[qual] = obj.cache_clear
                wrapped = getattr(obj, "__wrapped__", None)
                if qual in WHOLE_QUERY or getattr(wrapped, "__name__", "") in ENTRY_POINTS:
                    found.whole_query.append(qual)
                elif qual.startswith(SUB_QUERY_PREFIXES):
                    found.sub_query.append(qual)
                else:
                    found.unknown.append(qual)
            for name, kind in PLAIN_CACHES.items():
                owner, _, attr = name.rpartition(".")
                if kind == "answer" and owner == mod.__name__ and attr in vars(mod):
                    found._clear[name] = vars(mod)[attr].clear
                    found.plain_answers.append(name)
            for fname in ("clear_caches", "clear_cache"):
                fn = vars(mod).get(fname)
                if callable(fn) and getattr(fn, "__module__", None) == mod.__name__:
                    qual = f"{mod.__name__}.{fname}()"
                    found._clear[qual] = fn
                    found.clear_functions.append(qual)
    return found


def _modules_of(package: str, skipped: list[str] | None = None) -> list[Any]:
    """The package and its modules; one that cannot be imported (an optional dependency missing) is left
    out and named in ``skipped``."""
    import pkgutil

    pkg = importlib.import_module(package)
    mods = [pkg]
    for info in pkgutil.iter_modules(pkg.__path__, prefix=package + "."):
        try:
            mods.append(importlib.import_module(info.name))
        except ImportError as err:
            if skipped is not None:
                skipped.append(f"{info.name} ({err})")
    return mods


# ---------------------------------------------------------------- the cost adapter


def read_cost(pc: Any) -> tuple[Any, float | None]:
    """The symbolic total and the seconds of a plan cost, whatever its API: ``total`` as an attribute, a
    property or a method (a lazy tree is fine: it is what the cost engine hands out), ``seconds`` likewise."""
    total = pc.total
    if callable(total) and not _is_sympy(total):
        total = total()
    seconds = getattr(pc, "seconds", None)
    if callable(seconds):
        seconds = seconds()
    return total, seconds


def _is_sympy(x: Any) -> bool:
    return type(x).__module__.startswith("sympy")


@functools.cache
def have_jax() -> bool:
    import importlib.util

    return importlib.util.find_spec("jax") is not None
