"""The README's ``shardalg plan`` and ``shardalg compare`` as whole processes, cold, against
``python -c "import sympy"`` (sympy's import is the floor: compare needs sympy) in the same run.

    python -m bench cold [--runs N] [--against DIR] [--phases]

The commands are read from README.md's console blocks (every ``shardalg plan`` and ``shardalg compare``), so
the bench times what the README shows. Runs are interleaved (floor, each command, floor, ...) after one
untimed round; the median of each is compared with the floor's (wall time, the target; CPU time, user +
system, is printed beside it: a loaded machine disturbs it less). Every process gets the same environment:
bytecode is written once to a private prefix (``PYTHONPYCACHEPREFIX``, as an installed package has its
``.pyc``; sympy's are rebuilt there too) and nothing is written into the checkouts. An informational row
times sympy's import plus its first evaluated sum, which imports sympy.tensor and sympy.combinatorics (any
command that adds two symbolic terms pays it); the target stays against the import alone. ``--against DIR`` also
times the same commands on another checkout (e.g. ``/work/main``) in the same rounds, both trees through
``python -m shardalg``: before and after. ``--phases`` adds where each command's time goes.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, median_ms, ratio, table, verdict
from shardalg.cli import RUN_OLDEST_THRESHOLD

TARGET = 1.2
FLOOR = "python -c 'import sympy'"
FIRST_SUM = "python -c 'import sympy; sympy.Symbol(\"x\") + 1'  (informational)"
# The floor under the script's collector policy (``shardalg.cli.run``: full collections only after 1,000 of the
# middle generation, the heap frozen at exit): sympy's import alone pays ~100 ms of full collections, during
# the import and at exit, that the script does not, so the commands are also compared with this floor
# (column "vs floor, same gc").
FLOOR_GC_CODE = (
    f"import gc; gc.set_threshold(*gc.get_threshold()[:2], {RUN_OLDEST_THRESHOLD}); import sympy; gc.freeze()"
)
FLOOR_GC = f"python -c '{FLOOR_GC_CODE}'"


def readme_commands(readme: Path = ROOT / "README.md") -> list[list[str]]:
    """Every ``shardalg plan ...`` and ``shardalg compare ...`` of the README's console blocks, as argv
    (without the leading ``shardalg``); a set-up line's ``... && shardalg compare ...`` counts too."""
    out: list[list[str]] = []
    in_console = False
    for line in readme.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_console = line.strip() == "```console"
            continue
        if not in_console or not line.startswith("$ "):
            continue
        for part in line[2:].split(" && "):
            argv = shlex.split(part)
            if "|" in argv:  # the command, not what the README pipes its output through
                argv = argv[: argv.index("|")]
            if argv and argv[-1] == "2>&1":
                argv = argv[:-1]
            if len(argv) > 1 and argv[0] == "shardalg" and argv[1] in ("plan", "compare"):
                out.append(argv[1:])
    return out


