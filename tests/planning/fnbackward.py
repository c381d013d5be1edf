"""Running a derived backward on numbers, for the tests: the product's own (:mod:`shardalg.numeric.gradcheck`:
the dense forward, the backward's plans on the executor, the loss), with the central-difference check as an
assertion that names the input and both numbers."""

from __future__ import annotations

import numpy as np

from shardalg.numeric.gradcheck import STEP, TOLERANCE, dense_forward, loss, run_backward
from shardalg.planning.backward import BackwardProgram
from shardalg.planning.forward import Forward

__all__ = ["check_against_finite_differences", "dense_forward", "loss", "run_backward", "shape_of"]


def shape_of(t, sizes: dict[str, int]) -> tuple[int, ...]:
    return tuple(sizes[d] for d in t.dim_names)


def check_against_finite_differences(
    bw: BackwardProgram, fw: Forward, sizes: dict[str, int], seed: int = 0, tries: int = 2
) -> dict[str, np.ndarray]:
    """Run the backward and compare each input's gradient with a central difference of the dense loss along
    random directions (exact to about 1e-9 relative for these smooth functions)."""
    rng = np.random.default_rng(seed)
    inputs = {r: rng.standard_normal(shape_of(fw.origin[r], sizes)) for r in fw.inputs}
    seeds = {r: rng.standard_normal(shape_of(fw.latest[r], sizes)) for r in fw.outputs}
    grads = run_backward(bw, fw, inputs, seeds, sizes, rng)
    for r in fw.inputs:
        for _ in range(tries):
            delta = rng.standard_normal(inputs[r].shape)
            up = loss(fw, inputs | {r: inputs[r] + STEP * delta}, seeds)
            down = loss(fw, inputs | {r: inputs[r] - STEP * delta}, seeds)
            numeric = (up - down) / (2 * STEP)
            derived = float(np.vdot(grads[r], delta))
            assert abs(numeric - derived) <= TOLERANCE * max(1.0, abs(numeric)), (r, numeric, derived)
    return grads
