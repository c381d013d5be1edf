"""Factors of one physical torus axis in a slice's logical mesh (``--mesh X=x*y*z:(4)7,Y=z:(1)4``): each is
priced as what it is on the wires (shardalg.costs.topology, shardalg.costs.stepcost). The property test lays
the groups of a factor out on the physical side chip by chip, walks their steps link by link and counts the
groups each link carries; the price must be that walk's, not the formula's own restatement."""

from __future__ import annotations

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from shardalg.algebra.mesh import Axis, Mesh
from shardalg.algebra.symbols import quantity
from shardalg.costs.hardware import get
from shardalg.costs.plancost import collective_cost
from shardalg.costs.topology import slice_mesh, slice_topology
from shardalg.errors import UsageError
from shardalg.notation.syntax import Dim, Op, Tensor

T_MIN, W_ICI = quantity("T_min"), quantity("W_ici")
BF16 = 2


def _gather(mesh: Mesh, axis: str, e: int, f: int = 1024):
    """(latency in T_min, bandwidth term) of an AllGather of A[E_axis, F] over ``axis`` on v5p."""
    a = Tensor("A", (Dim("E", (axis,)), Dim("F")))
    c = collective_cost(Op.ALL_GATHER, a, (axis,), mesh, {"E": e, "F": f}, hw="tpu-v5p")
    (latency, bandwidth), *_ = c.parts
    return sympy.simplify(latency.sympy() / T_MIN), sympy.simplify(bandwidth.sympy())


def _walk(side: int, wraps: bool, pre: int, size: int) -> tuple[int, int, bool]:
    """Lay the factor ``(pre)size`` of a side of ``side`` chips out chip by chip (row-major: a chip's
    coordinate is major * size * stride + j * stride + minor) and walk each group's ring or line: (its
    latency in link hops, the most groups any one link carries, whether it closed into a ring)."""
    stride = side // (pre * size)
    groups = [
        [a * size * stride + j * stride + b for j in range(size)] for a in range(pre) for b in range(stride)
    ]
    ring = wraps and groups[0][-1] + stride == side  # its last chip reaches its first over the wraparound
    load = [0] * side  # link i joins chip i and chip i + 1 (mod side)
    longest = 0
    for g in groups:
        edges = list(zip(g, g[1:], strict=False)) + ([(g[-1], g[0] + side)] if ring else [])
        for p, q in edges:
            longest = max(longest, q - p)
            for link in range(p, q):
                load[link % side] += 1
    steps = size // 2 if ring else size - 1  # both ways round a ring; down a line
    return steps * longest, max(load), ring