def _env(prefix: str, tree: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    env["PYTHONPYCACHEPREFIX"] = prefix
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    return env


def _launcher(module: bool) -> list[str]:
    exe = Path(sys.executable).with_name("shardalg")
    if not module and exe.exists():
        return [str(exe)]
    if not module and shutil.which("shardalg"):
        return [str(shutil.which("shardalg"))]
    return [sys.executable, "-m", "shardalg"]


def _wall(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall seconds of one process, and its CPU seconds (user + system), which a loaded machine disturbs less."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, env=env, cwd=cwd, check=False)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def _short(argv: list[str]) -> str:
    text = "shardalg " + " ".join(shlex.quote(a) for a in argv)
    return text if len(text) <= 70 else text[:67] + "..."


_PROBE = """
import io, json, sys, contextlib
before = set(sys.modules)
from shardalg.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    main(sys.argv[1:])
new = [m for m in sys.modules if m not in before]
print(json.dumps({"modules": [m for m in new if not m.startswith(("sympy", "mpmath"))],
                  "sympy": "sympy" in sys.modules, "lazy_sympy": "sympy.tensor.tensor" in sys.modules}))
"""

_PHASES_RUN = """
import importlib, io, json, sys, time, contextlib
clock = time.process_time
t = [clock()]
probe = json.loads(sys.argv.pop(1))
if probe["sympy"]:
    import sympy
t.append(clock())
if any(m == "lark" for m in probe["modules"]):
    import lark
t.append(clock())
for m in probe["modules"]:
    try:
        importlib.import_module(m)
    except Exception:
        pass
t.append(clock())
from shardalg.notation.parse import parse
parse("A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]")
t.append(clock())
if probe["lazy_sympy"]:
    sympy.Symbol("x") + 1
t.append(clock())
from shardalg.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    main(sys.argv[1:])
t.append(clock())
print(json.dumps([b - a for a, b in zip(t, t[1:])]))
"""

_PHASES = (
    "import sympy",
    "import lark",
    "the other imports",
    "the parser's first use",
    "sympy's first sum",
    "the command",
)


def phases(argv: list[str], env: dict[str, str], cwd: Path, runs: int) -> list[float]:
    """Median CPU ms of each phase of one command, in one process: sympy's import, lark's, the other modules
    the command imports (found by a probe run), the parser's first use (the generated parser's tables loaded,
    the lexer's regular expressions compiled), sympy's first evaluated sum (it imports sympy.tensor and
    sympy.combinatorics), and the command itself (its argument parser built, then its work)."""
    import json

    def run(code: str, args: list[str]) -> str:
        done = subprocess.run(
            [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=cwd, check=True
        )
        return done.stdout.strip().splitlines()[-1]

    probe = run(_PROBE, argv)
    got = [json.loads(run(_PHASES_RUN, [probe, *argv])) for _ in range(runs)]
    return [statistics.median(g[i] for g in got) * 1e3 for i in range(len(_PHASES))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench cold", description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15, help="interleaved rounds (median)")
    ap.add_argument("--against", type=Path, help="another checkout to time in the same rounds (before/after)")
    ap.add_argument("--phases", action="store_true", help="also break each command's imports down")
    args = ap.parse_args(argv)

    commands = readme_commands()
    if not commands:
        raise SystemExit("README.md has no `shardalg plan` or `shardalg compare` in a console block")
    prefix = tempfile.mkdtemp(prefix="shardalg-bench-pyc-")
    try:
        here_env = _env(prefix, None)
        jobs: list[tuple[str, list[str], dict[str, str], Path]] = [
            (FLOOR, [sys.executable, "-c", "import sympy"], here_env, ROOT),
            (FLOOR_GC, [sys.executable, "-c", FLOOR_GC_CODE], here_env, ROOT),
            (FIRST_SUM, [sys.executable, "-c", "import sympy; sympy.Symbol('x') + 1"], here_env, ROOT),
        ]
        module = args.against is not None
        for c in commands:
            jobs.append(
                (_short(c) + ("  [this tree]" if module else ""), _launcher(module) + c, here_env, ROOT)
            )
            if args.against is not None:
                tree = args.against.resolve()
                jobs.append(
                    (
                        _short(c) + f"  [{tree}]",
                        [sys.executable, "-m", "shardalg", *c],
                        _env(prefix, tree),
                        tree,
                    )
                )
        for _, cmd, env, cwd in jobs:  # untimed: bytecode, the OS file cache
            _wall(cmd, env, cwd)
        times: dict[str, list[float]] = {name: [] for name, *_ in jobs}
        cpu: dict[str, list[float]] = {name: [] for name, *_ in jobs}
        for _ in range(args.runs):
            for name, cmd, env, cwd in jobs:
                wall, used = _wall(cmd, env, cwd)
                times[name].append(wall)
                cpu[name].append(used)
        floor, floor_cpu = median_ms(times[FLOOR]), median_ms(cpu[FLOOR])
        floor_gc = median_ms(times[FLOOR_GC])
        rows = []
        for name, *_ in jobs:
            ms, cpu_ms = median_ms(times[name]), median_ms(cpu[name])
            ok = None if name in (FLOOR, FLOOR_GC, FIRST_SUM) else ms / floor <= TARGET
            rows.append(
                [
                    name,
                    f"{ms:.0f}",
                    f"{min(times[name]) * 1e3:.0f}",
                    ratio(ms, floor),
                    ratio(ms, floor_gc),
                    f"{cpu_ms:.0f}",
                    ratio(cpu_ms, floor_cpu),
                    "" if ok is None else f"<= {TARGET}x: {verdict(ok)}",
                ]
            )
        launcher = " ".join(Path(x).name if i == 0 else x for i, x in enumerate(_launcher(module)))
        print(
            f"cold start: new processes, median of {args.runs} interleaved rounds (ms); launcher `{launcher}`;"
            f" bytecode in a private PYTHONPYCACHEPREFIX"
        )
        print(
            table(
                [
                    "command",
                    "wall",
                    "min",
                    "vs floor",
                    "vs floor, same gc",
                    "CPU",
                    "CPU vs floor",
                    "target (wall)",
                ],
                rows,
                right=(1, 2, 3, 4, 5, 6),
            )
        )
        if args.phases:
            print(
                f"\nwhere a command's time goes, CPU ms in one process (median of {args.runs}; interpreter "
                "start-up not included)"
            )
            prow = []
            for c in commands:
                got = phases(c, here_env, ROOT, args.runs)
                prow.append([_short(c), *(f"{x:.1f}" for x in got), f"{sum(got[1:]):.1f}"])
            heads = [*_PHASES, "all but sympy's import"]
            print(table(["command", *heads], prow, right=range(1, len(heads) + 1)))
    finally:
        shutil.rmtree(prefix, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
