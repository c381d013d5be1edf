"""Running audits: jobs from the user's inputs, the jax subprocess, and the :class:`Audit` of each.

:func:`audit_file` audits ``FILE.py:FUNCTION`` with inputs written in the notation (``x[B_X, D]``, sizes from
``sizes``): the function is traced and compiled in a subprocess with ``mesh.devices`` CPU devices
(``--xla_force_host_platform_device_count``), so this process's jax, if any, is untouched; several audits
share one subprocess (:func:`audit_files`). :func:`audit` does the same for a function and jax inputs with
``NamedSharding``\\ s in this process, on the devices its jax already has.
"""

from __future__ import annotations

import ast
import json
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shardalg import limits
from shardalg.algebra.mesh import Mesh, a_mesh, as_mesh
from shardalg.costs.costmodel import CostModel
from shardalg.errors import ShardalgError, UsageError
from shardalg.export.harness import require_extra, run_driver
from shardalg.notation.parse import parse
from shardalg.notation.syntax import Tensor

from .program import build
from .records import AuditProgram, Layout
from .trace import trace
from .verdict import BackwardVerdict, StatementVerdict, in_nodes, judge, judge_backward

__all__ = ["Audit", "AuditJob", "audit", "audit_file", "audit_files", "DEFAULT_CHIP"]

DEFAULT_CHIP = "tpu-v5p"


@dataclass(frozen=True)
class AuditJob:
    """One function to audit: ``FILE.py`` and ``FUNCTION``, its inputs in the notation, with ``backward``
    also ``jax.grad`` of the sum of its output."""

    file: str
    function: str
    inputs: tuple[Tensor, ...]
    mesh: Mesh
    sizes: tuple[tuple[str, int], ...] = ()
    backward: bool = False

    @classmethod
    def of(
        cls,
        target: str,
        inputs: Sequence[Tensor | str],
        mesh: Mesh | str,
        sizes: Mapping[str, int] | None = None,
        *,
        backward: bool = False,
    ) -> AuditJob:
        """A job from ``FILE.py:FUNCTION``, the inputs in the notation, the mesh and the dims' sizes."""
        file, sep, function = str(target).rpartition(":")
        if not sep or not file or not function:
            raise UsageError(f"an audit target is FILE.py:FUNCTION, not {target!r}")
        _defines(file, function)
        m = a_mesh(mesh, "an audit job")
        limits.require(
            "devices",
            m.devices,
            f"the mesh {', '.join(f'{a.name}={a.size}' for a in m)} (one CPU device each)",
        )
        return cls(file, function, _input_tensors(inputs), m, tuple(sorted((sizes or {}).items())), backward)


@dataclass
class Audit:
    """What an audit found: the program, XLA's steps, the verdict per statement and (with ``backward``) the
    backward pairs; ``chip`` and ``notes`` say what was assumed."""

    name: str
    program: AuditProgram
    verdicts: list[StatementVerdict]
    backward: BackwardVerdict | None
    chip: str
    chip_default: bool
    notes: list[str]

    @property
    def flagged(self) -> list[StatementVerdict]:
        return [v for v in self.verdicts if v.flagged]


def _defines(file: str, function: str) -> None:
    """Refuse, before any jax process starts, a file that is missing or unparsable or that defines no
    top-level ``function`` (a ``def``, a class, an assignment or an import of that name)."""
    path = Path(file)
    if not path.is_file():
        raise UsageError(f"no such file: {file}")
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=file)
    except (SyntaxError, UnicodeDecodeError, ValueError) as err:
        raise UsageError(f"{file} is not Python that parses: {err}") from None
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    if function not in names:
        defs = sorted(n.name for n in tree.body if isinstance(n, ast.FunctionDef))
        raise UsageError(
            f"{file} has no function {function!r} at its top level (it defines: {', '.join(defs) or 'none'})"
        )


def _input_tensors(inputs: Sequence[Tensor | str]) -> tuple[Tensor, ...]:
    out = []
    for x in inputs:
        if isinstance(x, Tensor):
            out.append(x)
            continue
        prog = parse(str(x))
        found = [s for s in prog.statements if isinstance(s, Tensor)]
        if len(found) != len(prog.statements) or not found:
            raise UsageError(f"an audit input is a tensor such as x[B_X, D], not {x!r}")
        out.extend(found)
    return tuple(out)


def _job_json(job: AuditJob) -> dict[str, Any]:
    mesh, sizes = job.mesh, dict(job.sizes)
    inputs = []
    for t in job.inputs:
        if t.unreduced:
            raise UsageError(f"input {t.name}: a jax array is never unreduced ({{U_...}})")
        shape = []
        for d in t.dims:
            if d.size is not None:
                shape.append(d.size)
            elif d.name in sizes:
                shape.append(int(sizes[d.name]))
            else:
                raise UsageError(
                    f"input {t.name}: the size of dim {d.name} is not given", fix=f"--sizes {d.name}=..."
                )
            for a in d.axes:
                if a not in mesh.names:
                    raise UsageError(
                        f"input {t.name}: the mesh has no axis {a} (it has {', '.join(mesh.names)})"
                    )
            n = mesh.group_size(d.axes)
            if shape[-1] % n:
                raise UsageError(
                    f"input {t.name}: dim {d.name} of {shape[-1]} does not divide over the {n} devices of "
                    f"{''.join(d.axes)}"
                )
        dtype = {"bf16": "bfloat16", "fp32": "float32", "f32": "float32"}.get(
            str(getattr(t.dtype, "value", t.dtype) or "fp32").lower(), "float32"
        )
        inputs.append({"shape": shape, "dtype": dtype, "spec": [list(d.axes) for d in t.dims]})
    return {
        "file": str(Path(job.file).resolve()),
        "function": job.function,
        "mesh": {"names": list(mesh.names), "sizes": [a.size for a in mesh]},
        "inputs": inputs,
        "backward": job.backward,
    }


