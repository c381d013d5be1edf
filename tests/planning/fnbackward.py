"""Running a derived backward on numbers: the dense forward of a program with products and functions, each
gradient statement's plan on the executor's virtual mesh, and the dense loss for finite differences.

Values are kept by name: a gradient statement reads the forward's values (by their global value's name) and the
cotangents made so far (by their own names), and writes its output's name (an added contribution's plan reads the gradient so far and writes the sum)."""

from __future__ import annotations

import numpy as np

from shardalg.notation.plan import Step
from shardalg.numeric.devices import VirtualMesh
from shardalg.numeric.execute import run_plan
from shardalg.numeric.movement import DENSE
from shardalg.planning.backward import BackwardProgram
from shardalg.planning.forward import Call, Forward, grad_name


def dense_forward(fw: Forward, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every global value of the program, by name, from the dense inputs."""
    vals = dict(inputs)
    for node in fw.nodes:
        if isinstance(node, Call):
            a = node.apply
            # its flags too: a causal softmax masks (dropping them differentiated the unmasked one)
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
        vals[node.roots[2]] = np.einsum(spec, vals[node.roots[0]], vals[node.roots[1]])
    return vals


def loss(fw: Forward, inputs: dict[str, np.ndarray], seeds: dict[str, np.ndarray]) -> float:
    vals = dense_forward(fw, inputs)
    return sum(float(np.vdot(seeds[r], vals[r])) for r in fw.outputs)


def shape_of(t, sizes: dict[str, int]) -> tuple[int, ...]:
    return tuple(sizes[d] for d in t.dim_names)


def run_backward(
    bw: BackwardProgram,
    fw: Forward,
    inputs: dict[str, np.ndarray],
    seeds: dict[str, np.ndarray],
    sizes: dict[str, int],
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """The gradient of each program input, from the backward's plans run on the executor."""
    vals = dense_forward(fw, inputs)
    named = {name: vals[root] for name, root in fw.root.items()}
    named |= {grad_name(r): s for r, s in seeds.items()}
    for g in bw.grads:
        given = {t: named[t.name] for t in g.plan.inputs}
        res = run_plan(g.plan, bw.mesh, sizes, rng, inputs=given)
        assert res.ok, str(res)
        out = g.plan.output.name
        named[out] = res.output  # an added contribution's plan reads the gradient so far: the sum
    return {r: named[bw.gradient(r).name] for r in fw.inputs}


def check_against_finite_differences(
    bw: BackwardProgram, fw: Forward, sizes: dict[str, int], seed: int = 0, tries: int = 2
) -> dict[str, np.ndarray]:
    """Run the backward and compare each input's gradient with a central difference of the dense loss along
    random directions (h = 1e-5: exact to about 1e-9 relative for these smooth functions)."""
    rng = np.random.default_rng(seed)
    inputs = {r: rng.standard_normal(shape_of(fw.origin[r], sizes)) for r in fw.inputs}
    seeds = {r: rng.standard_normal(shape_of(fw.latest[r], sizes)) for r in fw.outputs}
    grads = run_backward(bw, fw, inputs, seeds, sizes, rng)
    h = 1e-5
    for r in fw.inputs:
        for _ in range(tries):
            delta = rng.standard_normal(inputs[r].shape)
            up = loss(fw, inputs | {r: inputs[r] + h * delta}, seeds)
            down = loss(fw, inputs | {r: inputs[r] - h * delta}, seeds)
            numeric = (up - down) / (2 * h)
            derived = float(np.vdot(grads[r], delta))
            assert abs(numeric - derived) <= 1e-6 * max(1.0, abs(numeric)), (r, numeric, derived)
    return grads
