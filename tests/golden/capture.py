"""The golden file: every query of :mod:`tests.golden.queries` run in-process on this checkout, its output
written to ``tests/golden/golden.txt`` or compared with it.

``python -m tests.golden.capture --write`` writes the file; ``python -m tests.golden.capture --check`` runs the
queries again and prints a unified diff of each query whose output differs, exiting 1 on any difference (0 when
all are the same). With ``--check``, ``--every N`` runs only every Nth query and ``--only N,M`` only the
queries numbered N and M (1-based, as the diffs name them), in a process of their own.

Each query is one block of the file: a header line (``$ shardalg ARGS...`` as a shell would read it, a pipe
``$ shardalg A | shardalg B`` when standard input is another command's output, ``$ ... <<< TEXT`` when it is
text, or ``>>> shardalg.NAME(...)`` for a call of the public API), then ``exit: CODE``, then the stdout and
stderr, each introduced by its own line (``--- stdout``, ``--- stderr``) and closed by ``--- end``. A CLI
query calls :func:`shardalg.cli.main` with its argv (as tests/cli/ do), stdout and stderr replaced by
buffers, stdin by the given text (an in-process ``SystemExit`` from argparse counts as its exit code). An API
query prints the result as documented in ``_API`` below; an exception is written as its type and message.

Nothing is filtered: no query prints a time it measured, and progress lines appear only on a terminal (the
buffers are not). The API queries write seconds to 12 significant digits (``repr`` would show the last bit of
a float, which a sum taken in another order changes; the CLI prints 3 to 6 digits itself). ``--check`` runs the queries in the file's order, the same order as ``--write``, in one process, so the
planner's caches live across queries; ``--shuffle SEED`` runs them in another order (a seeded permutation),
which must print the same: a cache may change how fast an answer comes, never what it says. (Two queries
failed that on the code the file was captured from, both fixed since: query 129 after 272, a tie of equal-cost
plans broken by which layout states an earlier query had closed, and 272 after 406, source spans from the
earlier query's text.)
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import random
import shlex
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import shardalg
from shardalg.cli import main as cli_main

from .queries import CHIPS, POLICIES, QUERIES, SIZES, Query

GOLDEN = Path(__file__).resolve().parent / "golden.txt"
SEPARATOR = "=" * 100


def header(q: Query) -> str:
    """The query as one line: the command a shell would run, or the API call."""
    if q.api is not None:
        args = [repr(a) for a in q.argv] + [f"{k}={v!r}" for k, v in q.kwargs]
        priced = "  # each plan priced on every chip and policy" if q.api == "plans" else ""
        return f">>> shardalg.{q.api}({', '.join(args)}){priced}"
    line = "$ shardalg " + shlex.join(q.argv)
    if isinstance(q.stdin, tuple):
        return "$ shardalg " + shlex.join(q.stdin) + " | " + line.removeprefix("$ ")
    if isinstance(q.stdin, str):
        return line + " <<< " + shlex.quote(q.stdin)
    return line


def _stdin(text: str) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(text.encode("utf-8")), encoding="utf-8")


def _run_cli(argv: Sequence[str], stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    sys.stdin = _stdin(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli_main(list(argv))
            except SystemExit as exc:  # argparse: usage errors, --help, --version
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    finally:
        sys.stdin = saved
    return code, out.getvalue(), err.getvalue()


def _seconds(value: float | None) -> str:
    return "None" if value is None else f"{value:.12g}"


def _plans(result: Any, q: Query) -> str:
    """Every plan: its repr and text, its symbolic total (``shardalg.cost(plan, mesh)``), and its seconds under
    each overlap policy on each chip of ``PRICES`` with the query's ``SIZES``."""
    mesh = q.argv[1]
    lines = []
    for i, p in enumerate(result, 1):
        lines.append(
            f"# plan {i} of {len(result)}: {p!r}\n{p}\n# symbolic total: {shardalg.cost(p, mesh).total}\n"
        )
        for chip in CHIPS:
            for policy in POLICIES:
                c = shardalg.cost(p, mesh, sizes=SIZES, hw=chip, overlap=policy)
                lines.append(f"# {chip} {policy}: {c.total} = {_seconds(c.seconds)} s\n")
    return "".join(lines)


