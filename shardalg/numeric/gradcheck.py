"""The derived backward checked against the forward's derivative, on numbers.

The executor (:mod:`.execute`) shows that each of the backward's plans computes its statement: the gradient
einsum, planned, equals the dense one. That does not show the statements are the forward's derivative. Here
they are held against it, with nothing of the derivation in the reference:

- the forward runs densely on random inputs (float64): each product an einsum, each function its dense
  value (:data:`.movement.DENSE`), a collective statement the identity on the global value;
- the loss is ``sum over outputs of <seed, output>`` for random seeds (the cotangents the backward starts
  from);
- the backward's plans run on the executor's per-device buffers, one flow in order (the forward plans whose
  statistics it reads first: a ring core's log-sum-exp), each gradient reassembled from its shards;
- for each input and each of ``tries`` random directions ``v``: the loss's central difference along ``v``
  (step ``h = 1e-5``) against ``<gradient, v>``. For the smooth functions here the difference is exact to
  about 1e-9 relative; a relative error over 1e-6 fails, beyond what rounding may move the difference by
  (:data:`ROUNDING`: nothing at small sizes).

Sizes: those given (or the program's ``where``), and for every other dim a small one divisible by the axes
that shard it (:func:`.devices.default_sizes`), said in :attr:`GradCheck.defaulted`. A plan's choice never
changes what it computes, so a backward derived without sizes is checked at those.

    >>> from shardalg.planning.backward import backward
    >>> gradcheck(backward("In[B_X, D] * W[D, F_X] -> Out[B_X, F]", "X=4")).ok
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from shardalg import limits
from shardalg.algebra.context import tensors_of
from shardalg.algebra.factors import is_subaxis
from shardalg.algebra.subaxes import axes_in, mesh_is_fine, names_subaxes, refine
from shardalg.errors import UsageError
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Tensor
from shardalg.planning.backward_program import BackwardProgram
from shardalg.planning.forward import Call, Forward, analyze, grad_name

from .devices import VirtualMesh, default_sizes, unshard
from .execute import execute_plan, place_inputs
from .movement import DENSE

__all__ = ["GradCheck", "Probe", "gradcheck", "dense_forward", "loss", "run_backward", "TOLERANCE", "STEP"]

STEP = 1e-5  # the central difference's step
TOLERANCE = 1e-6  # the largest relative error a probe may have (beyond rounding)
# A loss evaluated in float64 is off by at most about (its terms) x eps x (the sum of its terms' magnitudes); a
# central difference divides two such errors by 2h. A probe may differ by ROUNDING x eps x that sum / h more:
# at small sizes nothing, at B=256, D=1024, F=4096 about 0.4 against a difference of about 1e5
ROUNDING = 1e3
EPS = float(np.finfo(np.float64).eps)
# the inputs' scales tried, in order, until the forward is finite there (:func:`_finite_point`)
SCALES = (1.0, 1 / 4, 1 / 16, 1 / 64)


@dataclass(frozen=True)
class Probe:
    """One direction's comparison for one input: the loss's central difference along it and the derived
    gradient's inner product with it."""

    input: str
    numeric: float
    derived: float
    rounding: float = 0.0  # what rounding may move the central difference by (see ``ROUNDING``)

    @property
    def error(self) -> float:
        """``|numeric - derived| / max(1, |numeric|)``."""
        return abs(self.numeric - self.derived) / max(1.0, abs(self.numeric))

    @property
    def ok(self) -> bool:
        """Within ``TOLERANCE`` relative, beyond what rounding may move the central difference by."""
        return abs(self.numeric - self.derived) <= TOLERANCE * max(1.0, abs(self.numeric)) + self.rounding


