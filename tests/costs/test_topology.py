"""Real slices (shardalg.costs.topology): each product's physical axes with sources, factorings into logical
axes, hops per torus axis, and the GPU network's levels with the book's collective costs derived from them."""

from __future__ import annotations

from dataclasses import replace

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from shardalg.algebra.mesh import Axis, Mesh
from shardalg.algebra.symbols import quantity
from shardalg.costs.hardware import Sourced, get
from shardalg.costs.hierarchy import hierarchical_parts
from shardalg.costs.plancost import collective_cost
from shardalg.costs.topology import NETWORKS, Network, _check_network, slice_mesh, slice_topology
from shardalg.errors import UsageError
from shardalg.notation.syntax import Dim, Op, Tensor

T_MIN, W_DCN, BETA = quantity("T_min"), quantity("W_dcn"), quantity("beta")
A = Tensor("A", (Dim("E", ("X",)), Dim("F")))


def _shape(name: str) -> list[tuple[str, int, str, bool]]:
    return [(a.name, a.size, a.kind, a.wraps) for a in slice_topology(name).axes]


# ---- each slice gives its mesh, with sources -------------------------------------------------------------
def test_v5p_8960_is_the_books_16x20x28_pod_with_wraparound_on_every_axis():
    t = slice_topology("v5p-8960")
    assert t.chip == "tpu-v5p" and t.devices == 8960
    assert _shape("v5p-8960") == [
        ("x", 16, "torus", True),
        ("y", 20, "torus", True),
        ("z", 28, "torus", True),
    ]
    assert [a.hops for a in t.axes] == [8, 10, 14]
    assert all("16x20x28" in a.source and "scaling-book/tpus" in a.source for a in t.axes)
    assert any("v5p-17920" in n for n in t.notes)  # Cloud's name counts TensorCores: said, not silent
    assert slice_mesh("v5p-8960") == Mesh(
        [Axis("x", 16, torus=(16,)), Axis("y", 20, torus=(20,)), Axis("z", 28, torus=(28,))]
    )


def test_v5e_256_is_one_16x16_pod():
    t = slice_topology("v5e-256")
    assert t.chip == "tpu-v5e"
    assert _shape("v5e-256") == [("x", 16, "torus", True), ("y", 16, "torus", True)]
    assert all("16x16 2D torus" in a.source for a in t.axes)


def test_v4_4096_is_the_16x16x16_superpod():
    t = slice_topology("v4-4096")
    assert t.chip == "tpu-v4p"
    assert _shape("v4-4096") == [(n, 16, "torus", True) for n in "xyz"]
    assert all("16x16x16 for TPU v4" in a.source for a in t.axes)
    assert any("v4-8192" in n for n in t.notes)


def test_h100_1024_is_the_dgx_superpod_node_leaf_and_spine():
    t = slice_topology("h100-1024")
    assert t.chip == "h100"
    assert _shape("h100-1024") == [
        ("gpu", 8, "nvlink", False),
        ("node", 32, "leaf", False),
        ("su", 4, "spine", False),
    ]
    levels = {lv.name: lv for lv in t.network.levels}
    assert (levels["node"].degree, levels["node"].switches, levels["node"].radix) == (8, 4, 64)
    assert (levels["leaf"].degree, levels["leaf"].switches, levels["leaf"].radix) == (32, 8, 64)
    assert (levels["spine"].degree, levels["spine"].switches, levels["spine"].radix) == (4, 16, 64)
    assert all("scaling-book/gpus" in lv.source and lv.link.source for lv in t.network.levels)
    # the book's table of collective bandwidths, D·W/(D − 1): 514 GB/s, 413 GB/s, 17.1 TB/s
    assert [round(lv.collective_bandwidth / 1e9, 1) for lv in t.network.levels] == [514.3, 412.9, 17066.7]


