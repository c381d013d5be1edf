"""The lookup's gradient (:mod:`shardalg.models.lookup`) run on numbers: each way the planner may pick, the
reduction of the partial sums or the gather of the tokens' cotangent, executed step by step on a virtual mesh
(:mod:`shardalg.numeric.execute`), with the scatter-add done on each device's own buffers between the steps,
ends in the table's layout holding the dense gradient ``dW[v] = Σ_{tokens with id v} dIn[token]``."""

from __future__ import annotations

import numpy as np
import pytest

from shardalg.algebra.mesh import Mesh
from shardalg.models.lookup import LookupGradient, lookup_gradients
from shardalg.models.program import model_program
from shardalg.notation.syntax import Tensor
from shardalg.numeric.execute import VirtualMesh, apply_step, shard, unshard

HEAD = "params W; embeddings E; tokens B, T; layers L\n"


def _scatter_add(ids: np.ndarray, d_in: np.ndarray, rows: int) -> np.ndarray:
    """Each token's cotangent row added into the table's row of its id (``dIn`` is ``[B, T, D]``)."""
    out = np.zeros((rows, d_in.shape[-1]))
    np.add.at(out, ids.reshape(-1), d_in.reshape(-1, d_in.shape[-1]))
    return out


def _run(g: LookupGradient, held: Tensor, mesh: str, sizes: dict[str, int], seed: int = 0) -> None:
    """Run ``g``'s plan on random ids and cotangents (``held``: the layer input's layout, ``[B, T, D]``) and
    check its result against the dense scatter-add."""
    vm = VirtualMesh(Mesh(mesh))
    rng = np.random.default_rng(seed)
    b, t, d, v = sizes["B"], sizes["T"], sizes["D"], sizes["V"]
    ids = rng.integers(0, v, size=(b, t))
    d_in = rng.standard_normal((b, t, d))
    expected = _scatter_add(ids, d_in, v)
    steps = list(g.plan.steps)
    if g.gathered:
        cot, start = g.plan.inputs
        assert cot.dims == held.dims
        bufs = shard(d_in, cot, vm)
        while steps and steps[0].inputs[0].name == cot.name:  # the gather of the tokens' cotangent
            bufs = apply_step(steps.pop(0), [bufs], vm, sizes)[0]
        assert all(x.shape[:2] == (b, t) for x in bufs.values())  # every token on every device
        # each device adds every token's row (the ids go with the cotangent), its block of D as the input's
        bufs = {c: _scatter_add(ids, x, v) for c, x in bufs.items()}
    else:
        # each device adds its own tokens: their cotangent and ids as the layer input lays them out
        start = g.partial
        mine, my_ids = shard(d_in, held, vm), shard(ids.astype(float), Tensor("Ids", held.dims[:-1]), vm)
        bufs = {c: _scatter_add(my_ids[c].astype(int), mine[c], v) for c in vm.coords}
    local = tuple(n // vm.size(dim.axes) for n, dim in zip((v, d), start.dims, strict=True))
    assert all(x.shape == local for x in bufs.values())  # the layout the plan's steps start from
    for s in steps:
        bufs = apply_step(s, [bufs], vm, sizes)[0]
    np.testing.assert_allclose(unshard(bufs, g.plan.output, vm), expected, rtol=1e-9, atol=1e-9)


CASES = [
    # (program's table and input, mesh, sizes, the way expected, the plan's ops)
    ("E[V, D]", "In[B_X, T, D]", "X=2", {"B": 2, "T": 2, "D": 4, "V": 16}, True, ["AllGather"]),
    ("E[V, D]", "In[B_X, T, D]", "X=2", {"B": 8, "T": 4, "D": 4, "V": 2}, False, ["AllReduce"]),
    ("E[V, D_X]", "In[B_X, T, D]", "X=2", {"B": 2, "T": 2, "D": 4, "V": 16}, True, ["AllGather", "Slice"]),
    ("E[V, D_X]", "In[B_X, T, D]", "X=2", {"B": 8, "T": 4, "D": 4, "V": 2}, False, ["ReduceScatter"]),
    ("E[V_X, D]", "In[B_X, T, D]", "X=2", {"B": 2, "T": 2, "D": 4, "V": 16}, True, ["AllGather", "Slice"]),
    (
        "E[V, D]",
        "In[B_X, T_Y, D]",
        "X=2,Y=2",
        {"B": 2, "T": 2, "D": 4, "V": 16},
        True,
        ["AllGather"],
    ),
    (
        "E[V, D]",
        "In[B_X, T, D_Y]",
        "X=2,Y=2",
        {"B": 2, "T": 2, "D": 4, "V": 16},
        True,
        ["AllGather", "AllGather"],
    ),
]


@pytest.mark.parametrize(("table", "layer_in", "mesh", "sizes", "gathered", "ops"), CASES)
def test_each_way_computes_the_table_gradient(table, layer_in, mesh, sizes, gathered, ops):
    out = layer_in.replace("In[", "Out[").replace("D]", "F]").replace("D_Y]", "F]")
    text = f"{HEAD}{table}\n{layer_in} * W[D, F] -> {out}"
    m = model_program(text, mesh=mesh, sizes={**sizes, "F": 4, "L": 2})
    (g,) = lookup_gradients(m)
    assert g.gathered is gathered
    assert [s.op.value for s in g.plan.steps] == ops
    _run(g, m.values[g.input].tensor, mesh, sizes)