@dataclass(frozen=True)
class GradCheck:
    """How the derived backward fared against the forward's derivative: every probe, and the sizes it ran at
    (``defaulted``: the dims whose size was not given)."""

    probes: tuple[Probe, ...]
    sizes: tuple[tuple[str, int], ...]
    defaulted: tuple[str, ...]
    seed: int
    scale: float = 1.0  # the inputs' scale: below 1 where the forward overflowed at unit normal inputs

    @property
    def max_error(self) -> float:
        return max((p.error for p in self.probes), default=0.0)

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.probes)

    def __bool__(self) -> bool:
        return self.ok

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.input for p in self.probes))

    def sizes_text(self) -> str:
        """``B=8,D=12 (defaults: D)``: the sizes it ran at, and which were not given."""
        text = ",".join(f"{k}={v}" for k, v in self.sizes)
        return text + (f" (not given: {','.join(self.defaulted)})" if self.defaulted else "")

    def __str__(self) -> str:
        tries = len(self.probes) // max(1, len(self.inputs))
        scaled = (
            f", inputs scaled by {self.scale:g} (at unit normal inputs the forward is not finite)"
            if self.scale != 1.0
            else ""
        )
        what = (
            f"the gradients of {', '.join(self.inputs)} against central differences of the forward "
            f"({tries} random direction{'s' if tries != 1 else ''} each, sizes {self.sizes_text()}, seed "
            f"{self.seed}{scaled})"
        )
        if self.ok:
            return f"derivative: ok, {what}, max relative error {self.max_error:.2g}"
        worst = max((p for p in self.probes if not p.ok), key=lambda p: p.error)
        return (
            f"derivative: FAILED, {what}: d{worst.input} along a direction gives {worst.derived:.6g}, the "
            f"forward's difference {worst.numeric:.6g} (relative error {worst.error:.2g}, over {TOLERANCE:g})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "max_error": self.max_error,
            "tolerance": TOLERANCE,
            "step": STEP,
            "seed": self.seed,
            "input_scale": self.scale,
            "sizes": dict(self.sizes),
            "defaulted": list(self.defaulted),
            "probes": [
                {
                    "input": p.input,
                    "numeric": p.numeric,
                    "derived": p.derived,
                    "error": p.error,
                    "rounding": p.rounding,
                    "ok": p.ok,
                }
                for p in self.probes
            ],
        }