def test_slices_smaller_and_larger_than_a_pod():
    assert _shape("v5e-8") == [("x", 2, "torus", False), ("y", 4, "torus", False)]  # lines below 16
    assert _shape("v5p-4096") == [(n, 16, "torus", True) for n in "xyz"]
    assert _shape("v5e-512")[-1] == ("pod", 2, "dcn", False)
    assert _shape("h100-64") == [("gpu", 8, "nvlink", False), ("node", 8, "leaf", False)]
    assert _shape("h100-4") == [("gpu", 4, "nvlink", False)]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("v5p-1000", "no tpu-v5p slice has 1000 chips: the known counts are 4, 8, 32"),
        ("h100-2048", "no h100 slice has 2048 GPUs"),
        ("h100-12", "no h100 slice has 12 GPUs"),
        ("tpu9-8", "unknown slice 'tpu9-8'"),
        ("v5p", "unknown slice 'v5p'"),
        ("v5e-1", "a slice of 1 chip has no mesh axis to shard over"),
    ],
)
def test_unknown_slices_are_refused_with_what_there_is(name, message):
    with pytest.raises(UsageError, match=message):
        slice_topology(name)


# ---- factorings -------------------------------------------------------------------------------------------
def test_a_logical_axis_is_a_product_of_physical_axes():
    import shardalg as sa

    assert sa.slice_mesh("v5p-8960", "X=x*y,Y=z") == slice_mesh("v5p-8960", "X=x*y,Y=z")
    assert slice_mesh("v5p-8960", "X=x*y,Y=z") == Mesh(
        [Axis("X", 320, 2, torus=(16, 20)), Axis("Y", 28, torus=(28,))]
    )
    assert slice_mesh("v5p-8960", X="x*y", Y="z") == slice_mesh("v5p-8960", {"X": ("x", "y"), "Y": "z"})
    assert slice_mesh("h100-1024", "X=gpu*node*su") == Mesh([Axis("X", 1024, node=8, leaf=256)])
    assert slice_mesh("h100-1024", "X=node*su,Y=gpu") == Mesh([Axis("X", 128, node=1, leaf=32), Axis("Y", 8)])
    assert slice_mesh("v5e-512", "X=x*y,P=pod") == Mesh(
        [Axis("X", 256, 2, torus=(16, 16)), Axis("P", 2, dcn=True)]
    )


