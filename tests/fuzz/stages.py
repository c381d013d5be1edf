"""Every stage of shardalg on one fuzz input, in process, each timed: parse, print (and read back), check,
shape, plans, ranked (the plans by seconds on a chip, under an overlap policy), run_plan, cost, backward (with
reductions deferred on every other program), verify (the derived backward read back as a hand-written one: a
finding is a wrong backward, or verify's own false alarm; forwards verify does not read are refused); and
two stages of the edges: chip (a chip file read as ``--hw FILE.toml`` does, then a collective priced on it) and
extras (the JAX and torch checks and a drawing with jax, torch and matplotlib made unimportable). A stage may
refuse its input with a shardalg error (counted by class);
anything else is a failure: another exception (a traceback a user would see), a stage over the time limit
(unbounded work), ``check`` and the planner disagreeing on legality, a plan the executor finds wrong, a print
that does not read back, or a legality error without a span.

Time is measured per stage as CPU time of this process (``time.process_time``), the work the stage did, and
as wall time; the limit applies to CPU time so that a loaded machine does not fail the run.
"""

from __future__ import annotations

import gc
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shardalg import plans as ranked_plans
from shardalg.algebra.legality import check, notes
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.shape import shape
from shardalg.costs.chipspec import chip_from_text
from shardalg.costs.plancost import cost, plan_cost
from shardalg.errors import IllegalSharding, NoPlan, NoteWarning, ShardalgError
from shardalg.notation.jsonread import from_json
from shardalg.notation.parse import parse, parse_statement, parse_tensor
from shardalg.notation.printing import latex, text, to_json, unicode
from shardalg.notation.syntax import Arrow, Collective, Product, Program, Tensor
from shardalg.numeric.execute import run_plan
from shardalg.planning.backward import backward
from shardalg.planning.planner import plans
from shardalg.planning.verify import verify

STAGES = (
    "parse",
    "print",
    "check",
    "shape",
    "plans",
    "ranked",
    "run_plan",
    "cost",
    "backward",
    "verify",
    "chip",
    "extras",
)
EXTRAS = ("jax", "torch", "matplotlib")  # the optional extras the extras stage makes unimportable
POLICIES = ("schedule", "steady", "serial")  # the ranked stage takes them in turn
STAGE_SECONDS = 2.0  # a stage over this much CPU time is unbounded work (a fuzz finding, not a speed test)
PLANS_RUN = 3  # the plans of a statement that run_plan and cost take (cheapest first)
STATEMENTS_PLANNED = 3

Setting = tuple[Mesh | None, dict[str, int]]


@dataclass
class Failure:
    kind: str  # exception, slow, disagree, wrong, roundtrip, no-span
    stage: str
    source: str
    mesh: str
    sizes: dict[str, int]
    detail: str

    def __str__(self) -> str:
        return (
            f"[{self.kind}] stage {self.stage}: {self.detail}\n  input: {self.source!r}\n"
            f"  mesh: {self.mesh}  sizes: {self.sizes}"
        )