def _shape(t: Any, sizes: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(sizes[d] for d in t.dim_names)


def dense_forward(fw: Forward, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every global value of ``fw``'s program, by name, from the dense inputs (a collective statement names
    the same global value: nothing to run)."""
    vals = dict(inputs)
    for node in fw.nodes:
        if isinstance(node, Call):
            a = node.apply
            # its flags too: a causal softmax masks (dropping them differentiates the unmasked one)
            step = Step(a.op, node.operands, node.out, (), a.dim, factor=a.factor, flags=a.flags)
            args = [vals[r] for r in node.roots[:-1]]
            vals[node.roots[-1]] = np.asarray(DENSE[a.op](step, args, VirtualMesh(fw.mesh)))
            continue
        letters: dict[str, str] = {}
        for t in (node.left, node.right, node.out):
            for d in t.dim_names:
                letters.setdefault(d, chr(ord("a") + len(letters)))
        spec = ",".join("".join(letters[d] for d in t.dim_names) for t in (node.left, node.right))
        spec += "->" + "".join(letters[d] for d in node.out.dim_names)
        vals[node.roots[2]] = np.einsum(spec, vals[node.roots[0]], vals[node.roots[1]], optimize=True)
    return vals


def loss(fw: Forward, inputs: Mapping[str, np.ndarray], seeds: Mapping[str, np.ndarray]) -> float:
    """``sum over outputs of <seed, output>``: the scalar whose gradient the backward computes."""
    vals = dense_forward(fw, inputs)
    return sum(float(np.vdot(seeds[r], vals[r])) for r in fw.outputs)


def run_backward(
    bw: BackwardProgram,
    fw: Forward,
    inputs: Mapping[str, np.ndarray],
    seeds: Mapping[str, np.ndarray],
    sizes: Mapping[str, int],
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """The gradient of each input of ``fw``, from ``bw``'s plans run on the executor's per-device buffers as
    one flow, in order (the forward plans whose statistics it reads first: a ring core's blocks keep their
    log-sum-exp beside O, and one gradient's plan reads values another's made as K and V travel). A value no
    step made before is placed from the dense forward (by its global value's name) or the seeds (``dOut``); an
    added contribution's step reads the gradient so far and writes the sum under its name. A gradient no step
    makes (a cotangent passed on unchanged) is the value it names."""
    vals = dense_forward(fw, inputs)
    named = {name: vals[root] for name, root in fw.root.items()}
    named |= {grad_name(r): s for r, s in seeds.items()}
    steps = tuple(s for p in (*bw.runs_first, *(g.plan for g in bw.grads)) for s in p.steps)
    wanted = {r: bw.gradient(r) for r in fw.inputs}
    if not steps:
        return {r: named[t.name] for r, t in wanted.items()}
    made: set[Tensor] = set()
    reads: list[Tensor] = []
    for step in steps:
        reads.extend(t for t in step.inputs if t not in made and t not in reads)
        made.add(step.output)
    whole, mesh = Plan(tuple(reads), steps, steps[-1].output), bw.mesh
    if names_subaxes(whole) and not mesh_is_fine(mesh, whole):  # run on the mesh refined into its factors
        fine = refine(mesh, [a for a in axes_in(whole) if is_subaxis(a)])
        whole, mesh = fine.expand(whole), fine.fine
        wanted = {r: fine.expand(t) for r, t in wanted.items()}
    for t in whole.inputs:
        if t.name not in named:
            raise UsageError(
                f"the backward reads {t.name}, which neither the forward nor an earlier step made"
            )
    vm = VirtualMesh(mesh)
    placed = place_inputs(whole, vm, sizes, rng, {t: named[t.name] for t in whole.inputs})
    run = execute_plan(whole, vm, placed.buffers, placed.sizes)
    return {
        r: unshard(run.buffers[t], t, vm) if t in run.buffers else named[t.name] for r, t in wanted.items()
    }


def gradcheck(
    bw: BackwardProgram, sizes: Mapping[str, int] | None = None, *, seed: int = 0, tries: int = 2
) -> GradCheck:
    """``bw`` against central differences of its forward's loss along ``tries`` random directions per input
    (see the module's docstring); ``sizes`` beside the backward's own, small defaults for the rest."""
    if not isinstance(bw, BackwardProgram):
        raise UsageError(
            f"gradcheck takes a derived backward, not {type(bw).__name__}",
            fix="gradcheck(backward(program, mesh))",
        )
    if tries < 1:
        raise UsageError(f"a derivative check takes at least one direction per input, not {tries}")
    given = {**dict(bw.sizes), **dict(sizes or {})}
    tensors = tensors_of(bw.forward)
    dims = sorted({d for t in tensors for d in t.dim_names})
    # a default divides every axis a dim is sharded on anywhere: in the forward or in a step of the backward
    steps = [
        t
        for p in (*bw.runs_first, *(g.plan for g in bw.grads))
        for s in p.steps
        for t in (*s.inputs, s.output)
    ]
    run_at = {**default_sizes([*tensors, *steps], bw.mesh), **given}
    run_at = {d: run_at[d] for d in dims}  # a size given for no dim of the program is not used
    defaulted = tuple(d for d in dims if d not in given)
    for t in dict.fromkeys(tensors):  # the dense forward holds each value whole: refused up front
        limits.require("elements", prod(_shape(t, run_at)), lambda t=t: f"the dense value of {t.name or t}")
    fw = analyze(bw.forward, bw.mesh, dict(run_at))
    rng = np.random.default_rng(seed)
    drawn = {r: rng.standard_normal(_shape(fw.origin[r], run_at)) for r in fw.inputs}
    seeds = {r: rng.standard_normal(_shape(fw.latest[r], run_at)) for r in fw.outputs}
    used = tuple((d, run_at[d]) for d in dims)
    scale, inputs, vals = _finite_point(fw, drawn)
    grads = run_backward(bw, fw, inputs, seeds, run_at, rng)
    rounding = ROUNDING * EPS * sum(float(np.abs(seeds[r] * vals[r]).sum()) for r in fw.outputs) / STEP
    probes = []
    for r in fw.inputs:
        for _ in range(tries):
            v = rng.standard_normal(inputs[r].shape)
            v /= np.linalg.norm(
                v
            )  # a unit direction: the difference's truncation does not grow with the input's size
            up = loss(fw, {**inputs, r: inputs[r] + STEP * v}, seeds)
            down = loss(fw, {**inputs, r: inputs[r] - STEP * v}, seeds)
            probes.append(Probe(r, (up - down) / (2 * STEP), float(np.vdot(grads[r], v)), rounding))
    return GradCheck(tuple(probes), used, defaulted, seed, scale)


def _finite_point(
    fw: Forward, drawn: Mapping[str, np.ndarray]
) -> tuple[float, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The inputs to check at, their scale and the forward's values there: the unit normal inputs drawn,
    else those scaled down (:data:`SCALES`) until every value of the forward is finite (``exp(exp(V))`` at
    unit inputs overflows, and a difference of infinities says nothing of the backward: it was called
    FAILED). A UsageError when no scale gives finite values."""
    for scale in SCALES:
        inputs = {r: scale * x for r, x in drawn.items()}
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is found below, and said
            vals = dense_forward(fw, inputs)
        bad = next((name for name, v in vals.items() if not np.isfinite(v).all()), None)
        if bad is None:
            return scale, inputs, vals
    raise UsageError(
        f"the forward is not finite at random inputs, even scaled by {SCALES[-1]:g}: {bad} overflows, so "
        "central differences cannot check the backward",
        fix="check a program whose values stay finite (a chain of exp overflows at any input)",
    )
