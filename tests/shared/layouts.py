"""Random shardings on random meshes, and every legal single step from a sharding (outputs computed from
the rules of the common contract, independently of the executor), for the executor's and the operators'
properties."""

from __future__ import annotations

import itertools

from hypothesis import strategies as st

from shardalg.algebra.mesh import Mesh
from shardalg.notation.plan import Step
from shardalg.notation.syntax import Dim, Op, Tensor
from shardalg.numeric.execute import is_zero_pad

AXES = ("X", "Y", "Z")
DIMS = ("I", "J", "K")


@st.composite
def sharded(draw: st.DrawFn, max_rank: int = 3) -> tuple[Mesh, Tensor]:
    """A mesh of 1-3 axes of sizes 1-4 and a legal tensor of rank 1-3 on it (multi-axis dims, U axes)."""
    n = draw(st.integers(1, 3))
    mesh = Mesh(dict(zip(AXES, draw(st.lists(st.integers(1, 4), min_size=n, max_size=n)), strict=False)))
    return mesh, draw(laid_out(mesh, draw(st.integers(1, max_rank))))


@st.composite
def laid_out(draw: st.DrawFn, mesh: Mesh, rank: int) -> Tensor:
    """A legal tensor ``A`` of ``rank`` dims (``I``, ``J``, ``K``) on ``mesh``: each axis shards a dim,
    makes it unreduced or is unused, in a random order (multi-axis dims)."""
    dims: list[list[str]] = [[] for _ in range(rank)]
    unreduced = []
    for a in draw(st.permutations(mesh.names)):
        where = draw(st.integers(-2, rank - 1))  # -2: replicated, -1: unreduced, else the dim it shards
        if where >= 0:
            dims[where].append(a)
        elif where == -1:
            unreduced.append(a)
    return Tensor("A", tuple(Dim(d, tuple(ax)) for d, ax in zip(DIMS, dims, strict=False)), tuple(unreduced))


def _with(t: Tensor, dims: list[tuple[str, ...]], unreduced: list[str]) -> Tensor:
    return Tensor(t.name, tuple(d.with_axes(a) for d, a in zip(t.dims, dims, strict=True)), tuple(unreduced))


def candidate_steps(mesh: Mesh, t: Tensor) -> list[Step]:
    """Every legal single-op step from ``t`` (zero-pads too), outputs computed from the rules of the
    common contract, independently of the executor."""
    dims = [d.axes for d in t.dims]
    u = list(t.unreduced)
    free = [a for a in mesh.names if a not in t.used_axes]
    out: list[Step] = []
    for cut in itertools.product(*[range(len(d) + 1) for d in dims]):
        axes = tuple(a for d, k in zip(dims, cut, strict=True) for a in d[len(d) - k :])
        if axes:
            new = [d[: len(d) - k] for d, k in zip(dims, cut, strict=True)]
            out.append(Step(Op.ALL_GATHER, (t,), _with(t, new, u), axes))
    for i, d in enumerate(dims):
        for k in range(1, len(d) + 1):
            moved = d[len(d) - k :]
            new = list(dims)
            new[i] = d[: len(d) - k]
            out.append(
                Step(Op.SLICE, (t,), _with(t, new, u + list(moved)), moved, t.dims[i].label)
            )  # zero-pad
            for j in range(len(dims)):
                if j != i:
                    a2a = list(new)
                    order = moved[::-1] if len(moved) > 1 and j % 2 else moved
                    a2a[j] = dims[j] + order
                    out.append(Step(Op.ALL_TO_ALL, (t,), _with(t, a2a, u), order, t.dims[j].label))
    if u:
        for k in range(1, len(u) + 1):
            sub = tuple(u[:k])
            rest = u[k:]
            out.append(Step(Op.ALL_REDUCE, (t,), _with(t, dims, rest), sub))
            for j in range(len(dims)):
                new = list(dims)
                new[j] = dims[j] + sub
                out.append(Step(Op.REDUCE_SCATTER, (t,), _with(t, new, rest), sub, t.dims[j].label))
    if free:
        for j in range(len(dims)):
            new = list(dims)
            new[j] = dims[j] + tuple(free)
            out.append(Step(Op.SLICE, (t,), _with(t, new, u), tuple(free), t.dims[j].label))
    names = mesh.names
    for x in range(len(names)):
        for y in range(x + 1, len(names)):
            a, b = names[x], names[y]
            sw = {a: b, b: a}
            new = [tuple(sw.get(z, z) for z in d) for d in dims]
            nu = [sw.get(z, z) for z in u]
            sizes_ok = [mesh.group_size(d) for d in dims] == [mesh.group_size(d) for d in new]
            if sizes_ok and mesh.group_size(u) == mesh.group_size(nu):
                out.append(Step(Op.PERMUTE, (t,), _with(t, new, nu), (a, b)))
    for a in names:  # a ring shift along any axis, by +1 or -2: the layout stays
        for k in (1, -2):
            out.append(Step(Op.SHIFT, (t,), t, (a,), offset=k))
    return out


@st.composite
def random_steps(draw: st.DrawFn) -> tuple[Mesh, Step, dict[str, int]]:
    mesh, t = draw(sharded())
    by_kind: dict[str, list[Step]] = {}
    for s in candidate_steps(mesh, t):  # draw the kind of op first, so rare ones (Permute) come up
        by_kind.setdefault(("ZeroPad" if is_zero_pad(s) else s.op.value), []).append(s)
    if not by_kind:
        return mesh, Step(Op.SLICE, (t,), t, (), t.dims[0].label), {}
    step = draw(st.sampled_from(by_kind[draw(st.sampled_from(sorted(by_kind)))]))
    sizes = {}
    for d, e in zip(step.inputs[0].dims, step.output.dims, strict=True):
        sizes[d.label] = mesh.group_size(set(d.axes) | set(e.axes)) * draw(st.integers(1, 2))
    return mesh, step, sizes