@dataclass
class Tally:
    """What a fuzz run saw: inputs, stage runs and times, shardalg errors by class, failures by kind."""

    inputs: Counter[str] = field(default_factory=Counter)  # by input kind
    parsed: int = 0
    runs: Counter[str] = field(default_factory=Counter)
    cpu: dict[str, float] = field(default_factory=dict)  # slowest CPU time per stage
    wall: dict[str, float] = field(default_factory=dict)  # slowest wall time per stage
    gc: dict[str, float] = field(
        default_factory=dict
    )  # most CPU time one run of a stage spent collecting garbage
    slowest: dict[str, str] = field(default_factory=dict)  # the input of the slowest run per stage
    errors: Counter[str] = field(default_factory=Counter)  # shardalg error classes (refusals)
    failures: list[Failure] = field(default_factory=list)
    failure_kinds: Counter[str] = field(default_factory=Counter)
    noplan_after_legal: int = 0
    noplan_examples: list[str] = field(default_factory=list)
    keep: int = 50  # failures kept in full (all are counted)

    def fail(self, f: Failure) -> None:
        self.failure_kinds[f.kind] += 1
        if len(self.failures) < self.keep:
            self.failures.append(f)

    def summary(self) -> dict[str, Any]:
        return {
            "inputs": sum(self.inputs.values()),
            "inputs_by_kind": dict(sorted(self.inputs.items())),
            "parsed": self.parsed,
            "stage_runs": {s: self.runs[s] for s in STAGES},
            "slowest_cpu_seconds": {s: round(self.cpu.get(s, 0.0), 4) for s in STAGES},
            "slowest_wall_seconds": {s: round(self.wall.get(s, 0.0), 4) for s in STAGES},
            "most_gc_cpu_seconds": {s: round(self.gc.get(s, 0.0), 4) for s in STAGES},
            "slowest_input": {s: self.slowest.get(s, "") for s in STAGES},
            "shardalg_errors": dict(self.errors.most_common()),
            "failures": dict(self.failure_kinds.most_common()),
            "noplan_after_legal": self.noplan_after_legal,
            "noplan_examples": self.noplan_examples[:10],
            "failure_examples": [str(f) for f in self.failures],
        }


class _Run:
    """One input through the stages."""

    def __init__(self, source: str, tally: Tally, limit: float) -> None:
        self.source, self.tally, self.limit = source, tally, limit
        self.mesh: Mesh | None = None
        self.sizes: dict[str, int] = {}

    def fail(self, kind: str, stage: str, detail: str) -> None:
        self.tally.fail(Failure(kind, stage, self.source, repr(self.mesh), dict(self.sizes), detail))

    def stage(self, name: str, fn: Callable[[], Any]) -> tuple[Any, ShardalgError | None, bool]:
        """(value, the shardalg error it raised, whether it finished without a failure)."""
        t = self.tally
        t.runs[name] += 1
        gc0 = GC_CPU[0]
        wall0, cpu0 = time.perf_counter(), time.process_time()
        value, err, ok = None, None, True
        try:
            value = fn()
        except ShardalgError as e:
            err = e
            t.errors[type(e).__name__] += 1
        except Exception as e:  # noqa: BLE001 - a non-shardalg exception is what the fuzzer looks for
            ok = False
            self.fail("exception", name, f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=-6)}")
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        in_gc = GC_CPU[0] - gc0
        t.gc[name] = max(t.gc.get(name, 0.0), in_gc)
        if cpu > t.cpu.get(name, -1.0):
            t.cpu[name], t.slowest[name] = cpu, f"{self.source!r} mesh={self.mesh!r} sizes={self.sizes}"
        t.wall[name] = max(t.wall.get(name, 0.0), wall)
        if cpu > self.limit:
            self.fail(
                "slow",
                name,
                f"{cpu:.2f} s of CPU ({wall:.2f} s wall; {in_gc:.2f} s of it in the garbage collector)",
            )
        return value, err, ok


# CPU seconds spent in the garbage collector so far (gc.callbacks): a stage's CPU time includes any collection
# that happens to run during it, so the figures say how much of it that was.
GC_CPU = [0.0]
_gc_start = [0.0]


def _gc_timer(phase: str, info: dict) -> None:
    if phase == "start":
        _gc_start[0] = time.process_time()
    else:
        GC_CPU[0] += time.process_time() - _gc_start[0]


gc.callbacks.append(_gc_timer)


def _parse_as(kind: str) -> Callable[[str], Any]:
    return {"statement": parse_statement, "tensor": parse_tensor}.get(kind, parse)


def _bound_sizes(stmt: object, mesh: Mesh, sizes: dict[str, int]) -> dict[str, int]:
    """``sizes`` with every named dim of the statement bound (a seconds ranking needs numbers): a dim left
    unbound gets twice the number of devices, which every group of axes divides."""
    out = dict(sizes)
    todo = [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, Tensor):
            for d in node.dims:
                if d.name is not None and d.name not in out:
                    out[d.name] = 2 * mesh.devices
        elif isinstance(node, Arrow):
            todo += [node.expr, node.result]
        elif isinstance(node, Product):
            todo += [node.left, node.right]
        elif isinstance(node, Collective):
            todo.append(node.arg)
    return out