@pytest.mark.parametrize(
    ("factoring", "message"),
    [
        ("X=x*y", "the physical axes z of v5p-8960 are in no logical axis"),
        ("X=x*y,Y=y*z", "the physical axis y of v5p-8960 is in both X and Y"),
        ("X=x*w,Y=y*z", "the slice v5p-8960 has no physical axis 'w'"),
        ("X=x:(1)4,Y=y*z", "the factors of x=16 cover 4 of its 16 chips"),
        ("X x", "bad logical axis"),
        ("X=x*y*z:(1)4,Y=z:(2)7", "the factors of z=28 (z:(1)4, z:(2)7) overlap at pre-size 2"),
        ("X=x*y*z:(1)4", "the factors of z=28 cover 4 of its 28 chips"),
        ("X=x*y*z:(1)3,Y=z:(3)9", "z:(1)3 is not a factor of z=28"),
        ("X=x*y*z,Y=z:(1)4", "the physical axis z of v5p-8960 is in both X and Y"),
        ("X=x*y,Y=z:(1)2,Z=z:(4)7", "the factors of z=28 (z:(1)2, z:(4)7) leave a gap at pre-size 2"),
        ("X=x*y,Y=z-1", "'z-1' is neither"),
    ],
)
def test_bad_factorings_say_what_is_wrong(factoring, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        slice_mesh("v5p-8960", factoring)


def test_pods_over_dcn_are_their_own_logical_axis():
    with pytest.raises(UsageError, match="mixes pods over DCN with ICI axes"):
        slice_mesh("v5e-512", "X=x*pod,Y=y")


# ---- latency follows the topology: hops per torus axis -------------------------------------------------------
def test_a_collective_over_a_product_axis_crosses_each_side_not_half_its_chips():
    sizes = {"E": 320 * 4, "F": 1024}
    sliced = collective_cost(
        Op.ALL_GATHER, A, ("X",), slice_mesh("v5p-8960", "X=x*y,Y=z"), sizes, hw="tpu-v5p"
    )
    flat = collective_cost(Op.ALL_GATHER, A, ("X",), Mesh("X=320*2,Y=28"), sizes, hw="tpu-v5p")
    lat_sliced, lat_flat = sliced.parts[0][0].sympy(), flat.parts[0][0].sympy()
    assert lat_sliced == 18 * T_MIN  # 16/2 + 20/2
    assert lat_flat == 160 * T_MIN  # 320/2 on one ring
    assert sliced.parts[0][1].sympy() == flat.parts[0][1].sympy()  # the same links, 2 of them


def test_a_side_without_wraparound_is_a_line_of_side_minus_one_hops():
    sizes = {"E": 8 * 4, "F": 1024}
    c = collective_cost(Op.ALL_GATHER, A, ("X",), slice_mesh("v5e-8", "X=x*y"), sizes, hw="tpu-v5e")
    assert c.parts[0][0].sympy() == (1 + 3) * T_MIN


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from([4, 8, 12, 16, 20, 28]), min_size=1, max_size=3))
def test_hops_of_a_product_axis_are_the_sum_of_its_sides_halves(sides):
    size = 1
    for s in sides:
        size *= s
    mesh = Mesh([Axis("X", size, len(sides), torus=tuple(sides))])
    got = collective_cost(Op.ALL_GATHER, A, ("X",), mesh, {"E": size, "F": 8}, hw="tpu-v5p")
    hops = sympy.simplify(got.parts[0][0].sympy() / T_MIN)
    assert hops == sum(s // 2 for s in sides) <= size // 2


def test_an_axis_over_dcn_runs_at_w_dcn_without_hops():
    c = collective_cost(
        Op.ALL_GATHER,
        Tensor("A", (Dim("E", ("P",)), Dim("F"))),
        ("P",),
        slice_mesh("v5e-512", "X=x*y,P=pod"),
        {"E": 64, "F": 64},
        hw="tpu-v5e",
    )
    ((lat, bw),) = c.parts
    assert lat.sympy() == 0 and bw.sympy() == 2 * 64 * 64 / W_DCN


# ---- the GPU chapter's collective costs from the levels --------------------------------------------------------
def test_allgather_over_the_whole_superpod_is_bound_by_the_leaf_level():
    v = sympy.Symbol("V", positive=True)
    ((lat, bw),) = hierarchical_parts("alpha-beta", Op.ALL_GATHER, v, [(sympy.Integer(1024), 8, 256)])
    h100 = get("h100").values()
    assert (
        sympy.simplify(
            bw - sympy.Max(v * 7 / (8 * BETA), v * 31 / (32 * 8 * W_DCN), v * 3 / (4 * 256 * W_DCN))
        )
        == 0
    )
    assert float((bw / v).subs(h100)) == pytest.approx(31 / (32 * 400e9))  # the book: B / 413 GB/s
    assert lat == quantity("alpha") * (7 + 31 + 3)


def test_alltoall_across_nodes_is_the_chapters_b_m_minus_1_over_m_squared():
    v = sympy.Symbol("V", positive=True)
    ((lat, bw),) = hierarchical_parts("alpha-beta", Op.ALL_TO_ALL, v, [(sympy.Integer(16), 8, None)])
    node_egress = 8 * W_DCN
    assert sympy.simplify(bw - sympy.Max(v * 7 / (64 * 2 * BETA), v * 1 / (4 * node_egress))) == 0
    assert float((bw / v).subs(get("h100").values())) == pytest.approx((2 - 1) / (2**2 * 400e9))


def test_the_levels_are_checked_to_be_the_full_bisection_tree_the_formula_prices():
    net = NETWORKS["h100"]
    _check_network(get("h100"), net)
    leaf = replace(net.levels[1], link=Sourced(2e11, "a 2:1 oversubscribed leaf"))
    with pytest.raises(UsageError, match="oversubscribed"):
        _check_network(get("h100"), Network((net.levels[0], leaf, net.levels[2]), "test"))


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from(["v5p-8960", "v4-4096", "v5e-256", "v5e-8", "v5e-128", "v5p-32"]),
    st.sampled_from([Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALL_REDUCE, Op.ALL_TO_ALL, Op.PERMUTE]),
    st.booleans(),
)
def test_a_product_axis_costs_what_its_physical_axes_cost_together(name, op, exact):
    # the logical axis X = x*y is priced as the group (x, y) of the physical mesh: hops, rates, AllToAll's
    # worst side and a permute's path side by side (lines and rings alike, mixed on v5e 8x16)
    topology = slice_topology(name)
    first, second = (a.name for a in topology.axes[:2])
    rest = ",".join(f"{a.name.upper()}={a.name}" for a in topology.axes[2:])
    logical = slice_mesh(name, f"X={first}*{second}" + (f",{rest}" if rest else ""))
    n = logical["X"].size
    sizes = {"E": n * 4, "F": 64}
    on_logical = collective_cost(
        op, Tensor("A", (Dim("E", ("X",)), Dim("F"))), ("X",), logical, sizes, hw=topology.chip, exact=exact
    )
    on_physical = collective_cost(
        op,
        Tensor("A", (Dim("E", (first, second)), Dim("F"))),
        (first, second),
        slice_mesh(name),
        sizes,
        hw=topology.chip,
        exact=exact,
    )
    assert sympy.simplify(on_logical.total() - on_physical.total()) == 0


