"""What every benchmark shares: medians of interleaved runs, the caches to clear, and the cost adapter.

Honesty rules the parts follow (README "Benchmarks"):

- every figure is a median of repeated runs, next to a baseline measured in the same run (interleaved
  with it where both are cheap, so a loaded machine slows both alike);
- *warm* means modules imported, the grammar loaded and the caches of *pieces* of a query warm (one
  resharding search, one layout space, sympy's cache of sub-expressions); a cache of a whole query is
  cleared before every warm run (the ``answer`` kind of :mod:`shardalg.cache`, and any cache made outside
  that layer or a piece wrapped around a public entry point: cleared, and named, until it is classified);
- *fresh* means every cache of the package but its tables (``shardalg.clear_caches()``), and sympy's,
  cleared before the run (the registry, by kind, is printed by ``python -m bench caches``).
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

# The packages a fresh run's caches come from (the planner, the costs, and the algebra they call): imported
# before the caches are listed, so that every one of their caches is registered. Every cache of the package is
# made through shardalg.cache, which keeps its kind: a *piece* of a query (kept warm), an *answer* (a whole
# query's answer or part of it keyed by the whole query: cleared before every warm run) or a *table* (made once
# for the process, cleared by no run). A functools cache outside that layer is found by walking these modules,
# named, and cleared before warm runs too (tests/test_bench.py fails on one), so a new cache never flatters.
CACHED_PACKAGES = ("shardalg.planning", "shardalg.costs", "shardalg.algebra")
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
    """The registered caches (:mod:`shardalg.cache`) once ``CACHED_PACKAGES`` are imported, by kind, and any
    functools cache made outside that layer (``unregistered``)."""

    pieces: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    suspect: list[str] = field(default_factory=list)  # a piece wrapped around a public entry point
    unregistered: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    _clear: dict[str, Callable[[], None]] = field(default_factory=dict, repr=False)

    def clear_fresh(self) -> None:
        """Every cache but the tables, sympy's too: a fresh start."""
        from shardalg.cache import clear_caches

        clear_caches()
        for name in self.unregistered:
            self._clear[name]()
        _clear_sympy()

    def clear_warm(self) -> None:
        """Only the whole-query caches (answers; and suspect or unregistered ones, until classified)."""
        from shardalg.cache import Kind, clear_caches

        clear_caches(Kind.ANSWER)
        for name in (*self.suspect, *self.unregistered):
            self._clear[name]()

    def describe(self) -> str:
        lines = [
            "fresh runs clear: sympy's cache and every registered cache but the tables (shardalg.clear_caches())",
            "warm runs keep (pieces of a query): "
            + (", ".join(self.pieces) or "nothing")
            + "; and sympy's cache",
            "warm runs clear (whole queries): " + (", ".join(self.answers) or "none found"),
            "no run clears (tables made once for the process): " + (", ".join(self.tables) or "none"),
        ]
        if self.skipped:
            lines.append("modules not searched (they did not import): " + ", ".join(self.skipped))
        if self.suspect:
            lines.append(
                "pieces wrapped around a public entry point, cleared in warm runs too: "
                + ", ".join(self.suspect)
            )
        if self.unregistered:
            lines.append(
                "caches made outside shardalg.cache, cleared in warm runs too until they go through it: "
                + ", ".join(self.unregistered)
            )
        return "\n".join(lines)


def _clear_sympy() -> None:
    from sympy.core.cache import clear_cache

    clear_cache()


def _functools_caches(module: Any) -> Iterator[tuple[str, Any]]:
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
    """Import every module of ``packages`` and list the registered caches of shardalg and of ``packages`` by
    kind (and any functools cache those modules made outside the cache layer)."""
    from shardalg.cache import Kind, registered

    found = Caches()
    mods = [mod for pkg in packages for mod in _modules_of(pkg, found.skipped)]
    held = set()
    owners = ("shardalg.", *[f"{pkg}." for pkg in packages])
    for entry in registered():
        if not entry.name.startswith(owners):
            continue  # another package's (a test's) caches
        held.add(id(entry.holds))
        wrapped = getattr(entry.holds, "__wrapped__", None)
        if entry.kind is Kind.PIECE and getattr(wrapped, "__name__", "") in ENTRY_POINTS:
            found.suspect.append(entry.name)
            found._clear[entry.name] = entry.clear
            continue
        {Kind.PIECE: found.pieces, Kind.ANSWER: found.answers, Kind.TABLE: found.tables}[entry.kind].append(
            entry.name
        )
    for mod in mods:
        for qual, obj in _functools_caches(mod):
            if id(obj) not in held:
                found.unregistered.append(qual)
                found._clear[qual] = obj.cache_clear
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