def _has_product(node: object) -> bool:
    if isinstance(node, Product):
        return True
    if isinstance(node, Arrow):
        return _has_product(node.expr)
    return isinstance(node, Collective) and _has_product(node.arg)


def _printed(program: Program) -> list[str]:
    """Printers whose output does not read back as the same program."""
    bad = []
    for name, printer in (("text", text), ("unicode", unicode), ("latex", latex)):
        if parse(printer(program)) != program:
            bad.append(name)
    if from_json(to_json(program)) != program:
        bad.append("json")
    return bad


def _spanless(err: ShardalgError | None) -> bool:
    return isinstance(err, IllegalSharding) and err.span is None


_SCRATCH: list[Path] = []  # one folder for the run's chip files and pictures


def _scratch() -> Path:
    if not _SCRATCH:
        _SCRATCH.append(Path(tempfile.mkdtemp(prefix="shardalg-fuzz-")))
    return _SCRATCH[0]


def _chip(data: bytes) -> float:
    """Read ``data`` as a chip file (as ``--hw FILE.toml`` does) and price one collective on the chip."""
    path = _scratch() / "chip.toml"
    path.write_bytes(data)
    chip = chip_from_text(str(path))
    return cost("AllGather_X(A[I_X, J])", mesh=Mesh(X=4), sizes="I=64,J=64", hw=chip).seconds


@contextmanager
def _without(modules: tuple[str, ...]) -> Iterator[None]:
    """``import m`` fails for each of ``modules`` (installed or not) inside the block."""
    saved = {m: sys.modules[m] for m in modules if m in sys.modules}
    sys.modules.update(dict.fromkeys(modules))
    try:
        yield
    finally:
        for m in modules:
            del sys.modules[m]
        sys.modules.update(saved)


def _extras(program: Program, mesh: Mesh, sizes: dict[str, int]) -> list[str]:
    """The JAX and torch checks and a drawing of the program without their extras: each must refuse with a
    shardalg error (the list of their classes is returned); anything else escapes as a failure."""
    from shardalg.export.jax import check_jax
    from shardalg.export.torch_check import check_torch
    from shardalg.pictures.grids import draw_show

    refused = []
    with _without(EXTRAS):
        for attempt in (
            lambda: check_jax(program, mesh, sizes=sizes),
            lambda: check_torch(program, mesh, sizes=sizes),
            lambda: draw_show(text(program), mesh, _scratch() / "x.png", sizes=sizes),
        ):
            try:
                attempt()
            except ShardalgError as err:
                refused.append(type(err).__name__)
    return refused