def run_jobs(jobs: list[dict[str, Any]], devices: int, timeout: float = 600.0) -> list[dict[str, Any]]:
    """Trace every job in one jax subprocess with ``devices`` CPU devices."""
    require_extra("jax", "jax", "an audit")
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}".strip()
    env["JAX_PLATFORMS"] = "cpu"
    with tempfile.TemporaryDirectory(prefix="shardalg-audit-") as tmp:
        driver = "import sys\nfrom shardalg.audit.driver import main\nmain(sys.argv[1:])\n"
        proc = run_driver(Path(tmp), driver, jobs, env=env, timeout=timeout)
    for line in proc.stdout.splitlines():
        if line.startswith("SHARDALG-AUDIT "):
            return json.loads(line[len("SHARDALG-AUDIT ") :])
    raise UsageError(f"the audit's jax process did not run (exit {proc.returncode}):\n{proc.stderr[-2000:]}")


def _finish(
    name: str,
    rec: dict[str, Any],
    names: Sequence[str],
    given: Sequence[Layout | None],
    costs: CostModel,
    chip: str,
    chip_default: bool,
) -> Audit:
    prog = build(rec, names, given)
    notes = list(prog.notes)
    notes += in_nodes(Mesh(prog.mesh), costs)[1]  # seconds priced on the mesh placed into a GPU chip's nodes
    if chip_default:
        notes.append(f"priced on {chip} (the default chip; --hw to choose)")
    back = judge_backward(prog, rec) if "backward_hlo" in rec else None
    return Audit(name, prog, judge(prog, costs), back, chip, chip_default, notes)


def _layout(t: Tensor) -> Layout:
    return Layout(t.name or "?", tuple((d.name or "?", tuple(d.axes)) for d in t.dims))


def audit_files(
    jobs: Sequence[AuditJob], *, hw: object = None, overlap: object = None
) -> list[Audit | ShardalgError]:
    """Audit every job in one subprocess (as many CPU devices as the largest mesh); a job that fails is its
    error, the others still run."""
    costs = CostModel.of(hw or DEFAULT_CHIP, None, overlap)
    chip = str(getattr(costs.chip, "name", hw or DEFAULT_CHIP))
    payload = [_job_json(j) for j in jobs]
    runs = run_jobs(payload, max(j.mesh.devices for j in jobs))
    out: list[Audit | ShardalgError] = []
    for job, run in zip(jobs, runs, strict=True):
        if not run["ok"]:
            out.append(UsageError(f"{job.file}:{job.function}: {run['error']}"))
            continue
        names = [t.name or f"in{k}" for k, t in enumerate(job.inputs)]
        given = [_layout(t) for t in job.inputs]
        try:
            out.append(
                _finish(f"{job.file}:{job.function}", run["record"], names, given, costs, chip, hw is None)
            )
        except ShardalgError as err:
            out.append(err)
    return out


def audit_file(
    target: str,
    inputs: Sequence[Tensor | str],
    mesh: Mesh | str,
    sizes: Mapping[str, int] | None = None,
    *,
    backward: bool = False,
    hw: object = None,
    overlap: object = None,
) -> Audit:
    """Audit ``FILE.py:FUNCTION`` (see the module docstring); a failure is a :class:`ShardalgError`."""
    m = as_mesh(mesh)
    if m is None:
        raise UsageError("an audit needs a mesh: --mesh X=2,Y=4")
    job = AuditJob.of(target, inputs, m, sizes, backward=backward)
    (result,) = audit_files([job], hw=hw, overlap=overlap)
    if isinstance(result, ShardalgError):
        raise result
    return result


def audit(
    fn: Callable[..., Any],
    *args: Any,
    names: Sequence[str] | None = None,
    backward: bool = False,
    hw: object = None,
    overlap: object = None,
) -> Audit:
    """Audit ``fn`` on jax inputs (arrays or ``jax.ShapeDtypeStruct``\\ s with ``NamedSharding``\\ s) in this
    process; dims are lettered in order of use, inputs named ``names`` (default: ``in0``, ``in1``, ...)."""
    require_extra("jax", "jax", "an audit")
    rec = trace(fn, args, backward=backward)
    names = list(names) if names is not None else [f"in{k}" for k in range(len(args))]
    chip = hw or DEFAULT_CHIP
    return _finish(
        getattr(fn, "__name__", "function"),
        rec,
        names,
        [],
        CostModel.of(chip, None, overlap),
        chip,
        hw is None,
    )
