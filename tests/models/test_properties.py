"""Laws of the memory accounting, on random shardings: a device's bytes times the devices cover every tensor
(exactly when nothing is replicated); one more axis never raises a parameter's bytes on a device; the largest
batch ``fit`` finds fits, and the next one does not."""

from __future__ import annotations

from math import prod

import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from shardalg.costs.chipspec import chip_from_text
from shardalg.errors import IndivisibleDim
from shardalg.models.fit import _intervals, largest, shard_group
from shardalg.models.memory import memory
from shardalg.models.program import resized
from shardalg.notation.printing import text
from shardalg.notation.syntax import Tensor
from shardalg.planning.symbolic import interval_text, piecewise
from tests.shared.strategies import tensors

AXES = ("X", "Y")
DIMS = ("I", "J", "K")
SIZES = "I=16,J=16,K=16"
NAMES = ("A", "W_in", "W_out")

meshes = st.tuples(st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 4])).map(lambda s: f"X={s[0]},Y={s[1]}")
param = tensors(axes=AXES, dims=DIMS, names=NAMES, anonymous=False, literal_sizes=False)


def _program(ts: list[Tensor]) -> str:
    return "\n".join([f"params {', '.join(t.name for t in ts)}", *(text(t) for t in ts)])


def _replication(t: Tensor, mesh: str) -> int:
    """The product of the sizes of the axes that shard no dim of ``t`` (replicated, unreduced, invariant)."""
    sizes = dict(part.split("=") for part in mesh.split(","))
    return prod(int(sizes[a]) for a in AXES if a not in t.sharded_axes)


@given(st.lists(param, min_size=1, max_size=3, unique_by=lambda t: t.name), meshes)
def test_bytes_per_device_times_devices_cover_every_tensor(ts, mesh):
    r = memory(_program(ts), mesh=mesh, sizes=SIZES, mode="infer")
    devices = int(r.model.devices)
    per_device = {name: int(b) for part, name, b, _ in r.rows if part == "params"}
    for t in ts:
        total = int(r.model.bytes_of(t, per_device=False))
        assert per_device[t.name] * devices >= total
        assert per_device[t.name] * devices == total * _replication(
            t, mesh
        )  # equal when nothing is replicated
    assert int(r.parts["params"]) * devices >= sum(int(r.model.bytes_of(t, per_device=False)) for t in ts)


@given(param, meshes, st.data())
def test_one_more_axis_never_raises_a_parameters_bytes(t, mesh, data):
    free = [a for a in AXES if a not in t.used_axes]
    if not free:
        return
    axis = data.draw(st.sampled_from(free))
    dim = data.draw(st.sampled_from(t.dim_names))
    more = t.with_axes(dim, (*t.axes_of(dim), axis))
    before = memory(_program([t]), mesh=mesh, sizes=SIZES, optimizer="adam", grads="param", mode="train")
    after = memory(_program([more]), mesh=mesh, sizes=SIZES, optimizer="adam", grads="param", mode="train")
    for part in ("params", "grads", "optimizer"):
        assert after.parts[part] <= before.parts[part]


MLPS = [
    "params W_in, W_out\nIn[B_X, D] * W_in[D, F] -> H[B_X, F]\nH[B_X, F] * W_out[F, D] -> Out[B_X, D]",  # DP
    "params W\nIn[B_X, D] * W[D_X, F] -> Out[B_X, F]",  # FSDP
    "params W\nIn[B, D] * W[D, F_X] -> Out[B, F_X]",  # model parallel, B unsharded
]


@settings(max_examples=max(6, settings.default.max_examples // 6))
@given(
    st.sampled_from(MLPS),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([256, 512, 1024]),
    st.sampled_from(["adam", "sgd", "adam-fp32"]),
    st.sampled_from(["none", "block"]),
    st.integers(2, 600),
)
def test_the_largest_batch_fits_and_the_next_does_not(program, x, width, optimizer, remat, budget):
    sizes = f"D={width},F={4 * width}"
    # B decides plans (FSDP gathers W above a batch): the memory is a formula per interval of B, and the
    # smallest batch's interval comes first
    pieces = piecewise(
        lambda: memory(program, mesh=f"X={x}", sizes=sizes, optimizer=optimizer, remat=remat, mode="train")
    )
    base = pieces[0][1]
    fixed = int(base.total.subs({s: 0 for s in base.total.free_symbols}))
    chip = chip_from_text(f"base=tpu-v5e,hbm={fixed + budget * width * 8}")
    report = memory(  # made at a batch: largest plans again with B free
        program, mesh=f"X={x}", sizes=f"{sizes},B=64", hw=chip, optimizer=optimizer, remat=remat, mode="train"
    )
    b = int(largest(report, "B").result)
    group = shard_group(report, "B")
    assert b % group == 0
    if b:
        assert memory(
            program,
            mesh=f"X={x}",
            sizes=f"{sizes},B={b}",
            hw=chip,
            optimizer=optimizer,
            remat=remat,
            mode="train",
        ).fits
    assert not memory(
        program,
        mesh=f"X={x}",
        sizes=f"{sizes},B={b + group}",
        hw=chip,
        optimizer=optimizer,
        remat=remat,
        mode="train",
    ).fits
    try:  # B + 1: too big, or not a multiple of the axes that shard B
        assert not memory(
            program,
            mesh=f"X={x}",
            sizes=f"{sizes},B={b + 1}",
            hw=chip,
            optimizer=optimizer,
            remat=remat,
            mode="train",
        ).fits
    except IndivisibleDim:
        assert group > 1


@settings(max_examples=max(6, settings.default.max_examples // 6))
@given(
    st.sampled_from(MLPS),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([256, 512, 1024]),
    st.sampled_from(["adam", "sgd"]),
    st.sampled_from(["none", "block"]),
)
def test_fit_plans_each_interval_once_at_a_point_and_finds_the_symbolic_pieces(
    program, x, width, optimizer, remat
):
    # fit finds the intervals of B by planning at a point of each (the choices B decides made there), from the
    # interval of the first legal batch up: the same intervals and formulas as planning with B a symbol and
    # splitting at each choice it decides
    sizes = f"D={width},F={4 * width}"
    options = {"mesh": f"X={x}", "optimizer": optimizer, "remat": remat, "mode": "train", "hw": "tpu-v5e"}
    report = memory(program, sizes=f"{sizes},B=64", **options)
    group = shard_group(report, "B")
    found = _intervals(report, resized(report.model, {}, free=("B",)), "B", group)
    pieces = piecewise(lambda: memory(program, sizes=sizes, **options))
    assert found is not None and len(found) <= len(pieces)
    tail = pieces[len(pieces) - len(found) :]
    assert [interval_text("B", *f[2]) for f in found] == [w for w, _ in tail]
    assert [f[1] for f in found] == [sympy.expand(m.total) for _, m in tail]
    first = found[0][2]
    assert first[0] is None or first[0] < group  # the first interval holds the first legal batch
    assert first[1] is None or first[1] >= group