def run_stages(
    source: str,
    kind: str,
    setting: Callable[[Program], Setting],
    tally: Tally,
    limit: float = STAGE_SECONDS,
    chip_file: bytes | None = None,
) -> None:
    """Run every stage on ``source`` (drawn from the start rule ``kind``); ``setting`` picks the mesh and the
    sizes for the parsed program; ``chip_file``, when given, is read as a chip. Everything is recorded in
    ``tally``. The setting replaces the program's own mesh and sizes on purpose: the notes saying so
    (:class:`~shardalg.errors.NoteWarning`) are expected, and not shown."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoteWarning)
        _run_stages(source, kind, setting, tally, limit, chip_file)


def _run_stages(
    source: str,
    kind: str,
    setting: Callable[[Program], Setting],
    tally: Tally,
    limit: float,
    chip_file: bytes | None,
) -> None:
    tally.inputs[kind] += 1
    run = _Run(source, tally, limit)
    if chip_file is not None:
        run.stage("chip", lambda: _chip(chip_file))

    def parse_all() -> Program:
        if kind != "program":
            _parse_as(kind)(source)
        return parse(source)

    program, _, _ = run.stage("parse", parse_all)
    if program is None:
        return
    tally.parsed += 1
    run.mesh, run.sizes = setting(program)
    mesh, sizes = run.mesh, run.sizes
    bad, _, _ = run.stage("print", lambda: _printed(program))
    if bad:
        run.fail("roundtrip", "print", f"{', '.join(bad)} printing does not read back")
    found, err, ok = run.stage("check", lambda: (check(program, mesh, sizes), notes(program, mesh, sizes)))
    if err is not None or not ok:
        return  # over a limit (every later stage refuses the same way), or a failure already recorded
    if len(program.statements) == 1 and isinstance(program.statements[0], Tensor):
        run.stage("shape", lambda: str(shape(program, mesh, sizes)))
    numeric = mesh is not None and mesh.is_numeric
    for stmt in program.statements[:STATEMENTS_PLANNED]:
        if isinstance(stmt, Tensor):
            continue
        one = Program((stmt,), program.mesh, program.sizes, source=program.source)
        verdict, err, ok = run.stage("check", lambda one=one: check(one, mesh, sizes))
        if err is not None or not ok:
            continue  # the whole program's check passed: a failure here is recorded as one
        legal = not verdict
        found_plans, err, ok = run.stage("plans", lambda one=one: plans(one, mesh, sizes))
        if isinstance(err, IllegalSharding) and legal:
            run.fail("disagree", "plans", f"check says legal, plan says {err.rule}: {err.message}")
        if found_plans is not None and not legal:
            run.fail("disagree", "plans", "check says illegal, yet plan planned it")
        if isinstance(err, NoPlan) and legal:
            tally.noplan_after_legal += 1
            if len(tally.noplan_examples) < 10:
                tally.noplan_examples.append(f"{text(stmt)} on {mesh!r}")
        if _spanless(err):
            run.fail("no-span", "plans", f"{err.rule}: {err.message}")
        if found_plans and numeric:  # by seconds on a chip: the planner's search under each overlap policy
            policy = POLICIES[tally.runs["ranked"] % len(POLICIES)]
            bound = _bound_sizes(stmt, mesh, sizes)
            ranked, _, _ = run.stage(
                "ranked",
                lambda one=one, policy=policy, bound=bound: ranked_plans(
                    one, mesh, bound, hw="tpu-v5p", overlap=policy
                ),
            )
            if ranked is not None and not ranked:
                run.fail(
                    "disagree", "ranked", f"plans found {len(found_plans)} plans, by seconds ({policy}) none"
                )
        for p in (found_plans or [])[:PLANS_RUN]:
            if numeric:
                result, _, _ = run.stage("run_plan", lambda p=p: run_plan(p, mesh, sizes))
                if result is not None and not result.ok:
                    run.fail("wrong", "run_plan", f"{p.note}: {result.problem or result.max_error}")
            run.stage(
                "cost",
                lambda p=p: (
                    plan_cost(p, mesh, sizes, hw="tpu-v5p").seconds,
                    plan_cost(p, mesh, sizes).total,
                ),
            )
    if numeric:
        refused, _, _ = run.stage("extras", lambda: _extras(program, mesh, sizes))
        if refused is not None and len(refused) != 3:
            run.fail("wrong", "extras", f"without {', '.join(EXTRAS)}, only {len(refused)} of 3 refused")
    if mesh is not None:
        run.stage("cost", lambda: cost(program, mesh, sizes).total)
        if any(_has_product(s) for s in program.statements):
            defer = tally.runs["backward"] % 2 == 1  # every other program's reductions deferred
            derived, _, _ = run.stage(
                "backward", lambda: _printed_backward(backward(program, mesh, sizes, defer_reductions=defer))
            )
            if derived is not None:
                report, _, _ = run.stage(
                    "verify", lambda: verify(program, derived.program(), mesh, sizes, defer_reductions=defer)
                )
                if report is not None and not report.ok:
                    run.fail("wrong", "verify", f"defer_reductions={defer}: {report}"[:2000])


def _printed_backward(bw: Any) -> Any:
    """The derived backward, printed once (its text is part of the stage)."""
    str(bw)
    return bw