def test_the_gpu_chapters_pop_quizzes_on_the_levels():
    # Pop Quiz 1: AllGather(bf16[B_X, F]) in one 8xH100 node, B=1024, F=16,384: "more precisely, 65us"
    node = slice_mesh("h100-8", "X=gpu")
    t = Tensor("A", (Dim("B", ("X",)), Dim("F")))
    c = collective_cost(Op.ALL_GATHER, t, ("X",), node, {"B": 1024, "F": 16384}, hw="h100", latency=False)
    assert float(c.total(latency=False).subs(get("h100").values())) == pytest.approx(
        2 * 1024 * 16384 * 7 / (8 * 450e9)
    )
    # Pop Quiz 3: AllGather_X(bf16[D_X, F_Y]) over one SU with Y (<= 8) the inner axis: 2·D·F·(32−1)/(32·400e9)
    su = slice_mesh("h100-256", "X=node,Y=gpu")
    t = Tensor("W", (Dim("D", ("X",)), Dim("F", ("Y",))))
    c = collective_cost(Op.ALL_GATHER, t, ("X",), su, {"D": 8192, "F": 32768}, hw="h100")
    bandwidth = c.parts[0][1].sympy().subs(get("h100").values())
    assert float(bandwidth) == pytest.approx(2 * 8192 * 32768 * 31 / (32 * 400e9))


def test_a_shift_along_several_torus_axes_is_refused_not_miscounted():
    mesh = slice_mesh("v5p-8960", "X=x*y,Y=z")
    t = Tensor("A", (Dim("E", ("X",)), Dim("F")))
    with pytest.raises(UsageError, match="a Shift along X, an axis made of 2 torus axes"):
        collective_cost(Op.SHIFT, t, ("X",), mesh, {"E": 320, "F": 8}, hw="tpu-v5p", offset=1)
    one = collective_cost(
        Op.SHIFT,
        Tensor("A", (Dim("E", ("Y",)), Dim("F"))),
        ("Y",),
        mesh,
        {"E": 28, "F": 8},
        hw="tpu-v5p",
        offset=1,
    )
    assert one.parts[0][0].sympy() == quantity("T_min")  # one hop along z