_FACTORS = [
    (side, pre, size)
    for side in (4, 8, 12, 16, 20, 28)
    for pre in range(1, side + 1)
    for size in range(2, side)
    if side % (pre * size) == 0
]


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(_FACTORS), st.sampled_from(["tpu-v5p", "tpu-v5e"]))
def test_a_factor_of_a_torus_axis_costs_what_its_groups_walk_on_the_links(factor, chip):
    # v5p wraps every side of a multiple of 4, v5e only 16: a side that does not wrap makes every factor a line
    side, pre, size = factor
    mesh = Mesh([Axis("X", size, 1, torus=(size,), strides=((side // (pre * size), side),))])
    hops, load, ring = _walk(side, get(chip).wraps(side), pre, size)
    a = Tensor("A", (Dim("E", ("X",)), Dim("F")))
    c = collective_cost(Op.ALL_GATHER, a, ("X",), mesh, {"E": size * 8, "F": 1024}, hw=chip)
    (latency, bandwidth), *_ = c.parts
    v = size * 8 * 1024 * BF16
    assert sympy.simplify(latency.sympy() / T_MIN) == hops
    # a ring moves V at the link's W_ici; a line one way, (n-1)/n of V at W_ici/2; both over the shared links
    alone = sympy.Integer(v) / W_ICI if ring else sympy.Rational(v * (size - 1), size) / (W_ICI / 2)
    assert sympy.simplify(bandwidth.sympy() - alone * load) == 0


def test_z_1_4_and_z_4_2_of_a_4x4x8_slice():
    # z = 8 wraps; z:(1)4 is its major factor: chips 2 apart, a ring of 4 (the last step takes the wraparound),
    # 2 steps of 2 links, each link carrying the two interleaved groups; z:(4)2 its minor: neighbours, a line
    t = slice_topology("v5p-128")
    layout = t.layout("X=x*y*z:(4)2,Y=z:(1)4")
    assert [(a.name, a.size) for a in t.axes] == [("x", 4), ("y", 4), ("z", 8)]
    assert layout.mesh == Mesh(
        [
            Axis("X", 32, 3, torus=(4, 4, 2), strides=((1, 4), (1, 4), (1, 8))),
            Axis("Y", 4, torus=(4,), strides=((2, 8),)),
        ]
    )
    assert layout.hops("Y") == (("z:(1)4", 4),)
    assert layout.hops("X") == (("x", 2), ("y", 2), ("z:(4)2", 1))
    v = 32 * 1024 * BF16
    assert _gather(layout.mesh, "Y", 32) == (4, sympy.Integer(v) / (W_ICI / 2))
    # X: two rings (W_ici into each chip) and a line of two (W_ici/2 into each end): every chip receives
    # 31/32 of V over those links (the line's folded rate, W_ici, would price it at V/(3·W_ici), too fast)
    assert _gather(layout.mesh, "X", 32) == (
        2 + 2 + 1,
        sympy.Rational(31 * v, 32) / (W_ICI + W_ICI + W_ICI / 2),
    )
    seconds = _gather(layout.mesh, "Y", 32)[1].subs(get("tpu-v5p").values())
    assert float(seconds) == pytest.approx(v / (get("tpu-v5p").ici_bandwidth.value / 2))


def test_the_factors_of_one_axis_in_one_logical_axis_are_the_axis_itself():
    whole = slice_mesh("v5p-128", "X=x*y,Y=z")
    assert slice_mesh("v5p-128", "X=x*y,Y=z:(1)4*z:(4)2") == whole
    assert slice_mesh("v5p-128", "X=x*y,Y=z:(4)2*z:(1)4") == whole
    split = slice_topology("v5p-128").layout("X=x*y*z:(1)2,Y=z:(2)2*z:(4)2")
    assert split.hops("Y") == (("z:(2)4", 3),)  # a contiguous line of 4: 3 hops


def test_whole_axes_carry_no_strides_and_price_as_before():
    for name, factoring in (("v5p-8960", "X=x*y,Y=z"), ("v5p-128", "X=x,Y=y*z"), ("v5e-256", "X=x*y")):
        assert all(not a.strides for a in slice_mesh(name, factoring))
    assert slice_mesh("v5p-8960", "X=x*y,Y=z") == Mesh(
        [Axis("X", 320, 2, torus=(16, 20)), Axis("Y", 28, torus=(28,))]
    )


def test_the_priced_latency_is_the_layouts_hop_count():
    t = slice_topology("v5p-8960")
    for factoring in (
        "X=x*y*z:(4)7,Y=z:(1)4",
        "X=x*y*z:(1)7,Y=z:(7)4",
        "S=x:(8)2,X=x:(1)8*y:(5)4,Z=y:(1)5*z:(1)7,Y=z:(7)4",
    ):
        layout = t.layout(factoring)
        for a in layout.mesh:
            assert _gather(layout.mesh, a.name, a.size * 4)[0] == sum(h for _, h in layout.hops(a.name))


def test_the_books_tp_factor_contiguous_or_strided_on_the_pod():
    # TP of 4 on z = 28: z:(7)4 is 4 neighbours (a line: 3 hops, no sharing); z:(1)4 is 4 chips 7 apart
    # (a ring: 2 steps of 7 links = 14 hops, and 7 groups share each link)
    t = slice_topology("v5p-8960")
    near = t.layout("X=x*y*z:(1)7,Y=z:(7)4")
    far = t.layout("X=x*y*z:(4)7,Y=z:(1)4")
    v = 4 * 4 * 1024 * BF16
    assert _gather(near.mesh, "Y", 16) == (3, sympy.Rational(v * 3, 4) / (W_ICI / 2))
    assert _gather(far.mesh, "Y", 16) == (14, sympy.Integer(v) * 7 / W_ICI)


def test_factors_of_pods_or_gpu_levels_are_refused():
    with pytest.raises(UsageError, match=r"factors of pods over DCN \(pod=2\) are not modelled"):
        slice_mesh("v5e-512", "X=x*y,P=pod:(1)2")
    with pytest.raises(UsageError, match="factors of a GPU network level"):
        slice_mesh("h100-1024", "X=gpu:(1)4,Y=gpu:(4)2*node*su")


def test_a_shift_along_a_strided_factor_is_refused_and_along_a_contiguous_one_priced():
    mesh = slice_mesh("v5p-8960", "X=x*y*z:(4)7,Y=z:(1)4")
    t = Tensor("A", (Dim("E", ("Y",)), Dim("F")))
    with pytest.raises(UsageError, match="a Shift along Y, a strided factor of a torus axis"):
        collective_cost(Op.SHIFT, t, ("Y",), mesh, {"E": 4, "F": 8}, hw="tpu-v5p", offset=1)
    line = slice_mesh("v5p-8960", "X=x*y*z:(1)7,Y=z:(7)4")
    one = collective_cost(Op.SHIFT, t, ("Y",), line, {"E": 4, "F": 8}, hw="tpu-v5p", offset=1)
    assert one.parts[0][0].sympy() == 3 * T_MIN  # a line of 4: the carry from the last to the first is 3 hops


def test_the_layout_says_how_each_factor_is_priced_in_text_and_json():
    layout = slice_topology("v5p-8960").layout("X=x*y*z:(4)7,Y=z:(1)4")
    assert layout.lines()[1] == (
        "Y = z:(1)4 (4 chips, 1 link, hops z:(1)4 14 = 14; z:(1)4 a ring of 4, 7 links a step, each link "
        "shared by 7 groups (W_ici/7))"
    )
    assert layout.lines()[0].endswith("; z:(4)7 a line of 7 neighbours)")
    axes = {a["name"]: a for a in layout.to_json()["axes"]}  # type: ignore[union-attr]
    assert axes["Y"]["factors"] == [
        {
            "piece": "z:(1)4",
            "ring": True,
            "stride": 7,
            "shared_by": 7,
            "shape": layout.factors("Y")[0]["shape"],
        }
    ]
    assert slice_topology("v5p-8960").layout("X=x*y,Y=z").factors("Y") == []