def _cost(result: Any, q: Query) -> str:
    return f"{result}\n# total: {result.total}\n# seconds: {_seconds(result.seconds)}\n"


def _compare(result: Any, q: Query) -> str:
    return f"{result}\n# result: {result.result}\n"


# How each public function's result is printed: every plan with its repr, a cost's text with its total and
# seconds, a backward program's text, a comparison's derivation with its result.
_API: dict[str, Callable[[Any], str]] = {
    "plans": _plans,
    "cost": _cost,
    "backward": lambda r, q: f"{r}\n",
    "compare": _compare,
}


def _run_api(q: Query) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda m, c, *_a, **_k: print(f"warning: {c.__name__}: {m}", file=sys.stderr)
        try:
            result = getattr(shardalg, q.api)(*q.argv, **dict(q.kwargs))  # type: ignore[arg-type]
            print(_API[q.api](result, q), end="")
            code = 0
        except Exception as exc:  # noqa: BLE001 - an error is an answer too
            print(f"raised {type(exc).__name__}: {exc}")
            code = 1
    return code, out.getvalue(), err.getvalue()


def run(q: Query) -> str:
    """One query's block of the golden file."""
    if q.api is not None:
        code, out, err = _run_api(q)
    else:
        stdin = q.stdin
        if isinstance(stdin, tuple):
            _, stdin, _ = _run_cli(stdin)
        code, out, err = _run_cli(q.argv, stdin or "")
    return f"{header(q)}\nexit: {code}\n--- stdout\n{out}--- stderr\n{err}--- end\n"


def blocks(queries: Sequence[Query]) -> list[str]:
    return [run(q) for q in queries]


def render(texts: Sequence[str]) -> str:
    return "".join(f"{SEPARATOR}\n{t}" for t in texts)


def parse(text: str) -> list[str]:
    """The file's blocks, in order."""
    return [b for b in text.split(SEPARATOR + "\n") if b]


def check(indices: Sequence[int]) -> list[str]:
    """The diffs (one per query whose output differs from the file) of the queries at ``indices`` (0-based)."""
    saved = parse(GOLDEN.read_text(encoding="utf-8"))
    if len(saved) != len(QUERIES):
        return [
            f"the golden file has {len(saved)} queries, queries.py {len(QUERIES)}: run --write on the old code\n"
        ]
    diffs = []
    for i in indices:
        now = run(QUERIES[i])
        if now != saved[i]:
            name = f"query {i + 1}: {header(QUERIES[i])}"
            diffs.append(
                "".join(
                    difflib.unified_diff(
                        saved[i].splitlines(keepends=True),
                        now.splitlines(keepends=True),
                        fromfile=f"golden {name}",
                        tofile=f"now {name}",
                    )
                )
            )
    return diffs


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.golden.capture", description=__doc__.split("\n\n")[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="run every query and write golden.txt")
    mode.add_argument(
        "--check", action="store_true", help="run the queries again and diff them with golden.txt"
    )
    p.add_argument("--every", type=int, default=1, metavar="N", help="with --check: only every Nth query")
    p.add_argument(
        "--only", metavar="N,M", help="with --check: only these queries (1-based, as the diffs name them)"
    )
    p.add_argument(
        "--shuffle", type=int, metavar="SEED", help="with --check: run them in a seeded random order"
    )
    args = p.parse_args(argv)
    start = time.process_time()
    if args.write:
        GOLDEN.write_text(render(blocks(QUERIES)), encoding="utf-8")
        print(f"wrote {len(QUERIES)} queries to {GOLDEN} ({time.process_time() - start:.1f} s CPU)")
        return 0
    indices = (
        [int(n) - 1 for n in args.only.split(",")] if args.only else list(range(0, len(QUERIES), args.every))
    )
    if args.shuffle is not None:
        random.Random(args.shuffle).shuffle(indices)
    diffs = check(indices)
    for d in diffs:
        print(d)
    ran = len(indices)
    print(f"{ran} queries checked, {len(diffs)} differ ({time.process_time() - start:.1f} s CPU)")
    return 1 if diffs else 0


if __name__ == "__main__":
    raise SystemExit(main())
